"""Developer tooling that lives beside the package in a repository checkout, not in the wheel.

``bench/`` (``fabric bench``) and ``tools/`` (``fabric router``, ``fabric tune``) are imported lazily when such a
command runs: from the checkout an editable install imports ``fabric`` from, or else from the current folder.
From an installed wheel the command says where to run it instead of failing with a traceback.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import fabric
from fabric.core.errors import FabricError

__all__ = ["ToolingUnavailable", "add_checkout_to_path", "needs_checkout", "require_tooling"]

T = TypeVar("T")


class ToolingUnavailable(FabricError):
    """A command of the repository's tooling run where its folder cannot be imported."""


def add_checkout_to_path(folder: str) -> None:
    """Put the checkout holding ``folder/`` first on ``sys.path`` (the console script does not start in it).

    An editable install imports ``fabric`` from the checkout, whose parent folder holds ``bench/``, ``tools/`` and
    ``tests/``; otherwise the current folder is tried. An installed wheel has neither, and the import then fails.
    """
    for root in (Path(fabric.__file__).resolve().parents[1], Path.cwd()):
        if (root / folder / "__init__.py").is_file():
            if str(root) not in sys.path:
                sys.path.insert(0, str(root))
            return


def require_tooling(folder: str, command: str) -> None:
    """Make ``folder`` importable, or raise :class:`ToolingUnavailable` naming ``command``."""
    add_checkout_to_path(folder)
    try:
        importlib.import_module(folder)
    except ModuleNotFoundError as exc:
        if exc.name != folder:
            raise
        raise ToolingUnavailable(
            f"{command}: developer tooling, not installed with the package; "
            f"run it from a repository checkout (the folder holding {folder}/)"
        ) from None


def needs_checkout(folder: str, command: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorate a command's ``run`` so that ``folder`` is importable (or a clear error is raised) first."""

    def wrap(run: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(run)
        def checked(*args: object, **kwargs: object) -> T:
            require_tooling(folder, command)
            return run(*args, **kwargs)

        return checked

    return wrap
