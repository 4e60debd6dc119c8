"""RM3 pseudo-relevance feedback of the keyword lane, over a real FTS5 store and its in-memory copy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fabric.core.models import LaneKind, LaneRequest
from lanes.keyword.sqlite_fts.feedback import Feedback, ForwardIndex, expansion
from lanes.keyword.sqlite_fts.lane import SqliteFtsKeywordLane
from lanes.keyword.sqlite_fts.writer import SqliteFtsWriter
from tests.support.embedded import chunk, resources, spec

CORPUS = [
    chunk("a", "Graphene transistors switch silicon circuits at terahertz speeds.", title="Graphene devices"),
    chunk("b", "Graphene sheets in transistors outpace silicon channels.", title="Carbon electronics"),
    chunk("c", "Silicon transistors reach their scaling limit below five nanometres.", title="Scaling"),
    chunk("d", "Bread rises when yeast ferments the dough.", title="Baking"),
    chunk("e", "Sourdough needs a starter of wild yeast.", title="Baking again"),
    chunk("f", "Rye flour makes a dense loaf.", title="Rye"),
    chunk("g", "Proofing baskets shape the loaf.", title="Tools"),
]
"""Seven rows: transistors and silicon are in three (under half: words feedback may add)."""


async def _lane(tmp_path: Path, **options: object) -> SqliteFtsKeywordLane:
    writer = SqliteFtsWriter(spec(LaneKind.KEYWORD, "sqlite_fts"), resources(tmp_path))
    await writer.open()
    await writer.upsert(CORPUS)
    await writer.aclose()
    lane = SqliteFtsKeywordLane(spec(LaneKind.KEYWORD, "sqlite_fts", **options), resources(tmp_path))
    await lane.open()
    assert lane.memory is not None
    lane.memory.wait()
    return lane


def _ids(hits) -> list[str]:
    return [h.id for h in hits]


class TestFeedbackLane:
    async def test_finds_what_the_feedback_rows_share(self, tmp_path: Path) -> None:
        """ "graphene" alone matches a and b; their shared words (transistors, silicon) bring c, which never says
        graphene, and nothing about bread."""
        plain = await _lane(tmp_path)
        expanded = await _lane(tmp_path, prf_docs=2, prf_terms=3, prf_weight=0.5)
        try:
            request = LaneRequest(query="graphene", top_k=5)
            assert set(_ids(await plain.search(request))) == {"a", "b"}
            got = _ids(await expanded.search(request))
            assert got[:2] in (["a", "b"], ["b", "a"])
            assert got[2] == "c"
            assert not {"d", "e", "f", "g"} & set(got)
        finally:
            await plain.aclose()
            await expanded.aclose()

    async def test_off_by_default_and_without_a_forward_copy(self, tmp_path: Path) -> None:
        """Without ``prf_docs`` the lane reads no forward copy of the postings."""
        lane = await _lane(tmp_path)
        try:
            assert lane.feedback is None
            assert lane.memory is not None
            snap = lane.memory.snapshot()
            assert snap is not None
            assert snap.forward is None
        finally:
            await lane.aclose()

    @pytest.mark.parametrize("options", [{"prf_docs": 2, "prf_terms": 0}, {"prf_docs": 2, "prf_weight": 1.5}])
    def test_bad_options_are_refused(self, tmp_path: Path, options: dict[str, float]) -> None:
        """Feedback needs at least one term and a weight in [0, 1]."""
        with pytest.raises(ValueError, match="feedback needs"):
            SqliteFtsKeywordLane(spec(LaneKind.KEYWORD, "sqlite_fts", **options), resources(tmp_path))


class TestExpansion:
    def _index(self) -> ForwardIndex:
        # rows 0 and 1; terms: 0 "the" (function word), 1 "alpha", 2 "beta", 3 "2024" (number)
        rows = np.array([0, 1, 0, 1, 0, 0], dtype=np.int64)
        owners = np.array([0, 0, 1, 1, 2, 3], dtype=np.int64)
        freqs = np.array([5.0, 5.0, 2.0, 1.0, 1.0, 3.0])
        return ForwardIndex.build(rows, owners, freqs, ["the", "alpha", "beta", "2024"], np.array([2, 2, 1, 1]), 2, 4)

    def test_relevance_model_weights(self) -> None:
        """P(w|R) sums each row's share of w weighted by the row's score; function words and numbers never join."""
        added = dict(expansion(self._index(), [(0, -3.0), (1, -1.0)], terms=5))
        # row 0 (P(d) 0.75, length 11): alpha 2/11, beta 1/11; row 1 (P(d) 0.25, length 6): alpha 1/6
        alpha, beta = 0.75 * 2 / 11 + 0.25 / 6, 0.75 / 11
        assert added == {"alpha": pytest.approx(alpha / (alpha + beta)), "beta": pytest.approx(beta / (alpha + beta))}

    def test_keeps_the_best_terms_only(self) -> None:
        """``terms`` caps the words added; no usable feedback row adds nothing."""
        assert [w for w, _ in expansion(self._index(), [(0, -3.0)], terms=1)] == ["alpha"]
        assert expansion(self._index(), [(7, -3.0)], terms=3) == []

    def test_feedback_values_are_checked(self) -> None:
        """docs and terms at least 1, weight within [0, 1]."""
        with pytest.raises(ValueError, match="feedback needs"):
            Feedback(docs=0)
