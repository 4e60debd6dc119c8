"""A bounded schemathesis run against the live service on loopback: every documented operation, with a key and
without one, every built-in check of schemathesis, zero failures.

Generated cursors are sent as generated: the document states their form, and one of that form that another query
issued answers the documented 409 (``tests/fabric/serve/test_protocol.py``).

The service is the real app (``fabric serve``'s, MCP transport aside) over a tmp home holding six entries, the
embedded stores and the bag-of-words embedder, with API keys configured (so requests without a key must answer
the documented 401). Cases are generated from ``GET /openapi.json`` as served. The run is bounded by example
counts (``EXAMPLES`` per operation and key mode), never by time; the figure is printed (``-s``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric.serve.keys.store import KeyStore, Role
from tests.support.ingested import ingested_home, live_service

schemathesis = pytest.importorskip("schemathesis")

EXAMPLES = 12
"""Generated cases per operation and key mode."""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The live service's base URL and an admin key of its home."""
    home = ingested_home(tmp_path_factory.mktemp("schemathesis"))
    _record, key = KeyStore(home).create("acme", Role.ADMIN)
    with live_service(home) as url:
        yield url, key


def _operations(url: str) -> list[Any]:
    """The operations of the document as served, with schemathesis' stock checks and accepted answers (no override:
    every request body's schema is its validator's model, ``POST /v1/ingest``'s entries included)."""
    document = requests.get(f"{url}/openapi.json", timeout=30).json()
    schema = schemathesis.openapi.from_dict(document)
    return [result.ok() for result in schema.get_all_operations()]


def _explore(
    op: Any, url: str, headers: dict[str, str], session: requests.Session, counts: dict[str, int], failures: list[str]
) -> Any:
    """The bounded hypothesis run of one operation: each case is sent and validated; failures are collected."""
    label = f"{op.method.upper()} {op.path}"

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        case = data.draw(op.as_strategy())
        counts[label] += 1
        try:
            case.call_and_validate(base_url=url, session=session, headers=headers)
        except (Exception, BaseExceptionGroup) as exc:  # a failed check: collected, so every operation runs
            failures.append(f"{label}: {type(exc).__name__}: {str(exc)[:700]}")

    return run


@pytest.mark.parametrize("with_key", [True, False], ids=["with-key", "without-key"])
def test_every_operation_conforms(service: tuple[str, str], with_key: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """Each operation's generated cases pass every check; the figure (operations x cases, failures) is printed."""
    url, key = service
    headers = {"Authorization": f"Bearer {key}"} if with_key else {}
    operations = _operations(url)
    assert len(operations) >= 11
    counts: dict[str, int] = {}
    failures: list[str] = []
    session = requests.Session()

    for op in operations:
        counts[f"{op.method.upper()} {op.path}"] = 0
        _explore(op, url, headers, session, counts, failures)()
    with capsys.disabled():
        print(f"\nschemathesis {'with' if with_key else 'without'} key: {len(counts)} operations x "
              f"{sum(counts.values())} cases, {len(failures)} failures")  # fmt: skip
    assert all(n > 0 for n in counts.values()), counts
    assert failures == [], "\n".join(failures[:10])
