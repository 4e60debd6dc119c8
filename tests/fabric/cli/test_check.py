"""``fabric check [--repair] [--json]`` through the CLI entry point on a real home (lexical stores, no embedder):
agreement, a disagreement found and named without a traceback (exit 1), the repair (exit 0), the lock."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from fabric.cli import main
from fabric.cli.check import render
from fabric.ingest.check import CheckReport, StoreState
from fabric.ingest.homelock import HomeLock
from fabric.ingest.ledger import LEDGER_FILE, Ledger
from fabric.ingest.provenance import Provenance


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with three JSONL entries ingested lexically (embeddings off: no model needed)."""
    monkeypatch.setenv("FABRIC__embeddings__backend", '"none"')
    corpus = tmp_path / "e.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"e{i}", "text": f"entry {i}"}) + "\n" for i in range(3)))
    h = tmp_path / "home"
    assert main(["--home", str(h), "ingest", str(corpus), "--json"]) == 0
    return h


def _run(home: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--home", str(home), "check", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


class TestCheckCommand:
    def test_agreeing_home_exits_0(self, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Per-store counts and the verdict; exit 0."""
        code, out, _ = _run(home, capsys)
        assert code == 0
        assert "sqlite_fts       holds       3  expected       3  missing      0  extra      0" in out
        assert "the stores agree with the ledger" in out
        assert "incomplete" not in out  # embeddings are off: the vector store is not expected to hold them

    def test_disagreement_is_named_and_exits_1(self, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A chunk deleted behind the ledger's back: the store, the count and the id are named; no traceback."""
        with sqlite3.connect(home / "graph.sqlite") as conn:
            conn.execute("DELETE FROM chunks WHERE id = 'e1'")
        code, out, err = _run(home, capsys)
        assert code == 1
        assert "e.g. missing e1" in out
        assert "DISAGREE" in out
        assert "fabric check --repair" in out
        assert "Traceback" not in out + err
        code, raw, _ = _run(home, capsys, "--json")
        report = json.loads(raw)
        assert (code, report["agree"], report["stores"]["sqlite_graph"]["missing_ids"]) == (1, False, ["e1"])

    def test_repair_then_agree(self, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """An interrupted write is rolled back by --repair (exit 0), and a plain check agrees afterwards."""
        led = Ledger(home / LEDGER_FILE)
        led.mark_pending([("e9", "e9", "jsonl:gone", "h", Provenance("operator"))], [])
        led.close()
        code, out, _ = _run(home, capsys, "--repair")
        assert code == 0
        assert "before repair: disagree, 1 pending ledger rows" in out
        assert "rolled back 1" in out
        assert _run(home, capsys)[0] == 0

    def test_repair_is_refused_while_the_home_is_held(self, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--repair writes, so it takes the lock: refused (exit 3, busy) while another holder has the home."""
        with HomeLock(home, "fabric serve"):
            code, _, err = _run(home, capsys, "--repair")
        assert code == 3
        assert "in use by pid" in err


def test_missing_home_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A home that does not exist exits 2 saying so, and is not created."""
    assert main(["--home", str(tmp_path / "nowhere"), "check"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()


def test_render_lists_unchecked_and_errors() -> None:
    """Stores that cannot list ids and stores that failed are named in the text report."""
    report = CheckReport(
        ledger=1, pending=0, stores={"sqlite_fts": StoreState("sqlite_fts", 1, 1)}, unchecked=["meilisearch"],
        errors={"qdrant": "cannot list ids: LaneUnavailable: down"},
    )  # fmt: skip
    text = "\n".join(render(report, "/h"))
    assert "meilisearch: not checked" in text
    assert "qdrant: error: cannot list ids" in text
    assert "DISAGREE" in text
