"""Tests for fusion.citations: splitting, similarity, threshold, limits, markers and bibliography."""

from __future__ import annotations

import pytest

from fabric.core.errors import UnprocessableQueryError
from fabric.core.models import Hit
from fusion import citations
from fusion.citations import align_citations, embedding_similarity, lexical_similarity, split_sentences
from tests.fusion.test_sentences import executed_lines


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
        """A sentence without support gets no citation; its sources are still listed, none of them cited."""
        res = align_citations("The moon is made of cheese.", ITEMS)
        assert res.sentences[0].citations == ()
        assert [(s.id, s.marker, s.cited) for s in res.bibliography] == [("a", None, False), ("b", None, False)]

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


class TestWorkBudget:
    def test_too_many_answer_sentences_is_unprocessable(self) -> None:
        """An answer of more than MAX_SENTENCES sentences is refused naming the answer, before any comparison."""
        with pytest.raises(UnprocessableQueryError, match="at most 200 sentences") as caught:
            align_citations("Yes! " * (citations.MAX_SENTENCES + 1), ITEMS)
        assert caught.value.field == "answer"

    def test_too_long_an_answer_is_unprocessable(self) -> None:
        """An answer over MAX_ANSWER_CHARS characters is refused at every door, the Python API included."""
        with pytest.raises(UnprocessableQueryError, match="at most 20000 characters"):
            align_citations("x" * (citations.MAX_ANSWER_CHARS + 1), ITEMS)

    def test_too_many_passages_or_pairs_is_unprocessable(self) -> None:
        """Items holding more than MAX_PASSAGES passages, or more than MAX_PAIRS sentence-passage pairs, are
        refused naming the items."""
        many = [item(f"i{k}", "Aspirin works. " * 100) for k in range(citations.MAX_PASSAGES // 100 + 1)]
        with pytest.raises(UnprocessableQueryError, match="more than 2000 sentences") as caught:
            align_citations("Aspirin works.", many)
        assert caught.value.field == "items"
        pairs = [item("a", "Aspirin works. " * 1_000)]
        with pytest.raises(UnprocessableQueryError, match="comparisons"):
            align_citations("Aspirin works. " * 101, pairs)

    def test_semantic_embeds_a_bounded_number_of_texts(self) -> None:
        """The embedding similarity refuses more than MAX_EMBEDDED texts naming ``semantic``."""
        with pytest.raises(UnprocessableQueryError) as caught:
            align_citations(
                "Aspirin works.", [item("a", "Aspirin works. " * 600)], similarity=embedding_similarity(FakeEmbedder())
            )
        assert caught.value.field == "semantic"

    def test_work_grows_linearly_with_the_answer(self) -> None:
        """Twice the answer sentences against the same items at most doubles the lines executed."""
        items = [item(f"i{k}", "Aspirin reduced mortality by 25%. Statins lower LDL. " * 20) for k in range(5)]
        answer = "Aspirin reduced mortality by 12%. a. a. Statins did not lower LDL. "
        small = executed_lines(align_citations, answer * 20, items)
        large = executed_lines(align_citations, answer * 40, items)
        assert large <= 2 * small


def chunk(item_id: str, doc_id: str, text: str, rank: int) -> Hit:
    """A chunk of document ``doc_id``."""
    return Hit(id=item_id, rank=rank, score=1.0, doc_id=doc_id, title=f"T {doc_id}", text=text)


class TestBibliography:
    """Seed 003: the bibliography lists every source document used, not only the cited ones."""

    def test_lists_uncited_sources_after_cited_ones(self) -> None:
        """Every item's document is listed; the cited ones first, by marker; the others unmarked, by rank."""
        res = align_citations("Statins lower LDL cholesterol.", ITEMS)
        assert [(s.id, s.marker, s.cited) for s in res.bibliography] == [("b", 1, True), ("a", None, False)]
        d = res.to_dict()["bibliography"]
        assert set(d[0]) == {"marker", "cited", "id", "item_ids", "title", "url", "domain", "published_at",
                             "author", "excerpt"}  # fmt: skip
        assert d[0]["excerpt"] == "Statins lower LDL cholesterol in most patients."
        assert d[1]["excerpt"].startswith("Aspirin reduced mortality by 25% in adults.")  # shares nothing: the start

    def test_chunks_of_one_document_are_one_source(self) -> None:
        """Two chunks of one document: one entry (both item ids), one marker, one citation per sentence."""
        items = [
            chunk("d1#1", "d1", "Aspirin reduced mortality in adults.", 1),
            chunk("d2#1", "d2", "Statins lower LDL cholesterol.", 2),
            chunk("d1#2", "d1", "Aspirin reduced mortality in adults, again.", 3),
        ]
        res = align_citations("Aspirin reduced mortality in adults. Statins lower LDL cholesterol.", items)
        assert [[c.item_id for c in s.citations] for s in res.sentences] == [["d1#1"], ["d2#1"]]
        assert [(s.id, s.marker, s.item_ids) for s in res.bibliography] == [
            ("d1", 1, ("d1#1", "d1#2")),
            ("d2", 2, ("d2#1",)),
        ]
        assert res.text == "Aspirin reduced mortality in adults [1]. Statins lower LDL cholesterol [2]."

    def test_cited_chunks_of_one_document_share_its_marker(self) -> None:
        """Sentences citing different chunks of one document carry the same marker."""
        items = [chunk("d1#1", "d1", "Aspirin reduced mortality.", 1), chunk("d1#2", "d1", "Statins lower LDL.", 2)]
        res = align_citations("Aspirin reduced mortality. Statins lower LDL.", items)
        assert [[(c.marker, c.item_id) for c in s.citations] for s in res.sentences] == [[(1, "d1#1")], [(1, "d1#2")]]
        assert [s.id for s in res.bibliography] == ["d1"]

    def test_uncited_excerpt_is_the_closest_passage(self) -> None:
        """An uncited source shows its passage most similar to the answer."""
        items = [item("a", "Cats sleep a lot. Aspirin is cheap.")]
        res = align_citations("Aspirin reduced mortality in adults.", items)
        assert res.bibliography[0].marker is None
        assert res.bibliography[0].excerpt == "Aspirin is cheap."
