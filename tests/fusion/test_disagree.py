"""Tests for fusion.disagree: contradicting numbers and opposite polarity between cited passages."""

from __future__ import annotations

from fabric.core.models import Hit
from fusion import disagree
from fusion.citations import align_citations
from fusion.disagree import find_disagreements

SENTENCE = "Aspirin reduced mortality in adults."


class TestDisagree:
    def test_public_api(self) -> None:
        """The module exports the finder and its record."""
        assert sorted(disagree.__all__) == ["Disagreement", "find_disagreements"]

    def test_different_numbers(self) -> None:
        """Different numbers about the same term are a numbers disagreement."""
        got = find_disagreements(0, SENTENCE, [(1, "Mortality fell by 25%."), (2, "Mortality fell by 12%.")])
        assert [(d.kind, d.term, d.markers) for d in got] == [("numbers", "mortality", (1, 2))]

    def test_same_numbers_agree(self) -> None:
        """The same number on both sides is no disagreement."""
        assert find_disagreements(0, SENTENCE, [(1, "Mortality fell 25%."), (2, "Mortality was 25% lower.")]) == []

    def test_negation(self) -> None:
        """One passage negating the term the other asserts is a negation disagreement."""
        got = find_disagreements(0, SENTENCE, [(1, "Aspirin reduced mortality."), (2, "It did not cut mortality.")])
        assert [(d.kind, d.term) for d in got] == [("negation", "mortality")]
        assert "[2]" in got[0].detail

    def test_unrelated_terms_ignored(self) -> None:
        """Numbers about terms the sentence does not mention are ignored."""
        got = find_disagreements(0, SENTENCE, [(1, "Bleeding rose 3%."), (2, "Bleeding rose 9%.")])
        assert got == []

    def test_single_passage(self) -> None:
        """One cited passage cannot disagree."""
        assert find_disagreements(0, SENTENCE, [(1, "Mortality fell 25%.")]) == []

    def test_reported_by_alignment(self) -> None:
        """align_citations reports disagreements between passages cited for one sentence."""
        items = [
            Hit(id="a", rank=1, score=1.0, text="Aspirin reduced mortality by 25% in adults."),
            Hit(id="b", rank=2, score=1.0, text="Aspirin reduced mortality by 12% in adults."),
        ]
        res = align_citations(SENTENCE, items)
        assert [d.kind for d in res.disagreements] == ["numbers"]
