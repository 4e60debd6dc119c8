"""One stored entry by id, read from the embedded SQLite stores."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from fabric.serve.mcp.entries import read_entry
from tests.support.ingested import engine


async def test_reads_an_ingested_entry(fabric_home: Path) -> None:
    eng = engine(fabric_home)  # not opened: the stores are read directly
    found = await read_entry(eng, "e-103")
    assert found["content"] == "Rollback within 5 min if the error rate exceeds 1%."
    assert (found["topic"], found["doc_id"], found["trust"]) == ("release rollback", "e-103", "untrusted")


async def test_unknown_entry(tmp_path: Path, fabric_home: Path) -> None:
    with pytest.raises(ResourceNotFoundError, match="unknown entry 'nope'"):
        await read_entry(engine(fabric_home), "nope")
    with pytest.raises(ResourceNotFoundError):  # an empty home: no store files at all
        await read_entry(engine(tmp_path / "empty"), "e-1")
