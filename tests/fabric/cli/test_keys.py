"""``fabric keys create|list|revoke`` through the real CLI entry point and a real key store."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from fabric.cli import main
from fabric.serve.keys.store import KeyStore, Role


def _create(home: Path, *extra: str) -> int:
    return main(["--home", str(home), "keys", "create", "--tenant", "acme", *extra])


class TestKeysCommand:
    def test_create_json_gives_every_detail(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--json prints the key with its id, tenant and role as one object."""
        assert _create(tmp_path, "--role", "admin", "--json") == 0
        out = json.loads(capsys.readouterr().out)
        assert (out["tenant"], out["role"]) == ("acme", "admin")
        assert out["key"].startswith(f"fab_{out['key_id']}_")
        assert KeyStore(tmp_path).verify(out["key"]) is not None

    def test_create_prints_the_key_once(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """create prints a working key alone on stdout (details on stderr); list shows its id and role but never the
        key."""
        assert _create(tmp_path, "--role", "writer") == 0
        printed = capsys.readouterr()
        token = printed.out.strip()
        assert printed.out == token + "\n"  # `Authorization: Bearer $(fabric keys create ...)` is one clean line
        assert "tenant acme, role writer" in printed.err
        assert KeyStore(tmp_path).verify(token) is not None
        assert main(["--home", str(tmp_path), "keys", "list", "--json"]) == 0
        listed = capsys.readouterr().out
        assert token not in listed
        (row,) = json.loads(listed)
        assert (row["tenant"], row["role"], row["revoked_at"]) == ("acme", "writer", None)

    def test_revoke(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """revoke stops a key; an unknown id exits 1 with a message."""
        record, token = KeyStore(tmp_path).create("acme", Role.READER)
        assert main(["--home", str(tmp_path), "keys", "revoke", record.key_id]) == 0
        assert KeyStore(tmp_path).verify(token) is None
        assert main(["--home", str(tmp_path), "keys", "revoke", record.key_id]) == 1
        assert "no active key" in capsys.readouterr().err

    def test_token_file_if_missing(self, tmp_path: Path) -> None:
        """--token-file writes the key with mode 0600; --if-missing leaves an existing file alone."""
        target = tmp_path / "secrets" / "metrics.key"
        assert _create(tmp_path, "--token-file", str(target), "--if-missing") == 0
        token = target.read_text()
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
        assert _create(tmp_path, "--token-file", str(target), "--if-missing") == 0
        assert target.read_text() == token
        assert len(KeyStore(tmp_path).list()) == 1

    def test_existing_token_file_is_an_error(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Without --if-missing an existing file is not overwritten (exit 2, clear message)."""
        target = tmp_path / "k"
        target.write_text("x")
        assert _create(tmp_path, "--token-file", str(target)) == 2
        assert "refusing to overwrite" in capsys.readouterr().err

    def test_bad_tenant_is_a_clear_error(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """An invalid tenant name exits 2 with a message, no traceback."""
        assert main(["--home", str(tmp_path), "keys", "create", "--tenant", "Bad Name"]) == 2
        err = capsys.readouterr().err
        assert "tenant" in err
        assert "Traceback" not in err


def test_file_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--file-mode sets the key file's permissions; a non-octal mode is a clear error."""
    target = tmp_path / "k"
    assert _create(tmp_path, "--token-file", str(target), "--file-mode", "644") == 0
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert _create(tmp_path, "--token-file", str(tmp_path / "j"), "--file-mode", "9x") == 2
    assert "--file-mode" in capsys.readouterr().err


def test_the_first_key_says_where_the_data_went(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Creating the first key, for another tenant, over a home with data says that data is tenant 'default''s."""
    import asyncio

    from fabric.ingest.run import run_ingest
    from fabric.settings import load_settings

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n\nSome note.\n")
    settings = load_settings(env={"FABRIC_HOME": str(tmp_path / "home"), "FABRIC__embeddings__backend": "none"})
    asyncio.run(run_ingest(settings, notes, "markdown"))
    assert _create(tmp_path / "home") == 0
    err = capsys.readouterr().err
    assert "this is the first key" in err
    assert "belong to tenant 'default'" in err
    assert "fabric keys create --tenant default" in err
    assert _create(tmp_path / "home") == 0
    assert "first key" not in capsys.readouterr().err
