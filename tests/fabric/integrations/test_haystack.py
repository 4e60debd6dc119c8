"""The Haystack component against haystack-ai (pinned): in a Pipeline (run and run_async), in-process and remote."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from haystack import Document, Pipeline

from fabric.integrations.haystack import FabricRetriever
from fabric.integrations.source import FabricSource
from fabric.settings import load_settings
from tests.support.ingested import QUERIES, engine, engine_ids


def test_pipeline_in_process_matches_engine(fabric_home: Path) -> None:
    """A Pipeline running the component (run) returns the engine's ids in order, scored by score_total."""
    expected = asyncio.run(engine_ids(fabric_home))
    retriever = FabricRetriever(FabricSource(engine=engine(fabric_home)), top_k=4)
    pipeline = Pipeline()
    pipeline.add_component("retriever", retriever)
    try:
        got = [[d.id for d in pipeline.run({"retriever": {"query": q}})["retriever"]["documents"]] for q in QUERIES]
        docs = retriever.run("deployment strategy", top_k=2)["documents"]
    finally:
        retriever.source.close()
    assert got == expected
    assert len(docs) == 2
    assert isinstance(docs[0], Document)
    assert docs[0].content == "Use blue-green deploys for zero-downtime releases."
    assert docs[0].score == docs[0].meta["score_total"]
    assert set(docs[0].meta["lane_status"].values()) == {"success"}  # the default route's lanes, each answered
    assert {"keyword", "vector"} <= set(docs[0].meta["lane_status"])


async def test_async_pipeline_in_process(fabric_home: Path) -> None:
    """Pipeline.run_async calls the component's run_async on the caller's loop, over an engine the caller opened."""
    expected = await engine_ids(fabric_home)
    async with engine(fabric_home) as eng:
        pipeline = Pipeline()
        pipeline.add_component("retriever", FabricRetriever.from_engine(eng, top_k=4))
        got = []
        for q in QUERIES:
            out = await pipeline.run_async({"retriever": {"query": q}})
            got.append([d.id for d in out["retriever"]["documents"]])
    assert got == expected


def test_run_remote(service_url: str, fabric_home: Path) -> None:
    expected = asyncio.run(engine_ids(fabric_home))
    retriever = FabricRetriever.from_url(service_url, top_k=4)
    try:
        got = [[d.id for d in retriever.run(q)["documents"]] for q in QUERIES]
    finally:
        retriever.source.close()
    assert got == expected


async def test_run_async_remote(service_url: str, fabric_home: Path) -> None:
    expected = await engine_ids(fabric_home)
    retriever = FabricRetriever.from_url(service_url, top_k=4)
    try:
        got = [[d.id for d in (await retriever.run_async(q))["documents"]] for q in QUERIES]
        weighted = (await retriever.run_async("flour and water", weights={"semantic": 0.0}))["documents"]
    finally:
        await retriever.source.aclose()
    assert got == expected
    assert all(d.meta["score_semantic"] == 0.0 for d in weighted)


ALLOWED = "fabric.integrations.haystack"
"""Haystack loads components only from modules the caller trusts (its deserialisation allowlist)."""


def test_a_pipeline_round_trips_through_dumps_and_loads(fabric_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Pipeline.dumps``/``loads`` keep the component's source and defaults; the API key is never serialised."""
    from haystack import Pipeline

    from fabric.serve.keys.store import KeyStore, Role
    from tests.support.ingested import live_service

    _, key = KeyStore(fabric_home).create("default", Role.from_str("reader"))
    with live_service(fabric_home) as url:
        pipeline = Pipeline()
        pipeline.add_component("retriever", FabricRetriever.from_url(url, api_key=key, top_k=3, mode="research"))
        text = pipeline.dumps()
        assert key not in text
        monkeypatch.setenv("FABRIC_API_KEY", key)
        loaded = Pipeline.loads(text, allowed_modules=[ALLOWED])
        retriever = loaded.get_component("retriever")
        try:
            assert (retriever.top_k, retriever.mode) == (3, "research")
            assert loaded.run({"retriever": {"query": "deployment strategy"}})["retriever"]["documents"]
        finally:
            retriever.source.close()
            pipeline.get_component("retriever").source.close()

    in_process = Pipeline()
    in_process.add_component(
        "retriever", FabricRetriever.from_settings(load_settings(env={"FABRIC_HOME": str(fabric_home)}))
    )
    again = Pipeline.loads(in_process.dumps(), allowed_modules=[ALLOWED]).get_component("retriever")
    assert again.source.engine.settings.home == fabric_home
    in_process.get_component("retriever").source.close()
    again.source.close()
