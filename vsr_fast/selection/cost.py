"""What an answer cost: its usage (every protocol's shape, whole or streamed) times its model's pricing.

An executor sums the cost of every call it made; the answer carries the total as
x-vsr-cost (whole answers; a stream's headers leave before its usage), and the
metric and the record get it once the answer ended. Usage is read from the
upstream's own bytes: Chat's ``usage`` (a stream's final chunk with
``include_usage``), Messages' ``message_start`` / ``message_delta``, Responses'
``response.completed``. An answer that reports no usage has no cost.
"""
from __future__ import annotations

import msgspec

from ..config.schema import Pricing, ProviderModel
from ..protocol.sse import MarkedLines

_MARK = b'"usage"'


class _Details(msgspec.Struct):
    cached_tokens: int = 0


class _Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0                     # Messages: cached input, counted apart from input_tokens
    prompt_tokens_details: _Details | None = None        # Chat: cached tokens are part of prompt_tokens
    input_tokens_details: _Details | None = None         # Responses: the same


class _Inner(msgspec.Struct):
    usage: _Usage | None = None


class _Doc(msgspec.Struct):
    usage: _Usage | None = None
    message: _Inner | None = None
    response: _Inner | None = None


_DECODE = msgspec.json.Decoder(_Doc)


class Tokens:
    """One call's token counts; a stream's later usage replaces its earlier (Messages reports output so far)."""

    __slots__ = ("input", "output", "cached", "seen")

    def __init__(self) -> None:
        self.input = self.output = self.cached = 0
        self.seen = False

    def read(self, doc: bytes) -> None:
        try:
            d = _DECODE.decode(doc)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        for u in (d.usage, d.message and d.message.usage, d.response and d.response.usage):
            if u is not None:
                self._take(u)

    def _take(self, u: _Usage) -> None:
        self.seen = True
        inp = u.prompt_tokens or u.input_tokens
        details = u.prompt_tokens_details or u.input_tokens_details
        cached = details.cached_tokens if details is not None else 0
        if u.cache_read_input_tokens:
            cached, inp = u.cache_read_input_tokens, inp + u.cache_read_input_tokens
        if inp:
            self.input, self.cached = inp, cached
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

    __slots__ = ("total", "currency", "calls")

    def __init__(self) -> None:
        self.total: float | None = None
        self.currency: str | None = None
        self.calls: list[tuple[str, float]] = []     # (model, cost) per priced call, for the metric

    def add(self, model: ProviderModel, tokens: Tokens) -> None:
        if model.pricing is None or not tokens.seen:
            return
        cost = price(model.pricing, tokens)
        self.total = (self.total or 0.0) + cost
        # One currency per answer: a decision's priced models share one (checked at load).
        self.currency = self.currency or model.pricing.currency
        self.calls.append((model.name, cost))

    def add_whole(self, model: ProviderModel, body: bytes) -> None:
        if model.pricing is None:      # the hot path of an unpriced model decodes nothing
            return
        tokens = Tokens()
        tokens.read(body)
        self.add(model, tokens)

    def header_value(self) -> str | None:
        return None if self.total is None else f"{self.total:.10f}".rstrip("0").rstrip(".") or "0"
