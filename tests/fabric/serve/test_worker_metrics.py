"""``/metrics`` over several workers: each worker's samples, labelled with its index, in one exposition."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import fabric.serve.worker_metrics as mod
from fabric.serve.worker_metrics import WorkerSet, gather, merge, not_ready, serve_own


def _registry(searches: int, latency: float) -> CollectorRegistry:
    r = CollectorRegistry()
    Counter("fabric_searches", "Searches", ["mode"], registry=r).labels("fast").inc(searches)
    Histogram("fabric_latency_seconds", "Latency", buckets=(0.1, 1.0), registry=r).observe(latency)
    Gauge("fabric_active", "Active", registry=r).set(searches % 3)
    return r


def _samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }


def test_merge_labels_every_sample_with_its_worker_and_drops_start_times() -> None:
    texts = {i: generate_latest(_registry(searches=5 + i, latency=(0.05, 0.5)[i])).decode() for i in range(2)}
    got = _samples(merge(texts))
    assert got[("fabric_searches_total", (("mode", "fast"), ("worker", "0")))] == 5
    assert got[("fabric_searches_total", (("mode", "fast"), ("worker", "1")))] == 6
    assert got[("fabric_latency_seconds_bucket", (("le", "0.1"), ("worker", "0")))] == 1
    assert got[("fabric_latency_seconds_bucket", (("le", "0.1"), ("worker", "1")))] == 0
    assert got[("fabric_active", (("worker", "1"),))] == 0
    assert not any(name.endswith("_created") for name, _ in got)


async def test_gather_reads_siblings_over_their_sockets_and_skips_the_silent(tmp_path: Path) -> None:
    """Worker 0 answers for itself and worker 1 (served on its socket); worker 2 never started: left out."""
    one = WorkerSet(tmp_path, 1, 3)
    runner = await serve_own(one, _registry(searches=7, latency=0.5))
    try:
        got = _samples(await gather(WorkerSet(tmp_path, 0, 3), _registry(searches=2, latency=0.5)))
    finally:
        await runner.cleanup()
    assert got[("fabric_searches_total", (("mode", "fast"), ("worker", "0")))] == 2
    assert got[("fabric_searches_total", (("mode", "fast"), ("worker", "1")))] == 7
    assert not any(dict(labels).get("worker") == "2" for _, labels in got)
    assert got[("fabric_workers_scraped", ())] == 2
    assert got[("fabric_workers", ())] == 3


async def test_not_ready_names_the_siblings_that_are_warming_or_silent(tmp_path: Path) -> None:
    """Worker 1 is ready, worker 2 answers 503 on its socket, worker 3 was served with no readiness (503 too),
    worker 4 never started: worker 0 hears 2, 3 and 4 are not ready."""

    async def yes() -> bool:
        return True

    async def no() -> bool:
        return False

    runners = [
        await serve_own(WorkerSet(tmp_path, 1, 5), CollectorRegistry(), yes),
        await serve_own(WorkerSet(tmp_path, 2, 5), CollectorRegistry(), no),
        await serve_own(WorkerSet(tmp_path, 3, 5), CollectorRegistry()),
    ]
    try:
        assert await not_ready(WorkerSet(tmp_path, 0, 5)) == [2, 3, 4]
        assert await not_ready(WorkerSet(tmp_path, 2, 3)) == [0]  # a worker does not ask itself
    finally:
        for runner in runners:
            await runner.cleanup()


def test_public_api() -> None:
    assert set(mod.__all__) == {
        "WORKERS_KEY", "WorkerSet", "gather", "merge", "not_ready", "serve_own", "socket_path",
    }  # fmt: skip
