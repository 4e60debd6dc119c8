"""The service: HTTP (aiohttp) and MCP doors over one engine per tenant, keys and roles, request limits and
admission, ingestion tasks, replicas' shared state and worker processes.

Imports every floor below it (query, ingest and what they stand on); never eval or the CLI.
"""
