"""Ingestion: load a source, chunk it with stable ids, embed, and write every store, idempotently.

``source ──► load ──► chunk ──► embed ──► write (keyword, vector, graph)`` with a ledger that records each
chunk's content hash and the stores holding it, plus an audit history of creates, updates and deletes.

Public pieces: :class:`~fabric.core.chunks.Chunk` and :class:`~fabric.core.chunks.StoreWriter` (the contract
every store writer implements), :mod:`fabric.ingest.writers` (backend → writer), the loaders, the ledger and
the pipeline. Nothing here does I/O at import time.

Floor: imports the core, settings, net and embed floors, the lanes (their writers, through the registry) and
:mod:`fusion`'s text helpers; never query, serve, eval or the CLI.
"""

from fabric.core.chunks import Chunk, StoreWriter

__all__ = ["Chunk", "StoreWriter"]
