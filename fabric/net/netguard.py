"""The outbound allow-list: which origins (scheme + host + port) may be contacted, and which addresses they may reach.

Used by :mod:`fabric.net.httpclient` at three points: the URL of every request (IP literals included), the addresses
a host name resolves to, and every redirect hop. Policy:

- A URL is allowed only when a rule names its host *and* its scheme and port (rules built from configured URLs
  always carry both; a rule with ``scheme=""`` / ``port=None`` matches any, for tests on ephemeral ports).
- Always refused, whatever the rule: link-local (which holds the cloud metadata address 169.254.169.254),
  known metadata addresses, multicast, unspecified and ``0.0.0.0/8`` addresses.
- Private, loopback and reserved addresses only for rules marked ``private_ok`` (self-hosted services).
- IPv6 forms that embed an IPv4 address are judged by that address too: IPv4-mapped (``::ffff:a.b.c.d``),
  IPv4-compatible (``::a.b.c.d``), 6to4 (``2002::/16``), NAT64 (``64:ff9b::/96``, ``64:ff9b:1::/48``) and
  Teredo (``2001::/32``, server and client). So ``2002:a9fe:a9fe::1`` is the metadata address, refused.
- A redirect from an origin whose rule is public may not lead to a ``private_ok`` origin: a public upstream cannot
  steer a lane into the internal network.
- Redirect hops (:class:`RedirectHop`): another origin never receives a body again, nor any caller header but
  content negotiation, caching and the user agent (so no credential, whatever its header name).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from fabric.core.errors import LaneBadResponse, LaneBadURL

__all__ = [
    "METADATA_ADDRESSES",
    "AllowList",
    "GuardedResolver",
    "HostBlocked",
    "HostRule",
    "IPAddress",
    "RedirectHop",
    "StaticResolver",
    "embedded_ipv4",
    "origin_of",
    "parse_ip",
    "parse_url",
    "strip_credentials",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "192.0.0.192", "fd00:ec2::254")
)
"""Cloud instance-metadata endpoints (AWS, ECS, Alibaba, Oracle, AWS IPv6): refused even for private hosts."""

_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
_NAT64_WKP = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_COMPAT = ipaddress.ip_network("::/96")
_CROSS_ORIGIN_HEADERS = frozenset(
    {"accept", "accept-language", "cache-control", "content-type", "if-modified-since", "if-none-match", "user-agent"}
)
"""The only caller headers a redirect to another origin keeps: anything else may be a credential."""


class HostBlocked(ConnectionRefusedError):
    """A request was about to reach an origin or address the allow-list does not permit."""


def parse_ip(host: str) -> IPAddress | None:
    """``host`` as an IP address (brackets stripped), or None for a name."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 transition form carries (mapped, compatible, 6to4, NAT64, Teredo)."""
    out: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        out.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        out.append(address.sixtofour)
    if address.teredo is not None:
        out.extend(address.teredo)
    if address in _NAT64_WKP or (address in _COMPAT and int(address) > 1):
        out.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address in _NAT64_LOCAL:  # RFC 6052 /48 layout: bits 48-63 and 72-87 (bits 64-71 are the "u" octet)
        packed = address.packed
        out.append(ipaddress.IPv4Address(packed[6:8] + packed[9:11]))
    return out


def origin_of(url: URL) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` of ``url``; the port is the scheme's default when the URL names none."""
    return (url.scheme.lower(), (url.host or "").lower().strip("[]").rstrip("."), url.port)


@dataclass(frozen=True, slots=True)
class HostRule:
    """One allowed origin.

    Attributes:
        host: lowercase host name (or an IP literal, which must then be listed explicitly).
        private_ok: whether the host may resolve to private/loopback addresses (self-hosted services).
        scheme: ``http`` or ``https``; empty matches both (tests only).
        port: the port; None matches any (tests on ephemeral ports only).
    """

    host: str
    private_ok: bool = False
    scheme: str = ""
    port: int | None = None

    @classmethod
    def from_url(cls, url: str | URL, *, private_ok: bool = False) -> HostRule:
        """The exact origin of ``url`` (scheme, host and port, the scheme's default port when none is named).

        Raises:
            ValueError: the URL does not parse or has no host.
        """
        parsed = URL(url) if isinstance(url, str) else url
        scheme, host, port = origin_of(parsed)
        if not host or scheme not in ("http", "https"):
            raise ValueError(f"not an http(s) URL with a host: {parsed.human_repr()!r}")
        return cls(host, private_ok, scheme, port)

    def matches(self, scheme: str, port: int | None) -> bool:
        """Whether this rule allows ``scheme`` (empty: any) on ``port`` (None: any)."""
        return (not self.scheme or not scheme or self.scheme == scheme) and (
            self.port is None or port is None or self.port == port
        )


@dataclass(frozen=True, slots=True)
class AllowList:
    """The origins HTTP clients may contact. Empty means nothing may be contacted."""

    rules: Mapping[str, tuple[HostRule, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, rules: Iterable[HostRule]) -> AllowList:
        """Build from rules; an origin listed twice keeps the most permissive ``private_ok``."""
        merged: dict[tuple[str, str, int | None], HostRule] = {}
        for rule in rules:
            host = rule.host.lower().strip("[]").rstrip(".")
            key = (host, rule.scheme.lower(), rule.port)
            prev = merged.get(key)
            merged[key] = HostRule(host, rule.private_ok or bool(prev and prev.private_ok), key[1], rule.port)
        out: dict[str, list[HostRule]] = {}
        for rule in merged.values():
            out.setdefault(rule.host, []).append(rule)
        return cls({h: tuple(rs) for h, rs in out.items()})

    def rule_for(self, host: str, *, scheme: str = "", port: int | None = None) -> HostRule:
        """The rule for ``host`` on ``scheme``/``port`` (a match marked ``private_ok`` wins).

        Raises:
            HostBlocked: no rule allows that origin.
        """
        name = host.lower().strip("[]").rstrip(".")
        found = [r for r in self.rules.get(name, ()) if r.matches(scheme.lower(), port)]
        if not found:
            where = f"{scheme or '*'}://{name}:{port if port is not None else '*'}"
            raise HostBlocked(f"origin {where} is not in the allow-list")
        return max(found, key=lambda r: r.private_ok)

    def check_url(self, url: URL) -> HostRule:
        """Check scheme, host and port of ``url`` (IP literals must be listed verbatim and pass the address rules).

        Raises:
            HostBlocked: wrong scheme, or the origin is not allowed.
        """
        scheme, host, port = origin_of(url)
        if scheme not in ("http", "https") or not host:
            raise HostBlocked(f"refusing URL {url.human_repr()!r}: only http(s) URLs with a host")
        rule = self.rule_for(host, scheme=scheme, port=port)
        address = parse_ip(host)
        if address is not None:
            self.check_address(rule, address)
        return rule

    def check_address(self, rule: HostRule, address: IPAddress) -> None:
        """Refuse always-forbidden addresses; private/loopback/reserved ones unless ``rule.private_ok``.

        IPv6 forms that embed an IPv4 address are judged by the embedded address as well.

        Raises:
            HostBlocked: the address is not acceptable for ``rule``.
        """
        candidates: list[IPAddress] = [address]
        if isinstance(address, ipaddress.IPv6Address):
            candidates.extend(embedded_ipv4(address))
        for addr in candidates:
            if (
                addr in METADATA_ADDRESSES
                or addr.is_link_local
                or addr.is_multicast
                or addr.is_unspecified
                or (isinstance(addr, ipaddress.IPv4Address) and addr in _THIS_NETWORK)
            ):
                raise HostBlocked(f"host {rule.host!r} resolves to forbidden address {address}")
            if not rule.private_ok and (addr.is_private or addr.is_loopback or addr.is_reserved):
                raise HostBlocked(f"host {rule.host!r} resolves to non-public address {address}")

    def check_redirect(self, first: HostRule, nxt: HostRule) -> None:
        """A redirect chain that started at a public origin may not reach a ``private_ok`` origin.

        Raises:
            HostBlocked: public → private redirect.
        """
        if nxt.private_ok and not first.private_ok:
            raise HostBlocked(f"redirect from public host {first.host!r} to private service {nxt.host!r} refused")


class GuardedResolver(AbstractResolver):
    """Resolves only allowed hosts and drops resolved addresses the allow-list refuses."""

    def __init__(self, allow: AllowList, base: AbstractResolver) -> None:
        self._allow = allow
        self._base = base

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        rule = self._allow.rule_for(host, port=port or None)
        results = await self._base.resolve(host, port, family)
        kept: list[ResolveResult] = []
        refused: list[str] = []
        for res in results:
            address = parse_ip(res["host"])
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


def parse_url(raw: str | URL, base: URL | None, lane: str = "", provider: str = "") -> URL:
    """``raw`` (joined onto ``base`` for a redirect ``Location``) as an http(s) URL with a host.

    Raises:
        LaneBadURL: the parser rejects it, or it is not http(s) with a host.
    """
    try:
        url = raw if isinstance(raw, URL) else URL(raw)
        url = base.join(url) if base is not None else url
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError("only http(s) URLs with a host")
        url.origin()  # raises ValueError on a host/port the parser cannot represent
    except (ValueError, TypeError) as exc:
        what = "redirect Location" if base is not None else "URL"
        raise LaneBadURL(f"invalid {what} {str(raw)[:200]!r}: {exc}", lane=lane, provider=provider) from None
    return url


def strip_credentials(headers: Mapping[str, str] | None) -> dict[str, str] | None:
    """``headers`` fit for another origin: only content negotiation, caching and the user agent stay, so
    ``Authorization``, ``Cookie``, API-key headers under any name (``X-Api-Key``, ``X-Finnhub-Token``, ...) go."""
    if headers is None:
        return None
    return {k: v for k, v in headers.items() if k.lower() in _CROSS_ORIGIN_HEADERS}


@dataclass(slots=True)
class RedirectHop:
    """The request one redirect hop will send."""

    method: str
    target: URL
    params: Any
    json_body: Any
    headers: Mapping[str, str] | None

    def follow(self, status: int, location: str, lane: str = "", provider: str = "") -> None:
        """Turn this hop into the next one: 303 (and 301/302 after a POST) become GET without a body; another
        origin loses the credentials, and may not receive a body again (a 307/308 re-post is refused).

        Raises:
            LaneBadURL: the ``Location`` does not parse.
            LaneBadResponse: a body would be re-sent to another origin.
        """
        nxt = parse_url(location, self.target, lane, provider)
        cross = origin_of(nxt) != origin_of(self.target)
        if (status == 303 and self.method != "HEAD") or (status in (301, 302) and self.method == "POST"):
            self.method, self.json_body = "GET", None
        elif cross and (self.json_body is not None or self.method not in ("GET", "HEAD")):
            where = f"{nxt.host}:{nxt.port}"
            raise LaneBadResponse(
                f"HTTP {status} asks to re-send a {self.method} body to another origin ({where}); refused",
                lane=lane,
                provider=provider,
            )
        if cross:
            self.headers = strip_credentials(self.headers)
        self.target, self.params = nxt, None
