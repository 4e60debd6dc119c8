"""Tests of the shared HTTP plumbing: allow-list at connect time, redirects, caps, status and error mapping."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from aiohttp import web

import fabric.httpclient as hc
from fabric.errors import LaneBadResponse, LaneRejected, LaneTimeout, LaneUnavailable
from fabric.httpclient import AllowList, HostRule, allowlist_from_lanes, fetch, parse_retry_after
from tests.support.http import guarded, serve


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


class TestAllowList:
    def test_unlisted_host_refused(self) -> None:
        """A host that is not listed raises HostBlocked."""
        with pytest.raises(hc.HostBlocked):
            AllowList.of([HostRule("a.test")]).rule_for("b.test")

    def test_metadata_address_refused_even_for_private_hosts(self) -> None:
        """Link-local (cloud metadata) addresses are refused whatever the rule."""
        import ipaddress

        allow = AllowList.of([HostRule("a.test", private_ok=True)])
        with pytest.raises(hc.HostBlocked):
            allow.check_address(allow.rule_for("a.test"), ipaddress.ip_address("169.254.169.254"))

    def test_private_address_refused_for_public_hosts(self) -> None:
        """A public host resolving to a private address is refused (DNS rebinding)."""
        import ipaddress

        allow = AllowList.of([HostRule("en.wikipedia.org")])
        with pytest.raises(hc.HostBlocked):
            allow.check_address(allow.rule_for("en.wikipedia.org"), ipaddress.ip_address("10.0.0.5"))

    def test_from_lanes_collects_urls_and_feeds(self) -> None:
        """Lane options url/url_template/feeds become allowed hosts; self-hosted ones may be private."""
        lanes = [
            SimpleNamespace(backend="searxng", options={"url": "http://searxng:8080"}),
            SimpleNamespace(
                backend="rss", options={"feeds": ["https://feeds.test/a.xml", {"url": "https://b.test/x"}]}
            ),
            SimpleNamespace(backend="quotes", options={"url_template": "https://q.test/v1/{symbol}"}),
        ]
        allow = allowlist_from_lanes(lanes)
        assert set(allow.rules) == {"searxng", "feeds.test", "b.test", "q.test"}
        assert (allow.rules["searxng"].private_ok, allow.rules["feeds.test"].private_ok) == (True, False)


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
        "map_client_errors",
        "parse_retry_after",
        "raise_for_status",
    }
