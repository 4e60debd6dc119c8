"""``fabric cite`` prints every source (cited ``[n]``, uncited ``[-]``) and each disagreement's kind, severity and
topic (seed 003), through ``fabric.cli.main``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric.cli import main

ITEMS = [
    {"id": "r1#0", "doc_id": "r1", "title": "Retention 30d", "url": "doc:r1", "author": "Ops",
     "text": "Query receipts are kept for 30 days."},
    {"id": "r2#0", "doc_id": "r2", "title": "Retention 90d", "url": "doc:r2",
     "text": "Query receipts are kept for 90 days."},
    {"id": "r2#1", "doc_id": "r2", "title": "Retention 90d", "url": "doc:r2", "text": "Quarterly reviews need it."},
    {"id": "b", "title": "Bread", "url": "https://bread.example.org/", "text": "Bread needs flour."},
]  # fmt: skip


def test_plain_output_lists_every_source_and_the_severity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Both retention notes are cited for the sentence and disagree on the days (7 vs 90: high); the bread note is
    listed uncited; the 90-day note is one source for its two chunks."""
    path = tmp_path / "items.json"
    path.write_text(json.dumps({"items": ITEMS}))
    assert main(["cite", "--answer", "Query receipts are kept for days.", "--items", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Query receipts are kept for days [1][2]."
    assert out[2:5] == [
        "[1] Retention 30d (Ops) — doc:r1",
        "[2] Retention 90d — doc:r2",
        "[-] Bread — https://bread.example.org/",
    ]
    assert out[5] == (
        "! sentence 1: [1] and [2] disagree on 'day' (numbers, high; topic: query receipt kept day): [1] 30 vs [2] 90"
    )
