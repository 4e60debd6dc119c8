"""Tests of the flat vector store's writer: one SQLite file, idempotent upserts, deletions, generations."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import lanes.vector.numpy_flat.writer as mod
from fabric.core.chunks import Chunk
from fabric.core.errors import IngestError
from fabric.core.models import LaneKind
from lanes.vector.numpy_flat.store import store_path, year_bits, year_range_bits
from lanes.vector.numpy_flat.writer import FlatVectorWriter
from tests.support.embedded import BagEmbedder, chunk, resources, spec

VSPEC = spec(LaneKind.VECTOR, "numpy_flat")


def embedded(chunks: list[Chunk], embedder: BagEmbedder) -> list[Chunk]:
    """The chunks with their bag-of-words vectors."""
    vecs = embedder.embed([c.embed_text for c in chunks])
    return [replace(c, vector=tuple(v)) for c, v in zip(chunks, vecs, strict=True)]


async def write(home: Path, chunks: list[Chunk], embedder: BagEmbedder, gone: tuple[str, ...] = ()) -> Path:
    """Upsert ``chunks`` and delete ``gone`` with a fresh writer; the store file's path."""
    store = FlatVectorWriter(VSPEC, resources(home, embedder))
    await store.open()
    await store.upsert(embedded(chunks, embedder))
    await store.delete(list(gone))
    await store.aclose()
    return store.path


def rows(path: Path) -> dict[str, int]:
    """Stored id → seq."""
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT id, seq FROM vec").fetchall())


class TestLayout:
    def test_one_file_per_model_under_home(self, tmp_path: Path) -> None:
        """The default path is <home>/vectors/<model slug>.sqlite; options.path overrides it."""
        assert store_path(VSPEC, resources(tmp_path), "all-MiniLM-L6-v2") == (
            tmp_path / "vectors" / "all_minilm_l6_v2.sqlite"
        )
        custom = spec(LaneKind.VECTOR, "numpy_flat", path=str(tmp_path / "x.sqlite"))
        assert store_path(custom, resources(tmp_path), "m") == tmp_path / "x.sqlite"

    def test_year_bits_cover_exactly_the_range(self) -> None:
        """A row's year bits meet a range's bits only when one of its years is inside the range."""
        row = year_bits([1990, 2010])
        assert not (row & year_range_bits(2000, 2005)).any()
        assert (row & year_range_bits(2005, 2010)).any()
        assert (row & year_range_bits(None, 1990)).any()
        assert not year_bits([1700, 2500]).any()


class TestWriter:
    async def test_reupsert_overwrites_in_place(self, tmp_path: Path) -> None:
        """Writing the same id twice keeps one row, stamped with the later generation."""
        emb = BagEmbedder()
        await write(tmp_path, [chunk("a", "alpha"), chunk("b", "beta")], emb)
        path = await write(tmp_path, [chunk("a", "alpha changed")], emb)
        assert rows(path) == {"a": 2, "b": 1}

    async def test_delete_leaves_a_tombstone(self, tmp_path: Path) -> None:
        """A deleted id leaves the rows and is recorded with the deleting generation; re-adding clears it."""
        emb = BagEmbedder()
        path = await write(tmp_path, [chunk("a", "alpha"), chunk("b", "beta")], emb, gone=("a", "zz"))
        assert rows(path) == {"b": 1}
        with sqlite3.connect(path) as conn:
            assert dict(conn.execute("SELECT id, seq FROM tomb").fetchall()) == {"a": 2, "zz": 2}
        await write(tmp_path, [chunk("a", "alpha")], emb)
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT count(*) FROM tomb WHERE id = 'a'").fetchone() == (0,)

    async def test_chunks_without_vectors_are_skipped(self, tmp_path: Path) -> None:
        """Only chunks carrying a vector are written; an all-skipped batch does not bump the generation."""
        store = FlatVectorWriter(VSPEC, resources(tmp_path, BagEmbedder()))
        await store.open()
        await store.upsert([chunk("a", "alpha")])
        await store.aclose()
        with sqlite3.connect(store.path) as conn:
            assert conn.execute("SELECT count(*) FROM vec").fetchone() == (0,)
            assert conn.execute("SELECT value FROM meta WHERE key = 'gen'").fetchone() is None

    async def test_mixed_dimensions_are_refused(self, tmp_path: Path) -> None:
        """A vector of another dimension than the store's raises IngestError and writes nothing."""
        emb = BagEmbedder()
        await write(tmp_path, [chunk("a", "alpha")], emb)
        store = FlatVectorWriter(VSPEC, resources(tmp_path, emb))
        with pytest.raises(IngestError, match="dimensions"):
            await store.upsert([replace(chunk("b", "beta"), vector=(1.0, 0.0))])
        await store.aclose()
        assert set(rows(store.path)) == {"a"}

    async def test_vectors_and_filter_columns_round_trip(self, tmp_path: Path) -> None:
        """The stored blob is the float32 vector; domain is lower-cased; years are the chunk's."""
        emb = BagEmbedder()
        c = chunk("a", "report of 2019", url="https://Docs.Example.org/x")
        path = await write(tmp_path, [c], emb)
        with sqlite3.connect(path) as conn:
            v, years, domain = conn.execute("SELECT v, years, domain FROM vec").fetchone()
        assert np.frombuffer(v, dtype=np.float32).tolist() == pytest.approx(emb.embed([c.embed_text])[0])
        assert (np.frombuffer(years, dtype=np.uint64) & year_range_bits(2019, 2019)).any()
        assert domain == "docs.example.org"


def test_public_api() -> None:
    """The module exports the writer and the shared layout helpers."""
    assert mod.__all__ == ["FlatVectorWriter"]
    import lanes.vector.numpy_flat.store as store

    assert {"store_path", "connect", "year_bits", "year_range_bits", "YEAR_WORDS"} <= set(store.__all__)
