"""Tests for :mod:`lanes.vector._payload`: the one payload shape of the vector stores and the hit read back."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

import lanes.vector._payload as mod
from fabric.core.models import SourceKind, Trust
from lanes.vector._payload import chunk_payload, payload_hit
from tests.support.embedded import chunk


def test_public_api() -> None:
    """The module exports the payload writer and reader."""
    assert set(mod.__all__) == {"chunk_payload", "payload_hit"}


class TestRoundTrip:
    def test_chunk_fields_come_back_as_the_hit(self) -> None:
        """A chunk written as a JSON payload reads back as a hit with its fields, date, trust and dedup keys."""
        when = datetime(2021, 5, 4, 12, 0, tzinfo=UTC)
        c = chunk(
            "d1#0", "Blue-green deploys in 2019.", title="Deploys", url="https://ex.org/a", published_at=when,
            trust=Trust.TRUSTED, domain="ex.org",
        )  # fmt: skip
        # a SimHash with the top bit set (stored as a negative signed integer), and stored dedup keys
        c = dataclasses.replace(c, simhash=(1 << 64) - 3, url_key="ex.org/a", title_key="deploys")
        payload = json.loads(json.dumps(chunk_payload(c)))
        hit = payload_hit(payload, 2, 0.75)
        assert (hit.id, hit.rank, hit.score, hit.title, hit.url, hit.domain) == (
            "d1#0", 2, 0.75, "Deploys", "https://ex.org/a", "ex.org"
        )  # fmt: skip
        assert hit.published_at == when
        assert (hit.trust, hit.source_kind, hit.doc_id) == (Trust.TRUSTED, SourceKind.IMPORT, "d1#0")
        assert hit.simhash == (1 << 64) - 3  # stored signed, read back unsigned
        assert (hit.url_key, hit.title_key) == ("ex.org/a", "deploys")
        assert hit.metadata["years"] == sorted(set(c.years))

    def test_a_payload_without_dedup_keys_leaves_them_to_fusion(self) -> None:
        """Keys a point predates (no SimHash, URL or title key, no date) read as absent, not as empty strings."""
        hit = payload_hit({"id": "x", "title": "t"}, 1, 0.1)
        assert (hit.simhash, hit.url_key, hit.title_key, hit.published_at) == (None, None, None, None)
        assert hit.trust is Trust.UNTRUSTED

    def test_a_spoiled_enum_reads_as_the_default(self) -> None:
        """A source kind or trust that is not a member (a lone surrogate added in transit) reads as the default
        (import, untrusted) instead of failing the whole answer."""
        hit = payload_hit({"id": "x", "source_kind": "web\ud800", "trust": "trusted\ud800"}, 1, 0.1)
        assert (hit.source_kind, hit.trust) == (SourceKind.IMPORT, Trust.UNTRUSTED)
        assert payload_hit({"id": "x", "source_kind": "web"}, 1, 0.1).source_kind is SourceKind.WEB


class TestSimhash:
    def test_payload_holds_hex_and_reads_back(self) -> None:
        """The payload keeps the SimHash as 16 hex digits (JSON-exact in Qdrant and numpy_flat) and reads it back."""
        c = dataclasses.replace(chunk("a", "some words here"), simhash=(1 << 64) - 3)
        p = json.loads(json.dumps(chunk_payload(c)))
        assert p["simhash"] == f"{(1 << 64) - 3:016x}"
        assert payload_hit(p, 1, 1.0).simhash == (1 << 64) - 3

    def test_payload_of_an_older_home_reads_its_signed_integer(self) -> None:
        """A point written before one codec holds a signed 64-bit integer; it reads as the unsigned SimHash."""
        p = {**chunk_payload(chunk("a", "some words here")), "simhash": -3}
        assert payload_hit(p, 1, 1.0).simhash == (1 << 64) - 3
        assert payload_hit({**p, "simhash": 4837}, 1, 1.0).simhash == 4837
