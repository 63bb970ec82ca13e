"""``POST /v1/chat/completions``: the hot path, as a lean ASGI handler.

read body → decode (msgspec) → route → dispatch with fallback → relay whole
or streamed → public headers → metrics. No quart here: it costs ~40-60 % more
CPU per request on these machines (STACK-NOTES).
"""
from __future__ import annotations

import logging
import time

import trio

from ..errors import RequestError, RoutingError, UpstreamError, VsrError
from ..headers import registry as h
from ..headers.public import public_headers
from ..protocol.errors import openai_error_body
from ..protocol.rewrite import ModelRewriter
from ..protocol.sse import EventCutter, error_event
from ..upstream import Stream, Whole
from .asgi import ClientGone, DisconnectWatch, HeaderList, Receive, Scope, Send, header, read_body, send_whole
from .recording import Recording
from .route import decode_chat, route_chat
from .state import AppState

log = logging.getLogger("vsr_fast.chat")
API = "chat"
_TO_PROVIDER = tuple(name.encode() for name in h.TO_PROVIDER)
_JSON = (b"content-type", b"application/json")
_TRACE = h.TRACE.encode()
_DEBUG = h.DEBUG.encode()


class Exchange:
    """What one request has decided so far; read by headers, metrics and errors."""

    __slots__ = ("recipe", "decision", "model", "path", "status", "started", "trace", "extra", "rec")

    def __init__(self) -> None:
        self.recipe: str | None = None
        self.decision: str | None = None
        self.model: str | None = None
        self.path = h.ResponsePath.UPSTREAM
        self.status = 500
        self.started = time.perf_counter()
        self.trace: str | None = None
        self.extra: list[tuple[bytes, bytes]] = []
        self.rec: Recording | None = None

    def headers(self, state: AppState) -> HeaderList:
        out = public_headers(
            config_version=state.config_version, path=self.path,
            recipe=self.recipe, decision=self.decision, model=self.model,
        )
        if self.trace is not None:
            out.append((_TRACE, self.trace.encode()))
        out += self.extra
        return out


def provider_headers(scope: Scope) -> list[tuple[str, str]]:
    """The client headers registered to reach providers; every other one, x-vsr-* included, stays here."""
    return [(k.decode(), v.decode("latin-1")) for k, v in scope["headers"] if k in _TO_PROVIDER]


async def handle_chat(state: AppState, scope: Scope, receive: Receive, send: Send) -> None:
    """Serve one Chat Completions request end to end."""
    ex = Exchange()
    ex.rec = Recording(state, scope)
    try:
        await _serve(state, ex, scope, receive, send)
    except VsrError as exc:
        ex.rec.failed(_stage(exc), exc)
        await _send_error(state, ex, send, exc)
    except ClientGone:
        ex.status = 499
        state.metrics.disconnects.inc(API)
        ex.rec.answered(status=499, path=ex.path.value, model=ex.model, streamed=False, complete=False, content_type=None)
    except Exception:  # the ASGI edge: a bug, never Cancelled (a BaseException)
        log.exception("internal error on %s", scope.get("path"))
        await _send_error(state, ex, send, VsrError("internal error"))
    finally:
        m = state.metrics
        m.requests.inc(API, ex.recipe or "", ex.decision or "", ex.model or "", str(ex.status))
        m.latency.observe(time.perf_counter() - ex.started, API, ex.decision or "", ex.model or "")


async def _serve(state: AppState, ex: Exchange, scope: Scope, receive: Receive, send: Send) -> None:
    raw = await read_body(scope, receive, state.max_body_bytes)
    request = decode_chat(raw)
    route = await route_chat(state.table, request, lambda: state.identity(scope), state.systemone)
    ex.recipe, ex.decision, ex.model = route.recipe, route.decision, route.candidates[0].name
    if state.debug_policy != "none" and header(scope, _DEBUG) is not None:
        ex.trace = state.trace_for(scope, route)
    if route.fallback:
        ex.path = h.ResponsePath.FALLBACK
    ex.rec.routed(state, scope, raw, request, route)
    replay = ex.rec.replay_header()
    if replay is not None:
        ex.extra.append(replay)
    cached = await ex.rec.cached(route)
    if cached is not None:
        await _send_cached(state, ex, send, cached)
        return
    rewrite = ModelRewriter(raw, request.model)
    body_for = lambda model: rewrite(model.upstream_model)  # noqa: E731
    extra = provider_headers(scope)
    failure: VsrError | None = None
    with trio.CancelScope() as cancel_on_leave:
        watch = DisconnectWatch(receive, send, cancel_on_leave)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch.run)
            # Expected failures are kept as values: a nursery would wrap them in an ExceptionGroup.
            try:
                await _answer(state, ex, watch.send, request.stream, route.candidates, body_for, extra)
            except VsrError as exc:
                failure = exc
            nursery.cancel_scope.cancel()
    if watch.gone:
        raise ClientGone
    if failure is not None:
        raise failure


async def _answer(state: AppState, ex: Exchange, send: Send, stream: bool, candidates, body_for, extra) -> None:
    if stream:
        answer = await state.dispatcher.stream(candidates, body_for, extra)
    else:
        answer = await state.dispatcher.whole(candidates, body_for, extra)
    _note_answer(ex, answer, candidates[0].name)
    ex.rec.attempts(answer.attempts)
    if isinstance(answer, Stream):
        await _relay(state, ex, send, answer)
    else:
        await _send_whole_answer(state, ex, send, answer)


def _note_answer(ex: Exchange, answer: Stream | Whole, first_choice: str) -> None:
    ex.model = answer.model.name
    ex.status = answer.status
    if answer.model.name != first_choice:
        ex.path = h.ResponsePath.FALLBACK


async def _send_whole_answer(state: AppState, ex: Exchange, send: Send, answer: Whole) -> None:
    headers = ex.headers(state)
    headers.append((b"content-type", answer.content_type.encode()))
    await send_whole(send, answer.status, headers, answer.body)
    ex.rec.feed(answer.body)
    ex.rec.answered(status=answer.status, path=ex.path.value, model=ex.model, streamed=False, complete=True,
                    content_type=answer.content_type)


async def _send_cached(state: AppState, ex: Exchange, send: Send, cached) -> None:
    """A stored answer, whole or as the SSE bytes it was streamed as, on the cache response path."""
    ex.path = h.ResponsePath.CACHE
    ex.status = cached.status
    headers = ex.headers(state)
    headers.append((b"content-type", cached.content_type.encode()))
    await send_whole(send, cached.status, headers, cached.body)
    ex.rec.answered(status=cached.status, path=ex.path.value, model=ex.model, streamed=cached.streamed,
                    complete=True, content_type=cached.content_type)


async def _relay(state: AppState, ex: Exchange, send: Send, stream: Stream) -> None:
    """Relay SSE bytes as they come, cut at event boundaries; an upstream failure ends it with an error event."""
    headers = ex.headers(state)
    headers += [(b"content-type", stream.content_type.encode()), (b"cache-control", b"no-cache")]
    cutter = EventCutter()
    rec = ex.rec
    complete = False
    try:
        await send({"type": "http.response.start", "status": stream.status, "headers": headers})
        out = cutter.feed(stream.first)
        if out:
            rec.feed(out)
            await send({"type": "http.response.body", "body": out, "more_body": True})
        try:
            async for chunk in stream.rest:
                out = cutter.feed(chunk)
                if out:
                    rec.feed(out)
                    await send({"type": "http.response.body", "body": out, "more_body": True})
            tail = cutter.flush()
            complete = True
        except Exception as exc:  # httpx stream errors after the first byte: no fallback now
            log.warning("upstream %s failed mid-stream: %r", stream.backend.label, exc)
            state.metrics.upstream_errors.inc(stream.model.name, stream.backend.label, "midstream")
            ex.status = 502
            tail = error_event(f"upstream {stream.backend.label} failed mid-stream", "upstream_error", "upstream_failed")
        rec.feed(tail)
        await send({"type": "http.response.body", "body": tail, "more_body": False})
        rec.answered(status=ex.status, path=ex.path.value, model=ex.model, streamed=True, complete=complete,
                     content_type=stream.content_type)
    finally:
        # Shielded: when the client left, this scope is already cancelled, and
        # the upstream connection must still be closed so the model stops.
        with trio.CancelScope(shield=True):
            with trio.move_on_after(5):
                await stream.aclose()


def _stage(exc: VsrError) -> str:
    if isinstance(exc, UpstreamError):
        return "upstream"
    if isinstance(exc, RoutingError):
        return "route"
    return "decode" if isinstance(exc, RequestError) else "internal"


async def _send_error(state: AppState, ex: Exchange, send: Send, exc: VsrError) -> None:
    ex.status = exc.status
    ex.recipe = ex.recipe or getattr(exc, "recipe", None)
    ex.path = h.ResponsePath.ERROR
    headers = ex.headers(state)
    headers.append(_JSON)
    await send_whole(send, exc.status, headers, openai_error_body(exc))
