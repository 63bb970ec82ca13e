"""The shadow dispatcher: ``router_replay.shadow`` copies, sent off the request path.

A sampled request that one provider answered through single-model dispatch
(spec 5.7: no cache hit, fast_response or Looper executor) reaches the stream
with a ``ShadowCopy`` on its answer's event: the request that provider was
sent, every request plugin applied (the tools policy, context, system_prompt,
request_params, prompt_cache, masking last: placeholders, never the values),
never its headers. This consumer sends it to the candidate model through the
server's own upstream client and appends the answer as a ``shadow_answer``
event next to the live one. The live answer was sent before: a shadow can
neither delay nor change it.

``send(copy, recipe) -> (status, body)`` is the server's: it reads the copy
in the client API of the live model's format, writes it in the shadow model's
format and upstream name, adds header_mutation's headers, and calls the model
with the model's own static credential, never a user's (spec 6.7). Copies go
out whole (``stream: false``) so the two answers compare.

Each candidate model gets ``max_concurrency`` copies in flight; a copy that
finds them all busy waits for one, and the group waits with it: the consumer
is off the request path, and the stream holds the backlog, so every sampled
copy is sent (a slow candidate makes the group fall behind, never the live
answers). A copy whose model the caller's key may not reach is
never made (``RequestEvents``) and counted here as ``skipped_not_allowed``; nor is a copy of a request
whose router_replay says ``capture_personal_data: false`` (``skipped_personal_data``): no event carries
its text, masked or not. The copy travels in the stream, whatever ``capture_request_body`` says: the
stream is the dispatcher's only way to it; the record never keeps it. (A ``request_received`` event an
earlier version journaled may carry a copy of the client's body: it is sent as it was then.)
A copy is acknowledged when its answer is recorded; a
copy in flight when the router stops is sent again on the next start.
"""
from __future__ import annotations

import collections
import logging
from collections.abc import Awaitable, Callable

import msgspec
import trio

from .capture import answer_facts
from .consumers import Acks
from .source import Entry
from .types import AnswerCompleted, RequestReceived, ShadowAnswered, ShadowCopy, now_ms
from .writer import EventSink

log = logging.getLogger("vsr_fast.events.shadow")
Send = Callable[[ShadowCopy, str | None], Awaitable[tuple[int, bytes]]]   # (copy, whole body), recipe
_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_JSON = msgspec.json.Encoder()


def whole_body(body: bytes) -> bytes:
    """The request asking for a whole answer: ``stream: false``, no ``stream_options``."""
    top = _TOP.decode(body)
    top["stream"] = msgspec.Raw(b"false")
    top.pop("stream_options", None)
    return _JSON.encode(top)


class ShadowDispatcher:
    """Consumer group ``shadow``. Its copies run in ``nursery``, which must outlive the consumer task."""

    group = "shadow"

    def __init__(self, send: Send, sink: EventSink, nursery: trio.Nursery) -> None:
        self._send = send
        self._sink = sink
        self._nursery = nursery
        self._limiters: dict[str, trio.CapacityLimiter] = {}
        self._in_flight: set[str] = set()    # entry ids whose copy is out (a claim may deliver them again)
        self.sent = 0
        self.failed = 0
        self.skipped: collections.Counter[str] = collections.Counter()

    def _limiter(self, model: str, size: int) -> trio.CapacityLimiter:
        limiter = self._limiters.get(model)
        if limiter is None:
            limiter = self._limiters[model] = trio.CapacityLimiter(size)
        elif limiter.total_tokens != size:
            limiter.total_tokens = size
        return limiter

    async def handle(self, entries: list[Entry], acks: Acks) -> None:
        for e in entries:
            ev = e.event
            if not isinstance(ev, (RequestReceived, AnswerCompleted)) or ev.shadow is None:
                acks.done(e.id)
                continue
            if e.id in self._in_flight:
                continue    # claimed again while its copy is still out: that copy acknowledges it
            limiter = self._limiter(ev.shadow.model, ev.shadow.max_concurrency)
            token = object()
            # Backpressure, never a skip: this consumer is off the request path, and the stream holds the
            # backlog, so a copy waits for a free slot; skipping here would drop copies in bursts and bias
            # the sample.
            await limiter.acquire_on_behalf_of(token)
            self._in_flight.add(e.id)
            self._nursery.start_soon(self._shadow, e.id, ev, limiter, token, acks)

    async def _shadow(self, entry_id: str, ev: RequestReceived | AnswerCompleted, limiter: trio.CapacityLimiter, token: object,
                      acks: Acks) -> None:
        copy = ev.shadow
        assert copy is not None
        started = trio.current_time()
        status: int | None = None
        body: bytes | None = None
        error: str | None = None
        try:
            with trio.move_on_after(copy.timeout_seconds) as scope:
                status, body = await self._send(msgspec.structs.replace(copy, body=whole_body(copy.body)), ev.recipe)
            if scope.cancelled_caught:
                error = "timeout"
        except Exception as exc:  # the edge of a background copy: its failure is recorded, never raised
            error = f"{type(exc).__name__}: {exc}"
        finally:
            limiter.release_on_behalf_of(token)
        self._in_flight.discard(entry_id)
        if error is None:
            self.sent += 1
        else:
            self.failed += 1
        facts = answer_facts(body, False) if body is not None and status == 200 else None
        keep = body[:copy.max_body_bytes] if body is not None and copy.max_body_bytes > 0 else None
        self._sink.record(ShadowAnswered(
            replay_id=ev.replay_id, request_id=ev.request_id, session_id=ev.session_id, recipe=ev.recipe,
            config_version=ev.config_version, seq=ev.seq, ts_ms=now_ms(), replay=ev.replay,
            model=copy.model, live_model=copy.live_model, status=status,
            duration_ms=(trio.current_time() - started) * 1000,
            finish_reason=facts.finish_reason if facts else None, usage=facts.usage if facts else None,
            body=keep, body_truncated=keep is not None and body is not None and len(body) > len(keep), error=error,
        ))
        acks.done(entry_id)

    def prometheus_lines(self) -> list[str]:
        return [
            "# HELP vsr_shadow_requests_total Shadow copies sent, by outcome.",
            "# TYPE vsr_shadow_requests_total counter",
            f'vsr_shadow_requests_total{{outcome="answered"}} {self.sent}',
            f'vsr_shadow_requests_total{{outcome="failed"}} {self.failed}',
            f'vsr_shadow_requests_total{{outcome="skipped_not_allowed"}} {self.skipped["not_allowed"]}',
            f'vsr_shadow_requests_total{{outcome="skipped_personal_data"}} {self.skipped["personal_data"]}',
        ]


__all__ = ["Send", "ShadowDispatcher", "whole_body"]
