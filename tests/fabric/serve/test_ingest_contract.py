"""The ``POST /v1/ingest`` contract: the ``IngestRequest`` schema of ``GET /openapi.json`` (entries through
``IngestEntry``) and what the service accepts agree on every entries body, over real HTTP (the service's app on an
aiohttp test server, a tmp home) and at the validator itself."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from jsonschema import Draft202012Validator

from fabric.query.engine import Engine
from fabric.serve.openapi import build_openapi
from fabric.serve.service import create_app
from fabric.serve.tasks.submission import SubmitError, parse_submission, spool_entries
from fabric.settings import Settings, load_settings
from lanes.base import LaneResources
from tests.support.embedded import BagEmbedder

ONE = [{"id": "a", "text": "t"}]

BODIES: list[dict[str, Any]] = [
    {"entries": ONE},
    {"entries": ONE, "format": "jsonl"},
    {"entries": ONE, "format": None},
    {"entries": ONE, "format": "markdown"},
    {"entries": ONE, "async": False},
    {"entries": ONE, "async": None},
    {"entries": ONE, "include": ["*.md"]},
    {"entries": ONE, "exclude": None},
    {"entries": ONE, "colour": 1},
    {"entries": []},
    {"entries": {"id": "a", "text": "t"}},
    {"entries": ["a"]},
    {"entries": [{"id": 3, "text": "t", "published_at": "2999-12-31T23:59:59Z"}]},
    {"entries": [{"id": "a", "text": "t", "published_at": "Õêw"}]},
    {"entries": [{"id": "a", "text": "t", "url": "h"}]},
    {"entries": [{"id": "a", "text": "t", "source_kind": "import", "trust": "UNTRUSTED", "extra": [1]}]},
    {"entries": [{"id": "a", "text": "t"}, {"id": "b"}]},
    {},
]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The default settings over a tmp home."""
    return load_settings(env={"FABRIC_HOME": str(tmp_path / "home")})


def _validator(settings: Settings) -> Draft202012Validator:
    document = build_openapi(settings)
    schema = {**document["components"]["schemas"]["IngestRequest"], "components": document["components"]}
    return Draft202012Validator(schema)


def _accepted(body: dict[str, Any], settings: Settings, spool: Path) -> bool:
    try:
        sub = parse_submission(body, settings.ingest, None)
        spool_entries(sub, spool)
    except SubmitError:
        return False
    return True


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_the_schema_is_the_validator(settings: Settings, body: dict[str, Any], tmp_path: Path) -> None:
    """A body the published schema allows is accepted, and one it refuses is refused (never only one of them)."""
    assert _validator(settings).is_valid(body) is _accepted(body, settings, tmp_path / "spool" / "api.jsonl"), body


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[TestClient]:
    """The service's app over real embedded lanes (open mode: the caller is the default tenant's admin) on a
    loopback test server."""
    engine = Engine(settings, resources=LaneResources(home=settings.home, embedder=BagEmbedder()))
    async with TestClient(TestServer(create_app(engine), host="127.0.0.1")) as c:
        yield c


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
async def test_http_answers_as_the_schema_says(client: TestClient, settings: Settings, body: dict[str, Any]) -> None:
    """Over HTTP: a schema-valid body is ingested (200/202), a schema-invalid one is a 4xx with the JSON error body
    naming the field (400 or 422), never a 5xx."""
    resp = await client.post("/v1/ingest", json=body)
    payload = await resp.json()
    if _validator(settings).is_valid(body):
        assert resp.status in (200, 202), payload
    else:
        assert resp.status in (400, 422), payload
        assert set(payload["error"]) == {"field", "message"}, payload


async def test_reused_idempotency_key_is_a_conflict(client: TestClient) -> None:
    """An Idempotency-Key reused with another body answers 409 Conflict naming the header."""
    headers = {"Idempotency-Key": "k1"}
    assert (await client.post("/v1/ingest", json={"entries": ONE}, headers=headers)).status == 200
    resp = await client.post("/v1/ingest", json={"entries": [{"id": "b", "text": "t"}]}, headers=headers)
    assert (resp.status, (await resp.json())["error"]["field"]) == (409, "Idempotency-Key")
