"""API keys bound to tenants and roles: one interface, kept in SQLite under the home
(:mod:`~fabric.serve.keys.store`) or in the replicas' shared PostgreSQL database (:mod:`~fabric.serve.keys.postgres`).
"""
