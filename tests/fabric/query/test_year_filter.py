"""Temporal's hard year filter (seed 004 §4B): the lanes pull deeper among the items of the query's years, never
pad with other years, and the answer says when it fell short (``route.temporal_shortfall``).

A real home (SQLite FTS5, the SQLite graph, the flat vector store; embeddings off, so the vector lane falls back to
the keyword lane) holds 60 items of 2015 that match the query's words strongly and a few items of 2020 that match
them weakly, ranked below all of them. The doors: ``fabric search`` (JSON and table), ``POST /v1/search`` and the
engine (``route = "auto"``, whose heuristic routes "... in 2020" to Temporal).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from fabric.cli import main
from fabric.core.models import Hit, LaneKind, LaneRequest
from fabric.query.engine import Engine
from fabric.query.validation import parse_request
from fabric.serve.service import create_app
from fabric.settings import load_settings
from fabric.settings.router import RouterConfig, StrategyLanes
from lanes.base import LaneResources
from lanes.fake import FakeLane
from tests.support.settings import make_settings, quiet_logs  # noqa: F401

QUERY = "rail policy in 2020"
MATCHING = 6  # items of 2020 in the home


def _entries() -> list[dict[str, Any]]:
    words = ["signals", "freight", "sleepers", "tunnels", "stations", "tickets", "bridges", "depots", "gauges", "crews"]
    loud = [
        {
            "id": f"old-{i:02d}",
            "title": f"rail policy on {words[i % 10]} and {words[i // 10]}",
            "text": f"Rail policy for {words[i % 10]}: the rail policy of {words[i // 10]} (review {i}).",
            "url": f"https://review{i}.example/rail",
            "published_at": "2015-06-01",
        }
        for i in range(60)
    ]
    topics = ["harbour dredging", "cycle lanes", "bus fares", "airport slots", "canal locks", "tram depots"]
    quiet = [
        {
            "id": f"new-{i}",
            "title": topic,
            "text": f"The {topic} budget of the city, with one line on rail.",
            "url": f"https://city{i}.example/{i}",
            "published_at": "2020-03-01",
        }
        for i, topic in enumerate(topics)
    ]
    return loud + quiet


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("years")
    data = root / "kb.jsonl"
    data.write_text("".join(json.dumps(e) + "\n" for e in _entries()))
    h = root / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FABRIC__embeddings__backend", "none")
        mp.setenv("FABRIC_CACHE_DIR", str(root / "cache"))
        assert main(["--home", str(h), "ingest", str(data)]) == 0
    return h


ENV = {"FABRIC__embeddings__backend": "none", "FABRIC__preflight__max_loop_lag_ms": "1000000"}
"""Embeddings off; no pressure bypass of the pre-flight (whose years Temporal filters by) on a loaded machine."""


@pytest.fixture
def lexical(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path / "cache"))


def _search_json(home: Path, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["--home", str(home), "search", QUERY, "--json", *args]) == 0
    body: dict[str, Any] = json.loads(capsys.readouterr().out)
    return body


class TestCli:
    def test_every_item_is_of_the_years_when_enough_match(
        self, home: Path, lexical: None, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """k = 5 of the 6 items of 2020, all ranked below 60 items of 2015: the page holds 2020 only, no shortfall."""
        body = _search_json(home, capsys, "--route", "temporal", "--top-k", "5")
        ids = [it["id"] for it in body["items"]]
        assert len(ids) == 5
        assert all(i.startswith("new-") for i in ids), ids
        assert body["route"]["year_filter"] == [2020, 2020]
        assert "temporal_shortfall" not in body["route"]

    def test_a_short_answer_says_so_and_holds_no_other_year(
        self, home: Path, lexical: None, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """k = 10 with only 6 items of 2020: those 6, no padding from 2015, and the shortfall in the route."""
        body = _search_json(home, capsys, "--route", "temporal", "--top-k", "10")
        ids = [it["id"] for it in body["items"]]
        assert sorted(ids) == [f"new-{i}" for i in range(MATCHING)]
        assert body["route"]["temporal_shortfall"] == {"found": MATCHING, "k": 10, "years": [2020, 2020], "depth": 100}

    def test_an_undated_collection_still_answers(
        self, tmp_path: Path, lexical: None, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Entries without a date that mention no year are not of another time: a question saying "in 2020" over
        them answers with them (CISI's abstracts had lost a whole answer to a filter on dates alone)."""
        data = tmp_path / "undated.jsonl"
        topics = ["freight yards", "night trains", "level crossings", "ticket offices"]
        rows = [
            {"id": f"u{i}", "title": f"rail policy on {t}", "text": f"Rail policy: {t}."} for i, t in enumerate(topics)
        ]
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        home = tmp_path / "undated-home"
        assert main(["--home", str(home), "ingest", str(data)]) == 0
        body = _search_json(home, capsys, "--route", "temporal", "--top-k", "3")
        assert body["route"]["year_filter"] == [2020, 2020]
        assert len(body["items"]) == 3
        assert "temporal_shortfall" not in body["route"]

    def test_the_table_shows_the_shortfall(self, home: Path, lexical: None, capsys: pytest.CaptureFixture[str]) -> None:
        capsys.readouterr()
        assert main(["--home", str(home), "search", QUERY, "--route", "temporal", "--top-k", "10"]) == 0
        out = " ".join(capsys.readouterr().out.split())
        assert "temporal: 6 of 10 items match the years 2020-2020" in out

    def test_soft_years_outside_temporal_still_fill(
        self, home: Path, lexical: None, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``route = all`` (the federation) keeps the inferred year soft: the year's items first, then the rest."""
        body = _search_json(home, capsys, "--route", "all", "--top-k", "10")
        ids = [it["id"] for it in body["items"]]
        assert len(ids) == 10
        assert any(i.startswith("old-") for i in ids)
        assert "temporal_shortfall" not in body["route"]


async def test_http_answer_reports_the_shortfall(home: Path, lexical: None) -> None:
    settings = load_settings(env={"FABRIC_HOME": str(home), **ENV})
    engine = Engine(settings, resources=LaneResources(home=home))
    async with TestClient(TestServer(create_app(engine, mcp=False), host="127.0.0.1")) as client:
        resp = await client.post("/v1/search", json={"query": QUERY, "route": "temporal", "top_k": 8})
        body = await resp.json()
        assert resp.status == 200, body
    assert sorted(it["id"] for it in body["items"]) == [f"new-{i}" for i in range(MATCHING)]
    assert body["route"]["temporal_shortfall"]["found"] == MATCHING
    assert body["route"]["temporal_shortfall"]["k"] == 8


async def test_engine_auto_routes_to_temporal_and_filters(home: Path, lexical: None) -> None:
    settings = load_settings(env={"FABRIC_HOME": str(home), **ENV})
    async with Engine(settings, resources=LaneResources(home=home)) as engine:
        res = await engine.search(parse_request({"query": QUERY, "route": "auto", "top_k": 4}, settings))
    assert (res.route["strategy"], res.route["rule"]) == ("temporal", "temporal_regex")
    assert [it.id[:4] for it in res.items] == ["new-"] * 4
    assert all(it.hit.published_at is not None and it.hit.published_at.year == 2020 for it in res.items)


class _Mixed(FakeLane):
    """A lane that cannot filter by year (its backend keeps undated items): its hits alternate 2015 and 2020."""

    def __init__(self) -> None:
        hits = [
            Hit(id=f"h{i}", rank=i + 1, score=1.0 / (i + 1), title=f"h {i}", text=f"text {i}",
                metadata={"years": [2015 if i % 2 else 2020]})
            for i in range(40)
        ]  # fmt: skip
        super().__init__(name="web", kind=LaneKind.WEB, hits=hits)
        self.asked: list[int] = []

    async def search(self, request: LaneRequest) -> list[Hit]:
        self.asked.append(request.top_k)
        return await super().search(request)


async def test_a_lane_without_a_year_filter_is_asked_deeper_and_held_to_the_years(tmp_path: Path) -> None:
    """Not ``year_filter_native``: asked for ``temporal_depth`` hits, the executor keeps those of the years."""
    router = RouterConfig(
        temporal_depth=80, strategies=StrategyLanes(dense=("web",), temporal=("web",), graph=("web",))
    )
    settings = dataclasses.replace(make_settings(tmp_path, {"web": {"kind": LaneKind.WEB}}), router=router)
    lane = _Mixed()
    async with Engine(settings, lanes={"web": lane}) as engine:
        res = await engine.search(parse_request({"query": QUERY, "route": "temporal", "top_k": 12}, settings))
    assert lane.asked == [80]  # above the 50 asked of every lane
    assert [it.id for it in res.items] == [f"h{i}" for i in range(0, 24, 2)]  # the first 12 of the 20 of 2020
    assert "temporal_shortfall" not in res.route
