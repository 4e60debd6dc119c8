"""LanceDB vector backend: an embedded table per embedding model with an ANN index (the ``lancedb`` extra)."""
