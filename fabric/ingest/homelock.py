"""One writer per home: an exclusive advisory lock on ``<home>/fabric.lock`` held by ``fabric serve`` and by a CLI
``fabric ingest`` for as long as they run.

The lock is ``fcntl.flock`` (Linux and macOS; the kernel drops it when the process dies, ``kill -9`` included, so a
crash never leaves a stale lock behind). The holder writes its pid, command and start time into the file, so the
process that is refused can name it: ``home /x is in use by pid 4242 (fabric serve, since 2026-11-25T01:02:03Z)``.
Readers (``fabric search``, ``fabric check`` without ``--repair``) do not take the lock: the SQLite stores are
read through WAL while a writer works.

A tenant's folder ``<home>/tenants/<tenant>`` is part of its home: a lock asked for that folder (``fabric ingest
--home <home>/tenants/acme``) is the lock of the home that holds it (:func:`owning_home`), so a command pointed at a
tenant's folder is refused while the service holds the home, as one pointed at the home is.

Replicas of ``fabric serve`` sharing one home and one state database (``FABRIC_STATE_URL``, ``docs/replicas.md``)
hold the lock *shared*: they coexist (the database's per-tenant writer lock decides which of them writes), while a
CLI ingest or a service without the shared database, which take it exclusively, are refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from fabric.core.errors import ConfigError
from fabric.core.logs import get_logger
from fabric.core.tenants import DEFAULT_TENANT, TENANTS_DIR, check_tenant

__all__ = ["LOCK_FILE", "HomeInUseError", "HomeLock", "lock_holder", "owning_home"]

log = get_logger(__name__)

LOCK_FILE = "fabric.lock"
"""The lock file's name under a home."""


class HomeInUseError(ConfigError):
    """Another process holds the home.

    Args:
        home: the home folder.
        holder: what the holder wrote (``pid``, ``command``, ``since``), possibly empty.
    """

    def __init__(self, home: Path, holder: dict[str, Any]) -> None:
        self.holder = holder
        pid = holder.get("pid", "?")
        what = f"{holder.get('command', 'fabric')}, since {holder.get('since', '?')}"
        super().__init__(
            f"home {home} is in use by pid {pid} ({what}): only one fabric service or ingest may write a home at "
            "a time; stop that process, wait for it to finish, or use another --home"
        )


def lock_holder(home: Path) -> dict[str, Any]:
    """What the current (or last) holder wrote into the lock file; empty when unreadable."""
    try:
        data = json.loads((home / LOCK_FILE).read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def owning_home(folder: Path) -> tuple[Path, str]:
    """The home whose lock covers ``folder``, and the tenant ``folder`` is the home of: ``(<home>, <tenant>)`` for a
    tenant's folder ``<home>/tenants/<tenant>`` of a home that has a lock file (every home a service or a CLI
    ingest has written has one), else ``(folder, "default")``."""
    path = folder.resolve()
    home, name = path.parent.parent, path.name
    if path.parent.name == TENANTS_DIR and name != DEFAULT_TENANT and (home / LOCK_FILE).is_file():
        with contextlib.suppress(ConfigError):  # not a tenant's name: a home of its own
            return home, check_tenant(name)
    return folder, DEFAULT_TENANT


class HomeLock:
    """The exclusive lock of a home; a context manager (sync) or :meth:`acquire` / :meth:`release`.

    Args:
        home: the home folder (created if missing); a tenant's folder is covered by its home's lock
            (:func:`owning_home`).
        command: what the holder is, shown to a refused process (``fabric serve``, ``fabric ingest``).
        shared: take it shared (replicas over one state database) instead of exclusive.
    """

    def __init__(self, home: Path, command: str, *, shared: bool = False) -> None:
        self.home = owning_home(home)[0]
        self.command = command
        self.shared = shared
        self._fh: IO[str] | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fh is not None

    def acquire(self) -> None:
        """Take the lock without waiting (idempotent for this object).

        Raises:
            HomeInUseError: another process (or another lock object of this one) holds it.
            ConfigError: the home cannot be created or the lock file cannot be opened.
        """
        if self._fh is not None:
            return
        try:
            self.home.mkdir(parents=True, exist_ok=True)
            fh = (self.home / LOCK_FILE).open("a+", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot open the lock file of home {self.home}: {exc}") from None
        try:
            fcntl.flock(fh.fileno(), (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            raise HomeInUseError(self.home, lock_holder(self.home)) from None
        since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        command = f"{self.command}, a replica" if self.shared else self.command
        try:  # the holder's record only names it to a refused process: the flock is the lock
            fh.seek(0)
            fh.truncate()
            fh.write(json.dumps({"pid": os.getpid(), "command": command, "since": since}))
            fh.flush()
        except OSError as exc:  # a full disk: hold the lock unnamed rather than refuse to start
            log.warning("home_lock_holder_unrecorded", home=str(self.home), error=str(exc))
        self._fh = fh

    def release(self) -> None:
        """Drop the lock (idempotent); the file stays, naming the last holder."""
        fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            with contextlib.suppress(OSError):  # a holder record a full disk refused is still buffered
                fh.close()

    def __enter__(self) -> HomeLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
