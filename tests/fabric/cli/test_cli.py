"""Tests for fabric.cli: subcommands registered, exit codes, clear errors instead of tracebacks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import fabric.cli.search as search
from fabric import __version__
from fabric.cli import COMMANDS, build_parser, main


class TestParser:
    def test_every_command_is_registered(self) -> None:
        """Each module named in COMMANDS adds its subcommand (``eval_cite`` adds ``eval-cite``)."""
        parser = build_parser()
        sub = next(a for a in parser._actions if a.dest == "command")
        assert {name.replace("_", "-") for name in COMMANDS} <= set(sub.choices)

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

    @pytest.mark.parametrize(
        ("argv", "name"),
        [
            (["delete", "--id", "ok", "--id", "\udcff\udcfe"], "--id"),
            (["delete", "--source", "a\udcff"], "--source"),
            (["audit", "--entry-id", "\udcff"], "--entry-id"),
            (["search", "q\udcff"], "query"),
            (["ingest", "notes", "--tenant", "\udcff"], "--tenant"),
        ],
    )
    def test_text_argument_that_is_not_utf8_exits_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], name: str
    ) -> None:
        """Bytes that are not UTF-8 in an id, a source, a query or a tenant (Python hands argv over
        surrogate-escaped) exit 2 with one line naming the argument, before any store is opened; never SQLite's
        UnicodeEncodeError traceback."""
        assert main(["--home", str(tmp_path / "h"), *argv]) == 2
        err = capsys.readouterr().err
        assert err == f"fabric: error: {name}: not valid UTF-8 (the argument holds bytes that are not text)\n"
        assert not (tmp_path / "h").exists()

    def test_file_names_may_hold_any_bytes(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A path argument is a file name, which may be any bytes: a note whose name is not UTF-8 is ingested."""
        name = os.fsdecode(b"n\xffote.md")
        (tmp_path / name).write_text("# Note\n\nLatin-1 file name.\n")
        env = {"FABRIC__embeddings__backend": "none", "FABRIC_CACHE_DIR": str(tmp_path / "cache")}
        with pytest.MonkeyPatch.context() as mp:
            for key, value in env.items():
                mp.setenv(key, value)
            assert main(["--home", str(tmp_path / "h"), "ingest", str(tmp_path / name), "--json"]) == 0
        assert '"created": 1' in capsys.readouterr().out

    def test_interrupt_is_exit_130(self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        """Ctrl-C during a command exits 130 with a short message."""

        def interrupted(args: object) -> int:
            raise KeyboardInterrupt

        monkeypatch.setattr(search, "run", interrupted)
        assert main(["search", "q"]) == 130
        assert "interrupted" in capsys.readouterr().err


class TestBehavesLikeItsPeers:
    def test_global_options_after_the_subcommand(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """``--home`` works after the subcommand as before it; the one after it wins."""
        args = build_parser().parse_args(["--home", "a", "search", "q", "--home", str(tmp_path), "-v"])
        assert (args.home, args.verbose) == (str(tmp_path), True)
        args = build_parser().parse_args(["--home", "a", "search", "q"])
        assert args.home == "a"
        args = build_parser().parse_args(["keys", "create", "--tenant", "t", "--home", "b"])
        assert args.home == "b"

    def test_a_busy_port_is_one_line_and_exit_3(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """``fabric serve`` on a port another process holds says so before loading anything, exit 3."""
        import socket

        with socket.create_server(("127.0.0.1", 0)) as held:
            port = held.getsockname()[1]
            assert main(["--home", str(tmp_path), "serve", "--port", str(port)]) == 3
        err = capsys.readouterr().err
        assert f"127.0.0.1:{port} is in use by another process" in err
        assert "Traceback" not in err

    def test_a_port_out_of_range_is_a_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        """``--port 70000`` is refused by the parser (exit 2, no traceback)."""
        with pytest.raises(SystemExit) as exc:
            main(["serve", "--port", "70000"])
        assert exc.value.code == 2
        assert "expected a port number from 0 to 65535, got 70000" in capsys.readouterr().err

    def test_an_empty_ingest_is_refused(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Ingesting a folder with nothing in it exits 2 with the reason."""
        empty = tmp_path / "empty"
        empty.mkdir()
        assert main(["--home", str(tmp_path / "home"), "ingest", str(empty), "--json"]) == 2
        assert "nothing to ingest" in capsys.readouterr().err

    def test_a_closed_pipe_is_exit_141_without_a_traceback(self, tmp_path: Path) -> None:
        """``fabric ... | head`` ends quietly when the reader goes away."""
        import subprocess
        import sys

        code = "import sys; from fabric.cli import main; sys.exit(main(['config', 'show']))"
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None
        proc.stdout.close()  # the reader is gone before the first line is written: every write fails
        _, err = proc.communicate()
        assert proc.returncode == 141
        assert b"Traceback" not in err
        assert b"BrokenPipeError" not in err
