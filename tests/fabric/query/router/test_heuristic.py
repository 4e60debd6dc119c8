"""Tests for the heuristic cascade of seed 004 §1."""

from __future__ import annotations

import dataclasses

import pytest

from fabric.core.strategies import Strategy
from fabric.query.router.heuristic import decide, decide_signals, decide_text
from fabric.query.router.signals import ProbeSignals
from fabric.settings.router import RouterConfig

CFG = RouterConfig(max_score_min=0.65)
"""The seed's initial thresholds (the shipped max_score_min is tuned: rule 3 never fires)."""


def sig(skew: float, top: float) -> ProbeSignals:
    return ProbeSignals(max=top, min=0.1, mean=0.3, skew=skew, dist=0.4)


class TestText:
    @pytest.mark.parametrize(
        "query",
        [
            "what changed between 2019 and 2021 in vector databases",
            "rainfall records from 1998",
            "elections in 2004",
            "Timeline of the Orbis Rail project",
            "a short history of fusion power",
        ],
    )
    def test_rule_1_temporal(self, query: str) -> None:
        """Year after from/between/in, or "timeline" / "history of": Temporal."""
        d = decide_text(query, CFG)
        assert d is not None
        assert d.strategy is Strategy.TEMPORAL
        assert d.rule == "temporal_regex"

    @pytest.mark.parametrize(
        "query",
        [
            "connection between Halvorsen Labs and the Orbis Rail project",
            "relationship of insulin and glucagon",
            "how does interest rate policy affect housing starts",
            "How did the merger affect Kestrel Motors",
        ],
    )
    def test_rule_2_relational(self, query: str) -> None:
        """Relational phrases and "how does X affect Y": Graph."""
        d = decide_text(query, CFG)
        assert d is not None
        assert d.strategy is Strategy.GRAPH
        assert d.rule == "relational_phrase"

    def test_rule_1_has_priority_over_rule_2(self) -> None:
        """A temporal relational query is Temporal: rules are evaluated in order."""
        d = decide_text("connection between A and B from 2019", CFG)
        assert d is not None
        assert d.strategy is Strategy.TEMPORAL

    @pytest.mark.parametrize("query", ["what is 2019-nCoV", "vitamin D deficiency", "in 201 cases", "history"])
    def test_no_text_rule(self, query: str) -> None:
        """A bare year, a short number or a lone word decides nothing."""
        assert decide_text(query, CFG) is None

    def test_phrases_come_from_config(self) -> None:
        """Phrases are configuration, not code."""
        cfg = dataclasses.replace(CFG, relational_phrases=("versus",))
        d = decide_text("cats versus dogs", cfg)
        assert d is not None
        assert d.strategy is Strategy.GRAPH
        assert decide_text("connection between cats and dogs", cfg) is None


class TestSignals:
    def test_rule_3_flat_and_confident_is_graph(self) -> None:
        """skew < 0.5 and max > 0.65."""
        d = decide_signals(sig(0.2, 0.8), CFG)
        assert d.strategy is Strategy.GRAPH
        assert d.rule == "probe_flat"

    @pytest.mark.parametrize(("skew", "top"), [(0.5, 0.9), (1.2, 0.9), (0.2, 0.65), (0.2, 0.3)])
    def test_rule_4_fallback_is_dense(self, skew: float, top: float) -> None:
        """Peaked, or not confident (strict inequalities at the thresholds): Dense."""
        d = decide_signals(sig(skew, top), CFG)
        assert d.strategy is Strategy.DENSE
        assert d.rule == "fallback"

    def test_thresholds_come_from_config(self) -> None:
        """Tuned thresholds change the decision."""
        cfg = dataclasses.replace(CFG, skew_max=2.0, max_score_min=0.5)
        assert decide_signals(sig(1.2, 0.6), cfg).strategy is Strategy.GRAPH


class TestCascade:
    def test_text_decides_without_probe(self) -> None:
        """Rules 1-2 need no signals."""
        assert decide("timeline of the rail strike", None, CFG).strategy is Strategy.TEMPORAL

    def test_probe_needed_when_text_is_silent(self) -> None:
        """Asking for rules 3-4 without signals is a programming error."""
        with pytest.raises(ValueError, match="probe"):
            decide("vitamin D", None, CFG)
        assert decide("vitamin D", sig(2.0, 0.9), CFG).strategy is Strategy.DENSE
