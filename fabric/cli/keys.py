"""``fabric keys create|list|revoke|reopen``: the service's API keys, bound to tenants (:mod:`fabric.serve.keys.store`).

``create --tenant NAME [--role reader|writer|admin] [--json]`` prints the key once, alone on stdout (its id, tenant
and role go to stderr, so ``Authorization: Bearer $(fabric keys create ...)`` is a well-formed header; ``--json``
prints all of them as one object); only its hash is stored.
``--token-file PATH`` writes it to a new file (mode 0600) instead, and ``--if-missing`` makes that a no-op when
the file exists (how the compose stack provisions the key Prometheus scrapes with; ``--file-mode 644`` there,
so the Prometheus container's user can read it from the volume only the two services share).
``list [--json]`` shows ids, tenants, roles and dates, never keys; ``revoke KEY_ID`` stops a key (the service
notices within seconds; revoking the last one locks the service, it never reopens it). ``reopen --yes`` is the one
way back to open mode once keys were created: with no key active, it deletes the revoked keys' records and the
marker that keys exist (:mod:`fabric.serve.keys.store`). With ``FABRIC_STATE_URL`` set, the keys live in the
replicas' shared database (:mod:`fabric.serve.keys.postgres`), so every replica sees them; else in
``<home>/keys.sqlite``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    """Add the ``keys`` subcommand and its actions."""
    p: argparse.ArgumentParser = sub.add_parser("keys", help="manage the service's API keys (tenants and roles)")
    actions = p.add_subparsers(dest="keys_action", metavar="ACTION", required=True)
    c = actions.add_parser("create", help="create a key for a tenant and print it once")
    c.add_argument("--tenant", required=True, help="tenant name (a-z, 0-9, '-', '_')")
    c.add_argument("--role", default="reader", choices=("reader", "writer", "admin"), help="default: reader")
    c.add_argument("--token-file", help="write the key to this new file (mode 0600) instead of printing it")
    c.add_argument("--if-missing", action="store_true", help="with --token-file: do nothing when the file exists")
    c.add_argument("--file-mode", default="600", help="with --token-file: octal permissions (default 600)")
    c.add_argument("--json", action="store_true", help="print the key, its id, tenant and role as one JSON object")
    ls = actions.add_parser("list", help="list keys (ids, tenants, roles; never the keys)")
    ls.add_argument("--json", action="store_true", help="print JSON")
    r = actions.add_parser("revoke", help="revoke a key by id")
    r.add_argument("key_id", help="the id shown by create/list")
    o = actions.add_parser("reopen", help="return to open mode (no key needed) once every key is revoked")
    o.add_argument("--yes", action="store_true", help="confirm: every local process becomes tenant default's admin")
    p.set_defaults(func=run)


def _first_key_notice(tenant: str, home: Path | None) -> None:
    """The first key ends open mode: say so, and where the data ingested without a key (tenant ``default``) is."""
    from fabric.core.tenants import DEFAULT_TENANT
    from fabric.ingest.ledger import stored_chunks

    print("fabric: this is the first key: from now on the service answers only requests with a key", file=sys.stderr)
    chunks = stored_chunks(home) if home is not None else 0
    if tenant != DEFAULT_TENANT and chunks:
        print(
            f"fabric: the {chunks} chunks ingested so far belong to tenant 'default' ({home}); tenant {tenant!r} "
            "starts empty. Reach them with a key of tenant 'default' (fabric keys create --tenant default), or "
            f"ingest them again with --tenant {tenant}",
            file=sys.stderr,
        )


def _create(store: Any, args: argparse.Namespace) -> int:
    from fabric.core.errors import ConfigError
    from fabric.serve.keys.store import Role

    target = Path(args.token_file) if args.token_file else None
    if args.if_missing and target is None:
        raise ConfigError("--if-missing needs --token-file")
    try:
        mode = int(args.file_mode, 8)
    except ValueError:
        raise ConfigError(f"--file-mode: expected octal permissions such as 600, got {args.file_mode!r}") from None
    if not 0 <= mode <= 0o777:
        raise ConfigError(f"--file-mode: expected octal permissions such as 600, got {args.file_mode!r}")
    if target is not None and target.exists():
        if args.if_missing:
            return 0
        raise ConfigError(f"{target} exists; refusing to overwrite a key file")
    first = _state(store) == "open"
    record, token = store.create(args.tenant, Role.from_str(args.role))
    if first:
        _first_key_notice(args.tenant, Path(store.path).parent if hasattr(store, "path") else None)
    if target is None:
        if args.json:
            out = {"key": token, "key_id": record.key_id, "tenant": record.tenant, "role": record.role.label}
            print(json.dumps(out), flush=True)
            return 0
        print(token, flush=True)  # alone on stdout: $(fabric keys create ...) is the key
        print(f"key {record.key_id}: tenant {record.tenant}, role {record.role.label} (shown once)", file=sys.stderr)
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token)
    os.chmod(target, mode)
    print(f"key {record.key_id}: tenant {record.tenant}, role {record.role.label}, written to {target}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run one key action on the key store (the replicas' database with ``FABRIC_STATE_URL``, else the home's)."""
    from fabric.cli.search import load_cli_settings
    from fabric.serve.keys.store import KeyStore
    from fabric.serve.state.local import local_folder

    settings = load_cli_settings(args)
    if not settings.state_url or local_folder(settings.state_url) is not None:  # replicas on one host: the home's
        return _act(KeyStore(settings.home), args)
    from fabric.serve.keys.postgres import SharedKeyStore
    from fabric.serve.state.postgres import SharedState

    state = SharedState(settings.state_url, max_size=1)
    state.open_sync()
    try:
        return _act(SharedKeyStore(state.sync), args)
    finally:
        state.sync.close()


def _state(store: Any) -> str:
    """The store's mode (``open``, ``keyed``, ``locked``), or ``unavailable`` (creating a key is how it recovers)."""
    from fabric.serve.keys.store import KeyStoreError

    try:
        return str(store.state().mode)
    except KeyStoreError:
        return "unavailable"


def _reopen(store: Any, args: argparse.Namespace) -> int:
    from fabric.core.errors import ConfigError

    if not args.yes:
        raise ConfigError(
            "fabric keys reopen returns the service to open mode: every request it answers on loopback becomes "
            "tenant 'default' with the admin role, no key needed. Run it again with --yes to confirm"
        )
    removed = store.reopen()
    print(f"open mode: {removed} revoked key record(s) deleted; the service needs no key (within 5 s)")
    return 0


def _act(store: Any, args: argparse.Namespace) -> int:
    if args.keys_action == "create":
        return _create(store, args)
    if args.keys_action == "reopen":
        return _reopen(store, args)
    if args.keys_action == "list":
        records = store.list()
        if args.json:
            print(json.dumps([r.to_dict() for r in records], indent=2))
        elif not records and _state(store) == "open":
            print("no keys (the service runs open, as tenant 'default', on loopback only)")
        elif not any(r.revoked_at is None for r in records):
            print("no active key: the service is locked (fabric keys create, or fabric keys reopen --yes)")
        for r in records if not args.json else ():
            state = f"revoked {r.revoked_at}" if r.revoked_at else "active"
            print(f"{r.key_id}  {r.tenant:<20} {r.role.label:<7} created {r.created_at}  {state}")
        return 0
    if not store.revoke(args.key_id):
        print(f"fabric: error: no active key {args.key_id!r}", file=sys.stderr)
        return 1
    print(f"key {args.key_id} revoked")
    if _state(store) == "locked":
        print(
            "fabric: that was the last active key: the service is now locked (401 on every request) until a key is "
            "created (fabric keys create) or open mode is chosen (fabric keys reopen --yes)",
            file=sys.stderr,
        )
    return 0
