"""Tests of the scale corpus builder: sentence windows, title passages, qrels mapped to passages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bench.scale_corpus as mod
from bench.scale_corpus import build_scale_dataset, passages_of, split_sentences
from fabric.eval.dataset import load_dataset


def beir(root: Path) -> Path:
    """A two-abstract BEIR folder with one judged query."""
    root.mkdir()
    docs = [
        {"_id": "d1", "title": "Alpha study", "text": "First finding. Second finding (n=3). Third one? Yes."},
        {"_id": "d2", "title": "", "text": "Only sentence here"},
    ]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "alpha finding"}) + "\n")
    (root / "qrels").mkdir()
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\n")
    return root


def test_sentences_split_after_terminal_punctuation() -> None:
    """A split needs end punctuation, a space and a capital, digit or bracket: 'e.g. x' stays whole."""
    assert split_sentences("A b. C d! (E) f? 2 g. see e.g. this") == ["A b.", "C d!", "(E) f?", "2 g. see e.g. this"]


def test_passages_are_title_plus_two_sentence_windows() -> None:
    """One title passage, then one passage per sentence holding it and the next; ids are stable."""
    got = passages_of("d1", "T", "One. Two. Three.")
    assert [(p.id, p.text) for p in got] == [
        ("d1-t", "T"), ("d1-0", "One. Two."), ("d1-1", "Two. Three."), ("d1-2", "Three."),
    ]  # fmt: skip
    assert {p.title for p in got} == {"T"}


def test_dataset_maps_qrels_to_every_passage(tmp_path: Path) -> None:
    """Every passage of a relevant abstract is relevant with its grade; the folder loads as a BEIR dataset."""
    out = build_scale_dataset(beir(tmp_path / "src"), tmp_path / "out")
    assert (out.passages, out.abstracts, out.queries) == (6, 2, 1)
    qrels = (tmp_path / "out" / "qrels" / "train.tsv").read_text().splitlines()
    assert qrels == ["query-id\tcorpus-id\tscore"] + [f"q1\td1-{s}\t2" for s in ("t", "0", "1", "2", "3")]
    ds = load_dataset(tmp_path / "out", split="train")
    assert [q.id for q in ds.queries] == ["q1"]


def test_abstract_limit_and_missing_files(tmp_path: Path) -> None:
    """abstracts=N keeps the first N; a folder without qrels for the split is refused by name."""
    src = beir(tmp_path / "src")
    assert build_scale_dataset(src, tmp_path / "one", abstracts=1).passages == 5
    with pytest.raises(FileNotFoundError, match=r"test\.tsv"):
        build_scale_dataset(src, tmp_path / "x", split="test")


def test_public_api() -> None:
    """The module's public names."""
    assert mod.__all__ == ["Passage", "ScaleCorpus", "build_scale_dataset", "passages_of", "split_sentences"]
