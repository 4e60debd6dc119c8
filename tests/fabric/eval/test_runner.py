"""Passes over an engine, scratch homes and the artifact, with an in-memory engine."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from fabric.core.models import FusionMode, LaneOutcome, SearchRequest
from fabric.eval import harness
from fabric.eval.dataset import load_dataset
from fabric.eval.harness import EvalPlan, prepare_home, run_plan
from fabric.eval.report import build_artifact, percentile, render_markdown
from fabric.eval.runner import FEDERATION, FUSED, run_pass
from fabric.settings import load_settings
from tests.fabric.eval.fake_engine import FakeEngine

TINY = Path(__file__).resolve().parents[2] / "fixtures" / "beir_tiny"


@pytest.fixture
def dataset():
    return load_dataset(TINY, "test")


@pytest.fixture
def engine():
    return FakeEngine(TINY / "corpus.jsonl")


class TestRunPass:
    async def test_dedupes_chunks_to_doc_ids(self, dataset, engine) -> None:
        """Two chunks of a document become one doc id, at the first chunk's position."""
        p = await run_pass(engine, dataset, name=FUSED, lanes=("keyword",))
        ids = p.runs["q1"].doc_ids
        assert ids[0] == "d1"
        assert len(ids) == len(set(ids))

    async def test_requests_carry_lanes_fusion_and_top_k(self, dataset, engine) -> None:
        """Each request restricts lanes and passes fusion mode and top_k through."""
        await run_pass(engine, dataset, name="vector", lanes=("vector",), fusion=FusionMode.SCORE_MINMAX, top_k=7)
        req = engine.requests[0]
        assert (req.lanes, req.fusion, req.top_k) == (("vector",), FusionMode.SCORE_MINMAX, 7)

    async def test_concurrent_pass_answers_every_query(self, dataset, engine) -> None:
        """With several queries in flight every judged query still gets a run."""
        p = await run_pass(engine, dataset, name=FUSED, lanes=("keyword", "vector"), concurrency=4)
        assert set(p.runs) == set(dataset.query_ids)

    async def test_keeps_lane_hits_when_asked(self, dataset, engine) -> None:
        """keep_lane_hits stores each lane's (hit id, doc id, score) for tuning."""
        p = await run_pass(engine, dataset, name=FUSED, lanes=("keyword", "vector"), keep_lane_hits=True)
        hit_id, doc_id, score = p.runs["q1"].lane_hits["keyword"][0]
        assert (hit_id, doc_id) == ("d1#0", "d1")
        assert score > 0

    async def test_keeps_the_lane_confidence_with_the_hits(self, dataset) -> None:
        """The factor the engine gave a lane's weight is kept beside its hits, so offline tuning weighs as it did."""

        class Confident(FakeEngine):
            def _lane(self, name: str, query: str, top_k: int) -> LaneOutcome:
                out = super()._lane(name, query, top_k)
                return dataclasses.replace(out, confidence=0.7) if name == "vector" else out

        p = await run_pass(
            Confident(TINY / "corpus.jsonl"), dataset, name=FUSED, lanes=("keyword", "vector"), keep_lane_hits=True
        )
        assert p.runs["q1"].lane_confidence == {"vector": 0.7}

    async def test_records_overhead_intent_and_stages(self, dataset, engine) -> None:
        """Engine overhead, pre-flight intent and stage flags are kept per query."""
        p = await run_pass(engine, dataset, name=FUSED, lanes=("keyword",))
        run = p.runs["q1"]
        assert (run.overhead_ms, run.intent, run.stages["stage2_used"]) == (1.0, "factual", False)

    async def test_records_what_came_first(self, dataset, engine) -> None:
        """The first item's fused score and title are kept (the slow-cook receipt's failure cases show them)."""
        p = await run_pass(engine, dataset, name=FUSED, lanes=("keyword",))
        run = p.runs["q1"]
        first = (await engine.search(SearchRequest(query=dataset.queries[0].text, lanes=("keyword",)))).items[0]
        assert (run.top_score, run.top_title) == (first.score_total, first.hit.title)
        assert run.top_score is not None

    async def test_records_graph_entity_matches(self, dataset, engine) -> None:
        """A graph lane's matched entities are counted per query; without a graph lane there is no count."""
        with_graph = await run_pass(engine, dataset, name=FUSED, lanes=("keyword", "graph"))
        counts = {qid: run.entity_matches for qid, run in with_graph.runs.items()}
        assert all(c is not None for c in counts.values())
        assert any(c for c in counts.values())
        without = await run_pass(engine, dataset, name=FUSED, lanes=("keyword",))
        assert {run.entity_matches for run in without.runs.values()} == {None}

    async def test_rejects_zero_concurrency(self, dataset, engine) -> None:
        """concurrency < 1 is a programming error."""
        with pytest.raises(ValueError, match="concurrency"):
            await run_pass(engine, dataset, name=FUSED, lanes=("keyword",), concurrency=0)


class TestRunPlan:
    async def test_runs_fused_and_each_lane(self, dataset, engine) -> None:
        """A two-lane plan runs a fused pass and one pass per lane, with calibration samples."""
        passes, clock = await run_plan(engine, dataset, EvalPlan(lanes=("keyword", "vector"), calibrate_every=2))
        assert set(passes) == {FUSED, "keyword", "vector"}
        assert len(clock.samples) >= 6 + 3 * len(dataset.queries) // 2

    async def test_single_lane_reuses_fused_pass(self, dataset, engine) -> None:
        """A one-lane plan reports the lane from the fused pass without running it twice."""
        passes, _ = await run_plan(engine, dataset, EvalPlan(lanes=("keyword",)))
        assert set(passes) == {FUSED, "keyword"}
        assert len(engine.requests) == 2 * len(dataset.queries)  # untimed warm-up + one timed pass


class TestRoutes:
    async def test_fused_pass_runs_the_plan_route_and_the_federation_beside_it(self, dataset, engine) -> None:
        """Under route auto the fused pass asks for auto; the federation pass and each lane alone ask for all."""
        plan = EvalPlan(lanes=("keyword", "vector"), route="auto", federation=True)
        passes, _ = await run_plan(engine, dataset, plan)
        assert list(passes) == [FUSED, FEDERATION, "keyword", "vector"]
        n = len(dataset.queries)
        routes = [(r.route, r.lanes) for r in engine.requests]
        warm, fused, federation, lanes = routes[:n], routes[n : 2 * n], routes[2 * n : 3 * n], routes[3 * n :]
        assert set(warm) == set(fused) == {("auto", ("keyword", "vector"))}
        assert set(federation) == {("all", ("keyword", "vector"))}
        assert set(lanes) == {("all", ("keyword",)), ("all", ("vector",))}

    async def test_no_second_federation_pass_under_route_all(self, dataset, engine) -> None:
        """When the plan's route is already the federation, it is not run twice."""
        passes, _ = await run_plan(engine, dataset, EvalPlan(lanes=("keyword", "vector"), federation=True))
        assert FEDERATION not in passes

    async def test_artifact_reports_the_federation_and_the_comparisons(self, dataset, engine) -> None:
        """The federation's metrics sit beside the fused ones (not among the lanes), with the per-query
        comparisons against the best lane and the federation."""
        plan = EvalPlan(lanes=("keyword", "vector"), route="auto", federation=True)
        passes, clock = await run_plan(engine, dataset, plan)
        art = build_artifact(
            dataset, passes, config={"route": "auto"}, calibration_ms=clock.unit_ms, corpus_hash="h",
            wall_time_s=1.0, revision="rev",
        )  # fmt: skip
        assert set(art["metrics"]) == {"fused", "federation", "lanes"}
        assert set(art["metrics"]["lanes"]) == {"keyword", "vector"}
        assert set(art["comparison"]) == {"best_lane", "federation"}
        ndcg = art["comparison"]["best_lane"]["ndcg_at_10"]
        assert ndcg["wins"] + ndcg["losses"] + ndcg["ties"] == len(dataset.queries)
        md = render_markdown(art)
        assert "| fused (route auto) |" in md
        assert "| federation (route all) |" in md
        assert "| federation (route all) | recall_at_100 |" in md


class TestArtifact:
    async def _artifact(self, dataset, engine):
        passes, clock = await run_plan(engine, dataset, EvalPlan(lanes=("keyword", "vector")))
        return build_artifact(
            dataset,
            passes,
            config={"fusion_mode": "rrf", "rrf_k": 60, "lanes": ["keyword", "vector"], "weights": {}},
            calibration_ms=clock.unit_ms,
            corpus_hash="abc",
            wall_time_s=1.0,
            revision="rev",
        )

    async def test_metric_keys_under_fused_and_lanes(self, dataset, engine) -> None:
        """metrics.fused and metrics.lanes.<lane> hold every contract key."""
        art = await self._artifact(dataset, engine)
        keys = {"ndcg_at_10", "mrr_at_10", "recall_at_20", "recall_at_100", "hit_at_1", "hit_at_5"}
        keys |= {"precision_at_10", "recall_at_10", "latency_p50_ms", "latency_p95_ms"}
        assert keys <= set(art["metrics"]["fused"])
        assert keys <= set(art["metrics"]["lanes"]["keyword"])
        assert keys <= set(art["metrics"]["lanes"]["vector"])

    async def test_artifact_is_json_with_revision_and_dataset(self, dataset, engine) -> None:
        """The artifact serialises and names revision, dataset, split and calibration."""
        art = json.loads(json.dumps(await self._artifact(dataset, engine)))
        assert (art["git_revision"], art["split"], art["dataset"]["queries"]) == ("rev", "test", 6)
        assert art["latency"]["calibration_ms"] > 0

    async def test_scenario_breakdown_uses_tags_then_intent(self, dataset, engine) -> None:
        """Tagged queries keep their tag; untagged ones fall back to the pre-flight intent."""
        art = await self._artifact(dataset, engine)
        scen = art["breakdown"]["scenario"]
        assert scen["temporal"]["queries"] == 1
        assert scen["relational"]["queries"] == 1
        assert scen["factual"]["queries"] == 4  # q1, q2 tagged + q3, q5 from the fake's intent

    async def test_stage_counters_and_lane_status(self, dataset, engine) -> None:
        """Queries are counted per stage-2 outcome and lane statuses tallied over the fused pass."""
        art = await self._artifact(dataset, engine)
        assert art["stages"]["queries"] == art["stages"]["not_triggered"] == 6
        assert art["stages"]["stage2_used"] == 0
        assert art["stages"]["stage1_ms_p50"] == 2.0
        assert art["lane_status"]["keyword"] == {"success": 6}

    async def test_markdown_lists_worst_queries(self, dataset, engine) -> None:
        """The summary names the worst query with its expected and returned ids."""
        art = await self._artifact(dataset, engine)
        md = render_markdown(art)
        worst = art["worst_queries"][0]
        assert worst["query"] in md
        assert "| fused (route all) |" in md


class TestPercentile:
    def test_interpolates(self) -> None:
        """p50 of 1..4 is 2.5 and p95 interpolates between the top two."""
        assert percentile([4, 1, 3, 2], 50) == 2.5
        assert percentile([1, 2, 3, 4], 95) == pytest.approx(3.85)

    def test_empty_is_zero(self) -> None:
        """No samples gives 0."""
        assert percentile([], 95) == 0.0


class TestPrepareHome:
    async def test_ingests_once_then_reuses(self, tmp_path, dataset) -> None:
        """A second eval of the same corpus reuses the scratch home instead of ingesting again."""
        settings = load_settings(env={"FABRIC_CACHE_DIR": str(tmp_path)})
        calls = []

        async def ingest(s, ds):
            calls.append(s.home)

        first = await prepare_home(settings, dataset, dataset.corpus_hash(), ingest)
        second = await prepare_home(settings, dataset, dataset.corpus_hash(), ingest)
        assert first == second
        assert calls == [first]

    async def test_interrupted_ingest_is_resumed(self, tmp_path, dataset) -> None:
        """A home without its ready marker (ingest failed) is ingested again, then marked ready."""
        settings = load_settings(env={"FABRIC_CACHE_DIR": str(tmp_path)})

        async def broken(s, ds):
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            await prepare_home(settings, dataset, "h", broken)
        calls = []

        async def ingest(s, ds):
            calls.append(s.home)

        await prepare_home(settings, dataset, "h", ingest)
        assert len(calls) == 1

    def test_key_depends_on_embedding_model(self) -> None:
        """Changing the embedding model changes the home key."""
        a = load_settings(env={})
        b = load_settings(env={"FABRIC__embeddings__model": '"other"'})
        assert harness.home_key(a, "h") != harness.home_key(b, "h")

    def test_key_depends_on_minilm_runtime(self) -> None:
        """Each MiniLM runtime's document vectors get their own home."""
        keys = {
            harness.home_key(load_settings(env={"FABRIC__embeddings__runtime": f'"{rt}"'}), "h")
            for rt in ("torch", "onnx", "onnx-int8", "openvino")
        }
        assert len(keys) == 4

    def test_key_depends_on_openvino_precision(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """OpenVINO's bf16 and f32 vectors (by the CPU) get their own homes too."""
        import fabric.embed.minilm_runtime as minilm

        settings = load_settings(env={"FABRIC__embeddings__runtime": '"openvino"'})
        monkeypatch.setattr(minilm, "_PRECISION", ["bf16"])
        bf16 = harness.home_key(settings, "h")
        monkeypatch.setattr(minilm, "_PRECISION", ["f32"])
        assert harness.home_key(settings, "h") != bf16


class TestEvalSettings:
    def test_ingest_settings_enable_every_offline_lane(self) -> None:
        """A home is built with keyword, vector and graph stores whatever lanes this run scores."""
        settings = harness.ingest_settings(load_settings(env={}), ["keyword"])
        enabled = {lc.name for lc in settings.enabled_lanes()}
        assert {"keyword", "vector", "graph"} <= enabled
        assert "web" not in enabled

    def test_eval_settings_enable_selected_lanes_and_raise_top_k(self, tmp_path) -> None:
        """Run settings point at the scratch home, enable the selected lanes and ask lanes for top_k hits."""
        base = load_settings(env={"FABRIC__lanes__graph__enabled": "false"})
        settings = harness.eval_settings(base, home=tmp_path, top_k=100, lanes=["graph"])
        assert settings.home == tmp_path
        assert settings.lanes["graph"].enabled
        assert settings.engine.lane_top_k == 100
        assert base.embeddings.cache_queries
        assert not settings.embeddings.cache_queries

    async def test_encoding_times_run_the_engines_query_path(self) -> None:
        """p50/p95 of the engine's embedder encoding each query alone; None without an embedder."""
        from types import SimpleNamespace

        from tests.support.embedded import BagEmbedder

        inner = BagEmbedder()
        engine = SimpleNamespace(resources=SimpleNamespace(embedder=inner))
        times = await harness.encoding_times(engine, ["a b", "c d", "e f"])
        assert times is not None
        assert set(times) == {"p50_ms", "p95_ms"}
        assert 0 <= times["p50_ms"] <= times["p95_ms"]
        assert (inner.calls, inner.texts) == (3, 3)
        assert await harness.encoding_times(SimpleNamespace(resources=None), ["a"]) is None

    def test_markdown_names_the_encoding_share(self) -> None:
        """The report's header line for the queries' encoding (the artifact's ``encoding``)."""
        from fabric.eval.report import _encoding_lines

        assert _encoding_lines(None) == []
        line = _encoding_lines({"p50_ms": 4.1, "p95_ms": 6.0, "share_of_fused_p50": 0.31})[0]
        assert line == "- query encoding, inside every latency: p50 4.1 ms, p95 6.0 ms (0.31 of the fused p50)"

    def test_default_lanes_skip_online_kinds(self) -> None:
        """Web, news and markets lanes cannot be judged by qrels and are not evaluated by default."""
        settings = load_settings(env={"FABRIC__lanes__web__enabled": "true"})
        assert harness.default_lanes(settings) == ["keyword", "vector", "graph"]


class TestWarnings:
    async def test_lane_not_answering_is_warned(self, dataset) -> None:
        """A lane that timed out or fell back on some queries is named in the artifact's warnings."""
        import dataclasses

        from fabric.core.models import LaneStatus

        class Flaky(FakeEngine):
            async def search(self, request):
                result = await super().search(request)
                lanes = {n: dataclasses.replace(o, status=LaneStatus.FALLBACK) for n, o in result.lanes.items()}
                return dataclasses.replace(result, lanes=lanes)

        passes, _ = await run_plan(Flaky(TINY / "corpus.jsonl"), dataset, EvalPlan(lanes=("vector",)))
        art = build_artifact(
            dataset, passes, config={}, calibration_ms=None, corpus_hash="h", wall_time_s=0, revision="r"
        )
        assert "fused pass: lane vector fallback 6/6" in art["warnings"]


class TestIndexFingerprint:
    def test_changes_with_indexing_code(self, tmp_path) -> None:
        """Editing a store writer or loader changes the fingerprint (and so the home key)."""
        (tmp_path / "fabric" / "ingest").mkdir(parents=True)
        loader = tmp_path / "fabric" / "ingest" / "loaders.py"
        loader.write_text("A = 1\n")
        before = harness.index_code_fingerprint(tmp_path)
        loader.write_text("A = 2\n")
        assert harness.index_code_fingerprint(tmp_path) != before

    def test_changes_with_a_lane_writer(self, tmp_path) -> None:
        """The lanes' store writers (``lanes/<kind>/<backend>_writer.py``) are indexing code too."""
        (tmp_path / "lanes" / "keyword").mkdir(parents=True)
        writer = tmp_path / "lanes" / "keyword" / "sqlite_fts_writer.py"
        writer.write_text("A = 1\n")
        before = harness.index_code_fingerprint(tmp_path)
        writer.write_text("A = 2\n")
        assert harness.index_code_fingerprint(tmp_path) != before

    def test_ignores_unrelated_code(self, tmp_path) -> None:
        """Editing code that does not index (the CLI) keeps the fingerprint."""
        (tmp_path / "fabric").mkdir()
        before = harness.index_code_fingerprint(tmp_path)
        (tmp_path / "fabric" / "cli.py").write_text("X = 1\n")
        assert harness.index_code_fingerprint(tmp_path) == before


class TestLatencyAttempts:
    async def test_timed_fused_pass_has_its_own_calibration(self, dataset, engine) -> None:
        """An extra timed pass answers every query and carries the samples taken around it."""
        from fabric.eval.latency import attempt_from_pass, best_normalised

        plan = EvalPlan(lanes=("keyword", "vector"), calibrate_every=2)
        again = await harness.timed_fused_pass(engine, dataset, plan, name="fused #2")
        assert again.name == FUSED
        assert set(again.runs) == set(dataset.query_ids)
        assert len(again.calibration_ms) == 6 + len(dataset.queries) // 2
        attempt = attempt_from_pass(again)
        assert attempt.p95_normalised == attempt.p95_ms / attempt.calibration_ms
        assert attempt.to_dict()["calibration_samples"] == len(again.calibration_ms)
        assert best_normalised([attempt]) == attempt.p95_normalised

    def test_uncalibrated_attempt(self) -> None:
        """A pass without samples has no normalised figure and does not count as best."""
        from fabric.eval.latency import LatencyAttempt, best_normalised

        bare = LatencyAttempt(p95_ms=5.0, calibration_ms=None, samples=0)
        assert bare.p95_normalised is None
        assert bare.to_dict()["p95_normalised"] is None
        assert best_normalised([bare]) is None
