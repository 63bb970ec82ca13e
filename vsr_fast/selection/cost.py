"""What an answer cost: its usage (every protocol's shape, whole or streamed) times its model's pricing.

An executor sums the cost of every call it made; the answer carries the total as
x-vsr-cost (whole answers; a stream's headers leave before its usage), and the
metric and the record get it once the answer ended. Usage is read from the
upstream's own bytes: Chat's ``usage`` (a stream's final chunk with
``include_usage``), Messages' ``message_start`` / ``message_delta``, Responses'
``response.completed``. An answer that reports no usage is priced at the router's estimate of it (four bytes
a token of the request's and the answer's text, ``auth.usage``), as docs/config.md's ``stream_usage`` says.
"""
from __future__ import annotations

import msgspec

from ..config.schema import Pricing, ProviderModel
from ..protocol.sse import MarkedLines
from ..protocol.usage import USAGE_DOC, WireUsage

_MARK = b'"usage"'


class Tokens:
    """One call's token counts; a stream's later usage replaces its earlier (Messages reports output so far)."""

    __slots__ = ("input", "output", "cached", "seen")

    def __init__(self) -> None:
        self.input = self.output = self.cached = 0
        self.seen = False

    @classmethod
    def estimated(cls, given: int, taken: int) -> "Tokens":
        """The router's estimate (input, output) of an answer that reported no usage."""
        tokens = cls()
        tokens.input, tokens.output, tokens.seen = given, taken, True
        return tokens

    def read(self, doc: bytes) -> None:
        try:
            d = USAGE_DOC.decode(doc)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        for u in d.usages():
            self._take(u)

    def _take(self, u: WireUsage) -> None:
        self.seen = True
        # Messages' input written to its cache is priced as input (a pricing block has no price of its own for
        # it: Anthropic's is 1.25x).
        inp = u.input or 0
        if inp:
            self.input, self.cached = inp, u.cached
        out = u.completion_tokens or u.output_tokens
        if out:
            self.output = out


def price(pricing: Pricing, tokens: Tokens) -> float:
    """The cost of ``tokens`` at ``pricing`` (per million tokens); cached input at its own price."""
    cached_price = pricing.input if pricing.cached is None else pricing.cached
    fresh = max(0, tokens.input - tokens.cached)
    return (fresh * pricing.input + tokens.cached * cached_price + tokens.output * pricing.output) / 1_000_000


class StreamUsage:
    """Reads the usage lines of an SSE stream cut anywhere (only lines that mention ``"usage"`` are decoded)."""

    __slots__ = ("tokens", "lines")

    def __init__(self) -> None:
        self.tokens = Tokens()
        self.lines = MarkedLines(_MARK)

    def feed(self, chunk: bytes) -> None:
        for line in self.lines.feed(chunk):
            if line.startswith(b"data:"):
                self.tokens.read(line[5:])


class Tally:
    """The cost of one request's calls, summed; None until a priced call reported usage."""

    __slots__ = ("total", "currency", "calls", "usage")

    def __init__(self) -> None:
        self.total: float | None = None
        self.currency: str | None = None
        self.calls: list[tuple[str, float]] = []     # (model, cost) per priced call, for the metric
        # (input, output) of every call that reported usage, priced or not: what a failed Looper run spent.
        self.usage: tuple[int, int] | None = None

    def add(self, model: ProviderModel, tokens: Tokens) -> None:
        if tokens.seen:
            before = self.usage or (0, 0)
            self.usage = (before[0] + tokens.input, before[1] + tokens.output)
        if model.pricing is None or not tokens.seen:
            return
        cost = price(model.pricing, tokens)
        self.total = (self.total or 0.0) + cost
        # One currency per answer: a decision's priced models share one (checked at load).
        self.currency = self.currency or model.pricing.currency
        self.calls.append((model.name, cost))

    def add_whole(self, model: ProviderModel, body: bytes, estimate=None) -> None:
        """A whole answer's cost; ``estimate(body)``, (input, output), prices one that reports no usage."""
        if model.pricing is None:      # the hot path of an unpriced model decodes nothing
            return
        tokens = Tokens()
        tokens.read(body)
        if not tokens.seen and estimate is not None:
            tokens = Tokens.estimated(*estimate(body))
        self.add(model, tokens)

    def header_value(self) -> str | None:
        return None if self.total is None else f"{self.total:.10f}".rstrip("0").rstrip(".") or "0"
