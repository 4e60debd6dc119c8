"""The service's request guard: who is calling (API keys), what they may do (roles), and how much (limits).

Every route goes through :func:`guard_middleware` (installed by :func:`install_guard`), sub-applications and
routes added later included, except the probes ``/healthz`` and ``/readyz`` and the OpenAPI document:

1. ``Authorization: Bearer <key>`` is checked against the key store (:mod:`fabric.serve.keys.store`): missing or unknown
   keys answer ``401`` (with ``WWW-Authenticate: Bearer``), a role too low for the route ``403``.
   The guard fails closed (:class:`fabric.serve.keys.store.KeyState`): in a home where no key was ever created it
   is in *open mode*: every request is the ``default`` tenant with the ``admin`` role (the single-user behaviour;
   ``fabric serve`` allows it on loopback only, or with ``--insecure``), provided its ``Host`` and ``Origin`` name
   this machine (:mod:`fabric.serve.hosts`: ``421``/``403`` otherwise, against DNS rebinding). Once keys were
   created, no active key *locks* the service (``401`` on every guarded route); a key store that cannot be read
   (``keys.sqlite`` corrupt, or missing after keys were created; the replicas' database unreachable) answers
   ``503`` and logs ``key_store_unavailable``. Only ``fabric keys reopen --yes`` returns to open mode.
2. The tenant's limits (:mod:`fabric.serve.limits.tenants`): over them, ``429`` with ``Retry-After``.
3. Handlers read the caller with :func:`principal` and check finer rights with :func:`require`.

Mutating methods need ``writer`` except on the read-only POST routes (:data:`READ_ONLY_POSTS`); everything else
needs ``reader``. Every response carries ``X-Content-Type-Options: nosniff`` and a ``Content-Security-Policy``
that forbids any active content, so no client renders the API's text as markup (:func:`security_headers`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from fabric.core.logs import get_logger
from fabric.serve.hosts import HostPolicy
from fabric.serve.keys.store import KeyBackend, KeyState, KeyStoreError, Principal, Role
from fabric.serve.limits.tenants import LimitExceeded, TenantLimits, TenantMetrics

__all__ = [
    "GUARD_KEY",
    "LOCKED_MESSAGE",
    "OPEN_TENANT",
    "PUBLIC_PATHS",
    "PUBLIC_PREFIXES",
    "READ_ONLY_POSTS",
    "UNAVAILABLE_MESSAGE",
    "AuthError",
    "Guard",
    "guard_middleware",
    "identified",
    "install_guard",
    "principal",
    "require",
    "required_role",
    "security_headers",
]

OPEN_TENANT = "default"
"""The tenant of every request in open mode (no keys configured)."""
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/", "/api"})
"""Routes answered without a key and outside the limits (probes, the API description and the console's pages, which
hold no data)."""
PUBLIC_PREFIXES = ("/static/",)
"""Path prefixes answered without a key: the console's assets."""
READ_ONLY_POSTS = frozenset({"/v1/search", "/v1/cite", "/mcp"})
"""POST routes that only read (a ``reader`` key suffices; finer checks happen in the handler)."""

UNAVAILABLE_MESSAGE = (
    "the API key store cannot be read: no request is served until the operator repairs it (see the log)"
)
"""The message of a ``503`` while the key store cannot be read (the path and the cause go to the log only)."""
LOCKED_MESSAGE = (
    "the service is locked: API keys were created and none is active. The operator creates one with "
    "`fabric keys create`, or returns to open mode with `fabric keys reopen --yes`"
)
"""The message of every ``401`` while the service is locked."""

log = get_logger(__name__)
_PRINCIPAL = web.RequestKey("principal", Principal)
_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class AuthError(Exception):
    """A request the guard refuses: ``status`` 401, 403, 421 (a foreign ``Host`` in open mode) or 503 (the key
    store cannot be read), ``field`` the part of the request at fault (None: none is)."""

    def __init__(self, status: int, field: str | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.field = field
        self.message = message

    def response(self) -> web.Response:
        """The service's usual error body."""
        headers = {"WWW-Authenticate": 'Bearer realm="fabric"'} if self.status == 401 else None
        body = {"error": {"field": self.field, "message": self.message}}
        return web.json_response(body, status=self.status, headers=headers)


class Guard:
    """Authentication against a key store (:class:`fabric.serve.keys.store.KeyBackend`), per-tenant limits and metrics.

    Verified keys and the key store's state are cached for ``cache_seconds`` (a revoked key stops working
    within that time; a first key created while serving ends open mode within it, revoking the last one locks the
    service within it, and a store that cannot be read is tried again after it).
    """

    def __init__(
        self,
        keys: KeyBackend,
        limits: TenantLimits,
        metrics: TenantMetrics,
        *,
        cache_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        open_allowed: bool = True,
        hosts: HostPolicy | None = None,
    ) -> None:
        self.keys = keys
        self.open_allowed = open_allowed
        """Whether a home where no key was ever created opens the service; ``fabric serve`` sets False on a
        non-loopback address without ``--insecure``."""
        self.hosts = hosts or HostPolicy()
        """The ``Host`` and ``Origin`` names open mode accepts (:mod:`fabric.serve.hosts`)."""
        self.limits = limits
        self.metrics = metrics
        self._ttl = cache_seconds
        self._clock = clock
        self._cache: dict[str, tuple[Principal | None, float]] = {}
        self._state: tuple[KeyState | KeyStoreError, float] | None = None

    def _remember(self, value: KeyState | KeyStoreError, now: float) -> None:
        """Cache the store's state; log a store that cannot be read (at most once per cache time) and changes of
        mode that concern the operator."""
        before = self._state[0] if self._state is not None else None
        self._state = (value, now + self._ttl)
        if isinstance(value, KeyStoreError):
            log.error("key_store_unavailable", error=str(value), status=503)
        elif isinstance(before, KeyStoreError):
            log.warning("key_store_recovered", mode=value.mode)
        if isinstance(value, KeyState) and value.mode == "locked" and getattr(before, "mode", None) != "locked":
            log.warning("service_locked", reason="API keys were created and none is active", status=401)

    async def key_state(self) -> KeyState:
        """The key store's state (read in a worker thread: the store may be a database), cached.

        Raises:
            KeyStoreError: the store cannot be read (cached as well).
        """
        now = self._clock()
        if self._state is None or self._state[1] <= now:
            try:
                value: KeyState | KeyStoreError = await asyncio.to_thread(self.keys.state)
            except KeyStoreError as exc:
                value = exc
            self._remember(value, now)
        assert self._state is not None
        if isinstance(self._state[0], KeyStoreError):
            raise KeyStoreError(str(self._state[0]))  # a new one each time: the cached one gathers no tracebacks
        return self._state[0]

    async def open_mode(self) -> bool:
        """True when no key was ever created (False too while the store cannot be read)."""
        try:
            return (await self.key_state()).mode == "open"
        except KeyStoreError:
            return False

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        """For ``/readyz``: not ready while the store cannot be read; the mode (``open``, ``keyed``, ``locked``,
        ``unavailable``)."""
        try:
            return True, {"mode": (await self.key_state()).mode}
        except KeyStoreError:
            return False, {"mode": "unavailable", "error": UNAVAILABLE_MESSAGE}

    async def authenticate(self, headers: Mapping[str, str]) -> Principal:
        """The caller of a request with these headers (``Authorization``; ``Host`` and ``Origin`` in open mode).

        Raises:
            AuthError: 401 when the key is missing, malformed, unknown or revoked, or the service is locked; 421 or
                403 for a foreign ``Host`` or ``Origin`` in open mode; 503 when the key store cannot be read.
        """
        try:
            state = await self.key_state()
        except KeyStoreError:
            raise AuthError(503, None, UNAVAILABLE_MESSAGE) from None
        if state.mode == "open":
            if not self.open_allowed:
                raise AuthError(
                    401, "authorization", "no API key: this address refuses open mode; create one with fabric keys"
                )
            refused = self.hosts.check(headers.get("Host"), headers.get("Origin"))
            if refused is not None:
                raise AuthError(*refused)
            return Principal(OPEN_TENANT, Role.ADMIN)
        if state.mode == "locked":
            raise AuthError(401, "authorization", LOCKED_MESSAGE)
        return await self._verify(headers.get("Authorization"))

    async def _verify(self, header: str | None) -> Principal:
        if not header:
            raise AuthError(401, "authorization", "missing API key: send Authorization: Bearer <key>")
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError(401, "authorization", "expected Authorization: Bearer <key>")
        token = token.strip()
        now = self._clock()
        hit = self._cache.get(token)
        if hit is None or hit[1] <= now:
            if len(self._cache) > 4096:
                self._cache.clear()
            try:
                who = await asyncio.to_thread(self.keys.verify, token)
            except KeyStoreError as exc:  # the store went away since its state was read: 503 until it is back
                self._remember(exc, now)
                raise AuthError(503, None, UNAVAILABLE_MESSAGE) from None
            hit = self._cache[token] = (who, now + self._ttl)
        if hit[0] is None:
            raise AuthError(401, "authorization", "unknown or revoked API key")
        return hit[0]


GUARD_KEY = web.AppKey("guard", Guard)
"""Where the app keeps its guard."""
_REJECTIONS = {401: "unauthenticated", 421: "host", 503: "key_store"}
"""The ``reason`` label of ``fabric_tenant_rejections_total`` per status (else ``forbidden``)."""


def required_role(method: str, path: str) -> Role:
    """The least role a route needs: ``writer`` for mutating methods outside :data:`READ_ONLY_POSTS`."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return Role.READER
    if any(path == p or path.startswith(p + "/") for p in READ_ONLY_POSTS):
        return Role.READER
    return Role.WRITER


def identified(request: web.Request) -> Principal | None:
    """The caller the guard identified (a key's, or open mode's ``default``), or None: a probe, a public page, or a
    request refused before a key was accepted."""
    return request.get(_PRINCIPAL)


def principal(request: web.Request) -> Principal:
    """The caller of a guarded request (open-mode ``default`` admin when the guard did not run)."""
    return request.get(_PRINCIPAL) or Principal(OPEN_TENANT, Role.ADMIN)


def require(request: web.Request, role: Role, field: str, what: str) -> None:
    """Refuse with 403 unless the caller's role is at least ``role``.

    Raises:
        AuthError: 403 naming ``field`` and what needs the role.
    """
    who = principal(request)
    if who.role < role:
        raise AuthError(403, field, f"{what} needs the {role.label} role (this key is {who.role.label})")


def _route_label(request: web.Request) -> str:
    info = request.match_info
    resource = info.route.resource if info.http_exception is None else None
    return resource.canonical if resource is not None else "unmatched"


@web.middleware
async def guard_middleware(request: web.Request, handler: _Handler) -> web.StreamResponse:
    """Authenticate, authorise by route and apply the tenant's limits; probes pass through."""
    if request.path in PUBLIC_PATHS or request.path.startswith(PUBLIC_PREFIXES):
        return await handler(request)
    guard = request.app[GUARD_KEY]
    m = guard.metrics
    try:
        who = await guard.authenticate(request.headers)
        request[_PRINCIPAL] = who
        need = required_role(request.method, request.path)
        if who.role < need:
            raise AuthError(403, "authorization", f"{request.method} {request.path} needs the {need.label} role")
    except AuthError as exc:
        tenant = request[_PRINCIPAL].tenant if _PRINCIPAL in request else "-"
        m.rejections.labels(tenant, _REJECTIONS.get(exc.status, "forbidden")).inc()
        return exc.response()
    try:
        await guard.limits.admit(who.tenant)
    except LimitExceeded as exc:
        m.rejections.labels(who.tenant, exc.reason).inc()
        body = {"error": {"field": None, "message": str(exc), "limit": exc.reason}}
        return web.json_response(body, status=429, headers={"Retry-After": exc.retry_after_header})
    m.inflight.labels(who.tenant).inc()
    code = 500
    try:
        response = await handler(request)
        code = response.status
        return response
    except web.HTTPException as exc:
        code = exc.status
        raise
    except AuthError as exc:  # raised by a handler's finer check (require)
        code = exc.status
        m.rejections.labels(who.tenant, "forbidden").inc()
        return exc.response()
    finally:
        guard.limits.release(who.tenant)
        m.inflight.labels(who.tenant).dec()
        m.requests.labels(who.tenant, _route_label(request), str(code)).inc()


async def security_headers(_request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: no content sniffing, no active content, no caching of answers."""
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
    response.headers.setdefault("Cache-Control", "no-store")


def install_guard(app: web.Application, guard: Guard) -> None:
    """Put ``guard`` in front of every route of ``app`` (call before the app starts)."""
    app[GUARD_KEY] = guard
    app.middlewares.append(guard_middleware)
    app.on_response_prepare.append(security_headers)
