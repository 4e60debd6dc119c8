"""What an operator sees: one JSON log stream with an access line per request, HTTP, process and build metrics,
and no key in any line (a real ``fabric serve`` process, its stderr read whole)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

import fabric.serve.observe as mod
from fabric.query.engine import Engine
from fabric.serve.service import create_app
from fabric.settings import load_settings
from lanes.base import LaneResources
from lanes.fake import FakeLane

ROOT = Path(__file__).resolve().parents[3]


async def test_metrics_count_requests_by_route_and_status(tmp_path: Path) -> None:
    """Requests are counted by route pattern (not raw path) and status; process, python and build series exist;
    the answer carries the request id."""
    settings = load_settings(env={"FABRIC_HOME": str(tmp_path)})
    engine = Engine(
        settings, lanes={"keyword": FakeLane(name="keyword", hits=3)}, resources=LaneResources(home=tmp_path)
    )
    async with TestClient(TestServer(create_app(engine), host="127.0.0.1")) as client:
        ok = await client.post("/v1/search", json={"query": "rrf", "lanes": ["keyword"]})
        assert ok.status == 200
        assert len(ok.headers["X-Request-Id"]) == 16
        given = await client.post("/v1/search", json={"query": ""}, headers={"X-Request-Id": "req-12345678"})
        assert (given.status, given.headers["X-Request-Id"]) == (400, "req-12345678")
        await client.get("/v1/ingest/no-such-task")
        text = await (await client.get("/metrics")).text()
    assert 'fabric_http_requests_total{method="POST",route="/v1/search",status="200"} 1.0' in text
    assert 'fabric_http_requests_total{method="POST",route="/v1/search",status="400"} 1.0' in text
    assert 'route="/v1/ingest/{task_id}"' in text
    assert 'fabric_http_request_duration_seconds_bucket{le="0.3",route="/v1/search",tenant="default"}' in text
    assert "process_resident_memory_bytes" in text
    assert "python_info{" in text
    assert 'fabric_build_info{revision="unknown",version="' in text
    assert "fabric_store_writable 1.0" in text


def test_public_api() -> None:
    assert set(mod.__all__) == {"HTTP_METRICS_KEY", "TRACE_KEY", "HttpMetrics", "observe"}


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[int, str, subprocess.Popen[str]]]:
    """A real ``fabric serve`` with one key, embeddings off; yields (port, key, process)."""
    home = tmp_path / "home"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "FABRIC__embeddings__backend": "none"}
    env.pop("FABRIC_HOME", None)
    key = subprocess.run(
        [sys.executable, "-m", "fabric.cli", "--home", str(home), "keys", "create", "--tenant", "acme", "--role",
         "reader"], cwd=ROOT, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "fabric.cli", "--home", str(home), "serve", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert "serving on" in proc.stdout.readline()
    try:
        yield port, key, proc
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(request)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_one_json_stream_with_access_lines_and_no_key(service: tuple[int, str, subprocess.Popen[str]]) -> None:
    """Every line on stderr is JSON; a search gets an access line with tenant, key id, trace id and bytes; a
    malformed Authorization header (a key followed by a second line, as `$(fabric keys create)` once gave) is
    refused and the key appears in no line."""
    port, key, proc = service
    body = b'{"query": "anything"}'
    good = _raw(port, b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: "
                b"application/json\r\nAuthorization: Bearer " + key.encode() + b"\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\n\r\n" + body)  # fmt: skip
    assert good.startswith(b"HTTP/1.1 200")
    trace = json.loads(good.split(b"\r\n\r\n", 1)[1])["trace_id"]
    bad = _raw(port, b"GET /v1/audit HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer "
               + key.encode() + b"\nkey 0123: tenant acme, role reader (shown once)\r\n\r\n")  # fmt: skip
    assert b" 400 Bad Request" in bad.split(b"\r\n", 1)[0]
    anonymous = _raw(port, b"GET /v1/entries?source=api HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert anonymous.startswith(b"HTTP/1.1 401")
    time.sleep(0.5)  # the access lines are written after the answers
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    lines = [json.loads(line) for line in err.splitlines() if line.strip()]  # every line parses as JSON
    assert key not in err
    assert key.split("_", 2)[2] not in err  # not even the secret part alone (which may itself hold "_")
    access = [line for line in lines if line["event"] == "http_request" and line["path"] == "/v1/search"]
    (search,) = access
    assert (search["method"], search["status"], search["tenant"], search["trace_id"]) == ("POST", 200, "acme", trace)
    assert search["key_id"] == key.split("_", 2)[1]
    refused = [line for line in lines if line["event"] == "http_request" and line["path"] == "/v1/entries"]
    assert [(r["status"], r["tenant"], r["key_id"]) for r in refused] == [(401, None, None)]  # no key: nobody
    assert search["bytes"] > 0
    assert search["duration_ms"] > 0
