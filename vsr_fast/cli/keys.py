"""``vsr-fast keys create|list|revoke|rotate``: client keys in the shared store.

A key is printed once, by ``create`` and ``rotate``; the store keeps only its
SHA-256, so ``list`` shows ids and identities, never keys.
"""
from __future__ import annotations

import argparse
import json
import sys

import msgspec
import redis

from ..auth.keys import KeyFields
from ..auth.store import KeyStore
from ..config.auth import AuthStore, Budget, Limits
from ..config.auth_checks import key_name_errors
from ..config.schema import RouterConfig
from ..errors import ConfigError
from ..routing import load_file


def _store(args: argparse.Namespace) -> tuple[AuthStore, RouterConfig | None]:
    """The store to use, and the configuration it is for (None without ``--config``)."""
    store, config = AuthStore(backend="redis"), None
    if args.config:
        config = load_file(args.config).config
        store = config.global_.router.auth.store
    overrides = {k: v for k, v in (("url", args.redis), ("prefix", args.prefix)) if v}
    return msgspec.structs.replace(store, backend="redis", **overrides), config


def run_keys(args: argparse.Namespace) -> int:
    try:
        store_config, config = _store(args)
    except ConfigError as exc:
        return _errors(exc.lines)
    if args.keys_command == "create" and config is not None:
        if any(k.id == args.id for k in config.global_.router.auth.keys):
            # Two secrets of one id would share its identity and its limits' windows.
            print(f"vsr-fast keys: {args.id!r} is declared in {args.config} (global.router.auth.keys[{args.id}]); "
                  f"choose another id", file=sys.stderr)
            return 1
        # Names the configuration does not declare are refused as its loader refuses them in a declared key:
        # a restricted key must not be made with a name that reaches nothing, or the default recipe.
        unknown = key_name_errors(config, args.entrypoint, args.model, f"keys[{args.id}]")
        if unknown:
            return _errors(unknown)
    store = KeyStore(store_config)
    try:
        return _run(store, args)
    except redis.RedisError as exc:
        print(f"vsr-fast keys: the key store did not answer: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    finally:
        store.close()


def _errors(lines: list[str]) -> int:
    for line in lines:
        print(f"error: {line}", file=sys.stderr)
    return 2


def _run(store: KeyStore, args: argparse.Namespace) -> int:
    cmd = args.keys_command
    if cmd == "create":
        budget = Budget(tokens=args.budget_tokens, period=args.budget_period) if args.budget_tokens else None
        limits = Limits(rpm=args.rpm, tpm=args.tpm, concurrent=args.concurrent, budget=budget)
        try:
            key = store.create(KeyFields(id=args.id, user=args.user, team=args.team, tenant=args.tenant,
                                         groups=args.group, entrypoints=args.entrypoint, models=args.model,
                                         admin=args.admin, limits=limits))
        except ValueError as exc:
            print(f"vsr-fast keys: {exc}", file=sys.stderr)
            return 1
        _print_key(args, key)
        return 0
    if cmd == "rotate":
        try:
            key = store.rotate(args.id)
        except KeyError:
            print(f"vsr-fast keys: no key with id {args.id!r}", file=sys.stderr)
            return 1
        _print_key(args, key)
        return 0
    if cmd == "revoke":
        if not store.revoke(args.id):
            print(f"vsr-fast keys: no key with id {args.id!r}", file=sys.stderr)
            return 1
        print(f"revoked {args.id}")
        return 0
    rows = [msgspec.to_builtins(k) for k in store.list()]
    if args.json:
        print(json.dumps(rows))
    else:
        for row in rows:
            print(row["id"], " ".join(f"{k}={v}" for k, v in row.items() if k not in ("id", "sha256")))
    return 0


def _print_key(args: argparse.Namespace, key: str) -> None:
    if args.json:
        print(json.dumps({"id": args.id, "key": key}))
    else:
        print(key)
