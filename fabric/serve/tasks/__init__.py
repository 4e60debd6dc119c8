"""Ingestion tasks of the service: the validated submission, the durable task record and queue, one worker
per tenant, and the same store shared by replicas (SQLite or PostgreSQL).
"""
