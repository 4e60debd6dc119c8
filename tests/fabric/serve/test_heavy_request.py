"""Fault: heavy requests must not stop the service (issue 42, class 1).

Citation alignment is the most expensive work one request can ask for: the work budget (``fusion.citations``) bounds
it and the service runs it off the event loop, so ``/healthz`` and light requests keep being answered while several
requests at the budget are in flight. Before, an answer of ~1 MiB left ``/healthz`` unanswered for minutes.

The heavy requests run in threads until the light ones are done; the light ones must all answer 200. Timeouts
below are hang guards (a stopped loop never answers), never speed assertions.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import requests

from tests.support.ingested import ingested_home, live_service

pytestmark = pytest.mark.fault

HANG_GUARD_S = 300.0


def _at_the_budget() -> dict[str, object]:
    """An answer of 200 sentences and 100 items of 5 sentences (500 passages): 100,000 sentence-passage pairs, the
    budget."""
    answer = " ".join(f"Rollback step {i} restores the previous release of service {i}." for i in range(200))
    text = " ".join(f"Release {{k}} part {j} can be rolled back in one step." for j in range(5))
    items = [{"id": f"i{k}", "text": text.format(k=k)} for k in range(100)]
    return {"answer": answer[:20_000], "items": items}


def test_health_and_search_answer_while_heavy_cites_run(tmp_path: Path) -> None:
    """Three threads post cite requests at the work budget again and again; meanwhile /healthz and a search answer
    200 each time, and every heavy request ends with 200 (never a 5xx)."""
    home = ingested_home(tmp_path)
    payload = _at_the_budget()
    done = threading.Event()
    heavy: list[int] = []

    with live_service(home) as url:

        def flood() -> None:
            while not done.is_set():
                heavy.append(requests.post(f"{url}/v1/cite", json=payload, timeout=HANG_GUARD_S).status_code)

        threads = [threading.Thread(target=flood, daemon=True) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            for _ in range(5):
                assert requests.get(f"{url}/healthz", timeout=HANG_GUARD_S).status_code == 200
                search = requests.post(f"{url}/v1/search", json={"query": "rollback"}, timeout=HANG_GUARD_S)
                assert search.status_code == 200
        finally:
            done.set()
            for t in threads:
                t.join(HANG_GUARD_S)
    assert heavy, "no heavy request completed"
    assert set(heavy) == {200}
