"""``make bench``: direct mock vs floor proxy vs router, measured in one run.

Starts the mock upstream, the floor proxy (bench/floor.py) and the router on
a one-decision recipe in front of the same mock, then drives all three with
sr-bench at each concurrency, streamed and not, and prints sr-bench's table
(with CPU per request of each server, and the router's CPU over the floor's).
"""
from __future__ import annotations

import argparse
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
    args, extra = parser.parse_known_args(argv)

    with Proc(["-m", "bench.mock_upstream", "--port", "0"], "listening") as mock:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            yaml.safe_dump(router_config(mock.url, args.events, args.plugins), f)
        floor = Proc(["-m", "bench.floor", "--port", "0", "--upstream", mock.url], "listening")
        router = Proc(["-m", "vsr_fast", "serve", "--config", f.name, "--port", "0"], "vsr-fast: serving on")
        with floor, router:
            cmd = [
                sys.executable, "-m", "bench.sr_bench",
                "--direct", mock.url, "--target", f"floor={floor.url}", "--target", f"router={router.url}",
                "--pid", f"direct={mock.popen.pid}", "--pid", f"floor={floor.popen.pid}",
                "--pid", f"router={router.popen.pid}",
                "-c", args.concurrency, "--stream", "both", "-n", str(args.requests), "--model", "mock", *extra,
            ]
            print("$ " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
            return subprocess.run(cmd, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
