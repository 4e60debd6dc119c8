"""Instruction counts of fusion and of one engine query (valgrind callgrind): figures the machine's state cannot move.

The wall-clock benches (``budget``, ``fusion``) move by ±30 % within minutes on a shared machine, so two versions of
the code cannot be compared by running them an hour apart. Counted instructions do not depend on the machine's load
or clock speed: each workload runs in a child process under ``valgrind --tool=callgrind`` (one child per core at a
time, since the load cannot move a count) twice, with ``calls`` timed operations and with none, after the same
set-up, and the difference divided by ``calls`` is the cost of one operation (``PYTHONHASHSEED=0``, one OpenBLAS
thread: its idle workers spin, and their instructions made a run's total vary by a few million; with one thread two
runs agree within a few dozen instructions). Each workload still repeats its operation (``--calls`` fusion calls, 10
× as many floor calls, 5 × as many small fusions, ``--queries`` engine queries).
Workloads:

- ``fusion_6x50``: ``fuse`` on 6 lanes × 50 hits plus the first page of 10 (``fabric bench fusion``'s call);
- ``floor_6x50``: the plain 15-line RRF on the same hits (the floor of ``fabric bench fusion``);
- ``fusion_3x10``: ``fuse`` on the budget bench's 3 healthy lanes × 10 hits plus a 30-item page;
- ``engine_query``: one ``Engine.search`` with the budget bench's six lanes, the three failing providers
  suspended and the healthy lanes answering at once (the engine's own work, no waiting).

Each operation gets freshly built inputs, built outside the counted difference. Needs Debian's ``valgrind``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

__all__ = ["WORKLOADS", "add_arguments", "parse_collected", "run", "workload"]

WORKLOADS = ("fusion_6x50", "floor_6x50", "fusion_3x10", "engine_query")
"""Workload names, in report order."""

_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")
_SCALE = {"floor_6x50": 10, "fusion_3x10": 5}
"""Operations per ``--calls`` for the cheap workloads: a run's total varies by a few million instructions (start-up
under valgrind), so cheap operations need more repeats to stand clear of it."""


def parse_collected(stderr: str) -> int:
    """The instruction total callgrind prints at exit (``==pid== Collected : N``).

    Raises:
        ValueError: no total in the output.
    """
    m = _COLLECTED.search(stderr)
    if m is None:
        raise ValueError("callgrind printed no 'Collected' total")
    return int(m.group(1))


def _fusion_ops(name: str, calls: int, inputs: int) -> Callable[[], None]:
    from bench.fusion import _freeze, _thaw, plain_rrf
    from fabric.core.models import LaneKind, LaneOutcome, LaneStatus
    from fabric.settings import load_settings
    from fusion.pipeline import FusionContext, fuse
    from tests.support.hits import NOW, make_outcomes

    if name == "fusion_3x10":
        from bench import budget  # its lanes and settings: imported only by the workload that uses them

        settings = budget._settings(100.0, Path(tempfile.gettempdir()))
        lanes = budget._lanes(7)
        outcomes: dict[str, LaneOutcome] = {}
        for n in budget._HEALTHY:
            lane = lanes[n]
            assert isinstance(lane, budget._JitterLane)
            hits = tuple(lane._hits)
            outcomes[n] = LaneOutcome(lane=n, kind=LaneKind.KEYWORD, provider=n, status=LaneStatus.SUCCESS, hits=hits)
        frozen = _freeze(outcomes)
        ctx = FusionContext(config=settings.fusion, now=NOW, authority=settings.authority)
        page = 30
    else:
        frozen = _freeze(make_outcomes(6, 50))
        ctx = FusionContext(config=load_settings().fusion, now=NOW)
        page = 10
    built = [_thaw(frozen) for _ in range(max(calls, inputs) + 3)]  # the same set-up with or without calls
    for outcomes in built[:3]:  # warm-up (imports, first-call caches), counted in both runs
        fuse(outcomes, ctx).items[:page]
    todo = built[3 : 3 + calls]

    def go() -> None:
        for outcomes in todo:
            if name == "floor_6x50":
                plain_rrf(outcomes)
            else:
                fuse(outcomes, ctx).items[:page]

    return go


async def _engine_queries(calls: int) -> None:
    from bench import budget
    from fabric.core.models import LaneRequest, Mode, SearchRequest
    from fabric.query.engine import Engine
    from fabric.settings import PenaltyConfig

    class Prompt(budget._JitterLane):
        """A healthy bench lane that answers at once (one loop turn), so no time passes waiting."""

        async def search(self, request: LaneRequest) -> list[Any]:
            await asyncio.sleep(0)
            return self._hits[: request.top_k]

    request = SearchRequest(query="budget bench", top_k=50, mode=Mode.TECHNICAL, route="all")
    with tempfile.TemporaryDirectory(prefix="fabric-instr-") as tmp:
        settings = dataclasses.replace(
            budget._settings(100_000.0, Path(tmp)),
            penalties=PenaltyConfig(base_suspend_s=100_000.0, max_suspend_s=100_000.0),
        )
        lanes = budget._lanes(7)
        for name in budget._HEALTHY:
            lanes[name] = Prompt(name, random.Random(name))
        async with Engine(settings, lanes=lanes) as engine:
            for provider in ("hung_provider", "crash_provider", "limited_provider"):
                engine.executor.penalties.record_failure(provider, "forbidden")
            for _ in range(5):
                result = await engine.search(request)
            statuses = {name: out.status.value for name, out in result.lanes.items()}
            if len(result.items) != 30 or sorted(statuses.values()) != ["success"] * 3 + ["suspended"] * 3:
                raise RuntimeError(f"engine workload is not in its measured state: {statuses}")
            for _ in range(calls):
                await engine.search(request)


def workload(name: str, calls: int, inputs: int = 0) -> None:
    """Run ``calls`` operations of workload ``name`` after a set-up that builds ``max(calls, inputs)`` inputs.

    The parent runs each workload with ``calls=0, inputs=n`` and ``calls=n, inputs=n``, so both runs build the
    same inputs and only the operations differ.
    """
    from fabric.core.logs import configure_logging

    configure_logging(level="CRITICAL")
    if name == "engine_query":
        asyncio.run(_engine_queries(calls))
        return
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}")
    _fusion_ops(name, calls, inputs)()


def _count(valgrind: str, name: str, calls: int, inputs: int) -> int:
    # One BLAS thread: idle OpenBLAS workers spin, and their instructions would count as noise.
    env = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    cmd = [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m", __name__]
    proc = subprocess.run(
        [*cmd, "--workload", name, "--calls", str(calls), "--inputs", str(inputs)],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[1],  # the repository root, where ``bench`` is importable
        check=False,
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"workload {name} failed under callgrind (exit {proc.returncode}):\n{tail}")
    return parse_collected(proc.stderr)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``fabric bench instructions``."""
    parser.add_argument("--calls", type=int, default=100, help="fusion calls per workload (default 100)")
    parser.add_argument("--queries", type=int, default=200, help="engine queries (default 200)")
    parser.add_argument(
        "--workload", dest="workloads", action="append", choices=WORKLOADS, help="only this workload (repeatable)"
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Count every workload twice under callgrind (the runs in parallel, one per core) and return instructions per
    operation."""
    from fabric.core.errors import QueryError

    if args.calls < 1 or args.queries < 1:
        raise QueryError("bench", "--calls and --queries must be positive")
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise QueryError("bench", "valgrind not found: install it (Debian: apt-get install valgrind) to count")
    from rich.progress import Progress

    names = args.workloads or list(WORKLOADS)
    ops = {n: args.queries if n == "engine_query" else args.calls * _SCALE.get(n, 1) for n in names}
    runs = [(name, calls) for name in names for calls in (0, ops[name])]  # set-up only, then with the operations
    counted: dict[tuple[str, int], int] = {}
    # One child per core at a time: a process's count does not depend on what else runs, only the wall time does.
    with (
        Progress(transient=True, disable=not sys.stderr.isatty()) as progress,
        ThreadPoolExecutor(max_workers=max(1, min(len(runs), os.cpu_count() or 1))) as pool,
    ):
        task = progress.add_task(f"callgrind: {len(runs)} runs of {', '.join(names)}", total=len(runs))
        futures = {pool.submit(_count, valgrind, name, calls, ops[name]): (name, calls) for name, calls in runs}
        for future in as_completed(futures):
            counted[futures[future]] = future.result()
            progress.advance(task)
    out: dict[str, Any] = {}
    for name in names:
        out[f"{name}_instructions"] = round((counted[name, ops[name]] - counted[name, 0]) / ops[name])
    if "fusion_6x50_instructions" in out and "floor_6x50_instructions" in out:
        out["ratio_to_floor_6x50"] = round(out["fusion_6x50_instructions"] / out["floor_6x50_instructions"], 2)
    out["calls"], out["queries"] = args.calls, args.queries
    out["operations"] = ops
    return out


def _main() -> None:
    parser = argparse.ArgumentParser(description="one workload of fabric bench instructions (run under callgrind)")
    parser.add_argument("--workload", required=True, choices=WORKLOADS)
    parser.add_argument("--calls", type=int, required=True)
    parser.add_argument("--inputs", type=int, default=0)
    args = parser.parse_args()
    workload(args.workload, args.calls, args.inputs)


if __name__ == "__main__":
    _main()
