"""The embedded keyword backend: SQLite FTS5 (``lane.py`` declares it), its writer, and the in-memory copy of
its postings that ranks most queries without FTS5.
"""
