"""Tests for fabric.core.errors: messages name the file, key or field at fault; penalty data travels on lane errors."""

from __future__ import annotations

import pytest

from fabric.core.errors import (
    ConfigError,
    FabricError,
    IngestError,
    LaneBadResponse,
    LaneError,
    LaneRejected,
    LaneTimeout,
    LaneUnavailable,
    PartialResultError,
    QueryError,
)


class TestConfigError:
    def test_names_source_and_key(self) -> None:
        """``source: key: message``, so the user knows which file and setting to fix."""
        err = ConfigError("must be > 0", source="modes.toml", key="modes.fast.total_budget_ms")
        assert str(err) == "modes.toml: modes.fast.total_budget_ms: must be > 0"
        assert (err.source, err.key) == ("modes.toml", "modes.fast.total_budget_ms")

    def test_message_alone_without_location(self) -> None:
        """No source and no key: just the message, without a dangling colon."""
        assert str(ConfigError("no config folder")) == "no config folder"


class TestQueryErrors:
    def test_query_error_names_the_field(self) -> None:
        """The field comes first, for the CLI and the HTTP 400 body."""
        err = QueryError("top_k", "must be between 1 and 100")
        assert str(err) == "top_k: must be between 1 and 100"
        assert err.field == "top_k"

    def test_partial_result_lists_the_lanes_sorted(self) -> None:
        """Strict mode's refusal names every failed lane with its status, in name order."""
        err = PartialResultError({"web": "timeout", "graph": "error"})
        assert err.field == "strict"
        assert str(err).endswith("(graph=error, web=timeout)")
        assert isinstance(err, QueryError)


class TestLaneErrors:
    @pytest.mark.parametrize(
        ("cls", "failure"),
        [
            (LaneError, "error"),
            (LaneTimeout, "timeout"),
            (LaneUnavailable, "unavailable"),
            (LaneRejected, "rate_limited"),
            (LaneBadResponse, "bad_response"),
        ],
    )
    def test_failure_class_keys_the_penalties(self, cls: type[LaneError], failure: str) -> None:
        """Each lane error carries its typed failure, so penalties never parse messages."""
        assert cls("x").failure == failure

    def test_rejected_carries_suspension_and_failure(self) -> None:
        """A 403 is ``forbidden`` with the server's suspension time."""
        err = LaneRejected("forbidden", lane="web", provider="searxng", suspend_s=30.0, failure="forbidden")
        assert (err.lane, err.provider, err.suspend_s, err.failure) == ("web", "searxng", 30.0, "forbidden")

    def test_every_error_is_a_fabric_error(self) -> None:
        """The CLI catches FabricError alone and still reports every deliberate error cleanly."""
        for cls in (ConfigError, QueryError, PartialResultError, IngestError, LaneError, LaneTimeout):
            assert issubclass(cls, FabricError)
