"""The cursor HMAC secret: read once when the engine opens (never at import).

Set ``FABRIC_CURSOR_SECRET`` on every replica behind one API so a cursor issued by one is accepted by all.
Without it, a random secret is created once under the home (``<home>/cursor.secret``, mode 0600).

The file is only ever published whole: the secret is written to a temporary file beside it and flushed to disk
(``fsync``) first, then linked into place (a first start; ``link`` fails when another start won, whose secret is
then read) or renamed over a damaged one. A file shorter than :data:`MIN_SECRET_BYTES` (an empty one, left by a disk
that filled up while an older version wrote it) is damaged: it is replaced under an exclusive lock on it, so engines
starting together on one home still agree on one secret. When the home cannot be written (a full disk, a read-only
mount) a random per-process secret is used and logged (``cursor_secret_ephemeral``): cursors then work within the
process only, and the next start with space repairs the file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from pathlib import Path

from fabric.core.logs import get_logger

__all__ = ["CURSOR_SECRET_ENV", "MIN_SECRET_BYTES", "load_cursor_secret"]

log = get_logger(__name__)

CURSOR_SECRET_ENV = "FABRIC_CURSOR_SECRET"
"""Environment variable holding the cursor HMAC secret."""
MIN_SECRET_BYTES = 32
"""The shortest stored secret accepted (a created one is 64 hex characters); a shorter file is replaced."""
_ATTEMPTS = 5
"""Rounds of create-or-repair before giving up (each lost only to another process's concurrent change)."""


def load_cursor_secret(home: Path) -> bytes:
    """``FABRIC_CURSOR_SECRET`` when set, else the secret stored under ``home`` (created or repaired as the module
    docstring says), else, when the home cannot be written, a random per-process secret (logged)."""
    env = os.environ.get(CURSOR_SECRET_ENV)
    if env:
        return env.encode("utf-8")
    path = home / "cursor.secret"
    try:
        home.mkdir(parents=True, exist_ok=True)
        for _ in range(_ATTEMPTS):
            secret = _settle(path)
            if secret is not None:
                return secret
        raise OSError(f"{path} kept changing while it was read")
    except OSError as exc:
        log.warning("cursor_secret_ephemeral", path=str(path), error=str(exc))
        return secrets.token_hex(32).encode("ascii")


def _read(path: Path) -> bytes | None:
    """The stored secret (stripped), or None when there is no file."""
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        return None


def _settle(path: Path) -> bytes | None:
    """The home's secret after one round of create-or-repair; None when another process changed it meanwhile."""
    existing = _read(path)
    if existing is not None and len(existing) >= MIN_SECRET_BYTES:
        return existing
    if existing is None:
        return _create(path)
    return _repair(path)


def _create(path: Path) -> bytes | None:
    secret, tmp = _write_temp(path)
    try:
        os.link(tmp, path)  # atomic and exclusive: concurrent first starts agree on the winner's secret
    except FileExistsError:
        return None
    finally:
        tmp.unlink()
    _sync_folder(path.parent)
    return secret


def _repair(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # one repairer at a time; the others then read its secret
        current = _read(path)  # by name: a repairer before us has renamed a new file into place
        if current is None or len(current) >= MIN_SECRET_BYTES:
            return current
        secret, tmp = _write_temp(path)
        try:
            os.replace(tmp, path)
        except OSError:
            tmp.unlink()
            raise
        _sync_folder(path.parent)
        log.warning("cursor_secret_replaced", path=str(path), stored_bytes=len(current))
        return secret
    finally:
        os.close(fd)


def _write_temp(path: Path) -> tuple[bytes, Path]:
    """A new secret written to a private temporary file beside ``path`` and flushed to disk."""
    secret = secrets.token_hex(32).encode("ascii")
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(secret)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError:
        os.close(fd)
        tmp.unlink()
        raise
    os.close(fd)
    return secret, tmp


def _sync_folder(folder: Path) -> None:
    """Flush the folder's entry for the published file (best effort: some file systems refuse it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
