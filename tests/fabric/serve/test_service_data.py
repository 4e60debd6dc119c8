"""DELETE /v1/entries, GET /v1/audit, POST /v1/cite and GET /openapi.json on loopback, over the real embedded
stores of a tmp home, with API keys of two tenants (roles and tenant scoping) and the metrics they feed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

import fabric.serve.service_data as mod
from fabric.query.engine import Engine
from fabric.serve.keys.store import KeyStore, Role
from fabric.serve.service import create_app
from fabric.serve.tenant_engines import TENANTS_KEY
from fabric.settings import load_settings
from lanes.base import LaneResources
from tests.support.embedded import BagEmbedder

ENTRIES = [
    {"id": "kb-1", "title": "Rollback", "text": "Rollback within five minutes. Alice Smith owns Project Falcon."},
    {"id": "kb-2", "title": "Canary", "text": "Canary deploys send five percent of traffic first."},
]
ANSWER = "Rollback within five minutes. The moon is made of cheese."


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, str]:
    """Keys of tenant acme (reader, writer, admin) and tenant beta (writer) in the home's key store."""
    store = KeyStore(tmp_path / "home")
    out = {role.label: store.create("acme", role)[1] for role in Role}
    out["beta"] = store.create("beta", Role.WRITER)[1]
    return out


@pytest.fixture
async def client(tmp_path: Path, keys: dict[str, str]) -> AsyncIterator[TestClient]:
    """A service over the embedded stores of ``tmp_path/home`` holding :data:`ENTRIES` (ingested by acme)."""
    home = tmp_path / "home"
    settings = load_settings(env={"FABRIC_HOME": str(home)})
    engine = Engine(settings, resources=LaneResources(home=home, embedder=BagEmbedder()))
    async with TestClient(TestServer(create_app(engine, mcp=False), host="127.0.0.1")) as c:
        resp = await c.post("/v1/ingest", json={"entries": ENTRIES}, headers=_auth(keys["writer"]))
        assert resp.status == 200, await resp.text()
        yield c


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _ids(client: TestClient, key: str, query: str) -> set[str]:
    body = await (await client.post("/v1/search", json={"query": query}, headers=_auth(key))).json()
    return {it["id"] for it in body["items"]}


class TestDelete:
    async def test_delete_by_id_removes_the_entry_from_search(self, client: TestClient, keys: dict[str, str]) -> None:
        """200 with the report; the entry no longer answers from any lane; a second delete is 404."""
        assert "kb-1" in await _ids(client, keys["reader"], "rollback minutes")
        resp = await client.delete("/v1/entries/kb-1", headers=_auth(keys["writer"]))
        body = await resp.json()
        assert resp.status == 200, body
        assert body["ids"] == ["kb-1"]
        assert set(body["stores"].values()) == {"ok"}
        assert "kb-1" not in await _ids(client, keys["reader"], "rollback minutes")
        again = await client.delete("/v1/entries/kb-1", headers=_auth(keys["writer"]))
        assert again.status == 404
        assert (await again.json())["error"]["field"] == "id"

    async def test_delete_needs_the_writer_role(self, client: TestClient, keys: dict[str, str]) -> None:
        """A reader key is refused with 403; no key is 401."""
        assert (await client.delete("/v1/entries/kb-1", headers=_auth(keys["reader"]))).status == 403
        assert (await client.delete("/v1/entries/kb-1")).status == 401

    async def test_another_tenant_cannot_delete(self, client: TestClient, keys: dict[str, str]) -> None:
        """beta's writer key gets 404 for acme's entry, and the entry stays searchable."""
        resp = await client.delete("/v1/entries/kb-1", headers=_auth(keys["beta"]))
        assert resp.status == 404
        by_source = await client.delete("/v1/entries", params={"source": "api"}, headers=_auth(keys["beta"]))
        assert by_source.status == 404
        assert "kb-1" in await _ids(client, keys["reader"], "rollback minutes")

    async def test_delete_by_source(self, client: TestClient, keys: dict[str, str]) -> None:
        """source=api removes every entry posted to the service; bad queries name the parameter."""
        resp = await client.delete("/v1/entries", params={"source": "api"}, headers=_auth(keys["writer"]))
        assert sorted((await resp.json())["ids"]) == ["kb-1", "kb-2"]
        empty = await client.delete("/v1/entries", headers=_auth(keys["writer"]))
        assert (await empty.json())["error"]["field"] == "source"
        odd = await client.delete("/v1/entries", params={"sauce": "api"}, headers=_auth(keys["writer"]))
        assert odd.status == 400
        assert "unknown parameter" in (await odd.json())["error"]["message"]


class TestWriteLock:
    async def test_delete_waits_for_a_running_ingest(self, client: TestClient, keys: dict[str, str]) -> None:
        """While the tenant engine's write lock is held (a task writing), a delete waits, then completes."""
        assert client.app is not None
        engine = (await client.app[TENANTS_KEY].get("acme")).engine  # the keys' tenant: its own engine and lock
        lock = mod.write_lock(engine)
        await lock.acquire()
        pending = asyncio.ensure_future(client.delete("/v1/entries/kb-2", headers=_auth(keys["writer"])))
        for _ in range(20):
            await asyncio.sleep(0.01)
        assert not pending.done()
        lock.release()
        assert (await pending).status == 200


class TestAudit:
    async def test_history_of_ingest_and_delete(self, client: TestClient, keys: dict[str, str]) -> None:
        """Created then deleted, with the key ids; triples too; another tenant sees none of it."""
        await client.delete("/v1/entries/kb-1", headers=_auth(keys["writer"]))
        resp = await client.get("/v1/audit", params={"entry_id": "kb-1"}, headers=_auth(keys["reader"]))
        records = (await resp.json())["records"]
        entry = [(r["action"], r["key_id"], r["task_id"] is not None) for r in records if r["subject"] == "entry"]
        writer_id = keys["writer"].split("_")[1]
        assert entry == [("created", writer_id, True), ("deleted", writer_id, False)]
        assert {r["action"] for r in records if r["subject"] == "triple"} == {"created", "deleted"}
        other = await client.get("/v1/audit", headers=_auth(keys["beta"]))
        assert (await other.json())["records"] == []

    async def test_paging_and_bad_parameters(self, client: TestClient, keys: dict[str, str]) -> None:
        """limit pages with next_url; since in the future is empty; bad values are 400 naming the parameter."""
        first = await (await client.get("/v1/audit", params={"limit": "1"}, headers=_auth(keys["reader"]))).json()
        assert len(first["records"]) == 1
        nxt = await (await client.get(first["next_url"], headers=_auth(keys["reader"]))).json()
        assert nxt["records"][0]["seq"] > first["records"][0]["seq"]
        late = await client.get("/v1/audit", params={"since": "2999-01-01"}, headers=_auth(keys["reader"]))
        assert (await late.json())["records"] == []
        for params, field in (({"limit": "0"}, "limit"), ({"since": "soon"}, "since"), ({"after": "x"}, "after")):
            resp = await client.get("/v1/audit", params=params, headers=_auth(keys["reader"]))
            assert resp.status == 400
            assert (await resp.json())["error"]["field"] == field


class TestCite:
    async def test_cite_items_matches_the_cli_shape(self, client: TestClient, keys: dict[str, str]) -> None:
        """Items as search returns them: the first sentence is cited, the second is not; metrics counted."""
        items = [{"id": "kb-1", "title": "Rollback", "text": ENTRIES[0]["text"]}]
        resp = await client.post("/v1/cite", json={"answer": ANSWER, "items": items}, headers=_auth(keys["reader"]))
        body = await resp.json()
        assert resp.status == 200, body
        assert set(body) >= {"text", "sentences", "bibliography", "disagreements"}
        assert [bool(s["citations"]) for s in body["sentences"]] == [True, False]
        assert "[1]" in body["text"]
        metrics = await (await client.get("/metrics", headers=_auth(keys["reader"]))).text()
        assert 'fabric_tenant_citation_sentences_total{supported="true",tenant="acme"} 1.0' in metrics

    async def test_cite_by_query(self, client: TestClient, keys: dict[str, str]) -> None:
        """With a query the engine searches first and cites its items."""
        payload = {"answer": "Rollback within five minutes.", "query": "rollback", "top_k": 5}
        body = await (await client.post("/v1/cite", json=payload, headers=_auth(keys["reader"]))).json()
        assert body["sentences"][0]["citations"][0]["id"] == "kb-1"

    @pytest.mark.parametrize(
        ("payload", "field"),
        [
            ({"answer": " ", "items": [{"id": "a"}]}, "answer"),
            ({"answer": "x", "items": [{"id": "a"}], "query": "q"}, "body"),
            ({"answer": "x", "items": [{"title": "no id"}]}, "items[0].id"),
            ({"answer": "x", "items": [{"id": "a", "score_total": "high"}]}, "items[0].score_total"),
            ({"answer": "x", "items": [{"id": "a"}], "threshold": 0}, "threshold"),
            ({"answer": "x", "items": [{"id": "a"}], "colour": 1}, "body"),
        ],
    )
    async def test_bad_bodies_name_the_field(
        self, client: TestClient, keys: dict[str, str], payload: dict[str, Any], field: str
    ) -> None:
        """Every refusal is a 400 naming the field."""
        resp = await client.post("/v1/cite", json=payload, headers=_auth(keys["reader"]))
        assert resp.status == 400
        assert (await resp.json())["error"]["field"] == field


class TestCiteWorkBudget:
    @pytest.mark.parametrize(
        ("payload", "field"),
        [
            ({"answer": "Rollback! " * 201, "items": [{"id": "a", "text": "Rollback."}]}, "answer"),
            (
                {"answer": "Rollback.", "items": [{"id": f"i{k}", "text": "Rollback! " * 21} for k in range(100)]},
                "items",
            ),
            ({"answer": "Rollback! " * 60, "items": [{"id": "a", "text": "Rollback! " * 1_700}]}, "items"),
        ],
        ids=["sentences", "passages", "pairs"],
    )
    async def test_over_the_budget_is_a_422(
        self, client: TestClient, keys: dict[str, str], payload: dict[str, Any], field: str
    ) -> None:
        """Within the length caps, an answer or items over the alignment's work budget (fusion.citations) is a 422
        naming the field, before any comparison (``"a! "`` repeated cost seconds of CPU per request)."""
        resp = await client.post("/v1/cite", json=payload, headers=_auth(keys["reader"]))
        assert resp.status == 422
        assert (await resp.json())["error"]["field"] == field


class TestOpenApiAndMetrics:
    async def test_openapi_is_served_without_a_key(self, client: TestClient) -> None:
        """The document answers without a key."""
        resp = await client.get("/openapi.json")
        assert resp.status == 200
        assert (await resp.json())["openapi"] == "3.1.0"

    async def test_per_tenant_metrics(self, client: TestClient, keys: dict[str, str]) -> None:
        """Answers, top-score mass and mutations are counted per tenant."""
        await _ids(client, keys["reader"], "rollback minutes")
        await client.delete("/v1/entries/kb-2", headers=_auth(keys["writer"]))
        await client.delete("/v1/entries/nope", headers=_auth(keys["writer"]))
        text = await (await client.get("/metrics", headers=_auth(keys["reader"]))).text()
        assert 'fabric_tenant_answers_total{outcome="answered",tenant="acme"} 1.0' in text
        assert 'fabric_top_score_mass_count{tenant="acme"} 1.0' in text
        assert 'fabric_mutations_total{op="ingest",outcome="success",tenant="acme"} 1.0' in text
        assert 'fabric_mutations_total{op="delete",outcome="success",tenant="acme"} 1.0' in text
        assert 'fabric_mutations_total{op="delete",outcome="failure",tenant="acme"} 1.0' in text


def test_public_api() -> None:
    """The module's exports."""
    assert set(mod.__all__) == {"CITE_MAX_BODY_BYTES", "ReadJson", "add_data_routes", "observed_runner", "write_lock"}
