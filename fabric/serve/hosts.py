"""DNS rebinding protection: the ``Host`` and ``Origin`` a request may name where no API key guards the service.

A page of another site open in the operator's browser can make its own name resolve to 127.0.0.1 (DNS rebinding)
and then call the service as if same-origin: the browser sends ``Host: attacker.example`` and, for a ``fetch``,
``Origin: http://attacker.example``. A key stops it (the page has none); without keys (open mode,
:mod:`fabric.serve.auth`) the guard applies :meth:`HostPolicy.check` to every guarded route, ``/mcp`` included:
the ``Host`` must name the loopback interface (``localhost``, ``127.0.0.0/8``, ``::1``; any port) or a name the
operator allowed (``fabric serve --allow-host``, and the address ``--host`` binds), else ``421``; an ``Origin``,
when sent, must be ``http(s)://`` such a host, else ``403`` (the statuses of the MCP SDK's own check, which the
service turns off so this is the one implementation).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from fabric.core.errors import ConfigError

__all__ = ["ANY_HOST", "HostPolicy", "host_name", "is_loopback_host"]

ANY_HOST = "*"
"""``--allow-host '*'``: every ``Host`` and ``Origin`` (no DNS rebinding protection: behind a proxy that checks)."""
_WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "[::]"})
_PORT = re.compile(r"[0-9]{1,5}")


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or address, no port; IPv6 bracketed or not) names only the loopback interface:
    ``localhost``, ``127.0.0.0/8``, ``::1`` (and IPv4-mapped ``::ffff:127.x.y.z``)."""
    name = host.strip().lower()
    if name == "localhost":
        return True
    try:
        addr = ipaddress.ip_address(name.removeprefix("[").removesuffix("]"))
    except ValueError:
        return False  # a host name or "" (every interface): not provably loopback
    mapped = addr.ipv4_mapped if isinstance(addr, ipaddress.IPv6Address) else None
    return addr.is_loopback or (mapped is not None and mapped.is_loopback)


def host_name(value: str) -> str | None:
    """The host of a ``Host`` header value (``name``, ``name:port``, ``[v6]``, ``[v6]:port``), lower-case and
    without brackets; None when malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        inside, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and _PORT.fullmatch(rest[1:]))):
            return None
        return inside or None
    if value.count(":") > 1:  # a bare IPv6 address (not valid in a Host header, but unambiguous)
        return value
    name, colon, port = value.partition(":")
    if colon and not _PORT.fullmatch(port):
        return None
    return name or None


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """The hosts a request may name in open mode: loopback ones, and ``allowed`` (lower-case, no port;
    :data:`ANY_HOST` allows all)."""

    allowed: frozenset[str] = frozenset()

    @classmethod
    def of(cls, names: Iterable[str], *, bind: str = "") -> HostPolicy:
        """The policy of ``fabric serve --allow-host NAME ...`` on ``--host bind`` (a specific bind address is
        allowed too: clients reach the service by it).

        Raises:
            ConfigError: a name that is not a host (a URL, a path, an empty string).
        """
        allowed = set()
        for raw in names:
            name = ANY_HOST if raw.strip() == ANY_HOST else host_name(raw)
            if name is None or "/" in name or " " in name:
                raise ConfigError(f"--allow-host: expected a host name or address (optionally :port), got {raw!r}")
            allowed.add(name)
        if bind.strip().lower() not in _WILDCARD_BINDS:
            allowed.add(host_name(bind) or bind.strip().lower())
        return cls(frozenset(allowed))

    def allows(self, host: str | None) -> bool:
        """Whether a request may name ``host`` (as :func:`host_name` returns it)."""
        if host is None:
            return False
        return ANY_HOST in self.allowed or is_loopback_host(host) or host in self.allowed

    def check(self, host: str | None, origin: str | None) -> tuple[int, str, str] | None:
        """Why a request with these ``Host`` and ``Origin`` header values is refused, as ``(status, field,
        message)``, or None when it may go on."""
        if ANY_HOST in self.allowed:
            return None
        if not self.allows(host_name(host) if host else None):
            return 421, "host", (
                f"Host {host!r} is not this service's: without API keys it answers only requests to localhost, "
                "127.0.0.1 or [::1] (or a host allowed with fabric serve --allow-host)"
            )  # fmt: skip
        if origin is not None and not self._origin_ok(origin):
            return 403, "origin", (
                f"Origin {origin!r} may not call this service: without API keys only pages served from "
                "localhost, 127.0.0.1 or [::1] (or a host allowed with fabric serve --allow-host) may"
            )  # fmt: skip
        return None

    def _origin_ok(self, origin: str) -> bool:
        """``http(s)://`` an allowed host, any valid port (``null``, other schemes and foreign hosts are not)."""
        parts = urlsplit(origin.strip())
        try:
            _ = parts.port  # out of range or not a number: raises
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and self.allows(parts.hostname)
