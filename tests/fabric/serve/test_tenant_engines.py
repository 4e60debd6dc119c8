"""Tenants over the live service on loopback: two tenants' keys, real embedded stores, real MCP SDK client.

Each tenant ingests through ``POST /v1/ingest`` and searches through ``POST /v1/search`` and the ``/mcp`` tools;
each sees only its own entries, its own tasks and its own idempotency keys.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

import fabric.serve.homegate as homegate
import fabric.serve.tenant_engines as mod
from fabric.cli import main
from fabric.core.errors import ConfigError
from fabric.ingest.check import pending_rows
from fabric.ingest.crashpoints import ENV as CRASH_AT
from fabric.query.engine import Engine
from fabric.serve.keys.store import KeyStore, Role
from fabric.serve.service import create_app, own_readiness
from fabric.serve.tenant_engines import TENANTS_KEY
from fabric.settings import load_settings
from lanes.base import LaneResources
from tests.support.embedded import BagEmbedder
from tests.support.tenants import CORPORA, QUERY, own_ids

ROOT = Path(__file__).resolve().parents[3]


def _entries(tenant: str) -> list[dict[str, Any]]:
    return [{"id": i, "title": t.split(":", 1)[0], "text": t} for i, t in CORPORA[tenant]]


def _app(home: Path) -> web.Application:
    settings = load_settings(env={"FABRIC_HOME": str(home), "FABRIC__ingest__sync_max_entries": "5"})
    return create_app(Engine(settings, resources=LaneResources(home=home, embedder=BagEmbedder())))


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def keys(home: Path) -> dict[str, str]:
    """A writer key for each tenant of the shared corpora (``default`` included)."""
    return {t: KeyStore(home).create(t, Role.WRITER)[1] for t in CORPORA}


@pytest.fixture
async def client(home: Path) -> AsyncIterator[TestClient]:
    async with TestClient(TestServer(_app(home), host="127.0.0.1")) as c:
        yield c


async def _ingest(client: TestClient, token: str, body: dict[str, Any], key: str | None = None) -> Any:
    headers = _auth(token) | ({"Idempotency-Key": key} if key else {})
    resp = await client.post("/v1/ingest", json=body, headers=headers)
    return resp.status, await resp.json()


async def _search_ids(client: TestClient, token: str) -> set[str]:
    resp = await client.post("/v1/search", json={"query": QUERY, "limit": 20}, headers=_auth(token))
    body = await resp.json()
    assert resp.status == 200, body
    return {it["id"] for it in body["items"]}


async def _finished(client: TestClient, token: str, task_id: str) -> dict[str, Any]:
    for _ in range(10_000):
        body: dict[str, Any] = await (await client.get(f"/v1/ingest/{task_id}", headers=_auth(token))).json()
        if body["status"] in ("succeeded", "failed"):
            return body
        await asyncio.sleep(0.005)
    raise AssertionError(f"task {task_id} did not finish")


class TestSearchIsolation:
    async def test_each_tenant_searches_only_its_own_entries(
        self, client: TestClient, keys: dict[str, str], home: Path
    ) -> None:
        """Three tenants ingest entries with the same words; every lane of each answers only that tenant's ids,
        and the stores sit in ``<home>`` (``default``) or ``<home>/tenants/<tenant>``."""
        for tenant, token in keys.items():
            status, body = await _ingest(client, token, {"entries": _entries(tenant)})
            assert (status, body["status"]) == (200, "succeeded"), body
        assert {t: await _search_ids(client, token) for t, token in keys.items()} == own_ids()
        for folder in (home, home / "tenants" / "acme", home / "tenants" / "beta"):
            assert (folder / "keyword.sqlite").is_file()
            assert (folder / "graph.sqlite").is_file()
            assert (folder / "vectors" / "bag_64.sqlite").is_file()
        assert sorted(client.app[TENANTS_KEY].tenants) == ["acme", "beta", "default"]

    async def test_same_id_in_two_tenants_is_no_conflict(self, client: TestClient, keys: dict[str, str]) -> None:
        """Ids are per tenant: beta may use an id acme holds (no 409), and each keeps its own text."""
        entry = {"id": "shared-1", "title": "Release Train", "text": "Release Train deploy rollback runbook."}
        for tenant in ("acme", "beta"):
            status, body = await _ingest(client, keys[tenant], {"entries": [entry | {"title": tenant}]})
            assert status == 200, body
        for tenant in ("acme", "beta"):
            resp = await client.post("/v1/search", json={"query": QUERY}, headers=_auth(keys[tenant]))
            items = (await resp.json())["items"]
            assert [(it["id"], it["title"]) for it in items] == [("shared-1", tenant)]


class TestTasksAndKeys:
    async def test_a_task_of_one_tenant_is_unknown_to_another(self, client: TestClient, keys: dict[str, str]) -> None:
        """acme's task answers 404 to beta (and to default), 200 to acme."""
        status, body = await _ingest(client, keys["acme"], {"entries": _entries("acme"), "async": True})
        assert status == 202
        done = await _finished(client, keys["acme"], body["task_id"])
        assert done["status"] == "succeeded"
        for other in ("beta", "default"):
            resp = await client.get(f"/v1/ingest/{body['task_id']}", headers=_auth(keys[other]))
            assert resp.status == 404
            assert (await resp.json())["error"]["field"] == "task_id"

    async def test_idempotency_keys_are_per_tenant(self, client: TestClient, keys: dict[str, str]) -> None:
        """One Idempotency-Key and body from two tenants makes two tasks; a repeat within a tenant makes none."""
        body = {"entries": _entries("beta")}
        _, first_a = await _ingest(client, keys["acme"], body, key="k-1")
        _, first_b = await _ingest(client, keys["beta"], body, key="k-1")
        _, again_a = await _ingest(client, keys["acme"], body, key="k-1")
        assert (first_a["created"], first_b["created"], again_a["created"]) == (True, True, False)
        assert first_a["task_id"] != first_b["task_id"]
        assert again_a["task_id"] == first_a["task_id"]


class TestDataRoutes:
    async def test_delete_audit_and_cite_use_the_callers_stores(
        self, client: TestClient, keys: dict[str, str], home: Path
    ) -> None:
        """acme's entries live in acme's stores: beta cannot delete them (404) nor read their history; acme's
        audit lists them, /v1/cite by query searches acme's stores, and acme's delete empties acme's search."""
        status, body = await _ingest(client, keys["acme"], {"entries": _entries("acme")})
        assert (status, body["status"]) == (200, "succeeded"), body
        victim = sorted(own_ids()["acme"])[0]
        resp = await client.delete(f"/v1/entries/{victim}", headers=_auth(keys["beta"]))
        assert resp.status == 404
        audits = {}
        for tenant in ("acme", "beta"):
            resp = await client.get("/v1/audit", headers=_auth(keys[tenant]))
            assert resp.status == 200
            audits[tenant] = {r["entry_id"] for r in (await resp.json())["records"]}
        assert audits == {"acme": own_ids()["acme"], "beta": set()}
        resp = await client.post(
            "/v1/cite", json={"answer": CORPORA["acme"][0][1], "query": QUERY}, headers=_auth(keys["acme"])
        )
        cited = await resp.json()
        assert resp.status == 200, cited
        assert {ref["id"] for ref in cited["bibliography"]} <= own_ids()["acme"]
        assert cited["bibliography"]
        resp = await client.delete(f"/v1/entries/{victim}", headers=_auth(keys["acme"]))
        assert resp.status == 200, await resp.json()
        assert await _search_ids(client, keys["acme"]) == own_ids()["acme"] - {victim}
        assert (home / "tenants" / "acme" / "audit.sqlite").is_file()


class TestMcpOverHttp:
    async def test_tools_answer_from_the_callers_tenant(self, home: Path, keys: dict[str, str]) -> None:
        """The MCP SDK client with acme's key ingests and queries acme's stores; beta's and default's keys see
        none of it."""

        async def call(token: str, name: str, args: dict[str, Any]) -> Any:
            async with (
                httpx2.AsyncClient(headers=_auth(token)) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await session.call_tool(name, args)

        async with TestServer(_app(home), host="127.0.0.1") as srv:
            url = str(srv.make_url("/mcp"))
            ingested = await call(keys["acme"], "ingest", {"entries": _entries("acme")})
            assert not ingested.is_error, ingested
            found = {}
            for tenant in ("acme", "beta", "default"):
                result = await call(keys[tenant], "query", {"topic": QUERY, "limit": 20})
                payload = json.loads(result.content[1].resource.text)
                found[tenant] = {it["id"] for it in payload["items"]}
        assert found == {"acme": own_ids()["acme"], "beta": set(), "default": set()}
        assert (home / "tenants" / "acme" / "keyword.sqlite").is_file()


async def _audit(client: TestClient, token: str) -> list[tuple[str, str, str, str | None]]:
    """The caller's entry records: (entry id, action, tenant, key id)."""
    resp = await client.get("/v1/audit", headers=_auth(token))
    assert resp.status == 200
    records = (await resp.json())["records"]
    return [(r["entry_id"], r["action"], r["tenant"], r["key_id"]) for r in records if r["subject"] == "entry"]


class TestAuditFromEveryDoor:
    """Entries a tenant writes through any door are audited as that tenant's, with the key that wrote them, so the
    tenant lists them in ``GET /v1/audit`` and may delete them."""

    async def test_http_ingest(self, home: Path) -> None:
        """``POST /v1/ingest`` with acme's key: acme's records name acme and the key."""
        record, token = KeyStore(home).create("acme", Role.WRITER)
        async with TestClient(TestServer(_app(home), host="127.0.0.1")) as client:
            status, _ = await _ingest(client, token, {"entries": _entries("acme")})
            assert status == 200
            assert {r[2:] for r in await _audit(client, token)} == {("acme", record.key_id)}

    async def test_mcp_ingest(self, home: Path) -> None:
        """The MCP ``ingest`` tool with acme's key: acme's records name acme and the key, and acme deletes them."""
        record, token = KeyStore(home).create("acme", Role.WRITER)
        async with TestServer(_app(home), host="127.0.0.1") as srv:
            async with (
                httpx2.AsyncClient(headers=_auth(token)) as http,
                streamable_http_client(str(srv.make_url("/mcp")), http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                done = await session.call_tool("ingest", {"entries": _entries("acme")})
                assert not done.is_error, done
            async with TestClient(srv) as client:
                assert sorted(await _audit(client, token)) == [
                    (i, "created", "acme", record.key_id) for i in sorted(own_ids()["acme"])
                ]
                resp = await client.delete("/v1/entries/a-1", headers=_auth(token))
                assert resp.status == 200, await resp.json()

    async def test_cli_ingest_for_a_tenant(
        self, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Entries an operator seeds with ``fabric ingest --tenant acme`` are acme's (key ``operator``): acme lists
        them and its admin key deletes them (a writer key may not delete the operator's entries:
        :mod:`fabric.ingest.provenance`)."""
        monkeypatch.setenv("FABRIC__embeddings__backend", "none")
        corpus = tmp_path / "acme.jsonl"
        corpus.write_text("".join(json.dumps(e) + "\n" for e in _entries("acme")))
        argv = ["--home", str(home), "ingest", str(corpus), "--tenant", "acme", "--json"]
        assert await asyncio.to_thread(main, argv) == 0  # the CLI runs its own event loop
        capsys.readouterr()
        record, token = KeyStore(home).create("acme", Role.ADMIN)
        async with TestClient(TestServer(_app(home), host="127.0.0.1")) as client:
            assert sorted(await _audit(client, token)) == [
                (i, "created", "acme", "operator") for i in sorted(own_ids()["acme"])
            ]
            resp = await client.delete("/v1/entries/a-1", headers=_auth(token))
            assert resp.status == 200, await resp.json()
            assert (await _audit(client, token))[-1] == ("a-1", "deleted", "acme", record.key_id)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _crash_during_ingest(home: Path, token: str, tmp_path: Path) -> str:
    """A real ``fabric serve`` that SIGKILLs itself (the crash points, :mod:`fabric.ingest.crashpoints`) once acme's
    300-entry task has committed its first keyword batch; the task's id."""
    env = {k: v for k, v in os.environ.items() if k != "FABRIC_HOME"}
    env |= {CRASH_AT: "write.sqlite_fts", "FABRIC__embeddings__backend": "none", "FABRIC_CACHE_DIR": str(tmp_path)}
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "fabric.cli", "--home", str(home), "serve", "--port", str(port), cwd=str(ROOT), env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    assert "serving on" in (await asyncio.wait_for(proc.stdout.readline(), 300)).decode()
    entries = [{"id": f"c{i:03d}", "title": f"note {i}", "text": f"Note {i} is about rivers."} for i in range(300)]
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"http://127.0.0.1:{port}/v1/ingest", json={"entries": entries, "async": True}, headers=_auth(token))
        as resp,
    ):  # fmt: skip
        assert resp.status == 202, await resp.text()
        task_id: str = (await resp.json())["task_id"]
    assert await asyncio.wait_for(proc.wait(), 300) == -signal.SIGKILL
    return task_id


@pytest.mark.fault
class TestStartUp:
    async def test_a_torn_tenant_is_repaired_and_resumed_before_ready(
        self, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """After a kill -9 during acme's ingest, the restarted service repairs acme's stores while /readyz would
        still answer not ready, reports the repair once ready and resumes acme's task, without a request of acme's;
        then acme's stores agree with its ledger."""
        _, token = KeyStore(home).create("acme", Role.WRITER)
        task_id = await _crash_during_ingest(home, token, tmp_path)
        acme = home / "tenants" / "acme"
        assert pending_rows(acme) > 0  # torn: a keyword batch committed, the ledger's rows still pending
        settings = load_settings(env={"FABRIC_HOME": str(home), "FABRIC__embeddings__backend": "none"})
        app = create_app(Engine(settings))
        during: list[tuple[bool, str]] = []
        repair = homegate.repair_stores

        async def observed(settings: Any, resources: LaneResources) -> Any:
            if resources.tenant == "acme":
                ready, body = await own_readiness(app)
                during.append((ready, body["stores"]["error"]))
            return await repair(settings, resources)

        monkeypatch.setattr(homegate, "repair_stores", observed)
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            assert during == [(False, "the start-up repair has not finished")]
            resp = await client.get("/readyz")
            body = await resp.json()
            assert resp.status == 200, body
            assert body["stores"]["tenant_repairs"]["acme"]["rolled_back"] > 0
            assert "acme" in app[TENANTS_KEY].tenants  # opened at start-up: its task was unfinished
            tasks = (await app[TENANTS_KEY].get("acme")).tasks
            task = tasks.get(task_id)
            assert task is not None
            if not task.finished:  # a finished task is read from the store (its event is not the worker's)
                task = await tasks.wait(task)
            assert (task.status.value, task.attempts) == ("succeeded", 2), task.error
        capsys.readouterr()
        assert await asyncio.to_thread(main, ["--home", str(home), "check", "--tenant", "acme", "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert (report["agree"], report["pending"], report["ledger"]) == (True, 0, 300)


class TestOpenMode:
    async def test_no_keys_is_the_default_tenant_in_todays_home(self, client: TestClient, home: Path) -> None:
        """Without keys every request is ``default``: stores in the home itself, no tenants folder."""
        resp = await client.post("/v1/ingest", json={"entries": _entries("default")})
        assert resp.status == 200
        resp = await client.post("/v1/search", json={"query": QUERY})
        assert {it["id"] for it in (await resp.json())["items"]} == own_ids()["default"]
        assert (home / "keyword.sqlite").is_file()
        assert not (home / "tenants").exists()


async def test_unopened_root_engine_is_refused(tmp_path: Path) -> None:
    """Another tenant's scope needs the service's engine open (its shared resources)."""
    settings = load_settings(env={"FABRIC_HOME": str(tmp_path)})
    app = create_app(Engine(settings, resources=None))
    with pytest.raises(RuntimeError, match="not open"):
        await app[TENANTS_KEY].get("acme")


async def test_invalid_tenant_is_a_config_error(tmp_path: Path) -> None:
    """A tenant name that is unsafe for paths never opens anything."""
    settings = load_settings(env={"FABRIC_HOME": str(tmp_path)})
    app = create_app(Engine(settings, resources=LaneResources(home=tmp_path)))
    with pytest.raises(ConfigError, match="tenant"):
        await app[TENANTS_KEY].get("../x")


def test_public_api() -> None:
    """The module's exports."""
    assert set(mod.__all__) == {
        "CURRENT_PRINCIPAL", "CURRENT_SCOPE", "TENANTS_KEY", "TenantEngines", "TenantScope", "scope_middleware",
        "scope_of", "tenant_resources",
    }  # fmt: skip
