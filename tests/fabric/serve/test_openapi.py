"""The OpenAPI document tells the truth about the validators: every documented field, closed set and limit is
what :func:`fabric.query.validation.validate_body` (the search body's model), :func:`fabric.serve.tasks.submission.
parse_submission` and the data routes enforce, and every route of the app is documented (and nothing else)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import fabric.serve.openapi as mod
from fabric.core.errors import QueryError
from fabric.query.engine import Engine
from fabric.query.validation import KNOWN_KEYS, MAX_BUDGET_MS, MAX_WEIGHT, validate_body
from fabric.serve.openapi import build_openapi, search_schema
from fabric.serve.service import create_app
from fabric.serve.tasks.submission import IDEMPOTENCY_KEY_PATTERN, SubmitError, parse_submission
from fabric.settings import Settings, load_settings
from lanes.base import LaneResources


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The default settings over a tmp home."""
    return load_settings(env={"FABRIC_HOME": str(tmp_path / "home")})


def _accepts(settings: Settings, **fields: Any) -> bool:
    try:
        validate_body({"query": "q", **fields}, settings)
    except QueryError:
        return False
    return True


class TestSearchSchema:
    def test_every_accepted_key_is_documented(self, settings: Settings) -> None:
        """The documented properties are exactly parse_request's keys; anything else is refused."""
        schema = search_schema(settings)
        assert set(schema["properties"]) == set(KNOWN_KEYS)
        assert schema["additionalProperties"] is False
        assert not _accepts(settings, colour="red")

    def test_closed_sets_match(self, settings: Settings) -> None:
        """Every documented enum value is accepted, and a value outside it refused."""
        defs: dict[str, Any] = {}
        props = search_schema(settings, defs)["properties"]
        sets: dict[str, list[str]] = {k: props[k]["enum"] for k in ("mode", "fusion", "route")}
        constraints = defs[props["constraints"]["$ref"].rsplit("/", 1)[1]]["properties"]
        sets |= {f"constraints.{k}": v["enum"] for k, v in constraints.items() if "enum" in v}
        for name, values in sets.items():
            for value in values:
                field = {name: value} if "." not in name else {"constraints": {name.split(".")[1]: value}}
                assert _accepts(settings, **field), (name, value)
            bad = {name: "zzz"} if "." not in name else {"constraints": {name.split(".")[1]: "zzz"}}
            assert not _accepts(settings, **bad), name
        for lane in props["lanes"]["items"]["enum"]:
            assert _accepts(settings, lanes=[lane])
        assert not _accepts(settings, lanes=["no-such-lane"])

    def test_limits_are_the_validators(self, settings: Settings) -> None:
        """Each documented bound is accepted and one step past it refused."""
        props = search_schema(settings)["properties"]
        top = props["top_k"]["maximum"]
        assert top == settings.engine.max_top_k
        assert _accepts(settings, top_k=top)
        assert not _accepts(settings, top_k=top + 1)
        assert not _accepts(settings, top_k=props["top_k"]["minimum"] - 1)
        assert props["budget_ms"]["maximum"] == MAX_BUDGET_MS
        assert _accepts(settings, budget_ms=MAX_BUDGET_MS)
        assert not _accepts(settings, budget_ms=MAX_BUDGET_MS + 1)
        assert not _accepts(settings, budget_ms=0)
        assert props["weights"]["additionalProperties"]["maximum"] == MAX_WEIGHT
        assert _accepts(settings, weights={"semantic": MAX_WEIGHT})
        assert not _accepts(settings, weights={"semantic": MAX_WEIGHT + 0.5})
        with pytest.raises(QueryError, match="malformed"):
            validate_body({"query": "q", "cursor": "c" * 40}, settings)
        limit = props["query"]["maxLength"]
        assert limit * 4 == settings.engine.max_query_bytes
        assert _accepts(settings, query="\U0001f600" * limit)  # 4 UTF-8 bytes each: the byte limit exactly
        with pytest.raises(QueryError, match="too long"):
            validate_body({"query": "q" * (limit + 1)}, settings)

    def test_blank_pattern_matches_the_validator(self, settings: Settings) -> None:
        """A query the NOT_BLANK pattern refuses is refused, and one it accepts is accepted."""
        for text in (" ", "\x1c", "\x85", "\t\n", "a", " a "):
            documented = re.search(mod.NOT_BLANK, text) is not None
            assert _accepts(settings, query=text) is documented, repr(text)

    def test_integers_may_be_written_as_whole_floats(self, settings: Settings) -> None:
        """JSON Schema counts 3.0 as an integer; so does the validator."""
        assert validate_body({"query": "q", "top_k": 3.0}, settings).top_k == 3
        assert not _accepts(settings, top_k=3.5)


class TestIngestSchema:
    def test_bodies_and_limits(self, settings: Settings, tmp_path: Path) -> None:
        """Documented keys, formats and the entry count limit are parse_submission's."""
        variants = build_openapi(settings)["components"]["schemas"]["IngestRequest"]["oneOf"]
        entries, path = variants
        documented = set(entries["properties"]) | set(path["properties"])
        assert documented == {"entries", "path", "format", "async", "include", "exclude"}
        cfg = settings.ingest.__class__(max_entries=2)
        one = [{"id": "a", "text": "t"}]
        assert parse_submission({"entries": one * 2}, cfg, None).count == 2
        with pytest.raises(SubmitError, match="at most 2"):
            parse_submission({"entries": one * 3}, cfg, None)
        assert entries["properties"]["entries"]["maxItems"] == settings.ingest.max_entries
        for fmt in entries["properties"]["format"]["enum"]:
            parse_submission({"entries": one, "format": fmt}, settings.ingest, None)
        with pytest.raises(SubmitError):
            parse_submission({"entries": one, "format": "beir"}, settings.ingest, None)
        with pytest.raises(SubmitError):
            parse_submission({"entries": one, "extra": 1}, settings.ingest, None)

    def test_idempotency_key_pattern(self) -> None:
        """Visible ASCII, inner spaces allowed, at most 255 characters."""
        assert re.fullmatch(IDEMPOTENCY_KEY_PATTERN, "batch 1")
        assert re.fullmatch(IDEMPOTENCY_KEY_PATTERN, "k" * 255)
        for bad in ("", " x", "x ", "k" * 256, "clé"):
            assert re.fullmatch(IDEMPOTENCY_KEY_PATTERN, bad) is None, bad


CONSOLE = {("get", "/"), ("get", "/api"), ("get", "/static/{name}")}
"""The search console's pages and assets (HTML, JavaScript, CSS): public, and not operations of the JSON API."""


class TestRoutes:
    def test_every_route_is_documented(self, settings: Settings) -> None:
        """The app's routes (the MCP transport and the console's pages aside) and the document's operations are the
        same set."""
        engine = Engine(settings, resources=LaneResources(home=settings.home))
        app = create_app(engine, mcp=False)
        routes = set()
        for route in app.router.routes():
            info = route.resource.get_info() if route.resource is not None else {}
            path = info.get("path") or info.get("formatter")
            if route.method != "HEAD" and path:
                routes.add((route.method.lower(), path))
        doc = build_openapi(settings)
        documented = {(m, p) for p, ops in doc["paths"].items() for m in ops}
        assert routes - CONSOLE == documented

    def test_public_operations_are_the_guards(self, settings: Settings) -> None:
        """Operations documented without security are exactly the guard's public paths."""
        from fabric.serve.auth import PUBLIC_PATHS

        doc = build_openapi(settings)
        public = {p for p, ops in doc["paths"].items() for op in ops.values() if op.get("security") == []}
        assert public == PUBLIC_PATHS - {path for _, path in CONSOLE}

    def test_guarded_operations_document_401_and_403(self, settings: Settings) -> None:
        """Every guarded operation documents the guard's answers."""
        doc = build_openapi(settings)
        for path, ops in doc["paths"].items():
            for op in ops.values():
                if op.get("security") != []:
                    assert {"401", "403", "429"} <= set(op["responses"]), path


def test_document_is_openapi_3_1(settings: Settings) -> None:
    """The version, the bearer scheme and JSON-serialisable content."""
    import json

    doc = build_openapi(settings)
    assert doc["openapi"] == "3.1.0"
    assert doc["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert json.loads(json.dumps(doc)) == doc


def test_public_api() -> None:
    """The module's exports."""
    assert "build_openapi" in mod.__all__
    assert "search_schema" in mod.__all__
