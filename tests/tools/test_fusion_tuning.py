"""Offline fusion tuning: fusion of cached lane hits, the search, the held-out split and the TOML."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from fabric.settings import load_settings
from tools.fusion_tuning import (
    REFERENCE,
    FusionChoice,
    TuneSet,
    fuse_offline,
    score_choice,
    split_queries,
    to_toml,
    tune,
)


def _hits(*doc_ids: str) -> tuple[tuple[str, str, float], ...]:
    return tuple((f"{d}#0", d, 10.0 - i) for i, d in enumerate(doc_ids))


def _world() -> tuple[dict, dict]:
    """40 queries: the 'good' lane ranks the relevant doc first, the 'noisy' lane ranks it last."""
    rankings, qrels = {}, {}
    for i in range(40):
        rel = f"r{i}"
        noise = [f"n{i}_{j}" for j in range(12)]
        rankings[f"q{i}"] = {"good": _hits(*noise[:2], rel, *noise[2:6]), "noisy": _hits(*noise, rel)}
        qrels[f"q{i}"] = {rel: 1}
    return rankings, qrels


def _set(name: str = "world") -> TuneSet:
    rankings, qrels = _world()
    return TuneSet(name=name, rankings=rankings, qrels=qrels, query_ids=list(qrels))


def _flipped() -> TuneSet:
    """The same world with the lanes' roles swapped: here 'noisy' is the good lane."""
    rankings, qrels = _world()
    swapped = {q: {"good": lanes["noisy"], "noisy": lanes["good"]} for q, lanes in rankings.items()}
    return TuneSet(name="flipped", rankings=swapped, qrels=qrels, query_ids=list(qrels))


class TestFuseOffline:
    def test_rrf_orders_by_summed_reciprocal_ranks(self) -> None:
        """A doc ranked well by both lanes beats one ranked first by a single lane."""
        lanes = {"a": _hits("x", "y"), "b": _hits("y", "z")}
        assert fuse_offline(lanes, FusionChoice(mode="rrf", k=60))[0] == "y"

    def test_zero_weight_silences_a_lane(self) -> None:
        """A lane with weight 0 contributes nothing."""
        lanes = {"a": _hits("x"), "b": _hits("y")}
        assert fuse_offline(lanes, FusionChoice(weights={"a": 0.0, "b": 1.0}))[0] == "y"

    def test_chunks_collapse_to_documents(self) -> None:
        """Two chunks of one document yield one doc id."""
        lanes = {"a": (("d#0", "d", 2.0), ("d#1", "d", 1.0), ("e#0", "e", 0.5))}
        assert fuse_offline(lanes, FusionChoice()) == ["d", "e"]

    def test_combmnz_favours_items_found_by_more_lanes(self) -> None:
        """CombMNZ multiplies by the lane count, so a doc in both lanes beats a single lane's top hit."""
        a = (("x", "x", 10.0), ("y", "y", 6.0), ("z", "z", 0.0))
        lanes = {"a": a, "b": (("zz", "zz", 1.0), ("y", "y", 0.3), ("v", "v", 0.0))}  # y 0.6 + 0.3 < x 1.0
        assert fuse_offline(lanes, FusionChoice(mode="score_minmax"))[0] == "x"
        assert fuse_offline(lanes, FusionChoice(mode="score_minmax", combmnz=True))[0] == "y"

    @pytest.mark.parametrize("mode", ["score_minmax", "score_dbsf", "score_zscore"])
    def test_score_modes_use_native_scores(self, mode: str) -> None:
        """Score fusion follows normalised native scores, not ranks."""
        lanes = {"a": (("x", "x", 10.0), ("y", "y", 9.9), ("z", "z", 0.0)), "b": (("y", "y", 1.0), ("x", "x", 0.0))}
        assert fuse_offline(lanes, FusionChoice(mode=mode))[0] == "y"


class TestLaneConfidence:
    """Offline fusion weighs each query's lanes as the engine did (its lane confidence); the reference does not."""

    LANES: ClassVar = {"a": _hits("x", "y"), "b": _hits("y", "x")}  # a tie under equal weights, broken by the id: x

    def test_factors_scale_the_query_weights(self) -> None:
        """A lane whose weight the engine lowered for this query counts that much less offline too."""
        assert fuse_offline(self.LANES, FusionChoice())[0] == "x"
        assert fuse_offline(self.LANES, FusionChoice(), factors={"a": 0.5})[0] == "y"

    def test_reference_is_plain_rrf(self) -> None:
        """The reference the gains are measured against ignores them: plain RRF of equal weights."""
        assert fuse_offline(self.LANES, REFERENCE, factors={"a": 0.5})[0] == "x"

    def test_score_choice_reads_each_query_factors(self) -> None:
        """The per-query factors of a set reach each query's fusion."""
        rankings = {"q1": self.LANES, "q2": self.LANES}
        qrels = {"q1": {"y": 1}, "q2": {"y": 1}}
        plain = score_choice(rankings, qrels, ["q1", "q2"], FusionChoice())
        weighed = score_choice(rankings, qrels, ["q1", "q2"], FusionChoice(), factors={"q1": {"a": 0.5}})
        assert weighed > plain


class TestTune:
    def test_finds_weights_that_beat_the_default(self) -> None:
        """The search down-weights the noisy lane and beats equal weights on both halves."""
        report = tune([_set()], FusionChoice(mode="rrf", k=60), modes=("rrf",))
        assert report.best.weights["noisy"] < report.best.weights["good"]
        scores = report.scores["world"]
        assert scores["best"]["fit"] > scores["default"]["fit"]
        assert scores["best"]["heldout"] > scores["default"]["heldout"]

    def test_reports_both_halves(self) -> None:
        """Fit and held-out counts add up to the queries."""
        report = tune([_set()], FusionChoice(), modes=("rrf",), rounds=1)
        assert report.fit_queries["world"] + report.heldout_queries["world"] == 40
        assert report.fit_queries["world"] > 0
        assert report.heldout_queries["world"] > 0

    def test_worst_objective_refuses_to_trade_one_dataset_for_another(self) -> None:
        """With two datasets wanting opposite weights, the worst-gain objective keeps both at plain RRF or better."""
        report = tune([_set(), _flipped()], FusionChoice(), modes=("rrf",), objective="worst")
        for per in report.scores.values():
            assert per["best"]["fit"] >= per["reference"]["fit"]

    def test_one_dataset_alone_would_regress_the_other(self) -> None:
        """Fitted on one dataset only, the choice hurts the flipped one: the reason for fitting both."""
        alone = tune([_set()], FusionChoice(), modes=("rrf",)).best
        both = tune([_set(), _flipped()], FusionChoice(), modes=("rrf",)).best
        flipped = _flipped()
        from tools.fusion_tuning import score_choice

        def on_flipped(c: FusionChoice) -> float:
            return score_choice(flipped.rankings, flipped.qrels, flipped.query_ids, c)

        assert on_flipped(alone) < on_flipped(FusionChoice(mode="rrf", k=60))
        assert on_flipped(both) >= on_flipped(FusionChoice(mode="rrf", k=60))

    def test_score_modes_search_combmnz(self) -> None:
        """CombMNZ is part of the search for score modes and is reported in the choice."""
        report = tune([_set()], FusionChoice(), modes=("score_minmax",), rounds=1)
        assert "combmnz" in report.best.to_dict()
        assert report.evaluated > 1

    def test_unknown_objective_is_an_error(self) -> None:
        with pytest.raises(ValueError, match="objective"):
            tune([_set()], FusionChoice(), objective="median")

    def test_split_is_deterministic_and_disjoint(self) -> None:
        """The same ids always split the same way, into disjoint halves."""
        ids = [f"q{i}" for i in range(50)]
        fit, held = split_queries(ids)
        assert (fit, held) == split_queries(ids)
        assert not set(fit) & set(held)


class TestToml:
    def test_written_file_is_read_by_the_config_loader(self, tmp_path: Path) -> None:
        """The TOML sets fusion mode, k and lane weights through --config."""
        report = tune([_set()], FusionChoice(), modes=("rrf",), rounds=1)
        choice = FusionChoice(mode="score_minmax", k=40, weights={"keyword": 0.5, "vector": 1.5}, combmnz=True)
        path = tmp_path / "fusion.local.toml"
        path.write_text(to_toml(choice, report))
        settings = load_settings(user_file=path, env={})
        assert (settings.fusion.mode.value, settings.fusion.rrf_k) == ("score_minmax", 40)
        assert settings.fusion.combmnz is True
        assert (settings.lanes["keyword"].weight, settings.lanes["vector"].weight) == (0.5, 1.5)
