"""Server-store lane kinds of the fault matrix (:mod:`bench.faults`): Qdrant's vector lane, ArangoDB's graph lane.

Each upstream is the loopback wire-format stand-in the lane tests use (``tests.lanes.vector.fake_qdrant``,
``tests.lanes.graph.fake_arango``, loaded at run time), filled through the real writer straight at the upstream
(not through the proxy); the real lane then reads it through the :class:`~tools.faultproxy.FaultProxy` with its
own client (``qdrant-client`` over httpx, ``python-arango`` over requests in a worker thread). The Qdrant lane embeds
with the tests' deterministic bag-of-words embedder: the faults are in the transport, not in the vectors.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fabric.core.models import LaneKind
from lanes.base import Lane, LaneResources, LaneSpec
from tests.support.http import serve

__all__ = ["ARANGO_QUERY", "QDRANT_QUERY", "arango_lane", "arango_upstream", "qdrant_lane", "qdrant_upstream"]

QDRANT_QUERY = "apple banana"
"""The query of the Qdrant cases (shares words with the stored chunks)."""

ARANGO_QUERY = "insulin glucose"
"""The query of the ArangoDB cases (names two stored entities)."""

_QDRANT_TEXTS = ("apple banana smoothie", "banana bread recipe", "apple orchard harvest", "car engine wheel")
_ARANGO_TEXTS = (
    ("d1", "Insulin regulates Glucose uptake."),
    ("d2", "Glucose fuels the Brain."),
    ("d3", "The Brain contains Neurons."),
)


def _load(path: str) -> Any:
    """A test helper (``module.name``), loaded at run time (the tests are not typed strictly)."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _embedder() -> Any:
    return _load("tests.support.embedded.BagEmbedder")()


@asynccontextmanager
async def qdrant_upstream() -> AsyncIterator[str]:
    """A fake Qdrant server holding a few embedded chunks, written by :class:`QdrantWriter` directly."""
    from dataclasses import replace

    from lanes.vector.qdrant.writer import QdrantWriter

    fake = _load("tests.lanes.vector.fake_qdrant.FakeQdrant")()
    chunk = _load("tests.support.embedded.chunk")
    async with serve(fake.app()) as srv:
        url = f"http://127.0.0.1:{srv.port}"
        embedder = _embedder()
        chunks = [chunk(f"q{i}", text, title=text.split()[0]) for i, text in enumerate(_QDRANT_TEXTS)]
        vectors = embedder.embed([c.embed_text for c in chunks])
        writer = QdrantWriter(_qdrant_spec(url), LaneResources(embedder=embedder))
        await writer.open()
        await writer.upsert([replace(c, vector=tuple(v)) for c, v in zip(chunks, vectors, strict=True)])
        await writer.aclose()
        yield url


def _qdrant_spec(url: str) -> LaneSpec:
    return LaneSpec(name="vector", kind=LaneKind.VECTOR, backend="qdrant", options={"url": url})


def qdrant_lane(url: str, _session: Any) -> Lane:
    """Qdrant's vector lane in server mode at ``url`` (its own httpx client; the guarded session is unused)."""
    from lanes.vector.qdrant.lane import QdrantVectorLane

    return QdrantVectorLane(_qdrant_spec(url), LaneResources(embedder=_embedder()))


def _arango_spec(url: str, **extra: Any) -> LaneSpec:
    return LaneSpec(name="graph", kind=LaneKind.GRAPH, backend="arango", options={"url": url, **extra})


@asynccontextmanager
async def arango_upstream() -> AsyncIterator[str]:
    """A fake ArangoDB holding a small entity graph, written by :class:`ArangoGraphWriter` directly."""
    from lanes.graph.arango.writer import ArangoGraphWriter

    fake = _load("tests.lanes.graph.fake_arango.FakeArango")()
    async with serve(fake.app()) as srv:
        url = f"http://127.0.0.1:{srv.port}"
        writer = ArangoGraphWriter(_arango_spec(url, write_timeout_s=5), LaneResources())
        await writer.open()
        chunk = _load("tests.support.embedded.chunk")
        await writer.upsert([chunk(cid, text, title=text.split()[0]) for cid, text in _ARANGO_TEXTS])
        await writer.aclose()
        yield url


def arango_lane(url: str, _session: Any) -> Lane:
    """ArangoDB's graph lane at ``url`` (``python-arango`` in a worker thread; its request timeout 2 s, so a thread
    the executor abandoned ends soon after the budget)."""
    from lanes.graph.arango.lane import ArangoGraphLane

    return ArangoGraphLane(_arango_spec(url, timeout_s=2.0), LaneResources())
