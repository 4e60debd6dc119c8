"""Tests for fusion.disagree: contradicting numbers or dates and opposite polarity between cited passages, with
the topic and the severity of each disagreement."""

from __future__ import annotations

from fabric.core.models import Hit
from fusion import disagree
from fusion.citations import align_citations
from fusion.disagree import find_disagreements

SENTENCE = "Aspirin reduced mortality in adults."


class TestDisagree:
    def test_public_api(self) -> None:
        """The module exports the finder and its record."""
        assert sorted(disagree.__all__) == ["Disagreement", "KINDS", "SEVERITIES", "find_disagreements"]

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


class TestSeverityAndTopic:
    """The module docstring's rule: negation high; numbers by relative gap; dates by distance; topic = shared words."""

    def one(self, a: str, b: str, sentence: str = SENTENCE) -> tuple[str, str, str, str]:
        """The single disagreement between passages ``a`` [1] and ``b`` [2]: (kind, term, severity, topic)."""
        got = find_disagreements(0, sentence, [(1, a), (2, b)])
        assert len(got) == 1, got
        return got[0].kind, got[0].term, got[0].severity, got[0].topic

    def test_negation_is_high(self) -> None:
        """Asserting what the other source denies is the most severe kind."""
        got = self.one("Aspirin reduced mortality.", "It did not cut mortality.")
        assert got == ("negation", "mortality", "high", "mortality")

    def test_numbers_by_relative_gap(self) -> None:
        """r >= 0.5 high, 0.1 <= r < 0.5 medium, below 0.1 low (r = |x - y| / max(|x|, |y|))."""
        assert self.one("Mortality fell by 25%.", "Mortality fell by 12%.")[2] == "high"  # r = 0.52
        assert self.one("Mortality fell by 25%.", "Mortality fell by 20%.")[2] == "medium"  # r = 0.2
        assert self.one("Mortality fell by 100.", "Mortality fell by 95.")[2] == "low"  # r = 0.05
        assert self.one("Mortality fell by 20.", "Mortality fell by 18.")[2] == "medium"  # r = 0.1, on the bound

    def test_numbers_closest_pair_counts(self) -> None:
        """With several values per side the closest pair sets the gap: 25 and 90 vs 24 is low (r = 0.04)."""
        assert self.one("Mortality fell 25% then 90%.", "Mortality fell 24%.")[2] == "low"

    def test_dates_differ(self) -> None:
        """Two ISO dates near the term are a dates disagreement (not numbers), low within a year."""
        sentence = "The retention rule was accepted."
        got = find_disagreements(0, sentence, [(1, "Accepted on 2026-09-01."), (2, "Accepted on 2026-10-10.")])
        assert [(d.kind, d.term, d.severity, d.detail) for d in got] == [
            ("dates", "accepted", "low", "[1] 2026-09-01 vs [2] 2026-10-10")
        ]

    def test_dates_a_year_apart_are_medium(self) -> None:
        """Years count as dates; a year or more between the closest dates is medium."""
        got = self.one("Accepted in 2024.", "Accepted on 2026-10-10.", "The rule was accepted.")
        assert got == ("dates", "accepted", "medium", "accepted")

    def test_year_contains_date(self) -> None:
        """A year and a day inside it agree: no disagreement."""
        assert find_disagreements(0, "It was accepted.", [(1, "Accepted in 2026."), (2, "Accepted 2026-10-10.")]) == []

    def test_impossible_date_is_not_a_date(self) -> None:
        """2026-02-30 is no date; its parts stay out of the dates rule."""
        cited = [(1, "Accepted 2026-02-30."), (2, "Accepted 2026-03-01.")]
        assert find_disagreements(0, "It was accepted.", cited) == []

    def test_most_severe_kind_wins(self) -> None:
        """A pair differing in dates (low) and in polarity (high) reports the negation."""
        got = self.one("Aspirin reduced mortality in 2024.", "Aspirin did not reduce mortality in 2026.")
        assert got[0] == "negation"
        assert got[2] == "high"

    def test_topic_is_shared_words_in_sentence_order(self) -> None:
        """The topic lists the sentence's content words present in both passages, in the sentence's order."""
        got = self.one("Adults: aspirin reduced mortality by 25%.", "Aspirin reduced mortality by 12% in adults.")
        assert got[3] == "aspirin reduced mortality adult"

    def test_json_form(self) -> None:
        """to_dict carries topic and severity, with the kinds and severities the module declares."""
        d = find_disagreements(0, SENTENCE, [(1, "Mortality fell by 25%."), (2, "Mortality fell by 12%.")])[0].to_dict()
        assert d == {"sentence": 0, "markers": [1, 2], "kind": "numbers", "term": "mortality",
                     "topic": "mortality", "severity": "high", "detail": "[1] 25 vs [2] 12"}  # fmt: skip
        assert d["kind"] in disagree.KINDS
        assert d["severity"] in disagree.SEVERITIES
