"""The flat vector store's file: its schema, where it lives, its connection, and the year bitsets of its rows."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from fabric.core import tenants
from fabric.core.models import Trust
from lanes.base import LaneResources, LaneSpec
from lanes.sqlite_common import MMAP_BYTES

__all__ = [
    "TRUST_CODES",
    "YEAR_MAX",
    "YEAR_MIN",
    "YEAR_WORDS",
    "connect",
    "store_path",
    "year_bits",
    "year_range_bits",
]

YEAR_MIN = 1800
YEAR_MAX = 2111
"""Years outside ``[YEAR_MIN, YEAR_MAX]`` are not indexed (the year extractor finds 1800–2100 only)."""
YEAR_WORDS = (YEAR_MAX - YEAR_MIN + 64) // 64
"""``uint64`` words of a year bitset."""

TRUST_CODES: dict[str, int] = {t.value: i for i, t in enumerate(Trust)}
"""Trust value → the small integer stored in ``vec.trust``."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS vec (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL, v BLOB NOT NULL, years BLOB NOT NULL,
    trust INTEGER NOT NULL, domain TEXT NOT NULL, payload TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS vec_seq ON vec(seq);
CREATE TABLE IF NOT EXISTS tomb (id TEXT PRIMARY KEY, seq INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS tomb_seq ON tomb(seq);
"""


def store_path(spec: LaneSpec, resources: LaneResources, model: str) -> Path:
    """``options.path`` or ``<home>/vectors/<model slug>.sqlite`` (one file per embedding model; per tenant:
    :func:`fabric.core.tenants.store_path`)."""
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_") or "model"
    return tenants.store_path(spec.options.get("path"), resources.home / "vectors" / f"{slug}.sqlite", resources.tenant)


def connect(path: Path) -> sqlite3.Connection:
    """A connection in WAL mode with the schema created (the caller serialises its use)."""
    conn = sqlite3.connect(path, timeout=60.0, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")  # payload reads through the map (lanes.sqlite_common)
    conn.executescript(_SCHEMA)
    return conn


def year_bits(years: Iterable[int]) -> np.ndarray:
    """The bitset (``uint64`` words) of the indexable ``years``."""
    bits = np.zeros(YEAR_WORDS, dtype=np.uint64)
    for y in years:
        if YEAR_MIN <= y <= YEAR_MAX:
            off = y - YEAR_MIN
            bits[off // 64] |= np.uint64(1 << (off % 64))
    return bits


def year_range_bits(lo: int | None, hi: int | None) -> np.ndarray:
    """The bitset of every indexable year in ``[lo, hi]`` (None: unbounded on that side)."""
    start, end = max(lo if lo is not None else YEAR_MIN, YEAR_MIN), min(hi if hi is not None else YEAR_MAX, YEAR_MAX)
    return year_bits(range(start, end + 1))
