"""The compiled loops of :mod:`fusion._kernel` (``fusion/_kernel.c``), or None where the install did not build them.

The extension is optional: the package build compiles it where a C compiler is at hand and goes on without it
otherwise. Every compiled function has a pure-Python twin that is the reference (same results, slower); the
twins are checked against each other in ``tests/fusion/test_kernel.py``. ``FABRIC_REQUIRE_KERNEL=1`` (set by CI)
turns a missing extension into a test failure instead of a silent fallback.
"""

from __future__ import annotations

from types import ModuleType

__all__ = ["kernel"]

kernel: ModuleType | None
try:
    from fusion import _kernel as kernel
except ImportError:  # pragma: no cover - where the extension is not built
    kernel = None
