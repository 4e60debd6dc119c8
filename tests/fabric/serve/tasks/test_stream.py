"""Streamed POST /v1/ingest bodies: the same submission as a decoded body (fields, errors, fingerprint), every entry
kept, and memory that does not grow with the body (tracemalloc: allocations counted, not timed)."""

from __future__ import annotations

import io
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fabric.serve.tasks.stream as mod
from fabric.serve.tasks.store import IngestTask, TaskStore
from fabric.serve.tasks.stream import SpooledEntries, read_submission
from fabric.serve.tasks.submission import SubmitError, check_operator_fields, parse_submission, spool_entries
from fabric.settings import IngestConfig

CFG = IngestConfig()


def _read(tmp_path: Path, body: bytes, config: IngestConfig = CFG) -> Any:
    return read_submission(io.BytesIO(body), config, None, tmp_path)


def _entries(n: int, text: str = "Use blue-green deploys for release") -> list[dict[str, Any]]:
    return [{"id": f"kb-{i}", "title": f"Entry {i}", "text": f"{text} {i}."} for i in range(n)]


class TestSameAsDecoded:
    @pytest.mark.parametrize(
        "body",
        [
            {"entries": _entries(3)},
            {"async": True, "entries": _entries(2), "format": "jsonl"},
            {"entries": [{"id": "é", "text": "naïve ☃", "triples": [["a", "b", "c"]], "n": 1.5}]},
        ],
    )
    def test_fingerprint_and_fields_match_parse_submission(self, tmp_path: Path, body: dict[str, Any]) -> None:
        """Whatever the order of its fields, a streamed body has the decoded body's fingerprint (idempotency keys
        match across both), count, format and async flag, and iterates the same entries."""
        sub = _read(tmp_path, json.dumps(body, indent=1).encode())
        want = parse_submission(body, CFG, None)
        try:
            assert (sub.fingerprint, sub.count, sub.fmt, sub.force_async, sub.kind) == (
                want.fingerprint, want.count, want.fmt, want.force_async, want.kind,
            )  # fmt: skip
            assert list(sub.entries) == body["entries"]
            assert isinstance(sub.entries, SpooledEntries)
            assert sub.entries[-1] == body["entries"][-1]
        finally:
            sub.entries.close()

    def test_path_body_is_parse_submissions_answer(self, tmp_path: Path) -> None:
        """A body without entries is handed to parse_submission whole (here: paths disabled, 403 on path)."""
        with pytest.raises(SubmitError) as err:
            _read(tmp_path, b'{"path": "x.jsonl"}')
        assert (err.value.field, err.value.status) == ("path", 403)

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            (b"{}", "body"),
            (b"[1, 2]", "body"),
            (b"{nope", "body"),
            (b'{"entries": []}', "entries"),
            (b'{"entries": {"id": "a"}}', "entries"),
            (b'{"entries": ["text"]}', "entries[0]"),
            (b'{"entries": [{"id": "a", "text": "t"}], "path": "x"}', "body"),
            (b'{"entries": [{"id": "a", "text": "t"}], "wat": 1}', "body"),
            (b'{"entries": [{"id": "a", "text": "t"}], "entries": []}', "body"),
            (b'{"entries": [{"id": "a", "text": "t"},]}', "body"),
            (b'{"entries": [{"id": "a", "text": "t"}]} trailing', "body"),
            (b'{"entries": [{"id": "a", "text": "t", "n": NaN}]}', "entries[0]"),
            (b'{"entries": [{"id": "a", "text": "t"}, {"id": "b", "url": "\\ud800"}]}', "entries[1].url"),
            (b'{"entries": [{"id": "a", "text": "\xff"}]}', "body"),
        ],
    )
    def test_bad_bodies_name_the_field(self, tmp_path: Path, body: bytes, field: str) -> None:
        """Malformed bodies answer a 400 naming the field, as a decoded body's would; no file is left open."""
        with pytest.raises(SubmitError) as err:
            _read(tmp_path, body)
        assert (err.value.field, err.value.status) == (field, 400), err.value.message

    def test_too_many_entries_stops_reading(self, tmp_path: Path) -> None:
        """Past ``max_entries`` the body is refused at once (the rest is never parsed)."""
        body = b'{"entries": [' + b",".join(json.dumps(e).encode() for e in _entries(3)) + b", garbage"
        with pytest.raises(SubmitError, match="at most 2"):
            _read(tmp_path, body, IngestConfig(max_entries=2))

    def test_writer_operator_fields_are_checked_on_the_spooled_entries(self, tmp_path: Path) -> None:
        """check_operator_fields sees every streamed entry (a trusted claim in the last one is refused)."""
        entries = [*_entries(5), {"id": "x", "text": "t", "trust": "trusted"}]
        sub = _read(tmp_path, json.dumps({"entries": entries}).encode())
        try:
            with pytest.raises(SubmitError) as err:
                check_operator_fields(sub, allowed=False)
            assert err.value.field == "entries[5].trust"
        finally:
            sub.entries.close()

    @settings(max_examples=60, deadline=None)
    @given(text=st.text(max_size=40), chunk=st.integers(min_value=1, max_value=64))
    def test_any_window_size_reads_the_same(
        self, tmp_path_factory: pytest.TempPathFactory, text: str, chunk: int
    ) -> None:
        """Values cut at any window boundary (numbers included) decode the same: the window only grows."""
        entries = [{"id": f"e{i}", "text": text or "t", "n": 1234567 * i, "f": -0.5e-3} for i in range(4)]
        body = json.dumps({"entries": entries}).encode()
        old = mod.WINDOW_CHARS
        mod.WINDOW_CHARS = chunk
        try:
            sub = _read(tmp_path_factory.mktemp("w"), body)
        finally:
            mod.WINDOW_CHARS = old
        try:
            assert list(sub.entries) == entries
        finally:
            sub.entries.close()


def _body_file(path: Path, n_bytes: int) -> int:
    """Write an ingest body of at least ``n_bytes`` (entries of ~200 bytes); the number of entries."""
    count = 0
    with path.open("wb") as fh:
        fh.write(b'{"async": true, "entries": [')
        size = 0
        while size < n_bytes:
            line = json.dumps({"id": f"e-{count}", "title": f"T {count}", "text": "word " * 30 + str(count)}).encode()
            fh.write((b"," if count else b"") + line)
            size += len(line) + 1
            count += 1
        fh.write(b"]}")
    return count


def test_submission_memory_does_not_grow_with_the_body(tmp_path: Path) -> None:
    """An 8 MiB body goes through parsing, spooling (the JSONL loader's checks included) and the task store's
    record with a traced peak under a quarter of its size (before: the body, its decoded copy, the canonical text
    for the fingerprint, the loader's chunks and the spool file read back: several times its size); no entry is
    lost on the way."""
    size = 8 << 20
    source = tmp_path / "body.json"
    count = _body_file(source, size)
    spool = tmp_path / "spool" / "api.jsonl"
    store = TaskStore(tmp_path / "tasks.sqlite")
    tracemalloc.start()
    try:
        with source.open("rb") as fh:
            sub = read_submission(fh, CFG, None, tmp_path)
        spool_entries(sub, spool)
        store.add(IngestTask(id="t1", key="k", submission=sub, source_path=spool), spool)
        assert isinstance(sub.entries, SpooledEntries)
        sub.entries.close()
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        store.close()
    assert peak < size // 4, f"peak {peak / 2**20:.1f} MiB for a {size >> 20} MiB body"
    assert sub.count == count
    lines = spool.read_bytes().splitlines()
    assert len(lines) == count
    assert json.loads(lines[-1])["id"] == f"e-{count - 1}"
    store = TaskStore(tmp_path / "tasks.sqlite")
    try:
        assert store.body(spool) == spool.read_bytes()  # the durable copy is whole
    finally:
        store.close()


def test_public_api() -> None:
    """The module exports exactly its documented names."""
    assert set(mod.__all__) == {"WINDOW_CHARS", "SpooledEntries", "read_submission"}
