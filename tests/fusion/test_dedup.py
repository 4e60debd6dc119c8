"""Tests for fusion.dedup: each criterion, merging, URL normalisation and non-quadratic cost."""

from __future__ import annotations

import random

import pytest

from fabric.core.models import LaneKind
from fabric.settings import DedupConfig
from fusion import dedup
from fusion.combine import collect
from fusion.dedup import find_duplicates
from fusion.pipeline import fuse
from fusion.text import title_key
from tests.fusion.conftest import context, hit, lane, outcomes

BODY = " ".join(f"word{i}" for i in range(60))


def run(*lanes: object) -> object:
    """Fuse lanes with the default context."""
    return fuse(outcomes(*lanes), context())  # type: ignore[arg-type]


class TestApi:
    def test_public_api(self) -> None:
        """The module exports its stage and the duplicate finder."""
        assert sorted(dedup.__all__) == ["Deduplicator", "find_duplicates"]


class TestCriteria:
    def test_content_hash(self) -> None:
        """Equal text after case/whitespace normalisation merges."""
        out = run(lane("a", [hit("x", text=BODY)]), lane("b", [hit("y", text="  " + BODY.upper())]))
        assert [it.id for it in out.items] == ["x"]  # type: ignore[attr-defined]
        assert out.duplicates["content"] == 1  # type: ignore[attr-defined]

    def test_same_domain_similar_title(self) -> None:
        """Same domain and title Jaccard ≥ 0.8 merges."""
        t1 = "Aspirin lowers the risk of heart attack in adults"
        t2 = "Aspirin lowers the risk of heart attack in older adults"
        out = run(lane("a", [hit("x", title=t1, domain="n.org"), hit("y", rank=2, title=t2, domain="n.org")]))
        assert out.duplicates["title"] == 1  # type: ignore[attr-defined]

    def test_similar_title_other_domain_kept(self) -> None:
        """The same title on two domains is not a duplicate by title."""
        t = "Aspirin lowers the risk of heart attack"
        out = run(lane("a", [hit("x", title=t, domain="n.org"), hit("y", rank=2, title=t, domain="m.org")]))
        assert len(out.items) == 2  # type: ignore[attr-defined]

    def test_url_after_normalisation(self) -> None:
        """URLs equal after normalisation merge."""
        out = run(
            lane("web", [hit("x", url="https://www.site.org/post/1/")], kind=LaneKind.WEB),
            lane("news", [hit("y", url="http://site.org/post/1?utm_medium=rss#c")], kind=LaneKind.NEWS),
        )
        assert out.duplicates["url"] == 1  # type: ignore[attr-defined]

    def test_url_similarity_long(self) -> None:
        """Long URLs differing in one token out of ten or more merge (Jaccard ≥ 0.9)."""
        base = "https://site.org/a/b/c/d/e/f/g/h/i/j/k?x=1"
        out = run(lane("a", [hit("x", url=base), hit("y", rank=2, url=base + "&lang=en")]))
        assert out.duplicates["url"] == 1  # type: ignore[attr-defined]

    def test_doc_references_not_compared(self) -> None:
        """Chunks of one local document (same doc: URL) are not merged by URL."""
        out = run(lane("a", [hit("x", url="doc:paper-1"), hit("y", rank=2, url="doc:paper-1")]))
        assert len(out.items) == 2  # type: ignore[attr-defined]

    def test_near_duplicate_bodies(self) -> None:
        """Bodies that differ in one word out of sixty merge as near duplicates."""
        other = BODY.replace("word30", "changed")
        out = run(lane("a", [hit("x", text=BODY)]), lane("b", [hit("y", text=other)]))
        assert out.duplicates["near"] == 1  # type: ignore[attr-defined]

    def test_different_bodies_kept(self) -> None:
        """Unrelated bodies are not merged."""
        out = run(lane("a", [hit("x"), hit("y", rank=2)]))
        assert len(out.items) == 2  # type: ignore[attr-defined]

    def test_dedup_can_be_disabled(self) -> None:
        """ctx.dedup = False keeps duplicates apart."""
        out = fuse(outcomes(lane("a", [hit("x", text=BODY)]), lane("b", [hit("y", text=BODY)])), context(dedup=False))
        assert len(out.items) == 2


class TestStoredFeatures:
    def test_title_key_is_the_word_set(self) -> None:
        """The title key holds the case-folded words once each, in a fixed order: equal sets give equal keys."""
        key = title_key("The Cat and the  HAT")
        assert sorted(key.split()) == ["and", "cat", "hat", "the"]
        assert key == title_key("hat AND cat the")

    def test_stored_and_computed_features_agree(self) -> None:
        """Hits carrying ingest-time SimHash, URL and title keys fuse exactly like hits without them."""
        from dataclasses import replace

        from tests.support.hits import make_outcomes

        stored = make_outcomes(6, 30, seed=3, pool=200)
        bare = {
            name: replace(o, hits=tuple(replace(h, simhash=None, url_key=None, title_key=None) for h in o.hits))
            for name, o in stored.items()
        }
        a, b = fuse(stored, context()), fuse(bare, context())  # type: ignore[arg-type]
        assert [it.to_dict() for it in a.items] == [it.to_dict() for it in b.items]
        assert a.duplicates == b.duplicates
        assert sum(a.duplicates.values()) > 0


class TestMerge:
    def test_union_of_lanes_and_best_rank(self) -> None:
        """The representative keeps every lane, the best rank per lane and the merged ids."""
        out = run(
            lane("a", [hit("p"), hit("x", rank=2, text=BODY)]),
            lane("b", [hit("y", text=BODY), hit("q", rank=2)]),
        )
        item = next(it for it in out.items if "x" in (it.id, *it.merged_ids))  # type: ignore[attr-defined]
        assert item.lanes == ("a", "b")
        assert item.ranks == {"a": 2, "b": 1}
        assert {item.id, *item.merged_ids} == {"x", "y"}

    def test_merged_duplicate_adds_rrf_once_per_lane(self) -> None:
        """Two copies in one lane contribute once, at the better rank."""
        out = run(lane("a", [hit("x", text=BODY), hit("p", rank=2), hit("y", rank=3, text=BODY)]))
        top = out.items[0]  # type: ignore[attr-defined]
        assert top.scores["rrf"] == 1 / 61
        assert out.items[1].ranks == {"a": 2}  # type: ignore[attr-defined]

    def test_on_merge_gets_every_criterion_once(self) -> None:
        """on_merge is called once per call, with the criterion of each merged candidate in row order."""
        run_, cands = collect(outcomes(lane("a", [hit("x", text=BODY), hit("p", rank=2), hit("y", rank=3, text=BODY)]),
                                       lane("b", [hit("u", url="https://www.ex.com/a?utm_source=z"),
                                                  hit("v", rank=2, url="https://ex.com/a/")])), context())  # fmt: skip
        calls: list[list[str]] = []
        dedup.Deduplicator(DedupConfig(), calls.append)(cands, run_)
        assert calls == [["content", "url"]]

    def test_on_merge_not_called_without_merges(self) -> None:
        """Nothing merged, no call."""
        run_, cands = collect(outcomes(lane("a", [hit("x"), hit("p", rank=2)])), context())
        calls: list[list[str]] = []
        dedup.Deduplicator(DedupConfig(), calls.append)(cands, run_)
        assert calls == []

    def test_counts_in_output(self) -> None:
        """candidates counts hits received; removed counts what did not survive."""
        out = run(lane("a", [hit("x", text=BODY), hit("y", rank=2, text=BODY)]), lane("b", [hit("x")]))
        assert (out.candidates, out.removed, len(out.items)) == (3, 2, 1)  # type: ignore[attr-defined]


class TestCost:
    def test_comparisons_grow_linearly(self) -> None:
        """Comparisons on distinct candidates stay far below n² / 2 and grow about linearly."""
        rng = random.Random(3)
        vocab = [f"t{i}" for i in range(5000)]

        def count(n: int) -> int:
            hits = [
                hit(f"h{i:05d}", rank=i + 1, title=" ".join(rng.sample(vocab, 7)), domain=f"d{i % 20}.org",
                    url=f"https://d{i % 20}.org/p/{i}", text=" ".join(rng.sample(vocab, 50)))
                for i in range(n)
            ]  # fmt: skip
            _, cands = collect(outcomes(lane("a", hits)), context())
            return find_duplicates(cands, DedupConfig())[1]

        small, large = count(500), count(2000)
        assert small < 2 * 500
        assert large < 2 * 2000  # n² / 2 would be 1,999,000

    def test_pile_of_copies_is_linear(self) -> None:
        """2,000 identical candidates merge with about one step each."""
        hits = [hit(f"h{i:05d}", rank=i + 1, text=BODY, title="Same title", domain="x.org") for i in range(2000)]
        _, cands = collect(outcomes(lane("a", hits)), context())
        groups, comparisons = find_duplicates(cands, DedupConfig())
        assert comparisons < 3 * 2000
        assert len({groups.find(i) for i in range(2000)}) == 1


class TestThresholds:
    @pytest.mark.parametrize("near", [1.0, 0.9, 0.885, 0.8])
    def test_any_near_threshold_finds_close_pairs(self, near: float) -> None:
        """Every near_duplicate threshold works (byte-pair tables, byte tables or bit bands) and finds the copy."""
        other = BODY.replace("word30", "changed") if near < 1.0 else BODY
        hits = [hit("x", text=BODY), hit("y", rank=2, text=other), hit("z", rank=3)]
        _, cands = collect(outcomes(lane("a", hits)), context())
        groups, _ = find_duplicates(cands, DedupConfig(near_duplicate=near))
        assert groups.find(1) == groups.find(0)
        assert groups.find(2) != groups.find(0)

    def test_very_loose_threshold_runs(self) -> None:
        """A threshold far below 0.875 still works (bit bands) and merges the near copy."""
        hits = [hit("x", text=BODY), hit("y", rank=2, text=BODY.replace("word30", "changed"))]
        _, cands = collect(outcomes(lane("a", hits)), context())
        groups, _ = find_duplicates(cands, DedupConfig(near_duplicate=0.5))
        assert groups.find(1) == groups.find(0)
