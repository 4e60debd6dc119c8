"""The pre-flight chat endpoint under the fault proxy: the query proceeds unrefined, the endpoint is penalised."""

from __future__ import annotations

import pytest

import bench.faults_preflight as mod
from tests.support.settings import quiet_logs  # noqa: F401
from tools.faultproxy import Fault


class TestPreflightCase:
    @pytest.mark.parametrize("fault", [Fault.HANG, Fault.STATUS, Fault.RATE_LIMITED, Fault.MALFORMED])
    async def test_failures_bypass_with_the_query_as_given(self, fault: Fault) -> None:
        """A hung or failing chat endpoint: bypassed (budget_exceeded / model_unavailable), the healthy lane runs
        the query as given; after a failure the endpoint is left alone 29 s on, after a hang it is asked again
        (the budget check is a figure of the bench, not asserted here)."""
        case = await mod.preflight_case(
            fault, 1500.0, 25.0, {"retry_after_s": 30} if fault is Fault.RATE_LIMITED else {}
        )
        assert case["kind"] == mod.KIND
        assert case["status"] == "bypassed"
        reason = "budget_exceeded" if fault is Fault.HANG else "model_unavailable"
        assert case["error"].startswith(reason)
        for check in ("healthy_kept", "status", "penalty", "nothing_lost"):
            assert case["checks"][check], case

    async def test_bad_unicode_is_refined_and_repaired(self) -> None:
        """A chat answer with a lone surrogate still refines the query, its text repaired."""
        case = await mod.preflight_case(Fault.BAD_UNICODE, 1500.0, 25.0, {})
        assert case["status"] == "refined"
        assert all(case["checks"][c] for c in ("healthy_kept", "status", "penalty", "nothing_lost")), case


def test_public_api() -> None:
    """The module exposes the kind and the case runner."""
    assert set(mod.__all__) == {"KIND", "preflight_case"}
