"""Tests for fusion.citations: splitting, similarity, threshold, limits, markers and bibliography."""

from __future__ import annotations

import pytest

from fabric.core.models import Hit
from fusion import citations
from fusion.citations import align_citations, embedding_similarity, lexical_similarity, split_sentences


def item(doc_id: str, text: str, rank: int = 1) -> Hit:
    """An item with text."""
    return Hit(id=doc_id, rank=rank, score=1.0, title=f"T {doc_id}", text=text)


ITEMS = [
    item("a", "Aspirin reduced mortality by 25% in adults. Bleeding was common in the treated group."),
    item("b", "Statins lower LDL cholesterol in most patients.", 2),
]


class FakeEmbedder:
    """Maps texts to fixed unit vectors by keyword (a deterministic stand-in for MiniLM)."""

    name = "fake"
    dim = 2

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Vector (1, 0) for texts about aspirin, (0, 1) otherwise."""
        return [[1.0, 0.0] if "aspirin" in t.lower() else [0.0, 1.0] for t in texts]


class TestSplit:
    def test_public_api(self) -> None:
        """The module exports the aligner and its parts."""
        assert "align_citations" in citations.__all__
        assert "split_sentences" in citations.__all__

    def test_abbreviations_and_decimals(self) -> None:
        """Abbreviations and decimals do not end sentences."""
        got = split_sentences("Dr. Smith measured 2.5 mg. It worked! Did it?")
        assert got == ["Dr. Smith measured 2.5 mg.", "It worked!", "Did it?"]

    def test_empty(self) -> None:
        """Empty text has no sentences."""
        assert split_sentences("   ") == []


class TestLexicalSimilarity:
    def test_containment(self) -> None:
        """Similarity is the share of the sentence's content words found in the passage."""
        assert lexical_similarity(["aspirin reduces mortality"], ["Mortality fell with aspirin."]) == [[2 / 3]]

    def test_no_content_words(self) -> None:
        """A sentence of stop words matches nothing."""
        assert lexical_similarity(["it is what it is"], ["it is"]) == [[0.0]]


class TestAlign:
    def test_cites_supporting_passage(self) -> None:
        """A sentence restating a passage cites its item with marker [1]."""
        res = align_citations("Aspirin reduced mortality in adults.", ITEMS)
        assert [c.item_id for c in res.sentences[0].citations] == ["a"]
        assert res.text == "Aspirin reduced mortality in adults [1]."

    def test_below_threshold_not_cited(self) -> None:
        """A sentence without support gets no citation."""
        res = align_citations("The moon is made of cheese.", ITEMS)
        assert res.sentences[0].citations == ()
        assert res.bibliography == ()

    def test_markers_follow_bibliography_order(self) -> None:
        """Items are numbered in order of first citation, not retrieval rank."""
        res = align_citations("Statins lower LDL cholesterol. Aspirin reduced mortality.", ITEMS)
        assert [h.id for h in res.bibliography] == ["b", "a"]
        assert res.text == "Statins lower LDL cholesterol [1]. Aspirin reduced mortality [2]."

    def test_at_most_three_citations(self) -> None:
        """A sentence cites at most three items, best first."""
        many = [item(f"i{k}", "Aspirin reduced mortality.", k + 1) for k in range(5)]
        res = align_citations("Aspirin reduced mortality.", many)
        assert [c.item_id for c in res.sentences[0].citations] == ["i0", "i1", "i2"]

    def test_one_citation_per_item(self) -> None:
        """Two matching passages of one item give one citation."""
        res = align_citations(
            "Aspirin reduced mortality.", [item("a", "Aspirin reduced mortality. Aspirin reduced mortality.")]
        )
        assert len(res.sentences[0].citations) == 1

    def test_threshold_configurable(self) -> None:
        """A lower threshold admits weaker matches."""
        res = align_citations("Aspirin reduced deaths sharply.", ITEMS, threshold=0.3)
        assert res.sentences[0].citations

    def test_injected_similarity(self) -> None:
        """An injected similarity (embeddings) replaces the lexical one."""
        res = align_citations("ASA is aspirin.", ITEMS, similarity=embedding_similarity(FakeEmbedder()))
        assert [c.item_id for c in res.sentences[0].citations] == ["a"]

    def test_no_items(self) -> None:
        """Without items nothing is cited and the text is unchanged."""
        res = align_citations("Aspirin works.", [])
        assert res.text == "Aspirin works."

    def test_rejects_zero_limit(self) -> None:
        """max_per_sentence must be positive."""
        with pytest.raises(ValueError, match="max_per_sentence"):
            align_citations("x", ITEMS, max_per_sentence=0)

    def test_to_dict_shape(self) -> None:
        """The JSON form has text, sentences, bibliography and disagreements."""
        d = align_citations("Aspirin reduced mortality in adults.", ITEMS).to_dict()
        assert set(d) == {"text", "sentences", "bibliography", "disagreements"}
        assert d["bibliography"][0]["marker"] == 1
