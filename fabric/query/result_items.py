"""Result items read back as hits: the JSON of ``fabric search --json`` / ``POST /v1/search`` (its ``items``, or a
bare list of them), as ``fabric cite --items`` and ``POST /v1/cite`` receive it. The ``text`` field is used when
present, else the ``snippet``; ``doc_id`` and ``author`` (the bibliography's document and author,
:mod:`fabric.core.sources`) are read when present."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fabric.core.errors import QueryError
from fabric.core.models import Hit

__all__ = ["hits_from_json"]


def _date(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def hits_from_json(data: Any) -> list[Hit]:
    """Items of ``fabric search --json`` output (or a bare list) as hits, in result order.

    Raises:
        QueryError: the payload is not a result or a list of items with ids.
    """
    items = data.get("items") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise QueryError("items", "expected the JSON of `fabric search --json` or a list of items")
    hits = []
    for i, item in enumerate(items, 1):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise QueryError("items", f"item {i} has no string 'id'")
        text = item.get("text") or item.get("snippet") or ""
        hits.append(
            Hit(
                id=item["id"],
                rank=i,
                score=float(item.get("score_total", 0.0) or 0.0),
                title=str(item.get("title", "")),
                text=str(text),
                url=str(item.get("url", "")),
                domain=str(item.get("domain", "")),
                published_at=_date(item.get("published_at")),
                doc_id=str(item.get("doc_id") or ""),
                metadata={"author": str(item["author"])} if item.get("author") else {},
            )
        )
    return hits
