"""Tests for ``fabric audit`` through ``fabric.cli.main`` over a real embedded home (ingested, then deleted from)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fabric.cli.audit as audit_mod
from fabric.cli import main

pytestmark = pytest.mark.usefixtures("lexical_only")


class TestAuditCommand:
    def test_audit_shows_created_and_deleted(self, cli_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Ingest and delete are in the history; --entry-id filters; --json pages."""
        main(["--home", str(cli_home), "delete", "--id", "kb-1"])
        capsys.readouterr()
        assert main(["--home", str(cli_home), "audit", "--entry-id", "kb-1", "--json"]) == 0
        page = json.loads(capsys.readouterr().out)
        entries = [(r["action"], r["via"]) for r in page["records"] if r["subject"] == "entry"]
        assert entries == [("created", "cli"), ("deleted", "cli")]
        assert main(["--home", str(cli_home), "audit", "--limit", "1"]) == 0
        out = capsys.readouterr().out
        assert "created" in out
        assert "more: fabric audit --after 1" in out

    def test_bad_arguments_exit_2(self, cli_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A bad --since or --limit is one line naming it."""
        assert main(["--home", str(cli_home), "audit", "--since", "soon"]) == 2
        assert "since" in capsys.readouterr().err
        assert main(["--home", str(cli_home), "audit", "--limit", "0"]) == 2


class TestTenants:
    def test_a_tenants_history_is_its_own_and_the_operators(
        self, tmp_path: Path, lexical_only: None, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``fabric ingest`` and ``fabric delete --tenant acme`` are audited as acme's, by the operator, in acme's
        folder: ``fabric audit --tenant acme`` (or ``--home <home>/tenants/acme``) lists them, ``default`` does not."""
        corpus = tmp_path / "kb.jsonl"
        corpus.write_text('{"id": "kb-1", "text": "Alice leads Falcon."}\n{"id": "kb-2", "text": "Bob writes."}\n')
        home = tmp_path / "h"
        assert main(["--home", str(home), "ingest", str(corpus), "--tenant", "acme", "--json"]) == 0
        assert main(["--home", str(home / "tenants" / "acme"), "delete", "--id", "kb-1"]) == 0
        capsys.readouterr()
        pages = []
        for argv in (
            ["--home", str(home), "audit", "--tenant", "acme"],
            ["--home", str(home / "tenants" / "acme"), "audit"],
        ):
            assert main([*argv, "--json"]) == 0
            pages.append(json.loads(capsys.readouterr().out))
        assert pages[0] == pages[1]
        entries = [(r["entry_id"], r["action"], r["tenant"], r["key_id"], r["via"]) for r in pages[0]["records"]
                   if r["subject"] == "entry"]  # fmt: skip
        assert entries == [
            ("kb-1", "created", "acme", "operator", "cli"),
            ("kb-2", "created", "acme", "operator", "cli"),
            ("kb-1", "deleted", "acme", "operator", "cli"),
        ]
        assert main(["--home", str(home), "audit", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["records"] == []

    def test_tenant_flag_contradicting_the_folder_exits_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``--home <home>/tenants/acme --tenant beta`` is one line naming both, exit 2."""
        home = tmp_path / "h"
        (home / "tenants" / "acme").mkdir(parents=True)
        (home / "fabric.lock").write_text("")
        assert main(["--home", str(home / "tenants" / "acme"), "audit", "--tenant", "beta"]) == 2
        err = capsys.readouterr().err
        assert "folder of tenant acme, not of --tenant beta" in err
        assert err.count("\n") == 1


def test_public_api() -> None:
    """The module exports register and run."""
    assert set(audit_mod.__all__) == {"register", "run"}
