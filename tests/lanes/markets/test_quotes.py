"""QuotesMarketsLane against a loopback quote endpoint (URL template + field mapping)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web

import lanes.markets.quotes as mod
from fabric.core.errors import ConfigError, LaneBadResponse, LaneRejected, LaneTimeout
from fabric.core.models import LaneKind, LaneRequest
from lanes.base import LaneResources, LaneSpec
from lanes.markets.quotes import QuotesMarketsLane, pluck
from tests.support.http import guarded, serve


def quote_app(state: dict[str, Any]) -> web.Application:
    """A quote API: ``GET /v1/quote?symbol=S`` → ``{"data": {...}}``; 429 and hang modes."""

    async def quote(req: web.Request) -> web.Response:
        symbol = req.query["symbol"]
        state.setdefault("symbols", []).append(symbol)
        state["auth"] = req.headers.get("Authorization")
        if state.get("mode") == "429":
            return web.json_response({"error": "rate"}, status=429, headers={"Retry-After": "60"})
        if state.get("mode") == "hang":
            await asyncio.sleep(30)
        if symbol == "BAD":
            return web.json_response({"data": {"price": "n/a"}})
        return web.json_response(
            {"data": {"price": 187.5, "ts": 1709805600000, "currency": "USD", "change": -1.2, "name": f"{symbol} Inc."}}
        )

    app = web.Application()
    app.router.add_get("/v1/quote", quote)
    return app


FIELDS = {
    "price": "data.price",
    "timestamp": "data.ts",
    "currency": "data.currency",
    "change": "data.change",
    "name": "data.name",
}


def _lane(port: int, session: Any, **opts: Any) -> QuotesMarketsLane:
    options = {
        "url_template": f"http://quotes.test:{port}/v1/quote?symbol={{symbol}}",
        "symbols": {"AAPL": "Apple", "MSFT": "Microsoft", "BAD": "Bad"},
        "fields": FIELDS,
        **opts,
    }
    return QuotesMarketsLane(
        LaneSpec(name="markets", kind=LaneKind.MARKETS, backend="quotes", options=options), LaneResources(http=session)
    )


class TestQuotesMarketsLane:
    async def test_named_symbols_fetched(self) -> None:
        """Symbols named by ticker or configured name become timestamped hits."""
        state: dict[str, Any] = {}
        async with serve(quote_app(state)) as srv, guarded(["quotes.test"]) as session:
            hits = await _lane(srv.port, session).search(LaneRequest(query="apple vs MSFT today"))
        assert sorted(state["symbols"]) == ["AAPL", "MSFT"]
        assert [h.id for h in hits] == ["quote:AAPL", "quote:MSFT"]
        assert hits[0].published_at == datetime(2024, 3, 7, 10, 0, tzinfo=UTC)
        assert hits[0].title == "AAPL Inc. (AAPL): 187.5 USD"

    async def test_unconfigured_text_never_reaches_url(self) -> None:
        """A query naming no configured symbol makes no request."""
        state: dict[str, Any] = {}
        async with serve(quote_app(state)) as srv, guarded(["quotes.test"]) as session:
            assert await _lane(srv.port, session).search(LaneRequest(query="../../admin?x=1 GOOG")) == []
        assert "symbols" not in state

    async def test_api_key_header(self) -> None:
        """A configured key is sent as a bearer token."""
        state: dict[str, Any] = {}
        async with serve(quote_app(state)) as srv, guarded(["quotes.test"]) as session:
            await _lane(srv.port, session, api_key="k").search(LaneRequest(query="AAPL"))
        assert state["auth"] == "Bearer k"

    async def test_bad_payload(self) -> None:
        """A quote without a numeric price is LaneBadResponse."""
        async with serve(quote_app({})) as srv, guarded(["quotes.test"]) as session:
            with pytest.raises(LaneBadResponse):
                await _lane(srv.port, session).search(LaneRequest(query="BAD"))

    async def test_partial_failure_keeps_good_quotes(self) -> None:
        """One failing symbol does not lose the others."""
        async with serve(quote_app({})) as srv, guarded(["quotes.test"]) as session:
            hits = await _lane(srv.port, session).search(LaneRequest(query="BAD AAPL"))
        assert [h.id for h in hits] == ["quote:AAPL"]

    async def test_rate_limited(self) -> None:
        """429 carries Retry-After."""
        async with serve(quote_app({"mode": "429"})) as srv, guarded(["quotes.test"]) as session:
            with pytest.raises(LaneRejected) as err:
                await _lane(srv.port, session).search(LaneRequest(query="AAPL"))
        assert err.value.suspend_s == 60.0

    async def test_hung_endpoint_times_out(self) -> None:
        """A hung endpoint fails at timeout_s."""
        async with serve(quote_app({"mode": "hang"})) as srv, guarded(["quotes.test"]) as session:
            with pytest.raises(LaneTimeout):
                await _lane(srv.port, session, timeout_s=0.2).search(LaneRequest(query="AAPL"))

    def test_template_needs_placeholder(self) -> None:
        """A url_template without {symbol} is a ConfigError."""
        with pytest.raises(ConfigError, match="symbol"):
            _lane(1, None, url_template="http://quotes.test/v1/quote")


def test_pluck() -> None:
    """Dotted paths walk dicts and list indexes."""
    assert (pluck({"a": [{"b": 3}]}, "a.0.b"), pluck({"a": 1}, "a.b")) == (3, None)


def test_public_api() -> None:
    """The module exports the lane and pluck."""
    assert set(mod.__all__) == {"BACKEND", "QuotesMarketsLane", "pluck"}
