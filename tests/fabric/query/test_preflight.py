"""Tests for the pre-flight lane: rule-based refinement, chat endpoint over loopback, bypass reasons."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from fabric.net.httpclient import allowlist_from_lanes, create_session
from fabric.query.preflight import LoopLagMonitor, Preflight, refine_rules
from fabric.settings import PreflightConfig
from tests.support.http import recording, redirector, serve
from tests.support.settings import quiet_logs  # noqa: F401

YEAR = 2026


def run_kw(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "current_year": YEAR,
        "budget_ms": 500.0,
        "lane_budgets_ms": {"keyword": 750.0},
        "time_left_ms": 7000.0,
    }
    base.update(kw)
    return base


class TestRules:
    def test_normalises_whitespace(self) -> None:
        """Whitespace collapses."""
        assert refine_rules("  deep   learning\tmodels ", current_year=YEAR).query == "deep learning models"

    def test_keeps_case(self) -> None:
        """Case is kept: the graph lane finds entities (``Ford``, ``MEDLARS``) by their capitals."""
        assert refine_rules("Is MEDLARS used by Ford?", current_year=YEAR).query == "Is MEDLARS used by Ford?"

    def test_capitalised_temporal_words_classify(self) -> None:
        """Intent words are matched without regard to case."""
        assert refine_rules("LATEST results", current_year=YEAR).intent == "temporal"

    @pytest.mark.parametrize(
        ("query", "years"),
        [
            ("vaccines 2019-2021", (2019, 2021)),
            ("vaccines 2019 to 2021", (2019, 2021)),
            ("vaccines between 2015 and 2012", (2012, 2015)),
            ("vaccines since 2020", (2020, YEAR)),
            ("vaccines after 2020", (2021, YEAR)),
            ("vaccines in 2018", (2018, 2018)),
            ("vaccines before 2000", (1800, 1999)),
            ("vaccines", None),
        ],
    )
    def test_years_extracted(self, query: str, years: tuple[int, int] | None) -> None:
        """Year ranges and temporal prepositions become a year range."""
        assert refine_rules(query, current_year=YEAR).years == years

    def test_quoted_phrases_extracted(self) -> None:
        """Quoted phrases are extracted and quotes removed from the text."""
        r = refine_rules('the "Gene Expression" of “T cells”', current_year=YEAR)
        assert r.phrases == ("gene expression", "t cells")
        assert '"' not in r.query

    def test_site_operator_extracted_and_removed(self) -> None:
        """site: operators become sites and leave the query text."""
        r = refine_rules("rust async site:docs.rs site:www.github.com", current_year=YEAR)
        assert r.sites == ("docs.rs", "github.com")
        assert r.query == "rust async"

    def test_negated_site_is_not_a_restriction(self) -> None:
        """-site: excludes a domain: it leaves the text and is not added to sites."""
        r = refine_rules("recipes -site:pinterest.com site:bbc.co.uk", current_year=YEAR)
        assert r.sites == ("bbc.co.uk",)
        assert r.query == "recipes"

    @pytest.mark.parametrize(
        ("query", "intent"),
        [
            ("latest covid news", "temporal"),
            ("relationship between smoking and cancer", "relational"),
            ("what is dna", "factual"),
        ],
    )
    def test_intent_classified(self, query: str, intent: str) -> None:
        """Intent is temporal, relational or factual."""
        assert refine_rules(query, current_year=YEAR).intent == intent


class TestBypass:
    async def test_rules_refinement_runs_by_default(self) -> None:
        """With rules only, pre-flight refines and is not bypassed."""
        r = await Preflight(PreflightConfig()).run("Vaccines  SINCE 2020", **run_kw())
        assert not r.bypassed
        assert r.refined_query == "Vaccines SINCE 2020"
        assert r.years == (2020, YEAR)

    async def test_disabled_in_config(self) -> None:
        """preflight.enabled = false bypasses with reason disabled."""
        r = await Preflight(PreflightConfig(enabled=False)).run("Q", **run_kw())
        assert r.bypassed
        assert r.reason == "disabled"
        assert r.refined_query == "Q"

    async def test_disabled_by_request(self) -> None:
        """A request may opt out."""
        r = await Preflight(PreflightConfig()).run("Q", **run_kw(enabled=False))
        assert r.reason == "disabled"

    async def test_inflight_pressure(self) -> None:
        """More queries in flight than max_inflight bypasses."""
        r = await Preflight(PreflightConfig(max_inflight=4)).run("q", **run_kw(inflight=5))
        assert r.bypassed
        assert (r.reason or "").startswith("pressure")
        assert "in flight" in (r.reason or "")

    async def test_loop_lag_pressure(self) -> None:
        """Event-loop lag above the limit bypasses."""
        r = await Preflight(PreflightConfig(max_loop_lag_ms=50)).run("q", **run_kw(loop_lag_ms=80.0))
        assert r.bypassed
        assert "loop lag" in (r.reason or "")

    async def test_lane_budget_share(self) -> None:
        """A lane that would keep under 25 % of its budget bypasses pre-flight."""
        r = await Preflight(PreflightConfig()).run("q", **run_kw(time_left_ms=150.0, lane_budgets_ms={"kw": 750.0}))
        assert r.bypassed
        assert (r.reason or "").startswith("lane_budget")
        assert "'kw'" in (r.reason or "")

    async def test_rules_cost_little_of_the_lane_budget(self) -> None:
        """Rules-only pre-flight still runs when the lanes keep most of their budget."""
        r = await Preflight(PreflightConfig()).run("q", **run_kw(time_left_ms=600.0, lane_budgets_ms={"kw": 750.0}))
        assert not r.bypassed

    async def test_chat_preflight_counts_its_whole_budget(self) -> None:
        """With a chat endpoint the whole pre-flight budget is charged against the lanes."""
        cfg = PreflightConfig(chat_url="http://127.0.0.1:9/v1")
        r = await Preflight(cfg).run("q", **run_kw(time_left_ms=600.0, lane_budgets_ms={"kw": 750.0}))
        assert (r.reason or "").startswith("lane_budget")

    async def test_model_unavailable_without_session(self) -> None:
        """A chat endpoint without an HTTP session is unavailable."""
        r = await Preflight(PreflightConfig(chat_url="http://127.0.0.1:9/v1")).run("q", **run_kw())
        assert r.bypassed
        assert (r.reason or "").startswith("model_unavailable")


@pytest.fixture
async def chat_server() -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """A loopback OpenAI-compatible chat endpoint whose behaviour the test sets."""
    state: dict[str, Any] = {"reply": "refined query", "delay": 0.0, "status": 200, "calls": 0, "body": None}

    async def completions(request: web.Request) -> web.Response:
        state["calls"] += 1
        state["body"] = await request.json()
        if state["delay"]:
            await asyncio.sleep(state["delay"])
        if state["status"] != 200:
            return web.json_response({"error": "down"}, status=state["status"])
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": state["reply"]}}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}/v1", state
    await runner.cleanup()


class TestChatEndpoint:
    async def test_chat_refines_query(self, chat_server: tuple[str, dict[str, Any]]) -> None:
        """The chat endpoint's answer becomes the refined query; rules still extract years."""
        url, state = chat_server
        state["reply"] = '"covid vaccine efficacy"'
        async with aiohttp.ClientSession() as http:
            pf = Preflight(PreflightConfig(chat_url=url, chat_model="m"), http=http)
            r = await pf.run("How well do COVID vaccines work since 2021?", **run_kw())
        assert not r.bypassed
        assert r.refined_query == "covid vaccine efficacy"
        assert r.years == (2021, YEAR)
        assert state["body"]["model"] == "m"
        assert state["body"]["messages"][-1]["role"] == "user"

    async def test_chat_answer_is_cleaned(self, chat_server: tuple[str, dict[str, Any]]) -> None:
        """The model's answer is untrusted text: lone surrogates repaired, controls removed, length capped."""
        url, state = chat_server
        state["reply"] = "bad \ud800 query\x00\u202e" + "x" * 1000
        async with aiohttp.ClientSession() as http:
            r = await Preflight(PreflightConfig(chat_url=url), http=http).run("q", **run_kw())
        assert r.refined_query.startswith("bad \ufffd query")
        assert len(r.refined_query) == 500
        r.refined_query.encode("utf-8")

    async def test_chat_over_budget_bypasses(self, chat_server: tuple[str, dict[str, Any]]) -> None:
        """A chat endpoint slower than the budget bypasses with budget_exceeded."""
        url, state = chat_server
        state["delay"] = 0.3
        async with aiohttp.ClientSession() as http:
            r = await Preflight(PreflightConfig(chat_url=url), http=http).run("q", **run_kw(budget_ms=30.0))
        assert r.bypassed
        assert (r.reason or "").startswith("budget_exceeded")
        assert r.refined_query == "q"

    async def test_chat_failure_marks_model_unavailable(self, chat_server: tuple[str, dict[str, Any]]) -> None:
        """A failing endpoint bypasses, and later queries bypass without calling it again."""
        url, state = chat_server
        state["status"] = 503
        async with aiohttp.ClientSession() as http:
            pf = Preflight(PreflightConfig(chat_url=url), http=http, clock=lambda: 100.0)
            first = await pf.run("q", **run_kw())
            second = await pf.run("q", **run_kw())
        assert first.bypassed
        assert (first.reason or "").startswith("model_unavailable")
        assert second.bypassed
        assert state["calls"] == 1

    async def test_chat_bad_payload_is_unavailable(self, chat_server: tuple[str, dict[str, Any]]) -> None:
        """An empty answer counts as model unavailable."""
        url, state = chat_server
        state["reply"] = "   "
        async with aiohttp.ClientSession() as http:
            r = await Preflight(PreflightConfig(chat_url=url), http=http).run("q", **run_kw())
        assert r.bypassed
        assert (r.reason or "").startswith("model_unavailable")


class TestLoopLag:
    async def test_monitor_measures_and_stops(self) -> None:
        """The monitor samples lag and stops cleanly."""
        mon = LoopLagMonitor(interval_s=0.001)
        mon.start()
        await asyncio.sleep(0.01)
        await mon.stop()
        assert mon.lag_ms >= 0.0


class TestChatEndpointRedirects:
    """The chat endpoint is called through the guarded client: its redirects cannot carry the query elsewhere."""

    @pytest.mark.parametrize("status", [302, 303, 307, 308])
    @pytest.mark.parametrize("where", ["other_port", "metadata"])
    async def test_redirect_elsewhere_never_reaches_target(self, status: int, where: str) -> None:
        """A 30x from the chat endpoint to another port or the metadata address is refused; nothing arrives."""
        async with recording() as (target, received):
            location = {
                "other_port": f"http://127.0.0.1:{target.port}/v1/chat/completions",
                "metadata": "http://169.254.169.254/latest/meta-data/",
            }[where]
            async with serve(redirector(location)) as origin:
                chat_url = f"http://127.0.0.1:{origin.port}/r/{status}"
                http = create_session(allowlist_from_lanes([], extra_urls=[chat_url]))
                try:
                    r = await Preflight(PreflightConfig(chat_url=chat_url), http=http).run("secret q", **run_kw())
                finally:
                    await http.close()
        assert received == []
        assert r.bypassed
        assert (r.reason or "").startswith("model_unavailable")
