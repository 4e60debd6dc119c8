"""Every engine-core module declares its public API in ``__all__``."""

from __future__ import annotations

import importlib

import pytest

MODULES = [
    "fabric.validation",
    "fabric.constraints",
    "fabric.preflight",
    "fabric.penalties",
    "fabric.executor",
    "fabric.budgets",
    "fabric.bulkhead",
    "fabric.engine",
    "fabric.vocabulary",
    "fabric.config_readers",
    "fabric.query_plan",
    "fabric.lane_setup",
    "fabric.stages",
    "fabric.retries",
    "fabric.cursor_secret",
    "fabric.resources",
    "fabric.logs",
    "fabric.metrics",
    "fabric.commands.search",
    "bench.budget",
    "fusion.cursor",
]


class TestExports:
    @pytest.mark.parametrize("name", MODULES)
    def test_all_names_exist(self, name: str) -> None:
        """Every name in __all__ exists and the module has a docstring."""
        module = importlib.import_module(name)
        assert module.__doc__
        assert module.__all__
        assert all(hasattr(module, attr) for attr in module.__all__)
