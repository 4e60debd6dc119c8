"""Where a framework retriever gets its results: an in-process :class:`~fabric.query.engine.Engine` or a remote service.

:class:`FabricSource` answers ``search(query)`` (blocking) and ``asearch(query)`` (async) with a
:class:`~fabric.client.SearchPage`, whichever side it talks to:

- ``FabricSource(engine=engine)``: an engine you give (if it is not open yet, the source opens it on first use
  and closes it in :meth:`close` / :meth:`aclose`);
- ``FabricSource(settings=settings)``: an engine the source owns (built and opened on first use; :meth:`close`);
- ``FabricSource(base_url="http://127.0.0.1:8080")`` or ``FabricSource(client=FabricClient(...))``: a remote
  ``fabric serve`` through :class:`~fabric.client.FabricClient`.

Event loops: the engine and the HTTP session live on the loop where the source is first used. Async calls
made on that loop run directly. Blocking calls (LangChain's ``invoke``, LlamaIndex's ``retrieve``, Haystack's
``run``) made first, outside any running loop, start a private loop thread that then serves every call, async
ones included (they are handed to it). A blocking call made from inside the loop that owns the engine would
deadlock, so it raises instead: use the framework's async method there.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Self, TypeVar

from fabric.client import FabricClient, PageItem, SearchPage, search_body
from fabric.core.errors import FabricError
from fabric.query.engine import Engine
from fabric.query.validation import parse_request
from fabric.settings import Settings

__all__ = ["FabricSource", "SearchParams", "SourceConstructors", "item_metadata", "request_params"]

T = TypeVar("T")

SearchParams = Mapping[str, Any]
"""Request fields besides ``query`` (``limit``, ``weights``, ``fusion``, ``mode``, ``lanes``, ...)."""


class FabricSource:
    """One engine or one remote service, behind blocking and async ``search`` (see the module docstring)."""

    def __init__(
        self,
        *,
        engine: Engine | None = None,
        settings: Settings | None = None,
        client: FabricClient | None = None,
        base_url: str | None = None,
    ) -> None:
        given = [x for x in (engine, settings, client, base_url) if x is not None]
        if len(given) != 1:
            raise FabricError("FabricSource: give exactly one of engine, settings, client or base_url")
        self._owns_engine = settings is not None
        self._checked_engine = False
        self.engine = Engine(settings) if settings is not None else engine
        self.client = FabricClient(base_url) if base_url is not None else client
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    API_KEY_ENV = "FABRIC_API_KEY"
    """Where a source read back by :meth:`from_dict` finds the service's API key (a key is never serialised)."""

    def to_dict(self) -> dict[str, Any]:
        """What rebuilds this source elsewhere (a serialised pipeline): the service's URL and headers without the
        API key, or the home of the engine."""
        if self.client is not None:
            headers = {k: v for k, v in self.client.headers.items() if k.lower() != "authorization"}
            keyed = len(headers) != len(self.client.headers)
            return {"url": self.client.base_url, "headers": headers, "api_key_env": self.API_KEY_ENV if keyed else None}
        assert self.engine is not None
        return {"home": str(self.engine.settings.home)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FabricSource:
        """The source :meth:`to_dict` describes (the API key from ``api_key_env``, settings as ``fabric.open``).

        Raises:
            FabricError: a description of neither a service nor a home.
        """
        import os

        from fabric.api import open_settings

        if "url" in data:
            env = data.get("api_key_env")
            key = os.environ.get(str(env)) if env else None
            client = FabricClient(str(data["url"]), api_key=key, headers=dict(data.get("headers") or {}))
            return cls(client=client)
        if "home" in data:
            return cls(settings=open_settings(str(data["home"])))
        raise FabricError("FabricSource.from_dict: expected 'url' (a service) or 'home' (an engine)")

    @property
    def remote(self) -> bool:
        """True when the source talks to a service over HTTP."""
        return self.client is not None

    async def _search(self, query: str, params: SearchParams) -> SearchPage:
        if self.client is not None:
            return await self.client.search(query, **dict(params))
        assert self.engine is not None
        request = parse_request(search_body(query, **dict(params)), self.engine.settings)  # bad input opens nothing
        if not self._checked_engine:  # an engine the source opens is one it closes
            self._checked_engine = True
            self._owns_engine = self._owns_engine or not self.engine.health()["open"]
        await self.engine.open()  # idempotent
        result = await self.engine.search(request)
        return SearchPage.from_result(result)

    def _thread_loop(self) -> asyncio.AbstractEventLoop:
        """The private loop thread, started on first need."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=loop.run_forever, name="fabric-source", daemon=True)
                self._thread.start()
                self._loop = loop
            return self._loop

    def _bind(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            if self._loop is None:
                self._loop = loop

    async def _on_home(self, coro: Coroutine[Any, Any, T]) -> T:
        running = asyncio.get_running_loop()
        self._bind(running)
        if self._loop is running:
            return await coro
        if self._thread is not None:
            assert self._loop is not None
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))
        coro.close()
        raise FabricError("this fabric source is bound to another event loop; use it from the loop it first ran on")

    def _blocking(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        loop = self._loop if self._loop is not None else self._thread_loop()
        if loop is running:
            coro.close()
            raise FabricError(
                "a blocking retriever call from inside the event loop that runs the engine would deadlock; "
                "use the async method (ainvoke / aretrieve / run_async)"
            )
        if self._thread is None and (loop.is_closed() or not loop.is_running()):
            coro.close()
            raise FabricError("this fabric source is bound to an event loop that is no longer running")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    async def asearch(self, query: str, **params: Any) -> SearchPage:
        """Search (async); ``params`` are request fields (``limit``, ``weights``, ``fusion``, ``mode``, ...).

        Raises:
            QueryError: invalid request (the engine's or the service's message).
            FabricError: the source cannot be used from here (another loop) or the service failed.
        """
        return await self._on_home(self._search(query, params))

    def search(self, query: str, **params: Any) -> SearchPage:
        """Search (blocking); see :meth:`asearch`."""
        return self._blocking(self._search(query, params))

    async def _close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
        if self.engine is not None and self._owns_engine:
            await self.engine.aclose()

    async def aclose(self) -> None:
        """Close what the source owns (its engine, its client's session) and stop its loop thread."""
        if self._loop is None:
            return
        await self._on_home(self._close())
        self._stop_thread()

    def close(self) -> None:
        """Blocking :meth:`aclose`."""
        if self._loop is None:
            return
        if self._thread is not None:
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result()
            self._stop_thread()
        else:
            raise FabricError("this fabric source runs on your event loop: await its aclose() there")

    def _stop_thread(self) -> None:
        if self._thread is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()
            self._thread = None
            self._loop = None


def item_metadata(item: PageItem, page: SearchPage) -> dict[str, Any]:
    """What every adapter puts in a document's metadata: id, the score ledger, lanes and lane status."""
    return {
        "id": item.id,
        "title": item.title,
        "url": item.url,
        "published_at": item.published_at,
        "score_total": item.score_total,
        "score_lexical": item.score_lexical,
        "score_semantic": item.score_semantic,
        "score_graph": item.score_graph,
        "contributions": dict(item.contributions),
        "scores": dict(item.scores),
        "lanes": list(item.lanes),
        "ranks": dict(item.ranks),
        "graph_hops": item.graph_hops,
        "lane_status": page.lane_status(),
        "total": page.total,
        "next_cursor": page.next_cursor,
        "trace_id": page.trace_id,
    }


def request_params(
    *,
    limit: int | None,
    weights: Mapping[str, float] | None,
    fusion: str | None,
    mode: str | None,
    lanes: Sequence[str] | None,
) -> dict[str, Any]:
    """The request fields an adapter passes on (None left out)."""
    params = {
        "limit": limit,
        "weights": dict(weights) if weights is not None else None,
        "fusion": fusion,
        "mode": mode,
        "lanes": list(lanes) if lanes is not None else None,
    }
    return {k: v for k, v in params.items() if v is not None}


class SourceConstructors:
    """The three ways every framework retriever is built, around a :class:`FabricSource` passed as ``source=``."""

    @classmethod
    def _over(cls, source: FabricSource, kw: Mapping[str, Any]) -> Self:
        build: Callable[..., Self] = cls  # every retriever takes its source as ``source=``
        return build(source=source, **kw)

    @classmethod
    def from_engine(cls, engine: Engine, **kw: Any) -> Self:
        """Over an engine you give (opened on first use when it is not open)."""
        return cls._over(FabricSource(engine=engine), kw)

    @classmethod
    def from_settings(cls, settings: Settings, **kw: Any) -> Self:
        """Over an engine the retriever owns (close it with ``retriever.source.close()``)."""
        return cls._over(FabricSource(settings=settings), kw)

    @classmethod
    def from_url(
        cls,
        base_url: str,
        *,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 60.0,
        **kw: Any,
    ) -> Self:
        """Over a remote ``fabric serve``: ``api_key`` (sent as a bearer token) for a service with keys, ``headers``
        added to every request."""
        client = FabricClient(base_url, api_key=api_key, headers=headers, timeout_s=timeout_s)
        return cls._over(FabricSource(client=client), kw)
