"""What the audit history records of a write's graph triples: one change per chunk and action, sorted."""

from __future__ import annotations

from fabric.ingest.audit import TripleChange
from fabric.ingest.audit_trail import triple_changes


def test_created_and_deleted_per_chunk_sorted() -> None:
    """Each chunk gets its created and its deleted triples, each sorted; an unchanged chunk gets nothing."""
    before = {"a": {("x", "r", "y"), ("k", "r", "l")}, "b": {("p", "r", "q")}}
    after = {"a": {("x", "r", "y"), ("m", "r", "n"), ("c", "r", "d")}, "b": {("p", "r", "q")}, "c": {("u", "r", "v")}}
    assert triple_changes(before, after, ["a", "b", "c", "gone"]) == [
        TripleChange("created", "a", (("c", "r", "d"), ("m", "r", "n"))),
        TripleChange("deleted", "a", (("k", "r", "l"),)),
        TripleChange("created", "c", (("u", "r", "v"),)),
    ]


def test_deleted_chunk_loses_all_its_triples() -> None:
    """A chunk read before and absent after: every triple it had is deleted."""
    before = {"a": {("x", "r", "y"), ("a", "r", "b")}}
    assert triple_changes(before, {}, ["a"]) == [TripleChange("deleted", "a", (("a", "r", "b"), ("x", "r", "y")))]


def test_nothing_when_a_side_could_not_be_read() -> None:
    """An unreadable graph store (None on either side) records no triple change rather than a wrong one."""
    assert triple_changes(None, {"a": {("x", "r", "y")}}, ["a"]) == []
    assert triple_changes({}, None, ["a"]) == []
