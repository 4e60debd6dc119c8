"""POST /v1/ingest and GET /v1/ingest/<id> on loopback, over the embedded stores and a bag-of-words embedder."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from fabric.core.errors import ConfigError
from fabric.ingest.ledger import Ledger
from fabric.query.engine import Engine
from fabric.serve.service import LOOP_LAG_KEY, TASKS_KEY, create_app
from fabric.settings import load_settings
from lanes.base import LaneResources
from tests.support.embedded import BagEmbedder


def _entries(n: int, prefix: str = "kb") -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}-{i}", "title": f"Entry {i}", "text": f"Use blue-green deploys for release {i}."}
        for i in range(n)
    ]


def _app(home: Path, root: Path | None = None, **ingest: str) -> Any:
    env = {"FABRIC_HOME": str(home), "FABRIC__ingest__sync_max_entries": "3"}
    if root is not None:
        env["FABRIC__ingest__allowed_root"] = str(root)
    env |= {f"FABRIC__ingest__{k}": v for k, v in ingest.items()}
    settings = load_settings(env=env)
    engine = Engine(settings, resources=LaneResources(home=home, embedder=BagEmbedder()))
    return create_app(engine)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The allowed root, holding one good and one malformed JSONL file."""
    d = tmp_path / "allowed"
    d.mkdir()
    (d / "good.jsonl").write_text('{"id": "p-1", "title": "Rollback", "text": "Rollback within five minutes."}\n')
    (d / "bad.jsonl").write_text('{"id": "b-1", "text": "fine"}\n{not json\n')
    (tmp_path / "secret.jsonl").write_text('{"id": "s-1", "text": "outside the root"}\n')
    return d


@pytest.fixture
async def client(tmp_path: Path, root: Path) -> AsyncIterator[TestClient]:
    """A client of an app over real embedded lanes in ``tmp_path/home``, with ``root`` allowed for paths."""
    async with TestClient(TestServer(_app(tmp_path / "home", root), host="127.0.0.1")) as c:
        yield c


async def _finished(client: TestClient, task_id: str) -> dict[str, Any]:
    """Poll GET /v1/ingest/<id> until the task has finished (the worker shares the test's event loop)."""
    for _ in range(10_000):
        body: dict[str, Any] = await (await client.get(f"/v1/ingest/{task_id}")).json()
        if body["status"] in ("succeeded", "failed"):
            return body
        await asyncio.sleep(0.005)
    raise AssertionError(f"task {task_id} did not finish: {body}")


class TestSubmitAsync:
    async def test_large_submission_answers_202_then_succeeds(self, client: TestClient) -> None:
        """Over the synchronous limit: 202 with a handle, then polling reaches succeeded with the report."""
        resp = await client.post("/v1/ingest", json={"entries": _entries(20)})
        body = await resp.json()
        assert resp.status == 202
        assert body["status"] in ("queued", "running")
        assert body["status_url"] == f"/v1/ingest/{body['task_id']}" == resp.headers["Location"]
        done = await _finished(client, body["task_id"])
        assert done["status"] == "succeeded", done
        assert (done["report"]["docs"], done["report"]["created"], done["error"]) == (20, 20, None)
        assert done["report"]["stores"] == {"sqlite_fts": "ok", "numpy_flat": "ok", "sqlite_graph": "ok"}

    async def test_progress_counts_every_stage(self, client: TestClient) -> None:
        """A finished task reports done/total per stage: load, chunk, embed, write (3 stores)."""
        body = await (await client.post("/v1/ingest", json={"entries": _entries(10), "async": True})).json()
        done = await _finished(client, body["task_id"])
        assert done["progress"] == {
            "load": {"done": 1, "total": 1},
            "chunk": {"done": 10, "total": 10},
            "embed": {"done": 10, "total": 10},
            "write": {"done": 30, "total": 30},
        }
        assert done["created_at"] <= done["started_at"] <= done["finished_at"]

    async def test_content_is_searchable_after_success(self, client: TestClient) -> None:
        """Once the task succeeded, keyword, vector and graph lanes all answer from the new content."""
        entries = [*_entries(5), {"id": "zz", "title": "Quokka care", "text": "Quokkas eat grasses on Rottnest."}]
        body = await (await client.post("/v1/ingest", json={"entries": entries, "async": True})).json()
        assert (await _finished(client, body["task_id"]))["status"] == "succeeded"
        resp = await client.post("/v1/search", json={"query": "quokka grasses", "budget_ms": 5000, "top_k": 3})
        result = await resp.json()
        assert result["items"][0]["id"] == "zz"
        assert {"keyword", "vector"} <= set(result["items"][0]["lanes"])

    async def test_async_flag_forces_a_task(self, client: TestClient) -> None:
        """A small request with "async": true still answers 202."""
        resp = await client.post("/v1/ingest", json={"entries": _entries(1), "async": True})
        assert resp.status == 202


class TestSubmitInline:
    async def test_small_submission_runs_inline(self, client: TestClient) -> None:
        """At most sync_max_entries entries on an idle queue: 200 with the finished task and its report."""
        resp = await client.post("/v1/ingest", json={"entries": _entries(2)})
        body = await resp.json()
        assert (resp.status, body["status"], body["report"]["created"]) == (200, "succeeded", 2)

    async def test_metrics_count_finished_tasks(self, client: TestClient) -> None:
        """/metrics shows finished tasks by status, ingested entries and the pending gauge."""
        await client.post("/v1/ingest", json={"entries": _entries(2)})
        text = await (await client.get("/metrics")).text()
        assert 'fabric_ingest_tasks_total{status="succeeded"} 1.0' in text
        assert "fabric_ingest_entries_total 2.0" in text
        assert "fabric_ingest_tasks_pending 0.0" in text

    async def test_entries_are_audited_in_the_ledger(self, client: TestClient, tmp_path: Path) -> None:
        """Created entries appear in the ledger's history (seed 004: auditable in history)."""
        await client.post("/v1/ingest", json={"entries": _entries(2)})
        ledger = Ledger(tmp_path / "home" / "ledger.sqlite")
        try:
            assert [(h["action"], h["id"]) for h in ledger.history()] == [("create", "kb-0"), ("create", "kb-1")]
        finally:
            ledger.close()

    async def test_spool_file_is_removed_after_the_task(self, client: TestClient, tmp_path: Path) -> None:
        """The spooled entries do not outlive their task."""
        await client.post("/v1/ingest", json={"entries": _entries(2)})
        assert list((tmp_path / "home" / "spool").glob("*/*")) == []


class TestIdempotency:
    async def test_same_body_returns_same_task(self, client: TestClient) -> None:
        """Re-submitting an identical body (no header) returns the first task, not a new one."""
        first = await (await client.post("/v1/ingest", json={"entries": _entries(8)})).json()
        again = await (await client.post("/v1/ingest", json={"entries": _entries(8)})).json()
        assert (again["task_id"], first["created"], again["created"]) == (first["task_id"], True, False)
        await _finished(client, first["task_id"])
        after = await client.post("/v1/ingest", json={"entries": _entries(8)})
        assert (after.status, (await after.json())["task_id"]) == (200, first["task_id"])

    async def test_header_key_returns_same_task(self, client: TestClient) -> None:
        """An Idempotency-Key returns its task even when the async flag differs."""
        headers = {"Idempotency-Key": "batch-1"}
        first = await (await client.post("/v1/ingest", json={"entries": _entries(5)}, headers=headers)).json()
        again = await (
            await client.post("/v1/ingest", json={"entries": _entries(5), "async": True}, headers=headers)
        ).json()
        assert again["task_id"] == first["task_id"]
        assert again["idempotency"] == "key"

    async def test_header_key_with_other_body_is_409(self, client: TestClient) -> None:
        """A key reused with a different body is refused: 409 Conflict (schemathesis' and RFC drafts' answer)."""
        headers = {"Idempotency-Key": "batch-2"}
        await client.post("/v1/ingest", json={"entries": _entries(5)}, headers=headers)
        resp = await client.post("/v1/ingest", json={"entries": _entries(6)}, headers=headers)
        assert (resp.status, (await resp.json())["error"]["field"]) == (409, "Idempotency-Key")

    async def test_retry_after_success_writes_nothing(self, client: TestClient) -> None:
        """A new key over the same entries runs a task that finds every entry unchanged."""
        await client.post("/v1/ingest", json={"entries": _entries(2)}, headers={"Idempotency-Key": "a"})
        resp = await client.post("/v1/ingest", json={"entries": _entries(2)}, headers={"Idempotency-Key": "b"})
        report = (await resp.json())["report"]
        assert (report["created"], report["unchanged"]) == (0, 2)


class TestBadRequests:
    @pytest.mark.parametrize(
        ("payload", "field"),
        [
            ({}, "body"),
            ({"entries": [], "async": True}, "entries"),
            ({"entries": _entries(1), "path": "x"}, "body"),
            ({"entries": ["text"]}, "entries[0]"),
            ({"entries": _entries(1), "format": "beir"}, "format"),
            ({"entries": _entries(1), "async": "yes"}, "async"),
            ({"entries": _entries(1), "wat": 1}, "body"),
            ([1, 2], "body"),
        ],
    )
    async def test_bad_body_is_400_naming_field(self, client: TestClient, payload: Any, field: str) -> None:
        """A malformed body answers 400 with the field at fault and starts no task."""
        resp = await client.post("/v1/ingest", json=payload)
        body = await resp.json()
        assert (resp.status, body["error"]["field"]) == (400, field), body
        assert client.app is not None
        assert client.app[TASKS_KEY].counts()["queued"] == 0

    async def test_loader_message_names_the_entry(self, client: TestClient) -> None:
        """The JSONL loader's own message comes back with 422, pointing at the entry rather than the spool file."""
        resp = await client.post("/v1/ingest", json={"entries": [{"id": "a", "text": "t"}, {"text": "no id"}]})
        assert resp.status == 422
        assert (await resp.json())["error"] == {"field": "entries[1]", "message": "missing field id"}

    @pytest.mark.parametrize(
        ("entry", "field"),
        [({"id": "b"}, "entries[1]"), ({"id": "b", "text": "t", "trust": "maybe"}, "entries[1]")],
    )
    async def test_entries_the_loader_refuses_are_422(self, client: TestClient, entry: Any, field: str) -> None:
        """Well-formed JSON whose entry the loader refuses answers 422 naming the entry; no task starts."""
        resp = await client.post("/v1/ingest", json={"entries": [{"id": "a", "text": "ok"}, entry]})
        assert (resp.status, (await resp.json())["error"]["field"]) == (422, field)

    @pytest.mark.parametrize(
        ("body", "field"),
        [
            (b'{"entries": ' + b"[" * 1000 + b"]" * 1000 + b"}", "body"),  # 2 KiB nested 1,000 deep
            (b'{"entries": [{"id": "a", "text": "bad \\ud800"}]}', "entries[0].text"),
            (b'{"entries": [{"id": "a\\udfff", "text": "t"}]}', "entries[0].id"),
            (b'{"entries": [{"id": "a", "text": "t"}, {"id": "b", "text": "t", "url": "\\ud800"}]}', "entries[1].url"),
            (b'{"path": "good\\ud800.jsonl"}', "path"),
        ],
    )
    async def test_hostile_body_is_400_naming_field(self, client: TestClient, body: bytes, field: str) -> None:
        """Deep nesting and lone surrogates in text, id, url or path answer 400 naming the field; no task starts."""
        resp = await client.post("/v1/ingest", data=body, headers={"Content-Type": "application/json"})
        text = await resp.text()
        assert (resp.status, (await resp.json())["error"]["field"]) == (400, field), text
        assert "Traceback" not in text
        assert client.app is not None
        assert client.app[TASKS_KEY].counts()["queued"] == 0

    async def test_invalid_json_is_400(self, client: TestClient) -> None:
        """Malformed JSON answers 400 on field body."""
        resp = await client.post("/v1/ingest", data=b"{nope", headers={"Content-Type": "application/json"})
        assert (resp.status, (await resp.json())["error"]["field"]) == (400, "body")

    async def test_bad_idempotency_key_is_400(self, client: TestClient) -> None:
        """An empty Idempotency-Key header is refused."""
        resp = await client.post("/v1/ingest", json={"entries": _entries(1)}, headers={"Idempotency-Key": " "})
        assert (resp.status, (await resp.json())["error"]["field"]) == (400, "Idempotency-Key")

    async def test_unknown_task_is_404(self, client: TestClient) -> None:
        """An unknown task id answers a JSON 404."""
        resp = await client.get("/v1/ingest/0123456789abcdef")
        assert (resp.status, (await resp.json())["error"]["field"]) == (404, "task_id")


class TestBodyLimits:
    async def test_ingest_accepts_bodies_over_the_search_cap(self, client: TestClient) -> None:
        """The ingest route has its own, larger cap: a 100 KB body is accepted."""
        entries = [{"id": f"big-{i}", "text": "word " * 200} for i in range(100)]
        resp = await client.post("/v1/ingest", json={"entries": entries, "async": True})
        assert resp.status == 202

    async def test_search_keeps_its_cap(self, client: TestClient) -> None:
        """POST /v1/search still answers 413 above 64 KiB."""
        resp = await client.post("/v1/search", data=b"x" * 70_000, headers={"Content-Type": "application/json"})
        assert (resp.status, (await resp.json())["error"]["field"]) == (413, "body")

    async def test_too_large_ingest_body_is_413(self, tmp_path: Path) -> None:
        """A body over ingest.max_body_bytes answers a JSON 413 naming the limit."""
        app = _app(tmp_path / "home", max_body_bytes="1000")
        async with TestClient(TestServer(app, host="127.0.0.1")) as c:
            resp = await c.post("/v1/ingest", json={"entries": _entries(50)})
            body = await resp.json()
        assert (resp.status, body["error"]["field"], body["error"]["limit_bytes"]) == (413, "body", 1000)

    async def test_chunked_body_over_the_cap_is_413(self, tmp_path: Path) -> None:
        """Without Content-Length the body is counted while it is read, and refused past the cap."""

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(20):
                yield b" " * 100

        app = _app(tmp_path / "home", max_body_bytes="1000")
        async with TestClient(TestServer(app, host="127.0.0.1")) as c:
            resp = await c.post("/v1/ingest", data=chunks(), headers={"Content-Type": "application/json"})
            assert (resp.status, (await resp.json())["error"]["field"]) == (413, "body")


class TestPaths:
    async def test_path_under_root_is_ingested(self, client: TestClient) -> None:
        """A relative path resolves under the allowed root and always runs as a task."""
        resp = await client.post("/v1/ingest", json={"path": "good.jsonl"})
        body = await resp.json()
        assert (resp.status, body["source"]["path"], body["source"]["format"]) == (202, "good.jsonl", "jsonl")
        done = await _finished(client, body["task_id"])
        assert (done["status"], done["report"]["created"], done["report"]["source"]) == ("succeeded", 1, "good.jsonl")

    @pytest.mark.parametrize("path", ["../secret.jsonl", "/etc/passwd", "{root}/../secret.jsonl"])
    async def test_path_outside_root_is_403(self, client: TestClient, root: Path, path: str) -> None:
        """Paths escaping the root (.., absolute elsewhere) are refused without being read."""
        resp = await client.post("/v1/ingest", json={"path": path.format(root=root)})
        assert (resp.status, (await resp.json())["error"]["field"]) == (403, "path")

    async def test_symlink_out_of_root_is_403(self, client: TestClient, root: Path, tmp_path: Path) -> None:
        """A link inside the root pointing outside it is resolved, then refused."""
        (root / "link.jsonl").symlink_to(tmp_path / "secret.jsonl")
        resp = await client.post("/v1/ingest", json={"path": "link.jsonl"})
        assert resp.status == 403

    async def test_folder_with_link_out_of_root_is_403(self, client: TestClient, root: Path, tmp_path: Path) -> None:
        """A folder is refused when a link inside it leads outside the root (the loaders would follow it)."""
        (root / "notes").mkdir()
        (root / "notes" / "a.md").write_text("# A\n\ntext\n")
        (root / "notes" / "leak.md").symlink_to(tmp_path / "secret.jsonl")
        resp = await client.post("/v1/ingest", json={"path": "notes"})
        body = await resp.json()
        assert (resp.status, body["error"]["field"]) == (403, "path")
        assert "leak.md" in body["error"]["message"]

    async def test_paths_disabled_without_root(self, tmp_path: Path) -> None:
        """With no allowed_root configured, every path request answers 403."""
        async with TestClient(TestServer(_app(tmp_path / "home"), host="127.0.0.1")) as c:
            resp = await c.post("/v1/ingest", json={"path": str(tmp_path)})
            body = await resp.json()
        assert (resp.status, body["error"]["field"]) == (403, "path")
        assert "allowed_root" in body["error"]["message"]

    @pytest.mark.fault
    async def test_a_fifo_under_the_root_is_400_without_blocking(self, client: TestClient, root: Path) -> None:
        """A path naming a FIFO (a socket, a device) is refused at submission, never opened: it would block the
        tenant's task queue for good. The test holds the FIFO's write end meanwhile and closes it at the end, so
        a reader the fix failed to stop sees end-of-file instead of blocking the suite."""
        os.mkfifo(root / "pipe.jsonl")
        held = os.open(root / "pipe.jsonl", os.O_RDWR | os.O_NONBLOCK)  # a writer: opening it never blocks
        try:
            resp = await asyncio.wait_for(client.post("/v1/ingest", json={"path": "pipe.jsonl"}), 60)
            body = await resp.json()
        finally:
            os.close(held)
        assert (resp.status, body["error"]["field"]) == (400, "path")
        assert body["error"]["message"] == (
            "path: pipe.jsonl is a FIFO (named pipe); ingest reads regular files and folders only"
        )

    async def test_a_writer_cannot_probe_which_paths_exist(self, tmp_path: Path, root: Path) -> None:
        """A writer's path submission answers the same 403 whether the path exists under the root, does not exist,
        or lies outside it: the server's disk is never looked at for a key that may not ingest paths."""
        from fabric.serve.keys.store import KeyStore, Role

        home = tmp_path / "home"
        writer = KeyStore(home).create("acme", Role.WRITER)[1]
        answers = set()
        async with TestClient(TestServer(_app(home, root), host="127.0.0.1")) as c:
            for path in ("good.jsonl", "nope.jsonl", "../secret.jsonl", "/etc/passwd", "/nowhere/x.jsonl"):
                resp = await c.post("/v1/ingest", json={"path": path}, headers={"Authorization": f"Bearer {writer}"})
                answers.add((resp.status, json.dumps(await resp.json(), sort_keys=True)))
        assert answers == {
            (403, json.dumps({"error": {"field": "path", "message": "only an admin key may ingest a path on the "
                                                                    "server"}}, sort_keys=True)),
        }  # fmt: skip

    async def test_missing_root_fails_at_start_up(self, tmp_path: Path) -> None:
        """A configured root that is not a folder fails when the app is built, naming the key."""
        with pytest.raises(ConfigError, match=r"ingest\.allowed_root"):
            _app(tmp_path / "home", tmp_path / "nowhere")

    async def test_failed_task_reports_its_error(self, client: TestClient, root: Path) -> None:
        """A malformed file fails its task with the loader's message, without the server's absolute path."""
        body = await (await client.post("/v1/ingest", json={"path": "bad.jsonl"})).json()
        done = await _finished(client, body["task_id"])
        assert (done["status"], done["report"]) == ("failed", None)
        assert done["error"].startswith("bad.jsonl:2: invalid JSON")
        assert str(root) not in done["error"]


class TestTrustAndConflicts:
    async def test_writer_cannot_mark_entries_trusted(self, tmp_path: Path) -> None:
        """A writer key's trusted/operator entries are refused 403 naming the field; an admin's are accepted."""
        from fabric.serve.keys.store import KeyStore, Role

        home = tmp_path / "home"
        writer = KeyStore(home).create("acme", Role.WRITER)[1]
        admin = KeyStore(home).create("acme", Role.ADMIN)[1]
        entry = {"id": "op-1", "text": "Operator note.", "source_kind": "operator"}
        async with TestClient(TestServer(_app(home), host="127.0.0.1")) as client:
            resp = await client.post(
                "/v1/ingest", json={"entries": [entry]}, headers={"Authorization": f"Bearer {writer}"}
            )
            assert (resp.status, (await resp.json())["error"]["field"]) == (403, "entries[0].source_kind")
            resp = await client.post(
                "/v1/ingest", json={"entries": [entry]}, headers={"Authorization": f"Bearer {admin}"}
            )
            assert resp.status == 200

    async def test_duplicate_ids_in_one_body_are_reported(self, client: TestClient) -> None:
        """Two entries with one id in one body: the report counts and names them (last wins), as the CLI does."""
        entries = [{"id": "d-1", "text": "first"}, {"id": "d-2", "text": "other"}, {"id": "d-1", "text": "last"}]
        resp = await client.post("/v1/ingest", json={"entries": entries})
        report = (await resp.json())["report"]
        assert resp.status == 200
        assert report["duplicates"] == {"count": 1, "ids": ["d-1"], "rule": "last-wins"}
        assert (report["docs"], report["chunks"], report["created"]) == (3, 2, 2)
        hits = await (await client.post("/v1/search", json={"query": "last"})).json()
        assert [h["text"] for h in hits["items"] if h["id"] == "d-1"] == ["last"]

    async def test_id_of_another_source_is_409_with_the_source(self, client: TestClient) -> None:
        """An entry id that a path source already holds answers 409 naming that source; the API's own ids update."""
        first = await (await client.post("/v1/ingest", json={"path": "good.jsonl"})).json()
        assert (await _finished(client, first["task_id"]))["status"] == "succeeded"
        resp = await client.post("/v1/ingest", json={"entries": [{"id": "p-1", "text": "hijack"}]})
        body = await resp.json()
        assert resp.status == 409, body
        assert body["error"]["task"]["conflicts"] == {"p-1": "jsonl:good.jsonl"}
        ok = await client.post("/v1/ingest", json={"entries": [{"id": "api-1", "text": "v1"}]})
        again = await client.post("/v1/ingest", json={"entries": [{"id": "api-1", "text": "v2"}]})
        assert (ok.status, again.status) == (200, 200)
        report = (await again.json())["report"]
        # each posted list is its own ledger source, yet an id an earlier list wrote is updated, not created
        assert (report["created"], report["updated"]) == (0, 1)


class TestIngestDoesNotStallSearches:
    async def test_searches_are_answered_while_a_large_ingest_runs(self, client: TestClient) -> None:
        """3,000 entries ingest as a task on the service's loop: searches sent meanwhile are answered (complete
        results) while the task is still running, at several distinct points of its progress, so nothing in the
        pipeline holds the loop for the length of a stage. The loop-lag sampler saw the whole run."""
        lag = client.server.app[LOOP_LAG_KEY]
        resp = await client.post("/v1/ingest", json={"entries": _entries(3000, "big"), "async": True})
        task_id = (await resp.json())["task_id"]
        seen: list[tuple[str, int]] = []  # (task status, units done over all stages) when a search was answered
        while True:
            # paced under the tenant's rate (100/s): a loop at full speed on a fast machine met its limit, and a
            # 429 is the limit working, not a search the ingest stalled, so it is waited out, never counted
            await asyncio.sleep(0.05)
            # every store is searched while it is written: the federation, not a routed subset
            search = {"query": "blue-green deploys release", "top_k": 3, "route": "all"}
            answer = await client.post("/v1/search", json=search)
            polled = await client.get(f"/v1/ingest/{task_id}")
            if 429 in (answer.status, polled.status):
                await asyncio.sleep(float(answer.headers.get("Retry-After") or polled.headers.get("Retry-After") or 1))
                continue
            body = await answer.json()
            assert answer.status == 200, body
            assert set(body["lanes"]) == {"keyword", "vector", "graph"}
            task = await polled.json()
            seen.append((task["status"], sum(p["done"] for p in task["progress"].values())))
            if task["status"] in ("succeeded", "failed"):
                break
        assert task["status"] == "succeeded", task
        during = {done for status, done in seen if status == "running"}
        assert len(during) >= 3, seen  # answered at three or more distinct points of the running ingest
        assert lag.snapshot()["samples"] > 0
        metrics = await (await client.get("/metrics")).text()
        assert "fabric_event_loop_lag_max_seconds" in metrics
