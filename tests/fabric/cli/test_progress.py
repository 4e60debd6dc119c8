"""Tests for fabric.cli.progress: one rich bar per ingestion stage."""

from __future__ import annotations

from fabric.cli.progress import RichProgress


class TestRichProgress:
    def test_each_stage_gets_a_bar_that_advances(self) -> None:
        """``stage`` adds a bar with the stage's total; ``advance`` moves that bar only."""
        progress = RichProgress()
        progress.stage("chunk", 10)
        progress.stage("write", 4)
        progress.advance("chunk", 3)
        tasks = {t.description: t for t in progress.bar.tasks}
        assert (tasks["chunk"].total, tasks["chunk"].completed) == (10, 3)
        assert tasks["write"].completed == 0
