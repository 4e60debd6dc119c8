"""What every graph writer stores for a chunk: extractor triples plus ingest-time triples, one alias table."""

from __future__ import annotations

from pathlib import Path

import lanes.graph._extract.chunk_graph as mod
from fabric.core.models import LaneKind
from lanes.graph._extract.entities import RuleExtractor
from tests.support.embedded import chunk, spec


def test_chunk_and_record_give_the_same_extraction() -> None:
    """A Chunk and its record as a mapping (what the ArangoDB writer may be handed) extract alike."""
    doc = chunk("c1", "Insulin regulates Glucose uptake.", title="Insulin", metadata={"triples": [["A", "b c", "D"]]})
    record = {"title": doc.title, "text": doc.text, "metadata": dict(doc.metadata)}
    extractor = RuleExtractor()
    assert mod.chunk_extraction(doc, extractor, {}) == mod.chunk_extraction(record, extractor, {})
    relations = mod.chunk_extraction(doc, extractor, {}).relations
    assert ("insulin", "regulate", "glucose") in relations
    assert ("a", "b_c", "d") in relations


def test_supplied_triples_use_the_alias_table(tmp_path: Path) -> None:
    """Ingest-time triples are normalised with the aliases the extractor uses (file and inline table)."""
    file = tmp_path / "aliases.toml"
    file.write_text('"u.s." = "united states"\n')
    aliases = mod.load_aliases(spec(LaneKind.GRAPH, "sqlite_graph", aliases_file=str(file)))
    doc = chunk("c2", "Nothing here.", metadata={"triples": [["U.S.", "signed", "Paris Agreement"]]})
    ex = mod.chunk_extraction(doc, RuleExtractor(aliases), aliases)
    assert ("united states", "signed", "paris agreement") in ex.relations
    assert ex.entities["united states"] == "U.S."


def test_public_api() -> None:
    """The module exports the extraction and the alias reader."""
    assert set(mod.__all__) == {"chunk_extraction", "load_aliases"}
