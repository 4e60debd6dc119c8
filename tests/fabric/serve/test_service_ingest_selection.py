"""POST /v1/ingest ``{"path": ..., "include": [...], "exclude": [...]}`` on loopback: the request's allowlist narrows
the folder, the task and its report name it, bad allowlists answer 400 before any task exists."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from fabric.ingest.ledger import Ledger
from fabric.query.engine import Engine
from fabric.serve.service import create_app
from fabric.serve.tasks.store import IngestTask, row_task, task_row
from fabric.serve.tasks.submission import Submission
from fabric.settings import load_settings
from lanes.base import LaneResources
from tests.support.embedded import BagEmbedder


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The allowed root: a notes folder (decisions, a draft, a README) and an entry file."""
    d = tmp_path / "allowed"
    for rel in ("notes/decisions/d1.md", "notes/decisions/d2.md", "notes/drafts/wip.md", "notes/README.md"):
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(f"# {rel}\n\nAbout {rel}.\n")
    (d / "kb.jsonl").write_text('{"id": "kb-1", "text": "Bob writes docs."}\n')
    return d


@pytest.fixture
async def client(tmp_path: Path, root: Path) -> AsyncIterator[TestClient[Any, Any]]:
    env = {"FABRIC_HOME": str(tmp_path / "home"), "FABRIC__ingest__allowed_root": str(root),
           "FABRIC__ingest__exclude": '["README.md"]'}  # fmt: skip
    engine = Engine(load_settings(env=env), resources=LaneResources(home=tmp_path / "home", embedder=BagEmbedder()))
    async with TestClient(TestServer(create_app(engine), host="127.0.0.1")) as c:
        yield c


async def _finished(client: TestClient[Any, Any], task_id: str) -> dict[str, Any]:
    for _ in range(10_000):
        body: dict[str, Any] = await (await client.get(f"/v1/ingest/{task_id}")).json()
        if body["status"] in ("succeeded", "failed"):
            return body
        await asyncio.sleep(0.005)
    raise AssertionError(f"task {task_id} did not finish: {body}")


async def test_request_allowlist_narrows_the_folder(client: TestClient[Any, Any], tmp_path: Path) -> None:
    """The request's include replaces the configured one, its exclude wins over it; the config's exclude is kept
    when the request gives none, and the task's source and report name the effective allowlist."""
    body = {"path": "notes", "include": ["decisions", "drafts"], "exclude": ["decisions/d2.md"]}
    resp = await client.post("/v1/ingest", json=body)
    task = await resp.json()
    assert resp.status == 202, task
    assert (task["source"]["include"], task["source"]["exclude"]) == (["decisions", "drafts"], ["decisions/d2.md"])
    done = await _finished(client, task["task_id"])
    assert done["status"] == "succeeded", done
    report = done["report"]
    assert report["docs"] == 2
    assert report["allowlist"]["set_by"] == {"include": "request", "exclude": "request"}
    assert (report["trust"]["trusted"], report["trust"]["untrusted"]) == (1, 1)
    ledger = Ledger(tmp_path / "home" / "ledger.sqlite")
    try:
        docs = {e.doc_id for e in ledger.matching(sources=ledger.sources())}
    finally:
        ledger.close()
    assert docs == {"notes:decisions/d1.md", "notes:drafts/wip.md"}

    done = await _finished(client, (await (await client.post("/v1/ingest", json={"path": "notes"})).json())["task_id"])
    assert done["report"]["allowlist"]["exclude"] == ["README.md"]
    assert done["report"]["allowlist"]["set_by"] == {"include": "default", "exclude": "config"}
    assert done["report"]["docs"] == 3


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"path": "notes", "include": ["/etc/**"]}, "include", "globs are relative to the ingested folder"),
        ({"path": "notes", "exclude": "drafts"}, "exclude", "expected a list of path globs"),
        ({"path": "notes", "include": ["decisons"]}, "include", "admits none of the 4 file(s) under notes;"),
        ({"path": "kb.jsonl", "include": ["*.jsonl"]}, "include", "a jsonl source is one file"),
        ({"entries": [{"id": "e", "text": "t"}], "exclude": ["x"]}, "exclude", "entries are not a folder"),
    ],
)
async def test_bad_allowlists_answer_400(
    client: TestClient[Any, Any], body: dict[str, Any], field: str, message: str
) -> None:
    """Checked at submission: the usual error body naming the field, no task, no server path in the message."""
    resp = await client.post("/v1/ingest", json=body)
    error = (await resp.json())["error"]
    assert (resp.status, error["field"]) == (400, field), error
    assert message in error["message"]
    assert "allowed" not in error["message"]  # the server's folder is never shown


def test_task_records_keep_the_allowlist(tmp_path: Path) -> None:
    """A queued path task keeps its include/exclude across a restart (the task store's row)."""
    sub = Submission(kind="path", fingerprint="f" * 64, path=tmp_path, requested_path="notes", fmt="markdown",
                     include=("decisions",), exclude=())  # fmt: skip
    task = IngestTask(id="t1", key="content:x", submission=sub, source_path=tmp_path, tenant="default")
    back = row_task(task_row(task)).submission
    assert (back.include, back.exclude) == (("decisions",), ())
    plain = row_task(task_row(IngestTask(id="t2", key="k", submission=Submission(kind="path", fingerprint="f"),
                                         source_path=tmp_path, tenant="default"))).submission  # fmt: skip
    assert (plain.include, plain.exclude) == (None, None)
