"""Tests for fabric.core.globs: the path globs of ingestion's allowlist and trust rules."""

from __future__ import annotations

import pytest

from fabric.core.globs import PathGlob


@pytest.mark.parametrize(
    ("glob", "path", "expected"),
    [
        ("**/decisions/**", "decisions/a.md", True),
        ("**/decisions/**", "team/decisions/sub/a.md", True),
        ("**/decisions/**", "decisionsx/a.md", False),
        ("**/DECISION*.md", "DECISION-001.md", True),
        ("**/DECISION*.md", "adr/DECISION-001.md", True),
        ("**/DECISION*.md", "adr/decision-001.md", False),  # case sensitive
        ("*.md", "a.md", True),
        ("*.md", "sub/a.md", False),  # "*" stays within one folder name
        ("**/*.md", "sub/deeper/a.md", True),
        ("decisions", "decisions/a.md", True),  # a folder covers what is under it
        ("decisions", "old/decisions/a.md", False),  # from the root only
        ("./notes/", "notes/n.md", True),
        ("notes/?.md", "notes/a.md", True),
        ("notes/[ab].md", "notes/c.md", False),
        ("notes/[!ab].md", "notes/c.md", True),
        ("spec*", "specs/api.md", True),
    ],
)
def test_matches_relative_paths(glob: str, path: str, expected: bool) -> None:
    """``*``/``?``/``[]`` within a name, ``**`` across folders, a matched folder covers its files."""
    assert PathGlob(glob).matches(path) is expected


@pytest.mark.parametrize(
    ("glob", "message"),
    [
        ("", "empty glob"),
        ("/etc/notes", "not absolute paths"),
        ("C:/notes", "not absolute paths"),
        ("../other/**", "'..' leaves the ingested folder"),
        ("a**/b", "'**' must be a whole folder name"),
        ("notes/[ab.md", "unclosed '['"),
    ],
)
def test_refuses_globs_that_cannot_mean_a_path_under_the_folder(glob: str, message: str) -> None:
    """A glob that is empty, absolute, escapes the folder or is malformed is a ValueError saying why."""
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("*", r"\*")):
        PathGlob(glob)
