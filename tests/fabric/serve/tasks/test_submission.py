"""Validation of POST /v1/ingest bodies: shapes, the allowed root, fingerprints, spooling through the loader."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fabric.serve.tasks.submission as mod
from fabric.core.errors import ConfigError
from fabric.ingest.loaders import load_source
from fabric.serve.tasks.submission import (
    Submission,
    SubmitError,
    check_operator_fields,
    parse_submission,
    resolve_root,
    spool_entries,
)
from fabric.settings import IngestConfig

CFG = IngestConfig()


class TestEntries:
    def test_fingerprint_ignores_the_async_flag(self) -> None:
        """The async flag does not change a body's identity; the entries do."""
        body = {"entries": [{"id": "a", "text": "t"}]}
        plain = parse_submission(body, CFG, None).fingerprint
        assert parse_submission({**body, "async": True}, CFG, None).fingerprint == plain
        assert parse_submission({"entries": [{"id": "b", "text": "t"}]}, CFG, None).fingerprint != plain

    def test_too_many_entries(self) -> None:
        """More than max_entries entries is a 400 on entries."""
        with pytest.raises(SubmitError, match="at most 2"):
            parse_submission(
                {"entries": [{"id": str(i), "text": "t"} for i in range(3)]}, IngestConfig(max_entries=2), None
            )

    def test_spool_round_trips_through_the_jsonl_loader(self, tmp_path: Path) -> None:
        """Spooled entries load with the JSONL loader, keeping ids, dates and trust."""
        entries = [
            {"id": "e-42", "title": "Deploy", "text": "Blue-green.", "published_at": "2024-05-01", "trust": "trusted"}
        ]
        sub = parse_submission({"entries": entries}, CFG, None)
        path = tmp_path / "spool" / "x" / "api.jsonl"
        spool_entries(sub, path)
        chunk = load_source(path, "jsonl").chunks[0]
        assert (chunk.id, chunk.trust.value, chunk.published_at is not None) == ("e-42", "trusted", True)

    def test_spool_reports_the_entry_index(self, tmp_path: Path) -> None:
        """A loader refusal names entries[i], not the spool file."""
        sub = parse_submission({"entries": [{"id": "a", "text": "t", "published_at": "May"}]}, CFG, None)
        with pytest.raises(SubmitError) as err:
            spool_entries(sub, tmp_path / "api.jsonl")
        assert err.value.field == "entries[0]"
        assert str(tmp_path) not in err.value.message


class TestPaths:
    def test_relative_path_resolves_under_root(self, tmp_path: Path) -> None:
        """A relative path is taken from the root, and its format is detected."""
        (tmp_path / "notes").mkdir()
        sub = parse_submission({"path": "notes"}, CFG, tmp_path)
        assert (sub.kind, sub.path, sub.fmt, sub.requested_path) == ("path", tmp_path / "notes", "markdown", "notes")

    def test_dotdot_escape_is_403(self, tmp_path: Path) -> None:
        """``..`` out of the root is refused before anything is read."""
        root = tmp_path / "root"
        root.mkdir()
        with pytest.raises(SubmitError) as err:
            parse_submission({"path": "sub/../../x"}, CFG, root)
        assert err.value.status == 403

    def test_missing_path_is_400(self, tmp_path: Path) -> None:
        """A path under the root that does not exist is a 400."""
        with pytest.raises(SubmitError) as err:
            parse_submission({"path": "nope.jsonl"}, CFG, tmp_path)
        assert (err.value.status, err.value.field) == (400, "path")

    def test_unknown_format_file_is_400(self, tmp_path: Path) -> None:
        """A file whose format cannot be told answers 400 on format, without the server path."""
        (tmp_path / "data.bin").write_bytes(b"\0")
        with pytest.raises(SubmitError) as err:
            parse_submission({"path": "data.bin"}, CFG, tmp_path)
        assert err.value.field == "format"
        assert str(tmp_path) not in err.value.message


class TestResolveRoot:
    def test_empty_root_disables_paths(self) -> None:
        """No root configured: None."""
        assert resolve_root(IngestConfig()) is None

    def test_missing_root_names_key(self, tmp_path: Path) -> None:
        """A root that is not a folder fails naming ingest.allowed_root."""
        with pytest.raises(ConfigError, match=r"ingest\.allowed_root"):
            resolve_root(IngestConfig(allowed_root=str(tmp_path / "missing")))


class TestOperatorFields:
    @pytest.mark.parametrize(("field", "value"), [("trust", "trusted"), ("source_kind", "operator"),
                                                  ("trust", " Trusted ")])  # fmt: skip
    def test_writer_cannot_claim_operator_trust(self, field: str, value: str) -> None:
        """An entry claiming operator trust is refused with 403 naming entries[i].<field>."""
        body = {"entries": [{"id": "a", "text": "t"}, {"id": "b", "text": "t", field: value}]}
        with pytest.raises(SubmitError) as err:
            check_operator_fields(parse_submission(body, CFG, None), allowed=False)
        assert (err.value.status, err.value.field) == (403, f"entries[1].{field}")

    def test_untrusted_entries_pass_and_admin_may_claim(self) -> None:
        """Untrusted imports pass for a writer; an admin may mark entries trusted."""
        plain = parse_submission({"entries": [{"id": "a", "text": "t", "trust": "untrusted"}]}, CFG, None)
        check_operator_fields(plain, allowed=False)
        trusted = parse_submission({"entries": [{"id": "a", "text": "t", "trust": "trusted"}]}, CFG, None)
        check_operator_fields(trusted, allowed=True)

    def test_path_needs_admin(self, tmp_path: Path) -> None:
        """A path submission (operator files on the server) is refused for a writer."""
        (tmp_path / "n.md").write_text("# N\n\nx\n")
        sub = parse_submission({"path": "n.md"}, CFG, tmp_path)
        with pytest.raises(SubmitError) as err:
            check_operator_fields(sub, allowed=False)
        assert (err.value.status, err.value.field) == (403, "path")


def test_public_api() -> None:
    """The module exports the parser, the spooler and their types."""
    assert set(mod.__all__) == {
        "IDEMPOTENCY_KEY_PATTERN",
        "OPERATOR_FIELDS",
        "check_provenance",
        "check_operator_fields",
        "SPOOL_NAME",
        "Submission",
        "SubmitError",
        "parse_submission",
        "resolve_root",
        "spool_entries",
    }


_ENTRY_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_FIELDS = st.sampled_from(["id", "text", "title", "url", "published_at", "trust", "source_kind", "extra"])


class TestSubmissionFuzz:
    @settings(max_examples=150, deadline=None)
    @given(body=st.dictionaries(st.sampled_from(["entries", "path", "format", "async", "x"]), _ENTRY_VALUE, max_size=3)
           | st.lists(st.dictionaries(_FIELDS, _ENTRY_VALUE, max_size=5), min_size=1, max_size=4).map(
               lambda es: {"entries": es}))  # fmt: skip
    def test_any_body_is_a_submission_or_a_submit_error(self, tmp_path_factory: pytest.TempPathFactory,
                                                        body: dict[str, object]) -> None:  # fmt: skip
        """Random bodies through validation and the JSONL loader (spooling): a Submission or a SubmitError naming
        a field, with a 4xx status; never another exception."""
        spool = tmp_path_factory.mktemp("spool") / "api.jsonl"
        outcome: object
        try:
            outcome = parse_submission(body, CFG, None)
            if outcome.kind == "entries":
                spool_entries(outcome, spool)
        except SubmitError as exc:
            outcome = exc
        if isinstance(outcome, SubmitError):
            assert outcome.field
            assert 400 <= outcome.status < 500
        else:
            assert isinstance(outcome, Submission)
            assert outcome.kind in ("entries", "path")
