"""The fault matrix benchmark on a small slice: real lanes behind the fault proxy, scored checks (no timing asserts)."""

from __future__ import annotations

import argparse

import pytest

import bench.faults as mod
from tests.support.settings import quiet_logs  # noqa: F401


def _args(kinds: str, faults: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    mod.add_arguments(parser)
    return parser.parse_args(["--kinds", kinds, "--faults", faults, "--budget-ms", "1500"])


class TestFaultMatrix:
    def test_rss_and_quotes_under_three_faults(self) -> None:
        """Each case is scored on every check; statuses, kept healthy hits, penalties and completeness hold for a
        5xx, a malformed body and invalid Unicode on the feeds and markets lanes (the budget check is a figure of
        the bench, not asserted here)."""
        figures = mod.run(_args("feeds/rss,markets/quotes", "status,malformed,bad_unicode"))
        assert figures["cases"] == 6
        assert set(figures["checks"]) == set(mod.CHECKS)
        for check in ("healthy_kept", "status", "penalty", "nothing_lost"):
            assert figures["checks"][check] == {"passed": 6, "failed": 0}, figures["failures"]
        assert all(c["passed"] + c["failed"] == 6 for c in figures["checks"].values())

    def test_server_stores_under_three_faults(self) -> None:
        """The Qdrant server lane and the ArangoDB graph lane behind the proxy: a 5xx and a reset are errors with a
        failure sample, a 429 suspends the provider for its Retry-After; the healthy lane keeps its hits."""
        figures = mod.run(_args("vector/qdrant,graph/arango", "status,reset,rate_limited"))
        assert figures["cases"] == 6
        for check in ("healthy_kept", "status", "penalty", "nothing_lost"):
            assert figures["checks"][check] == {"passed": 6, "failed": 0}, figures["failures"]

    def test_unknown_kind_is_refused(self) -> None:
        """A kind outside the matrix is a clear error naming the valid ones."""
        with pytest.raises(SystemExit, match="unknown kind"):
            mod.run(_args("vector/faiss", "hang"))


def test_public_api() -> None:
    """The module follows the bench protocol."""
    assert set(mod.__all__) == {"CHECKS", "KINDS", "add_arguments", "run"}
