"""Embedding privacy (the API contract, edge case 1): which sources' text may be sent to a remote embedder.

Remote embedding is off unless configured: the default embedder (``minilm``) runs in this process, and the only
remote backend (``openai``: any HTTP embeddings endpoint) needs ``[embeddings] backend = "openai"`` and ``url``.
An HTTP endpoint counts as remote even on ``localhost``: the fabric cannot know where it forwards the text.

``[embeddings] private_sources`` lists glob patterns (``fnmatch``, matched against the source's resolved absolute
path). The text of a source that matches never leaves the machine: with a remote embedder its chunks are not
embedded at all (they are written to the lexical and graph stores only, and the ingest report says so); with a
local embedder nothing changes (local embedding keeps the text here). Patterns match files a CLI ``fabric
ingest`` reads, ``{"path": ...}`` submissions, and the spooled entry lists of ``POST /v1/ingest`` and the MCP
``ingest`` tool (``*/spool/*`` matches every tenant's; ``*/tenants/acme/spool/*`` one tenant's).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from pathlib import Path

from fabric.core.models import Embedder

__all__ = ["WITHHELD", "is_private", "is_remote"]

WITHHELD = "withheld: private source, never sent to the remote embedder (lexical and graph stores only)"
"""The ingest report's ``embeddings`` status for a private source under a remote embedder."""


def is_remote(embedder: Embedder | None) -> bool:
    """Whether ``embedder`` sends text off the machine (its ``remote`` flag; a cache forwards its model's)."""
    return embedder is not None and bool(getattr(embedder, "remote", False))


def is_private(source: Path, patterns: Sequence[str]) -> bool:
    """Whether ``source`` (a file or folder being ingested) matches one of the ``private_sources`` patterns.

    A folder also matches when a pattern names a file inside it, so a folder ingest never leaks a private file.
    """
    if not patterns:
        return False
    resolved = source.resolve()
    path = resolved.as_posix()
    if any(fnmatch.fnmatchcase(path, p) for p in patterns):
        return True
    if resolved.is_dir():
        return any(fnmatch.fnmatchcase(f.as_posix(), p) for f in resolved.rglob("*") for p in patterns)
    return False
