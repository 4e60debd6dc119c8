"""WikipediaWebLane against a loopback server speaking the MediaWiki Action API (``list=search``)."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

import lanes.web.wikipedia as mod
from fabric.core.errors import LaneBadResponse, LaneRejected
from fabric.core.models import BoundConstraints, LaneKind, LaneRequest
from lanes.base import LaneResources, LaneSpec
from lanes.web.wikipedia import WikipediaWebLane
from tests.support.http import guarded, serve


def wiki_app(state: dict[str, Any]) -> web.Application:
    """MediaWiki stand-in: errors in the body with HTTP 200, as the real API does."""

    async def api(req: web.Request) -> web.Response:
        state["params"] = dict(req.query)
        if state.get("error"):
            return web.json_response({"error": {"code": state["error"], "info": "nope"}, "servedby": "mw1"})
        if req.query.get("action") != "query" or req.query.get("list") != "search":
            return web.json_response({"error": {"code": "badvalue", "info": "bad"}})
        return web.json_response(
            {
                "batchcomplete": True,
                "continue": {"sroffset": 2, "continue": "-||"},
                "query": {
                    "searchinfo": {"totalhits": 2},
                    "search": [
                        {
                            "ns": 0,
                            "title": "Reciprocal rank fusion",
                            "pageid": 42,
                            "size": 100,
                            "wordcount": 20,
                            "snippet": '<span class="searchmatch">Reciprocal</span> rank &amp; fusion',
                            "timestamp": "2024-02-03T04:05:06Z",
                        },
                        {
                            "ns": 0,
                            "title": "Okapi BM25",
                            "pageid": 7,
                            "size": 10,
                            "wordcount": 5,
                            "snippet": "BM25",
                            "timestamp": "2023-01-01T00:00:00Z",
                        },
                    ],
                },
            }
        )

    app = web.Application()
    app.router.add_get("/w/api.php", api)
    return app


def _lane(port: int, session: Any) -> WikipediaWebLane:
    spec = LaneSpec(
        name="wikipedia", kind=LaneKind.WEB, backend="wikipedia", options={"url": f"http://en.wikipedia.org:{port}"}
    )
    return WikipediaWebLane(spec, LaneResources(http=session))


class TestWikipediaWebLane:
    async def test_title_with_a_lone_surrogate_still_links(self) -> None:
        """A title holding a lone surrogate (a hostile upstream) gives a hit with a usable URL, not an
        UnicodeEncodeError (the lane boundary repairs the title itself)."""

        async def api(_req: web.Request) -> web.Response:
            body = '{"query": {"search": [{"title": "Bad \\ud800 title", "pageid": 1, "snippet": "s"}]}}'
            return web.Response(text=body, content_type="application/json")

        app = web.Application()
        app.router.add_get("/w/api.php", api)
        async with serve(app) as srv, guarded(["en.wikipedia.org"]) as session:
            hits = await _lane(srv.port, session).search(LaneRequest(query="rrf", top_k=5))
        assert len(hits) == 1
        assert hits[0].url.endswith("/wiki/Bad_%3F_title")

    async def test_search_results_become_hits(self) -> None:
        """Matches map to /wiki/ URLs with cleaned snippets and the keyless marker."""
        state: dict[str, Any] = {}
        async with serve(wiki_app(state)) as srv, guarded(["en.wikipedia.org"]) as session:
            hits = await _lane(srv.port, session).search(LaneRequest(query="rrf", top_k=5))
            port = srv.port
        assert [h.url for h in hits] == [
            f"http://en.wikipedia.org:{port}/wiki/Reciprocal_rank_fusion",
            f"http://en.wikipedia.org:{port}/wiki/Okapi_BM25",
        ]
        assert (hits[0].text, hits[0].domain, hits[0].metadata["keyless"]) == (
            "Reciprocal rank & fusion",
            "en.wikipedia.org",
            True,
        )

    async def test_sends_documented_parameters(self) -> None:
        """The request is action=query&list=search with formatversion=2 and srlimit from top_k."""
        state: dict[str, Any] = {}
        async with serve(wiki_app(state)) as srv, guarded(["en.wikipedia.org"]) as session:
            await _lane(srv.port, session).search(LaneRequest(query="rrf", top_k=5))
        params = state["params"]
        assert (
            params["action"],
            params["list"],
            params["srsearch"],
            params["srlimit"],
            params["format"],
            params["formatversion"],
        ) == ("query", "search", "rrf", "5", "json", "2")

    async def test_maxlag_is_rate_limited(self) -> None:
        """A maxlag error in the body is a rate-limit rejection."""
        async with serve(wiki_app({"error": "maxlag"})) as srv, guarded(["en.wikipedia.org"]) as session:
            with pytest.raises(LaneRejected):
                await _lane(srv.port, session).search(LaneRequest(query="x"))

    async def test_other_error_is_bad_response(self) -> None:
        """Any other MediaWiki error is LaneBadResponse."""
        async with serve(wiki_app({"error": "internal_api_error"})) as srv, guarded(["en.wikipedia.org"]) as session:
            with pytest.raises(LaneBadResponse, match="internal_api_error"):
                await _lane(srv.port, session).search(LaneRequest(query="x"))

    async def test_other_site_constraint_skips_call(self) -> None:
        """A site: constraint for another domain returns nothing without a request."""
        state: dict[str, Any] = {}
        request = LaneRequest(query="x", constraints=BoundConstraints(sites=("python.org",)))
        async with serve(wiki_app(state)) as srv, guarded(["en.wikipedia.org"]) as session:
            assert await _lane(srv.port, session).search(request) == []
        assert "params" not in state


def test_public_api() -> None:
    """The module exports the lane class only."""
    assert mod.__all__ == ["BACKEND", "WikipediaWebLane"]
