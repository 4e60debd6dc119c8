"""State shared by replicas of ``fabric serve`` behind one address, in PostgreSQL (``FABRIC_STATE_URL``).

:mod:`fabric.state.postgres` (why PostgreSQL, the schema, the pools), :mod:`fabric.state.tasks` (each tenant's
task queue), :mod:`fabric.state.keys` (API keys), :mod:`fabric.state.shared` (rate buckets, cursor secret).
Without ``FABRIC_STATE_URL`` the service keeps all of it under its home (SQLite and files, one process).
"""

__all__: list[str] = []
