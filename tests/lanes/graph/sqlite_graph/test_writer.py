"""SqliteGraphWriter and its helpers: where the graph lives, the alias table, idempotent upserts."""

from __future__ import annotations

from pathlib import Path

import pytest

import lanes.graph.sqlite_graph.writer as mod
from fabric.core.errors import ConfigError
from fabric.core.models import LaneKind
from tests.support.embedded import chunk, resources, spec


def test_graph_path_defaults_under_home(tmp_path: Path) -> None:
    """``<home>/graph.sqlite`` unless ``options.path`` names a file."""
    assert mod.graph_path(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path)) == tmp_path / "graph.sqlite"
    named = spec(LaneKind.GRAPH, "sqlite_graph", path=str(tmp_path / "g.db"))
    assert mod.graph_path(named, resources(tmp_path)) == tmp_path / "g.db"


class TestAliases:
    def test_inline_table_overrides_the_file(self, tmp_path: Path) -> None:
        """Aliases from ``aliases_file`` (TOML) and the inline ``aliases`` table merge, inline last."""
        file = tmp_path / "aliases.toml"
        file.write_text('"us" = "usa"\n"uk" = "united kingdom"\n')
        table = mod.load_aliases(
            spec(LaneKind.GRAPH, "sqlite_graph", aliases_file=str(file), aliases={"us": "united states"})
        )
        assert table == {"us": "united states", "uk": "united kingdom"}

    def test_missing_file_names_its_key(self, tmp_path: Path) -> None:
        """An unreadable aliases file is a ConfigError naming ``options.aliases_file``."""
        with pytest.raises(ConfigError, match="aliases_file"):
            mod.load_aliases(spec(LaneKind.GRAPH, "sqlite_graph", aliases_file=str(tmp_path / "none.toml")))

    def test_non_string_values_rejected(self) -> None:
        """Aliases must map strings to strings."""
        with pytest.raises(ConfigError, match="strings"):
            mod.load_aliases(spec(LaneKind.GRAPH, "sqlite_graph", aliases={"us": 1}))


async def test_upsert_twice_keeps_one_entity_and_mention(tmp_path: Path) -> None:
    """Writing the same chunk again leaves one row per entity and per mention."""
    docs = [chunk("c1", "Marie Curie worked in Paris.")]
    for _ in range(2):
        writer = mod.SqliteGraphWriter(spec(LaneKind.GRAPH, "sqlite_graph"), resources(tmp_path))
        await writer.upsert(docs)
        counts = await writer.db.run(
            lambda conn: (
                conn.execute("SELECT COUNT(*) FROM entities").fetchone()[0],
                conn.execute("SELECT COUNT(*) FROM mentions").fetchone()[0],
            )
        )
        await writer.aclose()
    entities, mentions = counts
    assert entities >= 2
    assert mentions == entities


def test_public_api() -> None:
    """The module exports the writer, its schema and its helpers."""
    assert set(mod.__all__) == {"POOL_MIN_BATCH", "SqliteGraphWriter", "chunk_extraction", "load_aliases"}
    import lanes.graph.sqlite_graph.tables as tables

    assert set(tables.__all__) == {
        "BUMP", "GRAPH_INDEXES", "GRAPH_SCHEMA", "GRAPH_TABLES", "TRIPLES_BY_CHUNK", "create_indexes", "existing_ids",
        "graph_path", "missing_indexes", "write_batch",
    }  # fmt: skip
