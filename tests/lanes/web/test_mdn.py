"""MdnWebLane against a loopback server speaking MDN's ``/api/v1/search`` API."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

import lanes.web.mdn as mod
from fabric.core.errors import LaneBadResponse, LaneRejected
from fabric.core.models import LaneKind, LaneRequest
from lanes.base import LaneResources, LaneSpec
from lanes.web.mdn import MdnWebLane
from tests.support.http import guarded, serve


def mdn_app(state: dict[str, Any]) -> web.Application:
    """MDN stand-in: 400 with an ``errors`` table for an empty q, as the real API."""

    async def search(req: web.Request) -> web.Response:
        state["params"] = dict(req.query)
        if state.get("mode") == "429":
            return web.Response(status=429, headers={"Retry-After": "5"})
        if not req.query.get("q"):
            return web.json_response(
                {"errors": {"q": [{"message": "This field is required.", "code": "required"}]}}, status=400
            )
        return web.json_response(
            {
                "documents": [
                    {
                        "mdn_url": "/en-US/docs/Web/API/Fetch_API",
                        "score": 12.5,
                        "title": "Fetch API",
                        "locale": "en-US",
                        "slug": "Web/API/Fetch_API",
                        "popularity": 0.9,
                        "archived": False,
                        "summary": "The Fetch API provides an interface for fetching resources.",
                        "highlight": {"body": ["The <mark>Fetch</mark> API"], "title": ["<mark>Fetch</mark> API"]},
                    },
                    {
                        "mdn_url": "/en-US/docs/Web/API/Window/fetch",
                        "score": 9.0,
                        "title": "Window: fetch() method",
                        "locale": "en-US",
                        "slug": "Web/API/Window/fetch",
                        "popularity": 0.5,
                        "summary": "",
                        "highlight": {"body": ["The global <mark>fetch()</mark> method"]},
                    },
                ],
                "metadata": {"took_ms": 3, "total": {"value": 2, "relation": "eq"}, "size": 10, "page": 1},
                "suggestions": [],
            }
        )

    app = web.Application()
    app.router.add_get("/api/v1/search", search)
    return app


def _lane(port: int, session: Any) -> MdnWebLane:
    spec = LaneSpec(
        name="mdn", kind=LaneKind.WEB, backend="mdn", options={"url": f"http://developer.mozilla.org:{port}"}
    )
    return MdnWebLane(spec, LaneResources(http=session))


class TestMdnWebLane:
    async def test_documents_become_hits(self) -> None:
        """Documents map to absolute URLs with MDN's score; an empty summary falls back to the highlight."""
        state: dict[str, Any] = {}
        async with serve(mdn_app(state)) as srv, guarded(["developer.mozilla.org"]) as session:
            hits = await _lane(srv.port, session).search(LaneRequest(query="fetch", top_k=5))
            port = srv.port
        assert [h.url for h in hits] == [
            f"http://developer.mozilla.org:{port}/en-US/docs/Web/API/Fetch_API",
            f"http://developer.mozilla.org:{port}/en-US/docs/Web/API/Window/fetch",
        ]
        assert (hits[0].score, hits[1].text, hits[0].domain) == (
            12.5,
            "The global fetch() method",
            "developer.mozilla.org",
        )
        assert state["params"] == {"q": "fetch", "locale": "en-US", "size": "5"}

    async def test_validation_error_is_bad_response(self) -> None:
        """MDN's 400 ``errors`` table becomes LaneBadResponse naming the field."""
        async with serve(mdn_app({})) as srv, guarded(["developer.mozilla.org"]) as session:
            with pytest.raises(LaneBadResponse, match="q: This field is required"):
                await _lane(srv.port, session).search(LaneRequest(query=""))

    async def test_rate_limited(self) -> None:
        """429 is a rate-limit rejection with suspend_s."""
        async with serve(mdn_app({"mode": "429"})) as srv, guarded(["developer.mozilla.org"]) as session:
            with pytest.raises(LaneRejected) as err:
                await _lane(srv.port, session).search(LaneRequest(query="x"))
        assert err.value.suspend_s == 5.0


def test_public_api() -> None:
    """The module exports the lane class only."""
    assert mod.__all__ == ["BACKEND", "MdnWebLane"]
