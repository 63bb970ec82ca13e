"""The ``vsr-fast`` argument tree, apart from the commands: building it imports no command's modules, so
``--version``, ``--help`` and argparse's refusals answer before the router's imports (seconds) would start."""
from __future__ import annotations

import argparse
import os

from .. import __version__
from ._args import LOG_LEVELS, port, redis_url, seconds, whole

ROUTE_FACTS = ("recipe", "decision", "algorithm")


def parser() -> argparse.ArgumentParser:
    """Every command's arguments; parsing them imports nothing more."""
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
    _config_parsers(config_sub)

    route = sub.add_parser("route", help="routing tools")
    _probe_parser(route.add_subparsers(dest="route_command", required=True))
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


def _config_parsers(config_sub) -> None:
    """The ``config`` subcommands."""
    validate = config_sub.add_parser("validate", help="print every load error and warning; exit 1 on an error")
    validate.add_argument("file")
    validate.add_argument("--format", choices=("text", "json"), default="text",
                          help="json: one object with errors and warnings, each split into path, code and message")
    m = config_sub.add_parser("migrate", help="rewrite an earlier configuration (v0.3, v0.4) as v0.5, with notes")
    m.add_argument("file")
    m.add_argument("-o", "--output", help="where to write the v0.5 file (default: <file>.migrated.yaml next to it)")
    m.add_argument("--force", action="store_true", help="overwrite the output file if it exists")
    m.add_argument("--notes", choices=("text", "json"), default="text", help="how the notes are printed (stderr)")


def _probe_parser(sub) -> None:
    """``route probe`` on the ``route`` subcommand's subparsers."""
    p = sub.add_parser("probe", help="send prompts through the routing and check where they go")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", help="route in this process, on this configuration")
    where.add_argument("--endpoint", help="a running router's base URL (its preview route answers)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--prompt", help="one user turn")
    what.add_argument("--probes", help="a probes file (*.probes.yaml): variants grouped by decision")
    p.add_argument("--model", default="auto", help="the model name asked for (default: auto; a probes "
                                                   "group's own model wins)")
    for fact in ROUTE_FACTS:
        p.add_argument(f"--expect-{fact}", help=f"the {fact} every probe must get (over the probes file's)")
    p.add_argument("--debug", action=argparse.BooleanOptionalAction, default=True,
                   help="ask for x-vsr-trace and put it in the receipts (default: on)")
    p.add_argument("--api-key", help="a key for a router with client keys (the preview is an admin route)")
    p.add_argument("--concurrency", type=whole(1), default=4, help="probes in flight at once (default 4)")
    p.add_argument("--json", action="store_true", help="print the receipts and the summary as JSON")


__all__ = ["ROUTE_FACTS", "parser"]
