"""Helpers for the embedded-store tests: a deterministic bag-of-words embedder and chunk builders."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from fabric.core.chunks import Chunk
from fabric.core.models import LaneKind, SourceKind, Trust
from fabric.core.tenants import DEFAULT_TENANT, tenant_home
from fabric.ingest.loaders import finalize
from lanes.base import LaneResources, LaneSpec


class BagEmbedder:
    """Hashes words into 64 buckets and normalises: texts sharing words are close. Counts its calls."""

    name = "bag-64"
    dim = 64

    def __init__(self) -> None:
        self.calls = 0
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        self.texts += len(texts)
        out = []
        for t in texts:
            v = [0.0] * self.dim
            for w in re.findall(r"\w+", t.lower()):
                v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
            n = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([x / n for x in v])
        return out


def chunk(
    cid: str,
    text: str,
    *,
    title: str = "",
    published_at: datetime | None = None,
    url: str = "",
    trust: Trust = Trust.UNTRUSTED,
    **kw: Any,
) -> Chunk:
    """A finalised chunk (years, quality and hash filled) with doc id == chunk id."""
    return finalize(
        Chunk(
            id=cid,
            doc_id=cid,
            chunk_id=cid,
            title=title,
            text=text,
            url=url,
            published_at=published_at,
            source_kind=SourceKind.IMPORT,
            source_ref="test",
            trust=trust,
            **kw,
        )
    )


def spec(kind: LaneKind, backend: str, name: str | None = None, **options: Any) -> LaneSpec:
    """A lane spec with options."""
    return LaneSpec(name=name or kind.value, kind=kind, backend=backend, options=options)


def resources(home: Path, embedder: Any = None, tenant: str = DEFAULT_TENANT) -> LaneResources:
    """Lane resources of ``tenant`` under the service home ``home`` (what the service's tenant engines get)."""
    return LaneResources(home=tenant_home(home, tenant), tenant=tenant, embedder=embedder)
