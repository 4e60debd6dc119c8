"""Named crash points for the crash tests: ``FABRIC_CRASH_AT=<point>`` makes the process kill itself with SIGKILL
when it reaches that point, as ``kill -9`` from outside would, but at a chosen moment of an ingest.

Points (:data:`POINTS`): ``spool`` (an entry list is spooled, its task not yet recorded), ``embed`` (the first batch
is embedded), ``write.<store>`` (that store committed its first batch; the others may or may not have),
``ledger`` (every store is written, the ledger not yet told). The variable is read when a point is reached, never
at import; unset (the normal case) a point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

__all__ = ["ENV", "POINTS", "crash_point"]

ENV = "FABRIC_CRASH_AT"
"""The environment variable naming the point to die at."""

POINTS = ("spool", "embed", "write.sqlite_fts", "write.numpy_flat", "write.sqlite_graph", "ledger")
"""The points the ingestion path reaches (stores are named by their ledger name)."""


def crash_point(name: str) -> None:
    """Kill this process with SIGKILL when ``FABRIC_CRASH_AT`` names ``name``."""
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
