"""BraveWebLane against a loopback server speaking the Brave Search API (``/res/v1/web/search``)."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

import lanes.web.brave as mod
from fabric.core.errors import ConfigError, LaneBadResponse, LaneRejected
from fabric.core.models import BoundConstraints, LaneKind, LaneRequest, SourceKind
from fabric.settings import ENV_URLS
from lanes.base import LaneResources, LaneSpec
from lanes.registry import descriptor
from lanes.web.brave import BraveWebLane
from tests.support.http import guarded, serve

RESULTS = [
    {
        "title": "Reciprocal <strong>rank fusion</strong>",
        "url": "https://www.example.org/rrf?utm_source=brave",
        "description": "How <strong>RRF</strong> merges rankings.",
        "page_age": "2024-05-01T00:00:00",
        "age": "May 1, 2024",
        "meta_url": {"hostname": "www.example.org"},
    },
    {"title": "BM25", "url": "https://docs.example.com/bm25", "description": "Okapi BM25."},
    {"title": "dup", "url": "https://example.org/rrf", "description": ""},
    {"title": "no url"},
]


def brave_app(state: dict[str, Any]) -> web.Application:
    """Brave stand-in: checks the token, answers web results or an ErrorResponse."""

    async def search(req: web.Request) -> web.Response:
        state["params"] = dict(req.query)
        if req.headers.get("X-Subscription-Token") != "token":
            error = {"id": "x", "status": 422, "code": "SUBSCRIPTION_TOKEN_INVALID", "detail": "The token is invalid."}
            return web.json_response({"type": "ErrorResponse", "error": error}, status=401)
        if state.get("mode") == "429":
            error = {"id": "y", "status": 429, "code": "RATE_LIMITED", "detail": "Request rate limit exceeded."}
            return web.json_response(
                {"type": "ErrorResponse", "error": error}, status=429, headers={"Retry-After": "2"}
            )
        if state.get("mode") == "empty":
            return web.json_response({"type": "search", "query": {"original": req.query["q"]}})
        if state.get("mode") == "odd":
            return web.json_response({"type": "search", "web": {"results": "none"}})
        return web.json_response({"type": "search", "web": {"type": "search", "results": RESULTS}})

    app = web.Application()
    app.router.add_get("/res/v1/web/search", search)
    return app


def _lane(port: int, session: Any, **opts: Any) -> BraveWebLane:
    options = {"url": f"http://brave.test:{port}", "api_key": "token", **opts}
    return BraveWebLane(LaneSpec(name="brave", kind=LaneKind.WEB, backend="brave", options=options),
                        LaneResources(http=session))  # fmt: skip


async def _search(state: dict[str, Any], request: LaneRequest, **opts: Any) -> list[Any]:
    async with serve(brave_app(state)) as srv, guarded(["brave.test"]) as session:
        return await _lane(srv.port, session, **opts).search(request)


class TestBraveWebLane:
    async def test_results_become_hits(self) -> None:
        """Web results map to hits: normalised URL ids, stripped highlighting, dates; duplicates dropped."""
        hits = await _search({}, LaneRequest(query="rank fusion", top_k=10))
        assert [h.id for h in hits] == ["https://example.org/rrf", "https://docs.example.com/bm25"]
        first = hits[0]
        assert (first.rank, first.domain, first.title, first.text) == (
            1, "example.org", "Reciprocal rank fusion", "How RRF merges rankings.")  # fmt: skip
        assert (first.published_at.year, first.source_kind) == (2024, SourceKind.WEB)  # type: ignore[union-attr]

    async def test_sends_token_count_and_parameters(self) -> None:
        """The token goes in the header, ``count`` is capped at 20, Brave parameters pass when set."""
        state: dict[str, Any] = {}
        await _search(state, LaneRequest(query="q", top_k=50), country="us", search_lang="")
        assert state["params"] == {"q": "q", "count": "20", "country": "us"}

    async def test_single_site_goes_into_the_query_and_filters(self) -> None:
        """A single ``site:`` is passed to Brave and enforced on the hits."""
        state: dict[str, Any] = {}
        request = LaneRequest(query="bm25", constraints=BoundConstraints(sites=("example.com",)))
        hits = await _search(state, request)
        assert state["params"]["q"] == "bm25 site:example.com"
        assert [h.domain for h in hits] == ["docs.example.com"]

    async def test_no_web_section_is_no_hits(self) -> None:
        """An answer without ``web`` (nothing matched) is an empty result, not an error."""
        assert await _search({"mode": "empty"}, LaneRequest(query="zzz")) == []

    async def test_malformed_results_are_a_bad_response(self) -> None:
        """``web.results`` that is not a list is a bad response."""
        with pytest.raises(LaneBadResponse, match=r"web\.results"):
            await _search({"mode": "odd"}, LaneRequest(query="q"))

    async def test_bad_token_is_forbidden_with_brave_detail(self) -> None:
        """A refused token is a forbidden rejection carrying Brave's error code."""
        with pytest.raises(LaneRejected, match="SUBSCRIPTION_TOKEN_INVALID") as err:
            await _search({}, LaneRequest(query="q"), api_key="wrong")
        assert err.value.failure == "forbidden"

    async def test_rate_limit_honours_retry_after(self) -> None:
        """429 is a rate-limit rejection suspending the provider for Retry-After seconds."""
        with pytest.raises(LaneRejected, match="RATE_LIMITED") as err:
            await _search({"mode": "429"}, LaneRequest(query="q"))
        assert err.value.suspend_s == 2.0


class TestDeclaration:
    def test_token_is_required_and_comes_from_the_environment(self) -> None:
        """Without ``api_key`` the lane cannot be built; the key is declared secret, read from FABRIC_BRAVE_API_KEY."""
        spec = LaneSpec(name="brave", kind=LaneKind.WEB, backend="brave", options={})
        with pytest.raises(ConfigError, match=r"lanes\.brave\.options\.api_key"):
            BraveWebLane(spec, LaneResources())
        assert descriptor("brave").secrets == {"api_key"}
        assert ENV_URLS["FABRIC_BRAVE_API_KEY"] == ("brave", "api_key")


def test_public_api() -> None:
    """The module exports the lane and its declaration."""
    assert mod.__all__ == ["BACKEND", "BraveWebLane"]
