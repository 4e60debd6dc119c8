"""What the ``cost`` and ``citations_required`` constraints do to the returned page (the fusion policy).

**Token budget** (``cost``: ``low`` 1000, ``medium`` 2000, ``high`` 5000 tokens, the fusion policy ``cost_limits``). The
page's items are taken best first while their title and text fit in the budget; the first item that does not fit
has its text cut to the tokens left (the first item of a page is always returned, cut to what its title leaves),
and the items after it are left for the next page: the cursor resumes at the first item not returned. Tokens are
counted as words and punctuation marks (``\\w+|[^\\w\\s]``), the unit the returned text is cut at; a model's
sub-word tokenizer counts somewhat more.

**Citation-ready passages** (``citations_required``). For every returned item, the passage to cite is the
sentence of its text (split as :mod:`fusion.citations` splits passages) that contains the most of the query's
content words (:func:`fusion.citations.lexical_similarity`). An item is citation-ready when it has a reference to
cite (its URL, else its ``source_ref``) and a passage sharing at least one content word with the query; it then
gets the next ``[n]`` marker in page order, or the marker of its document when an item of the same document
(``doc_id``) already has one: markers number source documents, as in the result's ``bibliography``
(:mod:`fabric.core.sources`). Items without one are kept in place and marked ``citation: null``; the result lists
their ids under ``citations.uncited``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fabric.core.models import FusedItem, iso_utc
from fabric.core.sources import document_id
from fusion.citations import lexical_similarity, split_sentences

__all__ = ["Budgeted", "apply_token_budget", "citation_passages", "count_tokens", "cut_to_tokens"]

_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Words and punctuation marks in ``text``."""
    return sum(1 for _ in _TOKEN.finditer(text))


def cut_to_tokens(text: str, n: int) -> str:
    """``text`` up to the end of its ``n``-th token (all of it when it has fewer; empty for ``n <= 0``)."""
    if n <= 0:
        return ""
    for i, m in enumerate(_TOKEN.finditer(text), start=1):
        if i == n:
            return text[: m.end()]
    return text


@dataclass(frozen=True, slots=True)
class Budgeted:
    """A page cut to a token budget."""

    items: tuple[FusedItem, ...]
    """The items returned (the last one possibly with its text cut)."""
    record: dict[str, Any] = field(default_factory=dict)
    """``max_tokens``, ``tokens`` returned, ``truncated`` item ids and ``deferred`` (items left for the next page)."""


def apply_token_budget(items: Sequence[FusedItem], max_tokens: int | None) -> Budgeted:
    """Cut ``items`` (best first) to ``max_tokens`` of title and text (see the module docstring)."""
    if max_tokens is None:
        return Budgeted(tuple(items))
    left = max_tokens
    kept: list[FusedItem] = []
    truncated: list[str] = []
    for it in items:
        title_t, text_t = count_tokens(it.hit.title), count_tokens(it.hit.text)
        if title_t + text_t <= left:
            kept.append(it)
            left -= title_t + text_t
            continue
        room = left - title_t
        if room > 0 or not kept:
            text = cut_to_tokens(it.hit.text, room)
            kept.append(replace(it, hit=replace(it.hit, text=text)))
            truncated.append(it.id)
            left -= title_t + count_tokens(text)
        break
    record = {
        "max_tokens": max_tokens,
        "tokens": max_tokens - left,
        "truncated": truncated,
        "deferred": len(items) - len(kept),
    }
    return Budgeted(tuple(kept), record)


def _best_passage(query: str, text: str) -> tuple[str, float]:
    passages = split_sentences(text) if text.strip() else []
    if not passages:
        return "", 0.0
    row = lexical_similarity([query], passages)[0]
    best = max(range(len(passages)), key=lambda i: (row[i], -i))
    return passages[best], float(row[best])


def citation_passages(query: str, items: Sequence[FusedItem]) -> dict[str, dict[str, Any] | None]:
    """Item id → its citation (marker, passage, similarity, ref, title, published_at), or None when the item has
    no citation-ready passage (see the module docstring)."""
    out: dict[str, dict[str, Any] | None] = {}
    markers: dict[str, int] = {}  # document id → its marker
    for it in items:
        h = it.hit
        ref = h.url or h.source_ref
        passage, score = _best_passage(query, h.text) if ref else ("", 0.0)
        if score <= 0.0:
            out[it.id] = None
            continue
        marker = markers.setdefault(document_id(h), len(markers) + 1)
        out[it.id] = {
            "marker": marker,
            "passage": passage,
            "similarity": round(score, 4),
            "ref": ref,
            "title": h.title,
            "published_at": iso_utc(h.published_at),
        }
    return out
