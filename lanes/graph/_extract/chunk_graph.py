"""What a graph store writes for a chunk, shared by every graph writer (SQLite and ArangoDB alike).

:func:`chunk_extraction` runs the lane's :class:`~lanes.graph._extract.entities.EntityExtractor` (by default the
rule-based
one: entities, co-occurrence and the verb-pattern triples of :mod:`lanes.graph._extract.relations`) over the
chunk's title and text and adds the triples supplied at ingest (the JSONL ``triples`` field, kept in the chunk's
``metadata["triples"]``), normalised with the same alias table. :func:`load_aliases` reads that table from
``options.aliases`` and ``options.aliases_file`` (when a store or lane opens, never at import).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fabric.core.chunks import Chunk
from fabric.core.errors import ConfigError
from lanes.base import LaneSpec
from lanes.graph._extract.entities import EntityExtractor, Extraction, RuleExtractor, normalize_entity
from lanes.graph._extract.relations import supplied_triples

__all__ = ["chunk_extraction", "load_aliases"]


def load_aliases(spec: LaneSpec) -> dict[str, str]:
    """The alias table from ``options.aliases`` and ``options.aliases_file`` (inline entries win).

    Raises:
        ConfigError: the file is missing or not a table of strings.
    """
    table: dict[str, str] = {}
    file = spec.options.get("aliases_file")
    if file:
        path = Path(str(file))
        try:
            raw = path.read_bytes()
            data = json.loads(raw) if path.suffix == ".json" else tomllib.loads(raw.decode())
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"cannot read aliases file: {exc}", key=f"lanes.{spec.name}.options.aliases_file"
            ) from None
        table.update(data)
    table.update(spec.options.get("aliases") or {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
        raise ConfigError("aliases must map strings to strings", key=f"lanes.{spec.name}.options.aliases")
    return table


def _fields(chunk: Chunk | Mapping[str, Any]) -> tuple[str, str, Mapping[str, Any]]:
    if isinstance(chunk, Mapping):
        return str(chunk.get("title") or ""), str(chunk.get("text") or ""), chunk.get("metadata") or {}
    return chunk.title, chunk.text, chunk.metadata


def chunk_extraction(
    chunk: Chunk | Mapping[str, Any], extractor: EntityExtractor, aliases: Mapping[str, str]
) -> Extraction:
    """What the graph stores for ``chunk`` (a :class:`Chunk` or its record as a mapping): the extractor's entities
    and triples, plus the triples supplied at ingest (``metadata["triples"]``), normalised with the same alias
    table."""
    title, text, metadata = _fields(chunk)
    ex = extractor.extract(f"{title}\n{text}")
    raw = metadata.get("triples")
    if not raw:
        return ex
    table = extractor.aliases if isinstance(extractor, RuleExtractor) else aliases
    entities, triples = supplied_triples(raw, lambda name: normalize_entity(name, table))
    return Extraction(entities={**entities, **ex.entities}, relations=list(dict.fromkeys([*ex.relations, *triples])))
