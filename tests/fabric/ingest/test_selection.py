"""Tests for fabric.ingest.selection: the trust rules and the allowlist of folder ingests, through the loader and
run_ingest over real SQLite stores (lexical only, no model)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from fabric.core.errors import ConfigError, IngestError
from fabric.core.models import SourceKind, Trust
from fabric.ingest.ledger import LEDGER_FILE, Ledger
from fabric.ingest.loaders import load_source
from fabric.ingest.run import run_ingest
from fabric.ingest.selection import Selection, selection_for
from fabric.settings import Settings, load_settings


def _settings(tmp_path: Path, **env: str) -> Settings:
    base = {
        "FABRIC_HOME": str(tmp_path / "home"),
        "FABRIC_CACHE_DIR": str(tmp_path / "cache"),
        "FABRIC__embeddings__backend": "none",
    }
    return load_settings(env=base | env)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository-like folder: decision records, a roadmap, a spec, a draft, a README and tool output."""
    root = tmp_path / "repo"
    files = {
        "decisions/2026-10-14-qdrant.md": "# Qdrant local mode\n\nAccepted.\n",
        "DECISION-017.md": "# Use UTC\n\nAccepted.\n",
        "roadmap-2027.md": "# Roadmap 2027\n\nShip fusion.\n",
        "specs/api.md": "# API spec\n\nPOST /v1/search.\n",
        "drafts/idea.md": "# An idea\n\nMaybe later.\n",
        "README.md": "# Readme\n\nHello.\n",
        "tool-output/lint.txt": "ruff: 3 errors\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _by_path(chunks: list[Any]) -> dict[str, tuple[Trust, SourceKind]]:
    return {c.metadata["path"]: (c.trust, c.source_kind) for c in chunks}


def _selections(home: Path) -> dict[str, tuple[Any, Any]]:
    conn = sqlite3.connect(home / LEDGER_FILE)
    try:
        rows = conn.execute("SELECT source, allowlist, trust FROM selections").fetchall()
    finally:
        conn.close()
    return {s: (json.loads(a), json.loads(t)) for s, a, t in rows}


class TestTrustRules:
    def test_shipped_rules_trust_decisions_roadmaps_and_specs_only(self, repo: Path) -> None:
        """Repository text is untrusted (an import) unless a rule names it; the report counts files per rule."""
        loaded = load_source(repo)
        trusted, untrusted = (Trust.TRUSTED, SourceKind.OPERATOR), (Trust.UNTRUSTED, SourceKind.IMPORT)
        assert _by_path(loaded.chunks) == {
            "decisions/2026-10-14-qdrant.md": trusted,
            "DECISION-017.md": trusted,
            "roadmap-2027.md": trusted,
            "specs/api.md": trusted,
            "drafts/idea.md": untrusted,
            "README.md": untrusted,
            "tool-output/lint.txt": untrusted,
        }
        assert loaded.trust is not None
        assert (loaded.trust["trusted"], loaded.trust["untrusted"]) == (4, 3)
        rules = {r["rule"]: (r["trust"], r["docs"]) for r in loaded.trust["rules"]}
        assert rules == {
            "**/DECISION*.md": ("trusted", 1),
            "**/decisions/**": ("trusted", 1),
            "**/roadmap*.md": ("trusted", 1),
            "**/spec*/**": ("trusted", 1),
            "default": ("untrusted", 3),
        }

    def test_rules_are_configurable_first_match_wins(self, repo: Path, tmp_path: Path) -> None:
        """``[ingest.trust]``: ordered rules and the default come from the settings."""
        rules = '[{glob = "drafts/**", trust = "untrusted"}, {glob = "**/*.md", trust = "trusted"}]'
        config = _settings(tmp_path, FABRIC__ingest__trust__rules=rules).ingest
        got = _by_path(load_source(repo, selection=selection_for(config)).chunks)
        assert got["drafts/idea.md"][0] is Trust.UNTRUSTED  # the first rule matched, the second never ran
        assert got["README.md"][0] is Trust.TRUSTED
        assert got["tool-output/lint.txt"][0] is Trust.UNTRUSTED  # no rule: the default

    def test_front_matter_overrides_for_the_operator_only(self, repo: Path) -> None:
        """Front matter ``trust:`` decides for the operator and admins; a writer's folder load keeps the rules."""
        (repo / "README.md").write_text("---\ntrust: trusted\n---\n# Readme\n\nVouched for.\n")
        (repo / "specs" / "api.md").write_text("---\ntrust: untrusted\n---\n# API\n\nCopied from a vendor.\n")
        operator = load_source(repo, selection=Selection().for_role("operator"))
        assert _by_path(operator.chunks)["README.md"] == (Trust.TRUSTED, SourceKind.OPERATOR)
        assert _by_path(operator.chunks)["specs/api.md"] == (Trust.UNTRUSTED, SourceKind.IMPORT)
        assert operator.trust is not None
        assert {(r["rule"], r["trust"]) for r in operator.trust["rules"]} >= {
            ("front matter", "trusted"),
            ("front matter", "untrusted"),
        }
        writer = load_source(repo, selection=Selection().for_role("writer"))
        assert _by_path(writer.chunks)["README.md"] == (Trust.UNTRUSTED, SourceKind.IMPORT)
        assert _by_path(writer.chunks)["specs/api.md"] == (Trust.TRUSTED, SourceKind.OPERATOR)

    def test_front_matter_switch_off(self, repo: Path, tmp_path: Path) -> None:
        """``front_matter = false``: the rules decide even for the operator."""
        (repo / "README.md").write_text("---\nsource_kind: operator\n---\n# Readme\n\nHello.\n")
        config = _settings(tmp_path, FABRIC__ingest__trust__front_matter="false").ingest
        got = _by_path(load_source(repo, selection=selection_for(config)).chunks)
        assert got["README.md"] == (Trust.UNTRUSTED, SourceKind.IMPORT)

    def test_bad_rule_glob_names_the_key(self, tmp_path: Path) -> None:
        """A rule glob that cannot be one is a ConfigError naming ``ingest.trust.rules[i].glob``."""
        with pytest.raises(ConfigError, match=r"ingest\.trust\.rules\[0\]\.glob.*not absolute"):
            _settings(tmp_path, FABRIC__ingest__trust__rules='[{glob = "/abs/**", trust = "trusted"}]')
        with pytest.raises(ConfigError, match=r"ingest\.exclude\[1\]"):
            _settings(tmp_path, FABRIC__ingest__exclude='["ok/**", "../up"]')


class TestAllowlist:
    async def test_include_exclude_narrow_the_folder_and_the_ledger_names_them(
        self, repo: Path, tmp_path: Path
    ) -> None:
        """Only included files are read, an exclude beats an include; the report and the ledger name the lists."""
        s = _settings(tmp_path)
        report = await run_ingest(s, repo, None, include=["**/*.md"], exclude=["drafts", "README.md"])
        assert report.docs == 4
        assert report.allowlist == {
            "include": ["**/*.md"], "exclude": ["drafts", "README.md"],
            "set_by": {"include": "cli", "exclude": "cli"}, "admitted": 4, "excluded": 3, "unmatched": [],
        }  # fmt: skip
        ledger = Ledger(s.home / LEDGER_FILE)
        try:
            docs = {e.doc_id for e in ledger.entries(report.source).values()}
        finally:
            ledger.close()
        assert docs == {f"repo:{p}" for p in ("DECISION-017.md", "decisions/2026-10-14-qdrant.md", "roadmap-2027.md",
                                               "specs/api.md")}  # fmt: skip
        allowlist, trust = _selections(s.home)[report.source]
        assert (allowlist["include"], allowlist["exclude"]) == (["**/*.md"], ["drafts", "README.md"])
        assert trust["trusted"] == 4

    async def test_configured_allowlist_applies_and_the_caller_replaces_each_list(
        self, repo: Path, tmp_path: Path
    ) -> None:
        """``[ingest] include/exclude`` narrow every folder ingest; a given list replaces the configured one."""
        s = _settings(tmp_path, FABRIC__ingest__include='["decisions", "specs"]', FABRIC__ingest__exclude='["specs"]')
        report = await run_ingest(s, repo, None)
        assert report.docs == 1
        assert report.allowlist is not None
        assert report.allowlist["set_by"] == {"include": "config", "exclude": "config"}
        report = await run_ingest(s, repo, None, exclude=[])  # the caller lifts the configured exclude only
        assert report.docs == 2
        assert report.deleted == 0
        assert report.allowlist is not None
        assert report.allowlist["set_by"] == {"include": "config", "exclude": "cli"}

    async def test_narrowing_again_removes_what_the_allowlist_now_leaves_out(self, repo: Path, tmp_path: Path) -> None:
        """The home holds what the allowlist admits: a later, narrower run deletes the excluded files' chunks."""
        s = _settings(tmp_path)
        first = await run_ingest(s, repo, None)
        assert first.allowlist is not None
        assert first.allowlist["set_by"] == {"include": "default", "exclude": "default"}
        second = await run_ingest(s, repo, None, exclude=["tool-output", "drafts"])
        assert (second.docs, second.deleted, second.unchanged) == (5, 2, 5)

    async def test_an_allowlist_admitting_nothing_is_refused_before_any_write(self, repo: Path, tmp_path: Path) -> None:
        """A mistyped include never empties a source: IngestError naming the glob, the home unchanged."""
        s = _settings(tmp_path)
        first = await run_ingest(s, repo, None)
        with pytest.raises(IngestError, match=r"admits none of the 7 file\(s\).*decisons/\*\* matched no file"):
            await run_ingest(s, repo, None, include=["decisons/**"])
        again = await run_ingest(s, repo, None)
        assert (again.unchanged, again.deleted) == (first.chunks, 0)

    async def test_a_glob_matching_nothing_is_reported(self, repo: Path, tmp_path: Path) -> None:
        """Globs that matched no file are listed in ``unmatched`` (the others still narrow the folder)."""
        report = await run_ingest(_settings(tmp_path), repo, None, include=["specs", "nope/**"], exclude=["x.md"])
        assert report.docs == 1
        assert report.allowlist is not None
        assert report.allowlist["unmatched"] == ["nope/**", "x.md"]

    async def test_entry_files_take_no_allowlist(self, tmp_path: Path) -> None:
        """A JSONL file is not a folder walk: a given allowlist is refused, the configured one does not apply."""
        entries = tmp_path / "kb.jsonl"
        entries.write_text('{"id": "kb-1", "text": "Alice leads Falcon.", "trust": "trusted"}\n')
        with pytest.raises(IngestError, match=r"narrow folder walks.*a jsonl source is one file"):
            await run_ingest(_settings(tmp_path), entries, None, include=["*.jsonl"])
        s = _settings(tmp_path, FABRIC__ingest__include='["nothing/**"]')
        report = await run_ingest(s, entries, None)
        assert (report.docs, report.allowlist) == (1, None)
        assert report.trust is not None
        assert report.trust["rules"] == [{"rule": "entry field", "trust": "trusted", "docs": 1}]
