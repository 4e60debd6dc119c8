"""``fabric config show [--json]``: the effective settings, key by key, and where each came from.

The sources, lowest first: the built-in defaults (``fabric/config/*.toml``), the ``--profile`` overlay, the user's
settings file in the platform's config folder, ``--config`` / ``FABRIC_CONFIG``, then the environment. Secrets
show as ``<set>``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``config`` subcommand with its ``show`` action."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "config", help="show the effective settings and where each came from"
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="print every effective setting with its source")
    show.add_argument("--json", action="store_true", help="one JSON object: the sources and every setting")
    show.set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from fabric.settings import setting_layers
    from fabric.settings.explain import explain_settings
    from fabric.settings.paths import user_config_file

    env = dict(os.environ)
    if getattr(args, "home", None):
        env["FABRIC_HOME"] = str(args.home)
    config = Path(args.config) if getattr(args, "config", None) else None
    kw: dict[str, Any] = {"user_file": config, "profile": getattr(args, "profile", None), "env": env}
    rows = explain_settings(**kw)
    sources = [label for label, _ in setting_layers(**kw)]
    if args.json:
        out = {"sources": sources, "user_config_file": str(user_config_file()), "settings": [r.to_dict() for r in rows]}
        print(json.dumps(out, indent=2))
        return 0
    print("# sources, lowest first: " + (", ".join(sources) or "none"))
    print(f"# your settings file: {user_config_file()}" + ("" if user_config_file().is_file() else " (absent)"))
    for row in rows:
        print(f"{row.key} = {json.dumps(row.value)}  # {row.source}")
    return 0
