"""The fabric's exception tree. Every error the engine raises on purpose is a :class:`FabricError`.

::

    FabricError
    ├── ConfigError          a setting is missing or wrong (names the file and key path)
    ├── QueryError           a request failed validation (names the field)
    │   └── PartialResultError   strict mode, and a planned lane did not succeed
    ├── IngestError          a source could not be read or written
    └── LaneError            a lane failed (carries lane and provider)
        ├── LaneTimeout          the lane did not answer in its budget
        ├── LaneUnavailable      connect failure, 5xx: worth a retry within budget
        ├── LaneRejected         auth, quota, 429: never retried; carries suspend_s
        └── LaneBadResponse      the backend answered something we cannot parse (or cannot use)
            └── LaneBadURL           a URL the parser rejects (configured, built, or sent in a redirect)

Penalty data travels on the exception (``LaneRejected.suspend_s``, ``LaneError.failure``), so the executor
can key provider suspensions by the typed failure without parsing messages.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "FabricError",
    "IngestError",
    "LaneBadResponse",
    "LaneBadURL",
    "LaneError",
    "LaneRejected",
    "LaneTimeout",
    "LaneUnavailable",
    "PartialResultError",
    "QueryError",
    "StaleQueryError",
    "UnprocessableQueryError",
]


class FabricError(Exception):
    """Base class of every error the fabric raises on purpose."""


class ConfigError(FabricError):
    """A configuration file or override is invalid.

    Args:
        message: what is wrong.
        source: the file (or ``env``) the setting came from.
        key: dotted key path, e.g. ``lanes.vector.budget_ms``.
    """

    def __init__(self, message: str, *, source: str = "", key: str = "") -> None:
        self.source = source
        self.key = key
        where = ": ".join(p for p in (source, key) if p)
        super().__init__(f"{where}: {message}" if where else message)


class QueryError(FabricError, ValueError):
    """A request failed validation (a ``ValueError``, so ``except ValueError`` catches it too).

    Args:
        field: the request field at fault (``query``, ``top_k``, ``constraints.cost``, ...).
        message: what is wrong, in words a caller can act on.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class UnprocessableQueryError(QueryError):
    """A well-formed request that a rule of the contract refuses beyond types and limits (HTTP 422): ``weights``
    leaving every enabled lane at 0 (the OpenAPI document states it as an ``anyOf``: :mod:`fabric.query.contract`)."""


class StaleQueryError(QueryError):
    """A well-formed request naming state that is not (or no longer) this engine's (HTTP 409): a cursor of the
    documented form that another query, page size or engine issued (its HMAC does not verify)."""


class PartialResultError(QueryError):
    """Strict mode was requested and at least one planned lane did not succeed."""

    def __init__(self, lanes: dict[str, str]) -> None:
        self.lanes = lanes
        detail = ", ".join(f"{k}={v}" for k, v in sorted(lanes.items()))
        super().__init__("strict", f"partial answer refused in strict mode ({detail})")


class IngestError(FabricError):
    """A source could not be loaded, parsed or written."""


class LaneError(FabricError):
    """A lane failed.

    Args:
        message: what happened.
        lane: lane name (filled in by the executor when the adapter does not know it).
        provider: backend name.
    """

    failure = "error"
    """Typed failure class used to key provider penalties."""

    def __init__(self, message: str, *, lane: str = "", provider: str = "") -> None:
        self.lane = lane
        self.provider = provider
        super().__init__(message)


class LaneTimeout(LaneError):
    """The lane did not answer within its budget."""

    failure = "timeout"


class LaneUnavailable(LaneError):
    """The backend could not be reached or answered 5xx: transient, retried within budget."""

    failure = "unavailable"


class LaneRejected(LaneError):
    """The backend refused the request (auth, forbidden, quota, 429). Never retried.

    Args:
        suspend_s: how long to suspend the provider (e.g. from ``Retry-After``); None lets the
            penalty policy decide from ``failure``.
        failure: ``rate_limited`` or ``forbidden``.
    """

    failure = "rate_limited"

    def __init__(
        self,
        message: str,
        *,
        lane: str = "",
        provider: str = "",
        suspend_s: float | None = None,
        failure: str = "rate_limited",
    ) -> None:
        super().__init__(message, lane=lane, provider=provider)
        self.suspend_s = suspend_s
        self.failure = failure


class LaneBadResponse(LaneError):
    """The backend answered, but with a payload we cannot parse."""

    failure = "bad_response"


class LaneBadURL(LaneBadResponse):
    """A URL the URL parser rejects, or that is not ``http(s)`` with a host: configured, built from a request, or
    sent by an upstream in a redirect ``Location``. Typed so that it is a lane error, never a crash."""
