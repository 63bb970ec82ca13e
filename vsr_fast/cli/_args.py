"""Argument types for the command lines: a bad number is argparse's usage error (one line, exit 2), not a traceback later."""
from __future__ import annotations

import argparse
import math
from collections.abc import Callable

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def whole(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer in ``[low, high]`` (no upper bound when ``high`` is None)."""

    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
        if n < low or (high is not None and n > high):
            raise argparse.ArgumentTypeError(f"must be {low}-{high}" if high is not None else f"at least {low}")
        return n

    parse.__name__ = "number"
    return parse


def seconds(value: str) -> float:
    """A finite number of seconds, 0 or more."""
    try:
        s = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not math.isfinite(s) or s < 0:
        raise argparse.ArgumentTypeError("must be a finite number of seconds, 0 or more")
    return s


port = whole(0, 65535)


def redis_url(value: str) -> str:
    """A URL redis-py can open (it raises on any other scheme only when the store first connects)."""
    if value.partition("://")[0] not in ("redis", "rediss", "unix") or "://" not in value:
        raise argparse.ArgumentTypeError(f"{value!r} is not a redis://, rediss:// or unix:// URL")
    return value

__all__ = ["LOG_LEVELS", "port", "redis_url", "seconds", "whole"]
