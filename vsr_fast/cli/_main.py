"""``vsr-fast serve``, ``vsr-fast config validate|migrate``, ``vsr-fast route probe`` and ``vsr-fast keys``."""
from __future__ import annotations

import argparse
import logging
import os
import sys

from .. import __version__
from ..routing import load_file
from ..errors import ConfigError
from . import probe
from ._args import LOG_LEVELS, port, redis_url, seconds, whole
from .config_cmd import add_parsers, run_config


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vsr-fast", description="vsr-fast: a semantic router for LLM traffic.")
    p.add_argument("--version", action="version", version=f"vsr-fast {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve the router on a configuration")
    serve.add_argument("--config", required=True, help="v0.5 configuration file (YAML)")
    serve.add_argument("--host", help="overrides the serving listener's address (127.0.0.1 without listeners[])")
    serve.add_argument("--port", type=port, help="overrides the serving listener's port (8080 without listeners[]); "
                                                "0 picks a free port (printed when ready)")
    serve.add_argument("--workers", type=_workers, default=1,
                       help="worker processes sharing the socket; 'auto': one per core this process may use")
    serve.add_argument("--graceful-timeout", type=seconds, default=30.0,
                       help="seconds SIGTERM waits for in-flight requests")
    serve.add_argument("--drain-delay", type=seconds, default=0.0,
                       help="seconds SIGTERM keeps accepting, /ready answering 503, before the drain (0)")
    serve.add_argument("--fd", type=whole(0), help=argparse.SUPPRESS)
    serve.add_argument("--worker-index", type=whole(0), default=0, help=argparse.SUPPRESS)
    serve.add_argument("--metrics-dir", help=argparse.SUPPRESS)
    serve.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, default="WARNING")

    keys = sub.add_parser("keys", help="client keys kept in Redis, shared by every router (global.router.auth.store)")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    for name, doc in (("create", "make a key; prints it once"), ("list", "every stored key, without the keys"),
                      ("revoke", "stop a key on every router (within store.refresh_ms)"),
                      ("rotate", "a new key for the same id; the old one stops at once")):
        k = keys_sub.add_parser(name, help=doc)
        k.add_argument("--config", help="read the store from this file's global.router.auth.store")
        k.add_argument("--redis", type=redis_url,
                       help="the store's Redis URL (default: the config's, else redis://127.0.0.1:6379/0)")
        k.add_argument("--prefix", help="the store's key prefix (default: the config's, else vsr:auth:)")
        if name != "list":
            k.add_argument("id", help="the key's id (a name, never the key)")
        if name == "create":
            for flag in ("user", "team", "tenant"):
                k.add_argument(f"--{flag}")
            k.add_argument("--group", action="append", default=[], help="a group role_bindings may match (repeat)")
            k.add_argument("--entrypoint", action="append", default=[], help="an entrypoint model name it may call "
                                                                             "(repeat; none: all)")
            k.add_argument("--model", action="append", default=[], help="a provider model it may reach (repeat)")
            k.add_argument("--admin", action="store_true", help="may call the admin routes")
            for flag in ("rpm", "tpm", "concurrent"):
                k.add_argument(f"--{flag}", type=whole(1))
            k.add_argument("--budget-tokens", type=whole(1))
            k.add_argument("--budget-period", choices=("minute", "hour", "day", "month"), default="day")
        k.add_argument("--json", action="store_true", help="machine-readable output")

    config = sub.add_parser("config", help="configuration tools")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    add_parsers(config_sub)

    route = sub.add_parser("route", help="routing tools")
    probe.add_parser(route.add_subparsers(dest="route_command", required=True))
    return p


def _workers(value: str) -> int:
    if value == "auto":
        return len(os.sched_getaffinity(0))
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is neither a number nor 'auto'") from None
    if count < 1:
        raise argparse.ArgumentTypeError("at least 1")
    return count


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    args = _parser().parse_args(argv)
    if args.command == "route":
        return probe.run(args)
    if args.command == "config":
        return run_config(args)
    if args.command == "keys":
        from .keys import run_keys

        return run_keys(args)
    return _serve(args)


def _serve(args: argparse.Namespace) -> int:
    from ..server.process import exiting
    from ..server.serve import ServeOptions, run

    logging.basicConfig(level=args.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        loaded = load_file(args.config)
    except ConfigError as exc:
        print(f"vsr-fast: refusing to start: {args.config} does not load", file=sys.stderr)
        for line in exc.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    for line in loaded.warnings:
        print(f"warning: {line}", file=sys.stderr)
    opts = ServeOptions(
        host=args.host, port=args.port, workers=args.workers, fd=args.fd,
        graceful_timeout_s=args.graceful_timeout, drain_delay_s=args.drain_delay,
        config_path=args.config, worker=args.worker_index,
        metrics_dir=args.metrics_dir, settle_heap=True,
    )
    try:
        return run(loaded, opts)
    finally:
        exiting()
