"""Every eval module documents itself and exports only names it defines."""

from __future__ import annotations

import importlib

import pytest

MODULES = [
    "fabric.eval",
    "fabric.eval.calibration",
    "fabric.eval.dataset",
    "fabric.eval.gate",
    "fabric.eval.harness",
    "fabric.eval.hints",
    "fabric.eval.metrics",
    "fabric.eval.report",
    "fabric.eval.runner",
    "tools.fusion_tuning",
    "fabric.cli.eval",
    "fabric.cli.tune",
]


class TestExports:
    @pytest.mark.parametrize("name", MODULES)
    def test_all_names_exist(self, name: str) -> None:
        """Each name in __all__ is defined by the module."""
        module = importlib.import_module(name)
        assert all(hasattr(module, n) for n in module.__all__)

    @pytest.mark.parametrize("name", MODULES)
    def test_module_has_docstring(self, name: str) -> None:
        """Each module says what it is for."""
        assert importlib.import_module(name).__doc__

    def test_importing_eval_does_not_import_engine_or_ranx(self) -> None:
        """The eval package keeps the engine and ranx out of import time."""
        import subprocess
        import sys

        code = (
            "import sys, fabric.cli.eval, fabric.eval.harness; "
            "print('fabric.query.engine' in sys.modules, 'ranx' in sys.modules)"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.split() == ["False", "False"]
