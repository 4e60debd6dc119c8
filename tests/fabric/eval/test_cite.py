"""Tests for fabric.eval.cite: the judged set, the outcome of one alignment and the figures (accuracy, the
precision and recall of "uncited", coverage, retrieval recall)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric.cli.demo import shipped_corpus
from fabric.core.errors import ConfigError
from fabric.core.models import Hit
from fabric.eval.cite import CiteOutcome, JudgedSentence, load_judged, outcome, score_outcomes, shipped_set
from fabric.ingest.loaders import load_source
from fusion.citations import align_citations


def judged(sid: str, *supports: str) -> JudgedSentence:
    return JudgedSentence(id=sid, query="q", sentence="s", supports=frozenset(supports))


def done(j: JudgedSentence, *cited: tuple[str, str]) -> CiteOutcome:
    return CiteOutcome(judged=j, cited=cited, retrieved=frozenset(x for pair in cited for x in pair))


class TestShippedSet:
    def test_every_support_names_a_document_of_the_demo_corpus(self) -> None:
        """The shipped set loads; its passage ids are documents of the demo corpus; both kinds of sentence occur."""
        rows = load_judged(shipped_set())
        docs = {c.doc_id for c in load_source(shipped_corpus(), "markdown").chunks}
        assert len(rows) >= 30
        assert all(s in docs for r in rows for s in r.supports)
        assert sum(1 for r in rows if r.supports) >= 20
        assert sum(1 for r in rows if not r.supports) >= 5


class TestLoad:
    @pytest.mark.parametrize(
        ("line", "message"),
        [
            ("{nope", "not JSON"),
            ('{"id": "a", "query": "q", "sentence": ""}', "sentence: expected a non-empty string"),
            ('{"id": "a", "query": "q", "sentence": "s", "supports": "d"}', "supports: expected a list"),
            ("[1]", "expected an object"),
        ],
    )
    def test_bad_line_names_file_line_and_field(self, tmp_path: Path, line: str, message: str) -> None:
        """A malformed line is a ConfigError naming the file and the line."""
        path = tmp_path / "set.jsonl"
        path.write_text('{"id": "ok", "query": "q", "sentence": "s", "supports": []}\n' + line + "\n")
        with pytest.raises(ConfigError, match=message) as info:
            load_judged(path)
        assert f"{path}:2" in str(info.value)

    def test_duplicate_id_and_empty_set(self, tmp_path: Path) -> None:
        """Ids are unique; an empty set is refused; a missing file names itself."""
        path = tmp_path / "set.jsonl"
        row = '{"id": "a", "query": "q", "sentence": "s", "supports": []}\n'
        path.write_text(row + row)
        with pytest.raises(ConfigError, match="appears twice"):
            load_judged(path)
        path.write_text("\n")
        with pytest.raises(ConfigError, match="no sentence"):
            load_judged(path)
        with pytest.raises(ConfigError, match="cannot read"):
            load_judged(tmp_path / "missing.jsonl")


class TestScore:
    def test_figures(self) -> None:
        """4 supported (2 cited right, 1 cited wrong, 1 uncited), 2 unsupported (1 uncited, 1 cited)."""
        outcomes = [
            done(judged("a", "d1"), ("d1#0", "d1")),  # right by document id
            done(judged("b", "d2#0"), ("d2#0", "d2"), ("d3#0", "d3")),  # right by item id
            done(judged("c", "d1"), ("d3#0", "d3"), ("d1#0", "d1")),  # best citation wrong: wrong
            done(judged("d", "d4")),  # left uncited: wrong
            done(judged("e")),  # unsupported, uncited: right
            done(judged("f"), ("d1#0", "d1")),  # unsupported, cited
        ]
        got = score_outcomes(outcomes)
        assert got == {
            "sentences": 6, "supported": 4, "unsupported": 2, "accuracy": 0.5,
            "uncited": {"precision": 0.5, "recall": 0.5}, "coverage": round(4 / 6, 4), "retrieval_recall": 0.75,
        }  # fmt: skip
        assert [o.correct for o in outcomes] == [True, True, False, False, None, None]

    def test_no_unsupported_and_nothing_uncited(self) -> None:
        """A share over nothing is None, not 0."""
        got = score_outcomes([done(judged("a", "d1"), ("d1#0", "d1"))])
        assert got["uncited"] == {"precision": None, "recall": None}
        assert got["accuracy"] == 1.0

    def test_outcome_of_an_alignment(self) -> None:
        """outcome() reads the citations of align_citations with each item's document."""
        hits = [
            Hit(id="d1#0", rank=1, score=1.0, doc_id="d1", text="Receipts are kept for 90 days."),
            Hit(id="d2#0", rank=2, score=1.0, doc_id="d2", text="Bread needs flour."),
        ]
        j = judged("a", "d1")
        o = outcome(j, hits, align_citations("Receipts are kept for 90 days.", hits))
        assert o.cited == (("d1#0", "d1"),)
        assert o.correct is True
        assert o.to_dict() == {"id": "a", "supported": True, "cited": ["d1#0"], "correct": True, "retrieved": True}
