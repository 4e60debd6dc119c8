"""The embedded vector backend: exact cosine search over vectors in SQLite (``lane.py`` declares it), its
writer, the in-memory index and the HNSW accelerator for large unfiltered searches.
"""
