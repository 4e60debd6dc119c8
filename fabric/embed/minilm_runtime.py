"""The runtimes MiniLM's exported model runs on: OpenVINO's CPU plugin (bfloat16 where the CPU computes it
natively) and ONNX Runtime sessions, with the options every session shares."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from fabric.core.logs import get_logger

__all__ = [
    "DISABLED_OPTIMIZERS",
    "OpenVinoSession",
    "load_tokenizer",
    "onnx_session",
    "openvino_precision",
    "session_options",
]

log = get_logger(__name__)

_PRECISION: list[str] = []


def openvino_precision() -> str:
    """``bf16`` when OpenVINO's CPU plugin computes bfloat16 natively here (AMX, AVX-512 BF16), else ``f32``
    (asked once per process; imports openvino). A plugin that cannot be asked gives ``f32``, logged: loading the
    model then fails open like any unloadable model (:class:`~fabric.core.errors.LaneUnavailable`)."""
    if not _PRECISION:
        try:
            import openvino as ov

            caps = ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
        except Exception as exc:  # a broken install or no CPU plugin: no bf16 claim, and no traceback here
            log.warning("openvino_unavailable", error=f"{type(exc).__name__}: {exc}")
            caps = []
        _PRECISION.append("bf16" if "BF16" in caps else "f32")
    return _PRECISION[0]


class OpenVinoSession:
    """A compiled OpenVINO model behind ONNX Runtime's ``run(None, feeds)`` shape (one infer request a thread:
    a request is not safe to share, the compiled model is)."""

    def __init__(self, path: Path, threads: int, precision: str) -> None:
        import openvino as ov

        core = ov.Core()
        self._compiled = core.compile_model(
            core.read_model(str(path)), "CPU",
            {"INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"},
        )  # fmt: skip
        self._local = threading.local()

    def run(self, _outputs: None, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        request = getattr(self._local, "request", None)
        if request is None:
            request = self._local.request = self._compiled.create_infer_request()
        return [np.array(request.infer(feeds)[0])]  # a copy: the request reuses its output buffer


DISABLED_OPTIMIZERS = ("SkipLayerNormFusion",)
"""Graph optimisations the ONNX Runtime sessions skip: the fusion the export leaves out
(:data:`fabric.embed.minilm_export.UNFUSED` says why). ONNX Runtime ignores a name it does not know, so a test reads
the optimised graph."""


def session_options(threads: int) -> Any:
    """The ONNX Runtime session options of every MiniLM session (``threads`` intra-op threads, no spinning)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Spinning workers would burn the core the lanes need between a batch's operators.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return opts


def onnx_session(path: Path, threads: int) -> Any:
    """An ONNX Runtime session of the model at ``path`` on ``threads`` intra-op threads, without the disabled
    optimisations."""
    import onnxruntime as ort

    return ort.InferenceSession(
        str(path), session_options(threads), providers=["CPUExecutionProvider"],
        disabled_optimizers=list(DISABLED_OPTIMIZERS),
    )  # fmt: skip


def load_tokenizer(model_dir: Path, max_length: int) -> Any:
    """The model's fast tokenizer: truncation at ``max_length`` tokens, padding to the batch's longest."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.enable_truncation(max_length)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    return tok
