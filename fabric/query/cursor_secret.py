"""The cursor HMAC secret: read once when the engine opens (never at import).

Set ``FABRIC_CURSOR_SECRET`` on every replica behind one API so a cursor issued by one is accepted by all.
Without it, a random secret is created once under the home (``<home>/cursor.secret``).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from fabric.core.logs import get_logger

__all__ = ["CURSOR_SECRET_ENV", "load_cursor_secret"]

log = get_logger(__name__)

CURSOR_SECRET_ENV = "FABRIC_CURSOR_SECRET"
"""Environment variable holding the cursor HMAC secret."""


def load_cursor_secret(home: Path) -> bytes:
    """``FABRIC_CURSOR_SECRET`` when set, else the secret stored under ``home`` (created once, mode 0600).

    Creation is exclusive, so engines starting together on one home agree on one secret. When the home is
    not writable a random per-process secret is used (logged): cursors then only work within the process.
    """
    env = os.environ.get(CURSOR_SECRET_ENV)
    if env:
        return env.encode("utf-8")
    path = home / "cursor.secret"
    try:
        home.mkdir(parents=True, exist_ok=True)
        secret = secrets.token_hex(32).encode("ascii")
        try:  # exclusive create: concurrent first starts on one home agree on the winner's secret
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            existing = path.read_bytes().strip()
            if existing:
                return existing
            raise OSError(f"{path} is empty") from None
        with os.fdopen(fd, "wb") as fh:
            fh.write(secret)
        return secret
    except OSError as exc:
        log.warning("cursor_secret_ephemeral", path=str(path), error=str(exc))
        return secrets.token_hex(32).encode("ascii")
