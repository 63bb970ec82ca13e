"""Stage 5, answer: the client's protocol, whole or streamed, for every way a request can end.

Each function sends one kind of answer and records it; the relay obeys the
request's deadline itself, since its headers have already left.
"""
from __future__ import annotations

import logging

import trio

from ...errors import RateLimited, RequestTimeout, ShuttingDown, UpstreamError, UpstreamInvalid, UpstreamTooLarge, VsrError
from ...headers import registry as h
from ...plugins import fast_response
from ...plugins.response_cache import CachedAnswer
from ...protocol.translate import render_warnings
from ...upstream import Stream, Whole
from ..asgi import Send, send_whole
from .exchange import Exchange
from .plugins import Fast

log = logging.getLogger("vsr_fast.gateway")
SSE = "text/event-stream"


async def answer(ex: Exchange, send: Send, result: Fast | CachedAnswer | Stream | Whole) -> None:
    """Send ``result`` in the client's protocol."""
    if isinstance(result, Fast):
        await _fast(ex, send, result.message)
    elif isinstance(result, CachedAnswer):
        await _cached(ex, send, result)
    elif isinstance(result, Stream):
        await _relay(ex, send, result)
    else:
        await _whole(ex, send, result)


async def _send(ex: Exchange, send: Send, body: bytes, content_type: str, *, streamed: bool) -> None:
    """One whole response with the exchange's headers, fed to the record."""
    headers = ex.headers(content_type)
    if streamed:
        headers.append((b"cache-control", b"no-cache"))
    await send_whole(send, ex.status, headers, body)
    ex.rec.feed(body)
    if ex.meter is not None:
        (ex.meter.feed if streamed else ex.meter.whole)(body)
    ex.rec.answered(status=ex.status, path=ex.path.value, model=ex.model, streamed=streamed, complete=True,
                    content_type=content_type)


async def _fast(ex: Exchange, send: Send, message: str) -> None:
    """The decision's fast_response, in the client's protocol, with no model called."""
    ex.path, ex.model, ex.status = h.ResponsePath.FAST_RESPONSE, None, 200
    req, adapter = ex.req, ex.adapter
    assert req is not None
    name = ex.decision or "fast_response"
    if adapter.stream(req):
        tr = adapter.stream_translator(req, "openai")
        body, content_type = tr.feed(fast_response.chat_stream(message, name)) + tr.close(), SSE
    else:
        reply = adapter.whole(req, "openai", 200, fast_response.chat_completion(message, name))
        body, content_type = reply.body, reply.content_type
    ex.warnings = render_warnings([], codes=ex.codes)
    await _send(ex, send, body, content_type, streamed=adapter.stream(req))


async def _cached(ex: Exchange, send: Send, cached: CachedAnswer) -> None:
    """A stored answer, whole or as the SSE bytes it was streamed as, on the cache response path."""
    ex.path, ex.status = h.ResponsePath.CACHE, cached.status
    headers = ex.headers(cached.content_type)
    await send_whole(send, cached.status, headers, cached.body)
    ex.rec.answered(status=cached.status, path=ex.path.value, model=ex.model, streamed=cached.streamed,
                    complete=True, content_type=cached.content_type)


def _losses(ex: Exchange, model_name: str) -> list:
    out = ex.outbound.get(model_name)
    return list(out.losses) if out is not None else []


def _upstream_answered(ex: Exchange, result: Stream | Whole) -> None:
    r = ex.route
    assert r is not None
    ex.model, ex.status = result.model.name, result.status
    if result.model.name != r.candidates[0].name:
        ex.path = h.ResponsePath.FALLBACK


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
        await _send(ex, send, body, SSE, streamed=True)
        await adapter.remember(req, tr.final())
        return
    reply = adapter.whole(req, result.model.api_format, result.status, result.body, result.content_type)
    ex.status = reply.status
    ex.warnings = render_warnings(losses + list(reply.losses), codes=ex.codes)
    await _send(ex, send, reply.body, reply.content_type, streamed=False)
    if reply.status < 400:
        await adapter.remember(req, reply.body)


async def _relay(ex: Exchange, send: Send, stream: Stream) -> None:
    """Relay the backend's SSE in the client's protocol as it comes; a failure or the deadline ends it with
    the protocol's error event.

    The translator releases whole events only (the same-protocol one passes bytes
    through unchanged), so an upstream that dies mid-event never leaves half a
    JSON line before the error event.
    """
    _upstream_answered(ex, stream)
    req, adapter, rec = ex.req, ex.adapter, ex.rec
    assert req is not None
    tr = adapter.stream_translator(req, stream.model.api_format)
    ex.warnings = render_warnings(_losses(ex, stream.model.name), codes=ex.codes)
    complete, failure = False, None
    try:
        await send({"type": "http.response.start", "status": stream.status,
                    "headers": ex.headers(SSE) + [(b"cache-control", b"no-cache")]})
        with ex.deadline_scope() as cut:
            await _pass(ex, send, tr.feed(stream.first))
            try:
                async for chunk in stream.rest:
                    await _pass(ex, send, tr.feed(chunk))
                complete = True
            except Exception as exc:  # httpx stream errors after the first byte: no fallback now
                log.warning("upstream %s failed mid-stream: %r", stream.backend.label, exc)
                ex.state.metrics.upstream_errors.inc(stream.model.name, stream.backend.label, "midstream")
                # A broken event or an answer past its size keeps its own code; the rest are the transport's.
                kind = type(exc) if isinstance(exc, (UpstreamInvalid, UpstreamTooLarge)) else UpstreamError
                failure = kind(f"upstream {stream.backend.label} failed mid-stream: {exc}")
        if cut.cancelled_caught and ex.drained():
            failure = ShuttingDown("the router is stopping; its graceful timeout passed while the answer streamed")
        elif cut.cancelled_caught:
            failure = RequestTimeout("the request's deadline passed while the answer streamed")
            ex.state.metrics.timeouts.inc(ex.api, "answer")
        if failure is not None:
            ex.status = failure.status
            rec.failed(failure.stage, failure)
            tail = tr.fail(failure)
        else:
            tail = tr.close()
        ex.feed(tail)
        await send({"type": "http.response.body", "body": tail, "more_body": False})
        rec.answered(status=ex.status, path=ex.path.value, model=ex.model, streamed=True, complete=complete,
                     content_type=SSE)
        if complete:
            await adapter.remember(req, tr.final())
    finally:
        # Shielded: when the client left, this scope is already cancelled, and
        # the upstream connection must still be closed so the model stops.
        with trio.CancelScope(shield=True):
            with trio.move_on_after(5):
                await stream.aclose()


async def _pass(ex: Exchange, send: Send, out: bytes) -> None:
    if out:
        ex.feed(out)
        await send({"type": "http.response.body", "body": out, "more_body": True})


async def error(ex: Exchange, send: Send, exc: VsrError) -> None:
    """The error in the client's protocol, with the public headers."""
    status, content_type, body = ex.adapter.error(exc)
    ex.status = status
    ex.recipe = ex.recipe or getattr(exc, "recipe", None)
    ex.path = h.ResponsePath.RATE_LIMITED if isinstance(exc, RateLimited) else h.ResponsePath.ERROR
    ex.warnings = render_warnings([], codes=ex.codes)
    headers = ex.headers(content_type)
    if exc.retry_after_s is not None:
        headers.append((b"retry-after", str(exc.retry_after_s).encode()))
    await send_whole(send, status, headers, body)
