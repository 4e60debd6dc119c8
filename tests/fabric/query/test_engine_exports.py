"""Every engine-core module declares its public API in ``__all__``."""

from __future__ import annotations

import importlib

import pytest

MODULES = [
    "fabric.query.validation",
    "fabric.query.constraints",
    "fabric.query.preflight",
    "fabric.query.penalties",
    "fabric.query.executor",
    "fabric.query.budgets",
    "fabric.query.bulkhead",
    "fabric.query.engine",
    "fabric.core.vocabulary",
    "fabric.settings.readers",
    "fabric.query.plan",
    "fabric.query.lane_setup",
    "fabric.query.stages",
    "fabric.query.retries",
    "fabric.query.cursor_secret",
    "fabric.query.resources",
    "fabric.core.logs",
    "fabric.query.metrics",
    "fabric.cli.search",
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
