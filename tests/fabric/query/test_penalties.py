"""Tests for provider penalties: typed suspensions, Retry-After, half-open probes, weights, retry budget."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabric.query.penalties import ProviderPenalties
from fabric.settings import PenaltyConfig


class Clock:
    """A manual clock."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def pen(clock: Clock) -> ProviderPenalties:
    return ProviderPenalties(
        PenaltyConfig(window=10, min_samples=4, base_suspend_s=5.0, max_suspend_s=60.0), clock=clock
    )


class TestSuspension:
    def test_fresh_provider_admitted(self, pen: ProviderPenalties) -> None:
        """An unknown provider is admitted with full weight."""
        assert pen.admit("p", timeout_s=1.0).allowed
        assert pen.weight("p") == 1.0

    def test_rate_limited_suspends_at_once(self, pen: ProviderPenalties) -> None:
        """A single 429 suspends the provider."""
        pen.record_failure("p", "rate_limited")
        assert not pen.admit("p", timeout_s=1.0).allowed

    def test_retry_after_honoured(self, pen: ProviderPenalties, clock: Clock) -> None:
        """Retry-After longer than the base suspension is honoured."""
        pen.record_failure("p", "rate_limited", suspend_s=40.0)
        clock.t += 39.0
        assert not pen.admit("p", timeout_s=1.0).allowed
        clock.t += 2.0
        assert pen.admit("p", timeout_s=1.0).probe

    def test_forbidden_suspends_longer_than_unavailable(self, pen: ProviderPenalties) -> None:
        """Each typed failure has its own suspension time."""
        pen.record_failure("f", "forbidden")
        for _ in range(4):
            pen.record_failure("u", "unavailable")
        assert pen.snapshot("f")["suspended_for_s"] > pen.snapshot("u")["suspended_for_s"] > 0

    def test_timeouts_suspend_by_failure_rate(self, pen: ProviderPenalties) -> None:
        """Timeouts suspend only once the window's failure rate crosses the threshold."""
        for _ in range(3):
            pen.record_failure("p", "timeout")
        assert pen.admit("p", timeout_s=1.0).allowed
        pen.record_failure("p", "timeout")
        assert not pen.admit("p", timeout_s=1.0).allowed

    def test_burst_of_failures_is_one_suspension(self, pen: ProviderPenalties) -> None:
        """Stragglers failing while already suspended do not escalate the back-off."""
        for _ in range(20):
            pen.record_failure("p", "unavailable")
        snap = pen.snapshot("p")
        assert snap["backoff_level"] == 1
        assert snap["suspended_for_s"] == pytest.approx(5.0)

    def test_retry_after_extends_running_suspension(self, pen: ProviderPenalties) -> None:
        """A longer Retry-After during a suspension extends it."""
        pen.record_failure("p", "rate_limited")
        pen.record_failure("p", "rate_limited", suspend_s=50.0)
        assert pen.snapshot("p")["suspended_for_s"] == pytest.approx(50.0)

    def test_suspension_reason_does_not_change_state(self, pen: ProviderPenalties, clock: Clock) -> None:
        """Reading the suspension reason never consumes the half-open probe."""
        pen.record_failure("p", "rate_limited")
        assert "rate_limited" in (pen.suspension_reason("p") or "")
        clock.t += 11.0
        assert pen.suspension_reason("p") is None
        assert pen.admit("p", timeout_s=1.0).probe

    def test_healthy_mix_not_suspended(self, pen: ProviderPenalties) -> None:
        """One failure among many successes does not suspend."""
        for _ in range(6):
            pen.record_success("p", 5.0)
        pen.record_failure("p", "timeout")
        assert pen.admit("p", timeout_s=1.0).allowed


class TestHalfOpen:
    def _suspend(self, pen: ProviderPenalties, clock: Clock) -> None:
        pen.record_failure("p", "rate_limited")
        clock.t += 11.0

    def test_one_probe_at_a_time(self, pen: ProviderPenalties, clock: Clock) -> None:
        """After the back-off exactly one probe is admitted."""
        self._suspend(pen, clock)
        assert pen.admit("p", timeout_s=1.0).probe
        second = pen.admit("p", timeout_s=1.0)
        assert not second.allowed
        assert "probe" in (second.reason or "")

    def test_probe_success_resets(self, pen: ProviderPenalties, clock: Clock) -> None:
        """A successful probe closes the circuit and resets the back-off."""
        self._suspend(pen, clock)
        pen.admit("p", timeout_s=1.0)
        pen.record_success("p", 3.0)
        snap = pen.snapshot("p")
        assert snap["state"] == "closed"
        assert snap["backoff_level"] == 0
        assert pen.admit("p", timeout_s=1.0).allowed

    def test_probe_failure_grows_backoff(self, pen: ProviderPenalties, clock: Clock) -> None:
        """A failed probe suspends again for twice as long."""
        self._suspend(pen, clock)
        pen.admit("p", timeout_s=1.0)
        pen.record_failure("p", "rate_limited")
        assert pen.snapshot("p")["suspended_for_s"] == pytest.approx(20.0)

    def test_hung_probe_expires_at_its_timeout(self, pen: ProviderPenalties, clock: Clock) -> None:
        """A probe never reported back counts as a timeout after the lane's own timeout."""
        self._suspend(pen, clock)
        assert pen.admit("p", timeout_s=2.0).probe
        clock.t += 1.0
        assert not pen.admit("p", timeout_s=2.0).allowed
        clock.t += 1.5
        assert not pen.admit("p", timeout_s=2.0).allowed
        assert pen.snapshot("p")["state"] == "open"
        assert pen.snapshot("p")["backoff_level"] == 2
        clock.t += 25.0
        assert pen.admit("p", timeout_s=2.0).probe


class TestWeightsAndRetries:
    def test_weight_drops_with_failures(self, pen: ProviderPenalties) -> None:
        """A poor record lowers the fusion weight, bounded away from zero."""
        for _ in range(4):
            pen.record_success("p", 1.0)
        for _ in range(2):
            pen.record_failure("p", "bad_response")
        assert 0.1 <= pen.weight("p") < 1.0

    def test_retry_budget_is_a_fraction_of_requests(self, clock: Clock) -> None:
        """Retries are limited to a share of recent requests (at least one)."""
        pen = ProviderPenalties(PenaltyConfig(window=20, retry_budget_ratio=0.1), clock=clock)
        for _ in range(20):
            pen.record_success("p", 1.0)
        assert pen.try_acquire_retry("p")
        assert pen.try_acquire_retry("p")
        assert not pen.try_acquire_retry("p")

    def test_latency_p50(self, pen: ProviderPenalties) -> None:
        """The median latency of successful calls is reported."""
        for ms in (1.0, 2.0, 30.0):
            pen.record_success("p", ms)
        assert pen.latency_p50_ms("p") == 2.0

    def test_snapshot_shape(self, pen: ProviderPenalties) -> None:
        """The health snapshot has the fields results and metrics show."""
        pen.record_failure("p", "timeout")
        snap = pen.snapshot("p")
        assert {"state", "failure_rate", "timeout_rate", "penalty", "suspended_for_s"} <= set(snap)
        assert snap["timeout_rate"] == 1.0


class TestWindowCounts:
    @given(
        events=st.lists(
            st.sampled_from(["ok", "timeout", "unavailable", "bad_response", "retry_ok", "retry_fail", "acquire"]),
            max_size=60,
        )
    )
    def test_counts_match_a_recount_of_the_windows(self, events: list[str]) -> None:
        """The O(1) counts behind snapshot, weights and the retry budget equal a recount of the bounded windows."""
        pen = ProviderPenalties(PenaltyConfig(window=5, min_samples=2, retry_budget_ratio=0.5), clock=Clock())
        for event in events:
            if event == "ok":
                pen.record_success("p", 1.0)
            elif event == "retry_ok":
                pen.record_success("p", 1.0, retry=True)
            elif event == "retry_fail":
                pen.record_failure("p", "unavailable", retry=True)
            elif event == "acquire":
                pen.try_acquire_retry("p")
            else:
                pen.record_failure("p", event)
        h = pen._health.get("p")
        if h is None:
            assert pen.snapshot("p")["samples"] == 0
            return
        failures = [s for s in h.window if not s.ok]
        assert h.failures == len(failures)
        assert h.timeouts == sum(s.failure == "timeout" for s in failures)
        assert h.retried == sum(h.retries)
        snap = pen.snapshot("p")
        n = max(1, len(h.window))
        assert snap["samples"] == len(h.window)
        assert snap["failure_rate"] == round(len(failures) / n, 4)
        assert snap["timeout_rate"] == round(h.timeouts / n, 4)


class TestUnjudged:
    def test_releases_a_half_open_probe_without_a_sample(self) -> None:
        """A probe that only waited in this process frees the probe slot and records nothing."""
        now = [0.0]
        p = ProviderPenalties(PenaltyConfig(min_samples=1, base_suspend_s=1.0), clock=lambda: now[0])
        p.record_failure("s", "timeout")
        now[0] = 2.0
        assert p.admit("s", timeout_s=1.0).probe
        assert not p.admit("s", timeout_s=1.0).allowed  # one probe at a time
        p.record_unjudged("s")
        assert p.admit("s", timeout_s=1.0).probe
        assert p.snapshot("s")["samples"] == 1

    def test_unknown_provider_is_a_no_op(self) -> None:
        """Nothing is created for a provider never seen."""
        p = ProviderPenalties()
        p.record_unjudged("nobody")
        assert p.snapshot("nobody")["samples"] == 0
