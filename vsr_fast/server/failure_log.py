"""A failure any request or connection can repeat (a defect its bytes reach, a part that broke): logged at ERROR
with its traceback at most once a minute, saying how many went unlogged between, so a client repeating it cannot
flood the log."""
from __future__ import annotations

import logging
import math
import time


class FailureLog:
    """Logs ``what`` happened, with the traceback, at most once every ``every_s``."""

    def __init__(self, log: logging.Logger, what: str, every_s: float = 60.0) -> None:
        self.log, self.what, self.every_s = log, what, every_s
        self.last, self.unlogged = -math.inf, 0

    def report(self, error: BaseException) -> None:
        now = time.monotonic()
        if now - self.last < self.every_s:
            self.unlogged += 1
            return
        self.last, unlogged, self.unlogged = now, self.unlogged, 0
        self.log.error("%s (%d more since the last of these)", self.what, unlogged, exc_info=error)
