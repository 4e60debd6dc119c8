"""RssNewsLane against loopback feeds: RSS 2.0 and Atom, conditional GET, stale-on-error, term matching."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web

import lanes.feeds.rss as mod
from fabric.core.errors import ConfigError, LaneBadResponse, LaneTimeout, LaneUnavailable
from fabric.core.models import BoundConstraints, LaneKind, LaneRequest
from lanes.base import LaneResources, LaneSpec
from lanes.feeds.rss import RssNewsLane, match_score
from tests.support.http import guarded, serve

RSS = b"""<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>Science Wire</title><link>https://news.test/</link>
<item><title>New insulin therapy approved</title><link>https://news.test/insulin?utm_source=rss</link>
<description>&lt;p&gt;Regulators approved an &lt;b&gt;insulin&lt;/b&gt; therapy.&lt;/p&gt;</description>
<pubDate>Tue, 05 Mar 2024 10:00:00 GMT</pubDate><guid>1</guid></item>
<item><title>Markets rally</title><link>https://news.test/markets</link><description>Stocks up.</description>
<pubDate>Wed, 06 Mar 2024 10:00:00 GMT</pubDate></item>
<item><title>Insulin pricing history</title><link>https://news.test/old</link>
<description>Old insulin news.</description>
<pubDate>Mon, 01 Jan 2018 00:00:00 GMT</pubDate></item>
</channel></rss>"""

ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>Lab Notes</title><id>urn:lab</id>
<updated>2024-03-07T00:00:00Z</updated>
<entry><title>Insulin receptor structure solved</title><link href="https://lab.test/receptor"/><id>urn:1</id>
<updated>2024-03-07T00:00:00Z</updated><summary>Cryo-EM structure of the insulin receptor.</summary></entry>
</feed>"""


def feed_app(state: dict[str, Any]) -> web.Application:
    """Feeds with ETag / Last-Modified validators answering 304 when they match."""

    async def rss(req: web.Request) -> web.Response:
        state.setdefault("rss_headers", []).append(dict(req.headers))
        if state.get("rss_mode") == "500":
            return web.Response(status=500)
        if state.get("rss_mode") == "hang":
            await asyncio.sleep(30)
        if req.headers.get("If-None-Match") == '"v1"':
            return web.Response(status=304)
        return web.Response(
            body=RSS,
            content_type="application/rss+xml",
            headers={"ETag": '"v1"', "Last-Modified": "Wed, 06 Mar 2024 10:00:00 GMT"},
        )

    async def atom(req: web.Request) -> web.Response:
        state.setdefault("atom_headers", []).append(dict(req.headers))
        if req.headers.get("If-Modified-Since") == "Thu, 07 Mar 2024 00:00:00 GMT":
            return web.Response(status=304)
        return web.Response(
            body=ATOM, content_type="application/atom+xml", headers={"Last-Modified": "Thu, 07 Mar 2024 00:00:00 GMT"}
        )

    app = web.Application()
    app.router.add_get("/rss.xml", rss)
    app.router.add_get("/atom.xml", atom)
    return app


def _lane(port: int, session: Any, **opts: Any) -> RssNewsLane:
    feeds = [f"http://news.test:{port}/rss.xml", {"url": f"http://lab.test:{port}/atom.xml", "name": "Lab"}]
    options = {"feeds": feeds, "refresh_s": 0.001, **opts}
    spec = LaneSpec(name="news", kind=LaneKind.NEWS, backend="rss", options=options)
    return RssNewsLane(spec, LaneResources(http=session))


HOSTS = ["news.test", "lab.test"]


class TestRssNewsLane:
    async def test_items_matched_and_dated(self) -> None:
        """Items sharing query terms come back with published_at, best overlap then newest first."""
        async with serve(feed_app({})) as srv, guarded(HOSTS) as session:
            hits = await _lane(srv.port, session).search(LaneRequest(query="insulin therapy"))
        assert [h.id for h in hits] == [
            "https://news.test/insulin",
            "https://lab.test/receptor",
            "https://news.test/old",
        ]
        assert hits[0].published_at == datetime(2024, 3, 5, 10, tzinfo=UTC)
        assert (hits[0].text, hits[0].score, hits[1].metadata["feed"]) == (
            "Regulators approved an insulin therapy.",
            1.0,
            "Lab",
        )

    async def test_conditional_get_uses_validators(self) -> None:
        """The second fetch sends If-None-Match / If-Modified-Since, and 304 keeps the items."""
        state: dict[str, Any] = {}
        async with serve(feed_app(state)) as srv, guarded(HOSTS) as session:
            lane = _lane(srv.port, session)
            await lane.search(LaneRequest(query="insulin"))
            await asyncio.sleep(0.01)
            hits = await lane.search(LaneRequest(query="insulin"))
        assert state["rss_headers"][1]["If-None-Match"] == '"v1"'
        assert state["atom_headers"][1]["If-Modified-Since"] == "Thu, 07 Mar 2024 00:00:00 GMT"
        assert len(hits) == 3

    async def test_failed_refresh_serves_stale_items(self) -> None:
        """When a refresh fails, the last good items are still served."""
        state: dict[str, Any] = {}
        async with serve(feed_app(state)) as srv, guarded(HOSTS) as session:
            lane = _lane(srv.port, session)
            await lane.search(LaneRequest(query="insulin"))
            state["rss_mode"] = "500"
            await asyncio.sleep(0.01)
            hits = await lane.search(LaneRequest(query="insulin therapy"))
        assert hits[0].id == "https://news.test/insulin"

    async def test_all_feeds_down_fails(self) -> None:
        """With no items at all, the feed error surfaces."""
        async with serve(feed_app({"rss_mode": "500"})) as srv, guarded(HOSTS) as session:
            spec_lane = RssNewsLane(
                LaneSpec(
                    name="news",
                    kind=LaneKind.NEWS,
                    backend="rss",
                    options={"feeds": [f"http://news.test:{srv.port}/rss.xml"]},
                ),
                LaneResources(http=session),
            )
            with pytest.raises(LaneUnavailable):
                await spec_lane.search(LaneRequest(query="insulin"))

    async def test_hung_feed_times_out(self) -> None:
        """A hung feed fails at timeout_s."""
        async with serve(feed_app({"rss_mode": "hang"})) as srv, guarded(HOSTS) as session:
            lane = RssNewsLane(
                LaneSpec(
                    name="news",
                    kind=LaneKind.NEWS,
                    backend="rss",
                    options={"feeds": [f"http://news.test:{srv.port}/rss.xml"], "timeout_s": 0.2},
                ),
                LaneResources(http=session),
            )
            with pytest.raises(LaneTimeout):
                await lane.search(LaneRequest(query="insulin"))

    async def test_date_bounds(self) -> None:
        """Items older than date_from are dropped."""
        request = LaneRequest(query="insulin", constraints=BoundConstraints(date_from=datetime(2020, 1, 1, tzinfo=UTC)))
        async with serve(feed_app({})) as srv, guarded(HOSTS) as session:
            hits = await _lane(srv.port, session).search(request)
        assert "https://news.test/old" not in [h.id for h in hits]

    def test_feeds_required(self) -> None:
        """A lane without feeds is a ConfigError naming the key."""
        with pytest.raises(ConfigError, match=r"options\.feeds"):
            RssNewsLane(LaneSpec(name="news", kind=LaneKind.NEWS, backend="rss"), LaneResources())


class TestMatchScore:
    def test_share_of_terms(self) -> None:
        """The score is the share of non-stopword query terms present."""
        assert match_score("the insulin pump", "Insulin news") == 0.5


def test_public_api() -> None:
    """The module exports the lane and the matcher."""
    assert set(mod.__all__) == {"BACKEND", "RssNewsLane", "match_score"}


class TestNotAFeed:
    @pytest.mark.parametrize("body", [b'{"items": [1, 2', b"[" * 100_000, b"\x00\xff garbage"])
    async def test_a_body_that_is_no_feed_is_a_bad_response(self, body: bytes) -> None:
        """Truncated JSON, 100,000-deep brackets or bytes that are no feed: LaneBadResponse, not 0 hits."""

        async def any_body(_req: web.Request) -> web.Response:
            return web.Response(body=body, content_type="application/json")

        app = web.Application()
        app.router.add_get("/rss.xml", any_body)
        app.router.add_get("/atom.xml", any_body)
        async with serve(app) as srv, guarded(HOSTS) as session:
            with pytest.raises(LaneBadResponse, match="not an RSS or Atom feed"):
                await _lane(srv.port, session).search(LaneRequest(query="insulin"))
