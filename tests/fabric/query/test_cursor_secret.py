"""Tests for fabric.query.cursor_secret: the environment wins, else one secret per home, created once (mode 0600)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from fabric.query.cursor_secret import CURSOR_SECRET_ENV, load_cursor_secret


@pytest.fixture(autouse=True)
def _no_env_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CURSOR_SECRET_ENV, raising=False)


class TestLoadCursorSecret:
    def test_environment_secret_wins(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """With ``FABRIC_CURSOR_SECRET`` set, that secret is used and nothing is written."""
        monkeypatch.setenv(CURSOR_SECRET_ENV, "shared-by-replicas")
        assert load_cursor_secret(tmp_path / "home") == b"shared-by-replicas"
        assert not (tmp_path / "home").exists()

    def test_created_once_per_home(self, tmp_path: Path) -> None:
        """The first call creates the home's secret; later calls (another engine) read the same one."""
        first = load_cursor_secret(tmp_path / "home")
        assert len(first) == 64
        assert load_cursor_secret(tmp_path / "home") == first

    def test_secret_file_is_private(self, tmp_path: Path) -> None:
        """The secret file is readable by its owner only."""
        load_cursor_secret(tmp_path)
        assert stat.S_IMODE((tmp_path / "cursor.secret").stat().st_mode) == 0o600

    def test_homes_have_different_secrets(self, tmp_path: Path) -> None:
        """Two homes do not share a secret (a cursor of one is refused by the other)."""
        assert load_cursor_secret(tmp_path / "a") != load_cursor_secret(tmp_path / "b")

    def test_empty_secret_file_falls_back_to_a_process_secret(self, tmp_path: Path) -> None:
        """An empty file is not a secret: a random per-process one is used, and the file is left alone."""
        (tmp_path / "cursor.secret").write_bytes(b"")
        secret = load_cursor_secret(tmp_path)
        assert len(secret) == 64
        assert (tmp_path / "cursor.secret").read_bytes() == b""
