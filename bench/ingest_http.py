"""Async ingestion over HTTP: time from ``POST /v1/ingest`` to ``succeeded`` for N short entries.

Starts ``fabric serve`` as a child process on a loopback port with a scratch home, waits for ``/readyz``, posts
``--entries`` knowledge-base style entries (one or two sentences each, generated from a fixed seed) with
``"async": true``, polls the task every ``--poll-s`` and, meanwhile, sends one search every ``--search-every-s``
to show that the service keeps answering: search p95 during the ingest against idle (before and after, one run)
and the largest event-loop lag the service measured (``fabric_event_loop_lag_max_seconds``). Embeddings use the
configured embedder (MiniLM by default) with
``--cache-dir`` as ``FABRIC_CACHE_DIR``; ``--fresh-cache`` empties that folder's embedding cache first, so the
run embeds every entry (the figures say whether the cache was cold).

Run it as ``python -m bench.ingest_http --json`` (module protocol of :mod:`bench`: ``add_arguments``
and ``run``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

__all__ = ["add_arguments", "make_entries", "run"]

_TOPICS = (
    "blue-green deploys", "canary releases", "feature flags", "database migrations", "release rollbacks",
    "incident reviews", "on-call handoffs", "cache invalidation", "rate limiting", "schema changes",
    "secret rotation", "log retention", "backup restores", "queue back-pressure", "TLS certificates",
    "DNS failover", "load shedding", "index rebuilds", "dependency upgrades", "access reviews",
)  # fmt: skip
_SERVICES = ("billing", "search", "checkout", "auth", "ingest", "reports", "gateway", "mailer", "catalog", "ledger")
_ACTIONS = (
    "must finish within {n} minutes", "need a second reviewer", "are announced in the ops channel",
    "run behind a kill switch", "are rehearsed every {n} weeks", "keep an audit entry",
    "page the owner after {n} errors",
    "are blocked during freezes", "use the shared runbook", "roll back if the error rate exceeds {n}%",
)  # fmt: skip
_EXTRA = (
    "Owner: team {team}.", "See runbook RB-{n}.", "Decided in review {n}.", "Applies to region eu-{n}.", "",
)  # fmt: skip
_QUERIES = ("how to roll back a release", "canary for checkout", "secret rotation policy", "who owns billing")


def make_entries(n: int, seed: int = 7) -> list[dict[str, str]]:
    """``n`` distinct short entries (``id``, ``title``, ``text``), deterministic for a seed."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        topic, service = rng.choice(_TOPICS), rng.choice(_SERVICES)
        action = rng.choice(_ACTIONS).format(n=rng.randint(2, 60))
        extra = rng.choice(_EXTRA).format(team=rng.choice(_SERVICES), n=rng.randint(10, 999))
        text = f"{topic.capitalize()} for {service} {action} (note {i})." + (f" {extra}" if extra else "")
        out.append({"id": f"kb-{i:05d}", "title": f"{service}: {topic}", "text": text})
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this benchmark."""
    parser.add_argument("--entries", type=int, default=10_000, help="entries to submit (default 10000)")
    parser.add_argument("--cache-dir", default="", help="FABRIC_CACHE_DIR of the server (default: a temp folder)")
    parser.add_argument("--fresh-cache", action="store_true", help="remove <cache-dir>/embeddings first (cold cache)")
    parser.add_argument("--poll-s", type=float, default=0.5, help="task polling interval")
    parser.add_argument("--search-every-s", type=float, default=1.0, help="one search per interval during ingestion")
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="give up after this long")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cached_vectors(cache_dir: Path) -> int:
    """Vectors already in the embedding cache under ``cache_dir`` (0 when there is none)."""
    total = 0
    for db in cache_dir.glob("embeddings/*/vectors.sqlite"):
        with sqlite3.connect(db) as conn:
            total += conn.execute("SELECT COUNT(*) FROM vec").fetchone()[0]
    return total


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


async def _search_ms(http: aiohttp.ClientSession, base: str, query: str) -> float:
    t0 = time.perf_counter()
    async with http.post(f"{base}/v1/search", json={"query": query, "top_k": 5}) as resp:
        await resp.read()
    return (time.perf_counter() - t0) * 1000.0


async def _drive(base: str, entries: list[dict[str, str]], args: argparse.Namespace) -> dict[str, Any]:
    timeout = aiohttp.ClientTimeout(total=args.timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        deadline = time.monotonic() + 300.0
        while True:  # model loading happens before the service is ready
            try:
                async with http.get(f"{base}/readyz") as resp:
                    if resp.status == 200:
                        break
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("fabric serve did not become ready in 300 s")
            await asyncio.sleep(0.5)
        before = [await _search_ms(http, base, q) for q in _QUERIES * 3]
        body = json.dumps({"entries": entries, "async": True}).encode()
        t0 = time.perf_counter()
        async with http.post(f"{base}/v1/ingest", data=body, headers={"Content-Type": "application/json"}) as resp:
            submitted = await resp.json()
            status_code = resp.status
        accepted_s = time.perf_counter() - t0
        if status_code != 202:
            raise RuntimeError(f"POST /v1/ingest answered {status_code}: {submitted}")
        during: list[float] = []
        task: dict[str, Any] = submitted
        next_search = time.perf_counter()
        while task["status"] not in ("succeeded", "failed"):
            if time.perf_counter() >= next_search:
                during.append(await _search_ms(http, base, _QUERIES[len(during) % len(_QUERIES)]))
                next_search += args.search_every_s
            await asyncio.sleep(args.poll_s)
            async with http.get(f"{base}{submitted['status_url']}") as resp:
                task = await resp.json()
        total_s = time.perf_counter() - t0
        after = [await _search_ms(http, base, q) for q in _QUERIES * 3]
        async with http.get(f"{base}/metrics") as resp:
            lag_max_ms = _metric(await resp.text(), "fabric_event_loop_lag_max_seconds") * 1000.0
        async with http.post(f"{base}/v1/ingest", data=body, headers={"Content-Type": "application/json"}) as resp:
            again = await resp.json()
    return {
        "status": task["status"],
        "error": task["error"],
        "post_to_succeeded_s": round(total_s, 2),
        "post_accepted_ms": round(accepted_s * 1000.0, 1),
        "entries_per_s": round(len(entries) / total_s, 1),
        "report_seconds": (task["report"] or {}).get("seconds"),
        "report_counts": {k: (task["report"] or {}).get(k) for k in ("docs", "created", "unchanged", "embedded")},
        "progress": task["progress"],
        "resubmit_same_task": again.get("task_id") == submitted["task_id"],
        "search_p50_ms_before": _pct(before, 0.5),
        "search_p50_ms_during": _pct(during, 0.5),
        "search_max_ms_during": round(max(during), 1) if during else None,
        "searches_during": len(during),
        "search_p50_ms_after": _pct(after, 0.5),
        "search_p95_ms_idle": _pct(before + after, 0.95),
        "search_p95_ms_during": _pct(during, 0.95),
        "search_p95_ratio_during_vs_idle": _ratio(_pct(during, 0.95), _pct(before + after, 0.95)),
        "loop_lag_max_ms": round(lag_max_ms, 1),
    }


def _metric(text: str, name: str) -> float:
    """One unlabelled sample of a Prometheus text exposition (0.0 when absent)."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Serve, submit, poll; the figures as a dict."""
    entries = make_entries(args.entries)
    scratch = Path(tempfile.mkdtemp(prefix="fabric-ingest-bench-"))
    cache_dir = Path(args.cache_dir) if args.cache_dir else scratch / "cache"
    if args.fresh_cache:
        shutil.rmtree(cache_dir / "embeddings", ignore_errors=True)
    cached_before = _cached_vectors(cache_dir)
    port = _free_port()
    env = {**os.environ, "FABRIC_HOME": str(scratch / "home"), "FABRIC_CACHE_DIR": str(cache_dir)}
    cmd = [sys.executable, "-m", "fabric.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        figures = asyncio.run(_drive(f"http://127.0.0.1:{port}", entries, args))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(scratch, ignore_errors=True)
    body_bytes = len(json.dumps({"entries": entries, "async": True}).encode())
    load = os.getloadavg()
    return {
        "entries": len(entries),
        "body_bytes": body_bytes,
        "cache_dir": str(cache_dir),
        "cache_vectors_before": cached_before,
        "cache_cold": cached_before == 0,
        **figures,
        "loadavg_1m_5m": [round(load[0], 2), round(load[1], 2)],
        "median_entry_chars": statistics.median(len(e["title"]) + len(e["text"]) for e in entries),
    }


def main() -> int:
    """``python -m bench.ingest_http [--json]``."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_arguments(parser)
    args = parser.parse_args()
    figures = run(args)
    if args.json:
        print(json.dumps(figures, indent=2, sort_keys=True))
    else:
        for key, value in figures.items():
            print(f"{key:32} {value}")
    return 0 if figures["status"] == "succeeded" else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
