"""Stage 5, answer: the client's protocol, whole or streamed, for every way a request can end.

Each function sends one kind of answer and records it; the relay obeys the
request's deadline itself, since its headers have already left.
"""
from __future__ import annotations

import time

import logging

import trio

import msgspec

from ...errors import (RateLimited, RequestTimeout, ResponseTooLarge, ShuttingDown, UpstreamError, UpstreamInvalid,
                       UnsendableHeader, UpstreamStatus, UpstreamTimeout, UpstreamTooLarge, VsrError, cause_words)
from ...headers import registry as h
from ...plugins import fast_response
from ...plugins.response_cache import CachedAnswer
from ...plugins.response_guard import HOLD_LIMIT_BYTES
from ...plugins.unmask import StreamRestorer
from ...protocol.prompt_texts import text_bytes
from ...protocol.translate import Estimate, Usage, render_warnings
from ...upstream import Stream, Whole, failure_cause
from ...upstream import cut as cut_attempts
from ...upstream.transport import Timeout
from ..asgi import Send, send_whole
from . import guard as response_guard
from .exchange import Exchange
from .masking import echo, restorer
from .offload import off_loop
from .plugins import Fast

log = logging.getLogger("vsr_fast.gateway")
SSE = "text/event-stream"


async def answer(ex: Exchange, send: Send, result: Fast | CachedAnswer | Stream | Whole) -> None:
    """Send ``result`` in the client's protocol."""
    if isinstance(result, (Stream, Whole)):
        echo(ex)
    if isinstance(result, Fast):
        await _fast(ex, send, result.message)
    elif isinstance(result, CachedAnswer):
        await _cached(ex, send, result)
    elif isinstance(result, Stream):
        await _relay(ex, send, result)
    else:
        await _whole(ex, send, result)


def prompt_size(adapter, req, raw: bytes):
    """The request's text size, for an answer that reports no usage or a request cut short after it reached a
    backend: every text it carries to the model (messages, tool definitions and calls, a structured output's
    schema: ``protocol.prompt_texts``, as count_tokens' estimate reads them), not their JSON. It closes over the
    request, not the exchange: the exchange holds the meter, and a cycle through it left every exchange to the
    cyclic GC (~36 k instructions a request, bench/RESULTS.md)."""
    def size() -> int:
        try:
            return text_bytes(adapter.conversation(req)[0])
        except Exception:       # read when the request ends (its limits released): never fails it
            return len(raw)
    return size


def _estimate(ex: Exchange, whole: bytes | None = None) -> Estimate | None:
    """The usage a client reads of an answer whose backend reported none: the meter's estimate (``auth.usage``)
    of a stream's text, read once the answer has ended, or of a ``whole`` answer's (the backend's own body). It
    closes over the meter, not the exchange (see ``prompt_size``)."""
    meter = ex.meter
    if meter is None or meter.prepaid:      # an executor's answer: its calls reported what they used
        return None

    def usage() -> Usage:
        given, taken = meter.estimate(whole)
        return Usage(given, taken)
    return usage


def _metered(ex: Exchange, feed):
    """``feed`` (a translator's) after the meter read the backend's own bytes: the client's may leave the usage
    out (a Chat client that did not ask for it, a translation that drops it)."""
    meter = ex.meter
    if meter is None:
        return feed

    def read(chunk: bytes) -> bytes:
        meter.upstream(chunk)
        return feed(chunk)
    return read


async def _send(ex: Exchange, send: Send, body: bytes, content_type: str, *, streamed: bool,
                kept: bytes | None = None, metered: bytes | None = None) -> None:
    """One whole response with the exchange's headers, fed to the record (``kept``, when the client reads
    restored values the record must not keep) and to the meter (``metered``: the backend's own whole answer, or a
    whole answer sent as events)."""
    headers = ex.headers(content_type)
    if streamed:
        headers.append((b"cache-control", b"no-cache"))
    body = ex.error_body(ex.status, body)
    await send_whole(send, ex.status, headers, body)
    ex.first_byte = time.perf_counter()
    kept = body if kept is None else kept
    ex.rec.feed(kept)
    if ex.meter is not None:
        if metered is not None:
            ex.meter.whole(metered)
        else:
            (ex.meter.feed if streamed else ex.meter.whole)(kept)
    _answered(ex, streamed=streamed, complete=True, content_type=content_type)


def _answered(ex: Exchange, *, streamed: bool, complete: bool, content_type: str | None) -> None:
    # The usage the meter read, whole or streamed: a stream's from the backend's bytes (a usage chunk the client
    # did not ask for is there, not in what the record captured), a whole answer's from its body. The record keeps
    # it whether or not it keeps the body.
    ex.rec.answered(status=ex.status, path=ex.path.value, model=ex.model, streamed=streamed, complete=complete,
                    content_type=content_type, guard=ex.guard_outcome, guard_codes=ex.guard_codes, held=ex.held,
                    cost=(ex.cost.total, ex.cost.currency) if ex.cost is not None else (None, None),
                    usage=ex.meter.usage() if ex.meter is not None else None, first_byte=ex.backend_first_byte)


async def _fast(ex: Exchange, send: Send, message: str) -> None:
    """The decision's fast_response, in the client's protocol, with no model called."""
    ex.path, ex.model, ex.status = h.ResponsePath.FAST_RESPONSE, None, 200
    req, adapter = ex.req, ex.adapter
    assert req is not None
    # The model the client asked for, as OpenAI and LiteLLM name it in an answer (never the decision's name).
    name = adapter.model(req) or "fast_response"
    n = (req.body.n or 1) if ex.api == "chat" else 1     # a Chat client's n: as many choices, each the message
    if adapter.stream(req):
        tr = adapter.stream_translator(req, "openai")
        body, content_type = tr.feed(fast_response.chat_stream(message, name, n)) + tr.close(), SSE
        final = tr.final()
    else:
        reply = adapter.whole(req, "openai", 200, fast_response.chat_completion(message, name, n))
        body, content_type, final = reply.body, reply.content_type, reply.body
    ex.warnings = render_warnings([], codes=ex.codes)
    # Kept like a model's answer (Responses with store): a follow-up may name it; stored before it is sent.
    await adapter.remember(req, final)
    await _send(ex, send, body, content_type, streamed=adapter.stream(req))


async def _cached(ex: Exchange, send: Send, cached: CachedAnswer) -> None:
    """A stored answer, whole or as the SSE bytes it was streamed as, on the cache response path. A Responses
    answer gets an id of its own, remembered under this caller's owner: the cache may serve another owner than the
    one it first answered, who could not continue that one's id."""
    ex.path, ex.status = h.ResponsePath.CACHE, cached.status
    headers = ex.headers(cached.content_type)
    body, restore, final = cached.body, restorer(ex), None
    if cached.status < 400 and ex.req is not None:
        body, final = ex.adapter.served_again(ex.req, body, cached.streamed)
    kept = body
    if restore is not None and cached.status < 400:
        # The stored answer decoded to put the request's values back: a big one off the loop, as its check was.
        body, final = await off_loop(ex.state.metrics, "unmask", len(body), _restored, restore, body, final,
                                     ex.adapter.native if cached.streamed else None)
    if ex.req is not None:
        await ex.adapter.remember(ex.req, final)    # stored before the answer is sent: see _whole
    await send_whole(send, cached.status, headers, body)
    # What was served, to the record's capture as any answer is (kept where router_replay allows); with its values
    # restored for the client, the record keeps it masked, as ``_send`` does. Not to the meter: a hit bills no token.
    if ex.rec.capture is not None:
        ex.rec.capture.feed(kept)
    ex.rec.answered(status=cached.status, path=ex.path.value, model=ex.model, streamed=cached.streamed,
                    complete=True, content_type=cached.content_type)


def _restored(restore, body: bytes, final: bytes | None, stream_format: str | None) -> tuple[bytes, bytes | None]:
    """A cached answer (a stream's bytes in ``stream_format``, else whole) and its Responses object to remember,
    with the request's values back in."""
    body = restore.sse(body, stream_format) if stream_format is not None else restore.whole(body)
    return body, restore.whole(final) if final is not None else None


def _losses(ex: Exchange, model_name: str) -> list:
    out = ex.outbound.get(model_name)
    return [*ex.losses, *(out.losses if out is not None else ())]


def _upstream_answered(ex: Exchange, result: Stream | Whole) -> None:
    r = ex.route
    assert r is not None
    ex.model, ex.status, ex.backend = result.model.name, result.status, result.backend.label
    ex.backend_first_byte = result.first_byte
    ex.extra += result.rate_headers         # the answering backend's own x-ratelimit-*, renamed
    if ex.meter is not None and result.status < 400:
        ex.meter.answered = True            # a model answered: its tokens are charged, estimated if unreported
    if result.model.name != r.candidates[0].name and ex.path != h.ResponsePath.LOOPER:
        ex.path = h.ResponsePath.FALLBACK     # a later candidate than the first answered: a failover
    if result.status < 400 and any(a.failed for a in result.attempts):
        how = "failover" if any(a.model != result.model.name for a in result.attempts) else "retry"
        ex.state.metrics.recovered.inc(ex.api, result.model.name, how)


async def _whole(ex: Exchange, send: Send, result: Whole) -> None:
    _upstream_answered(ex, result)
    req, adapter = ex.req, ex.adapter
    assert req is not None
    losses = _losses(ex, result.model.name)
    if adapter.stream(req) and result.status < 400 and result.model.api_format == "images":
        # An images model answers whole; a client that asked for a stream still gets its protocol's events.
        tr = adapter.stream_translator(req, "images")
        body = tr.feed(result.body) + tr.close()
        ex.warnings = render_warnings(losses + list(tr.losses), codes=ex.codes)
        await adapter.remember(req, tr.final())     # stored before the answer ends: a follow-up may come at once
        await _send(ex, send, body, SSE, streamed=True)
        return
    # A translated answer whose backend reported no usage carries the estimate, as a stream's does; the meter then
    # reads the backend's own body (``metered``), so that estimate is counted and logged as one, never as reported.
    estimate = _estimate(ex, result.body) if result.status < 400 and result.model.api_format != "images" else None
    metered = result.body if estimate is not None else None
    reply = adapter.whole(req, result.model.api_format, result.status, result.body, result.content_type,
                          estimate=estimate)
    ex.status = reply.status
    if result.status >= 400:    # a backend's error answer relayed (the request's fault, the client's credential)
        ex.failure = UpstreamStatus.at(result.backend.label, f"answered HTTP {result.status}", status=result.status,
                                       body=b"", content_type=result.content_type,
                                       api_format=result.model.api_format)
    if result.retry_after_s is not None:    # the backend's error asked for a wait: its client waits too
        ex.extra.append((b"retry-after", str(result.retry_after_s).encode()))
    body, codes = reply.body, []
    guard = response_guard.guard_of(ex) if reply.status < 400 else None
    if guard is not None:
        try:
            text = adapter.answer_text(body)
        except (msgspec.DecodeError, VsrError):
            text = None
        if text is None:
            # An answer the guard cannot read: a guard that may refuse it does not let it through unread.
            response_guard.settle(ex, "incomplete", [], held=False, streamed=False)
            if guard.holds:
                raise UpstreamError(f"the answer of {result.model.name} could not be read for the response guard")
        else:
            verdict = await response_guard.judge(ex, guard, text)
            codes = verdict.codes
            response_guard.settle(ex, verdict.outcome, verdict.recorded, held=False, streamed=False)
            if verdict.outcome == "blocked":
                if ex.meter is not None:    # its provider billed the answer the client never sees: charge that
                    ex.meter.whole(result.body)
                await _blocked(ex, send, response_guard.blocked_error(verdict), streamed=False)
                return
            note = response_guard.noted(verdict)
            if note is not None:
                body = adapter.noted_whole(req, body, note)
    if adapter.stream(req) and reply.status < 400:
        await _whole_as_stream(ex, send, body, losses + list(reply.losses), codes, metered)
        return
    ex.warnings = render_warnings(losses + list(reply.losses), codes=ex.codes + codes)
    shown = body
    if reply.status < 400:
        restore = restorer(ex)
        if restore is not None:
            shown = restore.whole(body)
        # Stored before the answer is sent: a follow-up naming it (previous_response_id) may come at once, on
        # another router sharing the store. It keeps the client's values, like the request it follows.
        await adapter.remember(req, shown)
    await _send(ex, send, shown, reply.content_type, streamed=False, kept=body, metered=metered)


async def _whole_as_stream(ex: Exchange, send: Send, body: bytes, losses: list, codes: list,
                           metered: bytes | None) -> None:
    """A whole answer (``body``, in the client's protocol) to a client that asked for a stream, from a backend
    that answered whole (one that ignores ``stream``): its SDK reads events, and would read a JSON body as an
    empty stream. ``metered``: what the meter reads (the backend's own body), else ``body``."""
    req, adapter = ex.req, ex.adapter
    assert req is not None
    tr = adapter.whole_as_stream(req)
    sse = tr.feed(body) + tr.close()
    final, shown, restore = tr.final(), sse, restorer(ex)
    if restore is not None:
        shown = restore.sse(sse, adapter.native)
        final = restore.whole(final) if final is not None else None
    ex.warnings = render_warnings(losses + list(tr.losses), codes=ex.codes + codes)
    await adapter.remember(req, final)      # stored before the answer is sent: see _whole
    await _send(ex, send, shown, SSE, streamed=True, kept=sse, metered=body if metered is None else metered)


async def _blocked(ex: Exchange, send: Send, exc: VsrError, *, streamed: bool) -> None:
    """A blocked answer: the 403 in the client's protocol, or on a held stream its error event on HTTP 200
    (counted as the 403: see ``_failed_stream``)."""
    ex.path = h.ResponsePath.BLOCKED
    ex.warnings = render_warnings([], codes=ex.codes)
    ex.rec.failed(exc.stage, exc)
    if streamed:
        line = 200
        _failed_stream(ex, exc)
        body, content_type = ex.adapter.stream_failure(exc), SSE
        headers = ex.headers(SSE) + [(b"cache-control", b"no-cache")]
    else:
        ex.status, content_type, body = ex.adapter.error(exc)
        body = ex.error_body(ex.status, body)
        line, ex.failure = ex.status, exc       # the access log's error, as a blocked stream's
        headers = ex.headers(content_type)
    await send_whole(send, line, headers, body)
    ex.rec.feed(body)
    _answered(ex, streamed=streamed, complete=False, content_type=content_type)


async def _relay(ex: Exchange, send: Send, stream: Stream) -> None:
    """Relay the backend's SSE in the client's protocol as it comes; a failure or the deadline ends it with
    the protocol's error event.

    The translator releases whole events only (the same-protocol one passes bytes
    through unchanged), so an upstream that dies mid-event never leaves half a
    JSON line before the error event.
    """
    guard = response_guard.guard_of(ex)
    if guard is not None and guard.holds:
        await _held(ex, send, stream, guard)
        return
    _upstream_answered(ex, stream)
    req, adapter, rec = ex.req, ex.adapter, ex.rec
    assert req is not None
    tr = adapter.stream_translator(req, stream.model.api_format, estimate=_estimate(ex))
    ex.warnings = render_warnings(_losses(ex, stream.model.name), codes=ex.codes)
    complete, failure, relayed = False, None, None
    # A guard that cannot change the answer reads a copy once the stream has ended (for the record).
    copy = _Copy() if guard is not None else None
    feed = _metered(ex, tr.feed)
    restore = restorer(ex)
    shown = StreamRestorer(restore, adapter.native) if restore is not None and stream.status < 400 else None
    try:
        await send({"type": "http.response.start", "status": stream.status,
                    "headers": ex.headers(SSE) + [(b"cache-control", b"no-cache")]})
        with ex.deadline_scope() as cut:
            await _pass(ex, send, feed(stream.first), copy, shown)
            try:
                async for chunk in stream.rest:
                    await _pass(ex, send, feed(chunk), copy, shown)
                complete = True
                ended_in_error = getattr(stream.rest, "ended_in_error", None)     # a checked backend stream's
                if ended_in_error is not None and (relayed := ended_in_error()) is not None:
                    complete, failure = False, _midstream(ex, stream, relayed, "")  # the client read its error
            except Exception as exc:  # httpx stream errors after the first byte: no fallback now
                failure = _midstream(ex, stream, exc, "")
        if cut.cancelled_caught:
            stream.cut_short(cut_attempts.DEADLINE)
        if cut.cancelled_caught and ex.drained():
            failure = ShuttingDown("the router is stopping; its graceful timeout passed while the answer streamed")
        elif cut.cancelled_caught:
            failure = RequestTimeout(f"the request's deadline ({ex.timeout_s:g} s) passed while the answer streamed")
            ex.state.metrics.timeouts.inc(ex.api, "answer")
        if failure is not None:
            _failed_stream(ex, failure)
            rec.failed(failure.stage, failure)
        tail = tr.fail(failure) if failure is not None and relayed is None else tr.close()
        ex.feed(tail)
        if complete:
            # Stored before the stream's last event: see _whole.
            await adapter.remember(req, restore.whole(tr.final()) if shown is not None else tr.final())
        # The backend has nothing more to give: its connection goes back (or closes) now, not once a client that
        # reads slowly, or not at all, has taken the end.
        await _close_upstream(stream)
        await send({"type": "http.response.body", "body": shown.feed(tail) + shown.close() if shown is not None
                    else tail, "more_body": False})
        if copy is not None and guard is not None:
            copy.add(tail)
            await _judge_after(ex, guard, copy, complete)
        _answered(ex, streamed=True, complete=complete, content_type=SSE)
    except trio.Cancelled:
        _cut_short(ex, stream)
        raise
    finally:
        await _close_upstream(stream)


def _cut_short(ex: Exchange, stream: Stream) -> None:
    """A stream the request's cancellation ended before its end (its client left, the grace past the deadline
    passed): its attempt counted ``cancelled`` or ``deadline``, as one cut before its first byte is (an attempt
    that ended whole, or broke, keeps its outcome)."""
    stream.cut_short(cut_attempts.cause(ex.deadline))


async def _close_upstream(stream: Stream) -> None:
    """Close the backend's stream (again: a no-op). Shielded: when the client left, this scope is already
    cancelled, and the upstream connection must still be closed so the model stops."""
    with trio.CancelScope(shield=True, deadline=trio.current_time() + 5):
        await stream.aclose()


async def _pass(ex: Exchange, send: Send, out: bytes, copy: "_Copy | None" = None,
                shown: StreamRestorer | None = None) -> None:
    """``out`` to the record as the model wrote it, and to the client with its values restored (``shown``)."""
    if out:
        ex.feed(out)
        if copy is not None:
            copy.add(out)
        if shown is not None:
            out = shown.feed(out)
            if not out:
                return
        await send({"type": "http.response.body", "body": out, "more_body": True})


class _Copy:
    """What a true stream sent, kept for a guard that reads it after the end; bounded like a held one."""

    __slots__ = ("data", "over")

    def __init__(self) -> None:
        self.data, self.over = bytearray(), False

    def add(self, out: bytes) -> None:
        if not self.over:
            self.data += out
            if len(self.data) > HOLD_LIMIT_BYTES:
                self.over, self.data = True, bytearray()


async def _judge_after(ex: Exchange, guard, copy: _Copy, complete: bool) -> None:
    """A true stream's verdict, once it ended: recorded, never sent (its headers left with the first byte)."""
    if copy.over or not complete:
        response_guard.settle(ex, "over_limit" if copy.over else "incomplete", [], held=False, streamed=True)
        return
    try:
        text = ex.adapter.held_text(ex.adapter.held_events(bytes(copy.data)))
    except (msgspec.DecodeError, VsrError):
        response_guard.settle(ex, "incomplete", [], held=False, streamed=True)
        return
    verdict = await response_guard.judge(ex, guard, text)
    response_guard.settle(ex, verdict.outcome, verdict.recorded, held=False, streamed=True)


async def _held(ex: Exchange, send: Send, stream: Stream, guard) -> None:
    """A stream held for a guard that can refuse or rewrite it: nothing leaves until the guard has read it all.

    The events are translated as they come and kept, at most HOLD_LIMIT_BYTES;
    the headers leave with the verdict. Passed or flagged: the bytes as the
    model streamed them; noted: re-encoded with the note at their head; blocked,
    over the bound, failed or cut by the deadline: the protocol's error event
    alone, on HTTP 200.
    """
    _upstream_answered(ex, stream)
    req, adapter, rec = ex.req, ex.adapter, ex.rec
    assert req is not None
    tr = adapter.stream_translator(req, stream.model.api_format, estimate=_estimate(ex))
    losses = _losses(ex, stream.model.name)
    held = bytearray()
    failure: VsrError | None = None
    outcome = None
    feed = _metered(ex, tr.feed)
    try:
        with ex.deadline_scope() as cut:
            try:
                held += feed(stream.first)
                async for chunk in stream.rest:
                    held += feed(chunk)
                    if len(held) > HOLD_LIMIT_BYTES:
                        break
                else:
                    held += tr.close()
            except UpstreamTooLarge as exc:
                failure, outcome = ResponseTooLarge(exc.message), "over_limit"
            except Exception as exc:  # httpx stream errors mid-hold: the answer is incomplete
                failure, outcome = _midstream(ex, stream, exc, " (held)"), "incomplete"
            if failure is None and len(held) > HOLD_LIMIT_BYTES:
                failure, outcome = ResponseTooLarge(
                    f"the answer grew past the {HOLD_LIMIT_BYTES >> 20} MiB a held stream may keep"), "over_limit"
            verdict = None
            if failure is None:
                try:
                    events = adapter.held_events(bytes(held))
                    text = adapter.held_text(events)
                    broken = adapter.held_failure(events)
                except (msgspec.DecodeError, VsrError):
                    failure, outcome = UpstreamError("the held answer could not be read"), "incomplete"
                else:
                    if broken is not None:   # the model's own error event, or a stream that did not end
                        failure, outcome = UpstreamError(
                            f"the answer of {stream.model.name}: {broken}",
                            detail=f"upstream {stream.backend.label}: {broken}"), "incomplete"
                    else:
                        verdict = await response_guard.judge(ex, guard, text)
        if cut.cancelled_caught:
            stream.cut_short(cut_attempts.DEADLINE)
        if cut.cancelled_caught and ex.drained():
            failure, outcome = ShuttingDown("the router is stopping; its graceful timeout passed while the answer "
                                            "was held"), "incomplete"
        elif cut.cancelled_caught:
            failure, outcome = RequestTimeout(f"the request's deadline ({ex.timeout_s:g} s) passed while the answer "
                                              "was held"), "incomplete"
            ex.state.metrics.timeouts.inc(ex.api, "answer")
        held_bytes = bytes(held)
        del held
        await _close_upstream(stream)       # read to its end or cut: released before a slow client is written to
        if failure is not None:
            response_guard.settle(ex, outcome or "incomplete", [], held=True, streamed=True)
            await _held_failure(ex, send, failure)
            return
        assert verdict is not None
        response_guard.settle(ex, verdict.outcome, verdict.recorded, held=True, streamed=True)
        if verdict.outcome == "blocked":
            await _blocked(ex, send, response_guard.blocked_error(verdict), streamed=True)
            return
        note = response_guard.noted(verdict)
        final = tr.final()
        if note is not None:
            held_bytes, final = adapter.noted_stream(req, events, note)
        ex.warnings = render_warnings(losses + list(tr.losses), codes=ex.codes + verdict.codes)
        restore = restorer(ex)
        shown = held_bytes
        if restore is not None and stream.status < 400:
            shown, final = restore.sse(held_bytes, adapter.native), restore.whole(final)
        await adapter.remember(req, final)      # stored before the answer is sent: see _whole
        await _send(ex, send, shown, SSE, streamed=True, kept=held_bytes)
    except trio.Cancelled:
        _cut_short(ex, stream)
        raise
    finally:
        await _close_upstream(stream)


def _failed_stream(ex: Exchange, failure: VsrError) -> None:
    """A stream whose 200 has left (or will) and that ends with ``failure``'s error event: the metrics, the access
    log and the record count the status the same failure answers whole, not the status line, so an error-rate
    alert sees it; and the access log has its error and cause."""
    ex.status, ex.failure = ex.adapter.error_status(failure), failure


async def _held_failure(ex: Exchange, send: Send, failure: VsrError) -> None:
    """A held stream that did not end whole: its failure alone, on HTTP 200, with nothing of the answer (the
    ``error`` response path: no upstream byte reached the client)."""
    ex.path = h.ResponsePath.ERROR
    _failed_stream(ex, failure)
    ex.warnings = render_warnings([], codes=ex.codes)
    ex.rec.failed(failure.stage, failure)
    body = ex.adapter.stream_failure(failure)
    await send_whole(send, 200, ex.headers(SSE) + [(b"cache-control", b"no-cache")], body)
    ex.rec.feed(body)
    _answered(ex, streamed=True, complete=False, content_type=SSE)


def _midstream(ex: Exchange, stream: Stream, exc: Exception, held: str) -> UpstreamError:
    """A stream that broke after its first event (no fallback now): logged, counted by its cause."""
    cause = failure_cause(exc)
    log.warning("upstream %s failed mid-stream%s: cause=%s: %r", stream.backend.label, held, cause, exc)
    ex.state.metrics.upstream_errors.inc(stream.model.name, stream.backend.label, f"midstream_{cause}")
    stream.broke(cause)
    # A broken event or an answer past its size keeps its own code; the rest are the transport's. The client
    # reads what went wrong, the log where and the exception (an address, an errno).
    kind = type(exc) if isinstance(exc, (UpstreamInvalid, UpstreamTooLarge, UpstreamTimeout)) else UpstreamError
    if isinstance(exc, Timeout):    # the 504 the same timeout gets whole, as a broken stream counts its failure's
        kind = UpstreamTimeout
    said = exc.message if isinstance(exc, UpstreamError) else cause_words(cause, stream.backend.timeouts)
    return kind(f"the answer of {stream.model.name} failed mid-stream{held}: {said}", cause=f"midstream_{cause}",
                detail=f"upstream {stream.backend.label} failed mid-stream{held}: {exc!r}")


async def error(ex: Exchange, send: Send, exc: VsrError) -> None:
    """The error in the client's protocol, with the public headers (the sendable ones: an error whose headers
    HTTP cannot carry is answered as that failure, a 500, so the client, the log and the metrics agree)."""
    try:
        ex.headers()
    except UnsendableHeader as unsendable:
        ex.failure = exc = unsendable
    if exc.bare is not None and ex.state.policies.private(ex.recipe, ex.decision):
        # A private request (masking, capture_personal_data: false; before its decision, one that any decision
        # it may reach would make private: ``Policies.unrouted_private``) hears
        # where its bad field is and what was expected, not its value back.
        exc = exc.unechoed()
    status, content_type, body = ex.adapter.error(exc)
    ex.status = status
    ex.recipe = ex.recipe or getattr(exc, "recipe", None)
    looped = ex.path == h.ResponsePath.LOOPER
    ex.path = h.ResponsePath.RATE_LIMITED if isinstance(exc, RateLimited) else h.ResponsePath.ERROR
    ex.warnings = render_warnings([], codes=ex.codes)
    headers = ex.headers(content_type)
    if exc.retry_after_s is not None:
        headers.append((b"retry-after", str(exc.retry_after_s).encode()))
    headers += exc.headers
    body = ex.error_body(status, body)
    await send_whole(send, status, headers, body)
    spent = ex.cost.usage if ex.cost is not None else None
    if looped or spent is not None or ex.route is not None:
        # A routed request that failed ends, as every answered one does, with its answer_completed (after its
        # error event): a Looper run's keeps what its calls spent, as the headers said (x-vsr-cost); each says how
        # the request was answered and the model it names (x-vsr-selected-model).
        ex.rec.answered(status=status, path=ex.path.value, model=ex.model, complete=False, content_type=content_type,
                        streamed=ex.req is not None and ex.adapter.stream(ex.req),
                        cost=(ex.cost.total, ex.cost.currency) if ex.cost is not None else (None, None),
                        usage=(*spent, spent[0] + spent[1]) if spent is not None else None)
