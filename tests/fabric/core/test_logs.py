"""Tests for the structlog configuration."""

from __future__ import annotations

import io
import json
import logging

import structlog

from fabric.core.logs import bind_trace, configure_logging, enabled, new_trace_id


class TestLogs:
    def test_json_lines_carry_trace_id(self) -> None:
        """Configured logs are JSON lines with the bound trace_id and snake_case event."""
        stream = io.StringIO()
        configure_logging(level="INFO", stream=stream)
        trace = new_trace_id()
        bind_trace(trace)
        try:
            structlog.get_logger("t").info("lane_finished", lane="keyword")
        finally:
            structlog.contextvars.clear_contextvars()
        line = json.loads(stream.getvalue().strip())
        assert line["trace_id"] == trace
        assert line["event"] == "lane_finished"
        assert line["lane"] == "keyword"

    def test_level_filters(self) -> None:
        """Events below the configured level are dropped."""
        stream = io.StringIO()
        configure_logging(level="WARNING", stream=stream)
        structlog.get_logger("t").info("quiet")
        assert stream.getvalue() == ""

    def test_enabled_follows_the_configured_level(self) -> None:
        """enabled() answers what the filtering logger would print."""
        configure_logging(level="WARNING", stream=io.StringIO())
        assert not enabled(logging.DEBUG)
        assert enabled(logging.WARNING)
        configure_logging(level="DEBUG", stream=io.StringIO())
        assert enabled(logging.DEBUG)
        configure_logging(level="CRITICAL", stream=io.StringIO())
