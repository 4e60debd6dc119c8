"""Tests for the planning seam: the engine with fake lanes under every route."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from fabric.core.errors import QueryError
from fabric.core.models import Hit, LaneKind, LaneRequest, SearchResult
from fabric.query.engine import Engine
from fabric.query.router.planner import filter_years
from fabric.query.validation import parse_request
from fabric.settings import Settings
from fabric.settings.router import RouterConfig, StrategyLanes
from lanes.base import LaneResources
from lanes.fake import FakeLane
from tests.support.settings import make_settings, quiet_logs  # noqa: F401

LANES = {"keyword": {}, "vector": {"kind": LaneKind.VECTOR}, "graph": {"kind": LaneKind.GRAPH}}


class Recording(FakeLane):
    """A fake lane that remembers each request."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.requests: list[LaneRequest] = []

    async def search(self, request: LaneRequest) -> list[Hit]:
        self.requests.append(request)
        hits = await super().search(request)
        c = request.constraints
        if c.date_from is not None and c.date_to is not None:  # the native year filter
            return filter_years(hits, (c.date_from.year, c.date_to.year))
        return hits


def vec_hits(scores: list[float], years: list[int] | None = None) -> list[Hit]:
    years = years or [2000] * len(scores)
    return [
        Hit(id=f"v{i}", rank=i + 1, score=s, title=f"v {i}", text=f"vector text {i}", metadata={"years": [y]})
        for i, (s, y) in enumerate(zip(scores, years, strict=True))
    ]


PEAKED = [0.9, 0.4, 0.38, 0.37, 0.36, 0.35, 0.34, 0.33, 0.32, 0.31]
FLAT = [0.80, 0.79, 0.78, 0.77, 0.76, 0.75, 0.74, 0.73, 0.72, 0.71]


def lanes(vector: list[Hit], *, keyword: bool = True) -> dict[str, Recording]:
    """The three store lanes; without ``keyword`` for the tests of VECTOR_ONLY's choices (a lane no strategy names
    would run under every strategy)."""
    fakes = {
        "keyword": Recording(name="keyword", hits=5),
        "vector": Recording(name="vector", kind=LaneKind.VECTOR, hits=vector),
        "graph": Recording(name="graph", kind=LaneKind.GRAPH, hits=5),
    }
    if not keyword:
        del fakes["keyword"]
    return fakes


VECTOR_ONLY = RouterConfig(
    max_score_min=0.65,
    graph_weight=None,
    strategies=StrategyLanes(dense=("vector",), temporal=("vector",), graph=("vector", "graph")),
)
"""Strategies on the vector lane alone, so each test sees exactly which lane the plan adds; rule 3 at the seed's
initial thresholds (the shipped ones are tuned so that it never fires); lanes at their configured weights."""


def settings_for(tmp_path: Path, router: RouterConfig = VECTOR_ONLY, names: tuple[str, ...] = tuple(LANES)) -> Settings:
    return dataclasses.replace(make_settings(tmp_path, {n: LANES[n] for n in names}), router=router)


async def run(tmp_path: Path, fakes: dict[str, Recording], **data: Any) -> SearchResult:
    settings = settings_for(tmp_path, names=tuple(n for n in LANES if n in fakes))
    async with Engine(settings, lanes=fakes) as engine:
        return await engine.search(parse_request({"query": "vitamin d levels", **data}, settings))


def calls(fakes: dict[str, Recording]) -> dict[str, int]:
    return {n: len(f.requests) for n, f in fakes.items()}


async def test_default_route_is_the_federation(tmp_path: Path) -> None:
    """No route: every lane runs, the record says so."""
    fakes = lanes(vec_hits(PEAKED))
    res = await run(tmp_path, fakes)
    assert calls(fakes) == {"keyword": 1, "vector": 1, "graph": 1}
    assert res.to_dict()["route"]["strategy"] == "all"
    assert res.route["lane_calls"] == 3


async def test_auto_peaked_probe_is_dense_and_reuses_the_probe(tmp_path: Path) -> None:
    """A peaked probe routes to Dense: one vector call in all, whose hits are the answer."""
    fakes = lanes(vec_hits(PEAKED), keyword=False)
    res = await run(tmp_path, fakes, route="auto")
    assert calls(fakes) == {"vector": 1, "graph": 0}
    r = res.route
    assert (r["strategy"], r["chooser"], r["rule"], r["lane_calls"], r["probe_reused"]) == (
        "dense", "heuristic", "fallback", 1, True,
    )  # fmt: skip
    assert r["signals"]["max"] == 0.9
    assert r["signals"]["skew"] > 0.5
    assert r["signals"]["dist"] is None  # the heuristic does not compute the distance
    assert list(res.lanes) == ["vector"]
    assert [it.id for it in res.items][:3] == ["v0", "v1", "v2"]


async def test_default_dense_is_keyword_plus_the_reused_probe(tmp_path: Path) -> None:
    """The shipped Dense (keyword + vector): the probe stands in for the vector lane, the keyword lane runs once."""
    fakes = lanes(vec_hits(PEAKED))
    settings = dataclasses.replace(make_settings(tmp_path, LANES), router=RouterConfig())
    async with Engine(settings, lanes=fakes) as engine:
        res = await engine.search(parse_request({"query": "vitamin d levels", "route": "auto"}, settings))
    assert calls(fakes) == {"keyword": 1, "vector": 1, "graph": 0}
    assert (res.route["strategy"], res.route["lane_calls"], res.route["probe_reused"]) == ("dense", 2, True)
    assert set(res.lanes) == {"keyword", "vector"}


async def test_auto_flat_confident_probe_adds_graph(tmp_path: Path) -> None:
    """A flat, confident probe (rule 3) routes to Graph: the probe is reused, only the graph lane runs after it."""
    fakes = lanes(vec_hits(FLAT), keyword=False)
    res = await run(tmp_path, fakes, route="auto")
    assert calls(fakes) == {"vector": 1, "graph": 1}
    assert (res.route["strategy"], res.route["rule"], res.route["lane_calls"]) == ("graph", "probe_flat", 2)
    assert set(res.lanes) == {"vector", "graph"}


async def test_auto_relational_text_needs_no_probe(tmp_path: Path) -> None:
    """Rule 2 decides on the words: vector and graph run once each, no signals."""
    fakes = lanes(vec_hits(PEAKED), keyword=False)
    res = await run(tmp_path, fakes, route="auto", query="connection between Kestrel Motors and Orbis Rail")
    assert calls(fakes) == {"vector": 1, "graph": 1}
    assert res.route["rule"] == "relational_phrase"
    assert res.route["signals"] is None


async def test_temporal_filters_by_year(tmp_path: Path) -> None:
    """Rule 1 with a year range: the vector lane gets the query's years as a hard filter (issue 41, seed 004 §4B):
    its preference, asked to the depth cap, and only the items of those years reach the answer."""
    years = [2018, 2019, 2020, 2021, 2022, 2019, 2005, 2020, 2001, 2021]
    fakes = lanes(vec_hits(PEAKED, years), keyword=False)
    res = await run(tmp_path, fakes, route="auto", query="what changed between 2019 and 2021 in rail policy")
    (req,) = fakes["vector"].requests
    c = req.constraints
    assert (c.year_filter, c.query_years) == ((2019, 2021), (2019, 2021))
    assert (c.date_from, c.date_to) == (None, None)  # undated items may still answer (fabric.query.year_filter)
    assert req.top_k >= 100  # [router] temporal_depth
    assert res.route["strategy"] == "temporal"
    assert res.route["year_filter"] == [2019, 2021]
    assert {it.id for it in res.items} == {"v1", "v2", "v3", "v5", "v7", "v9"}  # never padded with other years
    assert res.route["temporal_shortfall"]["found"] == 6

    fakes = lanes(vec_hits(PEAKED, years), keyword=False)
    res = await run(tmp_path, fakes, route="dense", query="what changed between 2019 and 2021 in rail policy")
    (req,) = fakes["vector"].requests
    assert req.constraints.date_from is None
    assert len(res.items) == 10
    assert (res.route["chooser"], res.route["rule"]) == ("request", "route=dense")


async def test_temporal_reuses_the_probe_when_enough_hits_pass(tmp_path: Path) -> None:
    """The classifier path probes first; Temporal then filters the probe's hits instead of a second call."""
    fakes = lanes(vec_hits(FLAT, [2020] * 10))
    async with with_classifier(tmp_path, fakes, "temporal") as engine:
        req = parse_request({"query": "rail policy in 2020", "route": "auto", "top_k": 5}, engine.settings)
        res = await engine.search(req)
    assert calls(fakes)["vector"] == 1
    r = res.route
    assert (r["strategy"], r["chooser"], r["probe_reused"], r["probe_year_hits"]) == (
        "temporal",
        "classifier",
        True,
        10,
    )
    assert r["probabilities"]["temporal"] == 1.0
    assert 0.0 < r["signals"]["dist"] < 1.0  # measured with the embedder


async def test_temporal_deep_fills_when_the_probe_is_short(tmp_path: Path) -> None:
    """Too few probe hits in the range: the lane runs again with the native filter."""
    fakes = lanes(vec_hits(FLAT, [2020] + [1990] * 9), keyword=False)
    async with with_classifier(tmp_path, fakes, "temporal") as engine:
        req = parse_request({"query": "rail in 2020", "route": "auto", "top_k": 5}, engine.settings)
        res = await engine.search(req)
    assert calls(fakes)["vector"] == 2
    assert res.route["deep_fill"] is True
    assert res.route["lane_calls"] == 2
    assert [it.id for it in res.items] == ["v0"]  # the one item of 2020, no padding from 1990
    assert res.route["temporal_shortfall"] == {"found": 1, "k": 5, "years": [2020, 2020], "depth": 100}


async def test_missing_classifier_falls_back_to_heuristic(tmp_path: Path) -> None:
    """chooser=classifier without an artifact: the heuristic decides, and the reason says why."""
    fakes = lanes(vec_hits(PEAKED))
    settings = settings_for(tmp_path, dataclasses.replace(VECTOR_ONLY, auto="classifier"))
    async with Engine(settings, lanes=fakes) as engine:
        res = await engine.search(parse_request({"query": "timeline of rail", "route": "auto"}, settings))
    assert res.route["chooser"] == "heuristic"
    assert "classifier unavailable" in res.route["reason"]


async def test_restricted_lanes_without_the_strategy_lane(tmp_path: Path) -> None:
    """A request restricted to the keyword lane: no probe, and the plan keeps the lanes it was given."""
    fakes = lanes(vec_hits(PEAKED))
    res = await run(tmp_path, fakes, route="auto", lanes=["keyword"])
    assert calls(fakes) == {"keyword": 1, "vector": 0, "graph": 0}
    assert res.route["rule"] == "no_probe"
    assert "every planned lane runs" in res.route["reason"]


async def test_unknown_route_is_a_clear_error(tmp_path: Path) -> None:
    """The valid values are listed."""
    settings = settings_for(tmp_path)
    with pytest.raises(QueryError) as info:
        parse_request({"query": "x", "route": "fastest"}, settings)
    assert info.value.field == "route"
    assert "auto, all, dense, temporal, graph" in str(info.value)
    assert parse_request({"query": "x", "route": " AUTO "}, settings).route == "auto"


class _Embedder:
    """A tiny deterministic embedder: letter counts of a-d (enough for a centroid and a cosine)."""

    name = "letters"
    dim = 4

    def embed(self, texts: Any) -> list[list[float]]:
        return [[float(t.count(c)) + 0.1 for c in "abcd"] for t in texts]


def with_classifier(
    tmp_path: Path, fakes: dict[str, Recording], name: str, router: RouterConfig = VECTOR_ONLY
) -> Engine:
    settings = settings_for(tmp_path, router, names=tuple(n for n in LANES if n in fakes))
    engine = Engine(settings, lanes=fakes, resources=LaneResources(embedder=_Embedder()))
    engine.router.chooser = "classifier"
    engine.router.classifier = _Always(name)  # type: ignore[assignment]
    return engine


class _Always:
    """A stand-in classifier that always picks one strategy (the real one is tested in test_classifier)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def probabilities(self, text_vector: Any, signals: Any) -> dict[Any, float]:
        from fabric.core.strategies import STRATEGY_ORDER

        return {s: 1.0 if s.value == self.name else 0.0 for s in STRATEGY_ORDER}


async def test_probe_time_counts_as_lane_time(tmp_path: Path) -> None:
    """The probe's wait is lane time in the timings, not the engine's overhead."""
    fakes = lanes(vec_hits(PEAKED))
    fakes["vector"].delay_ms = 20.0
    res = await run(tmp_path, fakes, route="auto")
    assert res.route["strategy"] == "dense"
    assert res.timings["lanes_ms"] >= 15.0
    assert res.timings["overhead_ms"] < res.timings["total_ms"] - 15.0


async def test_common_lanes_start_with_the_probe(tmp_path: Path) -> None:
    """The shipped strategies all run keyword: it starts with the probe, and is reused unless a year filter applies."""
    fakes = lanes(vec_hits(FLAT, [2020] * 10))
    async with with_classifier(tmp_path, fakes, "graph", RouterConfig()) as engine:
        res = await engine.search(parse_request({"query": "rail policy", "route": "auto"}, engine.settings))
    assert calls(fakes) == {"keyword": 1, "vector": 1, "graph": 1}
    assert fakes["keyword"].requests[0].constraints.query_years is None
    assert res.route["lane_calls"] == 3

    fakes = lanes(vec_hits(FLAT, [2020] * 10))
    async with with_classifier(tmp_path, fakes, "temporal", RouterConfig()) as engine:
        req = parse_request({"query": "rail policy in 2020", "route": "auto", "top_k": 5}, engine.settings)
        res = await engine.search(req)
    # keyword again, with the year filter; the shipped Temporal adds the graph lane for a year range
    assert calls(fakes) == {"keyword": 2, "vector": 1, "graph": 1}
    assert fakes["keyword"].requests[1].constraints.query_years == (2020, 2020)
    assert res.route["lane_calls"] == 4


class _GateEmbedder(_Embedder):
    """Opens ``gate`` when the probe's signals are computed (the keyword lane below waits for it)."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.loop = asyncio.get_running_loop()

    def embed(self, texts: Any) -> list[list[float]]:
        self.loop.call_soon_threadsafe(self.gate.set)
        return super().embed(texts)


class _GatedKeyword(Recording):
    """A keyword lane that answers only after ``gate`` opens."""

    def __init__(self, gate: asyncio.Event) -> None:
        super().__init__(name="keyword", hits=5)
        self.gate = gate

    async def search(self, request: LaneRequest) -> list[Hit]:
        await self.gate.wait()
        return await super().search(request)


async def test_signals_are_computed_while_the_common_lanes_run(tmp_path: Path) -> None:
    """The probe's signals do not wait for the lanes started with it: here (the classifier, whose signals embed the
    query and the probe's hits) the keyword lane answers only once the signals are being computed, and it still
    succeeds (it would be cut at its budget if they waited for it)."""
    embedder = _GateEmbedder()
    fakes = lanes(vec_hits(PEAKED))
    fakes["keyword"] = _GatedKeyword(embedder.gate)
    settings = dataclasses.replace(make_settings(tmp_path, LANES), router=RouterConfig())
    async with Engine(settings, lanes=fakes, resources=LaneResources(embedder=embedder)) as engine:
        engine.router.chooser = "classifier"
        engine.router.classifier = _Always("dense")  # type: ignore[assignment]
        res = await engine.search(parse_request({"query": "vitamin d levels", "route": "auto"}, settings))
    assert res.lanes["keyword"].status.value == "success"
    assert (res.route["strategy"], res.route["chooser"], res.route["lane_calls"]) == ("dense", "classifier", 2)
    assert res.route["signals"]["dist"] is not None


class _CountingEmbedder(_Embedder):
    """Counts the texts it is asked to embed."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: Any) -> list[list[float]]:
        self.texts += list(texts)
        return super().embed(texts)


async def test_heuristic_embeds_nothing(tmp_path: Path) -> None:
    """The heuristic reads the probe's scores only: routing embeds neither the query nor the probe's ten hits (a
    model run per hit when the content-hash cache lacks them: ~600 ms a SciFact query, measured), and the record
    says the distance was not computed."""
    embedder = _CountingEmbedder()
    fakes = lanes(vec_hits(PEAKED))
    settings = dataclasses.replace(make_settings(tmp_path, LANES), router=RouterConfig())
    async with Engine(settings, lanes=fakes, resources=LaneResources(embedder=embedder)) as engine:
        res = await engine.search(parse_request({"query": "vitamin d levels", "route": "auto"}, settings))
    assert (res.route["strategy"], res.route["chooser"]) == ("dense", "heuristic")
    assert embedder.texts == []
    assert res.route["signals"]["dist"] is None
    assert res.route["signals"]["max"] == 0.9


PROBE_ALONE = RouterConfig(probe_alone=True, probe_alone_margin=0.15)
"""The shipped strategies (Dense = keyword + vector) with Dense from the probe alone when it is confident."""


async def test_probe_alone_answers_a_confident_probe_from_the_vector_lane(tmp_path: Path) -> None:
    """A probe whose top score stands out (0.9 vs 0.4): Dense is the probe alone, the keyword lane never runs."""
    fakes = lanes(vec_hits(PEAKED))
    settings = dataclasses.replace(make_settings(tmp_path, LANES), router=PROBE_ALONE)
    async with Engine(settings, lanes=fakes) as engine:
        res = await engine.search(parse_request({"query": "vitamin d levels", "route": "auto"}, settings))
    assert calls(fakes) == {"keyword": 0, "vector": 1, "graph": 0}
    r = res.route
    assert (r["strategy"], r["rule"], r["lanes"], r["lane_calls"]) == ("dense", "probe_confident", ["vector"], 1)
    assert "0.500" in r["reason"]
    assert [it.id for it in res.items][:2] == ["v0", "v1"]


async def test_probe_alone_adds_keyword_after_an_unsure_probe(tmp_path: Path) -> None:
    """Top two scores close together: the keyword lane runs after the probe (not with it), once."""
    close = [0.9, 0.85, 0.4, 0.38, 0.37, 0.36, 0.35, 0.34, 0.33, 0.32]
    fakes = lanes(vec_hits(close))
    settings = dataclasses.replace(make_settings(tmp_path, LANES), router=PROBE_ALONE)
    async with Engine(settings, lanes=fakes) as engine:
        res = await engine.search(parse_request({"query": "vitamin d levels", "route": "auto"}, settings))
    assert calls(fakes) == {"keyword": 1, "vector": 1, "graph": 0}
    assert (res.route["strategy"], res.route["rule"], res.route["lane_calls"]) == ("dense", "fallback", 2)
    assert set(res.lanes) == {"keyword", "vector"}


async def test_temporal_without_years_runs_denses_lanes(tmp_path: Path) -> None:
    """ "timeline of ..." is Temporal by rule 1 but has no year range: no filter, and Dense's lanes (not the graph
    lane the shipped Temporal adds for a year range)."""
    fakes = lanes(vec_hits(PEAKED))
    settings = dataclasses.replace(make_settings(tmp_path, LANES), router=RouterConfig())
    async with Engine(settings, lanes=fakes) as engine:
        res = await engine.search(parse_request({"query": "timeline of rail", "route": "auto"}, settings))
    assert calls(fakes) == {"keyword": 1, "vector": 1, "graph": 0}
    assert (res.route["strategy"], res.route["year_filter"]) == ("temporal", None)
    assert "Dense's lanes" in res.route["reason"]

    fakes = lanes(vec_hits(PEAKED))
    async with Engine(settings, lanes=fakes) as engine:
        res = await engine.search(parse_request({"query": "rail policy in 2020", "route": "auto"}, settings))
    assert calls(fakes) == {"keyword": 1, "vector": 1, "graph": 1}
    assert res.route["year_filter"] == [2020, 2020]


async def test_graph_strategy_weighs_the_graph_lane(tmp_path: Path) -> None:
    """Graph runs the graph lane at ``graph_weight``; the federation keeps the configured weight, and a request's
    own weight wins."""
    settings = dataclasses.replace(make_settings(tmp_path, LANES), router=RouterConfig(graph_weight=0.35))
    query = "connection between Kestrel Motors and Orbis Rail"
    async with Engine(settings, lanes=lanes(vec_hits(PEAKED))) as engine:
        routed = await engine.search(parse_request({"query": query, "route": "auto"}, settings))
        federation = await engine.search(parse_request({"query": query}, settings))
        own = await engine.search(
            parse_request({"query": query, "route": "graph", "weights": {"graph": 2.0}}, settings)
        )
    assert (routed.route["strategy"], routed.lanes["graph"].weight, routed.lanes["keyword"].weight) == (
        "graph",
        0.35,
        1.0,
    )
    assert federation.lanes["graph"].weight == 1.0
    assert own.lanes["graph"].weight == 2.0


async def test_lanes_no_strategy_names_run_as_planned(tmp_path: Path) -> None:
    """A planned web lane is outside the router's choice: it starts with the probe and runs whatever the strategy."""
    fakes = {**lanes(vec_hits(PEAKED)), "web": Recording(name="web", kind=LaneKind.WEB, hits=3)}
    settings = dataclasses.replace(
        make_settings(tmp_path, {**LANES, "web": {"kind": LaneKind.WEB}}), router=RouterConfig()
    )
    async with Engine(settings, lanes=fakes) as engine:
        res = await engine.search(parse_request({"query": "vitamin d levels", "route": "auto"}, settings))
    assert calls(fakes) == {"keyword": 1, "vector": 1, "graph": 0, "web": 1}
    assert (res.route["strategy"], res.route["lanes"], res.route["lane_calls"]) == (
        "dense", ["keyword", "vector", "web"], 3,
    )  # fmt: skip


async def test_auto_route_pages_with_its_cursor(tmp_path: Path) -> None:
    """A cursor minted under ``auto`` pages on: its fingerprint is taken over the lanes asked for, before the router
    narrows them (the narrowed plan's lanes gave page 1 another fingerprint than page 2, an "invalid cursor")."""
    settings = settings_for(tmp_path, RouterConfig())  # the shipped strategies: Dense is keyword + vector
    fakes = lanes(vec_hits(PEAKED))
    body = {"query": "vitamin d levels", "route": "auto", "limit": 4}
    async with Engine(settings, lanes=fakes) as engine:
        first = await engine.search(parse_request(body, settings))
        second = await engine.search(parse_request({**body, "cursor": first.next_cursor}, settings))
        with pytest.raises(QueryError, match="invalid cursor"):  # still bound to the route asked for
            await engine.search(parse_request({**body, "route": "all", "cursor": first.next_cursor}, settings))
    assert first.route["strategy"] == second.route["strategy"] == "dense"
    assert first.next_cursor
    assert len(second.items) == 4
    assert not {i.id for i in first.items} & {i.id for i in second.items}
    assert first.total == second.total


@pytest.mark.parametrize("kind", [LaneKind.KEYWORD, LaneKind.VECTOR, LaneKind.GRAPH])
async def test_a_lane_no_strategy_names_answers_under_the_default_route(tmp_path: Path, kind: LaneKind) -> None:
    """A store lane added the way docs/lanes.md says (a config entry naming its backend), which no strategy of the
    shipped fabric/config/router.toml names, runs under the shipped default route and its hits are fused."""
    from fabric.settings import load_settings

    shipped = load_settings(env={}, user_file=None).router
    assert shipped.default_route == "auto"
    assert all("extra" not in getattr(shipped.strategies, s) for s in ("dense", "temporal", "graph"))
    lane_specs = {
        "keyword": {"options": {"hits": 5}},
        "vector": {"kind": LaneKind.VECTOR, "options": {"hits": vec_hits(PEAKED)}},
        "graph": {"kind": LaneKind.GRAPH, "options": {"hits": 5}},
        "extra": {"kind": kind, "options": {"hits": 3}},
    }
    settings = dataclasses.replace(make_settings(tmp_path, lane_specs), router=shipped)
    async with Engine(settings) as engine:  # every lane built through the registry, as from fabric/config/lanes.toml
        res = await engine.search(parse_request({"query": "vitamin d levels"}, settings))
    assert res.route["route"] == "auto"
    assert res.lanes["extra"].status.value == "success"
    assert any(item.id.startswith("extra-") for item in res.items)


async def test_a_probe_that_fails_over_is_fused_once(tmp_path: Path) -> None:
    """Embeddings down under the default route: the vector probe fails over to the keyword lane, which Dense then
    runs itself; its hits count once, under 'keyword', as under route all, and the vector lane says where its
    answer went."""
    from fabric.core.errors import LaneUnavailable
    from fabric.core.models import LaneStatus

    lanes_cfg = {"keyword": {}, "vector": {"kind": LaneKind.VECTOR, "fallback": "keyword"}}

    async def run_route(route: str) -> SearchResult:
        fakes = {
            "keyword": Recording(name="keyword", hits=5),
            "vector": Recording(name="vector", kind=LaneKind.VECTOR, error=LaneUnavailable("embedder down")),
        }
        settings = dataclasses.replace(make_settings(tmp_path, lanes_cfg), router=RouterConfig(default_route="auto"))
        async with Engine(settings, lanes=fakes) as engine:
            return await engine.search(parse_request({"query": "vitamin d levels", "route": route}, settings))

    auto, federation = await run_route("auto"), await run_route("all")
    assert auto.route["strategy"] == "dense"
    for res in (auto, federation):
        assert res.lanes["vector"].status is LaneStatus.FALLBACK
        assert res.lanes["vector"].hits == ()
        assert "hits fused once, under 'keyword'" in str(res.lanes["vector"].error)
        assert all(item.lanes == ("keyword",) for item in res.items)
    assert [it.scores["rrf"] for it in auto.items] == [it.scores["rrf"] for it in federation.items]
