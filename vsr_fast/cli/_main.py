"""``vsr-fast serve``, ``vsr-fast config validate|migrate``, ``vsr-fast route probe`` and ``vsr-fast keys``."""
from __future__ import annotations

import argparse
import logging
import sys

from ._parser import parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    args = parser().parse_args(argv)
    # Each command's modules are imported once it is chosen (the argument tree needs none of them).
    if args.command == "route":
        from . import probe

        return probe.run(args)
    if args.command == "config":
        from .config_cmd import run_config

        return run_config(args)
    if args.command == "keys":
        from .keys import run_keys

        return run_keys(args)
    return _serve(args)


def _serve(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..routing import load_file
    from ..server.process import exiting
    from ..server.serve import ServeOptions, run

    logging.basicConfig(level=args.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        loaded = load_file(args.config)
    except ConfigError as exc:
        print(f"vsr-fast: refusing to start: {args.config} does not load", file=sys.stderr)
        for line in exc.shown:
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
