"""The HTTP ingestion benchmark's entry generator (the benchmark itself runs a server: figures, not tests)."""

from __future__ import annotations

import bench.ingest_http as mod
from bench.ingest_http import make_entries


class TestMakeEntries:
    def test_entries_are_distinct_and_deterministic(self) -> None:
        """Every entry has its own id and text, and a seed always gives the same list."""
        entries = make_entries(500)
        assert len({e["id"] for e in entries}) == len({e["text"] for e in entries}) == 500
        assert make_entries(500) == entries

    def test_entries_are_short(self) -> None:
        """Entries are one or two sentences, like knowledge-base entries."""
        assert all(1 <= e["text"].count(".") <= 3 and len(e["text"]) < 200 for e in make_entries(200))


def test_public_api() -> None:
    """The module follows the bench protocol and exports its generator."""
    assert set(mod.__all__) == {"add_arguments", "make_entries", "run"}
