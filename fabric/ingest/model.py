"""Re-export of :mod:`fabric.writers.model` (the chunk and store-writer contract moved there, a leaf module that
lanes and ingestion both import without importing each other)."""

from fabric.writers.model import Chunk, StoreWriter, from_stored_simhash, to_stored_simhash

__all__ = ["Chunk", "StoreWriter", "from_stored_simhash", "to_stored_simhash"]
