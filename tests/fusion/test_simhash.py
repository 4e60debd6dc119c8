"""Tests for fusion.simhash."""

from __future__ import annotations

from fusion import simhash
from fusion.simhash import hamming, simhash64, simhash_many

TEXT = " ".join(f"word{i}" for i in range(60))


class TestSimhash:
    def test_public_api(self) -> None:
        """The module exports the hash functions."""
        assert sorted(simhash.__all__) == ["hamming", "simhash64", "simhash_many"]

    def test_no_words_is_none(self) -> None:
        """A text without words has no SimHash."""
        assert simhash64("  ...  ") is None

    def test_fixed_value(self) -> None:
        """The value is stable across processes (no salted hash())."""
        assert simhash64("hello world") == simhash64("HELLO   world")
        assert simhash64("hello world") == 8156607882845083636

    def test_batch_equals_single(self) -> None:
        """Batch hashing gives the same values as one-by-one, empty texts included."""
        texts = ["a b c", "", "single", TEXT]
        assert simhash_many(texts) == [simhash64(t) for t in texts]

    def test_near_texts_are_close(self) -> None:
        """One changed word in sixty moves few bits; an unrelated text moves many."""
        a, b = simhash64(TEXT), simhash64(TEXT.replace("word30", "other"))
        c = simhash64(" ".join(f"zz{i}" for i in range(60)))
        assert None not in (a, b, c)
        assert a is not None
        assert b is not None
        assert c is not None
        assert hamming(a, b) <= 6 < hamming(a, c)
