"""Rich progress bars for ingestion on stderr (``fabric ingest`` and ``fabric demo``; imported when they run)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as Bar

from fabric.ingest.report import Progress

__all__ = ["RichProgress"]


class RichProgress(Progress):
    """One bar per ingestion stage (load, chunk, embed, write) on stderr; use ``with progress.bar:``."""

    def __init__(self) -> None:
        self.bar = Bar(
            TextColumn("{task.description:>6}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
        )
        self.tasks: dict[str, Any] = {}

    def stage(self, name: str, total: int) -> None:
        """Add the bar of stage ``name``."""
        self.tasks[name] = self.bar.add_task(name, total=max(total, 1) if total else 0)

    def advance(self, name: str, n: int) -> None:
        """Advance stage ``name`` by ``n`` units."""
        self.bar.advance(self.tasks[name], n)
