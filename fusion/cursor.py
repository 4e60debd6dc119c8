"""Opaque, HMAC-signed pagination cursors bound to the query that issued them.

A cursor carries one number, the offset of the next page, signed together with a *fingerprint* of the
request (query, mode, constraints, fusion mode, lanes, top_k). A cursor that was altered, or that was issued
for another query or other settings, fails verification and is refused with ``QueryError("cursor", ...)``.

Pages are computed by re-running the query and slicing the fused list at the cursor's offset. Fusion is
deterministic (explicit tie-break, no clock, no randomness), so re-running with the same lane answers gives
the same order and pages never repeat or skip items. When lane answers themselves change between pages (new
documents ingested, a lane timing out on one page but not the other), the pages reflect the new ranking.

Pure functions: the secret is passed in by the engine, which reads it once when it opens.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from fabric.core.errors import QueryError, StaleQueryError

__all__ = ["CURSOR_PATTERN", "decode_cursor", "encode_cursor", "fingerprint"]

_VERSION = "c1"
_SIG_BYTES = 16
_MAX_OFFSET = 1_000_000
CURSOR_PATTERN = r"^c1[A-Za-z0-9_-]{26}[AEIMQUYcgkosw048]$"
"""Every cursor :func:`encode_cursor` writes: ``c1`` and 20 bytes in unpadded base64url (27 characters, the last
one carrying 2 bits of padding). A token of another form is malformed; one of this form that does not verify was
issued for another query (:class:`~fabric.core.errors.StaleQueryError`)."""


def fingerprint(parts: Mapping[str, Any]) -> str:
    """A stable hex digest of the request fields a page depends on (JSON with sorted keys)."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _sign(offset: int, fp: str, secret: bytes) -> bytes:
    msg = f"{_VERSION}:{offset}:{fp}".encode()
    return hmac.new(secret, msg, hashlib.sha256).digest()[:_SIG_BYTES]


def encode_cursor(offset: int, fingerprint: str, secret: bytes) -> str:
    """An opaque URL-safe token for ``offset`` bound to ``fingerprint``.

    Raises:
        ValueError: negative offset or empty secret (programmer errors).
    """
    if offset < 0 or offset > _MAX_OFFSET:
        raise ValueError(f"offset out of range: {offset}")
    if not secret:
        raise ValueError("cursor secret must not be empty")
    raw = offset.to_bytes(4, "big") + _sign(offset, fingerprint, secret)
    return _VERSION + base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(token: str, fingerprint: str, secret: bytes) -> int:
    """The offset carried by ``token``, after checking it was issued for ``fingerprint``.

    Raises:
        QueryError: field ``cursor``, when the token is malformed, tampered with or foreign.
    """
    if not isinstance(token, str) or not token.startswith(_VERSION):
        raise QueryError("cursor", "invalid cursor (not issued by this engine)")
    body = token[len(_VERSION) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (ValueError, TypeError):
        raise QueryError("cursor", "invalid cursor (malformed)") from None
    if len(raw) != 4 + _SIG_BYTES or base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=") != body:
        # The second check refuses non-canonical spellings (stray low bits in the last character).
        raise QueryError("cursor", "invalid cursor (malformed)")
    offset = int.from_bytes(raw[:4], "big")
    if offset > _MAX_OFFSET or not hmac.compare_digest(raw[4:], _sign(offset, fingerprint, secret)):
        raise StaleQueryError(  # of the documented form (CURSOR_PATTERN), yet not this query's: HTTP 409
            "cursor", "invalid cursor (altered, or issued for a different query, mode, constraints or page size)"
        )
    return offset
