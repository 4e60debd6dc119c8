"""The fault proxy in front of a real SearXNG lane (loopback upstream): every fault ends as the right lane error."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

import tools.faultproxy as mod
from fabric.core.errors import LaneBadResponse, LaneRejected, LaneTimeout, LaneUnavailable
from fabric.core.models import LaneKind, LaneRequest
from fabric.query.sanitize import sanitize_hits
from lanes.base import LaneResources, LaneSpec
from lanes.web.searxng import SearxngWebLane
from tests.lanes.web.test_searxng import searxng_app
from tests.support.http import guarded, serve
from tools.faultproxy import Fault, FaultProxy, inject_bad_unicode


@pytest.fixture
async def proxied() -> AsyncIterator[tuple[FaultProxy, SearxngWebLane]]:
    """A SearXNG lane whose upstream sits behind a fault proxy."""
    async with (
        serve(searxng_app({})) as upstream,
        FaultProxy(f"http://127.0.0.1:{upstream.port}") as proxy,
        guarded(["127.0.0.1"]) as session,
    ):
        spec = LaneSpec(name="web", kind=LaneKind.WEB, backend="searxng", options={"url": proxy.url, "timeout_s": 2.0})
        yield proxy, SearxngWebLane(spec, LaneResources(http=session))


async def _search(lane: SearxngWebLane, timeout_s: float = 5.0) -> Any:
    async with asyncio.timeout(timeout_s):
        return await lane.search(LaneRequest(query="alpha", top_k=10))


class TestFaults:
    async def test_passes_through_when_disarmed(self, proxied: tuple[FaultProxy, SearxngWebLane]) -> None:
        """Without a fault the lane sees the upstream's answer."""
        proxy, lane = proxied
        assert len(await _search(lane)) == 2
        assert proxy.seen == {"pass": 1}

    @pytest.mark.parametrize(
        ("fault", "params", "error"),
        [
            (Fault.STATUS, {"status": 502}, LaneUnavailable),
            (Fault.RESET, {}, LaneUnavailable),
            (Fault.MALFORMED, {}, LaneBadResponse),
            (Fault.OVERSIZED, {"size_bytes": 6 * 1024 * 1024}, LaneBadResponse),
            (Fault.DEEP, {}, LaneBadResponse),
        ],
    )
    async def test_fault_is_the_right_lane_error(
        self, proxied: tuple[FaultProxy, SearxngWebLane], fault: Fault, params: dict[str, Any], error: type
    ) -> None:
        """Each fault surfaces as its typed lane error, never a crash."""
        proxy, lane = proxied
        proxy.arm(fault, **params)
        with pytest.raises(error):
            await _search(lane)
        # aiohttp re-sends an idempotent request once when the server drops the connection: a reset is seen twice
        assert proxy.seen[fault.value] == (2 if fault is Fault.RESET else 1)

    async def test_rate_limited_carries_retry_after(self, proxied: tuple[FaultProxy, SearxngWebLane]) -> None:
        """429 + Retry-After becomes LaneRejected with suspend_s."""
        proxy, lane = proxied
        proxy.arm(Fault.RATE_LIMITED, retry_after_s=42)
        with pytest.raises(LaneRejected) as err:
            await _search(lane)
        assert (err.value.failure, err.value.suspend_s) == ("rate_limited", 42.0)

    @pytest.mark.parametrize("fault", [Fault.HANG, Fault.SLOW_BODY])
    async def test_hang_and_slow_body_time_out(self, proxied: tuple[FaultProxy, SearxngWebLane], fault: Fault) -> None:
        """A hung answer or a body trickling 1 byte per second runs into the lane's own request timeout."""
        proxy, lane = proxied
        lane.timeout_s = 0.3
        proxy.arm(fault, chunk_bytes=1, delay_s=1.0)
        with pytest.raises(LaneTimeout):
            await _search(lane)

    async def test_bad_unicode_is_repaired_at_the_boundary(self, proxied: tuple[FaultProxy, SearxngWebLane]) -> None:
        """Lone surrogates in the upstream's strings reach the lane; the boundary repairs them."""
        proxy, lane = proxied
        proxy.arm(Fault.BAD_UNICODE)
        hits = sanitize_hits(await _search(lane), lane="web", provider="searxng")
        assert hits
        assert all("\ufffd" in h.title for h in hits)
        json.dumps([h.title for h in hits], ensure_ascii=False).encode("utf-8")

    async def test_times_then_recovers(self, proxied: tuple[FaultProxy, SearxngWebLane]) -> None:
        """A fault armed for two requests is served twice, then the upstream answers again."""
        proxy, lane = proxied
        proxy.arm(Fault.STATUS, times=2)
        for _ in range(2):
            with pytest.raises(LaneUnavailable):
                await _search(lane)
        assert len(await _search(lane)) == 2
        assert proxy.seen == {"status": 2, "pass": 1}


def test_inject_bad_unicode_keeps_urls() -> None:
    """JSON strings get an escaped lone surrogate, URLs stay usable; other bodies get the raw bytes ED A0 80."""
    out = json.loads(inject_bad_unicode(b'{"url": "https://a.org/", "title": "T", "n": 1}'))
    assert out == {"url": "https://a.org/", "title": "T\ud800", "n": 1}
    assert b"\xed\xa0\x80" in inject_bad_unicode(b"<rss><title>x</title></rss>")


def test_public_api() -> None:
    """The module exports exactly its documented names."""
    assert set(mod.__all__) == {"Fault", "FaultPlan", "FaultProxy", "inject_bad_unicode"}
