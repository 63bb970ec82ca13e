"""One request's shared state: what each stage reads and writes, and nothing else.

decode writes ``raw`` and ``req``; route writes ``route`` and the decision's
facts; the request plugins write ``shaping`` and ``masking``; dispatch writes ``answer``; the
answer stage writes the status and path; ``rec`` records every step.
"""
from __future__ import annotations

import re
import time
from typing import Any

import trio

from ...auth.usage import UsageMeter
from ...errors import UnsendableHeader, VsrError
from ...headers import registry as h
from ...headers.public import public_headers
from ...protocol.adapters import Adapter, Inbound, Outbound
from ...protocol.anthropic import with_request_id
from ...protocol.translate import Loss
from ...routing import Route
from ...upstream import Attempt
from ..asgi import DisconnectWatch, HeaderList, Scope
from ..recording import Recording
from ..state import AppState

_TO_PROVIDER = tuple(name.encode() for name in h.TO_PROVIDER)
_TRACE = h.TRACE.encode()
_REQUEST_ID = h.REQUEST_ID.encode()
_ANTHROPIC_REQUEST_ID = h.ANTHROPIC_REQUEST_ID.encode()
_WARNINGS = h.WARNINGS.encode()
_COST, _COST_CURRENCY = h.COST.encode(), h.COST_CURRENCY.encode()
_SSE = "text/event-stream"
# A header value h11 sends (RFC 9110 field-value): visible bytes, inner spaces and tabs, no control byte.
_SENDABLE = re.compile(rb"(?:[^\x00-\x20]+(?:[ \t]+[^\x00-\x20]+)*)?")
# Values found sendable: nearly every one repeats from one answer to the next (the config version, the names, the
# content type), and a value sendable once always is. Bounded by starting over when full.
_SENT: set[bytes] = set()
SENT_MAX = 4096


class Exchange:
    """What one request has decided so far; read by headers, metrics, errors and the record."""

    __slots__ = ("_deadline", "_scopes", "adapter", "api", "codes", "masked_spans", "masked_values", "masking", "decision", "extra", "model", "outbound", "path", "raw",
                 "rec", "recipe", "req", "route", "scope", "shaping", "stage", "started", "state",
                 "status", "trace", "warnings", "arrived", "ticket", "meter", "guard_outcome", "guard_codes", "held",
                 "cost", "first_byte", "failure", "watch", "losses", "kept", "backend", "backend_first_byte",
                 "attempts", "system_context")

    def __init__(self, state: AppState, api: str, scope: Scope) -> None:
        self.state, self.api, self.scope = state, api, scope
        self.adapter: Adapter = state.adapters[api]
        self.started = time.perf_counter()
        self.arrived = trio.current_time()
        self._deadline = self.arrived + state.request_timeout_s
        self._scopes: list[tuple[trio.CancelScope, float]] = []
        self.watch: DisconnectWatch | None = None    # from the end of the body to the end of the answer
        self.stage = "decode"
        self.raw = b""
        self.req: Inbound | None = None
        self.route: Route | None = None
        self.shaping: Any = None
        self.masking: Any = None          # the decision's masking policy: dispatch's last rewrite
        # The context placed in the system prompt (``pipeline.context``): a system_prompt replace keeps it.
        self.system_context: tuple[str, ...] = ()
        self.masked_spans: dict | None = None   # text -> the pii rule's spans, kept across candidates
        # value -> its numbered placeholder, kept across candidates; in this request's memory only (unmask)
        self.masked_values: dict[str, str] | None = None
        self.outbound: dict[str, Outbound] = {}
        self.recipe: str | None = None
        self.decision: str | None = None
        self.model: str | None = None
        # The model that served the session's last turn, put first by a held route (retention.ttl_turns).
        self.kept: str | None = None
        self.backend: str | None = None   # the backend whose answer the client got (the access log's)
        self.backend_first_byte: float | None = None    # perf_counter() as its answer began (the record's ttfb_ms)
        self.attempts: list[Attempt] = []   # every upstream attempt, fallbacks and hops (``tried``)
        self.path = h.ResponsePath.UPSTREAM
        # The answer's status; for a stream that ends with an error event after its 200, the status that failure
        # answers whole (metrics, access log and record count what the client was told, not the status line).
        self.status = 500
        self.trace: str | None = None
        self.extra: HeaderList = []
        self.warnings = ""
        self.codes: list[str] = []        # warning codes ahead of translation losses (scan_partial, ...)
        # Losses of the client's request that no one candidate's body has (an executor's tools, left out).
        self.losses: list[Loss] = []
        self.guard_outcome = "none"       # what response_guard did (events.types.GuardOutcome)
        self.guard_codes: list[str] = []
        self.held = False                 # a streamed answer held for the guard
        self.rec = Recording(state, scope)
        self.ticket = None                # the caller's places in its rate limits, released when it ends
        # Reads the answer's usage: for the limits that charge tokens, vsr_tokens_total and the access log.
        self.meter = UsageMeter(0)
        self.first_byte: float | None = None    # perf_counter() as the answer's first byte left
        self.failure: VsrError | None = None
        self.cost = None                  # selection.cost.Tally: every call's cost, summed (dispatch)

    @property
    def not_accepted(self) -> bool:
        """Whether the answer served is one the router's own accept check refused (the Looper's escalate
        returning its last attempt under ``on_error: last_attempt``). Set by the Looper; such an answer is never
        cached (``llm_cache_write_skipped_total{reason="not_accepted"}``)."""
        return self.rec.not_accepted

    @not_accepted.setter
    def not_accepted(self, value: bool) -> None:
        self.rec.not_accepted = value      # the recording decides the cache write (``Recording._intent``)

    def tried(self, attempts: list[Attempt], *, hops: bool = False) -> None:
        """The upstream attempts of one call: recorded (``Recording.attempts``) and kept for the access log."""
        self.attempts += attempts
        self.rec.attempts(attempts, hops=hops)

    @property
    def responded(self) -> bool:
        """Whether the response has started: an error can no longer be sent whole."""
        return self.watch is not None and self.watch.sent

    def headers(self, content_type: str | None = None) -> HeaderList:
        """The public headers of the answer, with its warnings, cost (not on a stream), trace and extras."""
        out = public_headers(config_version=self.state.config_version, path=self.path,
                             recipe=self.recipe, decision=self.decision, model=self.model)
        rid = self.rec.request_id.encode("latin-1")
        out.append((_REQUEST_ID, rid))
        if self.api == "messages":      # the Anthropic SDK's name for it
            out.append((_ANTHROPIC_REQUEST_ID, rid))
        if self.warnings:
            out.append((_WARNINGS, self.warnings.encode()))
        # Omitted on a streamed answer (spec 5.10), whatever is known when its head leaves: an upstream stream's
        # own cost comes last, and a Looper's earlier calls are only part of it. The record keeps the sum.
        cost = self.cost.header_value() if self.cost is not None and content_type != _SSE else None
        if cost is not None:
            out += [(_COST, cost.encode()), (_COST_CURRENCY, (self.cost.currency or "").encode())]
        if self.trace is not None:
            out.append((_TRACE, self.trace.encode()))
        out += self.extra
        if content_type is not None:
            out.append((b"content-type", content_type.encode()))
        fresh = [value for _, value in out if value not in _SENT]
        if not fresh:
            return out
        bad = [name for name, value in out if value in fresh and not _SENDABLE.fullmatch(value)]
        if not bad:
            if len(_SENT) + len(fresh) > SENT_MAX:
                _SENT.clear()
            _SENT.update(fresh)
            return out
        if not isinstance(self.failure, UnsendableHeader):
            # h11 would refuse the head, and the server answer a bare 500 the access log never saw: the
            # request fails here instead, answered 500 with its body (and counted so) without these headers.
            raise UnsendableHeader(f"internal error: the response header {bad[0].decode()} cannot be sent")
        return [(name, value) for name, value in out if name not in bad]

    def error_body(self, status: int, body: bytes) -> bytes:
        """An error answer's ``body`` as the client reads it: a Messages client's with the request's id in it
        (``request_id``, as Anthropic's errors carry it)."""
        return with_request_id(body, self.rec.request_id) if self.api == "messages" and status >= 400 else body

    def provider_headers(self) -> list[tuple[str, bytes]]:
        """The client headers registered to reach providers; every other one, x-vsr-* included, stays here.
        Values stay bytes: httpx encodes a str value as ASCII and would fail on a client's non-ASCII one. The
        client's x-request-id goes as the router kept it (``recording.kept_request_id``): its own, or the new one,
        which goes when the client sent none too. On a masking decision the provider reads the router's own
        User-Agent."""
        rid = self.rec.request_id.encode()
        out = [(k.decode(), rid if k == _REQUEST_ID
                else h.ROUTER_AGENT if k == b"user-agent" and self.masking is not None else v)
               for k, v in self.scope["headers"] if k in _TO_PROVIDER]
        if not any(k == h.REQUEST_ID for k, _ in out):
            out.append((h.REQUEST_ID, rid))
        return out

    @property
    def deadline(self) -> float:
        """The request's deadline (trio time): its own, or the drain's once the router is stopping."""
        return min(self._deadline, self.state.drain_deadline)

    @deadline.setter
    def deadline(self, value: float) -> None:
        self._deadline = value

    @property
    def timeout_s(self) -> float:
        """The request's own time allowed (the router's, or the chosen decision's), the drain's aside."""
        return self._deadline - self.arrived

    def deadline_scope(self, extra_s: float = 0.0) -> trio.CancelScope:
        """A cancel scope at the deadline (plus ``extra_s``) that follows it if the drain brings it nearer."""
        cut = trio.CancelScope(deadline=self.deadline + extra_s)
        self._scopes.append((cut, extra_s))
        return cut

    def cut_at(self, deadline: float) -> None:
        """Bring every scope of this request to ``deadline`` at the latest (the drain's)."""
        for cut, extra_s in self._scopes:
            cut.deadline = min(cut.deadline, deadline + extra_s)

    def drained(self) -> bool:
        """Whether the deadline that passed was the drain's."""
        return self.state.draining and trio.current_time() >= self.state.drain_deadline

    def feed(self, chunk: bytes) -> None:
        """One piece of the answer as the client receives it: to the record and, when metered, the meter."""
        self.rec.feed(chunk)
        if self.first_byte is None:
            self.first_byte = time.perf_counter()
        if self.meter is not None:
            self.meter.feed(chunk)

    def time_left(self) -> float:
        return self.deadline - trio.current_time()
