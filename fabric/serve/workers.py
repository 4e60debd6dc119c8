"""``fabric serve --workers N``: N service processes on one listening socket, for the cores one interpreter
cannot use.

One ``fabric serve`` process runs its event loop and its lanes' Python under one interpreter lock, so on the 50K
home it tops out near 75-100 searches a second on two cores however many cores are free (``docs/replicas.md``).
The supervisor here binds the address once, then starts ``N`` children (``python -m fabric.cli ... serve
--listen-fd FD``) that inherit the socket; the kernel hands each new connection to one child waiting in
``accept``. The children are replicas of one another (:mod:`fabric.serve.replicas`): they share the home and, unless
``FABRIC_STATE_URL`` names another state, the folder ``<home>/replicas`` (:mod:`fabric.serve.state.local`: tasks, rate
buckets, cursor secret; the keys stay in ``<home>/keys.sqlite``). So a task runs once whichever child took it, a
tenant's ``rate`` is its total, and a cursor minted by one child pages on another.

The supervisor holds no engine and answers no request. It restarts a child that dies (``kill -9``, out of
memory) and stops when SIGINT or SIGTERM arrives, passing SIGTERM on and waiting for the children to drain
(SIGKILL after ``stop_timeout_s``). A child whose supervisor died (SIGKILL gives it no time to pass anything on)
notices within a second and stops too (:func:`watch_parent`). A child that dies within ``QUICK_EXIT_S`` of its
start three times in a row (a bad setting, a busy home) stops the whole service with its exit code, rather than
restarting forever.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import FrameType

from fabric.core.logs import get_logger

__all__ = ["QUICK_EXIT_S", "Supervisor", "child_argv", "listen_socket", "watch_parent"]

log = get_logger(__name__)

QUICK_EXIT_S = 30.0
"""A child that exits sooner than this after its start counts as failing to start."""
MAX_QUICK_EXITS = 3
"""Quick exits in a row (of any child) that stop the service."""


def listen_socket(host: str, port: int, backlog: int = 1024) -> socket.socket:
    """A listening TCP socket on ``host:port`` that children may inherit (IPv6 when ``host`` is one).

    Raises:
        OSError: the address is in use or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host.strip("[]"), port), family=family, backlog=backlog)
    sock.set_inheritable(True)
    return sock


def child_argv(argv: Sequence[str], fd: int, index: int) -> list[str]:
    """The command line of child ``index``: the supervisor's own arguments plus the inherited socket's descriptor
    (with ``--listen-fd`` a ``serve`` runs as a worker, whatever ``--workers`` says)."""
    return [sys.executable, "-m", "fabric.cli", *argv, "--listen-fd", str(fd), "--worker-index", str(index)]


async def watch_parent(parent: int, stop: asyncio.Event, every_s: float = 1.0) -> None:
    """Set ``stop`` once this process's parent is no longer ``parent`` (the supervisor died, even by SIGKILL, and
    the process was re-parented): a worker then drains and exits instead of serving on, unwatched."""
    while not stop.is_set():
        if os.getppid() != parent:
            log.warning("worker_orphaned", supervisor=parent)
            stop.set()
            return
        await asyncio.sleep(every_s)


@dataclass
class _Child:
    index: int
    proc: subprocess.Popen[bytes]
    started: float = field(default_factory=time.monotonic)


class Supervisor:
    """Runs and watches the children (see the module docstring).

    Args:
        argv: the supervisor's own arguments (``sys.argv[1:]``).
        sock: the listening socket (inheritable).
        workers: how many children.
        env: the children's environment.
        stop_timeout_s: how long a stopping child may drain before SIGKILL.
    """

    def __init__(
        self, argv: Sequence[str], sock: socket.socket, workers: int, env: dict[str, str], stop_timeout_s: float = 30.0
    ) -> None:
        self.argv = list(argv)
        self.sock = sock
        self.workers = workers
        self.env = env
        self.stop_timeout_s = stop_timeout_s
        self.children: dict[int, _Child] = {}
        self.restarts = 0
        self._stopping = False

    def _spawn(self, index: int) -> None:
        fd = self.sock.fileno()
        proc = subprocess.Popen(child_argv(self.argv, fd, index), env=self.env, pass_fds=(fd,))
        self.children[index] = _Child(index, proc)
        log.info("worker_started", worker=index, pid=proc.pid)

    def _on_signal(self, _signum: int, _frame: FrameType | None) -> None:
        self._stopping = True

    def run(self, poll_s: float = 0.2) -> int:
        """Start the children and watch them until a signal (0) or repeated start-up failures (their code)."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        quick, code = 0, 0
        try:
            for index in range(self.workers):
                self._spawn(index)
            while not self._stopping:
                time.sleep(poll_s)
                for child in list(self.children.values()):
                    rc = child.proc.poll()
                    if rc is None or self._stopping:
                        continue
                    lived = time.monotonic() - child.started
                    quick = quick + 1 if lived < QUICK_EXIT_S else 0
                    log.warning(
                        "worker_exited", worker=child.index, pid=child.proc.pid, code=rc, lived_s=round(lived, 1)
                    )
                    if quick >= MAX_QUICK_EXITS:
                        print(
                            f"fabric: error: a worker exited {quick} times in a row within {QUICK_EXIT_S:.0f} s of "
                            f"starting (last exit code {rc}); stopping",
                            file=sys.stderr,
                        )
                        code = rc or 1
                        self._stopping = True
                        break
                    self.restarts += 1
                    self._spawn(child.index)
        finally:
            self._stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return code

    def _stop(self) -> None:
        """SIGTERM every child, wait for them to drain, SIGKILL what is left."""
        for child in self.children.values():
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout_s
        for child in self.children.values():
            try:
                child.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("worker_killed", worker=child.index, pid=child.proc.pid)
                child.proc.kill()
                child.proc.wait()
