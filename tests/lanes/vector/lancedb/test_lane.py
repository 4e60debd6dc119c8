"""Tests of the LanceDB vector lane: options, the missing extra, the SQL prefilter, ties, errors, the registry."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import lanes.vector.lancedb.lane as mod
from fabric.cli import main
from fabric.core.errors import ConfigError, LaneBadResponse, LaneUnavailable
from fabric.core.models import BoundConstraints, LaneRequest
from lanes.registry import resolve
from lanes.vector.lancedb.lane import LanceVectorLane, vector_where
from lanes.vector.lancedb.writer import LanceWriter
from tests.lanes.vector.lancedb.test_writer import lspec, write
from tests.support.embedded import BagEmbedder, chunk, resources


class TestOptions:
    @pytest.mark.parametrize(
        ("options", "key"),
        [
            ({"trust": "gold"}, "lanes.vector.options.trust"),
            ({"index_type": "IVF_FLAT"}, "lanes.vector.options.index_type"),
            ({"index_min_rows": 0}, "lanes.vector.options.index_min_rows"),
            ({"nprobes": "many"}, "lanes.vector.options.nprobes"),
        ],
    )
    def test_a_bad_option_is_a_config_error_naming_it(self, tmp_path: Path, options: dict[str, Any], key: str) -> None:
        """The lane and its writer refuse a bad option with its key, before any I/O."""
        for factory in (LanceVectorLane, LanceWriter):
            with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
                factory(lspec(**options), resources(tmp_path, BagEmbedder()))
        assert not (tmp_path / "vectors").exists()


class TestMissingExtra:
    def test_lane_and_writer_name_the_extra(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without lancedb installed, building the lane or the writer is a ConfigError naming the extra."""
        monkeypatch.setitem(sys.modules, "lancedb", None)
        for factory in (LanceVectorLane, LanceWriter):
            with pytest.raises(ConfigError, match=r"lancedb.*pip install 'retrieval-fabric\[lancedb\]'"):
                factory(lspec(), resources(tmp_path, BagEmbedder()))

    def test_cli_ingest_exits_2_with_one_line(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """``fabric ingest`` with backend lancedb and no lancedb: exit 2, one line naming the extra, no traceback."""
        monkeypatch.setitem(sys.modules, "lancedb", None)
        monkeypatch.setenv("FABRIC__embeddings__backend", "none")
        monkeypatch.setenv("FABRIC_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("FABRIC__lanes__vector__backend", "lancedb")
        (tmp_path / "notes").mkdir()
        (tmp_path / "notes" / "a.md").write_text("# Alpha\n\nText.\n")
        assert main(["--home", str(tmp_path / "h"), "ingest", str(tmp_path / "notes")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == ["fabric: error: backend: the lancedb backend needs the optional package(s) lancedb: "
                       "pip install 'retrieval-fabric[lancedb]'"]  # fmt: skip


class TestFilter:
    def test_sql_of_the_constraints(self) -> None:
        """Years become a list the row's years must meet (clamped to 1800-2111), trust and sites are quoted."""
        c = BoundConstraints(date_from=datetime(2110, 5, 1, tzinfo=UTC), sites=("Docs.org", "o'r.com"))
        assert vector_where(c, "trusted") == (
            "array_has_any(years, [2110, 2111]) AND trust = 'trusted' AND (domain = 'docs.org' OR "
            "ends_with(domain, '.docs.org') OR domain = 'o''r.com' OR ends_with(domain, '.o''r.com'))"
        )
        assert vector_where(BoundConstraints(), None) is None
        assert vector_where(BoundConstraints(date_to=datetime(1700, 1, 1, tzinfo=UTC)), None) == "false"

    async def test_a_quote_in_a_site_is_data(self, tmp_path: Path) -> None:
        """A site holding a quote matches nothing rather than breaking (or widening) the filter."""
        emb = BagEmbedder()
        await write(tmp_path, [chunk("a", "alpha", url="https://a.org/")], emb)
        c = BoundConstraints(sites=("x' OR '1'='1",))
        async with LanceVectorLane(lspec(), resources(tmp_path, emb)) as lane:
            assert await lane.search(LaneRequest(query="alpha", constraints=c)) == []


class TestSearch:
    async def test_equal_scores_in_id_order(self, tmp_path: Path) -> None:
        """Chunks of the same text score the same and come by id."""
        emb = BagEmbedder()
        await write(tmp_path, [chunk(i, "same words") for i in ("c", "a", "b")], emb)
        async with LanceVectorLane(lspec(), resources(tmp_path, emb)) as lane:
            hits = await lane.search(LaneRequest(query="same words", top_k=3))
        assert [(h.id, h.rank) for h in hits] == [("a", 1), ("b", 2), ("c", 3)]

    async def test_dimension_mismatch_is_a_bad_response(self, tmp_path: Path) -> None:
        """A table written with another model's dimension gives LaneBadResponse, not a traceback."""
        await write(tmp_path, [chunk("a", "alpha")], BagEmbedder())

        class Small(BagEmbedder):
            dim = 8

            def embed(self, texts: Sequence[str]) -> list[list[float]]:
                return [[1.0] + [0.0] * 7 for _ in texts]

        async with LanceVectorLane(lspec(), resources(tmp_path, Small())) as lane:
            with pytest.raises(LaneBadResponse, match="dimension"):
                await lane.search(LaneRequest(query="alpha"))

    async def test_corrupt_table_is_unavailable(self, tmp_path: Path) -> None:
        """A table folder whose manifest is garbage makes the lane unavailable."""
        versions = tmp_path / "vectors" / "lancedb" / "bag_64.lance" / "_versions"
        versions.mkdir(parents=True)
        (versions / "1.manifest").write_bytes(b"not a manifest" * 50)
        lane = LanceVectorLane(lspec(), resources(tmp_path, BagEmbedder()))
        with pytest.raises(LaneUnavailable, match="lancedb"):
            await lane.open()
        with pytest.raises(LaneUnavailable):
            await lane.search(LaneRequest(query="alpha"))


def test_registered_as_lancedb() -> None:
    """The registry resolves backend lancedb to this lane; the module exports it."""
    assert resolve("lancedb") is LanceVectorLane
    assert mod.__all__ == ["BACKEND", "LanceVectorLane", "nearest", "vector_where"]
    assert mod.BACKEND.writer is LanceWriter
