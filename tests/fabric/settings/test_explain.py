"""``fabric config show``'s rows: every effective setting and the layer it came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabric.cli import main
from fabric.settings.explain import explain_settings
from fabric.settings.paths import default_config_dir


def _rows(**kw: object) -> dict[str, tuple[object, str]]:
    return {r.key: (r.value, r.source) for r in explain_settings(**kw)}  # type: ignore[arg-type]


def test_each_key_names_its_source(tmp_path: Path) -> None:
    """A key from a built-in file names that file; a dataclass default says so; a user file and the environment
    name themselves; the platform folders say they are the platform's."""
    user = tmp_path / "mine.toml"
    user.write_text("schema = 1\n[fusion]\nrrf_k = 40\n")
    rows = _rows(env={"FABRIC_CONFIG": str(user), "FABRIC__engine__max_top_k": "55"})
    assert rows["fusion.rrf_k"] == (40, str(user))
    assert rows["engine.max_top_k"] == (55, "env")
    assert rows["lanes.keyword.backend"] == ("sqlite_fts", str(default_config_dir() / "lanes.toml"))
    assert rows["home"][1] == "platform default"
    assert any(source == "built-in default" for _, source in rows.values())


def test_secrets_are_never_printed() -> None:
    """A service secret from the environment shows as set, with the variable it came from."""
    env = {"FABRIC_QDRANT_URL": "http://qdrant.internal:6333", "FABRIC_QDRANT_API_KEY": "s3cret-value"}
    rows = _rows(profile="compose", env=env)
    assert rows["lanes.vector.options.api_key"] == ("<set>", "env FABRIC_QDRANT_API_KEY")
    assert rows["lanes.vector.options.url"] == ("http://qdrant.internal:6333", "env FABRIC_QDRANT_URL")
    assert "s3cret-value" not in json.dumps([r.to_dict() for r in explain_settings(profile="compose", env=env)])


def test_config_show_command(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI prints the sources and one line a key; --json gives the same as an object."""
    monkeypatch.setenv("FABRIC_QDRANT_API_KEY", "another-secret")
    assert main(["--profile", "compose", "config", "show"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# sources, lowest first: ")
    assert 'lanes.vector.backend = "qdrant"  # ' in out
    assert "another-secret" not in out
    assert main(["config", "show", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["sources"][0].endswith("modes.toml")
    assert {"key", "value", "source"} == set(body["settings"][0])
