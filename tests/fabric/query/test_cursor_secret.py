"""Tests for fabric.query.cursor_secret: the environment wins, else one secret per home, created once (mode 0600)."""

from __future__ import annotations

import errno
import os
import stat
from concurrent.futures import ThreadPoolExecutor
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

    @pytest.mark.parametrize("stored", [b"", b"\n", b"0123456789abcdef"])
    def test_an_empty_or_short_file_is_replaced(self, tmp_path: Path, stored: bytes) -> None:
        """An empty or short file (a full disk interrupted an older version's write) is not a secret: it is
        replaced by a new one, private, which every later start reads (before, each start used a throwaway one)."""
        (tmp_path / "cursor.secret").write_bytes(stored)
        secret = load_cursor_secret(tmp_path)
        assert len(secret) == 64
        assert (tmp_path / "cursor.secret").read_bytes() == secret
        assert stat.S_IMODE((tmp_path / "cursor.secret").stat().st_mode) == 0o600
        assert load_cursor_secret(tmp_path) == secret
        assert sorted(p.name for p in tmp_path.iterdir()) == ["cursor.secret"]

    def test_a_full_disk_uses_a_process_secret_and_the_next_start_repairs(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """While every write fails with ENOSPC (injected at os.write, where the secret's bytes reach the disk), the
        engine gets a per-process secret and nothing half-written is left; once writes succeed again, the next start
        replaces the empty file and later starts agree on it."""
        (tmp_path / "cursor.secret").write_bytes(b"")

        def full(fd: int, data: bytes) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        with monkeypatch.context() as m:
            m.setattr(os, "write", full)
            first, second = load_cursor_secret(tmp_path), load_cursor_secret(tmp_path)
        assert first != second  # throwaway secrets while the disk is full
        assert sorted(p.name for p in tmp_path.iterdir()) == ["cursor.secret"]
        assert (tmp_path / "cursor.secret").read_bytes() == b""
        repaired = load_cursor_secret(tmp_path)
        assert len(repaired) == 64
        assert load_cursor_secret(tmp_path) == repaired

    def test_concurrent_starts_agree_on_one_secret(self, tmp_path: Path) -> None:
        """Engines starting together, on a home without a secret or with an empty one, all get the same secret."""
        for home, stored in ((tmp_path / "fresh", None), (tmp_path / "empty", b"")):
            home.mkdir()
            if stored is not None:
                (home / "cursor.secret").write_bytes(stored)
            with ThreadPoolExecutor(8) as pool:
                got = set(pool.map(lambda _: load_cursor_secret(home), range(16)))  # noqa: B023
            assert got == {(home / "cursor.secret").read_bytes()}
