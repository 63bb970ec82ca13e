"""The ``vsr-fast`` command line: ``serve`` and ``config validate``."""
from __future__ import annotations

import gc
import sys


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code. ``serve`` sets its signals' start-up meanings first
    (server.process): the imports below take seconds, in which SIGHUP's default action ended the process."""
    args = sys.argv[1:] if argv is None else argv
    if next((a for a in args if not a.startswith("-")), None) == "serve":
        from ..server.process import hold_signals

        hold_signals()
        # Start-up makes ~a million objects that live as long as the process (imports, the configuration, the
        # model's vocabularies); the cyclic collector scanned them again and again for nothing (~20 % of a
        # router's start-up CPU). heap.settle() turns it back on once the router serves, after freezing them.
        gc.disable()
    from ._main import main as run

    try:
        return run(argv)
    finally:
        gc.enable()


__all__ = ["main"]
