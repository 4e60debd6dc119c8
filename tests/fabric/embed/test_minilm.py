"""fabric.embed.minilm: the ONNX Runtime path of all-MiniLM-L6-v2 against the torch one (real model, real runtimes)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fabric.embed.minilm as mod
from fabric.core.errors import ConfigError, LaneUnavailable
from fabric.embed import minilm_runtime as mr
from fabric.embed.embeddings import CachedEmbedder, build_embedder
from fabric.embed.minilm import (
    RUNTIMES,
    MiniLMEmbedder,
    OnnxMiniLMEmbedder,
    build_onnx_model,
    minilm_embedder,
    onnx_model_path,
    weights_digest,
)
from fabric.embed.minilm_runtime import openvino_precision
from fabric.embed.query_batch import encode_query, query_batcher
from fabric.settings.sections import EmbeddingsConfig

TEXTS = [
    "What is the effect of vitamin D on bone density in elderly women?",
    "short",
    "Alterations of the architecture of cerebral white matter in the developing brain. " * 40,  # > 256 tokens
    "deployment revert procedure",
]


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache dir holding both exports for this module (exported once: a few seconds)."""
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    """The reference: sentence-transformers on torch."""
    return np.asarray(MiniLMEmbedder().embed(TEXTS), dtype=np.float32)


@pytest.fixture(scope="module")
def fp32(onnx_cache: Path) -> OnnxMiniLMEmbedder:
    """The fp32 ONNX embedder."""
    return OnnxMiniLMEmbedder(cache_dir=onnx_cache, int8=False)


@pytest.fixture(scope="module")
def int8(onnx_cache: Path) -> OnnxMiniLMEmbedder:
    """The int8 ONNX embedder."""
    return OnnxMiniLMEmbedder(cache_dir=onnx_cache, int8=True)


@pytest.fixture(scope="module")
def openvino(onnx_cache: Path) -> OnnxMiniLMEmbedder:
    """The OpenVINO embedder (bf16 where the CPU has it, else fp32)."""
    return OnnxMiniLMEmbedder(cache_dir=onnx_cache, runtime="openvino")


class TestVectors:
    def test_fp32_matches_torch(self, fp32: OnnxMiniLMEmbedder, torch_vectors: np.ndarray) -> None:
        """fp32 ONNX gives torch's vectors to float rounding, long texts truncated alike."""
        got = np.asarray(fp32.embed(TEXTS), dtype=np.float32)
        assert got.shape == (4, 384)
        assert np.abs(got - torch_vectors).max() < 1e-5

    def test_int8_stays_close_to_torch(self, int8: OnnxMiniLMEmbedder, torch_vectors: np.ndarray) -> None:
        """int8 vectors are unit length and within cos 0.97 of torch's (SciFact's worst measured: 0.98)."""
        got = np.asarray(int8.embed(TEXTS), dtype=np.float32)
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-4)
        assert ((got * torch_vectors).sum(axis=1) > 0.97).all()
        assert not np.array_equal(got, torch_vectors)

    def test_openvino_stays_close_to_torch(self, openvino: OnnxMiniLMEmbedder, torch_vectors: np.ndarray) -> None:
        """OpenVINO's vectors are unit length and within cos 0.999 of torch's (bf16 on SciFact: 0.99997 at worst)."""
        got = np.asarray(openvino.embed(TEXTS), dtype=np.float32)
        assert got.shape == (4, 384)
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-3)
        assert ((got * torch_vectors).sum(axis=1) > 0.999).all()
        assert openvino.precision in ("bf16", "f32")
        if openvino.precision == "f32":
            assert np.abs(got - torch_vectors).max() < 1e-4

    def test_openvino_in_fp32_matches_torch(
        self, openvino: OnnxMiniLMEmbedder, torch_vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Compiled in f32 (a CPU without bf16), the plain export gives torch's vectors to float rounding."""
        monkeypatch.setattr(mr, "_PRECISION", ["f32"])
        emb = OnnxMiniLMEmbedder(cache_dir=openvino.cache_dir, runtime="openvino")
        assert (emb.precision, emb.cache_name) == ("f32", "all-MiniLM-L6-v2@openvino-f32")
        got = np.asarray(emb.embed(TEXTS), dtype=np.float32)
        assert np.abs(got - torch_vectors).max() < 1e-4

    def test_a_plugin_that_cannot_be_asked_means_f32(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """When OpenVINO's CPU plugin cannot report its capabilities, the precision is f32 (logged), no traceback."""
        import openvino

        def broken() -> None:
            raise RuntimeError("no CPU plugin")

        monkeypatch.setattr(mr, "_PRECISION", [])
        monkeypatch.setattr(openvino, "Core", broken)
        assert openvino_precision() == "f32"
        assert mr._PRECISION == ["f32"]

    def test_openvino_threads_get_their_own_requests(self, openvino: OnnxMiniLMEmbedder) -> None:
        """Texts embedded from several threads at once get the vectors one thread gets (one request a thread)."""
        from concurrent.futures import ThreadPoolExecutor

        want = np.asarray(openvino.embed(TEXTS))
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(lambda i: openvino.embed(TEXTS[i % 4 :] + TEXTS[: i % 4]), range(8)))
        for i, vectors in enumerate(got):
            assert np.abs(np.roll(np.asarray(vectors), i % 4, axis=0) - want).max() < 1e-6

    def test_padding_does_not_change_a_vector(self, fp32: OnnxMiniLMEmbedder) -> None:
        """A text embedded alone or padded in a batch with a longer one gets the same vector."""
        alone = np.asarray(fp32.embed([TEXTS[1]])[0])
        batched = np.asarray(fp32.embed(TEXTS)[1])
        assert np.abs(alone - batched).max() < 1e-5

    def test_order_is_kept_across_batches(self, onnx_cache: Path) -> None:
        """Length-sorted batches of ``batch_size`` come back in the input order."""
        small = OnnxMiniLMEmbedder(cache_dir=onnx_cache, int8=False, batch_size=2)
        one_by_one = [small.embed([t])[0] for t in TEXTS]
        assert np.abs(np.asarray(small.embed(TEXTS)) - np.asarray(one_by_one)).max() < 1e-5

    def test_empty_input(self, fp32: OnnxMiniLMEmbedder) -> None:
        """No texts, no vectors, no model run."""
        assert fp32.embed([]) == []


class TestSessions:
    def test_queries_use_the_single_threaded_session(self, onnx_cache: Path) -> None:
        """A query runs on the query_threads session; only a batch larger than SMALL_BATCH opens the other."""
        emb = OnnxMiniLMEmbedder(cache_dir=onnx_cache, int8=True, query_threads=1, batch_threads=2)
        emb.warm()
        assert set(emb._sessions) == {1}
        emb.embed([f"text {i}" for i in range(mod.SMALL_BATCH + 1)])
        assert set(emb._sessions) == {1, 2}

    def test_batcher_micro_batches_onnx_queries(self, onnx_cache: Path) -> None:
        """Concurrent encode_query calls share model calls (the first query's starts at once, the three arriving
        with it share the next), and each gets the very vector it gets alone: the int8 model encodes a query
        alone even inside a batch, since its activation scale is a run's own."""
        emb = OnnxMiniLMEmbedder(cache_dir=onnx_cache, int8=True)

        async def main() -> list[list[float]]:
            out = await asyncio.gather(*(encode_query(emb, t) for t in TEXTS))
            assert (query_batcher(emb).batches, query_batcher(emb).texts) == (2, 4)
            return list(out)

        got = asyncio.run(main())
        alone = [emb.embed_queries([t])[0] for t in TEXTS]
        assert np.array_equal(np.asarray(got), np.asarray(alone))

    @pytest.mark.parametrize("weights", ["int8-matmul", "int8"])
    def test_a_quantised_query_vector_does_not_depend_on_its_company(self, onnx_cache: Path, weights: str) -> None:
        """A query encoded with others (a long one among them: padding) gets the bits it gets alone; documents
        keep their batches, where the int8 documents' model does depend on the company (why queries run alone)."""
        emb = OnnxMiniLMEmbedder(cache_dir=onnx_cache, int8=True, query_weights=weights)
        together = np.asarray(emb.embed_queries(TEXTS))
        alone = np.asarray([emb.embed_queries([t])[0] for t in TEXTS])
        assert np.array_equal(together, alone)
        docs_together = np.asarray(emb.embed(TEXTS))
        docs_alone = np.asarray([emb.embed([t])[0] for t in TEXTS])
        assert np.abs(docs_together - docs_alone).max() > 1e-3


class TestQueryWeights:
    def test_int8_matmul_queries_documents_stay_fp32(
        self, onnx_cache: Path, fp32: OnnxMiniLMEmbedder, torch_vectors: np.ndarray
    ) -> None:
        """Queries run on the MatMul-int8 model (close to torch's vectors, not equal); documents on fp32."""
        emb = OnnxMiniLMEmbedder(cache_dir=onnx_cache, query_weights="int8-matmul")
        queries = np.asarray(emb.embed_queries(TEXTS), dtype=np.float32)
        assert np.allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-4)
        assert ((queries * torch_vectors).sum(axis=1) > 0.97).all()
        assert not np.array_equal(queries, torch_vectors)
        assert np.abs(np.asarray(emb.embed(TEXTS)) - np.asarray(fp32.embed(TEXTS))).max() < 1e-6
        path = onnx_model_path(onnx_cache, emb._model_dir(), int8=True, matmul_only=True)
        assert path.name == "model_int8_matmul.onnx"
        assert path.stat().st_size < onnx_model_path(onnx_cache, emb._model_dir(), int8=False).stat().st_size

    def test_same_runs_the_documents_model(self, onnx_cache: Path, fp32: OnnxMiniLMEmbedder) -> None:
        """query_weights "same" (the class default) encodes a query exactly as a document."""
        assert fp32.query_cache_name == fp32.cache_name
        assert fp32.embed_queries(TEXTS[:2]) == fp32.embed(TEXTS[:2])
        assert fp32._query_session is None

    def test_cache_keeps_query_vectors_apart(self, onnx_cache: Path, tmp_path: Path) -> None:
        """Through the cache, the same text as a query and as a document gets each model's vector, both kept."""
        emb = build_embedder(EmbeddingsConfig(runtime="onnx", query_weights="int8-matmul"), onnx_cache)
        assert isinstance(emb, CachedEmbedder)
        assert emb.query_cache_name == "all-MiniLM-L6-v2@onnx+q-int8-matmul"
        text = ["vitamin D and bone density"]
        doc, query = emb.embed(text), emb.embed_queries(text)
        assert doc != query
        misses = emb.misses
        assert (emb.embed(text), emb.embed_queries(text), emb.misses) == (doc, query, misses)

    def test_warm_opens_only_the_query_model(self, onnx_cache: Path) -> None:
        """A serving process warms the model that encodes queries; the documents' one opens at the first batch."""
        emb = OnnxMiniLMEmbedder(cache_dir=onnx_cache, runtime="openvino", query_weights="int8-matmul")
        emb.warm()
        assert emb._query_session is not None
        assert emb._sessions == {}
        emb.embed(["a document"])
        assert set(emb._sessions) == {emb.query_threads}

    def test_batcher_encodes_with_the_query_model(self, onnx_cache: Path) -> None:
        """encode_query (the vector lanes' path) gives embed_queries' vector."""
        emb = OnnxMiniLMEmbedder(cache_dir=onnx_cache, query_weights="int8-matmul")
        got = asyncio.run(encode_query(emb, TEXTS[0]))
        assert np.abs(np.asarray(got) - np.asarray(emb.embed_queries(TEXTS[:1])[0])).max() < 1e-6
        assert np.abs(np.asarray(got) - np.asarray(emb.embed(TEXTS[:1])[0])).max() > 1e-4

    def test_bad_query_weights_are_config_errors(self, tmp_path: Path) -> None:
        """A misspelt value names the key and the valid values; torch has no quantised query model (ignored)."""
        with pytest.raises(ConfigError, match=r"embeddings\.query_weights.*same, int8-matmul, int8"):
            minilm_embedder(EmbeddingsConfig(query_weights="fp16"), tmp_path)
        torch = minilm_embedder(EmbeddingsConfig(runtime="torch", query_weights="int8"), tmp_path)
        assert not hasattr(torch, "embed_queries")  # torch encodes queries as documents
        with pytest.raises(ValueError, match="query_weights"):
            OnnxMiniLMEmbedder(cache_dir=tmp_path, query_weights="fp16")


class TestExport:
    def test_export_is_cached_and_keyed(self, onnx_cache: Path, int8: OnnxMiniLMEmbedder) -> None:
        """The export lands under <cache>/onnx/<key>/ and a second build reuses the file."""
        int8.warm()
        model_dir = int8._model_dir()
        path = onnx_model_path(onnx_cache, model_dir, int8=True)
        assert path.exists()
        assert path.parent.parent == onnx_cache / "onnx"
        mtime = path.stat().st_mtime_ns
        assert build_onnx_model(onnx_cache, model_dir, int8=True) == path
        assert path.stat().st_mtime_ns == mtime
        assert onnx_model_path(onnx_cache, model_dir, int8=False).name == "model.onnx"

    @pytest.mark.parametrize("matmul_only", [False, True])
    def test_no_skip_layer_norm_in_the_graph_a_session_runs(
        self,
        onnx_cache: Path,
        int8: OnnxMiniLMEmbedder,
        tmp_path: Path,
        matmul_only: bool,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """The fused exports keep Add + LayerNormalization (ONNX Runtime's CPU SkipLayerNormalization is several
        times slower), and the sessions' own optimisations do not fuse them again."""
        import onnx
        import onnxruntime as ort

        int8.warm()
        path = build_onnx_model(onnx_cache, int8._model_dir(), int8=True, matmul_only=matmul_only)
        ops = {node.op_type for node in onnx.load(str(path), load_external_data=False).graph.node}
        assert "SkipLayerNormalization" not in ops
        assert "LayerNormalization" in ops
        assert {"Attention", "QAttention"} & ops  # the other BERT fusions stay (int8 quantises Attention)

        def optimised_ops(session: Any) -> set[str]:
            """The op types of the graph ``session`` built (every MiniLM session writes it out here)."""
            saved = tmp_path / "optimised.onnx"
            saved.unlink(missing_ok=True)
            real = mr.session_options

            def writing(threads: int) -> Any:
                opts = real(threads)
                opts.optimized_model_filepath = str(saved)
                return opts

            with monkeypatch.context() as m:
                m.setattr(mr, "session_options", writing)
                session()
            return {node.op_type for node in onnx.load(str(saved), load_external_data=False).graph.node}

        ops = optimised_ops(lambda: mr.onnx_session(path, 1))  # what the embedder runs
        assert "SkipLayerNormalization" not in ops
        assert "LayerNormalization" in ops
        default = optimised_ops(  # the fusion is on by default, so the disabled list is what keeps it out
            lambda: ort.InferenceSession(str(path), mr.session_options(1), providers=["CPUExecutionProvider"])
        )
        assert "SkipLayerNormalization" in default

    def test_openvino_reads_the_plain_export(self, onnx_cache: Path, openvino: OnnxMiniLMEmbedder) -> None:
        """OpenVINO compiles the fp32 export before ONNX Runtime's fusions, kept beside the fused one."""
        openvino.warm()
        plain = onnx_model_path(onnx_cache, openvino._model_dir(), int8=False, plain=True)
        assert plain.name == "model_plain.onnx"
        assert openvino._path == plain
        assert plain.exists()
        fused = onnx_model_path(onnx_cache, openvino._model_dir(), int8=False)
        assert plain.parent == fused.parent
        assert set(openvino._sessions) == {openvino.query_threads}

    def test_new_settings_or_weights_get_a_new_key(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """The key follows the weights' content and the export settings."""
        (tmp_path / "model.safetensors").write_bytes(b"weights-1")
        first = onnx_model_path(tmp_path, tmp_path, int8=True)
        monkeypatch.setattr(mod, "EXPORT_SETTINGS", mod.EXPORT_SETTINGS + ";other")
        assert onnx_model_path(tmp_path, tmp_path, int8=True) != first
        other = tmp_path / "other"
        other.mkdir()
        (other / "model.safetensors").write_bytes(b"weights-2")
        assert weights_digest(other) != weights_digest(tmp_path)

    def test_another_cache_dir_reuses_this_process_export(self, tmp_path: Path, int8: OnnxMiniLMEmbedder) -> None:
        """A scratch cache dir gets the export already built by this process, without exporting again."""
        int8.warm()
        path = build_onnx_model(tmp_path, int8._model_dir(), int8=True)
        assert path.is_relative_to(tmp_path)
        assert path.read_bytes()[:64] == onnx_model_path(int8.cache_dir, int8._model_dir(), int8=True).read_bytes()[:64]

    def test_unreadable_weights_make_the_backend_unavailable(self, tmp_path: Path) -> None:
        """An export that fails (no weights here) is LaneUnavailable, not a traceback."""
        with pytest.raises(LaneUnavailable, match="cannot export"):
            build_onnx_model(tmp_path / "cache", tmp_path, int8=False)


class TestFactory:
    def test_runtimes(self, tmp_path: Path) -> None:
        """Each runtime gets its embedder, lazily (no export, no session)."""
        assert isinstance(minilm_embedder(EmbeddingsConfig(runtime="torch"), tmp_path), MiniLMEmbedder)
        emb = minilm_embedder(EmbeddingsConfig(runtime="ONNX", query_threads=1, batch_threads=2), tmp_path)
        assert isinstance(emb, OnnxMiniLMEmbedder)
        assert (emb.int8, emb.runtime, emb.batch_threads, emb._sessions) == (False, "onnx", 2, {})
        emb = minilm_embedder(EmbeddingsConfig(runtime="OpenVINO", query_weights="int8-matmul"), tmp_path)
        assert isinstance(emb, OnnxMiniLMEmbedder)
        assert (emb.runtime, emb.precision, emb._sessions) == ("openvino", openvino_precision(), {})
        assert emb.query_cache_name == f"all-MiniLM-L6-v2@openvino-{emb.precision}+q-int8-matmul"
        assert not (tmp_path / "onnx").exists()
        with pytest.raises(ValueError, match="runtime"):
            OnnxMiniLMEmbedder(cache_dir=tmp_path, runtime="torch")

    def test_the_shipped_runtime_is_openvino(self) -> None:
        """The default document encoder is OpenVINO; its queries run on the MatMul-int8 ONNX model."""
        config = EmbeddingsConfig()
        assert (config.runtime, config.query_weights) == ("openvino", "int8-matmul")
        assert RUNTIMES == ("openvino", "onnx", "onnx-int8", "torch")

    def test_unknown_runtime_is_a_config_error(self, tmp_path: Path) -> None:
        """A misspelt runtime names the key and the valid values."""
        with pytest.raises(ConfigError, match=r"embeddings\.runtime.*openvino, onnx, onnx-int8, torch"):
            minilm_embedder(EmbeddingsConfig(runtime="tensorrt"), tmp_path)

    def test_missing_runtime_package_fails_open(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without onnxruntime the MiniLM backend is unavailable (None, logged), like a missing torch."""
        real = mod.importlib.util.find_spec
        monkeypatch.setattr(mod.importlib.util, "find_spec", lambda n: None if n == "onnxruntime" else real(n))
        assert minilm_embedder(EmbeddingsConfig(runtime="onnx-int8"), tmp_path) is None

    def test_cache_files_are_per_runtime_stores_per_model(self, tmp_path: Path) -> None:
        """The embedding cache is keyed by runtime (vectors differ); the name stores use stays the model's."""
        paths = {}
        for runtime in ("torch", "onnx", "onnx-int8", "openvino"):
            emb = build_embedder(EmbeddingsConfig(runtime=runtime), tmp_path)
            assert isinstance(emb, CachedEmbedder)
            assert emb.name == "all-MiniLM-L6-v2"
            paths[runtime] = emb.cache.path
        assert paths["torch"] == tmp_path / "embeddings" / "all-MiniLM-L6-v2" / "vectors.sqlite"
        assert len(set(paths.values())) == 4


def test_public_api() -> None:
    """The module's public names."""
    assert sorted(mod.__all__) == sorted(
        [
            "EXPORT_SETTINGS", "MAX_SEQ_LENGTH", "QUERY_WEIGHTS", "MiniLMEmbedder", "OnnxMiniLMEmbedder", "RUNTIMES",
            "build_onnx_model", "minilm_embedder", "onnx_model_path", "weights_digest",
        ]
    )  # fmt: skip
    assert sorted(mr.__all__) == [
        "DISABLED_OPTIMIZERS", "OpenVinoSession", "load_tokenizer", "onnx_session", "openvino_precision",
        "session_options",
    ]  # fmt: skip
