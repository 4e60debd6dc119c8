"""Tests for ``fabric ingest`` through ``fabric.cli.main``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabric.cli import main


@pytest.fixture(autouse=True)
def _lexical_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No model in these tests: embeddings off, caches in tmp_path."""
    monkeypatch.setenv("FABRIC__embeddings__backend", "none")
    monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """A folder with two notes."""
    d = tmp_path / "notes"
    d.mkdir()
    (d / "a.md").write_text("# Alpha\n\nQdrant local mode.\n")
    (d / "b.md").write_text("# Beta\n\nSQLite FTS5.\n")
    return d


class TestIngestCommand:
    def test_json_summary(self, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--json prints the counts, per-stage seconds and docs/s, and the embeddings status."""
        assert main(["--home", str(tmp_path / "h"), "ingest", str(docs), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert (out["format"], out["docs"], out["created"]) == ("markdown", 2, 2)
        assert set(out["docs_per_s"]) >= {"load", "chunk", "embed", "write"}
        assert out["embeddings"].startswith("disabled")

    def test_single_user_home_is_the_default_tenant(
        self, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """No keys, no tenants: the CLI writes and searches the home itself (today's paths, no tenants folder)."""
        home = tmp_path / "h"
        assert main(["--home", str(home), "ingest", str(docs), "--json"]) == 0
        capsys.readouterr()
        assert main(["--home", str(home), "search", "Qdrant local mode", "--json", "--lanes", "keyword"]) == 0
        items = json.loads(capsys.readouterr().out)["items"]
        assert items
        assert items[0]["title"] == "Alpha"
        assert (home / "keyword.sqlite").is_file()
        assert (home / "ledger.sqlite").is_file()
        assert not (home / "tenants").exists()

    def test_tenant_option_writes_and_searches_that_tenant_only(
        self, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``--tenant acme`` fills ``<home>/tenants/acme``; acme's search finds it, the default tenant's does not."""
        home = tmp_path / "h"
        assert main(["--home", str(home), "ingest", str(docs), "--tenant", "acme", "--json"]) == 0
        capsys.readouterr()
        found = {}
        for tenant in ("acme", "default"):
            argv = ["--home", str(home), "search", "Qdrant local mode", "--json", "--lanes", "keyword"]
            assert main([*argv, "--tenant", tenant]) == 0
            found[tenant] = [it["title"] for it in json.loads(capsys.readouterr().out)["items"]]
        assert found == {"acme": ["Alpha"], "default": []}
        assert (home / "tenants" / "acme" / "keyword.sqlite").is_file()

    def test_bad_tenant_exits_2(self, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A tenant name unsafe for a path is one clear line, exit 2, nothing written."""
        assert main(["--home", str(tmp_path / "h"), "ingest", str(docs), "--tenant", "../up", "--json"]) == 2
        assert "tenant '../up'" in capsys.readouterr().err
        assert not (tmp_path / "up").exists()

    def test_rerun_is_idempotent(self, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A second run reports every chunk unchanged."""
        argv = ["--home", str(tmp_path / "h"), "ingest", str(docs), "--json"]
        main(argv)
        capsys.readouterr()
        main(argv)
        out = json.loads(capsys.readouterr().out)
        assert (out["unchanged"], out["created"]) == (2, 0)

    def test_human_summary(self, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Without --json a readable summary is printed."""
        assert main(["--home", str(tmp_path / "h"), "ingest", str(docs)]) == 0
        assert "created 2" in capsys.readouterr().out

    def test_missing_path_exits_2(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A missing path is a clear error with exit code 2."""
        assert main(["--home", str(tmp_path / "h"), "ingest", str(tmp_path / "nope")]) == 2
        assert "does not exist" in capsys.readouterr().err

    def test_wrong_format_exits_2(self, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Forcing jsonl on Markdown fails with exit 2 and a message naming the file, no traceback."""
        assert main(["--home", str(tmp_path / "h"), "ingest", str(docs / "a.md"), "--format", "jsonl"]) == 2
        err = capsys.readouterr().err
        assert "a.md:1: invalid JSON" in err
        assert "Traceback" not in err


def _jsonl(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _big_jsonl(path: Path, n: int = 600) -> Path:
    rows = [json.dumps({"id": f"e{i}", "title": f"T{i}", "text": f"word{i} " * 150}).encode() for i in range(n)]
    return _jsonl(path, rows)


class TestHostileInput:
    @pytest.mark.parametrize(
        ("line", "words"),
        [
            (b'{"id": "a", "text": "bad \\ud800 text"}', "2: text: invalid Unicode: lone surrogate"),
            (b'{"id": "a\\udfff", "text": "t"}', "2: id: invalid Unicode"),
            (b'{"id": "a", "text": "t", "title": "\\udc80"}', "2: title: invalid Unicode"),
            (b"[" * 100_000 + b"]" * 100_000, "2: nested too deeply"),
            (b'{"id": "a", "text": "t", "m": ' + b"[" * 70 + b"]" * 70 + b"}", "nested deeper than 64 levels"),
            (b'{"id": "a", "text": "t", "score": NaN}', "2: invalid JSON: NaN"),
            (b'{"id": "a", "text": "t", "n": ' + b"9" * 5000 + b"}", "2: a number of 5000 digits (at most 64)"),
            (b'{"id": ' + b"9" * 100_000 + b', "text": "t"}', "2: a number of 100000 digits (at most 64)"),
        ],
    )
    def test_bad_jsonl_line_exits_2_naming_line_and_field(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], line: bytes, words: str
    ) -> None:
        """A lone surrogate in text/id/title, a line nested 100,000 deep or NaN: exit 2, one line, no traceback."""
        src = _jsonl(tmp_path / "in.jsonl", [b'{"id": "ok", "text": "fine"}', line])
        assert main(["--home", str(tmp_path / "h"), "ingest", str(src), "--json"]) == 2
        err = capsys.readouterr().err
        assert words in err
        assert "Traceback" not in err

    @pytest.mark.parametrize("name", ["pipe.jsonl", "pipe.md"])
    @pytest.mark.fault
    def test_a_fifo_exits_2_without_blocking(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
    ) -> None:
        """A path naming a FIFO exits 2 with one line saying so; it is never opened for a blocking read (the run
        goes in a thread joined with a bound: were it blocked, a writer releases it and the test fails)."""
        pipe = tmp_path / name
        os.mkfifo(pipe)
        for extra in ([], ["--format", "jsonl" if name.endswith("jsonl") else "markdown"]):
            codes: list[int] = []
            argv = ["--home", str(tmp_path / "h"), "ingest", str(pipe), *extra]
            run = threading.Thread(target=lambda a=argv, c=codes: c.append(main(a)), daemon=True)
            run.start()
            run.join(timeout=60)
            if run.is_alive():
                os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
                run.join(timeout=60)
                pytest.fail("fabric ingest blocked opening a FIFO")
            assert codes == [2]
            err = capsys.readouterr().err
            assert f"path: {pipe} is a FIFO (named pipe); ingest reads regular files and folders only" in err
            assert "Traceback" not in err


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 256 KiB tmpfs (needs root: skipped otherwise; the RLIMIT_FSIZE test below runs anywhere)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


class TestFullDisk:
    def test_full_tmpfs_exits_1_with_one_line(
        self, small_disk: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Ingesting 600 KB into a 256 KiB file system: SQLite's "database or disk is full" becomes one clear
        line and exit 1, both with and without --json (the progress bars close first)."""
        src = _big_jsonl(tmp_path / "big.jsonl")
        for extra in (["--json"], []):
            home = small_disk / f"h{len(extra)}"
            assert main(["--home", str(home), "ingest", str(src), *extra]) == 1
            err = capsys.readouterr().err
            assert "fabric: error: ingest could not write its stores" in err
            assert "disk is full" in err
            assert "Traceback" not in err
            shutil.rmtree(home)

    def test_file_size_limit_exits_1_without_traceback(self, tmp_path: Path) -> None:
        """The same through a real subprocess whose files may not grow past 256 KiB (RLIMIT_FSIZE, no root
        needed): SQLite's write error is one clear line and exit 1."""

        src = _big_jsonl(tmp_path / "big.jsonl")
        env = {**os.environ, "FABRIC__embeddings__backend": "none", "FABRIC_CACHE_DIR": str(tmp_path / "cache")}
        cli = [sys.executable, "-m", "fabric.cli", "--home", str(tmp_path / "h"), "ingest", str(src), "--json"]
        # the shell sets the limit (no preexec_fn in a threaded test process) and ignores SIGXFSZ, so writes past
        # 256 KiB fail with EFBIG as a full disk's fail with ENOSPC
        argv = ["sh", "-c", 'trap "" XFSZ; ulimit -f 256; exec "$@"', "sh", *cli]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 1, done.stderr
        assert "fabric: error: ingest could not write its stores: OperationalError" in done.stderr
        assert "Traceback" not in done.stderr


_HOLD_QDRANT = """
import sys, time
from qdrant_client import QdrantClient
client = QdrantClient(path=sys.argv[1])
print("held", flush=True)
time.sleep(120)
"""


@pytest.fixture
def held_qdrant(tmp_path: Path) -> Iterator[Path]:
    """A Qdrant local folder another process holds (as a running service does), in a home configured for it."""
    folder = tmp_path / "h" / "qdrant"
    folder.mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-c", _HOLD_QDRANT, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        yield folder
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


class TestStoreFailure:
    def test_qdrant_folder_held_by_another_process_exits_1_naming_the_store(
        self, held_qdrant: Path, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:  # fmt: skip
        """Another process holds the Qdrant folder: the other stores are written, the summary is printed, and
        the exit code is 1 with one line naming qdrant and the pending count; the next run (folder free) repairs."""
        monkeypatch.setenv("FABRIC__lanes__vector__backend", "qdrant")
        argv = ["--home", str(tmp_path / "h"), "ingest", str(docs), "--json"]
        assert main(argv) == 1
        captured = capsys.readouterr()
        out = json.loads(captured.out)
        assert out["stores"]["qdrant"].startswith("error: qdrant local store unavailable")
        assert (out["stores"]["sqlite_fts"], out["stores"]["sqlite_graph"]) == ("ok", "ok")
        assert "ingest could not write its stores: qdrant: qdrant local store unavailable" in captured.err
        assert "Traceback" not in captured.err

    def test_store_in_an_unwritable_place_exits_1_and_the_next_run_repairs(
        self, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The keyword store's path lies under a regular file (it can never be created): exit 1 naming
        sqlite_fts, the ledger keeps its 2 chunks pending, and a run with the store fixed repairs exactly them."""
        blocker = tmp_path / "blocker"
        blocker.write_text("not a folder")
        monkeypatch.setenv("FABRIC__lanes__keyword__options__path", f'"{blocker / "keyword.sqlite"}"')
        argv = ["--home", str(tmp_path / "h"), "ingest", str(docs), "--json"]
        assert main(argv) == 1
        captured = capsys.readouterr()
        out = json.loads(captured.out)
        assert out["stores"]["sqlite_fts"].startswith("error: FileExistsError")
        assert (out["pending"], out["created"]) == (2, 2)
        assert "ingest could not write its stores: sqlite_fts: FileExistsError" in captured.err
        assert "2 chunk(s) pending in the ledger" in captured.err
        monkeypatch.delenv("FABRIC__lanes__keyword__options__path")
        assert main(argv) == 0
        out = json.loads(capsys.readouterr().out)
        assert (out["repaired"], out["pending"], out["unchanged"]) == (2, 0, 0)


class TestCreatedVersusUpdated:
    def test_duplicate_ids_in_one_file_are_reported_last_wins(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Two lines with one id: the report counts and names them (rule last-wins), stderr warns, exit 0, and
        the stored text is the last line's."""
        rows = [{"id": "a", "text": "first"}, {"id": "b", "text": "b"}, {"id": "a", "text": "second"},
                {"id": "a", "text": "third"}]  # fmt: skip
        src = _jsonl(tmp_path / "dup.jsonl", [json.dumps(r).encode() for r in rows])
        assert main(["--home", str(tmp_path / "h"), "ingest", str(src), "--json"]) == 0
        captured = capsys.readouterr()
        out = json.loads(captured.out)
        assert out["duplicates"] == {"count": 2, "ids": ["a"], "rule": "last-wins"}
        assert (out["docs"], out["chunks"], out["created"]) == (4, 2, 2)
        assert "2 entries repeat an earlier id (the last one wins): a" in captured.err
        import sqlite3

        conn = sqlite3.connect(tmp_path / "h" / "keyword.sqlite")
        assert conn.execute("SELECT text FROM chunks WHERE id = 'a'").fetchone() == ("third",)
        conn.close()

    def test_markdown_then_jsonl_with_one_id_is_the_id_conflict(
        self, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A JSONL entry reusing a Markdown chunk's id: the id-conflict rule (exit 2 naming the owner), nothing
        written; the JSONL file re-ingested after fixing the id creates it."""
        home = ["--home", str(tmp_path / "h")]
        assert main([*home, "ingest", str(docs), "--json"]) == 0
        capsys.readouterr()
        src = _jsonl(tmp_path / "x.jsonl", [json.dumps({"id": "notes:a.md#alpha-0", "text": "hijack"}).encode()])
        assert main([*home, "ingest", str(src), "--json"]) == 2
        err = capsys.readouterr().err
        assert "'notes:a.md#alpha-0' already exists for another source (markdown:notes)" in err
