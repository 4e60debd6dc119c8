"""Retrieval fabric: an async multi-lane federation engine.

The engine lives in :mod:`fabric.query.engine`; shared types in :mod:`fabric.core.models`; errors in
:mod:`fabric.core.errors`.
Nothing is imported eagerly here, so ``import fabric`` stays cheap and does no I/O.
"""

__all__ = ["__version__"]

__version__ = "0.2.0"
