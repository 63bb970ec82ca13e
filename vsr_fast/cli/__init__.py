"""The ``vsr-fast`` command line: ``serve`` and ``config validate``."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code. ``serve`` sets its signals' start-up meanings first
    (server.process): the imports below take seconds, in which SIGHUP's default action ended the process."""
    args = sys.argv[1:] if argv is None else argv
    if next((a for a in args if not a.startswith("-")), None) == "serve":
        from ..server.process import hold_signals

        hold_signals()
    from ._main import main as run

    return run(argv)


__all__ = ["main"]
