"""An answer's ``usage`` as every protocol reports it: the one wire type its readers share.

Chat reports ``prompt_tokens`` / ``completion_tokens`` (a stream's usage-only last
chunk); Messages ``input_tokens`` / ``output_tokens`` on a whole answer, in
``message_start`` (input) and in ``message_delta`` (output so far), with cached
input apart in ``cache_read_input_tokens``; Responses the same names on a
whole answer and in ``response.completed``. What each reader does with them
differs (the record's facts, a caller's token limits, an answer's cost); what
they decode is this.
"""
from __future__ import annotations

from collections.abc import Iterator

import msgspec


class _Details(msgspec.Struct):
    cached_tokens: int | None = 0       # null from some OpenAI-compatible servers


class WireUsage(msgspec.Struct):
    """One ``usage`` object of any protocol; a field it does not report is None."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None          # Messages: cached input, counted apart from input_tokens
    cache_creation_input_tokens: int | None = None      # Messages: input written to the cache, apart too
    prompt_tokens_details: _Details | None = None       # Chat: cached tokens are part of prompt_tokens
    input_tokens_details: _Details | None = None        # Responses: the same

    @property
    def input(self) -> int | None:
        """All input tokens, cached included, as Chat and Responses count them: Messages' input_tokens leave out
        the input read from and written to its cache."""
        if self.prompt_tokens is not None:
            return self.prompt_tokens
        if self.input_tokens is None:
            return None
        return self.input_tokens + (self.cache_read_input_tokens or 0) + (self.cache_creation_input_tokens or 0)

    @property
    def output(self) -> int | None:
        """Output tokens in either protocol's name (Chat's first)."""
        return self.completion_tokens if self.completion_tokens is not None else self.output_tokens

    @property
    def cached(self) -> int:
        """Cached input tokens, part of ``input``."""
        details = self.prompt_tokens_details or self.input_tokens_details
        return self.cache_read_input_tokens or (details.cached_tokens or 0 if details is not None else 0)


class _Holder(msgspec.Struct):
    usage: WireUsage | None = None


class UsageDoc(msgspec.Struct):
    """Where a whole answer or a stream event keeps its usage: at the top, in Messages' ``message``
    (message_start) or in Responses' ``response`` (its terminal events)."""

    usage: WireUsage | None = None
    message: _Holder | None = None
    response: _Holder | None = None

    def usages(self) -> Iterator[WireUsage]:
        """Every usage object the document carries."""
        for u in (self.usage, self.message.usage if self.message is not None else None,
                  self.response.usage if self.response is not None else None):
            if u is not None:
                yield u


USAGE_DOC = msgspec.json.Decoder(UsageDoc)

__all__ = ["USAGE_DOC", "UsageDoc", "WireUsage"]
