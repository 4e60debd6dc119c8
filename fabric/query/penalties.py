"""Provider health and penalties: sliding-window failure rates, typed suspensions, half-open probes.

One :class:`ProviderPenalties` instance is owned by the executor (no module-global state, unlike searxng's
``SuspendedStatus`` dict). Per provider it keeps:

- a sliding window of the last ``window`` outcomes (ok / failure type / latency / retry flag);
- a circuit state: ``closed`` (normal), ``open`` (suspended until a time), ``half_open`` (one probe allowed);
- a back-off level that grows with each suspension and resets on success.

Typed failures and their base suspension (seconds; doubled per back-off level, capped at ``max_suspend_s``):

================  ========  ==============================================================
failure           base      suspends
================  ========  ==============================================================
``rate_limited``  10        at once; ``Retry-After`` (``LaneRejected.suspend_s``) wins
``forbidden``     60        at once
``unavailable``   base      when the window's failure rate ≥ ``failure_rate_suspend``
``timeout``       base      same
``bad_response``  base      same
``error``         base      same
================  ========  ==============================================================

While half-open exactly one probe runs, and it carries the lane's own timeout: if the probe has not been
reported by then it counts as a timeout, so a hung probe cannot leave a provider half-open forever.

The weight factor in (0, 1] down-weights a provider with a poor record in fusion. Retries share a per-provider
budget: at most ``retry_budget_ratio`` of recent requests (at least one), so retries cannot amplify an outage.
Time comes from an injected clock (seconds, monotonic), so tests need no sleeps.
"""

from __future__ import annotations

import enum
import statistics
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fabric.settings import PenaltyConfig

__all__ = ["FAILURE_SUSPEND_S", "IMMEDIATE", "Admission", "CircuitState", "ProviderHealth", "ProviderPenalties"]

FAILURE_SUSPEND_S: Mapping[str, float | None] = {
    "rate_limited": 10.0,
    "forbidden": 60.0,
    "unavailable": None,
    "timeout": None,
    "bad_response": None,
    "error": None,
}
"""Base suspension per typed failure; None uses ``PenaltyConfig.base_suspend_s``."""

IMMEDIATE = frozenset({"rate_limited", "forbidden"})
"""Failures that suspend at once rather than by failure rate."""

_MIN_WEIGHT = 0.1


class CircuitState(enum.StrEnum):
    """Provider circuit state."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class Admission:
    """Whether a call to a provider may go ahead now."""

    allowed: bool
    """True to call the provider."""
    probe: bool = False
    """True when this call is the half-open probe."""
    reason: str | None = None
    """Why the call is refused (suspension reason and time left)."""


@dataclass(slots=True)
class _Sample:
    ok: bool
    failure: str | None
    latency_ms: float
    retry: bool


@dataclass(slots=True)
class ProviderHealth:
    """Mutable health record of one provider (owned by :class:`ProviderPenalties`).

    ``failures``, ``timeouts`` and ``retried`` count what the bounded windows hold right now; they change with
    every sample pushed (and every sample the window drops), so read-outs that run for every lane of every query
    cost O(1) instead of a pass over the window.
    """

    window: deque[_Sample]
    state: CircuitState = CircuitState.CLOSED
    suspended_until: float = 0.0
    reason: str | None = None
    backoff_level: int = 0
    consecutive_failures: int = 0
    probe_deadline: float | None = None
    suspensions: int = 0
    retries: deque[bool] = field(default_factory=deque)
    failures: int = 0
    """Failed samples in ``window``."""
    timeouts: int = 0
    """Timed-out samples in ``window``."""
    retried: int = 0
    """True entries (granted retries) in ``retries``."""

    def push(self, sample: _Sample) -> None:
        """Append ``sample`` to the window, keeping the counts of what the window holds."""
        window = self.window
        if window.maxlen is not None and len(window) == window.maxlen:
            old = window[0]
            if not old.ok:
                self.failures -= 1
                self.timeouts -= old.failure == "timeout"
        window.append(sample)
        if not sample.ok:
            self.failures += 1
            self.timeouts += sample.failure == "timeout"

    def push_attempt(self, retry: bool) -> None:
        """Append one attempt to the retry window (``True``: a granted retry), keeping :attr:`retried`."""
        retries = self.retries
        if retries.maxlen is not None and len(retries) == retries.maxlen:
            self.retried -= retries[0]
        retries.append(retry)
        self.retried += retry


class ProviderPenalties:
    """Per-provider health, suspensions, weight factors and retry budgets.

    Args:
        config: the penalty policy.
        clock: seconds from a monotonic clock (injected for tests).
    """

    def __init__(self, config: PenaltyConfig | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config or PenaltyConfig()
        if self.config.window < 1:
            raise ValueError("penalties.window must be >= 1")
        self.clock = clock
        self._health: dict[str, ProviderHealth] = {}

    def _get(self, provider: str) -> ProviderHealth:
        health = self._health.get(provider)
        if health is None:
            health = ProviderHealth(window=deque(maxlen=self.config.window))
            health.retries = deque(maxlen=self.config.window)
            self._health[provider] = health
        return health

    # ------------------------------------------------------------------ admission

    def admit(self, provider: str, *, timeout_s: float) -> Admission:
        """Decide whether a call may start; a half-open provider admits one probe bounded by ``timeout_s``."""
        h = self._get(provider)
        now = self.clock()
        if h.state is CircuitState.HALF_OPEN and h.probe_deadline is not None and now >= h.probe_deadline:
            # The probe never reported back within its own timeout: count it as a timeout and re-open.
            h.probe_deadline = None
            self._fail(h, provider, "timeout", None, now)
        if h.state is CircuitState.OPEN:
            if now < h.suspended_until:
                return Admission(False, reason=f"suspended ({h.reason}) for {h.suspended_until - now:.1f} s more")
            h.state = CircuitState.HALF_OPEN
            h.probe_deadline = None
        if h.state is CircuitState.HALF_OPEN:
            if h.probe_deadline is not None:
                return Admission(False, reason=f"half-open probe in flight ({h.reason})")
            h.probe_deadline = now + max(timeout_s, 0.0)
            return Admission(True, probe=True)
        return Admission(True)

    def is_proven(self, provider: str) -> bool:
        """True when the provider's circuit is closed and its last recorded outcome was a success."""
        h = self._health.get(provider)
        return h is not None and h.state is CircuitState.CLOSED and bool(h.window) and h.window[-1].ok

    def suspension_reason(self, provider: str) -> str | None:
        """Why the provider is suspended and for how long, or None (does not change state, unlike admit)."""
        h = self._health.get(provider)
        now = self.clock()
        if h is None or h.state is not CircuitState.OPEN or now >= h.suspended_until:
            return None
        return f"suspended ({h.reason}) for {h.suspended_until - now:.1f} s more"

    def is_suspended(self, provider: str) -> bool:
        """True while the provider's circuit is open and its suspension has not run out."""
        h = self._health.get(provider)
        return h is not None and h.state is CircuitState.OPEN and self.clock() < h.suspended_until

    # ------------------------------------------------------------------ outcomes

    def record_success(self, provider: str, latency_ms: float, *, retry: bool = False) -> None:
        """Record a successful call: closes the circuit and resets the back-off."""
        h = self._get(provider)
        h.push(_Sample(True, None, latency_ms, retry))
        if not retry:
            h.push_attempt(False)
        h.state = CircuitState.CLOSED
        h.probe_deadline = None
        h.backoff_level = 0
        h.consecutive_failures = 0
        h.reason = None
        h.suspended_until = 0.0

    def record_failure(
        self,
        provider: str,
        failure: str,
        *,
        latency_ms: float = 0.0,
        suspend_s: float | None = None,
        retry: bool = False,
    ) -> None:
        """Record a typed failure; may suspend the provider (``suspend_s`` is a Retry-After to honour)."""
        h = self._get(provider)
        failure = failure if failure in FAILURE_SUSPEND_S else "error"
        h.push(_Sample(False, failure, latency_ms, retry))
        if not retry:
            h.push_attempt(False)
        self._fail(h, provider, failure, suspend_s, self.clock())

    def record_unjudged(self, provider: str) -> None:
        """A call ended without telling anything about the provider (it spent its time waiting in this process,
        :mod:`fabric.core.lanepool`): no sample is recorded, and a half-open probe is released so the next call
        probes."""
        h = self._health.get(provider)
        if h is not None and h.state is CircuitState.HALF_OPEN:
            h.probe_deadline = None

    def _fail(self, h: ProviderHealth, provider: str, failure: str, suspend_s: float | None, now: float) -> None:
        h.consecutive_failures += 1
        was_probe = h.state is CircuitState.HALF_OPEN
        h.probe_deadline = None
        rate, samples = self._failure_rate(h)
        trips = (
            was_probe
            or failure in IMMEDIATE
            or suspend_s is not None
            or (samples >= self.config.min_samples and rate >= self.config.failure_rate_suspend)
        )
        if not trips:
            return
        if h.state is CircuitState.OPEN and now < h.suspended_until:
            # Calls admitted before the suspension are still reporting in: one burst is one suspension, not a
            # back-off level per straggler. A longer Retry-After still extends it.
            if suspend_s is not None and suspend_s > 0:
                h.suspended_until = max(h.suspended_until, now + min(float(suspend_s), self.config.max_suspend_s))
            return
        base = FAILURE_SUSPEND_S.get(failure) or self.config.base_suspend_s
        duration = min(self.config.max_suspend_s, base * (2**h.backoff_level))
        if suspend_s is not None and suspend_s > 0:
            duration = max(duration, min(float(suspend_s), self.config.max_suspend_s))
        h.backoff_level += 1
        h.suspensions += 1
        h.state = CircuitState.OPEN
        h.suspended_until = now + duration
        h.reason = failure

    @staticmethod
    def _failure_rate(h: ProviderHealth) -> tuple[float, int]:
        n = len(h.window)
        if n == 0:
            return 0.0, 0
        return h.failures / n, n

    # ------------------------------------------------------------------ retry budget

    def try_acquire_retry(self, provider: str) -> bool:
        """Take one retry from the budget: ``retry_budget_ratio`` of recent attempts (at least 1) may be retries.

        A granted retry is remembered as an attempt; its outcome is then recorded with ``retry=True``.
        """
        h = self._get(provider)
        requests = max(len(h.retries), 1)
        allowed = max(1.0, self.config.retry_budget_ratio * requests)
        if h.retried + 1 > allowed:
            return False
        h.push_attempt(True)
        return True

    # ------------------------------------------------------------------ read-outs

    def weight(self, provider: str) -> float:
        """Fusion weight factor in (0, 1]: 1 for a clean record, down to 0.1 as failures accumulate."""
        h = self._health.get(provider)
        if h is None:
            return 1.0
        rate, samples = self._failure_rate(h)
        if samples < self.config.min_samples:
            return 1.0
        return max(_MIN_WEIGHT, 1.0 - rate)

    def latency_p50_ms(self, provider: str) -> float | None:
        """Median latency of recent successful calls, or None without samples."""
        h = self._health.get(provider)
        if h is None:
            return None
        lat = [s.latency_ms for s in h.window if s.ok]
        return statistics.median(lat) if lat else None

    def snapshot(self, provider: str) -> dict[str, Any]:
        """Health of one provider for results and metrics."""
        h = self._health.get(provider)
        if h is None:
            return {"state": CircuitState.CLOSED.value, "samples": 0, "failure_rate": 0.0, "penalty": 1.0}
        now = self.clock()
        samples = len(h.window)
        failures, timeouts = h.failures, h.timeouts  # kept by ProviderHealth.push: this runs per lane per query
        rate = failures / samples if samples else 0.0
        penalty = 1.0 if samples < self.config.min_samples else max(_MIN_WEIGHT, 1.0 - rate)
        state = h.state
        if state is CircuitState.OPEN and now >= h.suspended_until:
            state = CircuitState.HALF_OPEN
        return {
            "state": state.value,
            "samples": samples,
            "failure_rate": round(rate, 4),
            "timeout_rate": round(timeouts / samples, 4) if samples else 0.0,
            "penalty": round(penalty, 4),
            "reason": h.reason,
            "suspended_for_s": round(max(0.0, h.suspended_until - now), 3) if state is CircuitState.OPEN else 0.0,
            "backoff_level": h.backoff_level,
            "suspensions": h.suspensions,
        }
