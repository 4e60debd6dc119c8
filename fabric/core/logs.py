"""Logging: silent in a host's process until it asks for output; one stream of JSON lines under the CLI and service.

Library code logs through :func:`get_logger` (structlog bound loggers over the standard ``logging`` tree, named
after the module: ``fabric.*``, ``lanes.*``, ``fusion.*``). The package loggers carry a ``NullHandler``, so an
application that embeds the engine sees nothing unless it configures ``logging`` itself (then the records are
ordinary ``LogRecord`` objects under those names, the structured event in ``record.msg``).

The CLI and the service call :func:`configure_logging` once: every record of the process, the engine's, aiohttp's,
the MCP SDK's, ``warnings`` and uncaught exceptions, is rendered as one JSON line on one stream (stderr by default),
with secrets redacted (:func:`redact`). The engine binds ``trace_id`` per query with :func:`bind_trace`; lane tasks
created inside the query copy the context variables and so log with the same ``trace_id``.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterable, MutableMapping
from types import TracebackType
from typing import Any, TextIO

import structlog

__all__ = [
    "PACKAGES",
    "bind_trace",
    "configure_logging",
    "enabled",
    "get_logger",
    "new_trace_id",
    "redact",
    "redact_values",
    "unconfigure_logging",
]

PACKAGES = ("fabric", "lanes", "fusion")
"""The loggers of the distribution's packages, each with a ``NullHandler``."""

for _name in PACKAGES:
    logging.getLogger(_name).addHandler(logging.NullHandler())

_SHARED: list[Any] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_logger_name,
    structlog.stdlib.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]


def get_logger(name: str) -> Any:
    """A structlog logger over the standard logger ``name``: events below that logger's level are dropped before
    any processing, and what passes is handed to ``logging`` (silent unless the host or the CLI configured it)."""
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[structlog.stdlib.filter_by_level, *_SHARED, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


# ------------------------------------------------------------------------------------------------ secrets

_SECRET_KEYS = re.compile(r"authorization|cookie|api[_-]?key|password|passwd|secret|token", re.I)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+")
_FABRIC_KEY = re.compile(r"fab_[0-9a-f]{12}_[A-Za-z0-9_-]{8,}")
_secret_values: set[str] = set()


def redact_values(values: Iterable[str]) -> None:
    """Register secret values (configured keys and passwords) that must never reach a log line."""
    _secret_values.update(v for v in values if v and len(v) >= 6)


def _scrub(text: str) -> str:
    text = _FABRIC_KEY.sub("fab_<redacted>", _BEARER.sub(r"\1 <redacted>", text))
    for value in _secret_values:
        if value in text:
            text = text.replace(value, "<redacted>")
    return text


def redact(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: values of secret-named keys are dropped, and bearer tokens, API keys and registered
    secret values are cut out of every string (messages and tracebacks included)."""
    for key, value in list(event.items()):
        if _SECRET_KEYS.search(str(key)) and key != "event":
            event[key] = "<redacted>"
        elif isinstance(value, str):
            event[key] = _scrub(value)
        elif isinstance(value, MutableMapping):
            event[key] = {k: "<redacted>" if _SECRET_KEYS.search(str(k)) else v for k, v in value.items()}
    return event


# ------------------------------------------------------------------------------------------------ output

_handler: logging.Handler | None = None


def configure_logging(*, level: int | str = logging.WARNING, stream: TextIO | None = None) -> None:
    """Send every record of the process, at ``level`` and above, to ``stream`` (stderr) as JSON lines.

    Called by the CLI and the service (an application embedding the engine configures ``logging`` its own way).
    Calling it again replaces the previous output.
    """
    global _handler
    if isinstance(level, str):
        level = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*_SHARED, structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            redact,
            structlog.processors.JSONRenderer(sort_keys=True),
        ],
    )
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    if _handler is not None:
        root.removeHandler(_handler)
    root.addHandler(handler)
    root.setLevel(level)
    _handler = handler
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught


def unconfigure_logging() -> None:
    """Undo :func:`configure_logging` (the output handler, the root level, warnings and the exception hook)."""
    global _handler
    root = logging.getLogger()
    if _handler is not None:
        root.removeHandler(_handler)
        _handler = None
    root.setLevel(logging.WARNING)
    logging.captureWarnings(False)
    sys.excepthook = sys.__excepthook__


def _log_uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """Uncaught exceptions become one log line with the traceback as a field (Ctrl-C stays a plain exit)."""
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)
        return
    logging.getLogger("fabric").critical("uncaught_exception", exc_info=(kind, exc, tb))


def enabled(level: int) -> bool:
    """Whether a log call of the engine at ``level`` would be emitted: per-query call sites skip building an event
    that would be dropped."""
    return logging.getLogger("fabric").isEnabledFor(level)


def new_trace_id() -> str:
    """A fresh 16-hex-digit trace id."""
    return os.urandom(8).hex()


def bind_trace(trace_id: str) -> None:
    """Bind ``trace_id`` to the current context (inherited by tasks created afterwards)."""
    structlog.contextvars.bind_contextvars(trace_id=trace_id)
