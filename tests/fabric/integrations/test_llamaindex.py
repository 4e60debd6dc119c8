"""The LlamaIndex retriever against llama-index-core (pinned), in-process and remote, blocking and async."""

from __future__ import annotations

import asyncio
from pathlib import Path

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore

from fabric.integrations.llamaindex import FabricRetriever
from fabric.integrations.source import FabricSource
from tests.support.ingested import QUERIES, engine, engine_ids


def test_retrieve_in_process_matches_engine(fabric_home: Path) -> None:
    """retrieve() (→ _retrieve) over an engine it opens: the engine's ids in order, scores = score_total."""
    expected = asyncio.run(engine_ids(fabric_home))
    retriever = FabricRetriever(FabricSource(engine=engine(fabric_home)), limit=4)
    try:
        assert isinstance(retriever, BaseRetriever)
        got = [[n.node.node_id for n in retriever.retrieve(q)] for q in QUERIES]
        first = retriever.retrieve("deployment strategy")[0]
    finally:
        retriever.source.close()
    assert got == expected
    assert isinstance(first, NodeWithScore)
    assert first.score == first.node.metadata["score_total"]
    assert first.node.get_content() == "Use blue-green deploys for zero-downtime releases."
    assert first.node.metadata["lane_status"]["vector"] == "success"
    shown = first.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "title: deployment" in shown
    assert "score_lexical" not in shown


async def test_aretrieve_in_process_over_open_engine(fabric_home: Path) -> None:
    expected = await engine_ids(fabric_home)
    async with engine(fabric_home) as eng:
        retriever = FabricRetriever.from_engine(eng, limit=4)
        got = [[n.node.node_id for n in await retriever.aretrieve(q)] for q in QUERIES]
    assert got == expected


def test_retrieve_remote(service_url: str, fabric_home: Path) -> None:
    expected = asyncio.run(engine_ids(fabric_home))
    retriever = FabricRetriever.from_url(service_url, limit=4)
    try:
        got = [[n.node.node_id for n in retriever.retrieve(q)] for q in QUERIES]
    finally:
        retriever.source.close()
    assert got == expected


async def test_aretrieve_remote(service_url: str, fabric_home: Path) -> None:
    expected = await engine_ids(fabric_home)
    retriever = FabricRetriever.from_url(service_url, limit=4)
    try:
        got = [[n.node.node_id for n in await retriever.aretrieve(q)] for q in QUERIES]
    finally:
        await retriever.source.aclose()
    assert got == expected
