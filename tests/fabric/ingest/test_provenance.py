"""Tests for fabric.ingest.provenance: who may replace or delete what, held by the pipeline and deletes whatever the
door, with the ledger's provenance columns and tombstones (a ledger from before them included)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import fabric.ingest.provenance as mod
from fabric.core.chunks import StoreWriter
from fabric.core.models import LaneKind
from fabric.ingest.audit import Actor, acting_as
from fabric.ingest.deletion import delete_entries
from fabric.ingest.ledger import LEDGER_FILE, Ledger
from fabric.ingest.pipeline import ingest
from fabric.ingest.provenance import Provenance, ProvenanceError, check_writable
from lanes.keyword.sqlite_fts.writer import SqliteFtsWriter
from tests.support.embedded import resources, spec

WRITER = Actor(tenant="acme", key_id="0123456789ab", via="api", role="writer")
ADMIN = Actor(tenant="acme", key_id="ba9876543210", via="api", role="admin")


def _jsonl(path: Path, *rows: dict[str, str]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
async def writers(tmp_path: Path) -> AsyncIterator[list[StoreWriter]]:
    """The keyword store of ``tmp_path`` (one store is enough: the rule is checked before any store is written)."""
    out: list[StoreWriter] = [SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path))]
    yield out
    for w in out:
        await w.aclose()


def _held(home: Path, *ids: str) -> dict[str, Provenance]:
    ledger = Ledger(home / LEDGER_FILE)
    try:
        return ledger.provenance(list(ids))
    finally:
        ledger.close()


def _texts(home: Path) -> dict[str, str]:
    with sqlite3.connect(home / "keyword.sqlite") as conn:
        return dict(conn.execute("SELECT id, text FROM chunks").fetchall())


class TestRule:
    @pytest.mark.parametrize(
        ("prov", "protected"),
        [
            (Provenance("writer"), False),
            (Provenance("writer", trusted=True), True),
            (Provenance("admin"), True),
            (Provenance("operator"), True),
            (Provenance(None), True),
        ],
    )
    def test_what_is_protected(self, prov: Provenance, protected: bool) -> None:
        """Only untrusted content a writer key wrote is a writer's to change; unknown provenance is protected."""
        assert prov.protected is protected

    @pytest.mark.parametrize("role", ["operator", "admin"])
    def test_operator_and_admin_may_change_anything(self, role: str) -> None:
        """The privileged roles are never refused."""
        check_writable(role, {"a": Provenance("operator", trusted=True), "b": Provenance(None)}, "delete")

    @pytest.mark.parametrize("role", ["writer", "reader", "anything-else"])
    def test_any_other_role_is_refused_protected_ids(self, role: str) -> None:
        """Every role but the privileged ones is held to the writer's rule (fail closed)."""
        with pytest.raises(ProvenanceError) as info:
            check_writable(role, {"w": Provenance("writer"), "a": Provenance("admin", "k1")}, "replace", "entries")
        assert (info.value.status, info.value.field, info.value.protected) == (403, "entries", {"a": "an admin key"})
        check_writable(role, {"w": Provenance("writer")}, "replace")

    def test_public_api(self) -> None:
        """The module exports what its docstring describes."""
        assert set(mod.__all__) == {
            "OPERATOR", "PRIVILEGED", "WRITER", "Provenance", "ProvenanceError", "check_writable", "chunk_trusted",
        }  # fmt: skip


class TestPipeline:
    async def test_writer_cannot_replace_the_operators_entry(self, tmp_path: Path, writers: list[StoreWriter]) -> None:
        """A writer's load holding an id the operator (the CLI's default actor) wrote is refused; nothing changes."""
        await ingest(_jsonl(tmp_path / "op.jsonl", {"id": "a", "text": "original"}), home=tmp_path, writers=writers,
                     embedder=None)  # fmt: skip
        with acting_as(WRITER), pytest.raises(ProvenanceError) as info:
            await ingest(_jsonl(tmp_path / "op.jsonl", {"id": "a", "text": "hijack"}), home=tmp_path,
                         writers=writers, embedder=None)  # fmt: skip
        assert info.value.protected == {"a": "the operator"}
        assert _texts(tmp_path) == {"a": "original"}
        assert _held(tmp_path, "a")["a"].role == "operator"

    async def test_each_write_records_its_writer(self, tmp_path: Path, writers: list[StoreWriter]) -> None:
        """A writer's entries are its own (and replaceable by it); an admin's replacement takes them over."""
        src = tmp_path / "w.jsonl"
        with acting_as(WRITER):
            await ingest(_jsonl(src, {"id": "w", "text": "v1"}), home=tmp_path, writers=writers, embedder=None)
            await ingest(_jsonl(src, {"id": "w", "text": "v2"}), home=tmp_path, writers=writers, embedder=None)
        assert _held(tmp_path, "w") == {"w": Provenance("writer", WRITER.key_id, False)}
        with acting_as(ADMIN):
            report = await ingest(_jsonl(src, {"id": "w", "text": "v3", "trust": "trusted"}), home=tmp_path,
                                  writers=writers, embedder=None)  # fmt: skip
        assert report.updated == 1
        assert _held(tmp_path, "w") == {"w": Provenance("admin", ADMIN.key_id, True)}

    async def test_a_writer_cannot_empty_a_protected_source(self, tmp_path: Path, writers: list[StoreWriter]) -> None:
        """Chunks a source no longer yields are deletes: a writer may not drop an admin's that way either."""
        src = tmp_path / "s.jsonl"
        with acting_as(ADMIN):
            await ingest(_jsonl(src, {"id": "a", "text": "one"}, {"id": "b", "text": "two"}), home=tmp_path,
                         writers=writers, embedder=None)  # fmt: skip
        with acting_as(WRITER), pytest.raises(ProvenanceError):
            await ingest(_jsonl(src, {"id": "c", "text": "three"}), home=tmp_path, writers=writers, embedder=None)
        assert set(_texts(tmp_path)) == {"a", "b"}


class TestDeletion:
    async def test_writer_delete_of_protected_chunks_deletes_nothing(
        self, tmp_path: Path, writers: list[StoreWriter]
    ) -> None:
        """By id or by source, one protected chunk refuses the whole delete."""
        src = _jsonl(tmp_path / "mixed.jsonl", {"id": "a", "text": "admin"})
        with acting_as(ADMIN):
            await ingest(src, home=tmp_path, writers=writers, embedder=None)
        with acting_as(WRITER):
            with pytest.raises(ProvenanceError) as by_id:
                await delete_entries(tmp_path, writers, ids=["a"])
            with pytest.raises(ProvenanceError) as by_source:
                await delete_entries(tmp_path, writers, source="jsonl:mixed.jsonl")
        assert (by_id.value.field, by_source.value.field) == ("id", "source")
        assert set(_texts(tmp_path)) == {"a"}

    async def test_a_protected_delete_leaves_a_tombstone(self, tmp_path: Path, writers: list[StoreWriter]) -> None:
        """The admin's deleted id stays the admin's: a writer may not create it; an admin writing it clears it."""
        with acting_as(ADMIN):
            await ingest(_jsonl(tmp_path / "a.jsonl", {"id": "a", "text": "admin"}), home=tmp_path, writers=writers,
                         embedder=None)  # fmt: skip
            await delete_entries(tmp_path, writers, ids=["a"])
        assert _held(tmp_path, "a") == {"a": Provenance("admin", ADMIN.key_id, False)}
        with acting_as(WRITER), pytest.raises(ProvenanceError, match="even after it was deleted"):
            await ingest(_jsonl(tmp_path / "w.jsonl", {"id": "a", "text": "hijack"}), home=tmp_path, writers=writers,
                         embedder=None)  # fmt: skip
        assert _texts(tmp_path) == {}
        await ingest(_jsonl(tmp_path / "o.jsonl", {"id": "a", "text": "operator"}), home=tmp_path, writers=writers,
                     embedder=None)  # fmt: skip
        with sqlite3.connect(tmp_path / LEDGER_FILE) as conn:
            assert conn.execute("SELECT count(*) FROM tombstones").fetchone() == (0,)

    async def test_a_writers_deleted_id_is_free(self, tmp_path: Path, writers: list[StoreWriter]) -> None:
        """Deleting a writer's own entry leaves no tombstone: any writer may post the id again."""
        with acting_as(WRITER):
            await ingest(_jsonl(tmp_path / "w.jsonl", {"id": "w", "text": "v1"}), home=tmp_path, writers=writers,
                         embedder=None)  # fmt: skip
            await delete_entries(tmp_path, writers, ids=["w"])
            assert _held(tmp_path, "w") == {}
            await ingest(_jsonl(tmp_path / "w2.jsonl", {"id": "w", "text": "v2"}), home=tmp_path, writers=writers,
                         embedder=None)  # fmt: skip
        assert _texts(tmp_path) == {"w": "v2"}


class TestLedger:
    def test_a_ledger_from_before_provenance_is_migrated_and_protected(self, tmp_path: Path) -> None:
        """The columns are added on open; old rows are of unknown provenance, protected from writers."""
        with sqlite3.connect(tmp_path / LEDGER_FILE) as conn:
            conn.execute(
                "CREATE TABLE ledger (id TEXT PRIMARY KEY, doc_id TEXT NOT NULL, source TEXT NOT NULL, content_hash "
                "TEXT NOT NULL, stores TEXT NOT NULL, state TEXT NOT NULL, op TEXT NOT NULL, updated_at TEXT NOT NULL)"
            )
            conn.execute("INSERT INTO ledger VALUES ('old', 'old', 'jsonl:x', 'h', '[]', 'done', 'upsert', 't')")
        ledger = Ledger(tmp_path / LEDGER_FILE)
        try:
            entry = ledger.entries("jsonl:x")["old"]
            assert entry.provenance == Provenance(None)
            assert entry.provenance.protected
            ledger.mark_pending([("old", "old", "jsonl:x", "h2", Provenance("operator"))], [])
            assert ledger.provenance(["old"]) == {"old": Provenance("operator")}
        finally:
            ledger.close()

    def test_a_rolled_back_protected_write_leaves_a_tombstone(self, tmp_path: Path) -> None:
        """An interrupted admin write undone by a repair keeps its provenance; a writer's leaves nothing."""
        ledger = Ledger(tmp_path / LEDGER_FILE)
        try:
            ledger.mark_pending(
                [("a", "a", "s", "h", Provenance("admin", "k")), ("w", "w", "s", "h", Provenance("writer", "k2"))], []
            )
            ledger.roll_back(ledger.all_entries())
            assert ledger.provenance(["a", "w"]) == {"a": Provenance("admin", "k")}
        finally:
            ledger.close()
