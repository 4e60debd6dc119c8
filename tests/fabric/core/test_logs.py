"""Logging: silent in a host process, one JSON stream under the CLI, secrets never in a line."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
import warnings
from pathlib import Path

import structlog

from fabric.core.logs import (
    bind_trace,
    configure_logging,
    enabled,
    get_logger,
    new_trace_id,
    redact_values,
)

ROOT = Path(__file__).resolve().parents[3]


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


class TestConfigured:
    def test_json_lines_carry_trace_id(self) -> None:
        """Configured logs are JSON lines with the bound trace_id, the logger's name and a snake_case event."""
        stream = io.StringIO()
        configure_logging(level="INFO", stream=stream)
        trace = new_trace_id()
        bind_trace(trace)
        try:
            get_logger("fabric.t").info("lane_finished", lane="keyword")
        finally:
            structlog.contextvars.clear_contextvars()
        (line,) = _lines(stream)
        assert (line["trace_id"], line["event"], line["lane"], line["logger"]) == (
            trace, "lane_finished", "keyword", "fabric.t",
        )  # fmt: skip
        assert line["level"] == "info"
        assert "timestamp" in line

    def test_level_filters(self) -> None:
        """Events below the configured level are dropped."""
        stream = io.StringIO()
        configure_logging(level="WARNING", stream=stream)
        get_logger("fabric.t").info("quiet")
        assert stream.getvalue() == ""

    def test_enabled_follows_the_configured_level(self) -> None:
        """enabled() answers what the engine's loggers would emit."""
        configure_logging(level="WARNING", stream=io.StringIO())
        assert not enabled(logging.DEBUG)
        assert enabled(logging.WARNING)
        configure_logging(level="DEBUG", stream=io.StringIO())
        assert enabled(logging.DEBUG)

    def test_other_libraries_and_warnings_share_the_stream(self) -> None:
        """A standard-library record (aiohttp's) and a warning come out as JSON lines on the same stream."""
        stream = io.StringIO()
        configure_logging(level="INFO", stream=stream)
        logging.getLogger("aiohttp.access").info("GET /v1/search 200")
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            logging.captureWarnings(True)
            warnings.warn("old option", DeprecationWarning, stacklevel=1)
        lines = _lines(stream)
        assert lines[0]["logger"] == "aiohttp.access"
        assert lines[0]["event"] == "GET /v1/search 200"
        assert lines[1]["logger"] == "py.warnings"
        assert "old option" in str(lines[1]["event"])

    def test_an_exception_is_a_field_of_one_line(self) -> None:
        """A logged exception's traceback is a field of its JSON line, not lines of its own."""
        stream = io.StringIO()
        configure_logging(level="INFO", stream=stream)
        try:
            raise ValueError("boom")
        except ValueError:
            get_logger("fabric.t").exception("failed")
        (line,) = _lines(stream)
        assert "ValueError: boom" in str(line["exception"])


class TestSecrets:
    def test_secrets_never_reach_a_line(self) -> None:
        """Secret-named fields, bearer tokens, fabric keys and registered values are cut out, tracebacks included."""
        stream = io.StringIO()
        configure_logging(level="INFO", stream=stream)
        key = "fab_0123456789ab_" + "k" * 43
        redact_values(["hunter2-password"])
        log = get_logger("fabric.t")
        log.info("request", authorization=f"Bearer {key}", headers={"Cookie": "session=abc", "Accept": "x"})
        logging.getLogger("aiohttp.server").error(f"Error handling request: bad header 'Bearer {key}\\nx'")
        try:
            raise RuntimeError("connect to postgresql://fabric:hunter2-password@db/fabric failed")
        except RuntimeError:
            log.exception("state_unavailable", token="abc123")
        out = stream.getvalue()
        for secret in (key, "session=abc", "hunter2-password", "abc123"):
            assert secret not in out
        assert len(_lines(stream)) == 3


def test_the_library_is_silent_until_its_host_asks() -> None:
    """Importing the package and logging through it writes nothing to stdout or stderr."""
    code = (
        "import fabric.query.engine, fabric.serve.service\n"
        "from fabric.core.logs import get_logger\n"
        "get_logger('fabric.x').warning('would_print')\n"
        "get_logger('lanes.y').error('would_print_too')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert (done.stdout, done.stderr) == ("", "")
