"""URL normalisation and tokens for deduplication: two spellings of one page compare equal.

:func:`normalise_url` drops the scheme (``http`` ≡ ``https``), ``www.``, user info, a default port, the
fragment, a trailing slash and tracking parameters (``utm_*``, ``gclid``, ``fbclid``, ...), lower-cases the host
and sorts the remaining query parameters. :func:`url_tokens` turns the result into the set whose Jaccard
similarity dedup compares (host, path segments tagged with their position, query pairs). :func:`url_key` is what
ingestion stores in :attr:`fabric.core.models.Hit.url_key` and dedup compares.
"""

from __future__ import annotations

__all__ = ["LONG_URL_SEPARATORS", "TRACKING_PARAMS", "normalise_url", "url_key", "url_tokens"]

LONG_URL_SEPARATORS = 8
"""Normalised URLs with fewer ``/`` and ``&`` have at most 9 tokens, so Jaccard ≥ 0.9 means equal; only longer ones
are compared by similarity."""

TRACKING_PARAMS = frozenset({"gclid", "fbclid", "msclkid", "dclid", "yclid", "mc_cid", "mc_eid", "_ga", "igshid"})
"""Query parameters dropped by :func:`normalise_url` (plus every ``utm_*``)."""


def normalise_url(url: str) -> str:
    """``host/path?sorted&query`` without scheme, ``www.``, default port, trailing slash, fragment or tracking."""
    rest = url.strip()
    rest = rest.partition("://")[2] or rest
    if "#" in rest:
        rest = rest.partition("#")[0]
    hostpart, slash, tail = rest.partition("/")
    host = hostpart.lower()
    if "@" in host or ":" in host:
        host = host.rpartition("@")[2]
        if host.endswith((":80", ":443")):
            host = host.rpartition(":")[0]
    host = host.removeprefix("www.")
    if "?" not in tail:
        return host + (slash + tail).rstrip("/")
    path, _, query = (slash + tail).partition("?")
    keys = [(p, p.partition("=")[0].lower()) for p in query.split("&") if p]
    query = "&".join(sorted(p for p, key in keys if not key.startswith("utm_") and key not in TRACKING_PARAMS))
    path = path.rstrip("/")
    return f"{host}{path}?{query}" if query else f"{host}{path}"


def url_tokens(normalised: str) -> frozenset[str]:
    """Tokens of a normalised URL: host, ``i:segment`` per path segment, ``q:pair`` per query pair."""
    head, _, query = normalised.partition("?")
    host, _, path = head.partition("/")
    toks = {"h:" + host}
    toks.update(f"{i}:{seg}" for i, seg in enumerate(path.split("/")) if seg)
    toks.update("q:" + p for p in query.split("&") if p)
    return frozenset(toks)


def url_key(url: str) -> str:
    """The URL as dedup compares it: :func:`normalise_url` of an ``http(s)`` URL, ``""`` for any other URL.

    A normalised URL with at least 8 separators (``/``, ``&``: enough tokens for the similarity criterion to
    match anything but an equal URL) ends with ``"#"``, which no normalised URL contains (the fragment is cut at
    the first ``#``), so dedup finds the long ones without counting. An ``http(s)`` URL that normalises to
    nothing (``http://www.``) gets ``"#"`` alone, so such URLs still compare equal to each other.
    """
    if not url.startswith(("https://", "http://")):
        return ""
    key = normalise_url(url)
    if key.count("/") + key.count("&") >= LONG_URL_SEPARATORS:
        return key + "#"
    return key or "#"
