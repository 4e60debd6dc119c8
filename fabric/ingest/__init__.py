"""Ingestion: load a source, chunk it with stable ids, embed, and write every store, idempotently.

``source ──► load ──► chunk ──► embed ──► write (keyword, vector, graph)`` with a ledger that records each
chunk's content hash and the stores holding it, plus an audit history of creates, updates and deletes.

Public pieces: :class:`~fabric.ingest.model.Chunk` and :class:`~fabric.ingest.model.StoreWriter` (the contract
every store writer implements), :mod:`fabric.ingest.writers` (backend → writer), the loaders, the ledger and
the pipeline. Nothing here does I/O at import time.
"""

from fabric.ingest.model import Chunk, StoreWriter

__all__ = ["Chunk", "StoreWriter"]
