"""The ``seed`` profile's request-side policies at the doors, over loopback (the real service app, aiohttp's test
server): an unknown mode runs with simple's budgets, ``all_time`` binds the last ten years, ``sources`` binds the
seed's ``site:`` domains; under the defaults the same body is a 400 and the bindings are the project's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from fabric.core.models import Hit, LaneRequest
from fabric.query.engine import Engine
from fabric.query.validation import parse_request
from fabric.serve.service import create_app
from fabric.settings import load_settings
from lanes.base import LaneResources
from lanes.fake import FakeLane

BODY = {"query": "rrf fusion", "mode": "quick", "lanes": ["keyword"], "route": "all"}


class Recording(FakeLane):
    """A fake keyword lane that remembers each request."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.requests: list[LaneRequest] = []

    async def search(self, request: LaneRequest) -> list[Hit]:
        self.requests.append(request)
        return await super().search(request)


@asynccontextmanager
async def served(home: Path, profile: str | None) -> AsyncIterator[tuple[str, Recording]]:
    """The service app over ``profile`` on loopback; yields its base URL and the keyword lane."""
    settings = load_settings(profile=profile, env={"FABRIC_HOME": str(home)})
    lane = Recording(name="keyword", hits=3)
    engine = Engine(settings, lanes={"keyword": lane}, resources=LaneResources(home=home))
    async with TestServer(create_app(engine), host="127.0.0.1") as server:
        yield str(server.make_url("")), lane


async def post(base: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.post(base + "/v1/search", json=body) as resp:
        return resp.status, await resp.json()


async def test_unknown_mode_runs_as_simple(tmp_path: Path) -> None:
    """Seed 003's calculate_lane_budgets: a mode it has no budgets for gets simple's (5 s, keyword 500 ms)."""
    async with served(tmp_path, "seed") as (base, lane):
        status, body = await post(base, BODY)
    assert status == 200, body
    assert body["mode"] == "simple"
    assert len(lane.requests) == 1


async def test_unknown_mode_is_refused_by_default(tmp_path: Path) -> None:
    """Without the profile the mode is checked against the vocabulary: a 400 naming the field."""
    async with served(tmp_path, None) as (base, lane):
        status, body = await post(base, BODY)
    assert status == 400
    assert body["error"]["field"] == "mode"
    assert lane.requests == []


async def test_all_time_is_ten_years_and_sources_are_sites(tmp_path: Path) -> None:
    """Seed 003's get_date_from (365 × 10 days) and its site: modifiers reach the lane as the bound constraints."""
    body = {**BODY, "mode": "simple", "constraints": {"time_range": "all_time", "sources": "academic"}}
    async with served(tmp_path, "seed") as (base, lane):
        status, _ = await post(base, body)
    assert status == 200
    (req,) = lane.requests
    c = req.constraints
    assert c.date_to is not None
    assert c.date_to - c.date_from == timedelta(days=3650)  # type: ignore[operator]
    assert c.source_filter is not None
    assert (c.source_filter.domains, c.source_filter.kinds) == (("edu", "ac.uk", "scholar.google.com"), ())


async def test_defaults_bind_no_date_and_the_project_filter(tmp_path: Path) -> None:
    """Under the defaults all_time has no bound and academic keeps imported corpora too."""
    body = {**BODY, "mode": "simple", "constraints": {"time_range": "all_time", "sources": "academic"}}
    async with served(tmp_path, None) as (base, lane):
        status, _ = await post(base, body)
    assert status == 200
    (req,) = lane.requests
    assert (req.constraints.date_from, req.constraints.date_to) == (None, None)
    assert req.constraints.source_filter is not None
    assert req.constraints.source_filter.kinds


def test_cli_and_python_doors_fall_back_too(tmp_path: Path) -> None:
    """parse_request (``fabric search``, ``fabric.open(...).search``) applies the same fallback."""
    settings = load_settings(profile="seed", env={"FABRIC_HOME": str(tmp_path)})
    assert parse_request({"query": "x", "mode": "quick"}, settings).mode.value == "simple"
    assert parse_request({"query": "x", "mode": "research"}, settings).mode.value == "research"
