"""The front door: ``fabric.open`` / ``fabric.connect`` over a real home (embedded stores, lexical lanes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import fabric
from fabric.api import open_settings

ROOT = Path(__file__).resolve().parents[2]
ENTRIES = [
    {"id": "e-1", "title": "Rollback", "text": "Roll back a blue-green deploy within five minutes."},
    {"id": "e-2", "title": "Canary", "text": "Canary releases send a small share of traffic first."},
]


@pytest.fixture(autouse=True)
def _lexical(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No embedder (lexical lanes only) and a cache of the test's own: fast and hermetic."""
    monkeypatch.setenv("FABRIC__embeddings__backend", "none")
    monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path / "cache"))


async def test_open_ingest_search(tmp_path: Path) -> None:
    """The documented quick start: ingest entries, then search them; items carry title, url, snippet, score."""
    async with fabric.open(home=tmp_path / "kb") as kb:
        report = await kb.ingest(ENTRIES)
        assert (report.docs, report.chunks) == (2, 2)
        answer = await kb.search("blue-green deploys", top_k=5, mode="technical")
    assert isinstance(answer, fabric.SearchPage)
    first = answer.items[0]
    assert (first.id, first.title) == ("e-1", "Rollback")
    assert first.snippet.startswith("Roll back")
    assert first.url
    assert 0 < first.score_total <= 1
    assert answer.total >= 1


def test_connect_is_the_blocking_door(tmp_path: Path) -> None:
    """The same calls without an event loop."""
    with fabric.connect(home=tmp_path / "kb") as kb:
        kb.ingest(ENTRIES)
        page = kb.search("canary traffic", limit=1)
    assert [item.id for item in page.items] == ["e-2"]


async def test_bad_input_is_a_value_error_naming_the_field(tmp_path: Path) -> None:
    """Search fields and entries are checked as every door checks them."""
    async with fabric.open(home=tmp_path / "kb") as kb:
        with pytest.raises(ValueError, match="top_k: must be >= 1"):
            await kb.search("x", top_k=0)
        with pytest.raises(fabric.QueryError, match="query: must not be empty"):
            await kb.search("  ")
        with pytest.raises(ValueError, match="entries: expected a non-empty list of objects"):
            await kb.ingest([])


async def test_ingest_a_folder(tmp_path: Path) -> None:
    """A path ingests like ``fabric ingest``."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "deploys.md").write_text("# Deploys\n\nBlue-green deploys switch traffic at once.\n")
    async with fabric.open(home=tmp_path / "kb") as kb:
        report = await kb.ingest(notes)
        assert report.chunks == 1
        assert (await kb.search("switch traffic")).items[0].title


def test_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Settings: defaults < config file < environment < arguments."""
    config = tmp_path / "c.toml"
    config.write_text("schema = 1\n[fusion]\nrrf_k = 41\n")
    monkeypatch.setenv("FABRIC_HOME", str(tmp_path / "env-home"))
    monkeypatch.setenv("FABRIC__engine__max_top_k", "55")
    s = open_settings(tmp_path / "arg-home", config=config)
    assert (s.home, s.fusion.rrf_k, s.engine.max_top_k) == (tmp_path / "arg-home", 41, 55)
    assert open_settings().home == tmp_path / "env-home"


def test_the_package_exports_what_a_user_annotates_with() -> None:
    """The top level names the front door and the few types a caller needs, imported on first use."""
    assert {"open", "connect", "SearchRequest", "SearchPage", "PageItem", "IngestReport", "QueryError"} <= set(
        fabric.__all__
    )
    assert issubclass(fabric.QueryError, ValueError)
    with pytest.raises(AttributeError):
        _ = fabric.no_such_name  # type: ignore[attr-defined]


def test_import_fabric_is_cheap_and_silent() -> None:
    """``import fabric`` loads no floor and writes nothing."""
    code = "import sys, fabric; print(sorted(m for m in sys.modules if m.startswith(('fabric.', 'lanes', 'fusion'))))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert (done.stdout.strip(), done.stderr) == ("[]", "")


async def test_ingest_a_folder_through_an_allowlist(tmp_path: Path) -> None:
    """``include`` / ``exclude`` narrow a folder as ``fabric ingest`` does; the report names them (set by the API)
    and counts each file's trust; entries take no allowlist."""
    notes = tmp_path / "notes"
    for rel in ("decisions/d1.md", "drafts/wip.md", "README.md"):
        (notes / rel).parent.mkdir(parents=True, exist_ok=True)
        (notes / rel).write_text(f"# {rel}\n\nAbout {rel}.\n")
    async with fabric.open(home=tmp_path / "kb") as kb:
        report = await kb.ingest(notes, include=["**/*.md"], exclude=["drafts"])
        assert report.docs == 2
        assert report.allowlist is not None
        assert report.allowlist["set_by"] == {"include": "api", "exclude": "api"}
        assert report.trust is not None
        assert (report.trust["trusted"], report.trust["untrusted"]) == (1, 1)
        with pytest.raises(fabric.FabricError, match="entries are not a folder"):
            await kb.ingest(ENTRIES, exclude=["x"])
