"""``/metrics`` of ``fabric serve --workers N``: every worker's metrics in one answer, each sample labelled with
its ``worker``.

Each worker keeps its own registry (counters, histograms and gauges of its engine, admission and connections).
A scrape reaches whichever worker the kernel gives the connection to, so that worker alone would report a
different process each time. Instead each worker also serves its own registry on a Unix socket in the
supervisor's private folder (``worker-<i>.sock``, mode 0700 folder), and the public ``/metrics`` of any worker
reads every sibling's (1 s each at most) and answers all of them, adding ``worker="<i>"`` to every sample
(``sum without (worker) (...)`` gives the service's totals). A sibling that does not answer (restarting) is left
out of that scrape, and ``fabric_workers_scraped`` says how many answered. ``*_created`` series are dropped: they
are per-process start times.

The same socket answers ``/readyz`` with that worker's own readiness, so the public ``/readyz`` of any worker can
say whether the whole service is ready (:func:`not_ready`): the kernel spreads connections over every worker, and
a worker still warming (its keyword lane reading the postings, FTS5 ranking alone at several times the CPU) would
take its share of the load before it can carry it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["WORKERS_KEY", "WorkerSet", "gather", "merge", "not_ready", "serve_own", "socket_path"]

SCRAPE_TIMEOUT_S = 1.0
"""How long a scrape waits for one sibling."""


def socket_path(folder: Path, index: int) -> Path:
    """Where worker ``index`` serves its own registry."""
    return folder / f"worker-{index}.sock"


@dataclass(frozen=True, slots=True)
class WorkerSet:
    """This worker's place among its siblings."""

    folder: Path
    """The supervisor's private folder of sockets."""
    index: int
    count: int


WORKERS_KEY = web.AppKey("workers", WorkerSet)
"""Set on a worker's app: its ``/metrics`` answers for every worker."""


class _Families:
    """A collector that hands back parsed metric families (for :func:`prometheus_client.generate_latest`)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def merge(texts: dict[int, str]) -> bytes:
    """The exposition texts of several workers as one, each sample labelled ``worker``."""
    merged: dict[str, Metric] = {}
    for index, text in sorted(texts.items()):
        for family in text_string_to_metric_families(text):
            if family.name.endswith("_created"):
                continue
            out = merged.get(family.name)
            if out is None:
                out = merged[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
            for s in family.samples:
                out.add_sample(s.name, {**s.labels, "worker": str(index)}, s.value, s.timestamp, s.exemplar)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(list(merged.values())))
    return generate_latest(registry)


async def _sibling(path: Path, route: str = "/metrics") -> str | None:
    """The body of ``route`` on a sibling's socket, or None when it does not answer 200 in time."""
    try:
        timeout = aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT_S)
        async with (
            aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(path)), timeout=timeout) as client,
            client.get(f"http://worker{route}") as resp,
        ):
            return await resp.text() if resp.status == 200 else None
    except (aiohttp.ClientError, OSError, TimeoutError):
        return None


async def not_ready(workers: WorkerSet) -> list[int]:
    """The siblings that are not ready: they answer 503 on their socket's ``/readyz``, or do not answer at all
    (starting, restarting), ascending."""
    others = [i for i in range(workers.count) if i != workers.index]
    answers = await asyncio.gather(*(_sibling(socket_path(workers.folder, i), "/readyz") for i in others))
    return [i for i, answer in zip(others, answers, strict=True) if answer is None]


async def gather(workers: WorkerSet, own: CollectorRegistry) -> bytes:
    """Every answering worker's metrics, merged (:func:`merge`), with ``fabric_workers_scraped``."""
    others = [i for i in range(workers.count) if i != workers.index]
    answers = await asyncio.gather(*(_sibling(socket_path(workers.folder, i)) for i in others))
    texts = {workers.index: generate_latest(own).decode("utf-8")}
    texts.update({i: text for i, text in zip(others, answers, strict=True) if text is not None})
    scraped = (
        "# HELP fabric_workers_scraped Workers whose metrics this answer holds\n"
        "# TYPE fabric_workers_scraped gauge\n"
        f"fabric_workers_scraped {len(texts)}\n"
        "# HELP fabric_workers Workers the service runs\n# TYPE fabric_workers gauge\n"
        f"fabric_workers {workers.count}\n"
    )
    return merge(texts) + scraped.encode("ascii")


async def serve_own(
    workers: WorkerSet, registry: CollectorRegistry, ready: Callable[[], Awaitable[bool]] | None = None
) -> web.AppRunner:
    """Serve this worker's registry alone on its socket (for its siblings' scrapes), and its own readiness
    (``ready``; 503 without one) for their ``/readyz``; the runner to clean up."""

    async def own(_request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), content_type="text/plain")

    async def own_ready(_request: web.Request) -> web.Response:
        ok = ready is not None and await ready()
        return web.Response(text="ready" if ok else "not_ready", status=200 if ok else 503)

    app = web.Application()
    app.router.add_get("/metrics", own)
    app.router.add_get("/readyz", own_ready)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    path = socket_path(workers.folder, workers.index)
    path.unlink(missing_ok=True)  # a previous run of this worker (killed) left its socket
    await web.UnixSite(runner, str(path)).start()
    return runner
