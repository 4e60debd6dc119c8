"""Markets lane over a configured quote endpoint: URL template + JSON field mapping, items with timestamps.

Only *configured* symbols are ever requested: a symbol is looked up when the query names it (or one of its
configured names), and it is substituted URL-encoded into ``url_template``; query text never reaches the URL.
Symbols are fetched concurrently through the shared session. The answer is read with dotted-path ``fields``
(``price`` and ``timestamp`` required; ``name``, ``currency``, ``change`` optional); ``timestamp`` may be
epoch seconds, epoch milliseconds or ISO-8601. A symbol whose fetch fails is dropped when another succeeded.

Options (``lanes.toml``)::

    [lanes.markets]
    kind = "markets"
    backend = "quotes"
    [lanes.markets.options]
    url_template = "https://quotes.example.com/v1/quote?symbol={symbol}"
    symbols = { AAPL = "Apple", MSFT = "Microsoft" }
    fields = { price = "data.price", timestamp = "data.ts", currency = "data.currency", change = "data.change" }
    timeout_s = 2.0

``api_key`` (optional) is sent as ``api_key_header`` (default ``Authorization: Bearer``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fabric.core.errors import ConfigError, LaneBadResponse, LaneError
from fabric.core.models import Hit, LaneRequest, SourceKind
from fabric.net.httpclient import fetch
from lanes._options import LaneOptions
from lanes.base import Backend, BaseLane, LaneResources, LaneSpec
from lanes.web._common import domain_of, parse_time

__all__ = ["BACKEND", "QuotesMarketsLane", "pluck"]


def pluck(data: Any, path: str) -> Any:
    """The value at dotted ``path`` (list indexes allowed: ``quotes.0.price``); None when absent."""
    for part in path.split("."):
        if isinstance(data, Mapping):
            data = data.get(part)
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data


def _padded(text: str) -> str:
    """Lowercase words joined by single spaces, with a space at each end (for whole-phrase containment)."""
    return " " + " ".join(re.findall(r"\w+", text.casefold())) + " "


def _timestamp(value: Any) -> datetime | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value / 1000 if value > 1e11 else value, UTC)
    return parse_time(value)


class QuotesMarketsLane(BaseLane):
    """Configured symbols named in the query → one quote hit each."""

    provider = "quotes"

    def __init__(self, spec: LaneSpec, resources: LaneResources) -> None:
        super().__init__(spec, resources)
        opts = LaneOptions(spec)
        self.url_template = opts.text("url_template")
        if "{symbol}" not in self.url_template:
            raise ConfigError("must contain {symbol}", key=f"lanes.{spec.name}.options.url_template")
        symbols = opts.raw("symbols", {})
        if isinstance(symbols, list):
            symbols = {s: s for s in symbols}
        fields = opts.raw("fields", {})
        if not isinstance(symbols, Mapping) or not symbols:
            raise ConfigError("expected a table SYMBOL = name", key=f"lanes.{spec.name}.options.symbols")
        if not isinstance(fields, Mapping) or not {"price", "timestamp"} <= set(fields):
            raise ConfigError("needs at least price and timestamp paths", key=f"lanes.{spec.name}.options.fields")
        self.symbols = {str(k).upper(): str(v) for k, v in symbols.items()}
        self.fields = {str(k): str(v) for k, v in fields.items()}
        self.timeout_s = opts.number("timeout_s", 3.0)
        key = opts.text("api_key", "")
        header = opts.text("api_key_header", "Authorization")
        self.headers = {header: f"Bearer {key}" if header == "Authorization" else key} if key else {}

    def wanted(self, query: str) -> list[str]:
        """Configured symbols the query names (by ticker or configured name), in configuration order."""
        words = set(re.findall(r"[\w.^-]+", query.upper()))
        text = _padded(query)
        return [s for s, name in self.symbols.items() if s in words or (name and _padded(name) in text)]

    async def _one(self, symbol: str) -> Hit:
        url = self.url_template.replace("{symbol}", quote(symbol, safe=""))
        resp = await fetch(
            self.resources.http,
            "GET",
            url,
            headers=self.headers,
            timeout_s=self.timeout_s,
            lane=self.name,
            provider=self.provider,
            max_bytes=256 * 1024,
        )
        data = resp.json(lane=self.name, provider=self.provider)
        price = pluck(data, self.fields["price"])
        when = _timestamp(pluck(data, self.fields["timestamp"]))
        if not isinstance(price, int | float) or isinstance(price, bool) or when is None:
            raise LaneBadResponse(
                f"quote for {symbol} lacks a numeric price or a timestamp", lane=self.name, provider=self.provider
            )
        extra = {k: pluck(data, p) for k, p in self.fields.items() if k not in ("price", "timestamp")}
        name = extra.get("name") or self.symbols[symbol]
        currency = f" {extra['currency']}" if extra.get("currency") else ""
        change = f", change {extra['change']}" if extra.get("change") is not None else ""
        return Hit(
            id=f"quote:{symbol}",
            rank=0,
            score=1.0,
            title=f"{name} ({symbol}): {price}{currency}",
            text=f"{name} ({symbol}) traded at {price}{currency}{change} as of {when.isoformat()}.",
            url=url,
            domain=domain_of(url),
            published_at=when,
            source_kind=SourceKind.TOOL,
            source_ref=f"quotes:{symbol}",
            metadata={"symbol": symbol, "price": price, **extra},
        )

    async def search(self, request: LaneRequest) -> list[Hit]:
        """Fetch every configured symbol the query names."""
        symbols = self.wanted(request.query)[: request.top_k]
        if not symbols:
            return []
        results = await asyncio.gather(*(self._one(s) for s in symbols), return_exceptions=True)
        hits = [r for r in results if isinstance(r, Hit)]
        errors = [r for r in results if isinstance(r, BaseException)]
        for err in errors:
            if not isinstance(err, LaneError):
                raise err
        if errors and not hits:
            raise errors[0]
        return [
            Hit(**{**{f: getattr(h, f) for f in Hit.__dataclass_fields__}, "rank": i + 1}) for i, h in enumerate(hits)
        ]


BACKEND = Backend(
    name="quotes", lane=QuotesMarketsLane, env={"FABRIC_QUOTES_API_KEY": "api_key"}, secrets=frozenset({"api_key"})
)
"""A JSON quote API addressed by ``url_template``."""
