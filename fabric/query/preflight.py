"""Pre-flight lane (the fusion policy): refine the query within 500 ms, or step aside and say why.

Rule-based refinement is the default and costs microseconds: normalise whitespace (case is kept), pull out
quoted phrases, ``site:`` operators and years (``2019-2021``, ``between 2019 and 2021``, ``since 2020``,
``after 2015``, ``before 2015``, ``in 2018``), and classify the intent as ``temporal``, ``relational`` or
``factual``. Extractions become structured constraints (see :mod:`fabric.query.constraints`), soft ones: years a
lane applies only to dated items with a deep fill, phrases a lane ranks higher but never requires (only an
explicit ``site:`` operator is a hard filter). The query text keeps its words (quotes and ``site:`` operators
removed), so lanes that cannot filter still see the terms.

Optionally an OpenAI-compatible chat endpoint (``preflight.chat_url``, e.g. ``http://127.0.0.1:8000/v1``,
``POST {chat_url}/chat/completions``) rewrites the query text, through the app's shared guarded session and
:func:`fabric.net.httpclient.fetch` (never aiohttp's own redirect following: every hop is checked against the
allow-list, and the query is never re-posted to another origin).

Bypass rules (refinement skipped, the query used as given, the reason recorded in the result):

- ``disabled``: ``preflight.enabled = false`` or the request opted out;
- ``pressure``: more queries in flight than ``max_inflight``, or measured event-loop lag above
  ``max_loop_lag_ms`` (sampled by :class:`LoopLagMonitor`);
- ``lane_budget``: after pre-flight (its whole budget when the chat endpoint is used, 1 ms for rules) some
  planned lane would have less than ``min_lane_budget_share`` (25 %) of its budget left before the deadline;
- ``model_unavailable``: the chat endpoint is configured but unreachable or failed recently;
- ``budget_exceeded``: the chat call did not finish within the pre-flight budget.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from fabric.core.cancel import cancel_and_wait
from fabric.core.errors import LaneError, LaneTimeout
from fabric.core.logs import get_logger
from fabric.core.models import PreflightResult
from fabric.net.httpclient import fetch
from fabric.query.sanitize import clean_line
from fabric.settings import PreflightConfig

__all__ = ["LoopLagMonitor", "Preflight", "RuleRefinement", "refine_rules"]

log = get_logger(__name__)

_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”')
_SITE = re.compile(r"(?<!\S)(-?)site:([A-Za-z0-9.-]+\.[A-Za-z]{2,}|[A-Za-z]{2,})(?!\S)", re.IGNORECASE)
_Y = r"(1[89]\d\d|20\d\d|21\d\d)"
_RANGE = re.compile(rf"\b(?:between\s+{_Y}\s+and\s+{_Y}|(?:from\s+)?{_Y}\s*(?:-|–|—|to|until)\s*{_Y})\b", re.I)
_SINCE = re.compile(rf"\b(since|after|from|before|in|during)\s+{_Y}\b", re.IGNORECASE)
_TEMPORAL_WORDS = frozenset(
    [
        "latest",
        "recent",
        "recently",
        "when",
        "history",
        "timeline",
        "trend",
        "trends",
        "today",
        "current",
        "now",
        "new",
        "newest",
        "year",
        "years",
    ]
)
_RELATIONAL_WORDS = frozenset(
    [
        "relationship",
        "relation",
        "related",
        "relate",
        "between",
        "connect",
        "connected",
        "versus",
        "vs",
        "compare",
        "comparison",
        "link",
        "linked",
        "affect",
        "affects",
        "cause",
        "causes",
        "interact",
        "interaction",
        "associated",
        "association",
    ]
)
_MODEL_RETRY_S = 30.0
_RULES_COST_MS = 1.0


@dataclass(frozen=True, slots=True)
class RuleRefinement:
    """What the rules extracted from a query."""

    query: str
    years: tuple[int, int] | None
    sites: tuple[str, ...]
    phrases: tuple[str, ...]
    intent: str


def _years(text: str, current_year: int) -> tuple[int, int] | None:
    m = _RANGE.search(text)
    if m:
        nums = [int(g) for g in m.groups() if g]
        return min(nums), max(nums)
    m = _SINCE.search(text)
    if not m:
        return None
    word, year = m.group(1).lower(), int(m.group(2))
    if word in ("since", "from"):
        return year, max(year, current_year)
    if word == "after":
        return year + 1, max(year + 1, current_year)
    if word == "before":
        return 1800, year - 1
    return year, year


def refine_rules(query: str, *, current_year: int) -> RuleRefinement:
    """Normalise ``query`` and extract years, ``site:`` domains, quoted phrases and an intent class."""
    phrases = tuple(" ".join((a or b).split()).lower() for a, b in _QUOTED.findall(query) if (a or b).strip())
    # ``-site:x`` (exclusion) is removed from the text but is not a site to restrict to.
    sites = tuple(dict.fromkeys(d.lower().removeprefix("www.") for neg, d in _SITE.findall(query) if not neg))
    text = _SITE.sub(" ", query)
    text = text.replace('"', " ").replace("“", " ").replace("”", " ")
    # Case is kept: the FTS5 and MiniLM lanes fold it themselves, the graph lane finds entities by capitals.
    text = " ".join(text.split())
    years = _years(text, current_year)
    words = set(re.findall(r"[a-z]+", text.lower()))
    if years is not None or words & _TEMPORAL_WORDS:
        intent = "temporal"
    elif words & _RELATIONAL_WORDS:
        intent = "relational"
    else:
        intent = "factual"
    return RuleRefinement(
        query=text or " ".join(query.split()), years=years, sites=sites, phrases=phrases, intent=intent
    )


class LoopLagMonitor:
    """Samples event-loop lag: how late a periodic ``sleep(interval)`` wakes up."""

    def __init__(self, interval_s: float = 0.1) -> None:
        self.interval_s = interval_s
        self.lag_ms = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start sampling on the running loop (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t0 = loop.time()
            await asyncio.sleep(self.interval_s)
            self.lag_ms = max(0.0, (loop.time() - t0 - self.interval_s) * 1000.0)

    async def stop(self) -> None:
        """Stop sampling."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)


class Preflight:
    """The pre-flight lane.

    Args:
        config: pre-flight settings.
        http: the app's shared aiohttp session (needed only for the chat endpoint).
        clock: monotonic seconds (injected for tests).
    """

    def __init__(
        self,
        config: PreflightConfig,
        *,
        http: aiohttp.ClientSession | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.http = http
        self.clock = clock
        self._model_down_until = 0.0
        self._model_error = ""

    def _bypass(self, query: str, reason: str, t0: float) -> PreflightResult:
        return PreflightResult(
            bypassed=True, reason=reason, refined_query=query, latency_ms=(time.perf_counter() - t0) * 1000.0
        )

    async def run(
        self,
        query: str,
        *,
        current_year: int,
        budget_ms: float,
        lane_budgets_ms: Mapping[str, float],
        time_left_ms: float,
        inflight: int = 0,
        loop_lag_ms: float = 0.0,
        enabled: bool = True,
    ) -> PreflightResult:
        """Refine ``query`` or bypass with a recorded reason (see the module docstring)."""
        t0 = time.perf_counter()
        cfg = self.config
        budget_ms = min(budget_ms, cfg.budget_ms)
        if not (cfg.enabled and enabled):
            return self._bypass(query, "disabled", t0)
        if inflight > cfg.max_inflight:
            return self._bypass(query, f"pressure: {inflight} queries in flight > max_inflight {cfg.max_inflight}", t0)
        if loop_lag_ms > cfg.max_loop_lag_ms:
            return self._bypass(
                query, f"pressure: event-loop lag {loop_lag_ms:.1f} ms > max_loop_lag_ms {cfg.max_loop_lag_ms:g}", t0
            )
        # What pre-flight will cost the lanes: its whole budget when a model is called, ~nothing for rules.
        cost_ms = budget_ms if cfg.chat_url else min(budget_ms, _RULES_COST_MS)
        left_after = time_left_ms - cost_ms
        for lane, lane_budget in sorted(lane_budgets_ms.items()):
            if lane_budget > 0 and left_after < cfg.min_lane_budget_share * lane_budget:
                share = max(0.0, left_after) / lane_budget
                return self._bypass(query, f"lane_budget: lane {lane!r} would keep {share:.0%} of its budget", t0)
        if cfg.chat_url:
            if self.http is None:
                return self._bypass(query, "model_unavailable: no HTTP session", t0)
            if self.clock() < self._model_down_until:
                return self._bypass(query, f"model_unavailable: {self._model_error}", t0)
        rules = refine_rules(query, current_year=current_year)
        refined = rules.query
        if cfg.chat_url:
            try:
                async with asyncio.timeout(budget_ms / 1000.0):
                    refined = await self._chat(rules.query, budget_ms / 1000.0)
            except (TimeoutError, LaneTimeout):
                return self._bypass(query, f"budget_exceeded: chat endpoint slower than {budget_ms:g} ms", t0)
            except (LaneError, ValueError) as exc:
                self._model_error = f"{type(exc).__name__}: {exc}"[:200]
                self._model_down_until = self.clock() + _MODEL_RETRY_S
                log.warning("preflight_model_unavailable", error=self._model_error)
                return self._bypass(query, f"model_unavailable: {self._model_error}", t0)
        return PreflightResult(
            bypassed=False,
            refined_query=refined,
            latency_ms=(time.perf_counter() - t0) * 1000.0,
            years=rules.years,
            sites=rules.sites,
            phrases=rules.phrases,
            intent=rules.intent,
        )

    async def _chat(self, query: str, timeout_s: float) -> str:
        """Ask the chat endpoint for a refined search query (one line).

        Raises:
            LaneError: the endpoint failed, refused, redirected somewhere not allowed or answered non-JSON.
            ValueError: the answer has no usable content.
        """
        payload: dict[str, Any] = {
            "model": self.config.chat_model or "default",
            "temperature": 0,
            "max_tokens": 64,
            "messages": [
                {
                    "role": "system",
                    "content": "Rewrite the user's question as one concise search query. Reply with the query only.",
                },
                {"role": "user", "content": query},
            ],
        }
        url = self.config.chat_url.rstrip("/") + "/chat/completions"
        resp = await fetch(self.http, "POST", url, json_body=payload, timeout_s=timeout_s, provider="preflight")
        data = resp.json(provider="preflight")
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise ValueError("chat endpoint answered without choices[0].message.content") from None
        text = clean_line(" ".join(str(content).split()), 500).strip("\"' ")  # a model's words are untrusted text
        if not text:
            raise ValueError("chat endpoint answered an empty query")
        return text
