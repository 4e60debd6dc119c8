"""The audit history: appending entry and triple changes as an actor, tenant scoping, filters and paging."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import fabric.ingest.audit as mod
from fabric.ingest.audit import Actor, AuditLog, EntryChange, TripleChange, acting_as, current_actor, parse_since


def _log(home: Path) -> AuditLog:
    log = AuditLog(home)
    created = [EntryChange("created", "a", "a", "api", "h1"), EntryChange("created", "b", "b", "api", "h2")]
    log.record(created, [TripleChange("created", "a", (("x", "rel", "y"),))], actor=Actor("t1", "k1", "task1", "api"))
    log.record([EntryChange("updated", "a", "a", "api", "h3")], actor=Actor("t1", "k2", None, "api"))
    log.record([EntryChange("created", "a", "a", "api", "h9")], actor=Actor("t2"))
    return log


class TestAuditLog:
    def test_records_are_scoped_by_tenant_and_ordered(self, tmp_path: Path) -> None:
        """A tenant reads only its records, oldest first, with who and what."""
        log = _log(tmp_path)
        try:
            page = log.page("t1")
            assert [(r.subject, r.action, r.entry_id, r.key_id, r.task_id) for r in page.records] == [
                ("entry", "created", "a", "k1", "task1"),
                ("entry", "created", "b", "k1", "task1"),
                ("triple", "created", "a", "k1", "task1"),
                ("entry", "updated", "a", "k2", None),
            ]
            assert page.next_after is None
            assert page.records[2].to_dict()["triples"] == [{"subject": "x", "predicate": "rel", "object": "y"}]
            assert page.records[0].to_dict()["triples"] == []
            assert page.records[2].doc_id == "a"
            assert page.records[2].source == "api"
            assert [r.content_hash for r in log.page("t2").records] == ["h9"]
        finally:
            log.close()

    def test_filters_and_paging(self, tmp_path: Path) -> None:
        """entry_id matches chunk or doc id; pages follow the cursor; since compares normalised UTC times."""
        log = _log(tmp_path)
        try:
            assert [r.entry_id for r in log.page("t1", entry_id="b").records] == ["b"]
            first = log.page("t1", limit=3)
            assert len(first.records) == 3
            assert first.next_after == first.records[-1].seq
            rest = log.page("t1", after=first.next_after or 0, limit=3)
            assert [r.action for r in rest.records] == ["updated"]
            assert rest.next_after is None
            assert log.page("t1", since="2999-01-01T00:00:00.000000Z").records == []
            assert len(log.page("t1", since=parse_since("2000-01-01")).records) == 4
        finally:
            log.close()

    def test_triples_of_one_chunk_and_action_are_one_record(self, tmp_path: Path) -> None:
        """Many triples of a chunk created in one write: one record listing them (sorted)."""
        log = AuditLog(tmp_path)
        try:
            changes = [
                TripleChange("created", "c", (("b", "r", "c"),)),
                TripleChange("created", "c", (("a", "r", "b"),)),
                TripleChange("deleted", "c", (("x", "r", "y"),)),
            ]
            assert log.record([], changes, actor=Actor(), docs={"c": ("doc-c", "api")}) == 2
            rows = log.page("default").records
            assert [(r.action, r.triples) for r in rows] == [
                ("created", (("a", "r", "b"), ("b", "r", "c"))),
                ("deleted", (("x", "r", "y"),)),
            ]
            assert rows[0].doc_id == "doc-c"
        finally:
            log.close()

    def test_owners_are_the_latest_writers(self, tmp_path: Path) -> None:
        """The tenant of each id's latest create/update; deletes do not count; unknown ids are absent."""
        log = _log(tmp_path)
        try:
            log.record([EntryChange("deleted", "b", "b", "api")], actor=Actor("t9"))
            assert log.owners(["a", "b", "zz"]) == {"a": "t2", "b": "t1"}
        finally:
            log.close()
        assert AuditLog(tmp_path / "none").owners(["a"]) == {}

    def test_reading_a_home_without_history_creates_nothing(self, tmp_path: Path) -> None:
        """No file, no records, and no file created by reading."""
        log = AuditLog(tmp_path)
        assert log.page("default").records == []
        assert not (tmp_path / mod.AUDIT_FILE).exists()


class TestActor:
    async def test_actor_follows_the_context_into_threads(self) -> None:
        """acting_as sets the actor for the block and the threads it starts; the CLI default outside."""
        assert current_actor() == Actor("default", None, None, "cli")
        with acting_as(Actor("t", "k", "task", "api")):
            seen = await asyncio.to_thread(current_actor)
        assert seen.key_id == "k"
        assert current_actor().key_id is None


def test_parse_since() -> None:
    """ISO dates and times with Z or an offset normalise to the stored UTC form; anything else is refused."""
    assert parse_since("2026-01-31T12:00:00Z") == "2026-01-31T12:00:00.000000Z"
    assert parse_since("2026-01-31T14:00:00+02:00") == "2026-01-31T12:00:00.000000Z"
    assert parse_since("2026-01-31") == "2026-01-31T00:00:00.000000Z"
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_since("yesterday")


def test_public_api() -> None:
    """The module's exports."""
    assert "AuditLog" in mod.__all__
    assert "acting_as" in mod.__all__
