"""``fabric tune`` on the tiny BEIR fixture with the engine and ingestion swapped for fakes."""

from __future__ import annotations

import json
from pathlib import Path

from fabric.cli import main
from tests.fabric.cli.conftest import TINY


class TestTuneCommand:
    def test_reports_default_and_best_with_heldout(self, fake, capsys) -> None:
        """--json prints default and best nDCG@10 on the fit and held-out halves."""
        assert (
            main(["tune", str(TINY), "--split", "test", "--lanes", "keyword", "vector", "--modes", "rrf", "--json"])
            == 0
        )
        out = json.loads(capsys.readouterr().out)
        scores = out["ndcg_at_10"]["beir_tiny"]
        assert {"fit", "heldout", "all"} <= set(scores["best"])
        assert scores["best"]["fit"] >= scores["reference"]["fit"]
        assert out["objective"] == "worst"

    def test_write_produces_a_loadable_config(self, fake, tmp_path: Path) -> None:
        """--write stores the choice where `fabric --config` can read it."""
        target = tmp_path / "config" / "fusion.local.toml"
        args = ["tune", str(TINY), "--split", "test", "--lanes", "keyword", "vector", "--modes", "rrf"]
        assert main([*args, "--write", str(target)]) == 0
        from fabric.settings import load_settings

        settings = load_settings(user_file=target, env={})
        assert settings.fusion.mode.value == "rrf"

    def test_fits_several_datasets_at_once(self, fake, capsys) -> None:
        """Repeated dataset folders are fitted together, each with its own split and scores."""
        args = ["tune", str(TINY), str(TINY), "--split", "test", "test", "--lanes", "keyword", "vector"]
        assert main([*args, "--modes", "rrf", "--objective", "mean", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert set(out["ndcg_at_10"]) == {"beir_tiny", "beir_tiny/test"}
        assert out["objective"] == "mean"
        assert len(fake["engines"]) == 2

    def test_mismatched_splits_exit_2(self, fake, capsys) -> None:
        """Two datasets with three splits is a clear error."""
        assert main(["tune", str(TINY), str(TINY), "--split", "a", "b", "c"]) == 2
        assert "one split for all datasets or one per dataset" in capsys.readouterr().err

    def test_unknown_objective_exits_2(self, fake, capsys) -> None:
        assert main(["tune", str(TINY), "--objective", "median"]) == 2
        assert "unknown objective 'median'" in capsys.readouterr().err

    def test_unknown_mode_exits_2(self, fake, capsys) -> None:
        """An unknown fusion mode is a clear error."""
        assert main(["tune", str(TINY), "--modes", "borda"]) == 2
        assert "unknown fusion mode 'borda'" in capsys.readouterr().err
