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


def test_public_api() -> None:
    """The module exports register and run."""
    assert set(audit_mod.__all__) == {"register", "run"}
