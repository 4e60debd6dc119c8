"""Tests for fusion.titles: the title criterion of deduplication against a brute-force reference."""

from __future__ import annotations

import random

from fusion import titles
from fusion.text import title_key
from fusion.titles import title_join
from fusion.unionfind import Groups
from tests.fusion.conftest import hit


class TestTitleJoin:
    def test_public_api(self) -> None:
        """The module exports the join."""
        assert titles.__all__ == ["title_join"]

    def test_similar_titles_of_one_domain_merge(self) -> None:
        """Jaccard 5/6 on one domain merges; the same title on another domain or without one does not."""
        hits = [
            hit("a", title="one two three four five", domain="x.org"),
            hit("b", title="One two three four five six", domain="x.org"),
            hit("c", title="one two three four five", domain="y.org"),
            hit("d", title="one two three four five"),
        ]
        g = Groups(len(hits))
        assert title_join(hits, 0.8, g) == 1
        assert g.why == {1: "title"}
        assert g.find(2) == 2
        assert g.find(3) == 3

    def test_stored_and_computed_keys_agree(self) -> None:
        """A hit carrying its ingest-time title key joins exactly as one whose key is computed here."""
        stored = title_key("red fox jumps high")
        hits = [
            hit("a", title="Red Fox Jumps High Today", domain="x.org"),
            hit("b", title="red fox jumps high", domain="x.org", title_key=stored),
        ]
        g = Groups(2)
        title_join(hits, 0.8, g)
        assert g.find(1) == 0

    def test_matches_brute_force(self) -> None:
        """On random titles over few domains, the groups equal those of comparing every earlier same-domain row."""
        rng = random.Random(5)
        vocab = [f"w{i}" for i in range(14)]
        for t in (0.5, 0.8, 1.0):
            hits = [
                hit(f"h{i}", title=" ".join(rng.sample(vocab, rng.randint(1, 7))), domain=rng.choice(("a", "b", "")))
                for i in range(120)
            ]
            g = Groups(len(hits))
            title_join(hits, t, g)
            ref = Groups(len(hits))
            sets = [set(h.title.split()) for h in hits]
            done: list[int] = []
            for d in dict.fromkeys(h.domain for h in hits if h.domain):  # domains in order of first appearance
                done.clear()
                for i in (i for i, h in enumerate(hits) if h.domain == d):
                    merged = False
                    for j in done:
                        if ref.find(j) != ref.find(i) and len(sets[i] & sets[j]) >= t * len(sets[i] | sets[j]):
                            ref.union(i, j, "title")
                            merged = True
                    if not merged:
                        done.append(i)
            assert [g.find(i) for i in range(len(hits))] == [ref.find(i) for i in range(len(hits))]
