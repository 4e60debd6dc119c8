"""Result items read back as hits (``fabric cite --items``, ``POST /v1/cite``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

import fabric.query.result_items as mod
from fabric.core.errors import QueryError
from fabric.query.result_items import hits_from_json


def test_items_of_a_result_or_a_bare_list() -> None:
    """A result's items and a bare list read the same; text wins over snippet; dates parse; order is kept."""
    items = [
        {"id": "a", "title": "A", "text": "full", "snippet": "short", "published_at": "2024-01-02T00:00:00Z"},
        {"id": "b", "snippet": "only snippet", "score_total": 0.5},
    ]
    hits = hits_from_json({"items": items})
    assert [(h.id, h.rank, h.text) for h in hits] == [("a", 1, "full"), ("b", 2, "only snippet")]
    assert hits[0].published_at == datetime(2024, 1, 2, tzinfo=UTC)
    assert hits[1].score == 0.5
    assert [h.id for h in hits_from_json(items)] == ["a", "b"]


def test_refusals_name_items() -> None:
    """Not a list, or an item without a string id: QueryError on field items."""
    with pytest.raises(QueryError, match="items"):
        hits_from_json({"items": "nope"})
    with pytest.raises(QueryError, match="item 1 has no string 'id'"):
        hits_from_json([{"title": "x"}])


def test_public_api() -> None:
    """The module's one export."""
    assert mod.__all__ == ["hits_from_json"]
