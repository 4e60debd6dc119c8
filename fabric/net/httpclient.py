"""The shared HTTP plumbing of the whole process: one guarded aiohttp session, one request helper.

Every outbound HTTP request (lanes, store writers, the pre-flight chat endpoint, the embeddings endpoint) goes
through :func:`fetch` on a session from :func:`create_session` (the embedder, which is synchronous and runs in
worker threads, through :func:`fetch_sync`, which runs the same :func:`fetch` on a private loop). Not yet: the
ArangoDB and Qdrant *server* modes talk through their SDKs' own HTTP stacks (python-arango, qdrant-client) to
operator-configured, self-hosted URLs. Why one client:

- **SSRF guard** (policy in :mod:`fabric.net.netguard`). Only origins (scheme + host + port) named in configuration
  are contacted. The session carries (1) a resolver that refuses hosts outside the :class:`AllowList` and
  filters the *resolved* addresses, and (2) trace hooks that check the URL of every request (where IP literals
  are refused: aiohttp never consults the resolver for them) and refuse aiohttp's own redirect following,
  which would skip the URL check. :func:`fetch` follows redirects itself, hop by hop, each hop checked again.
- **Redirects.** A hop to another origin keeps only content-negotiation, caching and user-agent headers, so
  every credential goes (``Authorization``, ``Cookie``, API keys under any header name); a 307/308 never
  re-sends a body to another origin (refused); 303, and 301/302 after a POST, continue as GET without a body;
  a chain that started at a public origin never reaches a private one.
- **Library defaults overridden.** aiohttp's 300 s total timeout and unlimited connections are replaced by
  explicit per-request timeouts and a bounded connector.
- **One error mapping** (:func:`map_client_errors`, most specific first) and one status mapping
  (:func:`raise_for_status`): 429 + ``Retry-After`` → :class:`LaneRejected` with ``suspend_s``; 401/403 →
  ``LaneRejected(failure="forbidden")``; 5xx, 408 and connect errors → :class:`LaneUnavailable`; our own
  request timeout → :class:`LaneTimeout`; unparseable, too deeply nested or oversized bodies →
  :class:`LaneBadResponse`; a URL the parser rejects → :class:`LaneBadURL`.

Lanes never retry and never time themselves: the executor does both.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from fabric.core.errors import (
    ConfigError,
    LaneBadResponse,
    LaneBadURL,
    LaneError,
    LaneRejected,
    LaneTimeout,
    LaneUnavailable,
)
from fabric.net.netguard import (
    AllowList,
    GuardedResolver,
    HostBlocked,
    HostRule,
    RedirectHop,
    StaticResolver,
    parse_url,
)
from fabric.settings import SELF_HOSTED_BACKENDS

__all__ = [
    "DEFAULT_MAX_BYTES",
    "SELF_HOSTED_BACKENDS",
    "AllowList",
    "HostBlocked",
    "HostRule",
    "HttpResponse",
    "StaticResolver",
    "allowlist_from_lanes",
    "create_session",
    "fetch",
    "fetch_sync",
    "map_client_errors",
    "parse_retry_after",
    "raise_for_status",
]

DEFAULT_MAX_BYTES = 4 * 1024 * 1024
"""Response size cap unless a caller asks for another (4 MiB)."""


_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_URL_OPTION_KEYS = ("url", "base_url", "url_template")


def allowlist_from_lanes(lanes: Iterable[Any], extra_urls: Iterable[str] = ()) -> AllowList:
    """The allow-list implied by lane options (``url``, ``base_url``, ``url_template``, ``feeds``): exact origins.

    Args:
        lanes: :class:`fabric.settings.LaneConfig` objects (anything with ``name``, ``backend`` and ``options``).
        extra_urls: further URLs (embedding or chat endpoints) on hosts that may be private.

    A lane option ``private_network = true`` (or a self-hosted backend) lets its hosts resolve to private
    addresses.

    Raises:
        ConfigError: a configured URL does not parse or is not http(s) with a host.
    """
    rules: list[HostRule] = []
    found: list[tuple[str, str, bool]] = []
    for lane in lanes:
        opts: Mapping[str, Any] = lane.options
        private_ok = bool(opts.get("private_network", lane.backend in SELF_HOSTED_BACKENDS))
        name = getattr(lane, "name", lane.backend)
        found += [(f"lanes.{name}.options.{k}", str(opts[k]), private_ok) for k in _URL_OPTION_KEYS if opts.get(k)]
        for feed in opts.get("feeds", ()) or ():
            raw = str(feed["url"] if isinstance(feed, Mapping) else feed)
            found.append((f"lanes.{name}.options.feeds", raw, private_ok))
    found += [("embeddings.url / preflight.chat_url", raw, True) for raw in extra_urls if raw]
    for key, raw, private_ok in found:
        try:
            rules.append(HostRule.from_url(raw.replace("{", "").replace("}", ""), private_ok=private_ok))
        except ValueError as exc:
            raise ConfigError(f"bad URL {raw!r}: {exc}", key=key) from None
    return AllowList.of(rules)


def create_session(
    allow: AllowList,
    *,
    limit: int = 64,
    limit_per_host: int = 16,
    connect_timeout_s: float = 2.0,
    total_timeout_s: float = 30.0,
    user_agent: str = "retrieval-fabric/0.1 (+https://github.com/retrieval-fabric)",
    resolver: AbstractResolver | None = None,
) -> aiohttp.ClientSession:
    """The app's one shared, guarded session (call inside a running loop; the app closes it).

    Args:
        allow: hosts that may be contacted.
        limit: total connection cap (aiohttp's default is 100, per host unlimited).
        limit_per_host: per-host connection cap.
        connect_timeout_s: default connect timeout.
        total_timeout_s: default total timeout, replacing aiohttp's 300 s (requests pass tighter ones).
        user_agent: sent on every request (Wikimedia's API policy asks for an identifying agent).
        resolver: DNS resolver to wrap (default: aiohttp's threaded resolver).
    """

    async def on_request_start(
        _session: aiohttp.ClientSession, ctx: Any, params: aiohttp.TraceRequestStartParams
    ) -> None:
        rule = allow.check_url(params.url)
        chain = getattr(ctx, "trace_request_ctx", None)
        if isinstance(chain, _Chain):
            if chain.first is None:
                chain.first = rule
            else:
                allow.check_redirect(chain.first, rule)

    async def on_request_redirect(
        _session: aiohttp.ClientSession, _ctx: Any, params: aiohttp.TraceRequestRedirectParams
    ) -> None:
        raise HostBlocked(
            f"redirect from {params.url.human_repr()!r} not followed: the guarded session follows redirects only "
            "through fabric.net.httpclient.fetch, which checks every hop"
        )

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_request_start)
    trace.on_request_redirect.append(on_request_redirect)
    connector = aiohttp.TCPConnector(
        resolver=GuardedResolver(allow, resolver or aiohttp.ThreadedResolver()),
        limit=limit,
        limit_per_host=limit_per_host,
        ttl_dns_cache=60,
    )
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=total_timeout_s, sock_connect=connect_timeout_s),
        trace_configs=[trace],
        headers={"User-Agent": user_agent},
        raise_for_status=False,
    )


@dataclass(slots=True)
class _Chain:
    """One :func:`fetch` call's redirect chain, seen by the session's trace hook (``trace_request_ctx``)."""

    first: HostRule | None = None


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """A fully read response (body already size-checked)."""

    status: int
    headers: Mapping[str, str]
    """Case-insensitive."""
    body: bytes
    url: str

    def json(self, *, lane: str = "", provider: str = "") -> Any:
        """Decode the body as JSON.

        Raises:
            LaneBadResponse: the body is not JSON.
        """
        try:
            return json.loads(self.body)
        except RecursionError:  # a body nested ~1,000+ deep: the parser's guard trips in well under a millisecond
            raise LaneBadResponse(f"JSON from {self.url} nested too deeply", lane=lane, provider=provider) from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise LaneBadResponse(f"invalid JSON from {self.url}: {exc}", lane=lane, provider=provider) from None


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date); None when absent/bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def raise_for_status(resp: HttpResponse, *, lane: str = "", provider: str = "", detail: str = "") -> None:
    """Map an error status onto the lane error tree (2xx and 304 pass).

    Raises:
        LaneRejected: 429 (``suspend_s`` from Retry-After) or 401/403 (``failure="forbidden"``).
        LaneUnavailable: 5xx or 408.
        LaneBadResponse: any other 4xx/3xx.
    """
    status = resp.status
    if 200 <= status < 300 or status == 304:
        return
    text = detail or resp.body[:200].decode("utf-8", "replace")
    msg = f"HTTP {status} from {resp.url}: {text}"
    if status == 429:
        raise LaneRejected(
            msg, lane=lane, provider=provider, suspend_s=parse_retry_after(resp.headers.get("Retry-After"))
        )
    if status in (401, 403):
        raise LaneRejected(msg, lane=lane, provider=provider, failure="forbidden")
    if status >= 500 or status == 408:
        raise LaneUnavailable(msg, lane=lane, provider=provider)
    raise LaneBadResponse(msg, lane=lane, provider=provider)


@contextlib.contextmanager
def map_client_errors(*, lane: str = "", provider: str = "") -> Iterator[None]:
    """Translate aiohttp / socket errors into lane errors, most specific first."""
    try:
        yield
    except LaneError:
        raise
    except aiohttp.InvalidURL as exc:  # before HostBlocked/ClientError: it is both a ClientError and a ValueError
        raise LaneBadURL(f"invalid URL {str(exc.url)[:200]!r}", lane=lane, provider=provider) from None
    except HostBlocked as exc:
        raise LaneRejected(f"blocked by allow-list: {exc}", lane=lane, provider=provider, failure="forbidden") from None
    except aiohttp.ClientConnectorError as exc:
        if isinstance(exc.os_error, HostBlocked):
            raise LaneRejected(
                f"blocked by allow-list: {exc.os_error}", lane=lane, provider=provider, failure="forbidden"
            ) from None
        raise LaneUnavailable(f"cannot connect: {exc}", lane=lane, provider=provider) from None
    except TimeoutError as exc:  # aiohttp's ServerTimeoutError / ConnectionTimeoutError are TimeoutErrors
        raise LaneTimeout(f"request timed out: {exc or 'timeout'}", lane=lane, provider=provider) from None
    except aiohttp.ClientPayloadError as exc:
        raise LaneBadResponse(f"broken response body: {exc}", lane=lane, provider=provider) from None
    except (aiohttp.ClientError, OSError) as exc:
        raise LaneUnavailable(f"HTTP failure: {exc!r}", lane=lane, provider=provider) from None


async def _read_capped(resp: aiohttp.ClientResponse, max_bytes: int, lane: str, provider: str) -> bytes:
    declared = resp.content_length
    if declared is not None and declared > max_bytes:
        raise LaneBadResponse(f"response of {declared} bytes exceeds cap {max_bytes}", lane=lane, provider=provider)
    chunks: list[bytes] = []
    total = 0
    async for chunk in resp.content.iter_chunked(65536):
        total += len(chunk)
        if total > max_bytes:
            raise LaneBadResponse(f"response exceeds cap {max_bytes} bytes", lane=lane, provider=provider)
        chunks.append(chunk)
    return b"".join(chunks)


async def fetch(
    session: aiohttp.ClientSession | None,
    method: str,
    url: str | URL,
    *,
    timeout_s: float,
    lane: str = "",
    provider: str = "",
    params: Mapping[str, str | int | float] | Sequence[tuple[str, str]] | None = None,
    json_body: Any = None,
    headers: Mapping[str, str] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_redirects: int = 3,
    check_status: bool = True,
) -> HttpResponse:
    """Send one request through the shared session, following redirects hop by hop, and read it fully.

    Args:
        session: the app's shared session (``resources.http``); None is a configuration error.
        timeout_s: total time for this request, every hop included (never aiohttp's 300 s default).
        check_status: map error statuses with :func:`raise_for_status` (turn off to inspect them first).

    Raises:
        LaneError: every failure, mapped as described in the module docstring.
    """
    if session is None:
        raise LaneUnavailable("no shared HTTP session was injected (resources.http)", lane=lane, provider=provider)
    hop = RedirectHop(method.upper(), parse_url(url, None, lane, provider), params, json_body, headers)
    chain = _Chain()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    with map_client_errors(lane=lane, provider=provider):
        for _hop in range(max_redirects + 1):
            left = deadline - loop.time()
            if left <= 0:
                raise LaneTimeout(f"request to {hop.target.host} timed out", lane=lane, provider=provider)
            async with session.request(
                hop.method, hop.target, params=hop.params, json=hop.json_body, headers=hop.headers,
                timeout=aiohttp.ClientTimeout(total=left, sock_connect=min(left, 2.0)), allow_redirects=False,
                trace_request_ctx=chain,
            ) as resp:  # fmt: skip
                if resp.status in _REDIRECTS and "Location" in resp.headers:
                    hop.follow(resp.status, resp.headers["Location"], lane, provider)
                    continue
                body = await _read_capped(resp, max_bytes, lane, provider)
                out = HttpResponse(resp.status, CIMultiDictProxy(CIMultiDict(resp.headers)), body, str(resp.url))
            if check_status:
                raise_for_status(out, lane=lane, provider=provider)
            return out
    raise LaneBadResponse(f"more than {max_redirects} redirects", lane=lane, provider=provider)


def fetch_sync(
    allow: AllowList,
    method: str,
    url: str,
    *,
    timeout_s: float,
    resolver: AbstractResolver | None = None,
    **kwargs: Any,
) -> HttpResponse:
    """:func:`fetch` for synchronous callers (worker threads, loop-less programs), on a private loop and session.

    The same guard and redirect rules as the app's session (a session from :func:`create_session` on
    ``allow``), so there is no second HTTP client to keep in step. Blocking: never call it from a coroutine.

    Raises:
        LaneError: as :func:`fetch`.
    """

    async def once() -> HttpResponse:
        session = create_session(allow, limit=4, limit_per_host=4, total_timeout_s=timeout_s, resolver=resolver)
        try:
            return await fetch(session, method, url, timeout_s=timeout_s, **kwargs)
        finally:
            await session.close()

    return asyncio.run(once())
