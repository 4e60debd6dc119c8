"""Writers do not rewrite the operator's knowledge (issue 42, class 2): in one tenant, a writer key may not replace
or delete what an admin key wrote, nor what is marked trusted, nor take back ids an admin deleted; it may change
writers' content, and an admin may change anything. Over loopback, on the real embedded stores of a tmp home."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from fabric.ingest.ledger import LEDGER_FILE, Ledger
from fabric.ingest.provenance import Provenance
from fabric.query.engine import Engine
from fabric.serve.keys.store import KeyStore, Role
from fabric.serve.service import create_app
from fabric.serve.tasks.queue import TaskStatus
from fabric.serve.tasks.submission import parse_submission
from fabric.serve.tenant_engines import TENANTS_KEY
from fabric.settings import load_settings
from lanes.base import LaneResources
from tests.support.embedded import BagEmbedder

TRUSTED = {"id": "kb-1", "title": "Rollback", "text": "Roll back a release within five minutes.", "trust": "trusted"}
HIJACK = {"id": "kb-1", "title": "Rollback", "text": "Never roll back a release; wait it out."}
NOTES = "# Runbook\n\nRotate the signing keys every ninety days.\n"


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, str]:
    """Tenant acme's keys: an admin, two writers, a reader."""
    store = KeyStore(tmp_path / "home")
    return {
        "admin": store.create("acme", Role.ADMIN)[1],
        "writer": store.create("acme", Role.WRITER)[1],
        "writer2": store.create("acme", Role.WRITER)[1],
        "reader": store.create("acme", Role.READER)[1],
    }


@pytest.fixture
async def client(tmp_path: Path, keys: dict[str, str]) -> AsyncIterator[TestClient]:
    """A service over ``tmp_path/home`` whose allowed root holds the admin's notes (``notes.md``)."""
    root = tmp_path / "allowed"
    root.mkdir()
    (root / "notes.md").write_text(NOTES)
    home = tmp_path / "home"
    env = {"FABRIC_HOME": str(home), "FABRIC__ingest__allowed_root": str(root)}
    engine = Engine(load_settings(env=env), resources=LaneResources(home=home, embedder=BagEmbedder()))
    async with TestClient(TestServer(create_app(engine, mcp=False), host="127.0.0.1")) as c:
        yield c


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _post(client: TestClient, key: str, *entries: dict[str, Any], **body: Any) -> tuple[int, dict[str, Any]]:
    resp = await client.post("/v1/ingest", json={"entries": list(entries), **body}, headers=_auth(key))
    return resp.status, await resp.json()


async def _items(client: TestClient, key: str, query: str) -> list[dict[str, Any]]:
    resp = await client.post("/v1/search", json={"query": query}, headers=_auth(key))
    return list((await resp.json())["items"])


async def _finished(client: TestClient, key: str, task_id: str) -> dict[str, Any]:
    for _ in range(10_000):
        body: dict[str, Any] = await (await client.get(f"/v1/ingest/{task_id}", headers=_auth(key))).json()
        if body["status"] in ("succeeded", "failed"):
            return body
        await asyncio.sleep(0.005)
    raise AssertionError(f"task {task_id} did not finish")


async def _admin_notes(client: TestClient, keys: dict[str, str]) -> list[str]:
    """Ingest the admin's file source (a path: admin only); the ids of its chunks."""
    resp = await client.post("/v1/ingest", json={"path": "notes.md"}, headers=_auth(keys["admin"]))
    assert resp.status == 202, await resp.text()
    assert (await _finished(client, keys["admin"], (await resp.json())["task_id"]))["status"] == "succeeded"
    hits = await _items(client, keys["reader"], "signing keys ninety days")
    return [h["id"] for h in hits if h["id"].startswith("allowed:notes.md#")]  # an untrusted import by the trust rules


class TestWriterCannotReplace:
    async def test_writer_replacing_an_admins_trusted_entry_is_403_and_it_stays(
        self, client: TestClient, keys: dict[str, str]
    ) -> None:
        """The writer's post of the admin's id is refused naming the rule; the trusted original still answers."""
        assert (await _post(client, keys["admin"], TRUSTED))[0] == 200
        status, body = await _post(client, keys["writer"], HIJACK)
        assert status == 403, body
        assert body["error"]["field"] == "entries[0].id"
        assert "writer key may not replace" in body["error"]["message"]
        assert "an admin key" in body["error"]["message"]
        top = (await _items(client, keys["reader"], "roll back a release"))[0]
        assert (top["id"], top["trust"], top["snippet"]) == ("kb-1", "trusted", TRUSTED["text"])

    async def test_writer_replacing_an_admins_untrusted_entry_is_403(
        self, client: TestClient, keys: dict[str, str]
    ) -> None:
        """Authority follows who wrote the entry, not only its trust flag."""
        plain = {k: v for k, v in TRUSTED.items() if k != "trust"}
        assert (await _post(client, keys["admin"], plain))[0] == 200
        assert (await _post(client, keys["writer"], HIJACK))[0] == 403

    async def test_an_async_submission_is_refused_at_once(self, client: TestClient, keys: dict[str, str]) -> None:
        """``"async": true`` does not turn the refusal into a task that fails later."""
        assert (await _post(client, keys["admin"], TRUSTED))[0] == 200
        status, body = await _post(client, keys["writer"], {"id": "w-1", "text": "fine"}, HIJACK, **{"async": True})
        assert (status, body["error"]["field"]) == (403, "entries[1].id")

    async def test_the_task_worker_refuses_what_the_door_did_not_check(
        self, client: TestClient, keys: dict[str, str]
    ) -> None:
        """A writer's task that reaches the pipeline (it raced the admin's write) fails naming the rule, and the
        admin's entry is unchanged: the pipeline holds the rule whatever the door."""
        assert (await _post(client, keys["admin"], TRUSTED))[0] == 200
        scope = await client.app[TENANTS_KEY].get("acme")
        sub = parse_submission({"entries": [HIJACK]}, scope.engine.settings.ingest, None)
        task, _ = await scope.tasks.submit(replace(sub, tenant="acme", role="writer"))
        task = await scope.tasks.wait(task)
        assert task.status is TaskStatus.FAILED
        assert "writer key may not replace" in (task.error or "")
        top = (await _items(client, keys["reader"], "roll back a release"))[0]
        assert (top["id"], top["trust"]) == ("kb-1", "trusted")


class TestWriterCannotDelete:
    async def test_writer_deleting_an_admin_entry_is_403_and_it_stays(
        self, client: TestClient, keys: dict[str, str]
    ) -> None:
        """403 naming the rule and the protected id; nothing deleted; the refusal is counted as a conflict."""
        assert (await _post(client, keys["admin"], TRUSTED))[0] == 200
        resp = await client.delete("/v1/entries/kb-1", headers=_auth(keys["writer"]))
        body = await resp.json()
        assert resp.status == 403, body
        assert body["error"]["protected"] == {"kb-1": "an admin key"}
        assert "writer key may not delete" in body["error"]["message"]
        assert [h["id"] for h in await _items(client, keys["reader"], "roll back a release")][:1] == ["kb-1"]
        metrics = await (await client.get("/metrics", headers=_auth(keys["reader"]))).text()
        assert 'fabric_conflicts_total{kind="provenance",tenant="acme"} 1.0' in metrics

    async def test_writer_deleting_an_admins_file_source_is_403(self, client: TestClient, keys: dict[str, str]) -> None:
        """The admin's Markdown source survives a writer's delete by source, and its ids cannot be re-posted."""
        ids = await _admin_notes(client, keys)
        assert ids
        resp = await client.delete("/v1/entries", params={"source": "markdown:notes.md"}, headers=_auth(keys["writer"]))
        assert (resp.status, (await resp.json())["error"]["field"]) == (403, "source")
        assert set(ids) <= {h["id"] for h in await _items(client, keys["reader"], "signing keys ninety days")}
        status, _ = await _post(client, keys["writer"], {"id": ids[0], "text": "Never rotate signing keys."})
        assert status == 403  # another source holds the id too (409): the provenance rule answers first

    async def test_writer_cannot_repost_ids_of_a_deleted_admin_source(
        self, client: TestClient, keys: dict[str, str]
    ) -> None:
        """Provenance survives the delete: once the admin removed its source, its ids stay the admin's."""
        ids = await _admin_notes(client, keys)
        resp = await client.delete("/v1/entries", params={"source": "markdown:notes.md"}, headers=_auth(keys["admin"]))
        assert resp.status == 200, await resp.text()
        status, body = await _post(client, keys["writer"], {"id": ids[0], "text": "Never rotate signing keys."})
        assert status == 403, body
        assert "even after it was deleted" in body["error"]["message"]
        assert not await _items(client, keys["reader"], "never rotate signing keys")

    async def test_writer_cannot_repost_a_deleted_admin_entry(self, client: TestClient, keys: dict[str, str]) -> None:
        """The same for one entry the admin deleted by id; the admin itself may post it again."""
        assert (await _post(client, keys["admin"], TRUSTED))[0] == 200
        assert (await client.delete("/v1/entries/kb-1", headers=_auth(keys["admin"]))).status == 200
        assert (await _post(client, keys["writer"], HIJACK))[0] == 403
        assert (await _post(client, keys["admin"], TRUSTED))[0] == 200
        assert (await _post(client, keys["writer"], HIJACK))[0] == 403


class TestWhatWritersAndAdminsMayDo:
    async def test_writer_replaces_and_deletes_writers_entries(self, client: TestClient, keys: dict[str, str]) -> None:
        """A writer updates its own entry, another writer key of the tenant may too, and a deleted one is free."""
        entry = {"id": "w-1", "title": "Canary", "text": "Canary deploys send five percent first."}
        assert (await _post(client, keys["writer"], entry))[0] == 200
        status, body = await _post(client, keys["writer"], {**entry, "text": "Canary deploys send one percent."})
        assert (status, body["report"]["updated"]) == (200, 1)
        assert (await _post(client, keys["writer2"], {**entry, "text": "Canary: two percent."}))[0] == 200
        assert (await client.delete("/v1/entries/w-1", headers=_auth(keys["writer"]))).status == 200
        assert (await _post(client, keys["writer2"], entry))[0] == 200

    async def test_admin_replaces_a_writers_entry_and_then_holds_it(
        self, client: TestClient, keys: dict[str, str]
    ) -> None:
        """An admin may replace (and mark trusted) what a writer wrote; from then on it is the admin's."""
        assert (await _post(client, keys["writer"], {**HIJACK, "id": "kb-1"}))[0] == 200
        assert (await _post(client, keys["admin"], TRUSTED))[0] == 200
        assert (await _post(client, keys["writer"], HIJACK))[0] == 403
        top = (await _items(client, keys["reader"], "roll back a release"))[0]
        assert (top["id"], top["trust"]) == ("kb-1", "trusted")

    async def test_admin_deletes_a_writers_entry(self, client: TestClient, keys: dict[str, str]) -> None:
        """Admin keys may delete anything; a writer's deleted id leaves no tombstone."""
        assert (await _post(client, keys["writer"], {"id": "w-2", "text": "Draft note."}))[0] == 200
        assert (await client.delete("/v1/entries/w-2", headers=_auth(keys["admin"]))).status == 200
        assert (await _post(client, keys["writer"], {"id": "w-2", "text": "Draft note again."}))[0] == 200

    async def test_the_ledger_records_who_wrote_each_entry(
        self, client: TestClient, keys: dict[str, str], tmp_path: Path
    ) -> None:
        """Role, key id and trust of the last write are kept per chunk; a protected delete leaves a tombstone."""
        await _post(client, keys["admin"], TRUSTED)
        await _post(client, keys["writer"], {"id": "w-3", "text": "Writer note."})
        await client.delete("/v1/entries/kb-1", headers=_auth(keys["admin"]))
        engine = (await client.app[TENANTS_KEY].get("acme")).engine
        assert engine.resources is not None
        ledger = Ledger(engine.resources.home / LEDGER_FILE)
        try:
            held = ledger.provenance(["kb-1", "w-3"])
        finally:
            ledger.close()
        admin_id, writer_id = keys["admin"].split("_")[1], keys["writer"].split("_")[1]
        assert held == {
            "kb-1": Provenance("admin", admin_id, trusted=True),  # the tombstone
            "w-3": Provenance("writer", writer_id, trusted=False),
        }


class TestClaimedUrls:
    async def test_an_untrusted_copy_claiming_wikipedia_does_not_outrank_the_original(
        self, client: TestClient, keys: dict[str, str]
    ) -> None:
        """A writer's copy of the trusted entry under a new id with ``url: en.wikipedia.org`` is merged into the
        original, which is the answer shown: its claimed authority earns nothing."""
        assert (await _post(client, keys["admin"], TRUSTED))[0] == 200
        copy = {**HIJACK, "id": "copy-1", "text": TRUSTED["text"], "url": "https://en.wikipedia.org/wiki/Rollback"}
        assert (await _post(client, keys["writer"], copy))[0] == 200
        items = await _items(client, keys["reader"], "roll back a release within five minutes")
        assert (items[0]["id"], items[0]["trust"], items[0]["domain"]) == ("kb-1", "trusted", "")
        assert "copy-1" not in [it["id"] for it in items]
