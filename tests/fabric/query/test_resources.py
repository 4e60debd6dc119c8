"""Tests for the shared lane resources."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fabric.query.resources import HTTP_LIMIT_PER_HOST, close_resources, open_resources
from fabric.settings import Settings


class TestResources:
    async def test_session_has_explicit_limits(self, tmp_path: Path) -> None:
        """The shared session overrides aiohttp's 300 s total timeout and unlimited per-host pool."""
        res = await open_resources(Settings(home=tmp_path), embedder=False)
        try:
            assert res.http is not None
            assert res.http.timeout.total is not None
            assert res.http.timeout.total < 300
            assert res.http.connector is not None
            assert res.http.connector.limit_per_host == HTTP_LIMIT_PER_HOST
        finally:
            await close_resources(res)
        assert res.http.closed

    async def test_missing_embeddings_module_fails_open(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without an importable fabric.embed.embeddings the embedder is None and nothing raises."""
        monkeypatch.setitem(sys.modules, "fabric.embed.embeddings", None)
        res = await open_resources(Settings(home=tmp_path), embedder=True)
        try:
            assert res.embedder is None
        finally:
            await close_resources(res)
