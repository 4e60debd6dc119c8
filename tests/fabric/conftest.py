"""Fixtures shared by the client and framework-integration tests: an ingested home and a live service."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ingested import ingested_home, live_service

# Haystack reports usage over the network from pipeline runs unless told not to (read when haystack is imported).
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")


@pytest.fixture
def fabric_home(tmp_path: Path) -> Path:
    """A tmp home holding the test entries (``tests.support.ingested.ENTRIES``)."""
    return ingested_home(tmp_path)


@pytest.fixture
def service_url(fabric_home: Path) -> Iterator[str]:
    """Base URL of a live service over a copy of ``fabric_home``."""
    with live_service(fabric_home) as url:
        yield url
