"""Tests of the BEIR, Markdown and JSONL loaders."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric.core.chunks import from_stored_simhash, to_stored_simhash
from fabric.core.errors import IngestError
from fabric.core.models import SourceKind, Trust
from fabric.ingest.loaders import LoadedSource, detect_format, finalize, finalize_all, load_source
from fusion.simhash import simhash64
from fusion.text import title_key


def _beir(tmp_path: Path) -> Path:
    d = tmp_path / "beirset"
    d.mkdir()
    rows = [{"_id": "10", "title": "T1", "text": "About 2020."}, {"_id": "11", "title": "", "text": "Two."}]
    (d / "corpus.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    return d


class TestDetect:
    def test_formats_are_detected(self, tmp_path: Path) -> None:
        """corpus.jsonl folders are BEIR, other folders Markdown, .jsonl files JSONL."""
        assert detect_format(_beir(tmp_path)) == "beir"
        (tmp_path / "notes").mkdir()
        assert detect_format(tmp_path / "notes") == "markdown"
        (tmp_path / "e.jsonl").write_text("")
        assert detect_format(tmp_path / "e.jsonl") == "jsonl"

    def test_missing_path_is_an_ingest_error(self, tmp_path: Path) -> None:
        """A path that does not exist raises IngestError naming it."""
        with pytest.raises(IngestError, match="does not exist"):
            detect_format(tmp_path / "nope")

    def test_unknown_format_is_an_ingest_error(self, tmp_path: Path) -> None:
        """An unknown --format value lists the valid ones."""
        with pytest.raises(IngestError, match="valid: beir, markdown, jsonl"):
            load_source(_beir(tmp_path), "csv")


class TestBeir:
    def test_ids_are_beir_ids(self, tmp_path: Path) -> None:
        """One chunk per document; id, doc_id and chunk_id are the BEIR _id; imports are untrusted."""
        src = load_source(_beir(tmp_path))
        c = src.chunks[0]
        assert (c.id, c.doc_id, c.chunk_id) == ("10", "10", "10")
        assert c.trust is Trust.UNTRUSTED
        assert c.source_kind is SourceKind.IMPORT
        assert finalize(c).years == (2020,)


class TestMarkdown:
    def test_ids_provenance_and_dates(self, tmp_path: Path) -> None:
        """doc_id is source + relative path, id is doc_id#chunk_id, dates come from the file name."""
        root = tmp_path / "docs"
        (root / "decisions").mkdir(parents=True)
        (root / "decisions" / "2026-10-14-x.md").write_text("# Use X\n\nBecause.\n")
        c = finalize(load_source(root).chunks[0])
        assert c.doc_id == "docs:decisions/2026-10-14-x.md"
        assert c.id == "docs:decisions/2026-10-14-x.md#use-x-0"
        assert c.published_at == datetime(2026, 10, 14, tzinfo=UTC)
        assert c.trust is Trust.TRUSTED
        assert c.source_kind is SourceKind.OPERATOR
        assert c.source_ref == "docs/decisions/2026-10-14-x.md"
        assert c.quality is not None
        assert c.content_hash

    def test_frontmatter_overrides_trust(self, tmp_path: Path) -> None:
        """Front matter trust/source_kind override the operator default."""
        (tmp_path / "n.md").write_text("---\ntrust: untrusted\nsource_kind: web\n---\n# N\n\ntext\n")
        c = load_source(tmp_path).chunks[0]
        assert c.trust is Trust.UNTRUSTED
        assert c.source_kind is SourceKind.WEB

    def test_bad_frontmatter_value_names_the_field(self, tmp_path: Path) -> None:
        """An invalid trust value raises IngestError naming file and field."""
        (tmp_path / "n.md").write_text("---\ntrust: maybe\n---\n# N\n\ntext\n")
        with pytest.raises(IngestError, match="trust"):
            load_source(tmp_path)


class TestJsonl:
    def test_fields_are_read(self, tmp_path: Path) -> None:
        """id, title, text, url, published_at, source_kind and trust are read; domain from url."""
        p = tmp_path / "e.jsonl"
        row = {"id": "e1", "title": "T", "text": "x", "url": "https://www.example.org/a",
               "published_at": "2024-05-01", "source_kind": "web", "trust": "untrusted"}  # fmt: skip
        p.write_text(json.dumps(row) + "\n")
        c = finalize(load_source(p).chunks[0])
        assert c.domain == "example.org"
        assert c.published_at == datetime(2024, 5, 1, tzinfo=UTC)
        assert c.source_kind is SourceKind.WEB

    def test_missing_field_names_line_and_field(self, tmp_path: Path) -> None:
        """A row without text raises IngestError with file:line and the field."""
        p = tmp_path / "e.jsonl"
        p.write_text(json.dumps({"id": "a", "text": "x"}) + "\n" + json.dumps({"id": "b"}) + "\n")
        with pytest.raises(IngestError, match=r"e.jsonl:2: missing field text"):
            load_source(p)

    @pytest.mark.parametrize(
        "url", ["javascript:alert(1)", "data:text/html,<b>x</b>", "JavaScript:alert(1)", "file:///etc/passwd",
                "/relative/path", "https://", "ftp://example.org/x", "http://exa mple.org/\n"],
    )  # fmt: skip
    def test_non_http_urls_are_refused(self, tmp_path: Path, url: str) -> None:
        """Only absolute http(s) URLs with a host are accepted; the error names line and field."""
        p = tmp_path / "e.jsonl"
        p.write_text(json.dumps({"id": "a", "text": "x", "url": url}) + "\n")
        with pytest.raises(IngestError, match=r"e.jsonl:1: url: expected an absolute http\(s\) URL"):
            load_source(p)

    def test_future_dates_are_kept_as_given(self, tmp_path: Path) -> None:
        """A publication date in the future is accepted as given (no JSON Schema can say "not after now"); fusion's
        recency counts it as age 0."""
        p = tmp_path / "e.jsonl"
        p.write_text(json.dumps({"id": "a", "text": "x", "published_at": "2999-01-01"}) + "\n")
        assert load_source(p).chunks[0].published_at == datetime(2999, 1, 1, tzinfo=UTC)

    def test_future_front_matter_date_is_kept(self, tmp_path: Path) -> None:
        """Markdown front matter dates obey the same rule."""
        (tmp_path / "n.md").write_text("---\ndate: 2999-01-01\n---\n# N\n\nx\n")
        assert load_source(tmp_path / "n.md").chunks[0].published_at == datetime(2999, 1, 1, tzinfo=UTC)

    def test_invalid_json_names_the_line(self, tmp_path: Path) -> None:
        """Malformed JSON raises IngestError with the line number."""
        p = tmp_path / "e.jsonl"
        p.write_text("{nope\n")
        with pytest.raises(IngestError, match=r"e.jsonl:1: invalid JSON"):
            load_source(p)


class TestFeatures:
    def test_dedup_features_computed_once_at_ingest(self, tmp_path: Path) -> None:
        """finalize stores the SimHash, URL key and title key fusion compares, as fusion computes them."""
        p = tmp_path / "e.jsonl"
        row = {
            "id": "a",
            "title": "The Cat  sat",
            "text": "A cat sat on the mat.",
            "url": "https://www.x.org/a/?utm_source=z",
        }
        p.write_text(json.dumps(row) + "\n")
        c = finalize(load_source(p).chunks[0])
        assert (c.simhash, c.url_key, c.title_key) == (simhash64(row["text"]), "x.org/a", title_key("sat the cat"))

    def test_batch_matches_one_by_one(self, tmp_path: Path) -> None:
        """finalize_all (one SimHash batch) gives the same chunks, content hashes included, as finalize."""
        chunks = load_source(_beir(tmp_path)).chunks
        assert finalize_all(chunks) == [finalize(c) for c in chunks]

    def test_features_are_in_the_content_hash(self, tmp_path: Path) -> None:
        """A chunk whose stored features differ (an older ingestion) is rewritten: its content hash differs."""
        c = load_source(_beir(tmp_path)).chunks[0]
        assert finalize(c).content_hash != finalize(c, simhash=None).content_hash

    def test_stored_simhash_is_hex(self) -> None:
        """SimHashes are stored as 16 hex digits (the one codec) and read back unchanged."""
        for value in (0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1):
            assert from_stored_simhash(to_stored_simhash(value)) == value
        assert (to_stored_simhash(None), from_stored_simhash(None), from_stored_simhash("x")) == (None, None, None)


class TestJsonlTriples:
    def test_triples_kept_in_metadata(self, tmp_path: Path) -> None:
        """A JSONL entry's triples reach the chunk (the graph writer stores them as directed edges)."""
        path = tmp_path / "e.jsonl"
        row = {
            "id": "e1",
            "text": "Alpha Corp bought Beta Labs.",
            "triples": [[" Alpha Corp", "acquired", "Beta Labs"]],
        }
        path.write_text(json.dumps(row) + "\n")
        chunk = load_source(path).chunks[0]
        assert chunk.metadata["triples"] == [["Alpha Corp", "acquired", "Beta Labs"]]

    @pytest.mark.parametrize("triples", [[["a", "b"]], "a b c", [["a", "", "c"]], [[1, 2, 3]]])
    def test_malformed_triples_refused_naming_the_line(self, tmp_path: Path, triples: object) -> None:
        path = tmp_path / "e.jsonl"
        path.write_text(json.dumps({"id": "e1", "text": "t", "triples": triples}) + "\n")
        with pytest.raises(IngestError, match=r"e\.jsonl:1: triples"):
            load_source(path)


_JSON_LINE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["id", "text", "title", "url", "published_at", "trust", "source_kind", "x"]),
            inner,
            max_size=5,
        )
    ),
    max_leaves=10,
)


class TestJsonlFuzz:
    @settings(max_examples=150, deadline=None)
    @given(lines=st.lists(st.binary(max_size=80) | _JSON_LINE.map(lambda v: json.dumps(v).encode()), max_size=5))
    def test_any_jsonl_file_loads_or_is_an_ingest_error(self, tmp_path_factory: pytest.TempPathFactory,
                                                        lines: list[bytes]) -> None:  # fmt: skip
        """Random bytes and random JSON values per line: a loaded source (one chunk per entry) or an IngestError
        naming the file, never another exception."""
        path = tmp_path_factory.mktemp("fuzz") / "in.jsonl"
        path.write_bytes(b"\n".join(line.replace(b"\n", b" ") for line in lines) + b"\n")
        outcome: object
        try:
            outcome = load_source(path, "jsonl")
        except IngestError as exc:
            outcome = exc
        if isinstance(outcome, IngestError):
            assert str(path) in str(outcome)
        else:
            assert isinstance(outcome, LoadedSource)
            assert outcome.docs == len(outcome.chunks) <= len(lines)


class TestAuthor:
    """The bibliography's author (fabric.core.sources): kept in the chunks' metadata at ingest."""

    def test_markdown_front_matter_author(self, tmp_path: Path) -> None:
        """front matter ``author:`` is kept on every chunk of the note; a note without one has none."""
        (tmp_path / "a.md").write_text("---\ntitle: A\nauthor: Ada Lovelace\n---\n# A\n\nOne.\n\n## B\n\nTwo.\n")
        (tmp_path / "b.md").write_text("# B\n\nThree.\n")
        chunks = load_source(tmp_path).chunks
        got = {(c.doc_id.split(":")[1], c.metadata.get("author")) for c in chunks}
        assert got == {("a.md", "Ada Lovelace"), ("b.md", None)}

    def test_jsonl_author(self, tmp_path: Path) -> None:
        """A JSONL entry's ``author`` string is kept; anything else names line and field."""
        p = tmp_path / "e.jsonl"
        p.write_text(json.dumps({"id": "a", "text": "x", "author": " Grace Hopper "}) + "\n")
        assert load_source(p).chunks[0].metadata == {"author": "Grace Hopper"}
        p.write_text(json.dumps({"id": "a", "text": "x", "author": ["G"]}) + "\n")
        with pytest.raises(IngestError, match=r"e.jsonl:1: author: expected a non-empty string"):
            load_source(p)
