"""End to end over loopback: the ingest pipeline writes to Meilisearch and ArangoDB stand-ins through the server
store writers, then the engine answers through the Meilisearch and ArangoDB lanes (what the compose profile does)."""

from __future__ import annotations

import json
from pathlib import Path

from fabric.core.chunks import StoreWriter
from fabric.ingest.pipeline import ingest
from fabric.ingest.writers import build_writers
from fabric.query.engine import Engine
from fabric.query.resources import close_resources, open_resources
from fabric.query.validation import parse_request
from fabric.settings import Settings, load_settings
from lanes.base import LaneResources
from tests.lanes.graph.fake_arango import FakeArango
from tests.lanes.keyword.fake_meili import FakeMeili
from tests.support.http import serve

DOCS = [
    {"id": "rrf", "title": "Reciprocal rank fusion", "text": "Reciprocal Rank Fusion fuses BM25 and Dense rankings."},
    {"id": "bm25", "title": "Okapi BM25", "text": "BM25 is a lexical ranking function used by Meilisearch."},
    {"id": "dense", "title": "Dense retrieval", "text": "Dense retrieval embeds queries with MiniLM."},
]


def _settings(tmp: Path, meili_port: int, arango_port: int) -> Settings:
    user = tmp / "servers.toml"
    user.write_text(f"""schema = 1
[lanes.keyword]
backend = "meilisearch"
options = {{ url = "http://127.0.0.1:{meili_port}", task_timeout_s = 5.0 }}
[lanes.graph]
backend = "arango"
options = {{ url = "http://127.0.0.1:{arango_port}", database = "fabric" }}
[lanes.vector]
enabled = false
[embeddings]
backend = "none"
[preflight]
enabled = false
""")
    return load_settings(user_file=user, env={"FABRIC_HOME": str(tmp / "home")})


class TestServerBackendsEndToEnd:
    async def test_ingest_then_search(self, tmp_path: Path) -> None:
        """Chunks ingested into both servers are found by both lanes and fused; re-ingest adds nothing."""
        corpus = tmp_path / "docs.jsonl"
        corpus.write_text("\n".join(json.dumps(d) for d in DOCS))
        meili, arango = FakeMeili(), FakeArango()
        async with serve(meili.app()) as ms, serve(arango.app()) as ars:
            settings = _settings(tmp_path, ms.port, ars.port)
            writers = build_writers(settings, LaneResources(home=settings.home))
            assert all(isinstance(w, StoreWriter) for w in writers)
            assert sorted(w.store for w in writers) == ["arango", "meilisearch"]
            report = await ingest(corpus, home=settings.home, writers=writers, embedder=None)
            for w in writers:
                await w.aclose()
            assert (report.stores["meilisearch"], report.stores["arango"]) == ("ok", "ok")
            resources = await open_resources(settings, embedder=False)
            try:
                async with Engine(settings, resources=resources) as engine:
                    result = await engine.search(
                        parse_request({"query": "BM25 ranking", "budget_ms": 3000, "route": "all"}, settings)
                    )
            finally:
                await close_resources(resources)
        assert (result.lanes["keyword"].status.value, result.lanes["graph"].status.value) == ("success", "success")
        assert result.items[0].id in {"bm25", "rrf"}
        assert {"keyword", "graph"} <= {lane for it in result.items for lane in it.lanes}
        assert len(meili.indexes["chunks"]["docs"]) == 3
