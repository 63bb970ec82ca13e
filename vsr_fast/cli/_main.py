"""``vsr-fast serve`` and ``vsr-fast config validate``."""
from __future__ import annotations

import argparse
import logging
import os
import sys

from ..routing import load_file
from ..errors import ConfigError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vsr-fast", description="vsr-fast: a semantic router for LLM traffic.")
    sub = p.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve the router on a configuration")
    serve.add_argument("--config", required=True, help="v0.5 configuration file (YAML)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080, help="0 picks a free port (printed when ready)")
    serve.add_argument("--workers", type=_workers, default=1,
                       help="worker processes sharing the socket; 'auto': one per core this process may use")
    serve.add_argument("--graceful-timeout", type=float, default=30.0, help="seconds SIGTERM waits for in-flight requests")
    serve.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    serve.add_argument("--worker-index", type=int, default=0, help=argparse.SUPPRESS)
    serve.add_argument("--log-level", default="WARNING")

    config = sub.add_parser("config", help="configuration tools")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    validate = config_sub.add_parser("validate", help="print every load error and warning; exit 1 on an error")
    validate.add_argument("file")
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
    if args.command == "config":
        return _validate(args.file)
    return _serve(args)


def _validate(path: str) -> int:
    try:
        loaded = load_file(path)
    except ConfigError as exc:
        for line in exc.lines:
            print(f"error: {line}")
        return 1
    for line in loaded.warnings:
        print(f"warning: {line}")
    print(f"ok: {path} loads (config version {loaded.version_hash})")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from ..server.serve import ServeOptions, run

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
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
        graceful_timeout_s=args.graceful_timeout, config_path=args.config, worker=args.worker_index,
    )
    return run(loaded, opts)
