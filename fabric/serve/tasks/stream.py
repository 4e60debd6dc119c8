"""``POST /v1/ingest`` bodies read as a stream: never the whole body, nor its parsed copy, in memory.

The service writes the body to an anonymous file as it arrives (:func:`fabric.serve.requests.spool_body`);
:func:`read_submission` then walks the top-level object of that file a window at a time. Each entry of
``entries`` is decoded on its own (through :mod:`fabric.core.safejson`: bounded depth, valid Unicode, no ``NaN``),
written as one line of JSONL to a second anonymous file and added to the body's fingerprint; the other fields are
small and decoded whole, then checked by :func:`fabric.serve.tasks.submission.parse_submission` itself, so both
forms of a body answer the same errors. The submission's ``entries`` is a :class:`SpooledEntries`: a sequence that
reads the JSONL file again on each pass, so the operator-field and provenance checks and the spooling of the task
work as with a list.

Memory is bounded by the largest single entry (and the window), not by the body: a 30 MiB body of small entries
keeps a few hundred KiB. The fingerprint is the sha256 of the same canonical text as
:func:`fabric.serve.tasks.submission.parse_submission` computes, so idempotency matches across both.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, Any, overload

from fabric.core import safejson
from fabric.serve.tasks.submission import Submission, SubmitError, parse_submission
from fabric.settings import IngestConfig

__all__ = ["WINDOW_CHARS", "SpooledEntries", "read_submission"]

WINDOW_CHARS = 1 << 18
"""Characters of the body decoded at a time (the window grows only to hold one value larger than it)."""
_DECODER = json.JSONDecoder()
_BLANK = " \t\r\n"
_HASHED = frozenset({"path", "format", "include", "exclude"})
"""The fields besides ``entries`` the fingerprint covers (``async`` is not; as ``submission._fingerprint``)."""


def _canonical(value: Any) -> bytes:
    """The text the fingerprint hashes (as :func:`fabric.serve.tasks.submission.parse_submission` writes it)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


class SpooledEntries(Sequence[Mapping[str, Any]]):
    """Entries kept as JSONL in an anonymous file; every iteration reads the file again (positioned reads, so
    passes do not disturb each other). :meth:`close` drops the file."""

    def __init__(self, fh: IO[bytes], count: int) -> None:
        self._fh = fh
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        fd, offset, buf, scan = self._fh.fileno(), 0, bytearray(), 0
        while data := os.pread(fd, 1 << 18, offset):
            offset += len(data)
            buf += data
            start = 0
            while (nl := buf.find(b"\n", scan)) >= 0:
                yield json.loads(buf[start:nl])
                start = scan = nl + 1
            del buf[:start]
            scan = len(buf)

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        if isinstance(index, slice):
            return list(self)[index]
        position = index + self._count if index < 0 else index
        for i, entry in enumerate(self):
            if i == position:
                return entry
        raise IndexError(index)

    def close(self) -> None:
        """Drop the file."""
        self._fh.close()


class _Window:
    """The body's text, decoded from a binary file a window at a time."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.dropped = 0
        """Characters before ``buf`` (for error positions)."""

    def more(self, at_least: int = 0) -> None:
        data = self.fh.read(max(WINDOW_CHARS, at_least))
        try:
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError:
            raise safejson.JSONInputError("", f"not valid UTF-8 (near byte {self.fh.tell()})") from None
        self.dropped += self.pos
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        self.eof = not data

    def peek(self) -> str:
        """The next character that is not blank (``""`` at the end)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _BLANK:
                self.pos += 1
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos : self.pos + 1]
            self.more()

    def take(self, expected: str) -> str:
        """Consume the next character, one of ``expected``."""
        char = self.peek()
        if not char or char not in expected:
            where = self.dropped + self.pos
            got = repr(char) if char else "the end"
            raise safejson.JSONInputError(
                "", f"invalid JSON: expected {' or '.join(expected)} at character {where}, got {got}"
            )
        self.pos += 1
        return char

    def value(self, where: str = "") -> Any:
        """The next JSON value (at ``where`` in the body), checked by :func:`fabric.core.safejson.loads` (a depth of
        62 below the body's two levels); its own faults name their place under ``where``."""
        self.peek()
        while True:
            try:
                _, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof:
                    raise safejson.JSONInputError(
                        "", f"invalid JSON: {exc.msg} (character {self.dropped + exc.pos})"
                    ) from None
                self.more(len(self.buf) - self.pos)  # double the window: linear in the value's size
                continue
            except RecursionError:
                raise safejson.JSONInputError("", "nested too deeply") from None
            if end == len(self.buf) and not self.eof:  # a number may go on in the next window
                self.more(len(self.buf) - self.pos)
                continue
            text, self.pos = self.buf[self.pos : end], end
            try:
                return safejson.loads(text, max_depth=safejson.DEFAULT_MAX_DEPTH - 2)
            except safejson.JSONInputError as exc:
                if exc.reason == "nested too deeply":  # the parser's own guard: the body as a whole
                    raise
                inner = exc.where
                raise safejson.JSONInputError(
                    where + inner if inner.startswith("[") else ".".join(p for p in (where, inner) if p), exc.reason
                ) from None


def _stream_entries(window: _Window, config: IngestConfig, out: IO[bytes], digest: Any) -> int:
    """Copy the ``entries`` array as JSONL into ``out`` and ``digest``; the number of entries."""
    if window.peek() != "[":
        window.value()
        raise SubmitError("entries", "expected a non-empty list of objects")
    window.take("[")
    count = 0
    while window.peek() != "]" or count:
        if count >= config.max_entries:
            raise SubmitError(
                "entries", f"more than {config.max_entries} entries; at most {config.max_entries} per request"
            )
        entry = window.value(f"entries[{count}]")
        if not isinstance(entry, dict):
            raise SubmitError(f"entries[{count}]", "expected a JSON object")
        line = _canonical(entry)
        digest.update(b"," + line if count else line)
        out.write(line + b"\n")
        count += 1
        if window.take(",]") == "]":
            return count
    window.take("]")
    raise SubmitError("entries", "expected a non-empty list of objects")


def read_submission(
    body: IO[bytes], config: IngestConfig, root: Path | None, directory: Path, *, paths: bool = True
) -> Submission:
    """Validate the ``POST /v1/ingest`` body in ``body`` (blocking: call it in a thread); entries are spooled to an
    anonymous file in ``directory`` (close the returned submission's :class:`SpooledEntries` when done); ``paths``
    as for :func:`parse_submission`.

    Raises:
        SubmitError: naming the field at fault (``body`` for malformed JSON), as :func:`parse_submission` does.
    """
    window = _Window(body)
    out = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115 (closed by the caller, through SpooledEntries)
    try:
        try:
            if window.peek() != "{":
                raise SubmitError("body", "expected a JSON object")
            fields, count, digest = _read_object(window, config, out)
        except safejson.JSONInputError as exc:
            raise SubmitError(exc.where or "body", exc.reason) from None
        if count is None:
            out.close()
            return parse_submission(fields, config, root, paths=paths)
        # the other fields checked as those of a body with a list of entries
        checked = parse_submission({**fields, "entries": [{}]}, config, root, paths=paths)
        for name in sorted(_HASHED.intersection(fields)):  # after "entries" in sorted order, as the canonical text
            digest.update(b',"' + name.encode() + b'":' + _canonical(fields[name]))
        digest.update(b"}")
        out.flush()
        entries = SpooledEntries(out, count)
        return replace(checked, entries=entries, count=count, fingerprint=digest.hexdigest())
    except BaseException:
        out.close()
        raise


def _read_object(window: _Window, config: IngestConfig, out: IO[bytes]) -> tuple[dict[str, Any], int | None, Any]:
    """The body's fields but ``entries`` (decoded), the number of entries (None without the field), the digest."""
    window.take("{")
    fields: dict[str, Any] = {}
    count: int | None = None
    digest = hashlib.sha256(b'{"entries":[')
    if window.peek() == "}":
        window.take("}")
    else:
        while True:
            key = window.value()
            if not isinstance(key, str):
                raise safejson.JSONInputError("", "invalid JSON: expected a field name")
            if key in fields or (key == "entries" and count is not None):
                raise SubmitError("body", f"field {key} given twice")
            window.take(":")
            if key == "entries":
                count = _stream_entries(window, config, out, digest)
            else:
                fields[key] = window.value(key)
            if window.take(",}") == "}":
                break
    if window.peek():
        raise safejson.JSONInputError("", "invalid JSON: extra data after the object")
    digest.update(b"]")
    return fields, count, digest
