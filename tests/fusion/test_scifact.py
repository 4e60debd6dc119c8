"""SciFact check (slow): the full ranking never scores below plain RRF when factors carry no information.

Two real lexical lanes over SciFact (SQLite FTS5 with the porter and the unicode61 tokenizer, OR of quoted
terms, top 100) are fused with the default ranking and with every boost weight at 0. SciFact has no dates, no
domains and no authority entries, so without quality the two rankings must be identical; with ingest-time
quality (saturated at 0.8) nDCG@10 must not fall below plain RRF.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fabric.core.models import Hit, LaneKind, LaneOutcome, LaneStatus
from fabric.settings import FactorWeights, FusionConfig
from fusion.pipeline import FusionContext, fuse
from fusion.quality import content_quality
from tests.fusion.conftest import NOW

DATA = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "scifact"
if not DATA.exists():
    DATA = Path("/work/shared/datasets/scifact")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (DATA / "corpus.jsonl").exists(), reason="SciFact not found under ../shared/datasets"),
]

ZERO = FactorWeights(domain_diversity=0, recency=0, authority=0, quality=0)


def _ndcg10(ranked: list[str], rel: dict[str, int]) -> float:
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(rel.values(), reverse=True)[:10]))
    return dcg / ideal if ideal else 0.0


@pytest.fixture(scope="module")
def runs() -> Iterator[list[tuple[dict[str, LaneOutcome], dict[str, int]]]]:
    """Per judged train query: the two lanes' outcomes (hits carry ingest quality) and the qrels."""
    docs = [json.loads(line) for line in (DATA / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    queries = {
        q["_id"]: q["text"] for q in map(json.loads, (DATA / "queries.jsonl").read_text(encoding="utf-8").splitlines())
    }
    qrels: dict[str, dict[str, int]] = {}
    for line in (DATA / "qrels" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        q, d, s = line.split("\t")
        qrels.setdefault(q, {})[d] = int(s)
    db = sqlite3.connect(":memory:")
    by_id: dict[str, Any] = {}
    for table, tok in (("porter", "porter"), ("plain", "unicode61")):
        db.execute(f"create virtual table {table} using fts5(id unindexed, title, text, tokenize='{tok}')")
        db.executemany(f"insert into {table} values (?, ?, ?)", [(d["_id"], d["title"], d["text"]) for d in docs])
    for d in docs:
        by_id[d["_id"]] = (d["title"], d["text"], content_quality(d["title"], d["text"]))

    def lane(table: str, query: str) -> LaneOutcome:
        match = " OR ".join(f'"{w}"' for w in re.findall(r"\w+", query.lower()))
        sql = f"select id, bm25({table}) from {table} where {table} match ? order by bm25({table}) limit 100"
        rows = db.execute(sql, (match,)).fetchall() if match else []
        hits = tuple(
            Hit(id=i, rank=r, score=-s, title=by_id[i][0], text=by_id[i][1], quality=by_id[i][2])
            for r, (i, s) in enumerate(rows, 1)
        )
        return LaneOutcome(lane=table, kind=LaneKind.KEYWORD, provider=table, status=LaneStatus.SUCCESS, hits=hits)

    yield [({t: lane(t, queries[q]) for t in ("porter", "plain")}, rel) for q, rel in qrels.items()]
    db.close()


def _score(runs: list[tuple[dict[str, LaneOutcome], dict[str, int]]], factors: FactorWeights, quality: bool) -> float:
    ctx = FusionContext(config=FusionConfig(factors=factors), now=NOW)
    total = 0.0
    for outs, rel in runs:
        if not quality:
            outs = {n: replace(o, hits=tuple(replace(h, quality=None) for h in o.hits)) for n, o in outs.items()}
        total += _ndcg10([it.id for it in fuse(outs, ctx).items[:10]], rel)
    return total / len(runs)


class TestSciFact:
    def test_no_information_equals_plain_rrf(self, runs: list[Any]) -> None:
        """Without quality, SciFact gives every factor one value, so the full ranking is plain RRF exactly."""
        assert _score(runs, FactorWeights(), quality=False) == _score(runs, ZERO, quality=False)

    def test_full_ranking_not_below_plain_rrf(self, runs: list[Any]) -> None:
        """With ingest quality the full ranking's nDCG@10 is at least plain RRF's."""
        assert _score(runs, FactorWeights(), quality=True) >= _score(runs, ZERO, quality=True)
