"""Tests for bench.fusion_digest: seeded cases, what a record holds, and a digest that depends only on the seed."""

from __future__ import annotations

import argparse

from bench import fusion_digest
from bench.fusion_digest import case, digest_case
from fabric.settings import FusionConfig
from fusion.pipeline import FusionContext
from tests.support.hits import NOW, make_outcomes


def test_cases_depend_only_on_the_seed() -> None:
    """The same seed builds equal cases; another seed builds other ones."""
    assert case(5) == case(5)
    assert case(5) != case(6)


def test_cases_vary_in_shape() -> None:
    """Over a few dozen seeds the cases cover empty and many-lane calls, dedup on and off and several modes."""
    cases = [case(s) for s in range(60)]
    lanes = {len(outcomes) for outcomes, _, _ in cases}
    assert 0 in lanes
    assert max(lanes) >= 6
    assert {ctx.dedup for _, ctx, _ in cases} == {True, False}
    assert len({ctx.mode or ctx.config.mode for _, ctx, _ in cases}) >= 4
    assert any(h.simhash is None for outcomes, _, _ in cases for o in outcomes.values() for h in o.hits)


def test_record_holds_items_and_groups() -> None:
    """A record lists every item's explanation and, with dedup on, the groups and the comparison count."""
    ctx = FusionContext(config=FusionConfig(), now=NOW)
    record, items, removed = digest_case(make_outcomes(3, 20), ctx, 10)
    assert items > 0
    assert removed is not None
    assert removed > 0
    lines = record.splitlines()
    assert len(lines) == 1 + 10 + items + 1  # head, the first page, every item, the groups
    assert "'fused'" in lines[1]
    assert "'rrf'" in lines[1]


def test_refused_call_records_the_error() -> None:
    """A call fusion refuses is recorded by its exception, not skipped."""
    ctx = FusionContext(config=FusionConfig(rrf_k=0), now=NOW)
    record, items, removed = digest_case(make_outcomes(2, 5), ctx, 10)
    assert (record, items, removed) == ("ValueError: k must be > 0, got 0", 0, None)


def test_digest_is_repeatable() -> None:
    """Two runs over the same cases agree; another seed gives another digest."""
    first = fusion_digest.run(argparse.Namespace(cases=25, seed=1))
    assert first == fusion_digest.run(argparse.Namespace(cases=25, seed=1))
    assert first["digest"] != fusion_digest.run(argparse.Namespace(cases=25, seed=2))["digest"]
    assert first["cases"] == 25
    assert first["items"] > 0
