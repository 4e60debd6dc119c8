"""structlog configuration: JSON lines to stderr, configured once at the entry point (CLI, HTTP, bench).

Library code only calls ``structlog.get_logger(__name__)`` (a lazy proxy) and never configures logging.
The engine binds ``trace_id`` per query with :func:`bind_trace`; lane tasks created inside the query copy
the context variables and so log with the same ``trace_id``.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

import structlog

__all__ = ["bind_trace", "configure_logging", "enabled", "new_trace_id"]

_level = logging.NOTSET
"""The level :func:`configure_logging` set last (NOTSET: not configured, structlog prints everything)."""


def configure_logging(*, level: int | str = logging.WARNING, stream: TextIO | None = None) -> None:
    """Configure structlog to print JSON lines at ``level`` and above to ``stream`` (stderr by default)."""
    global _level
    if isinstance(level, str):
        level = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    _level = level
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(sort_keys=True),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=stream or sys.stderr),
        cache_logger_on_first_use=False,
    )


def enabled(level: int) -> bool:
    """Whether a log call at ``level`` would print: lets per-query call sites skip building an event that the
    filtering logger would drop (a structlog call through a module-level lazy logger binds a new logger each time)."""
    return level >= _level


def new_trace_id() -> str:
    """A fresh 16-hex-digit trace id."""
    return os.urandom(8).hex()


def bind_trace(trace_id: str) -> None:
    """Bind ``trace_id`` to the current context (inherited by tasks created afterwards)."""
    structlog.contextvars.bind_contextvars(trace_id=trace_id)
