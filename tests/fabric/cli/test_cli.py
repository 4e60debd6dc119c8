"""Tests for fabric.cli: subcommands registered, exit codes, clear errors instead of tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest

import fabric.cli.search as search
from fabric import __version__
from fabric.cli import COMMANDS, build_parser, main


class TestParser:
    def test_every_command_is_registered(self) -> None:
        """Each module named in COMMANDS adds its subcommand."""
        parser = build_parser()
        sub = next(a for a in parser._actions if a.dest == "command")
        assert set(COMMANDS) <= set(sub.choices)

    def test_version(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``--version`` prints the package version and exits 0."""
        with pytest.raises(SystemExit) as exc:
            main(["--version"])
        assert exc.value.code == 0
        assert __version__ in capsys.readouterr().out


class TestExitCodes:
    def test_no_command_prints_help_and_exits_2(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Without a subcommand the help is shown and the exit code says it was a usage error."""
        assert main([]) == 2
        assert "COMMAND" in capsys.readouterr().out

    def test_fabric_error_is_one_line_on_stderr(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A bad config is exit 2 with ``fabric: error: <file>: ...``, never a traceback."""
        bad = tmp_path / "bad.toml"
        bad.write_text("schema = 1\n[nonsense]\n")
        assert main(["--config", str(bad), "search", "q"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("fabric: error: ")
        assert "unknown section(s) nonsense" in err
        assert "Traceback" not in err

    def test_interrupt_is_exit_130(self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        """Ctrl-C during a command exits 130 with a short message."""

        def interrupted(args: object) -> int:
            raise KeyboardInterrupt

        monkeypatch.setattr(search, "run", interrupted)
        assert main(["search", "q"]) == 130
        assert "interrupted" in capsys.readouterr().err
