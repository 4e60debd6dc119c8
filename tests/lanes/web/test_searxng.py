"""SearxngWebLane against a loopback server speaking SearXNG's ``/search?format=json`` API."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web

import lanes.web.searxng as mod
from fabric.core.errors import ConfigError, LaneBadResponse, LaneRejected, LaneTimeout, LaneUnavailable
from fabric.core.models import BoundConstraints, LaneKind, LaneRequest, SourceKind
from lanes.base import LaneResources, LaneSpec
from lanes.web.searxng import SearxngWebLane
from tests.support.http import guarded, serve

RESULTS = [
    {
        "url": "https://www.example.org/a?utm_source=x",
        "title": "Alpha <b>result</b>",
        "content": "About alpha.",
        "engine": "duckduckgo",
        "engines": ["duckduckgo", "brave"],
        "score": 4.0,
        "category": "general",
        "publishedDate": "2024-05-01T00:00:00",
        "parsed_url": ["https", "www.example.org", "/a", "", "", ""],
        "positions": [1, 2],
    },
    {
        "url": "https://docs.python.org/3/library/asyncio.html",
        "title": "asyncio",
        "content": "Async I/O.",
        "engine": "brave",
        "engines": ["brave"],
        "score": 2.0,
        "category": "general",
        "publishedDate": None,
    },
    {"url": "https://example.org/a", "title": "dup", "content": "", "engines": ["x"], "score": 1.0},
    {"title": "no url"},
]


def searxng_app(state: dict[str, Any]) -> web.Application:
    """A SearXNG stand-in: 403 unless format=json is enabled, optional 429/500/hang modes."""

    async def search(req: web.Request) -> web.StreamResponse:
        state.setdefault("params", []).append(dict(req.query))
        mode = state.get("mode")
        if mode == "hang":
            await asyncio.sleep(30)
        if mode == "slow":
            await asyncio.sleep(0.3)
        if mode == "429":
            return web.Response(status=429, text="Too Many Requests", headers={"Retry-After": "30"})
        if mode == "500":
            return web.Response(status=500, text="Internal Server Error")
        if mode == "html":
            return web.Response(text="<html>captcha</html>", content_type="text/html")
        if req.query.get("format") != "json" or not state.get("json_enabled", True):
            return web.Response(status=403, text="Forbidden")
        return web.json_response(
            {
                "query": req.query["q"],
                "number_of_results": 0,
                "results": RESULTS,
                "answers": [],
                "corrections": [],
                "infoboxes": [],
                "suggestions": [],
                "unresponsive_engines": [],
            }
        )

    app = web.Application()
    app.router.add_get("/search", search)
    return app


def _lane(port: int, session: Any, **opts: Any) -> SearxngWebLane:
    spec = LaneSpec(
        name="web", kind=LaneKind.WEB, backend="searxng", options={"url": f"http://searxng.test:{port}", **opts}
    )
    return SearxngWebLane(spec, LaneResources(http=session))


class TestSearxngWebLane:
    async def test_results_become_hits(self) -> None:
        """Results map to hits with normalised URL ids, domain, snippet, date; duplicates and bad rows dropped."""
        state: dict[str, Any] = {}
        async with serve(searxng_app(state)) as srv, guarded(["searxng.test"]) as session:
            hits = await _lane(srv.port, session).search(LaneRequest(query="alpha", top_k=10))
        assert [h.id for h in hits] == ["https://example.org/a", "https://docs.python.org/3/library/asyncio.html"]
        first = hits[0]
        assert (first.rank, first.domain, first.title, first.text, first.score) == (
            1,
            "example.org",
            "Alpha result",
            "About alpha.",
            4.0,
        )
        assert first.published_at == datetime(2024, 5, 1, tzinfo=UTC)
        assert first.source_kind is SourceKind.WEB

    async def test_sends_documented_parameters(self) -> None:
        """The request carries q, format=json, pageno and configured categories/language."""
        state: dict[str, Any] = {}
        async with serve(searxng_app(state)) as srv, guarded(["searxng.test"]) as session:
            await _lane(srv.port, session, categories="general", language="en").search(LaneRequest(query="q1"))
        assert state["params"][0] == {
            "q": "q1",
            "format": "json",
            "pageno": "1",
            "categories": "general",
            "language": "en",
        }

    async def test_site_constraint_filters(self) -> None:
        """A site: constraint is sent to SearXNG and enforced on the results."""
        state: dict[str, Any] = {}
        request = LaneRequest(query="asyncio", constraints=BoundConstraints(sites=("python.org",)))
        async with serve(searxng_app(state)) as srv, guarded(["searxng.test"]) as session:
            hits = await _lane(srv.port, session).search(request)
        assert [h.domain for h in hits] == ["docs.python.org"]
        assert state["params"][0]["q"] == "asyncio site:python.org"

    async def test_date_constraint_drops_old_dated_results(self) -> None:
        """Dated results before date_from are dropped; undated ones are kept."""
        request = LaneRequest(query="a", constraints=BoundConstraints(date_from=datetime(2025, 1, 1, tzinfo=UTC)))
        async with serve(searxng_app({})) as srv, guarded(["searxng.test"]) as session:
            hits = await _lane(srv.port, session).search(request)
        assert [h.domain for h in hits] == ["docs.python.org"]

    async def test_json_format_disabled_is_forbidden(self) -> None:
        """SearXNG's 403 for a disabled format maps to a forbidden rejection."""
        async with serve(searxng_app({"json_enabled": False})) as srv, guarded(["searxng.test"]) as session:
            with pytest.raises(LaneRejected) as err:
                await _lane(srv.port, session).search(LaneRequest(query="a"))
        assert err.value.failure == "forbidden"

    async def test_rate_limited(self) -> None:
        """The limiter's 429 carries Retry-After as suspend_s."""
        async with serve(searxng_app({"mode": "429"})) as srv, guarded(["searxng.test"]) as session:
            with pytest.raises(LaneRejected) as err:
                await _lane(srv.port, session).search(LaneRequest(query="a"))
        assert err.value.suspend_s == 30.0

    async def test_server_error_unavailable(self) -> None:
        """A 500 is LaneUnavailable."""
        async with serve(searxng_app({"mode": "500"})) as srv, guarded(["searxng.test"]) as session:
            with pytest.raises(LaneUnavailable):
                await _lane(srv.port, session).search(LaneRequest(query="a"))

    async def test_html_answer_is_bad_response(self) -> None:
        """An HTML page instead of JSON is LaneBadResponse."""
        async with serve(searxng_app({"mode": "html"})) as srv, guarded(["searxng.test"]) as session:
            with pytest.raises(LaneBadResponse):
                await _lane(srv.port, session).search(LaneRequest(query="a"))

    async def test_hung_server_times_out(self) -> None:
        """A hung instance fails the request at the lane's timeout_s."""
        async with serve(searxng_app({"mode": "hang"})) as srv, guarded(["searxng.test"]) as session:
            with pytest.raises(LaneTimeout):
                await _lane(srv.port, session, timeout_s=0.2).search(LaneRequest(query="a"))

    async def test_slow_server_within_timeout_answers(self) -> None:
        """A slow answer well inside timeout_s is returned normally."""
        async with serve(searxng_app({"mode": "slow"})) as srv, guarded(["searxng.test"]) as session:
            hits = await _lane(srv.port, session, timeout_s=5.0).search(LaneRequest(query="a"))
        assert len(hits) == 2

    async def test_unlisted_host_refused(self) -> None:
        """A lane pointed at a host outside the allow-list never reaches it."""
        async with serve(searxng_app({})) as srv, guarded(["other.test"], names=["searxng.test"]) as session:
            with pytest.raises(LaneRejected, match="allow-list"):
                await _lane(srv.port, session).search(LaneRequest(query="a"))

    def test_missing_url_is_config_error(self) -> None:
        """A lane without url fails at construction, naming the key."""
        with pytest.raises(ConfigError, match=r"lanes\.web\.options\.url"):
            SearxngWebLane(LaneSpec(name="web", kind=LaneKind.WEB, backend="searxng"), LaneResources())


def test_public_api() -> None:
    """The module exports the lane class only."""
    assert mod.__all__ == ["BACKEND", "SearxngWebLane"]
