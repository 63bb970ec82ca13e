"""``make bench``: direct mock vs floor proxy vs router, measured in one run.

Starts the mock upstream, the floor proxy (bench/floor.py) and the router on
a one-decision recipe in front of the same mock, then drives all three with
sr-bench at each concurrency, streamed and not, and prints sr-bench's table
(with CPU per request of each server, and the router's CPU over the floor's).
"""
from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile

import yaml

from ._procs import ROOT, Proc


# The four request plugins that rewrite the provider-bound request, as a decision would carry them.
SHAPING_PLUGINS = [
    {"type": "system_prompt", "configuration": {"mode": "insert", "system_prompt": "Answer briefly."}},
    {"type": "header_mutation", "configuration": {"add": [{"name": "x-tenant-tier", "value": "bench"}]}},
    {"type": "request_params", "configuration": {
        "max_tokens_limit": 1024, "generation": {"thinking": False, "max_tokens": 512}}},
    {"type": "prompt_cache", "configuration": {"enabled": True}},
]


def router_config(mock_url: str, events: str = "embedded", plugins: bool = False) -> dict:
    """A recipe with one decision, static algorithm, in front of the mock; ``plugins``: the four shaping ones."""
    decision = {"name": "all", "rules": {"operator": "AND", "conditions": []}, "modelRefs": [{"model": "bench-model"}]}
    if plugins:
        decision["plugins"] = SHAPING_PLUGINS
    return {
        "global": {"stores": {"event_stream": {"backend": events}}},
        "version": "v0.5",
        "providers": {"models": [{"name": "bench-model", "provider_model_id": "mock",
                                  "backend_refs": [{"endpoint": f"{mock_url}/v1"}]}]},
        "recipes": [{"name": "default", "decisions": [decision]}],
        "entrypoints": [{"api": "chat", "model_names": ["mock"], "recipe": "default", "default": True}],
    }


# ``--auth``: sr-bench's key (``--api-key``), declared by its SHA-256, with limits far above what the run sends,
# kept in Redis: every request pays the key check, one admission script and one release script.
BENCH_KEY = "sk-bench"
AUTH_LIMITS = {"rpm": 10_000_000, "tpm": 10_000_000_000, "concurrent": 100_000}


def with_auth(doc: dict, redis_url: str) -> dict:
    """``doc`` with client keys on and the bench key's limits shared through Redis."""
    import hashlib
    import uuid

    store = {"backend": "redis", "url": redis_url, "prefix": f"vsr-bench-auth-{uuid.uuid4().hex[:8]}:"}
    key = {"id": "bench", "sha256": hashlib.sha256(BENCH_KEY.encode()).hexdigest(), "team": "bench",
           "limits": AUTH_LIMITS}
    router = {"auth": {"enabled": True, "keys": [key], "store": store},
              "rate_limits": {"teams": {"bench": {"rpm": 10_000_000}}}}
    return {**doc, "global": {**doc["global"], "router": router}}


def main(argv: list[str] | None = None) -> int:
    """Run the comparison; extra arguments go to sr-bench."""
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__)
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=1, help="router worker processes")
    parser.add_argument("--events", choices=["embedded", "redis", "none"], default="embedded",
                        help="the router's event stream backend (none: nothing recorded)")
    parser.add_argument("--plugins", action="store_true",
                        help="configure system_prompt, header_mutation, request_params and prompt_cache on the decision")
    parser.add_argument("--auth", action="store_true",
                        help="a second router with client keys and key + team limits in Redis (router+auth), "
                             "beside the one without")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="the Redis --auth shares limits in")
    args, extra = parser.parse_known_args(argv)

    with Proc(["-m", "bench.mock_upstream", "--port", "0"], "listening") as mock:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            yaml.safe_dump(router_config(mock.url, args.events, args.plugins), f)
        floor = Proc(["-m", "bench.floor", "--port", "0", "--upstream", mock.url], "listening")
        router = Proc(["-m", "vsr_fast", "serve", "--config", f.name, "--port", "0"], "vsr-fast: serving on")
        keyed = None
        if args.auth:
            with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as g:
                yaml.safe_dump(with_auth(router_config(mock.url, args.events, args.plugins), args.redis), g)
            keyed = Proc(["-m", "vsr_fast", "serve", "--config", g.name, "--port", "0"], "vsr-fast: serving on")
        with floor, router, (keyed or contextlib.nullcontext()):
            targets = ["--target", f"floor={floor.url}", "--target", f"router={router.url}"]
            pids = ["--pid", f"direct={mock.popen.pid}", "--pid", f"floor={floor.popen.pid}",
                    "--pid", f"router={router.popen.pid}"]
            if keyed is not None:
                targets += ["--target", f"router+auth={keyed.url}"]
                pids += ["--pid", f"router+auth={keyed.popen.pid}"]
            cmd = [
                sys.executable, "-m", "bench.sr_bench", "--direct", mock.url, *targets, *pids,
                "-c", args.concurrency, "--stream", "both", "-n", str(args.requests), "--model", "mock",
                "--api-key", BENCH_KEY, *extra,
            ]
            print("$ " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
            return subprocess.run(cmd, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
