"""Tests for fabric.ingest.ledger on a real SQLite file: write-ahead states, the audit history, stored chunks."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabric.ingest.ledger import LEDGER_FILE, Ledger, stored_chunks
from fabric.ingest.provenance import Provenance

OP = Provenance("operator")
"""Who the ledger rows of these tests were written by."""


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = Ledger(tmp_path / LEDGER_FILE)
    yield led
    led.close()


class TestWriteAhead:
    def test_pending_upsert_is_recorded_before_any_store_write(self, ledger: Ledger) -> None:
        """``mark_pending`` records the chunk as a pending upsert with its new hash and no stores yet."""
        ledger.mark_pending([("c1", "d1", "src", "h1", OP)], [])
        entry = ledger.entries("src")["c1"]
        assert (entry.state, entry.op, entry.content_hash, entry.stores) == ("pending", "upsert", "h1", frozenset())

    def test_lookup_finds_ids_whatever_their_source(self, ledger: Ledger) -> None:
        """``lookup`` returns the entries of known ids across sources (and past 500 ids) and skips unknown ones."""
        ledger.mark_pending([(f"c{i}", "d", f"src{i % 2}", "h", OP) for i in range(600)], [])
        found = ledger.lookup([f"c{i}" for i in range(0, 600, 3)] + ["nope"])
        assert len(found) == 200
        assert (found["c3"].source, found["c0"].source) == ("src1", "src0")

    def test_done_records_the_stores_that_succeeded(self, ledger: Ledger) -> None:
        """``mark_done`` marks the chunk done with the stores holding it."""
        ledger.mark_pending([("c1", "d1", "src", "h1", OP)], [])
        assert ledger.mark_done([("c1", "d1", "src", "h1", ["vector", "keyword", "vector"], "create")]) == 1
        entry = ledger.entries("src")["c1"]
        assert entry.state == "done"
        assert entry.stores == frozenset({"keyword", "vector"})

    def test_pending_delete_marks_an_existing_chunk(self, ledger: Ledger) -> None:
        """A chunk about to be deleted is marked pending with op ``delete``, so a crash is repaired."""
        ledger.mark_pending([("c1", "d1", "src", "h1", OP)], [])
        ledger.mark_done([("c1", "d1", "src", "h1", ["keyword"], "create")])
        ledger.mark_pending([], ["c1"])
        entry = ledger.entries("src")["c1"]
        assert (entry.state, entry.op) == ("pending", "delete")

    def test_entries_are_per_source(self, ledger: Ledger) -> None:
        """``entries`` returns only the chunks of the source asked for."""
        ledger.mark_pending([("a1", "d", "a", "h", OP), ("b1", "d", "b", "h", OP)], [])
        assert set(ledger.entries("a")) == {"a1"}


class TestRemoveAndHistory:
    def test_remove_forgets_the_chunk_and_records_the_delete(self, ledger: Ledger) -> None:
        """Removed chunks leave the ledger; the history keeps a ``delete`` row naming the stores."""
        ledger.mark_pending([("c1", "d1", "src", "h1", OP)], [])
        ledger.mark_done([("c1", "d1", "src", "h1", ["keyword"], "create")])
        entry = ledger.entries("src")["c1"]
        assert ledger.remove([entry], ["keyword"]) == 1
        assert ledger.entries("src") == {}
        actions = [(row["action"], row["stores"]) for row in ledger.history("c1")]
        assert actions == [("create", '["keyword"]'), ("delete", '["keyword"]')]

    def test_history_is_oldest_first_and_filterable(self, ledger: Ledger) -> None:
        """Every done write is appended; ``history(id)`` keeps one chunk's rows in order."""
        ledger.mark_pending([("c1", "d1", "s", "h1", OP), ("c2", "d2", "s", "h2", OP)], [])
        ledger.mark_done([("c1", "d1", "s", "h1", ["k"], "create"), ("c2", "d2", "s", "h2", ["k"], "create")])
        ledger.mark_pending([("c1", "d1", "s", "h3", OP)], [])
        ledger.mark_done([("c1", "d1", "s", "h3", ["k"], "update")])
        assert [r["action"] for r in ledger.history()] == ["create", "create", "update"]
        assert [r["content_hash"] for r in ledger.history("c1")] == ["h1", "h3"]


class TestStoredChunks:
    def test_missing_home_counts_zero_and_creates_nothing(self, tmp_path: Path) -> None:
        """A home that does not exist holds nothing, and asking does not create it."""
        home = tmp_path / "absent"
        assert stored_chunks(home) == 0
        assert not home.exists()

    def test_counts_done_upserts_only(self, tmp_path: Path) -> None:
        """Pending writes and pending deletes do not count as stored chunks."""
        led = Ledger(tmp_path / LEDGER_FILE)
        led.mark_pending([("c1", "d", "s", "h", OP), ("c2", "d", "s", "h", OP), ("c3", "d", "s", "h", OP)], [])
        led.mark_done([("c1", "d", "s", "h", ["k"], "create"), ("c2", "d", "s", "h", ["k"], "create")])
        led.mark_pending([], ["c2"])
        led.close()
        assert stored_chunks(tmp_path) == 1

    def test_a_file_that_is_not_a_ledger_counts_zero(self, tmp_path: Path) -> None:
        """A corrupt or foreign file is read as an empty home, not a traceback."""
        (tmp_path / LEDGER_FILE).write_bytes(b"not a database")
        assert stored_chunks(tmp_path) == 0


class TestThreads:
    def test_close_waits_for_the_call_in_flight(self, tmp_path: Path) -> None:
        """An ingest cancelled at shutdown closes its ledger while a worker thread may still be writing it: the
        close waits for that write (closing the connection under it would crash the interpreter), which lands."""
        led = Ledger(tmp_path / LEDGER_FILE)
        blocker = sqlite3.connect(tmp_path / LEDGER_FILE, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # the ledger's write now waits in SQLite's busy handler
        entered = threading.Event()
        led.conn.set_trace_callback(lambda _sql: entered.set())  # the write's first statement has started
        writing = threading.Thread(target=led.mark_pending, args=([("c1", "d", "s", "h", OP)], []))
        writing.start()
        assert entered.wait(30.0)
        closing = threading.Thread(target=led.close)
        closing.start()
        closing.join(0.2)
        assert writing.is_alive()
        assert closing.is_alive()
        blocker.execute("COMMIT")
        writing.join()
        closing.join()
        blocker.close()
        again = Ledger(tmp_path / LEDGER_FILE)
        assert [e.state for e in again.entries("s").values()] == ["pending"]
        again.close()
