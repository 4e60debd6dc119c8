"""Open-loop load against a ``fabric serve`` child process: fixed arrival rates, whatever the answers do.

:class:`ServeProcess` starts ``python -m fabric.cli serve`` on a free loopback port over a home (its own empty
embedding cache, so the server encodes every query itself) and waits for ``/readyz``. :func:`drive` then sends, for
each rate, ``POST /v1/search`` at exactly ``rate`` per second for ``seconds``: arrival ``i`` is due at ``start + i /
rate`` and is sent in its own task, so a slow answer never delays the next arrival (constant arrivals; a client that
falls behind sends at once and reports it as ``send_lag_p95_ms`` and ``send_lag_max_ms``; its own heap is frozen out
of the collector first). Queries cycle through the given texts; unless ``repeat_queries``, each request's text is
made unique by a few trailing English stopwords (:func:`unique_query`: the keyword and graph lanes drop them), so no
answer comes from the server's embedding cache and every request pays its own encoding.

Per rate: ``rps_target``, ``rps_achieved`` (answers of any status per second of the window from the first send
to the last answer), ``p50_ms``/``p95_ms``/``p99_ms`` (``200`` answers), ``errors`` (client failures and
statuses other than 200/429/503), ``rejected`` (429 and 503 with ``Retry-After``; ``rejected_p95_ms`` how
fast, ``rejected_by_10s`` when), ``empty_answers`` (200 with no item), ``partial_answers``,
``cpu_ms_per_query`` (the server's CPU time over the rate divided by its 200 answers), ``rss_mb`` (the
server's resident memory after the rate) and ``not_closed_after`` (built lanes whose circuit is not closed
after the rate, from ``/readyz``).
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import aiohttp

__all__ = ["LoadPlan", "ServeProcess", "drive", "unique_query"]

_SUFFIX_WORDS = ("the", "of", "and", "a", "in", "to", "is", "for", "on", "with", "as", "by", "at", "an", "be", "or")
"""English function words the keyword lane and the graph lane both ignore (base-16 digits of a request number)."""


def unique_query(text: str, i: int) -> str:
    """``text`` followed by stopwords spelling ``i`` in base 16: a text no earlier request sent."""
    words = []
    n = i
    while True:
        words.append(_SUFFIX_WORDS[n % 16])
        n //= 16
        if n == 0:
            break
    return f"{text} {' '.join(words)}"


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """What :func:`drive` sends."""

    queries: tuple[str, ...]
    rates: tuple[float, ...] = (25.0, 50.0, 100.0, 150.0)
    seconds: float = 60.0
    warmup_s: float = 5.0
    pause_s: float = 2.0
    timeout_s: float = 30.0
    repeat_queries: bool = False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux ``/proc/<pid>/task/<tid>/children``)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo.extend(int(c) for c in task.read_text().split())
            except (OSError, ValueError):
                continue
    return out


class ServeProcess:
    """``fabric serve`` over ``home`` as a child process on a free loopback port (a context manager).

    Args:
        home: the fabric home to serve.
        cache_dir: the child's ``FABRIC_CACHE_DIR`` (empty: every query is encoded by the server).
        serve_args: extra ``fabric serve`` options (``--max-active 4``, ``--rate 1000``, ...).
        log_path: where the child's output goes.
        state_url: the PostgreSQL database of a replica (``FABRIC_STATE_URL``, docs/replicas.md), or "".
    """

    def __init__(
        self, home: Path, cache_dir: Path, serve_args: tuple[str, ...], log_path: Path, state_url: str = ""
    ) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "FABRIC_HOME": str(home), "FABRIC_CACHE_DIR": str(cache_dir)}
        if state_url:
            env["FABRIC_STATE_URL"] = state_url
        cmd = [sys.executable, "-m", "fabric.cli", "serve", "--port", str(self.port), *serve_args]
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    async def ready(self, timeout_s: float = 300.0) -> None:
        """Wait until ``/readyz`` answers 200 (the engine opened, the model loaded)."""
        deadline = time.monotonic() + timeout_s
        async with aiohttp.ClientSession() as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"fabric serve exited ({self.proc.returncode}); see {self.log_path}")
                try:
                    async with client.get(f"{self.url}/readyz") as resp:
                        if resp.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.25)
        raise RuntimeError(f"fabric serve not ready within {timeout_s:.0f} s; see {self.log_path}")

    def cpu_s(self) -> float | None:
        """User + system CPU seconds so far of the child and its own children (``--workers``), or None (Linux
        ``/proc``)."""
        total, seen = 0.0, False
        for pid in _process_tree(self.proc.pid):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            seen = True
        return total if seen else None

    def rss_mb(self) -> float | None:
        """Resident memory of the child and its own children in MB (Linux ``/proc``), or None."""
        total, seen = 0, False
        for pid in _process_tree(self.proc.pid):
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        seen = True
            except OSError:
                continue
        return round(total / 1024.0, 1) if seen else None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


@dataclass(slots=True)
class _Answer:
    status: int
    ms: float
    items: int = 0
    partial: bool = False
    retry_after: bool = False
    replica: int = 0
    reason: str = ""
    """Why a 429/503 was refused: the body's ``error.reason`` (``queue_full``, ``expected_wait``, ``queue_timeout``)
    or ``error.limit`` (a tenant's ``rate``, ``concurrency``)."""


async def _one(client: aiohttp.ClientSession, url: str, query: str, replica: int = 0) -> _Answer:
    t0 = time.perf_counter()
    try:
        async with client.post(url, json={"query": query, "top_k": 10}) as resp:
            body = await resp.json(content_type=None)
            ms = (time.perf_counter() - t0) * 1000.0
            if resp.status != 200:
                error = body.get("error") if isinstance(body, dict) else None
                # admission names error.reason (queue_full, expected_wait, queue_timeout); a tenant's limit
                # error.limit (rate, ...)
                reason = str(error.get("reason") or error.get("limit") or "") if isinstance(error, dict) else ""
                return _Answer(
                    resp.status, ms, retry_after="Retry-After" in resp.headers, replica=replica, reason=reason
                )
            partial = any(lane.get("status") != "success" for lane in body.get("lanes", {}).values())
            return _Answer(200, ms, len(body.get("items", [])), partial, replica=replica)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return _Answer(0, (time.perf_counter() - t0) * 1000.0, replica=replica)


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 1)


async def _rate(
    client: aiohttp.ClientSession, urls: Sequence[str], plan: LoadPlan, rate: float, seconds: float, first: int
) -> tuple[list[_Answer], float, list[float]]:
    """Send ``rate`` × ``seconds`` requests on schedule, request ``k`` to ``urls[k % len(urls)]`` (round robin over
    replicas); the answers, the window's length and the send lags."""
    loop = asyncio.get_running_loop()
    n = max(1, round(rate * seconds))
    start = loop.time() + 0.05
    tasks: list[asyncio.Task[_Answer]] = []
    lags: list[float] = []
    for i in range(n):
        due = start + i / rate
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        lags.append(max(0.0, (loop.time() - due) * 1000.0))
        k = first + i
        text = plan.queries[k % len(plan.queries)]
        query = text if plan.repeat_queries else unique_query(text, k)
        tasks.append(loop.create_task(_one(client, urls[k % len(urls)], query, k % len(urls))))
    answers = list(await asyncio.gather(*tasks))
    return answers, loop.time() - start, lags


def _by_window(answers: list[_Answer], rate: float, window_s: float) -> list[int]:
    """Refusals (429/503) per ``window_s`` of the schedule (answer ``i`` was due at ``i / rate``): whether they
    came in one burst, at the start, or all along."""
    per = max(1, round(rate * window_s))
    return [sum(a.status in (429, 503) for a in answers[i : i + per]) for i in range(0, len(answers), per)]


def _figures(rate: float, answers: list[_Answer], window_s: float, lags: list[float]) -> dict[str, Any]:
    ok = [a for a in answers if a.status == 200]
    rejected = [a for a in answers if a.status in (429, 503)]
    return {
        "rps_target": rate,
        "rps_achieved": round(len(answers) / window_s, 1) if window_s > 0 else None,
        "requests": len(answers),
        "ok": len(ok),
        "p50_ms": _pct([a.ms for a in ok], 0.5),
        "p95_ms": _pct([a.ms for a in ok], 0.95),
        "p99_ms": _pct([a.ms for a in ok], 0.99),
        "errors": len(answers) - len(ok) - len(rejected),
        "rejected": len(rejected),
        "rejected_429": sum(a.status == 429 for a in rejected),
        "rejected_503": sum(a.status == 503 for a in rejected),
        # which bound refused them: the queue's length (queue_full), its expected wait (expected_wait), its wait
        # (queue_timeout), a tenant's rate...
        "rejected_by_reason": dict(sorted(Counter(a.reason or f"http_{a.status}" for a in rejected).items())),
        "rejected_without_retry_after": sum(not a.retry_after for a in rejected),
        "rejected_p95_ms": _pct([a.ms for a in rejected], 0.95),
        "rejected_by_10s": _by_window(answers, rate, 10.0),
        "empty_answers": sum(a.items == 0 for a in ok),
        "partial_answers": sum(a.partial for a in ok),
        "send_lag_p95_ms": _pct(lags, 0.95),
        "send_lag_max_ms": round(max(lags), 1) if lags else None,
    }


async def _not_closed(client: aiohttp.ClientSession, url: str) -> list[str]:
    async with client.get(f"{url}/readyz") as resp:
        lanes = (await resp.json()).get("lanes", {})
    health = {name: lane.get("health") for name, lane in lanes.items()}  # None: the lane is not built
    return sorted(name for name, h in health.items() if h is not None and h.get("state") != "closed")


async def drive(servers: Sequence[ServeProcess], plan: LoadPlan) -> list[dict[str, Any]]:
    """Warm the servers up, then run every rate of ``plan`` against them (round robin); one figures dict per rate.
    CPU per query and RSS add up over the servers."""
    urls = [f"{server.url}/v1/search" for server in servers]
    out: list[dict[str, Any]] = []
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=plan.timeout_s)

    def total(values: list[float | None]) -> float | None:
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    # The bench timed searches in this process before (an engine, its model, maybe torch): move that heap out of
    # the collector's reach, so a full collection of the load generator does not hold back a second of arrivals.
    gc.collect()
    gc.freeze()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:
        sent = 0
        if plan.warmup_s > 0:
            warm_rate = min(plan.rates)
            await _rate(client, urls, plan, warm_rate, plan.warmup_s, sent)
            sent += round(warm_rate * plan.warmup_s)
        for rate in plan.rates:
            await asyncio.sleep(plan.pause_s)
            cpu0 = total([s.cpu_s() for s in servers])
            answers, window_s, lags = await _rate(client, urls, plan, rate, plan.seconds, sent)
            sent += len(answers)
            cpu1 = total([s.cpu_s() for s in servers])
            figures = _figures(rate, answers, window_s, lags)
            ok = figures["ok"]
            cpu_ms = (cpu1 - cpu0) * 1000.0 / ok if cpu0 is not None and cpu1 is not None and ok else None
            figures["cpu_ms_per_query"] = round(cpu_ms, 2) if cpu_ms is not None else None
            figures["ok_by_replica"] = [
                sum(a.status == 200 and a.replica == i for a in answers) for i in range(len(urls))
            ]
            rss = total([s.rss_mb() for s in servers])
            figures["rss_mb"] = round(rss, 1) if rss is not None else None
            closed = [await _not_closed(client, s.url) for s in servers]
            figures["not_closed_after"] = sorted({name for names in closed for name in names})
            out.append(figures)
    return out
