"""Tests for bench.fusion: the synthetic lanes, fresh objects per timed call, and the printed figures."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench import fusion
from bench.fusion import _freeze, _thaw, plain_rrf
from fabric.core.models import SourceKind
from fabric.settings import Settings
from tests.support.hits import make_outcomes


class TestFreshOutcomes:
    def test_thawed_hits_equal_the_originals(self) -> None:
        """Thawing gives the same hits (enum fields stay enum members), each a new object."""
        outcomes = make_outcomes(3, 10)
        thawed = _thaw(_freeze(outcomes))
        assert thawed == outcomes
        for name, out in outcomes.items():
            for a, b in zip(out.hits, thawed[name].hits, strict=True):
                assert a is not b
                assert a.id is not b.id
                assert type(b.source_kind) is SourceKind

    def test_cold_outcomes_lack_dedup_features(self) -> None:
        """The cold variant's hits carry no SimHash, URL key or title key (fusion computes them)."""
        thawed = _thaw(_freeze(make_outcomes(2, 5), cold=True))
        assert all(h.simhash is None and h.url_key is None and h.title_key is None
                   for out in thawed.values() for h in out.hits)  # fmt: skip

    def test_floor_is_plain_rrf(self) -> None:
        """The floor sums 1/(60 + rank) per id and sorts by score, then id."""
        got = plain_rrf(make_outcomes(2, 5))
        assert got == sorted(got, key=lambda kv: (-kv[1], kv[0]))
        assert all(0 < score <= 2 / 61 for _, score in got)


class TestRun:
    def test_prints_every_documented_figure(self) -> None:
        """A short run prints the figures the issue names, each consistent with the others."""
        figures = fusion.run(argparse.Namespace(repeat=20))
        for key in (
            "p50_us_6x50",
            "p99_us_6x50",
            "p50_us_2x50",
            "floor_p50_us_6x50",
            "dedup_2000_ms",
            "ratio_to_floor_6x50",
            "p50_us_6x50_no_dedup",
            "p50_us_6x50_cold",
            "dedup_2000_cold_ms",
        ):
            assert figures[key] > 0, key
        assert figures["p99_us_6x50"] >= figures["p50_us_6x50"]
        assert figures["ratio_to_floor_6x50"] == round(figures["p50_us_6x50"] / figures["floor_p50_us_6x50"], 2)
        assert 0 < figures["items_6x50"] < 300
        assert figures["duplicates_merged_6x50"] > 0

    def test_query_share_needs_the_dataset(self, tmp_path: Path) -> None:
        """Without a SciFact folder the share is None and says why (no ingestion, no engine)."""
        args = argparse.Namespace(repeat=20, scifact=tmp_path, queries=5)
        share = fusion._query_share(Settings(), args, 900.0)
        assert share == {"fusion_share_of_query": None, "query_note": f"no SciFact corpus at {tmp_path}"}
        assert fusion._query_share(Settings(), argparse.Namespace(repeat=20), 900.0)["fusion_share_of_query"] is None
