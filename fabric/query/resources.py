"""Shared resources the engine owns and injects into lanes: one aiohttp session, the embedder, the web cache.

The session has explicit limits and timeouts: aiohttp's defaults are a 300 s total timeout and no per-host
connection limit, both wrong for lanes that live under sub-second budgets (the executor cuts every call at
its budget anyway; these limits bound what an abandoned call can hold).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aiohttp

from fabric.core.logs import get_logger
from fabric.net.httpclient import allowlist_from_lanes, create_session
from fabric.net.webcache import WebCache
from fabric.settings import Settings
from lanes.base import LaneResources

if TYPE_CHECKING:
    from fabric.core.models import Embedder

__all__ = ["HTTP_LIMIT", "HTTP_LIMIT_PER_HOST", "HTTP_TIMEOUT", "close_resources", "open_resources"]

log = get_logger(__name__)

HTTP_LIMIT = 100
"""Connections in the pool."""
HTTP_LIMIT_PER_HOST = 16
"""Connections per host, so one slow provider cannot take the whole pool."""
HTTP_TIMEOUT = aiohttp.ClientTimeout(total=15.0, connect=3.0, sock_connect=3.0, sock_read=10.0)
"""Upper bounds for any HTTP call (lane budgets are much shorter and cut first)."""


def _build_embedder(settings: Settings) -> Embedder | None:
    from fabric.core.errors import ConfigError  # imported here: keeps this module's import block stable for merges

    try:
        from fabric.embed.embeddings import build_embedder  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        log.warning("embedder_unavailable", reason="fabric.embed.embeddings not importable", error=str(exc))
        return None
    try:
        embedder: Embedder | None = build_embedder(settings.embeddings, cache_dir=settings.cache_dir)
    except ConfigError:
        raise  # a bad setting fails at start-up, naming the key
    except Exception as exc:  # fail-open: the vector lane reports itself unavailable, lexical lanes still answer
        log.warning("embedder_unavailable", reason="build failed", error=f"{type(exc).__name__}: {exc}")
        return None
    return embedder


async def open_resources(settings: Settings, *, embedder: bool = True) -> LaneResources:
    """Create the shared HTTP session and (unless ``embedder=False``) the embedder."""
    # The session is SSRF-guarded: only hosts named in lane options (and the embeddings / chat endpoints) can be
    # contacted, checked at connect time and on every request (fabric.net.httpclient).
    allow = allowlist_from_lanes(
        settings.lanes.values(), extra_urls=[settings.embeddings.url, settings.preflight.chat_url]
    )
    http = create_session(
        allow,
        limit=HTTP_LIMIT,
        limit_per_host=HTTP_LIMIT_PER_HOST,
        connect_timeout_s=HTTP_TIMEOUT.sock_connect or 3.0,
        total_timeout_s=HTTP_TIMEOUT.total or 15.0,
    )
    return LaneResources(
        home=settings.home,
        http=http,
        embedder=_build_embedder(settings) if embedder else None,
        web_cache=WebCache(),
    )


async def close_resources(resources: LaneResources) -> None:
    """Close what :func:`open_resources` opened."""
    if resources.http is not None and not resources.http.closed:
        await resources.http.close()
