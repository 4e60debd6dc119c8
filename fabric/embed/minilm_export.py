"""The one-off export of all-MiniLM-L6-v2 to ONNX (:func:`fabric.embed.minilm.build_onnx_model`), in a process of its
own.

The export needs torch and transformers; nothing else at run time does. Imported once, torch stays in the process
for good: about 500 MB of resident memory, and some 350,000 more objects for the garbage collector, which made each
full collection about 250 ms instead of 30, with every query waiting (an engine on the 50K home: 8 full collections
in 300 queries, 1.1 s in all). So the export runs in an exec'd child,
``python -m fabric.embed.minilm_export MODEL_DIR DEST FP32 [--int8] [--matmul-only] [--plain]``, which writes the file
and prints one JSON line on stdout: ``{"ok": true, "fused": {...}}`` or ``{"ok": false, "error": "..."}``.
Where ``sys.executable`` is not a Python interpreter (an embedding host such as uWSGI), it runs in the process.

Steps (each result written atomically: a crash leaves no half file):

1. :func:`torch.onnx.export` of BERT + mean pooling + L2 normalisation (``plain``: this file is the result);
2. ONNX Runtime's BERT fusions into ``FP32`` (skipped when that file exists), all but ``SkipLayerNormalization``
   (:data:`UNFUSED`);
3. for ``int8``, dynamic per-channel int8 quantisation of ``FP32`` (``matmul_only``: the ``MatMul`` nodes only).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fabric.core.logs import get_logger

__all__ = ["UNFUSED", "ExportFailed", "export", "main"]

log = get_logger(__name__)

UNFUSED = ("enable_skip_layer_norm", "enable_bias_skip_layer_norm")
"""BERT fusions the export leaves out. ONNX Runtime's CPU ``SkipLayerNormalization`` took 6.5 x the time of the
``Add`` + ``LayerNormalization`` it replaces (496 against 76 us for 12 nodes of 20 x 384, one thread, 1.31.1 on
this project's AMD EPYC), 14 % of a 20-token query's encoding; the sessions keep ONNX Runtime from fusing them
again (:data:`fabric.embed.minilm_runtime.DISABLED_OPTIMIZERS`). In fp32 the result is the same to 1e-7; the int8 query
model's
dynamic quantisation rounds some activations the other way (up to 0.015 in a coordinate, the same cos to fp32:
docs/engine.md)."""


class ExportFailed(Exception):
    """The export did not produce its file (the child's message, or how it ended)."""


def _export_fp32(model_dir: Path, dest: Path) -> None:
    """BERT + mean pooling + normalisation as one ONNX graph (dynamic batch and sequence axes)."""
    import torch
    from transformers import AutoModel

    class _Sentence(torch.nn.Module):
        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            hidden = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=torch.zeros_like(input_ids)
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    bert = AutoModel.from_pretrained(str(model_dir), local_files_only=True, attn_implementation="eager").eval()
    sample = torch.ones(2, 16, dtype=torch.int64)
    axes = {"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"}}
    with warnings.catch_warnings(), torch.inference_mode():
        # The TorchScript exporter (deprecated in torch 2.9, present in the pinned 2.13) gives the graph ONNX
        # Runtime's BERT fusions recognise, in seconds; the dynamo exporter took 18 s and fused nothing here.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Sentence(bert), (sample, sample), str(dest), dynamo=False, opset_version=17,
            input_names=["input_ids", "attention_mask"], output_names=["sentence_embedding"],
            dynamic_axes={**axes, "sentence_embedding": {0: "batch"}}, do_constant_folding=True,
        )  # fmt: skip


def _optimise(src: Path, dest: Path) -> dict[str, int]:
    from onnxruntime.transformers import optimizer
    from onnxruntime.transformers.fusion_options import FusionOptions

    options = FusionOptions("bert")
    for name in UNFUSED:
        setattr(options, name, False)
    model = optimizer.optimize_model(
        str(src), model_type="bert", num_heads=12, hidden_size=384, opt_level=0, use_gpu=False,
        optimization_options=options,
    )  # fmt: skip
    fused = {k: int(v) for k, v in model.get_fused_operator_statistics().items() if v}
    model.save_model_to_file(str(dest))
    return fused


def _quantise(src: Path, dest: Path, *, matmul_only: bool) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(src), str(dest), weight_type=QuantType.QInt8, per_channel=True,
        op_types_to_quantize=["MatMul"] if matmul_only else None,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},  # fused ops have no shape inference
    )  # fmt: skip


def _build(model_dir: Path, dest: Path, fp32: Path, *, int8: bool, matmul_only: bool, plain: bool) -> dict[str, int]:
    """Steps 1-3 in this process; the fused operators' counts when step 2 ran."""
    fused_ops: dict[str, int] = {}
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        raw, fused = Path(tmp) / "raw.onnx", Path(tmp) / "fused.onnx"
        if plain:
            _export_fp32(model_dir, raw)
            os.replace(raw, dest)
        elif not fp32.exists():
            _export_fp32(model_dir, raw)
            fused_ops = _optimise(raw, fused)
            os.replace(fused, fp32)
        if int8:
            _quantise(fp32, fused, matmul_only=matmul_only)
            os.replace(fused, dest)
    return fused_ops


def _can_exec_python() -> bool:
    """Whether ``sys.executable`` is a Python interpreter (an embedding host such as uWSGI sets it to its own
    binary, which ``-m`` would not run; the same test as :func:`lanes.graph.sqlite_graph.sql_process.available`)."""
    return Path(sys.executable).name.lower().startswith("python")


def export(
    model_dir: Path, dest: Path, fp32: Path, *, int8: bool, matmul_only: bool = False, plain: bool = False
) -> dict[str, int]:
    """Build ``dest`` (and ``fp32`` on the way when missing) in a child process; the fused operators' counts.

    Raises:
        ExportFailed: the child reported an error or ended without an answer.
        Exception: in-process builds (no Python to exec) raise what the export raised.
    """
    if not _can_exec_python():
        return _build(model_dir, dest, fp32, int8=int8, matmul_only=matmul_only, plain=plain)
    flags = [f for f, on in (("--int8", int8), ("--matmul-only", matmul_only), ("--plain", plain)) if on]
    root = str(Path(__file__).resolve().parents[2])  # where ``fabric`` is importable from
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    cmd = [sys.executable, "-m", "fabric.embed.minilm_export", str(model_dir), str(dest), str(fp32), *flags]
    # what the libraries print (progress bars, the quantiser's advice) is the child's stderr: kept off the host's
    # streams, logged at debug level, and named in the error when the export fails
    proc = subprocess.run(cmd, capture_output=True, stdin=subprocess.DEVNULL, env=env, check=False)
    chatter = proc.stderr.decode(errors="replace").strip()
    if chatter:
        log.debug("minilm_export_output", output=chatter[-4000:])
    lines = proc.stdout.decode(errors="replace").strip().splitlines()
    try:
        answer: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    except ValueError:
        answer = {}
    if proc.returncode == 0 and answer.get("ok") and dest.exists():
        return {str(k): int(v) for k, v in answer.get("fused", {}).items()}
    detail = answer.get("error") or f"the export process ended with exit code {proc.returncode}"
    raise ExportFailed(f"{detail}: {chatter[-400:]}" if chatter and not answer.get("error") else detail)


def main(argv: Sequence[str] | None = None) -> int:
    """The child: build, print the JSON answer, exit 0 (built) or 1."""
    parser = argparse.ArgumentParser(prog="python -m fabric.embed.minilm_export")
    for name in ("model_dir", "dest", "fp32"):
        parser.add_argument(name, type=Path)
    for flag in ("--int8", "--matmul-only", "--plain"):
        parser.add_argument(flag, action="store_true")
    args = parser.parse_args(argv)
    out = sys.stdout
    sys.stdout = sys.stderr  # what the libraries print stays off the answer's line
    try:
        fused = _build(
            args.model_dir, args.dest, args.fp32, int8=args.int8, matmul_only=args.matmul_only, plain=args.plain
        )
    except Exception as exc:  # reported to the parent, which raises it as the backend being unavailable
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}), file=out, flush=True)
        return 1
    print(json.dumps({"ok": True, "fused": fused}), file=out, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
