"""The slow-cook job of the docs-memory policy: refresh the index incrementally, run the fixed query set, write one
receipt.

``fabric slowcook`` (:mod:`fabric.cli.slowcook`) calls :func:`cook` and :func:`build_receipt`:

1. **refresh**: the query set's corpus is ingested into the home with :func:`fabric.ingest.run.run_ingest`, which
   writes only what changed (the ledger skips unchanged chunks and deletes the ones the source no longer holds);
   the receipt's ``corpus`` section counts ``added`` / ``updated`` / ``unchanged`` / ``deleted`` chunks and names
   the allowlist that narrowed the corpus and the trust each file got (:mod:`fabric.ingest.selection`);
2. **benchmark**: every judged query runs once through the real engine over the home (the fused pass of
   ``fabric eval``, same lanes, fusion and top-k 100), and once more with its follow-up hint (the docs-memory policy's
   hint-rate, :mod:`fabric.eval.hints`);
3. **receipt**: metrics (nDCG@10, MRR@10, recall, Hit@1, Hit@5), each query's rank of its first relevant
   document, the top failure cases (queries whose target is not first: the query, the expected documents, what
   came first and its fused score), and the comparison with the previous receipt.

The **verdict** compares with the previous receipt (the one this run replaces): a **regression** is a metric that
dropped by more than its tolerance (``[slowcook.tolerance]``; compared only when both receipts ran the same query
ids), and a **newly missed** query is one whose target was in the top 5 last time and is not now. Either makes the
verdict ``regression`` (exit 1); otherwise ``pass``, or ``baseline`` when there is no previous receipt (exit 0).
Because each run is compared with the one before it, a regression is reported once, by the run that sees it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabric.core.errors import ConfigError
from fabric.eval.dataset import Dataset
from fabric.eval.metrics import METRIC_KEYS, average, query_metrics
from fabric.eval.runner import FUSED, PassResult, QueryRun
from fabric.settings import Settings

if TYPE_CHECKING:
    from fabric.ingest.report import IngestReport

__all__ = [
    "RECEIPT_KIND",
    "build_receipt",
    "compare",
    "cook",
    "corpus_changes",
    "failure_cases",
    "load_previous",
    "per_query",
    "verdict_line",
]

RECEIPT_KIND = "fabric-slowcook-receipt"
"""The ``kind`` every receipt carries (a file without it is not taken as a previous receipt)."""

_EPS = 1e-9
_SHOWN_METRICS = {"ndcg_at_10": "nDCG@10", "mrr_at_10": "MRR@10", "hit_at_1": "Hit@1", "hit_at_5": "Hit@5"}


async def cook(
    settings: Settings, dataset: Dataset, lanes: Sequence[str], *, top_k: int = 100
) -> tuple[IngestReport, PassResult, PassResult | None]:
    """Refresh the home from the dataset's corpus, then run its queries (plain and hinted) through the engine.

    Returns:
        (ingest report, fused pass, hinted pass or None).

    Raises:
        IngestError: the corpus cannot be read; HomeInUseError: another process writes the home.
    """
    from fabric.eval import harness
    from fabric.eval.hints import hinted_dataset, run_hinted
    from fabric.eval.runner import run_pass
    from fabric.ingest.run import run_ingest

    settings.home.mkdir(parents=True, exist_ok=True)
    report = await run_ingest(settings, dataset.corpus, dataset.corpus_format)
    plan = harness.EvalPlan(lanes=tuple(lanes), top_k=top_k, lane_passes=False)
    run_settings = harness.eval_settings(settings, home=settings.home, top_k=top_k, lanes=lanes)
    hinted = hinted_dataset(dataset)
    async with harness.open_engine(run_settings) as engine:
        fused = await run_pass(engine, dataset, name=FUSED, lanes=plan.lanes, mode=plan.mode, top_k=top_k)
        hint_pass = await run_hinted(engine, hinted, plan) if hinted is not None else None
    return report, fused, hint_pass


def corpus_changes(report: Mapping[str, Any]) -> dict[str, Any]:
    """The receipt's ``corpus`` section from an ingest report's :meth:`~fabric.ingest.pipeline.IngestReport.to_dict`."""
    return {
        "source": report["source"],
        "docs": report["docs"],
        "chunks": report["chunks"],
        "added": report["created"],
        "updated": report["updated"],
        "unchanged": report["unchanged"],
        "deleted": report["deleted"],
        "repaired": report["repaired"],
        "pending": report["pending"],
        "embeddings": report["embeddings"],
        "stores": dict(report["stores"]),
        "allowlist": report.get("allowlist"),
        "trust": report.get("trust"),
    }


def _rank(run: QueryRun | None, qrels: Mapping[str, int]) -> int | None:
    """1-based rank of the first relevant document, None when none was returned."""
    if run is None:
        return None
    return next((i + 1 for i, doc in enumerate(run.doc_ids) if qrels.get(doc, 0) > 0), None)


def per_query(dataset: Dataset, fused: PassResult) -> dict[str, dict[str, Any]]:
    """Query id → its rank of the first relevant document and whether that is within the top 5."""
    out: dict[str, dict[str, Any]] = {}
    for q in dataset.queries:
        rank = _rank(fused.runs.get(q.id), dataset.qrels[q.id])
        out[q.id] = {"rank": rank, "hit_at_5": rank is not None and rank <= 5}
    return out


def _expected(qrels: Mapping[str, int]) -> list[str]:
    """Relevant documents, the most relevant first."""
    return [doc for doc, grade in sorted(qrels.items(), key=lambda kv: (-kv[1], kv[0])) if grade > 0]


def _case(dataset: Dataset, qid: str, fused: PassResult) -> dict[str, Any]:
    run = fused.runs.get(qid)
    text = next(q.text for q in dataset.queries if q.id == qid)
    first = None
    if run is not None and run.doc_ids:
        score = round(run.top_score, 6) if run.top_score is not None else None
        first = {"doc_id": run.doc_ids[0], "title": run.top_title, "score": score}
    return {
        "query_id": qid,
        "query": text,
        "expected": _expected(dataset.qrels[qid]),
        "expected_rank": _rank(run, dataset.qrels[qid]),
        "first": first,
        "ndcg_at_10": round(query_metrics(run.doc_ids if run else (), dataset.qrels[qid])["ndcg_at_10"], 6),
    }


def failure_cases(
    dataset: Dataset, fused: PassResult, limit: int, newly_missed: Sequence[str] = ()
) -> tuple[list[dict[str, Any]], int]:
    """The ``limit`` worst queries whose target is not first, and how many such queries there are.

    Worst first: newly missed queries, then those missed in the top 5 before those found there, then by rank of the
    first relevant document (not found last), then by nDCG@10, then by query id.
    """
    cases = [_case(dataset, q.id, fused) for q in dataset.queries]
    failing = [c for c in cases if c["expected_rank"] != 1]
    new = set(newly_missed)

    def severity(c: dict[str, Any]) -> tuple[bool, bool, float, float, str]:
        rank = c["expected_rank"]
        found5 = rank is not None and rank <= 5
        worst = -(rank if rank is not None else float("inf"))
        return c["query_id"] not in new, found5, worst, c["ndcg_at_10"], c["query_id"]

    failing.sort(key=severity)
    return failing[:limit], len(failing)


def load_previous(path: Path) -> dict[str, Any] | None:
    """The previous receipt at ``path``, or None when there is none.

    Raises:
        ConfigError: the file is not readable JSON or not a slow-cook receipt.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read the previous receipt: {exc.strerror}", source=str(path)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"previous receipt is not valid JSON: {exc.msg} (line {exc.lineno})", source=str(path)
        ) from None
    if not isinstance(data, dict) or data.get("kind") != RECEIPT_KIND:
        raise ConfigError(
            f"not a slow-cook receipt (no kind = {RECEIPT_KIND!r}); move it away or pass --receipt", source=str(path)
        )
    for key, kind in (("metrics", dict), ("per_query", dict)):
        if not isinstance(data.get(key), kind):
            raise ConfigError(f"previous receipt has no {key} table", source=str(path), key=key)
    return data


def _metric_checks(
    previous: Mapping[str, Any], current: Mapping[str, float], tolerance: Mapping[str, float]
) -> dict[str, Any]:
    checks: dict[str, Any] = {}
    for metric, allowed in tolerance.items():
        before = previous.get(metric)
        if not isinstance(before, int | float) or metric not in current:
            continue
        change = current[metric] - float(before)
        checks[metric] = {
            "previous": round(float(before), 6),
            "current": round(current[metric], 6),
            "change": round(change, 6),
            "tolerance": allowed,
            "regressed": change < -allowed - _EPS,
        }
    return checks


def compare(
    previous: Mapping[str, Any] | None,
    metrics: Mapping[str, float],
    queries: Mapping[str, Mapping[str, Any]],
    tolerance: Mapping[str, float],
) -> dict[str, Any]:
    """Regressions and newly missed query ids against the previous receipt (see the module docstring)."""
    if previous is None:
        return {
            "previous": None,
            "metrics": {},
            "note": "no previous receipt: this run is the baseline",
            "regressions": [],
            "newly_missed": [],
        }
    before: Mapping[str, Any] = previous["per_query"]
    same_set = set(before) == set(queries)
    checks = _metric_checks(previous["metrics"], metrics, tolerance) if same_set else {}
    note = None if same_set else "the query set changed: metrics not compared, queries compared where both ran"
    newly = [
        q
        for q, now in queries.items()
        if isinstance(before.get(q), dict) and before[q].get("hit_at_5") and not now["hit_at_5"]
    ]
    return {
        "previous": {"time": previous.get("time"), "git_revision": previous.get("git_revision")},
        "metrics": checks,
        "note": note,
        "regressions": [m for m, c in checks.items() if c["regressed"]],
        "newly_missed": newly,
    }


def verdict_line(comparison: Mapping[str, Any], cases: Mapping[str, Mapping[str, Any]]) -> str:
    """The one line that says what the run found (``cases``: query id → its failure case)."""
    regressions, newly = comparison["regressions"], comparison["newly_missed"]
    if not regressions and not newly:
        if comparison["previous"] is None:
            return "fabric slowcook: baseline written (no previous receipt)"
        return f"fabric slowcook: ok: no regression and no newly missed query since {comparison['previous']['time']}"
    parts = []
    if newly:
        shown = [f"{q} ({cases[q]['query']!r} → expected {', '.join(cases[q]['expected'][:2])})" for q in newly[:3]]
        more = f" and {len(newly) - 3} more" if len(newly) > 3 else ""
        parts.append(f"{len(newly)} newly missed quer{'y' if len(newly) == 1 else 'ies'}: {', '.join(shown)}{more}")
    for metric in regressions:
        c = comparison["metrics"][metric]
        name = _SHOWN_METRICS.get(metric, metric)
        parts.append(
            f"{name} {c['previous']:.4f} → {c['current']:.4f} ({c['change']:+.4f}, tolerance {c['tolerance']})"
        )
    return "fabric slowcook: REGRESSION: " + "; ".join(parts)


def build_receipt(
    *,
    settings: Settings,
    dataset: Dataset,
    lanes: Sequence[str],
    ingest: Mapping[str, Any],
    fused: PassResult,
    hints: Mapping[str, Any] | None,
    previous: Mapping[str, Any] | None,
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    """The aggregate receipt of one run (``extra``: ``git_revision``, ``wall_time_s``, ``receipt_path``)."""
    cfg = settings.slowcook
    scores = {
        q.id: query_metrics(fused.runs[q.id].doc_ids if q.id in fused.runs else (), dataset.qrels[q.id])
        for q in dataset.queries
    }
    metrics = {k: round(v, 6) for k, v in average(scores, dataset.query_ids).items() if k in METRIC_KEYS}
    queries = per_query(dataset, fused)
    comparison = compare(previous, metrics, queries, cfg.tolerance)
    failures, failing = failure_cases(dataset, fused, cfg.top_failures, comparison["newly_missed"])
    all_cases = {q: _case(dataset, q, fused) for q in comparison["newly_missed"]}
    failed = bool(comparison["regressions"] or comparison["newly_missed"])
    status = "regression" if failed else ("baseline" if previous is None else "pass")
    return {
        "kind": RECEIPT_KIND,
        "schema": 1,
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "home": str(settings.home),
        "query_set": {
            "name": dataset.name,
            "path": str(dataset.root),
            "split": dataset.split,
            "queries": len(dataset.queries),
            "corpus": str(dataset.corpus),
        },
        "config": {
            "lanes": list(lanes),
            "fusion_mode": settings.fusion.mode.value,
            "embeddings": f"{settings.embeddings.backend}:{settings.embeddings.model}",
            "tolerance": dict(cfg.tolerance),
            "top_failures": cfg.top_failures,
        },
        "corpus": corpus_changes(ingest),
        "metrics": metrics,
        "hints": dict(hints) if hints is not None else None,
        "failure_count": failing,
        "failures": failures,
        "newly_missed": [all_cases[q] for q in comparison["newly_missed"]],
        "comparison": comparison,
        "per_query": queries,
        "verdict": {"status": status, "exit_code": 1 if failed else 0, "line": verdict_line(comparison, all_cases)},
        **extra,
    }
