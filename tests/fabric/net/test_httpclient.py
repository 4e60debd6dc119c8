"""Tests of the shared HTTP plumbing: allow-list at connect time, redirects, caps, status and error mapping."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from types import SimpleNamespace

import aiohttp
import pytest
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

import fabric.net.httpclient as hc
from fabric.core.errors import (
    ConfigError,
    LaneBadResponse,
    LaneBadURL,
    LaneError,
    LaneRejected,
    LaneTimeout,
    LaneUnavailable,
)
from fabric.core.models import LaneKind, LaneRequest
from fabric.net.httpclient import AllowList, HostRule, allowlist_from_lanes, fetch, parse_retry_after
from lanes.base import LaneResources, LaneSpec
from lanes.markets.quotes import QuotesMarketsLane
from tests.support.http import Recorded, guarded, recording, redirector, serve


def _app() -> web.Application:
    async def ok(_req: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def redirect_out(req: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://evil.test:{req.url.port}/ok")

    async def redirect_in(_req: web.Request) -> web.Response:
        raise web.HTTPFound("/ok")

    async def redirect_ip(req: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://127.0.0.1:{req.url.port}/ok")

    async def limited(_req: web.Request) -> web.Response:
        return web.json_response({"message": "slow down"}, status=429, headers={"Retry-After": "17"})

    async def forbidden(_req: web.Request) -> web.Response:
        return web.json_response({"message": "no"}, status=403)

    async def broken(_req: web.Request) -> web.Response:
        return web.Response(status=503, text="down")

    async def big(_req: web.Request) -> web.Response:
        return web.Response(body=b"x" * 5000)

    async def notjson(_req: web.Request) -> web.Response:
        return web.Response(text="<html>")

    async def hang(_req: web.Request) -> web.Response:
        await asyncio.sleep(30)
        return web.Response()

    app = web.Application()
    for path, handler in {
        "/ok": ok,
        "/redirect-out": redirect_out,
        "/redirect-in": redirect_in,
        "/redirect-ip": redirect_ip,
        "/limited": limited,
        "/forbidden": forbidden,
        "/broken": broken,
        "/big": big,
        "/notjson": notjson,
        "/hang": hang,
    }.items():
        app.router.add_get(path, handler)
    return app


class TestAllowListFromLanes:
    def test_from_lanes_collects_exact_origins(self) -> None:
        """Lane options url/url_template/feeds become allowed origins; self-hosted ones may be private."""
        lanes = [
            SimpleNamespace(backend="searxng", options={"url": "http://searxng:8080"}),
            SimpleNamespace(
                backend="rss", options={"feeds": ["https://feeds.test/a.xml", {"url": "https://b.test/x"}]}
            ),
            SimpleNamespace(backend="quotes", options={"url_template": "https://q.test:8443/v1/{symbol}"}),
        ]
        allow = allowlist_from_lanes(lanes, extra_urls=["http://127.0.0.1:8000/v1", ""])
        assert set(allow.rules) == {"searxng", "feeds.test", "b.test", "q.test", "127.0.0.1"}
        assert allow.rules["searxng"] == (HostRule("searxng", True, "http", 8080),)
        assert allow.rules["feeds.test"] == (HostRule("feeds.test", False, "https", 443),)
        assert allow.rules["q.test"] == (HostRule("q.test", False, "https", 8443),)
        assert allow.rules["127.0.0.1"] == (HostRule("127.0.0.1", True, "http", 8000),)

    def test_bad_configured_url_is_config_error(self) -> None:
        """A lane URL the parser rejects fails at start-up naming the key."""
        lanes = [SimpleNamespace(name="web", backend="searxng", options={"url": "http://[::1"})]
        with pytest.raises(ConfigError, match=r"lanes\.web\.options\.url"):
            allowlist_from_lanes(lanes)


class TestRetryAfter:
    def test_delta_seconds(self) -> None:
        """A numeric Retry-After is seconds."""
        assert parse_retry_after("120") == 120.0

    def test_http_date(self) -> None:
        """An HTTP-date Retry-After is the time left until then."""
        now = datetime(2025, 1, 1, 0, 0, 0, tzinfo=UTC)
        assert parse_retry_after("Wed, 01 Jan 2025 00:01:00 GMT", now=now) == 60.0

    def test_garbage_is_none(self) -> None:
        """An unparseable Retry-After is ignored."""
        assert parse_retry_after("soon") is None


class TestFetch:
    async def test_allowed_host_answers(self) -> None:
        """A listed host is contacted and its JSON decoded."""
        async with serve(_app()) as srv, guarded(["api.test"]) as session:
            resp = await fetch(session, "GET", f"http://api.test:{srv.port}/ok", timeout_s=5)
        assert resp.json() == {"ok": True}

    async def test_unlisted_host_never_contacted(self) -> None:
        """A host outside the allow-list is refused before connecting, as forbidden."""
        async with serve(_app()) as srv, guarded(["api.test"], names=["evil.test"]) as session:
            with pytest.raises(LaneRejected) as err:
                await fetch(session, "GET", f"http://evil.test:{srv.port}/ok", timeout_s=5)
        assert err.value.failure == "forbidden"

    async def test_ip_literal_refused(self) -> None:
        """An IP-literal URL is refused even though it is loopback and reachable."""
        async with serve(_app()) as srv, guarded(["api.test"]) as session:
            with pytest.raises(LaneRejected, match="allow-list"):
                await fetch(session, "GET", f"http://127.0.0.1:{srv.port}/ok", timeout_s=5)

    async def test_ip_literal_refused_by_session_itself(self) -> None:
        """Bypassing fetch does not bypass the guard: the session's trace hook refuses the request."""
        async with serve(_app()) as srv, guarded(["api.test"]) as session:
            with pytest.raises(hc.HostBlocked):
                await session.get(f"http://127.0.0.1:{srv.port}/ok")

    async def test_redirect_to_disallowed_host_refused(self) -> None:
        """A redirect hop to a host outside the allow-list is refused."""
        async with serve(_app()) as srv, guarded(["api.test"], names=["evil.test"]) as session:
            with pytest.raises(LaneRejected) as err:
                await fetch(session, "GET", f"http://api.test:{srv.port}/redirect-out", timeout_s=5)
        assert err.value.failure == "forbidden"

    async def test_redirect_to_ip_literal_refused(self) -> None:
        """A redirect hop to an IP literal is refused."""
        async with serve(_app()) as srv, guarded(["api.test"]) as session:
            with pytest.raises(LaneRejected):
                await fetch(session, "GET", f"http://api.test:{srv.port}/redirect-ip", timeout_s=5)

    async def test_redirect_within_host_followed(self) -> None:
        """A same-host redirect is followed."""
        async with serve(_app()) as srv, guarded(["api.test"]) as session:
            resp = await fetch(session, "GET", f"http://api.test:{srv.port}/redirect-in", timeout_s=5)
        assert resp.json() == {"ok": True}

    async def test_429_carries_retry_after(self) -> None:
        """429 becomes LaneRejected with suspend_s from Retry-After."""
        async with serve(_app()) as srv, guarded(["api.test"]) as session:
            with pytest.raises(LaneRejected) as err:
                await fetch(session, "GET", f"http://api.test:{srv.port}/limited", timeout_s=5, provider="p")
        assert (err.value.suspend_s, err.value.failure, err.value.provider) == (17.0, "rate_limited", "p")

    async def test_403_is_forbidden(self) -> None:
        """403 becomes LaneRejected(failure=forbidden)."""
        async with serve(_app()) as srv, guarded(["api.test"]) as session:
            with pytest.raises(LaneRejected) as err:
                await fetch(session, "GET", f"http://api.test:{srv.port}/forbidden", timeout_s=5)
        assert err.value.failure == "forbidden"

    async def test_5xx_is_unavailable(self) -> None:
        """503 becomes LaneUnavailable."""
        async with serve(_app()) as srv, guarded(["api.test"]) as session:
            with pytest.raises(LaneUnavailable):
                await fetch(session, "GET", f"http://api.test:{srv.port}/broken", timeout_s=5)

    async def test_connection_refused_is_unavailable(self) -> None:
        """A closed port becomes LaneUnavailable."""
        async with serve(_app()) as srv:
            port = srv.port
        async with guarded(["api.test"]) as session:
            with pytest.raises(LaneUnavailable):
                await fetch(session, "GET", f"http://api.test:{port}/ok", timeout_s=5)

    async def test_size_cap(self) -> None:
        """A body over the cap becomes LaneBadResponse."""
        async with serve(_app()) as srv, guarded(["api.test"]) as session:
            with pytest.raises(LaneBadResponse, match="cap"):
                await fetch(session, "GET", f"http://api.test:{srv.port}/big", timeout_s=5, max_bytes=1000)

    async def test_invalid_json(self) -> None:
        """A non-JSON body raises LaneBadResponse on decode."""
        async with serve(_app()) as srv, guarded(["api.test"]) as session:
            resp = await fetch(session, "GET", f"http://api.test:{srv.port}/notjson", timeout_s=5)
        with pytest.raises(LaneBadResponse):
            resp.json()

    async def test_hung_server_times_out(self) -> None:
        """A server that never answers hits the per-request timeout, far below aiohttp's 300 s."""
        async with serve(_app()) as srv, guarded(["api.test"]) as session:
            with pytest.raises(LaneTimeout):
                await fetch(session, "GET", f"http://api.test:{srv.port}/hang", timeout_s=0.2)

    async def test_bad_url_is_typed(self) -> None:
        """A URL the parser rejects is LaneBadURL, not a crash."""
        async with guarded(["api.test"]) as session:
            with pytest.raises(LaneBadURL):
                await fetch(session, "GET", "http://api.test:99999/ok", timeout_s=1)

    async def test_deeply_nested_json_is_bad_response(self) -> None:
        """A body nested 100,000 deep is LaneBadResponse (the parser's guard), not a RecursionError."""
        resp = hc.HttpResponse(200, {}, b"[" * 100_000 + b"]" * 100_000, "http://api.test/")
        with pytest.raises(LaneBadResponse, match="nested too deeply"):
            resp.json(lane="web", provider="p")

    async def test_missing_session_is_unavailable(self) -> None:
        """A lane built without resources.http fails clearly."""
        with pytest.raises(LaneUnavailable, match=r"resources\.http"):
            await fetch(None, "GET", "http://api.test/ok", timeout_s=1)


def test_public_api() -> None:
    """The module exports exactly its documented names."""
    assert set(hc.__all__) == {
        "DEFAULT_MAX_BYTES",
        "SELF_HOSTED_BACKENDS",
        "AllowList",
        "HostBlocked",
        "HostRule",
        "HttpResponse",
        "StaticResolver",
        "allowlist_from_lanes",
        "create_session",
        "fetch",
        "fetch_sync",
        "map_client_errors",
        "parse_retry_after",
        "raise_for_status",
    }


def _exact(*rules: tuple[str, int]) -> AllowList:
    """Exact origins (http, host, port), private allowed (the servers are loopback)."""
    return AllowList.of(HostRule(host, True, "http", port) for host, port in rules)


_CREDS = {"Authorization": "Bearer sk-secret", "X-Api-Key": "k-secret", "Accept": "application/json"}


class TestRedirectsOverLoopback:
    """A real origin server redirects; a real target server records whatever reaches it."""

    @pytest.mark.parametrize("status", [302, 303, 307, 308])
    @pytest.mark.parametrize("method", ["GET", "POST"])
    @pytest.mark.parametrize("where", ["other_port", "metadata_ip", "metadata_6to4", "metadata_name", "unlisted_host"])
    async def test_nothing_reaches_a_disallowed_target(self, status: int, method: str, where: str) -> None:
        """Redirects to the same host on another port, to the metadata address in any form, or to an unlisted
        host are refused before anything is sent there."""
        async with recording() as (target, received):
            location = {
                "other_port": f"http://api.test:{target.port}/landed",
                "metadata_ip": "http://169.254.169.254/latest/meta-data/",
                "metadata_6to4": "http://[2002:a9fe:a9fe::1]/latest/meta-data/",
                "metadata_name": "http://meta.test/latest/meta-data/",
                "unlisted_host": f"http://evil.test:{target.port}/landed",
            }[where]
            async with serve(redirector(location)) as origin:
                allow = _exact(("api.test", origin.port), ("meta.test", 80))
                table = {"api.test": "127.0.0.1", "evil.test": "127.0.0.1", "meta.test": "169.254.169.254"}
                session = hc.create_session(allow, resolver=hc.StaticResolver(table))
                try:
                    with pytest.raises((LaneRejected, LaneBadResponse)) as err:
                        await fetch(
                            session, method, f"http://api.test:{origin.port}/r/{status}", timeout_s=5,
                            json_body={"q": "user query"} if method == "POST" else None, headers=_CREDS,
                        )  # fmt: skip
                finally:
                    await session.close()
        assert received == []
        if isinstance(err.value, LaneRejected):
            assert err.value.failure == "forbidden"
        else:  # only a 307/308 re-post is refused before the allow-list is asked
            assert (method, status) in {("POST", 307), ("POST", 308)}

    @pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
    async def test_credentials_dropped_on_cross_origin_redirect(self, status: int) -> None:
        """An allowed redirect to another origin reaches it without Authorization or the API-key header."""
        async with (
            recording() as (target, received),
            serve(redirector(f"http://other.test:{target.port}/landed")) as origin,
        ):
            allow = _exact(("api.test", origin.port), ("other.test", target.port))
            table = dict.fromkeys(("api.test", "other.test"), "127.0.0.1")
            session = hc.create_session(allow, resolver=hc.StaticResolver(table))
            try:
                resp = await fetch(
                    session, "GET", f"http://api.test:{origin.port}/r/{status}", timeout_s=5, headers=_CREDS
                )
            finally:
                await session.close()
        assert resp.json()["reached"] is True
        assert len(received) == 1
        headers = {k.lower(): v for k, v in received[0].headers.items()}
        assert "authorization" not in headers
        assert "x-api-key" not in headers
        assert headers["accept"] == "application/json"
        assert not any("secret" in v for v in headers.values())

    @pytest.mark.parametrize("header", ["Authorization", "X-Finnhub-Token", "X-Client-Secret-Value"])
    async def test_quotes_lane_key_never_follows_a_redirect(self, header: str) -> None:
        """The quotes lane's API key, under any header name, does not reach another allowed origin."""
        async with (
            recording() as (target, received),
            serve(redirector(f"http://other.test:{target.port}/v1/quote")) as origin,
        ):
            allow = _exact(("quotes.test", origin.port), ("other.test", target.port))
            options = {
                "url_template": f"http://quotes.test:{origin.port}/r/302?symbol={{symbol}}",
                "symbols": {"AAPL": "Apple"},
                "fields": {"price": "data.price", "timestamp": "data.ts"},
                "api_key": "sk-quotes-secret",
                "api_key_header": header,
            }
            session = hc.create_session(allow, resolver=hc.StaticResolver(dict.fromkeys(allow.rules, "127.0.0.1")))
            lane = QuotesMarketsLane(
                LaneSpec(name="markets", kind=LaneKind.MARKETS, backend="quotes", options=options),
                LaneResources(http=session),
            )
            try:
                with contextlib.suppress(LaneError):
                    await lane.search(LaneRequest(query="AAPL"))
            finally:
                await session.close()
        assert len(received) == 1
        assert not any("sk-quotes-secret" in v for v in received[0].headers.values())

    async def test_post_303_continues_as_get_without_body_or_key(self) -> None:
        """A 303 after a POST reaches the other origin as a GET with no body and no key."""
        async with (
            recording() as (target, received),
            serve(redirector(f"http://other.test:{target.port}/landed")) as origin,
        ):
            allow = _exact(("api.test", origin.port), ("other.test", target.port))
            session = hc.create_session(allow, resolver=hc.StaticResolver(dict.fromkeys(allow.rules, "127.0.0.1")))
            try:
                await fetch(
                    session, "POST", f"http://api.test:{origin.port}/r/303", timeout_s=5,
                    json_body={"q": "user query"}, headers=_CREDS,
                )  # fmt: skip
            finally:
                await session.close()
        assert [(r.method, r.body) for r in received] == [("GET", b"")]
        assert "Authorization" not in received[0].headers

    @pytest.mark.parametrize("status", [307, 308])
    async def test_same_origin_307_keeps_body_and_key(self, status: int) -> None:
        """On the same origin a 307/308 re-sends the body with the key (the server asked for exactly that)."""
        async with (
            recording() as (target, received),
            serve(redirector(f"http://api.test:{target.port}/landed")) as origin,
        ):
            allow = _exact(("api.test", origin.port), ("api.test", target.port))
            session = hc.create_session(allow, resolver=hc.StaticResolver({"api.test": "127.0.0.1"}))
            try:
                # origin and target differ by port: another origin, so the body is refused...
                with pytest.raises(LaneBadResponse, match="re-send"):
                    await fetch(
                        session, "POST", f"http://api.test:{origin.port}/r/{status}", timeout_s=5,
                        json_body={"q": 1}, headers=_CREDS,
                    )  # fmt: skip
                # ...while the target's own relative redirect (same origin) keeps both.
                await fetch(
                    session, "POST", f"http://api.test:{target.port}/landed", timeout_s=5, json_body={"q": 1},
                    headers=_CREDS,
                )  # fmt: skip
            finally:
                await session.close()
        assert len(received) == 1
        assert received[0].headers["Authorization"] == "Bearer sk-secret"

    @pytest.mark.parametrize("method", ["GET", "POST"])
    async def test_session_refuses_aiohttp_own_redirect_following(self, method: str) -> None:
        """Code that bypasses fetch and lets aiohttp follow a redirect is stopped by the session's trace hook."""
        async with (
            recording() as (target, received),
            serve(redirector(f"http://api.test:{target.port}/landed")) as origin,
        ):
            allow = _exact(("api.test", origin.port), ("api.test", target.port))
            session = hc.create_session(allow, resolver=hc.StaticResolver({"api.test": "127.0.0.1"}))
            try:
                with pytest.raises(hc.HostBlocked, match="redirect"):
                    await session.request(method, f"http://api.test:{origin.port}/r/307", json={"q": 1})
            finally:
                await session.close()
        assert received == []

    async def test_public_chain_cannot_reach_a_private_service(self) -> None:
        """The session's hook remembers where a fetch chain started: a public lane's redirect to the private
        SearXNG origin (allowed on its own) is refused at that hop."""
        allow = AllowList.of(
            [HostRule.from_url("https://en.wikipedia.org"), HostRule.from_url("http://searxng:8080", private_ok=True)]
        )
        session = hc.create_session(allow)
        try:
            (trace,) = session.trace_configs
            ctx = trace.trace_config_ctx(trace_request_ctx=hc._Chain())
            first = URL("https://en.wikipedia.org/w/api.php")
            await trace.on_request_start.send(
                session, ctx, aiohttp.TraceRequestStartParams("GET", first, CIMultiDict())
            )
            hop = aiohttp.TraceRequestStartParams("GET", URL("http://searxng:8080/search"), CIMultiDict())
            with pytest.raises(hc.HostBlocked, match="private service"):
                await trace.on_request_start.send(session, ctx, hop)
            alone = trace.trace_config_ctx(trace_request_ctx=hc._Chain())  # a chain starting there is fine
            await trace.on_request_start.send(
                session, alone, aiohttp.TraceRequestStartParams("GET", URL("http://searxng:8080/"), CIMultiDict())
            )
        finally:
            await session.close()

    async def test_bad_location_is_typed(self) -> None:
        """A Location the parser rejects is LaneBadURL."""
        async with serve(redirector("http://[::1")) as origin, guarded(["api.test"]) as session:
            with pytest.raises(LaneBadURL):
                await fetch(session, "GET", f"http://api.test:{origin.port}/r/302", timeout_s=5)


class TestFetchSync:
    def test_same_guard_from_a_thread(self) -> None:
        """fetch_sync (for threads) refuses a cross-port redirect like fetch: the target receives nothing."""

        async def scenario() -> list[Recorded]:
            async with (
                recording() as (target, received),
                serve(redirector(f"http://127.0.0.1:{target.port}/landed")) as origin,
            ):
                allow = _exact(("127.0.0.1", origin.port))
                url = f"http://127.0.0.1:{origin.port}/r/302"
                with pytest.raises(LaneRejected):
                    await asyncio.to_thread(hc.fetch_sync, allow, "GET", url, timeout_s=5, headers=_CREDS)
                ok = await asyncio.to_thread(hc.fetch_sync, _exact(("127.0.0.1", target.port)), "GET",
                                             f"http://127.0.0.1:{target.port}/x", timeout_s=5)  # fmt: skip
                assert ok.json()["reached"] is True
            return received

        assert [r.path for r in asyncio.run(scenario())] == ["/x"]
