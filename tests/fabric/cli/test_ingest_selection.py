"""``fabric ingest --include/--exclude`` and the trust summary, through ``fabric.cli.main`` on real folders."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from fabric.cli import main
from fabric.eval.slowcook import corpus_changes


@pytest.fixture
def notes(tmp_path: Path, lexical_only: None) -> Path:
    """Decision records, a spec, drafts and a README."""
    root = tmp_path / "notes"
    for rel in ("decisions/d1.md", "decisions/d2.md", "specs/api.md", "drafts/wip.md", "README.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n\nAbout {rel}.\n")
    return root


def _ingest(home: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    code = main(["--home", str(home), "ingest", *args, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else {}, err


def test_include_and_exclude_narrow_the_folder(notes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Repeatable flags; an exclude beats an include; the JSON report names the allowlist and who set it."""
    code, out, err = _ingest(
        tmp_path / "h", str(notes), "--include", "decisions", "--include", "specs/**", "--exclude", "decisions/d2.md",
        capsys=capsys,
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert out["docs"] == 2
    assert out["allowlist"] == {
        "include": ["decisions", "specs/**"], "exclude": ["decisions/d2.md"],
        "set_by": {"include": "cli", "exclude": "cli"}, "admitted": 2, "excluded": 3, "unmatched": [],
    }  # fmt: skip
    assert (out["trust"]["trusted"], out["trust"]["untrusted"]) == (2, 0)
    conn = sqlite3.connect(tmp_path / "h" / "ledger.sqlite")
    try:
        docs = {r[0] for r in conn.execute("SELECT DISTINCT doc_id FROM ledger")}
        (recorded,) = conn.execute("SELECT allowlist FROM selections WHERE source = ?", (out["source"],)).fetchone()
    finally:
        conn.close()
    assert docs == {"notes:decisions/d1.md", "notes:specs/api.md"}
    assert json.loads(recorded)["exclude"] == ["decisions/d2.md"]
    receipt = corpus_changes(out)  # what `fabric slowcook` writes for the corpus it refreshed
    assert receipt["allowlist"] == out["allowlist"]
    assert receipt["trust"] == out["trust"]


def test_cli_lists_replace_the_configured_ones(
    notes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``[ingest] exclude`` applies until --exclude replaces it; ``set_by`` says which list came from where."""
    monkeypatch.setenv("FABRIC__ingest__exclude", '["drafts", "README.md"]')
    code, out, _ = _ingest(tmp_path / "h", str(notes), capsys=capsys)
    assert (code, out["docs"], out["allowlist"]["set_by"]) == (0, 3, {"include": "default", "exclude": "config"})
    code, out, _ = _ingest(tmp_path / "h", str(notes), "--exclude", "drafts", capsys=capsys)
    assert (code, out["docs"], out["created"], out["allowlist"]["set_by"]["exclude"]) == (0, 4, 1, "cli")


def test_summary_shows_the_allowlist_and_trust_per_rule(
    notes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The human summary names the allowlist and counts each file's trust under the rule that decided it."""
    assert main(["--home", str(tmp_path / "h"), "ingest", str(notes), "--exclude", "drafts"]) == 0
    out = capsys.readouterr().out
    assert "allowlist: include everything (default); exclude drafts (cli): 4 admitted, 1 excluded" in out
    assert "trust: trusted 3 (**/decisions/** 2, **/spec*/** 1)  untrusted 1 (default 1)" in out


def test_a_glob_matching_nothing_is_a_warning(notes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The run goes on with the globs that matched; each unmatched glob is one warning line on stderr."""
    code, out, err = _ingest(tmp_path / "h", str(notes), "--include", "specs", "--exclude", "spces", capsys=capsys)
    assert (code, out["docs"], out["allowlist"]["unmatched"]) == (0, 1, ["spces"])
    assert err == f"fabric: warning: allowlist glob 'spces' matched no file under {out['source']}\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--include", "decisons/**"], "allowlist: admits none of the 5 file(s) under"),
        (["--include", "decisions", "--exclude", "decisions"], "admits none of the 5 file(s)"),
        (["--include", "/etc/**"], "include: '/etc/**': globs are relative to the ingested folder"),
        (["--exclude", "../x"], "exclude: '../x': '..' leaves the ingested folder"),
    ],
)
def test_refused_allowlists_exit_2_and_write_nothing(
    notes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """A bad glob, or an allowlist admitting none of the files: exit 2, one line, no ledger written."""
    code = main(["--home", str(tmp_path / "h"), "ingest", str(notes), "--json", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "h" / "ledger.sqlite").exists() or _chunks(tmp_path / "h") == 0


def test_allowlist_for_an_entry_file_exits_2(
    tmp_path: Path, lexical_only: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """--include/--exclude narrow folder walks only: a JSONL file is refused with one line."""
    kb = tmp_path / "kb.jsonl"
    kb.write_text('{"id": "kb-1", "text": "Bob writes docs."}\n')
    assert main(["--home", str(tmp_path / "h"), "ingest", str(kb), "--exclude", "x"]) == 2
    assert "a jsonl source is one file" in capsys.readouterr().err


def _chunks(home: Path) -> int:
    conn = sqlite3.connect(home / "ledger.sqlite")
    try:
        return int(conn.execute("SELECT count(*) FROM ledger").fetchone()[0])
    finally:
        conn.close()
