"""The front door for Python: open a knowledge base, search it and ingest into it, from asyncio or from a script.

```python
import fabric

async with fabric.open(home="./kb") as kb:
    answer = await kb.search("blue-green deploys", top_k=5, mode="technical")
    for item in answer.items:
        print(item.id, item.title, item.url, item.snippet, item.score_total)
    report = await kb.ingest([{"id": "e-1", "title": "Rollback", "text": "Roll back within five minutes."}])

with fabric.connect(home="./kb") as kb:  # the same, blocking: scripts and notebooks
    print(kb.search("blue-green deploys").total)
```

Settings come from the same sources as the CLI's (built-in defaults < profile < the user's settings file < a
``config`` file < ``FABRIC_*`` variables), then the arguments (``home``, ``cache_dir``). Search fields and their
defaults are those of every door (``route`` included: the configured default); bad input raises
:class:`~fabric.core.errors.QueryError`, a ``ValueError`` naming the field, with the message the CLI and HTTP give.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from fabric.client import SearchPage, search_body
from fabric.core.errors import IngestError
from fabric.ingest.report import IngestReport
from fabric.ingest.run import run_ingest
from fabric.query.engine import Engine
from fabric.query.validation import parse_request
from fabric.serve.tasks.submission import parse_submission, spool_entries
from fabric.settings import Settings, load_settings

__all__ = ["KnowledgeBase", "SyncKnowledgeBase", "connect", "open", "open_settings"]

T = TypeVar("T")
Entries = Sequence[Mapping[str, Any]]


def open_settings(
    home: str | os.PathLike[str] | None = None,
    *,
    config: str | os.PathLike[str] | None = None,
    profile: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Settings:
    """The settings :func:`open` uses: every source the CLI reads, then these arguments.

    Raises:
        ConfigError: naming the file and key of a bad setting.
    """
    env = dict(os.environ)
    if home is not None:
        env["FABRIC_HOME"] = os.fspath(home)
    if cache_dir is not None:
        env["FABRIC_CACHE_DIR"] = os.fspath(cache_dir)
    return load_settings(user_file=Path(config) if config is not None else None, profile=profile, env=env)


class KnowledgeBase:
    """One home's engine: :meth:`search` it, :meth:`ingest` into it. Use it with ``async with``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = Engine(settings)

    async def __aenter__(self) -> Self:
        await self.engine.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the engine's lanes and stores."""
        await self.engine.aclose()

    async def search(self, query: str, **fields: Any) -> SearchPage:
        """One page of answers to ``query``; ``fields`` are the request's (``top_k`` or ``limit``, ``mode``,
        ``cursor``, ``weights``, ``fusion``, ``lanes``, ``route``, ``constraints``, ``budget_ms``, ``strict``).

        Raises:
            QueryError: a bad field (named), before any lane runs.
            PartialResultError: ``strict=True`` and some lane did not answer.
        """
        request = parse_request(search_body(query, **fields), self.settings)
        await self.engine.open()
        return SearchPage.from_result(await self.engine.search(request))

    async def ingest(
        self,
        source: Entries | str | os.PathLike[str],
        *,
        format: str | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
    ) -> IngestReport:
        """Ingest entries (dicts in the JSONL entry format: ``id``, ``title``, ``text``, ...) or a file or folder
        (Markdown, text, JSONL, BEIR; ``format`` when it cannot be told) into the home; what was done.

        ``include`` / ``exclude`` (path globs relative to a folder) narrow a Markdown folder, replacing ``[ingest]
        include`` / ``exclude``; the report names the allowlist and each file's trust (:mod:`fabric.ingest.selection`).

        Entries are checked as ``POST /v1/ingest`` checks them and kept under ``<home>/spool/``. The caller is the
        operator: entries may be marked ``trust: trusted``.

        Raises:
            QueryError: entries that are not a non-empty list of objects, or an entry the loader refuses (named).
            IngestError: a source that cannot be read, or an allowlist refused (a bad glob, one admitting no file,
                one given for entries or a BEIR or JSONL source).
            HomeInUseError: a service or another ingest holds the home.
        """
        if isinstance(source, str | os.PathLike):
            return await run_ingest(self.settings, Path(source), format, include=include, exclude=exclude, by="api")
        if include is not None or exclude is not None:
            raise IngestError("allowlist: include/exclude narrow folder walks (markdown); entries are not a folder")
        sub = parse_submission({"entries": list(source)}, self.settings.ingest, None)
        path = self.settings.home / "spool" / f"python-{sub.fingerprint[:24]}.jsonl"
        await asyncio.to_thread(spool_entries, sub, path)
        return await run_ingest(self.settings, path, "jsonl")


def open(
    home: str | os.PathLike[str] | None = None,
    *,
    config: str | os.PathLike[str] | None = None,
    profile: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> KnowledgeBase:
    """A knowledge base over ``home`` (default: ``FABRIC_HOME``, else the user data folder), for ``async with``.

    Raises:
        ConfigError: naming the file and key of a bad setting.
    """
    return KnowledgeBase(open_settings(home, config=config, profile=profile, cache_dir=cache_dir))


class SyncKnowledgeBase:
    """:class:`KnowledgeBase` for code without an event loop: its engine lives on a private loop thread."""

    def __init__(self, settings: Settings) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fabric-loop", daemon=True)
        self._thread.start()
        self.kb = KnowledgeBase(settings)
        self.settings = settings

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __enter__(self) -> Self:
        self._run(self.kb.engine.open())
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def search(self, query: str, **fields: Any) -> SearchPage:
        """:meth:`KnowledgeBase.search`, blocking."""
        return self._run(self.kb.search(query, **fields))

    def ingest(
        self,
        source: Entries | str | os.PathLike[str],
        *,
        format: str | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
    ) -> IngestReport:
        """:meth:`KnowledgeBase.ingest`, blocking."""
        return self._run(self.kb.ingest(source, format=format, include=include, exclude=exclude))

    def close(self) -> None:
        """Close the engine and stop the loop thread (idempotent)."""
        if self._loop.is_closed():
            return
        self._run(self.kb.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


def connect(
    home: str | os.PathLike[str] | None = None,
    *,
    config: str | os.PathLike[str] | None = None,
    profile: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> SyncKnowledgeBase:
    """The blocking :func:`open`, for ``with``: ``with fabric.connect(home="./kb") as kb: kb.search("...")``.

    Raises:
        ConfigError: naming the file and key of a bad setting.
    """
    return SyncKnowledgeBase(open_settings(home, config=config, profile=profile, cache_dir=cache_dir))
