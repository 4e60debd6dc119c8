"""Seed 001's query contract in the engine: lane contributions add up to score_total, total, weights, limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fabric.core.errors import QueryError
from fabric.core.models import Hit, LaneKind
from fabric.query.contributions import informative_factors
from fabric.query.engine import Engine
from fabric.query.validation import parse_request
from lanes.fake import FakeLane
from tests.support.settings import make_settings, quiet_logs  # noqa: F401


def _hits(prefix: str, ids: list[str], *, dated: bool = False) -> list[Hit]:
    return [
        Hit(
            id=i,
            rank=r,
            score=10.0 / r,
            title=f"{prefix} {i}",
            text=f"text of {i} from {prefix}",
            domain=f"{i}.example.org",
            quality=1.0 / r if dated else None,
        )
        for r, i in enumerate(ids, 1)
    ]


def _engine(tmp_path: Path, *, dated: bool = False) -> Engine:
    lanes_cfg = {"kw": {"kind": LaneKind.KEYWORD}, "vec": {"kind": LaneKind.VECTOR}, "gr": {"kind": LaneKind.GRAPH}}
    settings = make_settings(tmp_path, lanes_cfg)
    lanes = {
        "kw": FakeLane(name="kw", kind=LaneKind.KEYWORD, hits=_hits("kw", ["a", "b", "c", "d"], dated=dated)),
        "vec": FakeLane(name="vec", kind=LaneKind.VECTOR, hits=_hits("vec", ["b", "a", "e"], dated=dated)),
        "gr": FakeLane(name="gr", kind=LaneKind.GRAPH, hits=_hits("gr", ["e", "f"], dated=dated)),
    }
    return Engine(settings, lanes=lanes)


async def _search(engine: Engine, **data: Any) -> Any:
    data.setdefault("query", "deployment strategy")
    data.setdefault("preflight", False)
    return await engine.search(parse_request(data, engine.settings))


@pytest.mark.parametrize("fusion", ["rrf", "score_minmax", "score_dbsf", "score_zscore", "append_fill"])
@pytest.mark.parametrize("dated", [False, True])
async def test_contributions_add_up_to_total(tmp_path: Path, fusion: str, dated: bool) -> None:
    """score_lexical + score_semantic + score_graph + factor parts == score_total, for every item and mode."""
    async with _engine(tmp_path, dated=dated) as engine:
        res = await _search(engine, fusion=fusion, top_k=6)
    body = res.to_dict()
    assert body["total"] == 6
    for item in body["items"]:
        parts = item["contributions"]
        assert sum(parts.values()) == pytest.approx(item["score_total"], abs=1e-5)
        lane_sum = item["score_lexical"] + item["score_semantic"] + item["score_graph"]
        other = sum(v for k, v in parts.items() if k not in ("lexical", "semantic", "graph"))
        assert lane_sum + other == pytest.approx(item["score_total"], abs=1e-5)
    by_id = {it["id"]: it for it in body["items"]}
    assert by_id["f"]["score_lexical"] == 0.0
    assert by_id["f"]["score_semantic"] == 0.0
    assert by_id["a"]["score_graph"] == 0.0
    assert by_id["a"]["score_lexical"] > 0.0
    if fusion in ("rrf", "append_fill"):  # min-max puts a lane's last hit at 0, so only rank modes credit it
        assert by_id["f"]["score_graph"] > 0.0
    # the raw lane scores stay in the explanation
    assert by_id["a"]["scores"]["lexical"] == 10.0


async def test_recency_factor_is_detected_and_shared(tmp_path: Path) -> None:
    """With varying quality the ranker mixes in that factor; its part shows under its own name."""
    async with _engine(tmp_path, dated=True) as engine:
        res = await _search(engine, top_k=6)
    used = informative_factors(res.items, engine.settings.fusion)
    assert used == ("quality",)
    assert all(parts["quality"] > 0.0 for parts in res.contributions.values())


async def test_total_counts_fused_set_before_paging(tmp_path: Path) -> None:
    """total is the fused candidate count whatever the page size."""
    async with _engine(tmp_path) as engine:
        first = await _search(engine, limit=2)
        second = await _search(engine, limit=2, cursor=first.next_cursor)
    assert (first.total, len(first.items), second.total) == (6, 2, 6)
    assert not {it.id for it in first.items} & {it.id for it in second.items}


async def test_weights_change_order_and_bind_cursor(tmp_path: Path) -> None:
    """Per-request weights reorder; a cursor from one weighting is refused under another."""
    async with _engine(tmp_path) as engine:
        plain = await _search(engine, top_k=2)
        graph_heavy = await _search(engine, top_k=2, weights={"graph": 20})
        assert [it.id for it in plain.items] != [it.id for it in graph_heavy.items]
        assert graph_heavy.items[0].id == "e"
        lanes = graph_heavy.to_dict()["lanes"]
        assert lanes["gr"]["weight"] == 20.0
        with pytest.raises(QueryError) as err:
            await _search(engine, top_k=2, cursor=graph_heavy.next_cursor)
        assert err.value.field == "cursor"
        nxt = await _search(engine, top_k=2, weights={"graph": 20}, cursor=graph_heavy.next_cursor)
        assert nxt.items


class TestValidation:
    def test_weights_forms(self, tmp_path: Path) -> None:
        settings = _engine(tmp_path).settings
        req = parse_request({"query": "q", "weights": "semantic=2, kw=0.5"}, settings)
        assert req.weights == {"kw": 0.5, "vec": 2.0}
        req = parse_request({"query": "q", "weights": {"lexical": 1, "kw": 3}}, settings)
        assert req.weights == {"kw": 3.0}

    @pytest.mark.parametrize(
        ("weights", "message"),
        [
            ({"nope": 1}, "unknown lane or component 'nope'"),
            ({"kw": -1}, "expected a number in [0, 100]"),
            ({"kw": "x"}, "expected a number, got 'x'"),
            ({"kw": 0, "vec": 0, "gr": 0}, "at least one lane must keep a weight > 0"),
            ("kw", "expected NAME=WEIGHT pairs"),
            ([1], "expected a non-empty mapping"),
        ],
    )
    def test_bad_weights(self, tmp_path: Path, weights: Any, message: str) -> None:
        with pytest.raises(QueryError) as err:
            parse_request({"query": "q", "weights": weights}, _engine(tmp_path).settings)
        assert message in err.value.message

    def test_limit_is_top_k(self, tmp_path: Path) -> None:
        settings = _engine(tmp_path).settings
        assert parse_request({"query": "q", "limit": 3}, settings).top_k == 3
        assert parse_request({"query": "q", "limit": 3, "top_k": 3}, settings).top_k == 3
        with pytest.raises(QueryError) as err:
            parse_request({"query": "q", "limit": 3, "top_k": 4}, settings)
        assert err.value.field == "limit"
        with pytest.raises(QueryError) as err:
            parse_request({"query": "q", "limit": 0}, settings)
        assert (err.value.field, err.value.message) == ("limit", "must be >= 1, got 0")


def _item(item_id: str, total: float, **scores: float) -> Any:
    from fabric.core.models import FusedItem

    return FusedItem(hit=Hit(id=item_id, rank=1, score=1.0), score_total=total, scores=scores, lanes=(), ranks={})


def test_a_subset_that_fits_the_first_item_only_is_not_taken() -> None:
    """The first item is only a screen: with recency and quality equal on item ``a`` both subsets fit it, but
    only the quality one reproduces item ``b``'s total (recency, tried first, passes ``a`` and fails ``b``)."""
    from fabric.settings import FusionConfig
    from fabric.settings.sections import FactorWeights

    config = FusionConfig(
        factors=FactorWeights(rrf=0.5, domain_diversity=0.0, recency=0.25, authority=0.0, quality=0.25)
    )
    either = (0.5 * 0.6 + 0.25 * 0.2) / 0.75  # recency alone or quality alone
    b_quality = (0.5 * 0.4 + 0.25 * 0.8) / 0.75
    a = _item("a", either, fused=0.6, recency=0.2, quality=0.2)
    b = _item("b", b_quality, fused=0.4, recency=0.9, quality=0.8)
    assert informative_factors([a, b], config) == ("quality",)


def test_no_subset_fits_gives_the_closest() -> None:
    """Totals no subset reproduces (not expected from the ranker) give the subset with the smallest error."""
    from fabric.settings import FusionConfig
    from fabric.settings.sections import FactorWeights

    config = FusionConfig(factors=FactorWeights(rrf=0.5, domain_diversity=0.0, recency=0.5, authority=0.0, quality=0.0))
    a = _item("a", 0.5 * 0.2 + 0.5 * 0.9 + 0.01, fused=0.2, recency=0.9)  # recency's mean, off by 0.01
    assert informative_factors([a], config) == ("recency",)


@pytest.mark.parametrize("fusion", ["rrf", "score_zscore"])
async def test_literal_contributions_add_up_to_total(tmp_path: Path, fusion: str) -> None:
    """[fusion] factor_scaling = "literal": each lane's part is w_rrf · w / (k + rank), each factor's w_f · f, and
    the parts add up to score_total (every factor counts, none is divided by the weights)."""
    import dataclasses

    from fabric.settings import AdditiveBoosts

    settings = _engine(tmp_path, dated=True).settings
    fusion_cfg = dataclasses.replace(
        settings.fusion, factor_scaling="literal", boosts=AdditiveBoosts(domain=0.1, recency=0.05)
    )
    lanes = {
        "kw": FakeLane(name="kw", kind=LaneKind.KEYWORD, hits=_hits("kw", ["a", "b", "c", "d"], dated=True)),
        "vec": FakeLane(name="vec", kind=LaneKind.VECTOR, hits=_hits("vec", ["b", "a", "e"], dated=True)),
        "gr": FakeLane(name="gr", kind=LaneKind.GRAPH, hits=_hits("gr", ["e", "f"], dated=True)),
    }
    literal = Engine(dataclasses.replace(settings, fusion=fusion_cfg), lanes=lanes)
    async with literal:
        res = await _search(literal, fusion=fusion, top_k=6)
    assert len(res.items) == 6
    for item in res.items:
        parts = res.contributions[item.id]
        assert sum(parts.values()) == pytest.approx(item.score_total, abs=1e-9)
        assert set(parts) >= {"domain_diversity", "recency", "authority", "quality"}
    a = next(it for it in res.items if it.id == "a")  # kw rank 1, vec rank 2: 0.5 / 61 + 0.5 / 62 from the lanes
    assert res.contributions["a"]["lexical"] + res.contributions["a"]["semantic"] == pytest.approx(0.5 / 61 + 0.5 / 62)
    assert a.scores["rrf"] == pytest.approx(1 / 61 + 1 / 62)
