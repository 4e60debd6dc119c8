"""An in-memory lane with scripted hits, delays and failures, shipped for tests and benchmarks.

Config (``lanes.toml``)::

    [lanes.keyword]
    kind = "keyword"
    backend = "fake"
    options = { hits = 20, delay_ms = 5 }

Behaviours, chosen per instance:
- ``hits``: a list of :class:`~fabric.core.models.Hit` (or a count of synthetic hits ``{name}-{i}``);
- ``delay_ms``: async sleep before answering (honours cancellation);
- ``block_ms``: a *blocking* sleep in a worker thread that ignores cancellation (a hung SDK call);
- ``hang``: never answers (awaits an event that is never set);
- ``error``: an exception instance raised on every call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

from fabric.core.errors import LaneError
from fabric.core.models import Hit, LaneKind, LaneRequest
from lanes.base import Backend, BaseLane, LaneResources, LaneSpec

__all__ = ["BACKEND", "FakeLane", "synthetic_hits"]


def synthetic_hits(prefix: str, count: int) -> list[Hit]:
    """``count`` hits ``{prefix}-0 .. {prefix}-{count-1}`` with decreasing scores."""
    return [
        Hit(id=f"{prefix}-{i}", rank=i + 1, score=1.0 / (i + 1), title=f"{prefix} {i}", text=f"text {prefix} {i}")
        for i in range(count)
    ]


class FakeLane(BaseLane):
    """Scripted lane: returns fixed hits after a delay, or hangs, blocks, or raises."""

    def __init__(
        self,
        spec: LaneSpec | None = None,
        resources: LaneResources | None = None,
        *,
        name: str = "fake",
        kind: LaneKind = LaneKind.KEYWORD,
        provider: str = "fake",
        hits: Sequence[Hit] | int | None = None,
        delay_ms: float = 0.0,
        block_ms: float = 0.0,
        hang: bool = False,
        error: BaseException | None = None,
    ) -> None:
        if spec is None:
            spec = LaneSpec(name=name, kind=kind, backend="fake")
        super().__init__(spec, resources or LaneResources())
        opts = dict(spec.options)
        self.provider = str(opts.get("provider", provider))
        raw_hits = opts.get("hits", hits)
        if raw_hits is None:
            raw_hits = 10
        self._hits = synthetic_hits(self.name, raw_hits) if isinstance(raw_hits, int) else list(raw_hits)
        self.delay_ms = float(opts.get("delay_ms", delay_ms))
        self.block_ms = float(opts.get("block_ms", block_ms))
        self.hang = bool(opts.get("hang", hang))
        self.error = error
        if self.delay_ms < 0 or self.block_ms < 0:
            raise ValueError("delay_ms and block_ms must be >= 0")
        self.calls = 0
        self.closed = False

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Answer as scripted."""
        self.calls += 1
        if self.hang:
            await asyncio.Event().wait()
        if self.block_ms:
            done = threading.Event()
            # A worker thread that cannot be cancelled: the executor must abandon it, not wait.
            await asyncio.shield(asyncio.to_thread(done.wait, self.block_ms / 1000.0))
        if self.delay_ms:
            await asyncio.sleep(self.delay_ms / 1000.0)
        if self.error is not None:
            if isinstance(self.error, LaneError) and not self.error.provider:
                self.error.provider = self.provider
            raise self.error
        return self._hits[: request.top_k]

    async def aclose(self) -> None:
        """Mark closed."""
        self.closed = True


BACKEND = Backend(name="fake", lane=FakeLane)
"""The in-memory test lane (scripted hits, delays and failures)."""
