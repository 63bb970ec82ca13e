"""The router (``python -m tests.faulty_charge serve ...``) whose key usage charge raises: the limiter's shared
counts gone bad, as a store that fails mid-write would leave them. For the accounting's failure path
(``pipeline.run.accounted``): no request's own bytes reach it, so no client can make it fail on its own."""
from __future__ import annotations

import sys

from vsr_fast.auth.limits import Limiter
from vsr_fast.cli import main


class ChargeFailed(RuntimeError):
    """What the charge raises: named, so a test finds its traceback in the router's log."""


def _done(self, ticket, tokens, *, counted=True):
    raise ChargeFailed(f"the key usage store refused the charge of {tokens} tokens")


if __name__ == "__main__":
    Limiter.done = _done
    sys.exit(main())
