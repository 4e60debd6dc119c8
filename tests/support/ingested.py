"""Shared set-up of the client and integration tests: a small ingested home, an engine over it, a live service.

Everything is real except the embedder (the deterministic bag-of-words one of :mod:`tests.support.embedded`):
SQLite FTS5, local Qdrant and the SQLite graph under a tmp home, and ``fabric serve``'s app on loopback, run on
a loop thread of its own so blocking framework calls (``invoke``, ``retrieve``, ``run``) can reach it.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from fabric.query.engine import Engine
from fabric.query.validation import parse_request
from fabric.serve.protocol import ServiceRunner
from fabric.serve.service import create_app, ingest_tasks
from fabric.serve.tasks.submission import parse_submission
from fabric.settings import load_settings
from lanes.base import LaneResources
from tests.support.embedded import BagEmbedder

ENTRIES: list[dict[str, Any]] = [
    {"id": "e-42", "title": "deployment", "text": "Use blue-green deploys for zero-downtime releases."},
    {"id": "e-103", "title": "release rollback", "text": "Rollback within 5 min if the error rate exceeds 1%."},
    {"id": "e-8", "title": "canary releases", "text": "Canary deploys send 5% of traffic to the new release first."},
    {"id": "e-9", "title": "feature flags", "text": "Feature flags decouple deploys from releases."},
    {"id": "e-7", "title": "bread", "text": "Bread needs flour, water, salt and a long, slow rise."},
    {"id": "e-11", "title": "sourdough", "text": "A sourdough starter is fed flour and water every day."},
]

QUERIES = ("deployment strategy", "how do we roll back a release", "flour and water")


def engine(home: Path) -> Engine:
    """An unopened engine over ``home`` with the default embedded lanes and the bag-of-words embedder."""
    settings = load_settings(env={"FABRIC_HOME": str(home)})
    return Engine(settings, resources=LaneResources(home=home, embedder=BagEmbedder()))


async def _ingest(home: Path) -> None:
    eng = engine(home)
    tasks = ingest_tasks(eng)
    await eng.open()
    await tasks.start()
    try:
        sub = parse_submission({"entries": ENTRIES}, eng.settings.ingest, None)
        task, _ = await tasks.submit(sub)
        await task.done.wait()
        assert task.error is None, task.error
    finally:
        await tasks.aclose()
        await eng.aclose()


def ingested_home(root: Path) -> Path:
    """A home under ``root`` holding :data:`ENTRIES` (its stores closed again)."""
    home = root / "home"
    asyncio.run(_ingest(home))
    return home


@contextmanager
def live_service(home: Path) -> Iterator[str]:
    """Serve a copy of ``home`` on 127.0.0.1 (a free port) from a loop thread; yields the base URL."""
    served = home.parent / "served"
    shutil.copytree(home, served)
    loop = asyncio.new_event_loop()
    runner = ServiceRunner(create_app(engine(served), mcp=False))  # fabric serve's runner

    async def start() -> str:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        return f"http://127.0.0.1:{port}"

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=60)
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


async def engine_ids(home: Path, queries: tuple[str, ...] = QUERIES, limit: int = 4) -> list[list[str]]:
    """Each query's ids, in order, from a direct ``Engine.search`` over ``home``."""
    async with engine(home) as eng:
        return [
            [it.id for it in (await eng.search(parse_request({"query": q, "limit": limit}, eng.settings))).items]
            for q in queries
        ]
