"""Tests of the verb-pattern relation extractor and of triples supplied at ingest (seed 004 §4A)."""

from __future__ import annotations

from lanes.graph._extract.entities import RuleExtractor, normalize_entity
from lanes.graph._extract.relations import supplied_triples, verb_triples


def semantic(text: str) -> list[tuple[str, str, str]]:
    return [r for r in RuleExtractor().extract(text).relations if r[1] != "co_occurs"]


class TestVerbTriples:
    def test_active_voice_subject_verb_object(self) -> None:
        """``X reduces Y`` → (x, reduce, y); the verb's base form is the predicate."""
        assert semantic("Vitamin D reduces fracture risk in older adults.") == [
            ("vitamin d", "reduce", "fracture risk")
        ]

    def test_passive_voice_reverses_the_edge(self) -> None:
        """``X is inhibited by Y`` → (y, inhibit, x)."""
        assert semantic("IL-6 is inhibited by Tocilizumab.") == [("tocilizumab", "inhibit", "il 6")]

    def test_particle_kept_in_the_predicate(self) -> None:
        assert semantic("Smoking leads to Lung Cancer.") == [("smoking", "lead_to", "lung cancer")]

    def test_negation_and_no_verb_give_no_edge(self) -> None:
        """A negated relation is not an edge; neither is a gap without a relation verb."""
        assert semantic("Aspirin does not prevent Stroke.") == []
        assert semantic("Marie Curie met Pierre Curie.") == []

    def test_long_gap_gives_no_edge(self) -> None:
        sentence = "Alpha Corp, after many long and very tiring years, acquired Beta Labs"
        spans = [(0, 10, "alpha corp"), (62, 71, "beta labs")]
        assert verb_triples(sentence, spans) == []

    def test_entity_holding_the_verb_is_skipped(self) -> None:
        """The bigram ``increases cancer`` is not an endpoint: its verb links Obesity to ``cancer risk``."""
        assert semantic("Obesity increases cancer risk.") == [("obesity", "increase", "cancer risk")]


class TestSuppliedTriples:
    def test_normalised_with_labels_kept(self) -> None:
        """Subjects and objects are normalised as extracted entities are; predicates are snake-cased."""
        entities, triples = supplied_triples([["U.S.", "Trades With", "Canada"]], normalize_entity)
        assert triples == [("us", "trades_with", "canada")]
        assert entities == {"us": "U.S.", "canada": "Canada"}

    def test_malformed_rows_skipped(self) -> None:
        entities, triples = supplied_triples([["a", "b"], ["", "p", "o"], "x", ["s", "p", "o"]], normalize_entity)
        assert triples == [("s", "p", "o")]
        assert set(entities) == {"s", "o"}
