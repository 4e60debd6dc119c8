"""Tests of the token budget and citation-ready passages of the returned page."""

from __future__ import annotations

from fabric.core.models import FusedItem, Hit
from fabric.query.answer_limits import apply_token_budget, citation_passages, count_tokens, cut_to_tokens


def item(hid: str, text: str, *, title: str = "", url: str = "", source_ref: str = "") -> FusedItem:
    h = Hit(id=hid, rank=1, score=1.0, title=title, text=text, url=url, source_ref=source_ref)
    return FusedItem(hit=h, score_total=1.0, scores={}, lanes=("a",), ranks={"a": 1})


class TestTokens:
    def test_words_and_punctuation_count(self) -> None:
        assert count_tokens("Hello, world!") == 4
        assert count_tokens("") == 0

    def test_cut_keeps_the_original_characters(self) -> None:
        assert cut_to_tokens("one two,  three four", 3) == "one two,"
        assert cut_to_tokens("one two", 5) == "one two"
        assert cut_to_tokens("one two", 0) == ""


class TestTokenBudget:
    def test_no_budget_keeps_everything(self) -> None:
        items = [item("a", "x " * 50)]
        out = apply_token_budget(items, None)
        assert out.items == tuple(items)
        assert out.record == {}

    def test_items_fit_then_one_is_cut_and_the_rest_deferred(self) -> None:
        """4 + 4 tokens fit a budget of 10; the third item is cut to the 2 tokens left, the fourth deferred."""
        items = [item(k, "w1 w2 w3", title="t") for k in "abcd"]
        out = apply_token_budget(items, 10)
        assert [it.id for it in out.items] == ["a", "b", "c"]
        assert out.items[2].hit.text == "w1"
        assert out.record == {"max_tokens": 10, "tokens": 10, "truncated": ["c"], "deferred": 1}
        assert sum(count_tokens(it.hit.title) + count_tokens(it.hit.text) for it in out.items) <= 10

    def test_first_item_always_returned(self) -> None:
        """A budget smaller than the first item still returns it, cut."""
        out = apply_token_budget([item("a", "one two three four five")], 3)
        assert [it.hit.text for it in out.items] == ["one two three"]

    def test_item_whose_title_does_not_fit_is_deferred(self) -> None:
        items = [item("a", "one two"), item("b", "x", title="a long title here")]
        out = apply_token_budget(items, 4)
        assert [it.id for it in out.items] == ["a"]
        assert out.record["deferred"] == 1
        assert out.record["truncated"] == []


class TestCitationPassages:
    def test_best_sentence_with_marker_in_page_order(self) -> None:
        """The sentence holding most query words is cited; markers follow the page among citable items."""
        items = [
            item("a", "Bread is baked. Vitamin D lowers fracture risk in adults.", url="https://x.org/a"),
            item("b", "Nothing about it here.", url="https://x.org/b"),
            item("c", "Fracture risk rises with age.", source_ref="corpus.jsonl"),
        ]
        out = citation_passages("vitamin D fracture risk", items)
        a, c = out["a"], out["c"]
        assert a is not None
        assert c is not None
        assert a["passage"] == "Vitamin D lowers fracture risk in adults."
        assert a["marker"] == 1
        assert a["ref"] == "https://x.org/a"
        assert out["b"] is None
        assert c["marker"] == 2
        assert c["ref"] == "corpus.jsonl"
        assert 0.0 < c["similarity"] < a["similarity"] <= 1.0

    def test_item_without_reference_is_not_citable(self) -> None:
        out = citation_passages("vitamin", [item("a", "Vitamin D.")])
        assert out == {"a": None}

    def test_items_of_one_document_share_its_marker(self) -> None:
        """Markers number source documents: a second chunk of a document gets the document's marker."""
        hits = [
            Hit(id="d#1", rank=1, score=1.0, doc_id="d", text="Vitamin D helps.", url="doc:d#1"),
            Hit(id="e", rank=2, score=1.0, text="Vitamin E helps.", url="https://x.org/e"),
            Hit(id="d#2", rank=3, score=1.0, doc_id="d", text="Vitamin D again.", url="doc:d#2"),
        ]
        items = [FusedItem(hit=h, score_total=1.0, scores={}, lanes=("a",), ranks={"a": 1}) for h in hits]
        out = citation_passages("vitamin", items)
        assert {k: v["marker"] for k, v in out.items() if v is not None} == {"d#1": 1, "e": 2, "d#2": 1}
