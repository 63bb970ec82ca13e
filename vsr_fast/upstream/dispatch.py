"""Calling the chosen models: attempts in order, fallback before the first byte.

Order: each candidate model's backend_refs in turn, then the next candidate; the ejected ones (passive or
active health) of every candidate come last, in that order.
A connect error, a timeout, a 429, a 5xx or the backend's 401, 403, 404 or 408 (the router's own credential
revoked, the model missing on that deployment, a timeout: LiteLLM's reading, the deployment failing) moves on, and
so does an answer the router cannot trust (``answers``: a redirect or an unknown status, a success
body not of its protocol's shape, an answer past ``max_response_bytes``); any
other status is the model's answer, its body relayed with the backend's key
struck out: a 400, 413 or 422 is the request's fault, and a delegated backend's 401 or 403 is the client's own
credential refused, never another backend's business. A backend already holding ``max_pending`` requests is skipped
at once; with every one skipped the client gets 503 with Retry-After
(``BackendsBusy``) rather than a place in a queue. A stream counts as started once its
first well-formed event arrived, so a backend that fails or streams something
else before that still falls back; after that, the relay reports the failure
in-stream (``answers.Checked`` keeps checking each event).

Transport errors (httpcore's, ``transport.TransportError``) are mapped into vsr-fast's tree here, once.
"""
from __future__ import annotations

import email.utils
import inspect
import logging
import math
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Protocol
from dataclasses import dataclass, field

import trio

from .. import tracing
from ..config.schema import ProviderModel
from ..errors import (BackendsBusy, CallsSpent, UpstreamError, UpstreamsExhausted, UpstreamStatus,
                      UpstreamTimeout, cause_words, status_cause)
from . import answers, billing, cut, transport
from .billing import SENDING, Sending
from .pool import Backend, Upstreams, credential_header
from .transport import Response, TransportError

# Answers that may be a backend's own failure rather than the request's: its credential (the router's) refused or
# revoked, the model missing on that deployment, a timeout of its own. The next backend is tried.
BACKEND_FAULT_STATUS = frozenset({401, 403, 404, 408})
# What counts against a backend's health; a 429 is a limit of the caller's, not a sick backend. Of the 4xx only a
# 401 (the router's own key refused): a request's content can make a backend answer 403 (a WAF), 404 (an unknown
# file or conversation id) or 408 (a long prompt), and one client must not eject a backend for everyone.
UNHEALTHY_STATUS = frozenset({500, 502, 503, 504, 529, 401})
RETRYABLE_STATUS = UNHEALTHY_STATUS | BACKEND_FAULT_STATUS | {429}
# A delegated backend's 4xx answers are the client's, relayed: its own credential, its own access to the model (a
# 404 is OpenAI's "does not exist or you do not have access"); never another backend with the router's key.
CLIENTS_OWN_STATUS = BACKEND_FAULT_STATUS
# Statuses that ask for the same request again later (with Retry-After); 529 is Anthropic's 503.
RETRY_LATER_STATUS = frozenset({429, 503, 529})
# A stream's opening events (``answers.PREAMBLE``: pings among them) are held back from the client until its answer
# begins, so an error event before that can still fail over; a backend pinging for minutes would leave the client
# without a status line for as long, and its events in memory. Past these, the held events go to the client and the
# stream is relayed as it comes (a failure after that reaches the client in the stream). The time is looked at as
# each read arrives: a backend silent in between is bounded by its read timeout. The bytes bound is well above
# what opening events hold (a Responses ``response.created`` and ``.in_progress`` each echo the request's
# instructions and tools, tens of KiB for a coding agent): a lower one would end the failover for exactly those.
# One second: an error a backend sends in place of its answer comes at once (Anthropic's overloaded_error right after
# message_start); longer, a trickling answer's status line would wait on it, and a request whose deadline passed
# while held would get a whole 504 where the stream it began had started.
HOLD_MAX_S = 1.0
HOLD_MAX_BYTES = 1024 * 1024
Take = Callable[[], bool]     # a caller's budget, asked before each attempt: False when it has no call left
NO_BACKEND = UpstreamError("no backend is configured for the chosen models")
log = logging.getLogger("vsr_fast.upstream")
Headers = list[tuple[str, str | bytes]]   # bytes for values passed on from a client, as it sent them
_JSON_HEADERS = ((b"content-type", b"application/json"), (b"accept-encoding", b"identity"))
_TRACE_HEADERS = (b"traceparent", b"tracestate")


@dataclass(slots=True)
class Attempt:
    model: str
    backend: str
    status: int | None
    error: str | None
    seconds: float
    cause: str | None = None        # why it failed in one word (UpstreamError.cause); None for a success
    failed: bool = False            # the backend's or model's failure (not the request's, not the client's)
    usage: tuple[int, int] | None = None    # (input, output) its answer reported, where a Looper read it
    # Tried after another attempt of the same call failed (the next backend or model, or a retry round). A
    # call is one ``Dispatcher.whole``/``stream``: an executor's calls (Looper hops) each start afresh.
    fallback: bool = False
    # A stream's attempt, its first event arrived: counted by outcome once the stream ends (``Stream.aclose``),
    # as ok or what broke it mid-way, never ok at its first byte.
    streaming: bool = False


@dataclass(slots=True)
class Whole:
    """A complete upstream answer; an error's ``content_type`` is the backend's own ("" for none)."""

    model: ProviderModel
    backend: Backend
    status: int
    body: bytes
    content_type: str
    attempts: list[Attempt] = field(default_factory=list)
    retry_after_s: int | None = None     # an error's Retry-After, for the client
    rate_headers: list[tuple[bytes, bytes]] = field(default_factory=list)   # the backend's x-ratelimit-*, renamed
    first_byte: float | None = None      # perf_counter() as its status and headers arrived; None: no backend's own


@dataclass(slots=True)
class Stream:
    """An upstream stream whose first chunk has arrived; ``aclose`` must be awaited."""

    model: ProviderModel
    backend: Backend
    status: int
    content_type: str
    first: bytes
    rest: AsyncIterator[bytes]
    response: Response
    attempts: list[Attempt] = field(default_factory=list)
    first_byte: float | None = None      # perf_counter() as its first event arrived (``first``); None: no backend's
    # Called once with the attempt's outcome as the stream ends: "ok", midstream_<cause> (``broke``), or deadline
    # or cancelled (``cut_short``).
    ended: Callable[[str], None] | None = None
    outcome: str = "ok"

    @property
    def rate_headers(self) -> list[tuple[bytes, bytes]]:
        return self.response.rate_headers()

    def broke(self, cause: str) -> None:
        """The stream failed after its first event, for ``cause`` (a failure_cause)."""
        self.outcome = f"midstream_{cause}"

    def cut_short(self, cause: str) -> None:
        """A cancellation ended the stream before its end (``cut``: a deadline passed, or the client left): counted
        as an attempt it cuts before the first byte is, never as one that ended ok."""
        if self.outcome == "ok":
            self.outcome = cause

    async def aclose(self) -> None:
        ended, self.ended = self.ended, None
        if ended is not None:
            ended(self.outcome)
        await self.response.aclose()    # gives its backend's connection lease back


class Outbound(Protocol):
    """What one candidate model is sent: POST ``path`` under the backend's base URL."""

    path: str
    body: bytes
    headers: tuple[tuple[str, str | bytes], ...]
    credential: str | None
    tool_objects: bool


# A candidate's request, built when it is first tried; awaitable where a rewrite asks System One (masking).
OutboundFor = Callable[[ProviderModel], "Outbound | Awaitable[Outbound]"]


async def _built(outbound_for: OutboundFor, model: ProviderModel) -> "Outbound":
    out = outbound_for(model)
    return await out if inspect.isawaitable(out) else out


class CallBudget:
    """A Looper executor's ``max_calls``: every upstream attempt (transport retries included) and every rating or
    judging call takes one; ``take`` is the dispatcher's ``Take``, asked before each attempt."""

    def __init__(self, max_calls: int | None) -> None:
        self.max_calls, self.made = max_calls, 0

    def spent(self) -> bool:
        return self.max_calls is not None and self.made >= self.max_calls

    def take(self) -> bool:
        if self.spent():
            return False
        self.made += 1
        return True


class Dispatcher:
    """Sends one request to its candidates in fallback order."""

    def __init__(self, upstreams: Upstreams, on_attempt: Callable[[Attempt], None],
                 on_stream_end: Callable[[Attempt, str], None] | None = None) -> None:
        self._upstreams = upstreams
        self._on_attempt = on_attempt
        self._on_stream_end = on_stream_end

    def _order(self, candidates: tuple[ProviderModel, ...]) -> Iterator[tuple[ProviderModel, Backend]]:
        # Each model's order is drawn when the request reaches it: a request the first model answers
        # moves no other model's round robin. An ejected backend waits behind every other candidate's
        # backends, not only its own model's: a model's lone backend, ejected, would otherwise cost each
        # request its timeout before the fallback model is asked. Still tried last (Envoy's panic
        # threshold): an ejection orders backends, it never fails a request alone.
        ejected: list[tuple[ProviderModel, Backend]] = []
        for model in candidates:
            now = time.monotonic()
            for backend in self._upstreams.order(model.name):
                if backend.up(now):
                    yield model, backend
                else:
                    ejected.append((model, backend))
        yield from ejected

    def _headers(self, backend: Backend, extra: Headers, out: "Outbound") -> list[tuple[bytes, bytes]]:
        headers = [*_JSON_HEADERS, *map(_as_bytes, extra), *map(_as_bytes, out.headers)]
        if backend.auth:
            headers.append(backend.auth)
        elif backend.delegated is not None:
            credential = out.credential
            if credential:
                headers.append(credential_header(backend.delegated, credential))
        return headers

    def _record(self, attempts: list[Attempt], model: ProviderModel, backend: Backend, started: float,
                status: int | None, failure: UpstreamError | None, health: bool = True, streaming: bool = False) -> float:
        """One attempt's outcome: counted, held against the backend's health (or clearing it; neither without
        ``health``), and a failure logged at INFO with its cause. Returns the perf_counter() it ended at."""
        error = failure.code if failure is not None else None
        cause = failure.cause if failure is not None else \
            status_cause(status) if status is not None and status >= 400 else None
        failed = error is not None or status is not None and (status >= 500 or _moves_on(backend, status))
        now = time.perf_counter()
        attempt = Attempt(model.name, backend.label, status, error, now - started, cause, failed,
                          fallback=bool(attempts), streaming=streaming)
        attempts.append(attempt)
        if tracing.tracer is not None:
            tracing.end_attempt(started, {
                "vsr.model": model.name, "vsr.backend": backend.label, "http.response.status_code": status,
                "vsr.upstream.cause": cause, "server.address": backend.base}, cause)
        if cause is not None:
            log.info("upstream attempt failed: model=%s backend=%s cause=%s: %s", model.name, backend.label, cause,
                     failure.detail if failure is not None else f"HTTP {status}")
        if error == BackendsBusy.code or not health:
            pass        # the router's own bound, or an error event of no known cause: not the backend's health
        elif error is not None or status in UNHEALTHY_STATUS and _moves_on(backend, status):
            if backend.failed(self._upstreams.outlier, time.monotonic()):
                log.warning("backend %s ejected after %d failures in a row (the last: %s)", backend.label,
                            self._upstreams.outlier.consecutive_failures, cause)
        else:
            backend.succeeded()
        self._on_attempt(attempt)
        return now

    def _record_cut(self, attempts: list[Attempt], model: ProviderModel, backend: Backend, started: float,
                    status: int | None, rnd: "_Round") -> None:
        """An attempt a cancellation cut (``cut``): on the call's list, counted by its outcome (deadline or
        cancelled), never held against the backend's health."""
        attempt = Attempt(model.name, backend.label, status, None, time.perf_counter() - started,
                          cut.cause(rnd.deadline), fallback=bool(attempts))
        attempts.append(attempt)
        if tracing.tracer is not None:
            tracing.end_attempt(started, {"vsr.model": model.name, "vsr.backend": backend.label,
                                          "http.response.status_code": status, "vsr.upstream.cause": attempt.cause,
                                          "server.address": backend.base}, attempt.cause)
        self._on_attempt(attempt)

    # ``whole`` and ``stream`` hand back ``_rounds``' coroutine for the caller to await, rather than awaiting it in a
    # frame of their own: every scheduler pass that resumes the call resumes each frame of its await chain.
    def whole(self, candidates: tuple[ProviderModel, ...], outbound_for: OutboundFor, extra: Headers,
              take: Take | None = None) -> Awaitable[Whole]:
        """The first answer that is not a retryable failure."""
        return self._rounds(self._whole_round, candidates, outbound_for, extra, take)

    def stream(self, candidates: tuple[ProviderModel, ...], outbound_for: OutboundFor,
               extra: Headers, take: Take | None = None) -> Awaitable[Stream | Whole]:
        """An open stream with its first chunk, or a Whole for a non-retryable error answer (or a whole answer
        from a backend that does not stream, such as an images model)."""
        return self._rounds(self._stream_round, candidates, outbound_for, extra, take)

    async def _rounds(self, round_fn, candidates, outbound_for, extra, take: Take | None = None):
        """Rounds over the candidates until one answers; another round only after one that a connect error,
        a 429 or a 503 ended, once its Retry-After or a jittered backoff passed, and only within the request's
        deadline (the pipeline's cancel scope). Nothing has reached the client before a round ends. ``take``
        (a Looper's max_calls) is asked before every attempt, retries included: refused, no attempt is made."""
        attempts: list[Attempt] = []
        policy = self._upstreams.retries
        failure: UpstreamError = NO_BACKEND
        spent = False
        try:
            for n in range(policy.max_retries + 1):
                state = _Round(take, deadline=trio.current_effective_deadline())
                answer = await round_fn(candidates, outbound_for, extra, attempts, state)
                if not isinstance(answer, UpstreamError):
                    return answer
                if answer is not NO_BACKEND or failure is NO_BACKEND:
                    failure = answer        # a round the budget stopped before any attempt keeps the last failure
                if state.spent:
                    spent = True
                    break
                wait = _retry_wait(state, n, policy) if n < policy.max_retries else None
                if wait is None or trio.current_time() + wait >= trio.current_effective_deadline():
                    break
                await trio.sleep(wait)
        except trio.Cancelled:
            cut.left(attempts)      # the call's attempts, the cut one last, for whoever caught the cancellation
            raise
        raise _exhausted(failure, attempts, spent)

    async def _whole_round(self, candidates, outbound_for, extra, attempts: list[Attempt],
                           rnd: "_Round") -> "Whole | UpstreamError":
        failure: UpstreamError = NO_BACKEND
        for model, backend in self._order(candidates):
            if not rnd.took():
                break
            started = time.perf_counter()
            out = await _built(outbound_for, model)
            resp = await self._open(attempts, model, backend, started, out, extra, rnd)
            if isinstance(resp, UpstreamError):
                failure = resp
                continue
            # The answer's first byte (its head): the record's ttfb_ms. The one clock read a whole answer adds.
            first_byte = time.perf_counter()
            status = resp.status
            try:
                body = await _read_whole(resp, model, backend, out)
            except BaseException as exc:
                _cut(status)
                if isinstance(exc, trio.Cancelled):
                    self._record_cut(attempts, model, backend, started, status, rnd)
                if not isinstance(exc, UpstreamError):
                    raise
                # Kept past this loop: not with its traceback, whose frames hold what was read.
                failure = exc.with_traceback(None)
                self._record(attempts, model, backend, started, status, failure)
                continue
            finally:
                await resp.aclose()
            self._record(attempts, model, backend, started, status, None)
            if _moves_on(backend, status):
                failure = _status_failure(status, body, resp, model, backend, rnd)
                continue
            return _whole(model, backend, resp, body, attempts, first_byte)
        return failure

    async def _stream_round(self, candidates, outbound_for, extra, attempts: list[Attempt],
                            rnd: "_Round") -> "Stream | Whole | UpstreamError":
        failure: UpstreamError = NO_BACKEND
        for model, backend in self._order(candidates):
            if not rnd.took():
                break
            started = time.perf_counter()
            out = await _built(outbound_for, model)
            resp = await self._open(attempts, model, backend, started, out, extra, rnd)
            if isinstance(resp, UpstreamError):
                failure = resp
                continue
            status = resp.status
            content_type = resp.header(b"content-type", "text/event-stream")
            try:
                if status >= 400 or "text/event-stream" not in content_type:
                    first_byte = time.perf_counter()    # a whole answer's head, as ``_whole_round`` reads it
                    try:
                        body = await _read_whole(resp, model, backend, out, streamed=True)
                    finally:
                        await resp.aclose()
                    self._record(attempts, model, backend, started, status, None)
                    if _moves_on(backend, status):
                        failure = _status_failure(status, body, resp, model, backend, rnd)
                        continue
                    return _whole(model, backend, resp, body, attempts, first_byte)
                answers.check_status(status, backend.label)
                rest = answers.Checked(resp.chunks(), answers.EventCheck(model.api_format, backend.label,
                                                                            backend.max_event_bytes),
                                       backend.max_response_bytes, backend.label)
                first = await _first_event(rest)
                failed = rest.failed_at_once(model.api_format, backend.secret)
                if failed is not None:
                    # Its error event before any of the answer: nothing reached the client, so the failure is
                    # the backend's error status (an overloaded_error its 529), counted and moved on from as one;
                    # an event that says no status is a 502 that is not held against the backend's health.
                    await resp.aclose()
                    status, body, said = failed
                    ended = self._record(attempts, model, backend, started, status, None, health=said)
                    if _moves_on(backend, status):
                        failure = _status_failure(status, body, resp, model, backend, rnd, "application/json")
                        continue
                    return Whole(model, backend, status, body, "application/json", attempts,
                                 rate_headers=resp.rate_headers(), first_byte=ended)
                # The attempt ended as its first event arrived: that clock read is the record's ttfb_ms too.
                first_byte = self._record(attempts, model, backend, started, status, None, streaming=True)
                attempt, said = attempts[-1], self._on_stream_end
                ended = None if said is None else lambda outcome: said(attempt, outcome)
                return Stream(model, backend, status, content_type, first, rest, resp, attempts, first_byte, ended)
            except (UpstreamError, *TransportError) as exc:
                _cut(status)
                await resp.aclose()
                failure = exc.with_traceback(None) if isinstance(exc, UpstreamError) \
                    else _transport_failure(exc, backend)
                self._record(attempts, model, backend, started, status, failure)
                continue
            except BaseException as exc:
                _cut(status)
                if isinstance(exc, trio.Cancelled):
                    self._record_cut(attempts, model, backend, started, status, rnd)
                await resp.aclose()
                raise
        return failure

    async def _open(self, attempts: list[Attempt], model: ProviderModel, backend: Backend, started: float,
                    out: "Outbound", extra: Headers, rnd: "_Round") -> Response | UpstreamError:
        """The backend's response with its headers read and its body not yet, holding a lease on one of the
        backend's connections (closing the response gives it back); or the failure, recorded, with none held."""
        if backend.pending >= backend.max_pending:
            failure: UpstreamError = BackendsBusy.at(
                backend.label, f"already holds its {backend.max_pending} pending requests")
        else:
            headers = self._headers(backend, extra, out)
            if tracing.tracer is not None:
                # The attempt's own traceparent (and the tracestate with it) in place of the client's.
                headers = [h for h in headers if h[0] not in _TRACE_HEADERS] + tracing.begin_attempt()
            lease = None
            sending = Sending()
            token = SENDING.set(sending)
            try:
                lease = backend.lease_now() or await backend.lease()
                resp = await transport.send(backend.pool(lease.shard), backend.origin, out.path, out.body, headers,
                                            backend.timeouts, backend.label, lease)
            except BaseException as exc:
                if lease is not None:
                    lease.release()
                if sending.sent:    # cut after its request left (a timeout, a broken connection, a cancel)
                    billing.cut()
                if isinstance(exc, trio.Cancelled):
                    self._record_cut(attempts, model, backend, started, None, rnd)
                if not isinstance(exc, TransportError):
                    raise
                failure = _transport_failure(exc, backend)
                # Nothing reached a backend that refused the connection: always safe to send again. Not one
                # whose TLS handshake failed: its certificate fails the next time too (the next backend is tried).
                rnd.retryable |= isinstance(exc, transport.ConnectError) and failure.cause != "tls_error"
            else:
                return resp
            finally:
                SENDING.reset(token)
        self._record(attempts, model, backend, started, None, failure)
        return failure


def _cut(status: int) -> None:
    """An answer of ``status`` whose body failed or was cancelled: one begun (2xx) was cut, and may be billed."""
    if 200 <= status < 300:
        billing.cut()


def _moves_on(backend: Backend, status: int) -> bool:
    """Whether a backend's answer with ``status`` is its failure, the next backend tried: a delegated backend's
    401, 403, 404 or 408 is the client's own answer (its credential, its access), relayed."""
    return status in RETRYABLE_STATUS and not (backend.delegated is not None and status in CLIENTS_OWN_STATUS)


async def _read_whole(resp: Response, model: ProviderModel, backend: Backend, out: Outbound, *,
                      streamed: bool = False) -> bytes:
    """A whole answer the router may relay: a relayable status, bounded, a success of its protocol's shape
    (``streamed``, to a stream request: an answer all through, to be written as events), an error sanitized.
    Every failure, a broken connection's included, is an UpstreamError."""
    label = backend.label
    answers.check_status(resp.status, label)
    try:
        body = await answers.read_bounded(resp, backend.max_response_bytes, label)
    except TransportError as exc:
        raise _transport_failure(exc, backend) from None
    if resp.status >= 400:
        return answers.sanitized(body, backend.secret, model.api_format, resp.status, label)
    answers.check_whole(model.api_format, out.path, body, label, streamed, out.tool_objects)
    return body


async def _first_event(chunks: answers.Checked) -> bytes:
    """The stream's bytes up to its first well-formed event of the answer (past its opening ones, such as
    ``message_start`` or ``response.created``), or up to its end: a backend whose stream is broken from the start
    (not an event stream, an empty one, a first event that is no event of its protocol, an error event before
    any of the answer) is a failure while the router can still fall back, before a byte reaches the client.
    Opening events are held HOLD_MAX_S and HOLD_MAX_BYTES at most: past either, what came is the client's."""
    first: list[bytes] = []      # joined once: a first event of many reads is not copied again at each
    held, until = 0, trio.current_time() + HOLD_MAX_S
    async for chunk in chunks:
        first.append(chunk)
        held += len(chunk)
        if chunks.answering or chunks.ended or held >= HOLD_MAX_BYTES or trio.current_time() >= until:
            break
    return first[0] if len(first) == 1 else b"".join(first)


def _as_bytes(header: tuple[str, str | bytes]) -> tuple[bytes, bytes]:
    # Names are the router's own (ASCII); a client's value stays the bytes it sent.
    name, value = header
    return (name.encode("ascii") if isinstance(name, str) else name,
            value.encode("ascii") if isinstance(value, str) else value)


def failure_cause(exc: BaseException) -> str:
    """The cause of a failure while an answer's body was read: an UpstreamError's own, a transport error's."""
    if isinstance(exc, UpstreamError):
        return exc.cause
    if isinstance(exc, TransportError):
        return transport.cause(exc)
    return "stream_error"


_HEAD_WHY = f"a header block or chunk line past {transport.HEAD_MAX_BYTES >> 10} KiB"


def _transport_failure(exc: Exception, backend: Backend) -> UpstreamError:
    # The client reads the cause in words; the backend, its address and the exception go to the log only.
    cause = transport.cause(exc)
    if isinstance(exc, transport.Timeout):
        return UpstreamTimeout(cause_words(cause, backend.timeouts), cause=cause,
                               detail=f"backend {backend.label} timed out ({type(exc).__name__})")
    if cause == "tls_error":        # httpcore's ConnectError says nothing: the ssl error under it does
        return UpstreamError(cause_words(cause, why=transport.tls_reason(exc)), cause=cause,
                             detail=f"backend {backend.label} failed: {type(exc).__name__}: "
                                    f"{transport.tls_reason(exc, logged=True)}")
    if cause == "too_large":        # h11's "Receive buffer too long" says neither what nor how much
        return UpstreamError(cause_words(cause, why=_HEAD_WHY), cause=cause,
                             detail=f"backend {backend.label} failed: {type(exc).__name__}: {_HEAD_WHY}")
    return UpstreamError(cause_words(cause), cause=cause,
                         detail=f"backend {backend.label} failed: {type(exc).__name__}: {exc or 'connection failed'}")


@dataclass(slots=True)
class _Round:
    """What one round over the candidates learned about trying again."""

    take: "Take | None" = None
    retryable: bool = False
    retry_after: float | None = None     # the largest Retry-After (seconds) a backend sent
    spent: bool = False                  # ``take`` refused an attempt: no more in this call
    # The deadline the round ran under, read as it began: a cancelled scope's reads -inf, so a cut attempt's
    # outcome (``cut.cause``) is told from it.
    deadline: float = math.inf

    def took(self) -> bool:
        """Whether the next attempt may be made (the caller's budget took it)."""
        if self.take is None or self.take():
            return True
        self.spent = True
        return False


def _retry_wait(rnd: _Round, n: int, policy) -> float | None:
    """Seconds before round ``n + 1``, or None for no retry."""
    if not rnd.retryable:
        return None
    backoff = min(policy.max_backoff_ms, policy.backoff_base_ms * 2 ** n) / 1000 * random.uniform(0.5, 1.0)
    if rnd.retry_after is None:
        return backoff
    if rnd.retry_after * 1000 > policy.max_retry_after_ms:
        return None
    return max(rnd.retry_after, backoff)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """A Retry-After header's delay: delta-seconds or an HTTP date (RFC 9110 10.2.3); None if absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _retry_after(resp: Response) -> float | None:
    return retry_after_seconds(resp.header(b"retry-after", ""))


def _whole_seconds(delay: float | None) -> int | None:
    # Retry-After for the client: whole seconds, an HTTP date the backend sent made a delay.
    return math.ceil(delay) if delay is not None else None


def _whole(model: ProviderModel, backend: Backend, resp: Response, body: bytes, attempts: list[Attempt],
           first_byte: float) -> Whole:
    if resp.status < 400:
        return Whole(model, backend, resp.status, body, resp.header(b"content-type", "application/json"), attempts,
                     rate_headers=resp.rate_headers(), first_byte=first_byte)
    # An error's own content type: the wrapper of a body not in the client's error shape names it.
    return Whole(model, backend, resp.status, body, resp.header(b"content-type", ""), attempts,
                 _whole_seconds(_retry_after(resp)), resp.rate_headers(), first_byte)


def _status_failure(status: int, body: bytes, resp: Response, model: ProviderModel, backend: Backend,
                    rnd: _Round, content_type: str | None = None) -> UpstreamError:
    delay = _retry_after(resp)
    if status in RETRY_LATER_STATUS:
        rnd.retryable = True
        if delay is not None:
            rnd.retry_after = max(delay, rnd.retry_after or 0.0)
            # Until then, this request's next round and other requests try the backend's peers first.
            backend.not_before = time.monotonic() + delay
    return UpstreamStatus.at(backend.label, f"answered HTTP {status}", status=status, body=body,
                             content_type=content_type or resp.header(b"content-type", "application/json"),
                             api_format=model.api_format, retry_after_s=_whole_seconds(delay),
                             headers=resp.rate_headers())


def _exhausted(failure: UpstreamError, attempts: list[Attempt], spent: bool = False) -> UpstreamError:
    """The client's error once every attempt failed: its message names each attempt's model and what it
    answered or why it failed, never a backend's name or address (those are in ``detail``, for the log).
    It keeps the attempts, for a caller that records each (the Looper). ``spent``: the caller's budget refused
    an attempt (``CallsSpent`` when it refused the first)."""
    if failure is NO_BACKEND:
        exhausted = CallsSpent("the budget has no call left") if spent else \
            UpstreamError("no backend is configured for the chosen models")
    else:
        exhausted = _gave_up(failure, attempts)
        exhausted.backend = attempts[-1].backend if attempts else None
    exhausted.attempts = list(attempts)
    return exhausted


def _gave_up(failure: UpstreamError, attempts: list[Attempt]) -> UpstreamError:
    """``_exhausted``'s error; ``detail`` names each attempt's backend, model and cause, for the log."""
    tried = ", ".join(f"{a.backend} ({a.model}): {_outcome(a, logged=True)}" for a in attempts)
    said = ", ".join(f"{a.model}: {_outcome(a)}" for a in attempts)
    message, detail = f"every upstream attempt failed ({said})", f"every upstream attempt failed ({tried})"
    if isinstance(failure, UpstreamStatus):
        # The last backend's own answer, as nginx and Envoy pass it on: its status, message, code and Retry-After
        # tell the client's SDK more than a gateway's 502 (a 429 is retried after its wait, a 400 is not). Its
        # message names the attempts when there were several.
        return UpstreamsExhausted(message, last=failure, tried=f"every upstream attempt failed: {said}"
                                  if len(attempts) > 1 else "", detail=detail)
    return type(failure)(f"{message}; the last: {failure.message}", cause=failure.cause,
                         detail=f"{detail}; the last: {failure.detail}")


def _outcome(a: Attempt, *, logged: bool = False) -> str:
    """One attempt for the client: the status it answered, or the cause it failed of, or both; for the log
    (``logged``), its cause always."""
    if a.status is None:
        return a.cause or "failed"
    return f"HTTP {a.status}" if a.cause is None or a.error is None and not logged else f"HTTP {a.status} {a.cause}"
