"""The lane boundary: hits repaired or dropped in one place; a lane's bad payload stays that lane's error."""

from __future__ import annotations

import json
import math
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given
from hypothesis import strategies as st

import fabric.query.sanitize as mod
from fabric.core.errors import LaneBadResponse
from fabric.core.models import Hit, LaneKind, LaneRequest
from fabric.net.webcache import WebCache
from fabric.query.engine import Engine
from fabric.query.sanitize import LIMITS, clean_line, clean_text, sanitize_hit, sanitize_hits
from fabric.serve.service import create_app
from lanes.base import LaneResources, LaneSpec
from lanes.fake import FakeLane
from lanes.web.searxng import SearxngWebLane
from lanes.web.web_cache import CachedWebLane
from tests.support.http import guarded, serve
from tests.support.settings import make_settings


def _hit(**kw: Any) -> Hit:
    base: dict[str, Any] = {"id": "a", "rank": 1, "score": 1.0, "title": "T", "text": "body", "url": "https://a.org/"}
    return Hit(**(base | kw))


class TestCleaning:
    def test_clean_hit_is_returned_as_is(self) -> None:
        """A clean hit is not copied."""
        hit = _hit(metadata={"engine": "brave", "tags": ["a", "b"], "n": 3})
        assert sanitize_hit(hit) is hit

    def test_lone_surrogate_becomes_replacement_character(self) -> None:
        """Invalid Unicode is repaired so the hit encodes as UTF-8."""
        fixed = sanitize_hit(_hit(title="bad \ud800 title", text="x\udfffy", url="https://a.org/\ud800"))
        assert fixed is not None
        assert (fixed.title, fixed.text) == ("bad \ufffd title", "x\ufffdy")
        json.dumps([fixed.title, fixed.text, fixed.url], ensure_ascii=False).encode("utf-8")

    def test_control_characters(self) -> None:
        """Controls are removed; text keeps newlines and tabs, one-line fields turn them into spaces."""
        assert clean_text("a\x00b\nc\td\x1b\x9f", 100) == "ab\nc\td"
        assert clean_line("a\nb\tc\x00d\u202eevil", 100) == "a b cdevil"

    def test_oversized_fields_are_cut(self) -> None:
        """Fields longer than their limit are cut to it."""
        fixed = sanitize_hit(_hit(title="t" * 5000, text="x" * 100_000, id="i" * 5000))
        assert fixed is not None
        assert (len(fixed.title), len(fixed.text), len(fixed.id)) == (LIMITS["title"], LIMITS["text"], LIMITS["id"])

    @pytest.mark.parametrize("score", [math.nan, math.inf, -math.inf])
    def test_non_finite_score_drops_the_hit(self, score: float) -> None:
        """A NaN or infinite score cannot be ranked: the hit is dropped."""
        assert sanitize_hit(_hit(score=score)) is None

    def test_non_finite_quality_and_bad_simhash_cleared(self) -> None:
        """A NaN quality and a SimHash outside 64 bits become unknown."""
        fixed = sanitize_hit(_hit(quality=math.nan, simhash=1 << 70))
        assert fixed is not None
        assert (fixed.quality, fixed.simhash) == (None, None)

    def test_empty_id_after_cleaning_drops(self) -> None:
        """An id that is only control characters cannot identify anything."""
        assert sanitize_hit(_hit(id="\x00\x01")) is None

    def test_metadata_bounded_and_cleaned(self) -> None:
        """Metadata keeps JSON-like values, 4 levels, 64 items, finite floats, clean strings."""
        deep: Any = "leaf"
        for _ in range(10):
            deep = {"d": deep}
        meta = {"deep": deep, "nan": math.nan, "s": "a\ud800", "many": list(range(1000)), 7: "int key", "o": object()}
        fixed = sanitize_hit(_hit(metadata=meta))
        assert fixed is not None
        out = dict(fixed.metadata)
        assert out["deep"] == {"d": {"d": {"d": None}}}  # the top level counts: 4 levels in all
        assert (out["nan"], out["s"], len(out["many"]), out["7"]) == (None, "a\ufffd", 64, "int key")
        assert isinstance(out["o"], str)
        json.dumps(out).encode("utf-8")


class TestSanitizeHits:
    def test_unusable_hits_dropped_and_reranked(self) -> None:
        """Dropped hits leave the others ranked 1..n in lane order."""
        hits = [_hit(id="a", rank=1), _hit(id="b", rank=2, score=math.nan), _hit(id="c", rank=3)]
        assert [(h.id, h.rank) for h in sanitize_hits(hits)] == [("a", 1), ("c", 2)]

    def test_no_usable_hit_is_lane_bad_response(self) -> None:
        """A lane whose every hit is unusable answered nothing: LaneBadResponse naming the lane."""
        with pytest.raises(LaneBadResponse) as err:
            sanitize_hits([_hit(score=math.nan)], lane="web", provider="searxng")
        assert (err.value.lane, err.value.provider, err.value.failure) == ("web", "searxng", "bad_response")

    def test_empty_answer_is_fine(self) -> None:
        """No hits is a valid answer."""
        assert sanitize_hits([]) == []

    def test_not_a_list_is_bad_response(self) -> None:
        """A lane returning something else than hits is a bad response, not a crash."""
        with pytest.raises(LaneBadResponse):
            sanitize_hits("nope")  # type: ignore[arg-type]


_BAD_TITLE = (
    b'{"query": "q", "results": ['
    b'{"url": "https://a.org/1", "title": "bad \\ud800 title", "content": "one", "score": 2.0, "engines": ["x"]},'
    b'{"url": "https://b.org/2", "title": "good", "content": "two \\u0000 nul", "score": 1.0, "engines": ["x"]}'
    b'], "answers": [], "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": []}'
)


@pytest.fixture
async def web_service(tmp_path: Path) -> AsyncIterator[tuple[TestClient, dict[str, Any], Engine]]:
    """The HTTP service over a real SearXNG lane (loopback upstream whose answer the test sets) with the
    ``web_cache`` fallback, next to a healthy fake keyword lane."""
    state: dict[str, Any] = {"mode": "bad"}

    async def search(_req: web.Request) -> web.Response:
        if state["mode"] == "down":
            return web.Response(status=503, text="down")
        if state["mode"] == "deep":
            body = b'{"results": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
            return web.Response(body=body, content_type="application/json")
        if state["mode"] == "nan":
            body = b'{"results": [{"url": "https://a.org/1", "title": "t", "score": NaN, "engines": ["x"]}]}'
            return web.Response(body=body, content_type="application/json")
        return web.Response(body=_BAD_TITLE, content_type="application/json")

    app = web.Application()
    app.router.add_get("/search", search)
    async with serve(app) as upstream, guarded(["searxng.test"]) as session:
        cache = WebCache()
        resources = LaneResources(home=tmp_path, http=session, web_cache=cache)
        spec = LaneSpec(
            name="web", kind=LaneKind.WEB, backend="searxng", options={"url": f"http://searxng.test:{upstream.port}"}
        )
        lanes = {
            "keyword": FakeLane(name="keyword", hits=3),
            "web": SearxngWebLane(spec, resources),
            "web_cache": CachedWebLane(LaneSpec(name="web_cache", kind=LaneKind.WEB, backend="web_cache"), resources),
        }
        settings = make_settings(tmp_path, {"keyword": {}, "web": {"kind": LaneKind.WEB, "fallback": "web_cache"}})
        engine = Engine(settings, lanes=lanes, resources=resources)
        async with TestClient(TestServer(create_app(engine), host="127.0.0.1")) as client:
            yield client, state, engine


class TestUntrustedUpstream:
    async def test_lone_surrogate_in_one_title_repaired_not_500(
        self, web_service: tuple[TestClient, dict[str, Any], Engine]
    ) -> None:
        """One web result with a lone surrogate in its title: 200, the title repaired, the lane a success."""
        client, _state, _engine = web_service
        resp = await client.post("/v1/search", json={"query": "q", "lanes": ["keyword", "web"]})
        assert resp.status == 200
        body = json.loads(await resp.read())
        titles = {i["title"] for i in body["items"]}
        assert "bad \ufffd title" in titles
        assert body["lanes"]["web"]["status"] == "success"

    async def test_cache_serves_repaired_hits_after_upstream_fails(
        self, web_service: tuple[TestClient, dict[str, Any], Engine]
    ) -> None:
        """What the cache holds was usable: when the upstream then fails, the fallback answers (no 500)."""
        client, state, _engine = web_service
        assert (await client.post("/v1/search", json={"query": "q", "lanes": ["keyword", "web"]})).status == 200
        state["mode"] = "down"
        resp = await client.post("/v1/search", json={"query": "q", "lanes": ["keyword", "web"]})
        assert resp.status == 200
        body = json.loads(await resp.read())
        assert body["lanes"]["web"]["status"] == "fallback"
        assert "bad \ufffd title" in {i["title"] for i in body["items"]}

    async def test_unusable_answer_is_the_lanes_error_and_penalised(
        self, web_service: tuple[TestClient, dict[str, Any], Engine]
    ) -> None:
        """An answer whose only hit has a NaN score: the web lane errors (bad_response, penalised), the query
        still answers with the keyword lane's hits."""
        client, state, engine = web_service
        state["mode"] = "nan"
        resp = await client.post("/v1/search", json={"query": "nan query", "lanes": ["keyword", "web"]})
        assert resp.status == 200
        body = json.loads(await resp.read())
        assert body["lanes"]["keyword"]["status"] == "success"
        assert body["lanes"]["web"]["status"] in ("error", "fallback")
        assert "LaneBadResponse" in (body["lanes"]["web"]["error"] or "")
        health = engine.penalties.snapshot("searxng")
        assert (health["samples"], health["failure_rate"]) == (1, 1.0)
        assert engine.resources is not None
        assert engine.resources.web_cache is not None
        assert engine.resources.web_cache.lookup("nan query") == []  # what could not be used is not cached

    async def test_cache_holds_the_repaired_hits(self, web_service: tuple[TestClient, dict[str, Any], Engine]) -> None:
        """The web cache is written after the boundary: it holds the repaired title, never the raw one."""
        client, _state, engine = web_service
        assert (await client.post("/v1/search", json={"query": "q", "lanes": ["keyword", "web"]})).status == 200
        assert engine.resources is not None
        assert engine.resources.web_cache is not None
        (entry,) = engine.resources.web_cache.lookup("q")
        assert "bad \ufffd title" in [h.title for h in entry.hits]
        assert all("\x00" not in h.text for h in entry.hits)

    async def test_json_nested_100000_deep_is_the_lanes_bad_response(
        self, web_service: tuple[TestClient, dict[str, Any], Engine]
    ) -> None:
        """A body nested 100,000 deep is refused by the parser's guard as LaneBadResponse, not a crash."""
        client, state, _engine = web_service
        state["mode"] = "deep"
        resp = await client.post("/v1/search", json={"query": "deep query", "lanes": ["keyword", "web"]})
        assert resp.status == 200
        body = json.loads(await resp.read())
        assert "nested too deeply" in (body["lanes"]["web"]["error"] or "")


class TestLaneRequestUntouched:
    async def test_fake_lane_hits_pass_unchanged(self) -> None:
        """Clean hits from a lane come through the boundary as the same objects."""
        hits = await FakeLane(name="k", hits=5).search(LaneRequest(query="q"))
        assert all(a is b for a, b in zip(sanitize_hits(hits), hits, strict=True))


def test_public_api() -> None:
    """The module exports exactly its documented names."""
    assert set(mod.__all__) == {
        "LIMITS", "MAX_META_DEPTH", "MAX_META_ITEMS", "clean_line", "clean_text", "sanitize_hit", "sanitize_hits",
    }  # fmt: skip


_BAD_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
"""What clean_text repairs, as a character class (the reference of the byte-level check)."""
_ANY_TEXT = st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=60)
_NUMBER = st.floats(allow_nan=True, allow_infinity=True) | st.integers(min_value=-(2**70), max_value=2**70)


class TestFuzz:
    @given(
        strings=st.fixed_dictionaries(dict.fromkeys(("id", "title", "text", "url", "domain", "source_ref"), _ANY_TEXT)),
        score=_NUMBER,
        quality=st.none() | st.floats(allow_nan=True, allow_infinity=True),
        simhash=st.none() | st.integers(min_value=-(2**70), max_value=2**70),
        meta=st.dictionaries(_ANY_TEXT, _ANY_TEXT | _NUMBER | st.lists(_ANY_TEXT, max_size=3), max_size=4),
    )
    def test_any_hit_comes_out_safe_or_dropped(
        self, strings: dict[str, str], score: float, quality: float | None, simhash: int | None, meta: dict[str, Any]
    ) -> None:
        """Whatever a lane sends, the boundary drops the hit or returns one that encodes, serialises, stays
        within limits, and is a fixed point (sanitising again changes nothing)."""
        hit = Hit(rank=1, score=score, quality=quality, simhash=simhash, metadata=meta, **strings)
        fixed = sanitize_hit(hit)
        if fixed is None:
            return
        for name in ("id", "title", "text", "url", "domain", "source_ref"):
            value = getattr(fixed, name)
            value.encode("utf-8")
            assert len(value) <= LIMITS[name]
            assert not any(ord(c) < 32 and c not in "\t\n\r" for c in value)
        assert math.isfinite(fixed.score)
        json.dumps(dict(fixed.metadata), allow_nan=False).encode("utf-8")
        assert sanitize_hit(fixed) is fixed

    @given(st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=80))
    def test_fast_text_check_agrees_with_the_pattern(self, text: str) -> None:
        """The byte-level check of text fields finds exactly what the character-class pattern finds."""
        assert mod._text_is_clean(text) is (_BAD_TEXT.search(text) is None)

    @pytest.mark.parametrize(
        "text", ["ascii\twith\ttabs\r\nand lines", "±5 µg at 37 °C", "a\x85b", "a\x9fb", "\x7f", "\ud800", "é\x00"]
    )
    def test_fast_text_check_on_edges(self, text: str) -> None:
        """Near-miss bytes (C2 B1 of '±' beside C2 85 of NEL), DEL, a lone surrogate and NUL after non-ASCII."""
        assert mod._text_is_clean(text) is (_BAD_TEXT.search(text) is None)


_LONG_TEXT = st.text(alphabet="ab", min_size=250, max_size=1100)
"""Strings around the one-line limits (domain 255, title 1,000, the others 1,024 and more)."""


class TestOnePassLineCheck:
    @given(
        strings=st.fixed_dictionaries(
            dict.fromkeys(("id", "title", "url", "domain", "source_ref", "doc_id"), _ANY_TEXT | _LONG_TEXT)
        ),
        url_key=st.none() | _ANY_TEXT | _LONG_TEXT,
        title_key=st.none() | _ANY_TEXT | _LONG_TEXT,
    )
    def test_agrees_with_each_field_cleaned(
        self, strings: dict[str, str], url_key: str | None, title_key: str | None
    ) -> None:
        """The one-pass check of the one-line fields never skips a repair: when it says clean, cleaning each field
        keeps it as is (when it does not, the fields are cleaned one by one, as before)."""
        hit = Hit(rank=1, score=1.0, url_key=url_key, title_key=title_key, **strings)
        each = all(
            clean_line(value, LIMITS[name]) is value
            for name in mod._STR_FIELDS
            if (value := getattr(hit, name)) is not None
        )
        if mod._lines_clean(hit):
            assert each
        if each and all(getattr(hit, n) is None or getattr(hit, n).isprintable() for n in mod._STR_FIELDS):
            assert mod._lines_clean(hit)  # printable fields within their limits: the fast path takes them

    @pytest.mark.parametrize(("name", "value"), [("domain", 42), ("url_key", 0), ("title_key", False)])
    def test_a_field_that_is_not_a_string_takes_the_field_by_field_repair(self, name: str, value: Any) -> None:
        """A lane that put a number in a one-line field (a falsy one too) gets it back as a string."""
        hit = _hit(**{name: value})
        assert mod._lines_clean(hit) is False
        fixed = sanitize_hit(hit)
        assert fixed is not None
        assert getattr(fixed, name) == str(value)

    @given(_ANY_TEXT)
    def test_printable_keys_have_nothing_to_repair(self, key: str) -> None:
        """The metadata keys' shortcut: a printable key has none of the characters a one-line field loses."""
        if key.isprintable():
            assert mod._BAD_LINE.search(key) is None


_META_SCALAR = _ANY_TEXT | _LONG_TEXT | _NUMBER | st.none() | st.booleans()
"""Metadata values around the string limit (2,000 once joined in a list), numbers of every kind, None."""


class TestJoinedMetadataCheck:
    @given(
        st.dictionaries(
            _ANY_TEXT,
            _META_SCALAR
            | st.lists(_ANY_TEXT | _LONG_TEXT, max_size=6)
            | st.lists(_META_SCALAR, max_size=4)
            | st.lists(st.text(alphabet="ab", min_size=1990, max_size=2010), max_size=2),
            max_size=5,
        )
    )
    def test_clean_exactly_when_repair_keeps_it(self, meta: dict[str, Any]) -> None:
        """Its strings checked joined: the fast check says clean exactly when the value-by-value check (the
        reference, as the repair judges each value) does, for strings, lists of strings, mixed lists and numbers."""

        def reference(value: Any) -> bool:
            if isinstance(value, list):
                return len(value) <= mod.MAX_META_ITEMS and all(map(mod._scalar_clean, value))
            return mod._scalar_clean(value)

        keys_ok = all(len(k) <= 200 and mod._BAD_LINE.search(k) is None for k in meta)
        assert mod._meta_clean(meta) is (keys_ok and all(map(reference, meta.values())))

    @pytest.mark.parametrize(
        "meta",
        [
            {"entities": ["a\xc2", "\x85b"]},
            {"entities": ["ok", "bad\x00"]},
            {"entities": ["\ud800", "\udc00"]},
            {"entities": ["x" * 2001]},
            {"entities": ["ok", 1, "bad\x9f"]},
            {"a": "fine", "b": ["fi\x85ne"]},
        ],
    )
    def test_a_bad_string_anywhere_is_found(self, meta: dict[str, Any]) -> None:
        """A control, a lone surrogate (a pair split across two items too) or an oversized item in a list of
        strings, a mixed list, or beside clean values: never clean."""
        assert mod._meta_clean(meta) is False
