"""Tests for ``fabric search`` through ``fabric.cli.main``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric.cli import main

CONFIG = """
schema = 1
[lanes.keyword]
backend = "fake"
kind = "keyword"
options = { hits = 12 }
[lanes.vector]
backend = "fake"
kind = "vector"
options = { hits = 12, provider = "fakevec" }
[lanes.graph]
enabled = false
backend = "fake"
kind = "graph"
"""


@pytest.fixture
def argv(tmp_path: Path) -> list[str]:
    cfg = tmp_path / "user.toml"
    cfg.write_text(CONFIG)
    return ["--config", str(cfg), "--home", str(tmp_path / "home"), "search"]


class TestSearchCommand:
    def test_json_output_has_design_shape(self, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
        """--json prints the DESIGN.md result shape."""
        assert main([*argv, "hello world", "--json", "--top-k", "5"]) == 0
        body = json.loads(capsys.readouterr().out)
        assert {"query", "mode", "trace_id", "items", "next_cursor", "lanes", "preflight", "timings", "receipt"} <= set(
            body
        )
        assert len(body["items"]) == 5
        assert body["lanes"]["keyword"]["status"] == "success"

    def test_route_dense_runs_keyword_and_vector(self, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
        """--route dense: the result's route section names the strategy; the graph lane does not run."""
        assert main([*argv, "hello world", "--json", "--route", "dense"]) == 0
        body = json.loads(capsys.readouterr().out)
        assert (body["route"]["strategy"], body["route"]["chooser"]) == ("dense", "request")
        assert list(body["lanes"]) == ["keyword", "vector"]

    def test_cursor_continues(self, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
        """The printed next_cursor fetches the next page."""
        main([*argv, "q", "--json", "--top-k", "5"])
        first = json.loads(capsys.readouterr().out)
        assert main([*argv, "q", "--json", "--top-k", "5", "--cursor", first["next_cursor"]]) == 0
        second = json.loads(capsys.readouterr().out)
        assert not {i["id"] for i in first["items"]} & {i["id"] for i in second["items"]}

    def test_table_with_explain(self, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
        """The table shows items, lanes and, with --explain, score components and ranks."""
        assert main([*argv, "hello", "--explain", "--top-k", "3"]) == 0
        out = capsys.readouterr().out
        assert "keyword-0" in out
        assert "total=" in out
        assert "keyword:1" in out
        assert "success" in out

    def test_json_explain(self, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
        """--json --explain adds score components and per-lane ranks per item."""
        main([*argv, "hello", "--json", "--explain", "--top-k", "2"])
        explain = json.loads(capsys.readouterr().out)["explain"]
        assert explain[0]["ranks"]
        assert explain[0]["scores"]

    @pytest.mark.parametrize(
        ("extra", "field"),
        [
            (["   "], "query"),
            (["q", "--mode", "fast"], "mode"),
            (["q", "--top-k", "0"], "top_k"),
            (["q", "--top-k", "many"], "top_k"),
            (["q", "--budget-ms", "-1"], "budget_ms"),
            (["q", "--constraint", "cost=free"], "constraints.cost"),
            (["q", "--constraint", "nonsense"], "constraints"),
            (["q", "--lanes", "nope"], "lanes"),
            (["q", "--fusion", "magic"], "fusion"),
            (["q", "--route", "fastest"], "route"),
            (["q", "--cursor", "forged"], "cursor"),
        ],
    )
    def test_bad_input_exits_2_with_one_line(
        self, argv: list[str], capsys: pytest.CaptureFixture[str], extra: list[str], field: str
    ) -> None:
        """Bad input exits 2 with a single line naming the field, never a traceback."""
        assert main([*argv, *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"fabric: error: {field}:")
        assert "\n" not in err
        assert "Traceback" not in err

    def test_strict_partial_exits_2(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--strict with a failing lane exits 2 naming the lane."""
        cfg = tmp_path / "user.toml"
        cfg.write_text(
            CONFIG + '\n[lanes.web]\nenabled = true\nbackend = "no_such"\nkind = "web"\nfallback = "keyword"\n'
        )
        assert (
            main(["--config", str(cfg), "--home", str(tmp_path), "search", "q", "--strict", "--lanes", "keyword,web"])
            == 2
        )
        assert "web=" in capsys.readouterr().err


class TestRunNow:
    def test_does_not_join_hung_worker_threads(self) -> None:
        """run_now returns while a worker thread started by the coroutine is still blocked."""
        import asyncio
        import threading

        from fabric.cli.search import run_now

        release = threading.Event()

        async def start_and_leave() -> str:
            asyncio.get_running_loop().run_in_executor(None, release.wait, 5.0)
            await asyncio.sleep(0)
            return "answer"

        try:
            assert run_now(start_and_leave()) == "answer"
            assert not release.is_set()
        finally:
            release.set()


class TestEmptyHome:
    @pytest.fixture
    def empty_argv(self, tmp_path: Path) -> list[str]:
        cfg = tmp_path / "user.toml"
        cfg.write_text(
            CONFIG.replace("options = { hits = 12 }", "options = { hits = 0 }").replace(
                'options = { hits = 12, provider = "fakevec" }', 'options = { hits = 0, provider = "fakevec" }'
            )
        )
        return ["--config", str(cfg), "--home", str(tmp_path / "missing"), "search"]

    def test_json_says_the_home_is_missing(self, empty_argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
        """No items over a home that does not exist: a ``notice`` in the JSON names the home and the fix."""
        assert main([*empty_argv, "anything", "--json"]) == 0
        captured = capsys.readouterr()
        body = json.loads(captured.out)
        assert body["items"] == []
        assert "does not exist" in body["notice"]
        assert "fabric --home" in body["notice"]
        assert "demo" in captured.err

    def test_table_says_the_home_holds_nothing(
        self, empty_argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """An existing home without ingested documents is reported on stderr, not as a silent empty table."""
        (tmp_path / "missing").mkdir()
        assert main([*empty_argv, "anything"]) == 0
        assert "holds no ingested documents" in capsys.readouterr().err

    def test_search_leaves_no_files_in_a_missing_home(self, empty_argv: list[str], tmp_path: Path) -> None:
        """Checking the home does not create it (nor its ledger)."""
        main([*empty_argv, "anything", "--json"])
        assert not (tmp_path / "missing" / "ledger.sqlite").exists()

    def test_results_carry_no_notice(self, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
        """A search that finds items prints no notice, even over an empty home (the lanes need no store)."""
        assert main([*argv, "hello", "--json"]) == 0
        captured = capsys.readouterr()
        assert "notice" not in json.loads(captured.out)
        assert captured.err == ""


class TestSeed001Contract:
    def test_weights_limit_total_and_contributions(self, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
        """--weights and --limit reach the engine; the JSON has total and per-item lane contributions."""
        assert main([*argv, "q", "--json", "--limit", "4", "--weights", "semantic=3", "--fusion", "rrf"]) == 0
        body = json.loads(capsys.readouterr().out)
        assert len(body["items"]) == 4
        assert body["total"] == 24
        vector = body["lanes"]["vector"]  # the requested weight, times the lane's confidence in its top hit
        assert vector["confidence"] != 1.0
        assert vector["weight"] == pytest.approx(3.0 * vector["confidence"], abs=1e-3)
        first = body["items"][0]
        assert first["id"].startswith("vector-")
        assert first["score_semantic"] > first["score_lexical"]
        assert sum(first["contributions"].values()) == pytest.approx(first["score_total"], abs=1e-5)

    def test_bad_weights_exit_2(self, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
        assert main([*argv, "q", "--weights", "semantic=lots"]) == 2
        err = capsys.readouterr().err
        assert "weights.semantic" in err
        assert "expected a number" in err
        assert main([*argv, "q", "--limit", "3", "--top-k", "4"]) == 2
        assert "limit" in capsys.readouterr().err
