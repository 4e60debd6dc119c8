"""Docs that run: every Python and shell block of README.md and docs/*.md is executed by pytest (sybil).

A block needs what a reader would have: a home holding the test entries (``FABRIC_HOME``) and a ``fabric serve``
over it. The examples name the service ``http://127.0.0.1:8080`` (or ``localhost:8080``); here that address is the
live test service's. Shell blocks run with bash in an empty folder, the checkout's ``.venv/bin`` first on ``PATH``.
A block that cannot run in a test (a benchmark over ``../shared/datasets``, Docker, an install) carries
``<!-- skip: next "why" -->`` right before it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sybil import Example, Sybil
from sybil.evaluators.python import PythonEvaluator
from sybil.parsers.markdown import CodeBlockParser, SkipParser
from sybil.region import Lexeme

ROOT = Path(__file__).resolve().parent
SERVICE = re.compile(r"(?:http://)?(?:127\.0\.0\.1|localhost):8080")


class _Service:
    """The home and live service the examples use, made once for the documents."""

    url = ""
    home = Path()


def _setup(namespace: dict[str, Any]) -> None:
    if not _Service.url:
        from tests.support.ingested import ingested_home, live_service

        folder = Path(tempfile.mkdtemp(prefix="fabric-docs-"))
        _Service.home = ingested_home(folder)
        context = live_service(_Service.home)
        _Service.url = context.__enter__()
        namespace["_service_context"] = context
    namespace["_saved"] = {k: os.environ.get(k) for k in ("FABRIC_HOME", "PATH")}
    namespace["_cwd"] = os.getcwd()
    os.chdir(tempfile.mkdtemp(prefix="fabric-docs-cwd-"))  # what an example writes (./kb) lands in a folder of its own
    os.environ["FABRIC_HOME"] = str(_Service.home)
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"  # `fabric`


def _teardown(namespace: dict[str, Any]) -> None:
    os.chdir(namespace["_cwd"])
    for key, value in namespace.get("_saved", {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _on_service(source: str) -> str:
    return SERVICE.sub(_Service.url, source)


class _Python(PythonEvaluator):
    def __call__(self, example: Example) -> str | None:
        parsed = example.parsed
        example.parsed = Lexeme(_on_service(str(parsed)), parsed.offset, parsed.line_offset)
        return super().__call__(example)


def _shell(example: Example) -> None:
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    with tempfile.TemporaryDirectory(prefix="fabric-docs-sh-") as cwd:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", _on_service(str(example.parsed))],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


pytest_collect_file = Sybil(
    parsers=[
        SkipParser(),
        CodeBlockParser(language="python", evaluator=_Python()),
        CodeBlockParser(language="bash", evaluator=_shell),
        CodeBlockParser(language="sh", evaluator=_shell),
    ],
    patterns=["README.md", "docs/*.md"],
    setup=_setup,
    teardown=_teardown,
).pytest()
