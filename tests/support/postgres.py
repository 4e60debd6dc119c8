"""A real PostgreSQL server on loopback for tests: ``initdb`` into a temporary folder, ``pg_ctl start`` on a free
port, one fresh database per test.

The server binaries come from Debian's ``postgresql`` package (``make test-deps`` installs it); they are found on
``PATH`` or under ``/usr/lib/postgresql/<version>/bin``. PostgreSQL refuses to run as root, so as root the cluster
is created and started as the ``postgres`` user (``runuser``). Without the binaries the tests that need the
server skip, saying so.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PostgresServer", "find_bin", "skip_reason", "start_server"]


def find_bin() -> Path | None:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``, or None."""
    found = shutil.which("initdb")
    candidates = [Path(found).resolve().parent] if found else []
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for folder in candidates:
        if all((folder / b).is_file() for b in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def _runas() -> list[str] | None:
    """The prefix that runs a command as a non-root user ([] when not root, None when impossible)."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError:
        return None
    return [runuser, "-u", "postgres", "--"] if runuser else None


def skip_reason() -> str | None:
    """Why a PostgreSQL server cannot be started here, or None."""
    if find_bin() is None:
        return "PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's postgresql (make test-deps)"
    if _runas() is None:
        return "running as root without a 'postgres' user and runuser: PostgreSQL refuses to run as root"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class PostgresServer:
    """A running test cluster (trust authentication, loopback only)."""

    bin: Path
    data: Path
    port: int
    prefix: list[str]

    def url(self, database: str = "postgres") -> str:
        """A connection URL of ``database``."""
        return f"postgresql://fabric@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        """Stop the server and remove its files."""
        cmd = [*self.prefix, str(self.bin / "pg_ctl"), "-D", str(self.data / "db"), "-m", "immediate", "stop"]
        subprocess.run(cmd, capture_output=True, check=False, timeout=60)
        shutil.rmtree(self.data, ignore_errors=True)


def start_server() -> PostgresServer:
    """Create and start a cluster (raise RuntimeError with the server's output when it fails)."""
    folder, prefix = find_bin(), _runas()
    if folder is None or prefix is None:
        raise RuntimeError(skip_reason() or "cannot start PostgreSQL")
    data = Path(tempfile.mkdtemp(prefix="fabric-pg-"))
    if prefix:
        shutil.chown(data, "postgres")
    port = _free_port()
    db, log = data / "db", data / "server.log"

    def run(*args: str) -> None:
        done = subprocess.run([*prefix, *args], capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
            raise RuntimeError(f"{args[0]} failed: {done.stdout}{done.stderr}{tail}")

    run(str(folder / "initdb"), "-D", str(db), "-U", "fabric", "--auth=trust", "-E", "UTF8", "--no-sync")
    opts = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    run(str(folder / "pg_ctl"), "-D", str(db), "-l", str(log), "-o", opts, "-w", "-t", "60", "start")
    return PostgresServer(bin=folder, data=data, port=port, prefix=prefix)
