"""Capture the engine's log events as dicts (what :func:`structlog.testing.capture_logs` gave for global structlog)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["captured_events"]


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.events: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        level = record.levelname.lower()
        if isinstance(record.msg, dict):
            self.events.append({**record.msg, "log_level": level})
        else:
            self.events.append({"event": record.getMessage(), "logger": record.name, "log_level": level})


@contextmanager
def captured_events(level: int = logging.DEBUG) -> Iterator[list[dict[str, Any]]]:
    """Every record at ``level`` and above while the block runs: structlog events as their dicts (``log_level``
    added), other records as ``{"event": message, "logger": name}``."""
    root = logging.getLogger()
    handler, old = _Collect(), root.level
    root.addHandler(handler)
    root.setLevel(level)
    try:
        yield handler.events
    finally:
        root.removeHandler(handler)
        root.setLevel(old)
