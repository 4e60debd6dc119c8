"""The search console at ``/`` and the API reference at ``/api``: static pages shipped with the package that call
the same HTTP API with the same key (entered once, kept in the browser's session storage).

The pages load no code from elsewhere and build every answer with ``textContent`` (never as markup); their
``Content-Security-Policy`` allows scripts, styles and requests of this origin only. The pages and ``/static/*``
are public, like ``/openapi.json``: they hold no data, and every search they make carries the key.
"""

from __future__ import annotations

from importlib.resources import files

from aiohttp import web

__all__ = ["CONSOLE_CSP", "PUBLIC_PREFIX", "add_console"]

CONSOLE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""What the console's pages may load and call: this origin only."""
PUBLIC_PREFIX = "/static/"
"""The console's assets, served without a key."""

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
_ASSETS = {"console.js", "console.css", "api.js"}


def _page(name: str) -> web.Response:
    body = files("fabric.serve").joinpath("static", name).read_bytes()
    suffix = name[name.rindex(".") :]
    resp = web.Response(body=body, headers={"Content-Type": _TYPES[suffix], "Cache-Control": "no-cache"})
    resp.headers["Content-Security-Policy"] = CONSOLE_CSP
    return resp


async def _index(_request: web.Request) -> web.Response:
    return _page("index.html")


async def _api(_request: web.Request) -> web.Response:
    return _page("api.html")


async def _asset(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in _ASSETS:
        raise web.HTTPNotFound()
    return _page(name)


def add_console(app: web.Application) -> None:
    """Serve the console (``/``), the API reference (``/api``) and their assets (``/static/{name}``)."""
    app.router.add_get("/", _index)
    app.router.add_get("/api", _api)
    app.router.add_get(PUBLIC_PREFIX + "{name}", _asset)
