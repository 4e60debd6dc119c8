"""The shared HTTP plumbing of every HTTP lane and server writer: one guarded aiohttp session, one request helper.

Why a module of our own rather than bare ``aiohttp`` calls in each lane:

- **SSRF guard at connect time.** Only hosts named in configuration are ever contacted. The session built by
  :func:`create_session` carries (1) a resolver that refuses hosts outside the :class:`AllowList` and filters
  the *resolved* addresses (link-local/metadata, multicast and unspecified addresses are always refused;
  private and loopback addresses only for hosts marked ``private_ok``, i.e. self-hosted services), and (2) a
  trace hook that checks the URL of *every* request the session sends, which is where IP literals are
  refused (aiohttp never consults the resolver for them). :func:`fetch` follows redirects itself, so each hop
  is checked again before it is sent.
- **Library defaults overridden.** aiohttp's 300 s total timeout and unlimited connections are replaced by
  explicit per-request timeouts and a bounded connector.
- **One error mapping** (:func:`map_client_errors`, most specific first) and one status mapping
  (:func:`raise_for_status`): 429 + ``Retry-After`` → :class:`LaneRejected` with ``suspend_s``; 401/403 →
  ``LaneRejected(failure="forbidden")``; 5xx, 408 and connect errors → :class:`LaneUnavailable`; our own
  request timeout → :class:`LaneTimeout`; unparseable or oversized bodies → :class:`LaneBadResponse`.

Lanes never retry and never time themselves: the executor does both.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import socket
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from fabric.config import SELF_HOSTED_BACKENDS
from fabric.errors import LaneBadResponse, LaneError, LaneRejected, LaneTimeout, LaneUnavailable

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
    "map_client_errors",
    "parse_retry_after",
    "raise_for_status",
]

DEFAULT_MAX_BYTES = 4 * 1024 * 1024
"""Response size cap unless a caller asks for another (4 MiB)."""


_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_URL_OPTION_KEYS = ("url", "base_url", "url_template")


class HostBlocked(ConnectionRefusedError):
    """A request was about to reach a host or address the allow-list does not permit."""


@dataclass(frozen=True, slots=True)
class HostRule:
    """One allowed host.

    Attributes:
        host: lowercase host name (or an IP literal, which must then be listed explicitly).
        private_ok: whether the host may resolve to private/loopback addresses (self-hosted services).
    """

    host: str
    private_ok: bool = False


@dataclass(frozen=True, slots=True)
class AllowList:
    """The hosts HTTP lanes may contact. Empty means nothing may be contacted."""

    rules: Mapping[str, HostRule] = field(default_factory=dict)

    @classmethod
    def of(cls, rules: Iterable[HostRule]) -> AllowList:
        """Build from rules; a host listed twice keeps the most permissive rule."""
        out: dict[str, HostRule] = {}
        for rule in rules:
            host = rule.host.lower().strip("[]")
            prev = out.get(host)
            out[host] = HostRule(host, rule.private_ok or bool(prev and prev.private_ok))
        return cls(out)

    def rule_for(self, host: str) -> HostRule:
        """The rule for ``host``.

        Raises:
            HostBlocked: the host is not listed.
        """
        rule = self.rules.get(host.lower().strip("[]").rstrip("."))
        if rule is None:
            raise HostBlocked(f"host {host!r} is not in the allow-list")
        return rule

    def check_url(self, url: URL) -> HostRule:
        """Check scheme and host of ``url`` (IP literals must be listed verbatim).

        Raises:
            HostBlocked: wrong scheme or host not allowed.
        """
        if url.scheme not in ("http", "https") or not url.host:
            raise HostBlocked(f"refusing URL {url.human_repr()!r}: only http(s) URLs with a host")
        rule = self.rule_for(url.host)
        address = _ip(url.host)
        if address is not None:
            self.check_address(rule, address)
        return rule

    def check_address(self, rule: HostRule, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
        """Refuse link-local/metadata, multicast, unspecified always; private/loopback unless ``private_ok``.

        Raises:
            HostBlocked: the address is not acceptable for ``rule``.
        """
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if address.is_link_local or address.is_multicast or address.is_unspecified:
            raise HostBlocked(f"host {rule.host!r} resolves to forbidden address {address}")
        if not rule.private_ok and (address.is_private or address.is_loopback or address.is_reserved):
            raise HostBlocked(f"host {rule.host!r} resolves to non-public address {address}")


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def allowlist_from_lanes(lanes: Iterable[Any], extra_urls: Iterable[str] = ()) -> AllowList:
    """The allow-list implied by lane options (``url``, ``base_url``, ``url_template``, ``feeds``).

    Args:
        lanes: :class:`fabric.config.LaneConfig` objects (anything with ``backend`` and ``options``).
        extra_urls: further URLs (embedding or chat endpoints) on hosts that may be private.

    A lane option ``private_network = true`` (or a self-hosted backend) lets its hosts resolve to private
    addresses.
    """
    rules: list[HostRule] = []
    for lane in lanes:
        opts: Mapping[str, Any] = lane.options
        private_ok = bool(opts.get("private_network", lane.backend in SELF_HOSTED_BACKENDS))
        urls: list[str] = [str(opts[k]) for k in _URL_OPTION_KEYS if opts.get(k)]
        for feed in opts.get("feeds", ()) or ():
            urls.append(str(feed["url"] if isinstance(feed, Mapping) else feed))
        for raw in urls:
            host = URL(raw.replace("{", "").replace("}", "")).host
            if host:
                rules.append(HostRule(host, private_ok))
    for raw in extra_urls:
        host = URL(raw).host if raw else None
        if host:
            rules.append(HostRule(host, True))
    return AllowList.of(rules)


class _GuardedResolver(AbstractResolver):
    """Resolves only allowed hosts and drops resolved addresses the allow-list refuses."""

    def __init__(self, allow: AllowList, base: AbstractResolver) -> None:
        self._allow = allow
        self._base = base

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        rule = self._allow.rule_for(host)
        results = await self._base.resolve(host, port, family)
        kept: list[ResolveResult] = []
        refused: list[str] = []
        for res in results:
            address = _ip(res["host"])
            try:
                if address is None:
                    raise HostBlocked(f"resolver returned a non-address {res['host']!r}")
                self._allow.check_address(rule, address)
            except HostBlocked as exc:
                refused.append(str(exc))
                continue
            kept.append(res)
        if not kept:
            raise HostBlocked("; ".join(refused) or f"host {host!r} did not resolve")
        return kept

    async def close(self) -> None:
        await self._base.close()


class StaticResolver(AbstractResolver):
    """A fixed name → address table (tests and benchmarks map real-looking names onto loopback)."""

    def __init__(self, table: Mapping[str, str]) -> None:
        self._table = {k.lower(): v for k, v in table.items()}

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        address = self._table.get(host.lower())
        if address is None:
            raise OSError(f"{host!r} not in the static table")
        fam = socket.AF_INET6 if ":" in address else socket.AF_INET
        return [{"hostname": host, "host": address, "port": port, "family": fam, "proto": 0, "flags": 0}]

    async def close(self) -> None:
        return None


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
        _session: aiohttp.ClientSession, _ctx: Any, params: aiohttp.TraceRequestStartParams
    ) -> None:
        allow.check_url(params.url)

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_request_start)
    connector = aiohttp.TCPConnector(
        resolver=_GuardedResolver(allow, resolver or aiohttp.ThreadedResolver()),
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
    target = URL(url) if isinstance(url, str) else url
    timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=min(timeout_s, 2.0))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    with map_client_errors(lane=lane, provider=provider):
        for _hop in range(max_redirects + 1):
            left = deadline - loop.time()
            if left <= 0:
                raise LaneTimeout(f"request to {target.host} timed out", lane=lane, provider=provider)
            timeout = aiohttp.ClientTimeout(total=left, sock_connect=min(left, 2.0))
            async with session.request(
                method, target, params=params, json=json_body, headers=headers, timeout=timeout, allow_redirects=False
            ) as resp:
                if resp.status in _REDIRECTS and "Location" in resp.headers:
                    nxt = resp.url.join(URL(resp.headers["Location"]))
                    if resp.status == 303:
                        method, json_body = "GET", None
                    target, params = nxt, None
                    continue
                body = await _read_capped(resp, max_bytes, lane, provider)
                out = HttpResponse(resp.status, CIMultiDictProxy(CIMultiDict(resp.headers)), body, str(resp.url))
            if check_status:
                raise_for_status(out, lane=lane, provider=provider)
            return out
    raise LaneBadResponse(f"more than {max_redirects} redirects", lane=lane, provider=provider)
