"""State shared by replicas of ``fabric serve`` behind one address (``FABRIC_STATE_URL``): in PostgreSQL for
replicas on several hosts, or in SQLite files and file locks in one folder for replicas on one host
(``sqlite:///<folder>``; what ``fabric serve --workers N`` gives its workers).

:mod:`fabric.serve.state.base` (what either offers), :mod:`fabric.serve.state.postgres` (why PostgreSQL, the schema, the
pools), :mod:`fabric.serve.tasks.postgres` (each tenant's task queue), :mod:`fabric.serve.keys.postgres` (API keys),
:mod:`fabric.serve.state.shared` (rate buckets, cursor secret), :mod:`fabric.serve.state.local` (all of it on one host).
Without ``FABRIC_STATE_URL`` the service keeps all of it under its home (SQLite and files, one process).
"""

__all__: list[str] = []
