"""Embedding privacy: remote embedding is off unless configured, and private sources never reach a remote embedder.

The remote embedder is a real OpenAI-compatible endpoint on loopback that records every text it receives; the
fabric reaches it through its own HTTP client (``[embeddings] backend = "openai"``).
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

import fabric.ingest.privacy as mod
from fabric.embed.embeddings import CachedEmbedder, EmbeddingCache, OpenAIEmbedder, build_embedder
from fabric.ingest.privacy import WITHHELD, is_private, is_remote
from fabric.ingest.run import run_ingest
from fabric.query.engine import Engine
from fabric.query.validation import parse_request
from fabric.serve.service import create_app
from fabric.settings import Settings, load_settings
from tests.support.embedded import BagEmbedder
from tests.support.http import serve

SECRET = "Zanzibar merger codename Bluefin"
PUBLIC = "Quarterly release notes for Widgets"


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[str, list[str]]]:
    """A loopback ``/v1/embeddings`` endpoint: its URL and every input text it has received."""
    received: list[str] = []

    async def embeddings(request: web.Request) -> web.Response:
        texts = (await request.json())["input"]
        received.extend(texts)
        data = [
            {"index": i, "embedding": [b / 255.0 + 0.01 for b in hashlib.sha256(t.encode()).digest()[:8]]}
            for i, t in enumerate(texts)
        ]
        return web.json_response({"data": data, "model": "e"})

    app = web.Application()
    app.router.add_post("/v1/embeddings", embeddings)
    async with serve(app) as srv:
        yield f"http://127.0.0.1:{srv.port}", received


def _settings(tmp_path: Path, url: str, private: str) -> Settings:
    return load_settings(
        env={
            "FABRIC_HOME": str(tmp_path / "home"),
            "FABRIC_CACHE_DIR": str(tmp_path / "cache"),
            "FABRIC__embeddings__backend": "openai",
            "FABRIC__embeddings__url": url,
            "FABRIC__embeddings__model": "e",
            "FABRIC__embeddings__private_sources": f'["{private}"]',
        }
    )


def _notes(root: Path) -> tuple[Path, Path]:
    public, private = root / "public", root / "private"
    for folder, text in ((public, PUBLIC), (private, SECRET)):
        folder.mkdir(parents=True)
        (folder / "note.md").write_text(f"# Note\n\n{text}.\n")
    return public, private


class TestRemoteIsOptIn:
    def test_default_settings_embed_locally(self, tmp_path: Path) -> None:
        """The shipped configuration uses the in-process model: no endpoint, nothing remote, nothing private."""
        settings = load_settings(env={"FABRIC_HOME": str(tmp_path)})
        assert (settings.embeddings.backend, settings.embeddings.url) == ("minilm", "")
        assert settings.embeddings.private_sources == ()
        assert not is_remote(build_embedder(settings.embeddings, tmp_path / "cache"))

    def test_http_embedders_are_remote_even_behind_the_cache(self, tmp_path: Path) -> None:
        """Any HTTP endpoint is remote (even on loopback: it may forward); local and absent embedders are not."""
        http = OpenAIEmbedder(url="http://127.0.0.1:9", model="e")
        assert is_remote(http)
        assert is_remote(CachedEmbedder(http, EmbeddingCache(tmp_path, "e")))
        assert not is_remote(BagEmbedder())
        assert not is_remote(None)


class TestPatterns:
    def test_files_and_folders_match(self, tmp_path: Path) -> None:
        """A pattern matches a file by its resolved path; a folder matches when it holds a matching file."""
        public, private = _notes(tmp_path)
        assert is_private(private / "note.md", ["*/private/*"])
        assert is_private(tmp_path, ["*/private/*"])  # the parent folder would carry the private note
        assert not is_private(public, ["*/private/*"])
        assert not is_private(private, [])


class TestIngestWithARemoteEmbedder:
    async def test_private_source_text_never_reaches_the_endpoint(
        self, tmp_path: Path, endpoint: tuple[str, list[str]]
    ) -> None:
        """CLI ingestion: the public note is embedded remotely, the private one only goes to the lexical and
        graph stores (the report says so) and stays searchable there."""
        url, received = endpoint
        settings = _settings(tmp_path, url, "*/private/*")
        public, private = _notes(tmp_path / "notes")
        pub = await run_ingest(settings, public, None)
        priv = await run_ingest(settings, private, None)
        assert any(PUBLIC in t for t in received)
        assert not any("Zanzibar" in t or "Bluefin" in t for t in received)
        assert (pub.embedded, pub.embeddings) == (1, "ok")
        assert (priv.embedded, priv.embeddings) == (0, WITHHELD)
        async with Engine(settings) as engine:
            request = parse_request({"query": "merger codename", "lanes": ["keyword"]}, settings)
            result = await engine.search(request)
        assert [it.hit.title for it in result.items] == ["Note"]
        assert "Zanzibar" in result.items[0].hit.text

    async def test_entries_posted_to_the_service_can_be_private(
        self, tmp_path: Path, endpoint: tuple[str, list[str]]
    ) -> None:
        """``*/spool/*`` keeps every entry list posted to ``POST /v1/ingest`` on the machine."""
        url, received = endpoint
        settings = _settings(tmp_path, url, "*/spool/*")
        entries = [{"id": "s-1", "title": "Deal", "text": SECRET}]
        async with TestClient(TestServer(create_app(Engine(settings)), host="127.0.0.1")) as client:
            resp = await client.post("/v1/ingest", json={"entries": entries})
            body: dict[str, Any] = await resp.json()
        assert resp.status == 200, body
        assert body["report"]["embeddings"] == WITHHELD
        assert body["report"]["created"] == 1
        assert not any("Zanzibar" in t for t in received)


def test_public_api() -> None:
    """The module's exports."""
    assert set(mod.__all__) == {"WITHHELD", "is_private", "is_remote"}
