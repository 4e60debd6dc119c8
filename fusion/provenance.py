"""Whose URL earns ranking credit: a claimed URL earns no authority the operator did not grant.

A hit's ``url`` and ``domain`` come from one of two places:

- a lane that fetched the item itself (kinds :data:`FETCHING_KINDS`: SearXNG, Wikipedia, MDN, Brave, RSS feeds, the
  quote endpoint, and the web cache that replays them): the URL is where the lane found it;
- the project's own stores (the keyword, vector and graph lanes): the URL is whatever the entry's writer claimed. A
  writer key's entry may claim ``https://en.wikipedia.org/...`` over any text.

The domain-derived ranking factors (``authority`` and ``domain_diversity``, :mod:`fusion.boosts`) read a hit's
domain only when it is *vouched for* (:func:`vouched`): fetched by the lane itself, or stored content the operator
vouched for, ``trust: trusted`` or ``source_kind: operator`` (fields only the operator and admin keys may set:
:mod:`fabric.ingest.provenance`). Any other hit counts as having no domain (authority ``ctx.authority_default``,
diversity unknown), exactly like content without a URL: an untrusted entry claiming an authority domain ranks as it
would without the claim, and a pile of such claims cannot crowd a trusted page's domain either. To grant stored
URLs authority, the operator marks them trusted.

Among copies of one item (the same id across lanes, :mod:`fusion.combine`; duplicates, :mod:`fusion.dedup`) a
vouched hit is the representative over an unvouched one, so a merged answer shows the trusted original, never the
copy, and the copy's better rank can only lift the original.

Content without URLs (the evaluation corpora, the demo notes) has no domain either way: nothing changes for it. The
provenance travels on the hits (``trust``, ``source_kind``) and on the lane outcomes (``kind``): no I/O here.
"""

from __future__ import annotations

from fabric.core.models import Hit, LaneKind, SourceKind, Trust
from fusion.types import Candidates

__all__ = ["FETCHING_KINDS", "ranked_domains", "vouched"]

FETCHING_KINDS = frozenset({LaneKind.WEB, LaneKind.NEWS, LaneKind.MARKETS})
"""Lane kinds that fetch their items themselves (any other kind reads stored entries, whose URL is a claim)."""

_TRUSTED, _OPERATOR = Trust.TRUSTED, SourceKind.OPERATOR


def vouched(hit: Hit, fetched: bool) -> bool:
    """Whether ``hit``'s URL is vouched for: ``fetched`` by its lane, or stored content the operator vouched for."""
    return fetched or hit.trust is _TRUSTED or hit.source_kind is _OPERATOR


def ranked_domains(cands: Candidates) -> list[str]:
    """Each row's domain as the ranking factors read it: its representative's when vouched for, else ``""``."""
    hits = cands.hits
    domains = [h.domain for h in hits]
    if not any(domains):  # no URL at all (local documents): nothing to vouch for
        return domains
    return [
        d if d and (f or h.trust is _TRUSTED or h.source_kind is _OPERATOR) else ""
        for d, h, f in zip(domains, hits, cands.fetched, strict=True)
    ]
