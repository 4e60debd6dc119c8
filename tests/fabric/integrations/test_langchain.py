"""The LangChain retriever against langchain-core (pinned), in-process and remote, blocking and async."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from fabric.integrations.langchain import FabricRetriever
from fabric.integrations.source import FabricSource
from tests.support.ingested import QUERIES, engine, engine_ids

LEDGER = {"id", "score_total", "score_lexical", "score_semantic", "score_graph", "contributions", "scores"}


def test_invoke_in_process_matches_engine(fabric_home: Path) -> None:
    """invoke() over an engine it opens: Documents with the engine's ids in the engine's order."""
    expected = asyncio.run(engine_ids(fabric_home))
    retriever = FabricRetriever(source=FabricSource(engine=engine(fabric_home)), limit=4)
    try:
        assert isinstance(retriever, BaseRetriever)
        got = [[d.id for d in retriever.invoke(q)] for q in QUERIES]
        doc = retriever.invoke("deployment strategy")[0]
    finally:
        retriever.source.close()
    assert got == expected
    assert isinstance(doc, Document)
    assert doc.page_content == "Use blue-green deploys for zero-downtime releases."
    assert LEDGER | {"lanes", "ranks", "lane_status"} <= set(doc.metadata)
    # the lanes the default route planned (auto: Dense is keyword + vector), each answered
    assert set(doc.metadata["lane_status"].values()) == {"success"}
    assert {"keyword", "vector"} <= set(doc.metadata["lane_status"])
    assert "keyword" in doc.metadata["lanes"]


async def test_ainvoke_in_process_over_open_engine(fabric_home: Path) -> None:
    """ainvoke() over an engine the caller opened, on the caller's loop; weights pass through."""
    expected = await engine_ids(fabric_home)
    async with engine(fabric_home) as eng:
        retriever = FabricRetriever.from_engine(eng, limit=4)
        got = [[d.id for d in await retriever.ainvoke(q)] for q in QUERIES]
        weighted = await FabricRetriever.from_engine(eng, limit=2, weights={"graph": 0.0, "vector": 0.0}).ainvoke(
            "flour and water"
        )
    assert got == expected
    assert all(d.metadata["score_semantic"] == 0.0 for d in weighted)


def test_invoke_remote(service_url: str, fabric_home: Path) -> None:
    """invoke() against a live fabric serve gives the same ids and order."""
    expected = asyncio.run(engine_ids(fabric_home))
    retriever = FabricRetriever.from_url(service_url, limit=4)
    try:
        got = [[d.id for d in retriever.invoke(q)] for q in QUERIES]
    finally:
        retriever.source.close()
    assert got == expected


async def test_ainvoke_remote(service_url: str, fabric_home: Path) -> None:
    expected = await engine_ids(fabric_home)
    retriever = FabricRetriever.from_url(service_url, limit=4)
    dbsf = FabricRetriever(source=retriever.source, limit=4, fusion="score_dbsf")
    try:
        got = [[d.id for d in await retriever.ainvoke(q)] for q in QUERIES]
        docs = await dbsf.ainvoke("deployment strategy")
    finally:
        await retriever.source.aclose()
    assert got == expected
    assert docs[0].metadata["total"] >= len(docs)
    meta = docs[0].metadata
    assert sum(meta["contributions"].values()) == pytest.approx(meta["score_total"], abs=1e-5)


def test_from_url_against_a_service_with_keys(fabric_home: Path) -> None:
    """``from_url(url, api_key=...)`` (or the same key in ``headers``) reaches a keyed service; without it, 401."""
    from fabric.client import FabricClientError
    from fabric.serve.keys.store import KeyStore, Role
    from tests.support.ingested import live_service

    _, key = KeyStore(fabric_home).create("default", Role.from_str("reader"))
    with live_service(fabric_home) as url:
        keyed = FabricRetriever.from_url(url, api_key=key, limit=2)
        headed = FabricRetriever.from_url(url, headers={"Authorization": f"Bearer {key}"}, limit=2)
        bare = FabricRetriever.from_url(url, limit=2)
        try:
            assert [d.id for d in keyed.invoke("deployment strategy")] == [
                d.id for d in headed.invoke("deployment strategy")
            ]
            assert keyed.invoke("deployment strategy")
            with pytest.raises(FabricClientError) as refused:
                bare.invoke("deployment strategy")
            assert refused.value.status == 401
        finally:
            for r in (keyed, headed, bare):
                r.source.close()
