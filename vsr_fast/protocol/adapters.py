"""One adapter per client API, with one interface the server drives.

How the server uses this (one request)::

    adapter = adapters[api]                       # "chat", "messages", "responses", "images"
    req = adapter.decode(raw)                     # RequestError (400, param = the bad field's path)
    req = await adapter.prepare(req)              # Responses: previous_response_id expanded from the store
    route = table.route(adapter.model(req), lambda: adapter.canonical(req, identity))
    # the output contract's run-time rules go here: config.output.refusal(api, output, tool_choice),
    # and for Responses, adapter.with_image_tool(req, *config.output.image_tool_plan(...))
    outbound = {}                                 # per candidate model, for headers and warnings
    def body_for(model):
        out = outbound[model.name] = adapter.upstream(req, model.api_format, model.upstream_model)
        return out.body                           # POST to <endpoint>{out.path} with out.headers added
    if adapter.stream(req):
        answer = await dispatcher.stream(candidates, body_for, extra)
        # a Whole here is an error answer: render it with adapter.whole, as below
        tr = adapter.stream_translator(req, answer.model.api_format)   # content-type text/event-stream
        headers: x-vsr-warnings = render_warnings(outbound[answer.model.name].losses)
        send tr.feed(chunk) for every chunk (whole events only: no EventCutter needed),
        then tr.close(); on a mid-stream failure send tr.fail(exc) instead of close()
        await adapter.remember(req, tr.final())   # Responses only; None is ignored
    else:
        answer = await dispatcher.whole(candidates, body_for, extra)
        reply = adapter.whole(req, answer.model.api_format, answer.status, answer.body, answer.content_type)
        send reply.status, reply.content_type, reply.body,
             x-vsr-warnings = render_warnings(outbound[...].losses + reply.losses)
        await adapter.remember(req, reply.body)
    on VsrError exc: status, content_type, body = adapter.error(exc)
    on UpstreamStatus exc: adapter.whole(req, api_format, exc.status, exc.body): the backend's
        error body in the client's shape (as it is when it already has that shape)

Same protocol on both sides (chat->openai, messages->anthropic, responses->responses,
images->images) costs what the Chat hot path costs today: the client's bytes go out
with only ``model`` rewritten (``ModelRewriter``), answers and error bodies of the
protocol's error shape come back unchanged (any other error body is wrapped in that
shape), and streams pass through byte for byte (released at event boundaries). One exception: a Responses
answer's id is replaced by the router's own, whole and in every event (``_OwnIdStream``), since the router
stores it under that id.
Any other pair goes through the neutral forms of ``protocol.translate`` and records
what it could not carry as ``Loss``es. Pairs no protocol can bridge (a Chat or Messages client and an image
model, an Images client and a text model) raise ``UnsupportedCapability``.
"""
from __future__ import annotations

import abc
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from ..config import output as output_rules
from ..config.output import UnsupportedCapability
from ..errors import (echoing, PreviousResponseNotFound, RequestError, UnsupportedParameter, UpstreamAnswer, UpstreamError,
                      UpstreamStatus, VsrError)
from ..headers.registry import ANTHROPIC_BETA, ANTHROPIC_VERSION, SAME_FORMAT
from .canonical import ANONYMOUS, CanonicalRequest, Identity
from . import anthropic, chat, images, responses
from .output_format import format_problem
from .errors import (
    BodyProblem, Problem, anthropic_request_error, decode_body, openai_error_body, openai_request_error, problem_of,
)
from .rewrite import ModelRewriter
from .translate._losses import dropped
from .translate import (
    BY_FORMAT, CHAT, GUARDED, IMAGES, MESSAGES, PATHS, RESPONSES, Answer, Conversation, Estimate, Loss, NewId, NoTurns,
    Passthrough, SSEParser, StreamTranslator, Translating, WholeToStream, chat_messages, client_param, events_answer,
    is_error_of,
    new_id,
    read_error,
)

JSON = "application/json"
_CHAT_USAGE_CHUNK = re.compile(rb'"choices"\s*:\s*\[\s*\]')     # Chat's usage chunk, the last of its stream
# Why a conversation with no turn is refused when translated (its field names the client's own).
NO_TURNS = ("Expected a user or assistant turn the model's API can carry: system messages and items it drops "
            "are not turns")


@dataclass(slots=True)
class Inbound:
    """A decoded client request: its bytes (forwarded as they are to a same-protocol
    backend), its typed body, and what translating it has cost so far (memoised, since
    fallback asks for one body per candidate model)."""

    api: str
    raw: bytes
    body: Any
    previous_response_id: str | None = None   # Responses, once prepare() expanded it
    memo: dict = field(default_factory=dict)
    # The client's provider-defined headers (anthropic-beta, ...): for a backend of its own format.
    headers: tuple[tuple[str, bytes], ...] = ()
    # The caller's ``Identity.owner``, set before ``prepare``: whose stored Responses it may continue, and
    # whose its own answer becomes.
    owner: str | None = None
    # Responses: the request fields an answer repeats (instructions, tools...) as the provider was sent them
    # (masked), in place of the client's own, for an answer the router writes from another API's.
    echoed: dict | None = None


@dataclass(frozen=True, slots=True)
class Outbound:
    """The request for one backend: POST ``path`` (under the endpoint's base URL) with
    ``body`` and ``headers``; ``stream`` says whether the backend will answer in SSE."""

    path: str
    body: bytes
    stream: bool
    headers: tuple[tuple[str, str | bytes], ...] = ()
    losses: tuple[Loss, ...] = ()
    # The requesting user's credential, for a delegated backend only (spec 6.7); never logged or recorded.
    credential: str | None = field(default=None, repr=False)
    # The client reads tool calls' arguments as objects (a Messages client's tool_use input) from a backend that
    # sends them as strings: one that is not a JSON object makes the answer unreadable (``answers.check_whole``).
    tool_objects: bool = False


@dataclass(frozen=True, slots=True)
class Reply:
    """A whole answer (or error) in the client's protocol."""

    status: int
    content_type: str
    body: bytes
    losses: tuple[Loss, ...] = ()


class Adapter(abc.ABC):
    """The interface, with the parts every client API shares."""

    api = ""
    native = ""   # the api_format spoken without translation
    EFFORT = "reasoning_effort"   # the client's field that asks for a reasoning effort
    _decoder: msgspec.json.Decoder

    # --- request -------------------------------------------------------------------------

    def decode(self, raw: bytes, headers: Iterable[tuple[bytes, bytes]] = ()) -> Inbound:
        """The typed request; a 400 RequestError in the client's words naming the bad field's path
        otherwise (never a 5xx: depth, encoding and size problems included). ``headers``: the
        client's request headers, of which those its own api_format defines are kept."""
        try:
            body = decode_body(self._decoder, raw)
        except BodyProblem as exc:
            raise self.request_error(exc.problem) from None
        return Inbound(self.api, raw, body, headers=same_format_headers(self.native, headers))

    def request_error(self, problem: Problem) -> RequestError:
        """A decode problem in the client's words (OpenAI's, unless the API says otherwise)."""
        return openai_request_error(problem)

    async def prepare(self, req: Inbound) -> Inbound:
        """Anything that needs I/O before routing; only Responses has some."""
        return req

    def model(self, req: Inbound) -> str:
        return req.body.model

    def tool_choice(self, req: Inbound) -> Any:
        """The client's ``tool_choice``, for the output contract's refusals; None where the API has none."""
        return getattr(req.body, "tool_choice", None)

    def with_output_tools(self, req: Inbound, output: Any) -> Inbound:
        """The request with the tools the decision's output contract adds; only Responses carries any."""
        return req

    def with_raw(self, req: Inbound, raw: bytes) -> Inbound:
        """The request as a request plugin or an executor rewrote it (``raw``, in this API's own format): what
        every candidate's body is then written from. Decoded as ``decode`` decoded the client's (Messages: with
        its betas' fields, as the request names them), so a rewrite never refuses what the client could send."""
        return replace(req, raw=raw, body=self._redecode(req, raw), memo={})

    def _redecode(self, req: Inbound, raw: bytes) -> Any:
        try:
            return decode_body(self._decoder, raw)
        except BodyProblem as exc:
            raise self.request_error(exc.problem) from None

    def stream(self, req: Inbound) -> bool:
        return req.body.stream

    def canonical(self, req: Inbound, identity: Identity = ANONYMOUS) -> CanonicalRequest:
        """The protocol-neutral request the signals read, built from Chat messages."""
        conv, _ = self.conversation(req)
        return CanonicalRequest(chat_messages(conv), tools=len(conv.tools), metadata=conv.metadata,
                                identity=identity)

    def upstream(self, req: Inbound, api_format: str, upstream_model: str, *, stream_usage: bool = True,
                 reasoning: str | None = None, max_tokens_field: str = "max_completion_tokens") -> Outbound:
        """The request for a backend speaking ``api_format``, naming ``upstream_model``. A stream to an
        openai-format backend asks for its usage (``stream_options.include_usage``) unless ``stream_usage``
        is false (a server that refuses the field): the limits, costs and metrics read it. ``reasoning`` is the model's
        reasoning syntax (``ProviderModel.reasoning``): None for a model that does not reason, which gets none of
        the client's reasoning fields (each dropped and listed, as gpt-4o and its like refuse ``reasoning_effort``);
        ``chat_template_kwargs`` for the only one a Chat client's ``chat_template_kwargs`` reaches.
        ``max_tokens_field``: the field a translated request's output limit takes (``ProviderModel``'s)."""
        if api_format not in PATHS:
            raise UnsupportedCapability(f"api_format {api_format!r} does not serve {self.api} requests")
        headers = self.provider_headers(req, api_format)
        if api_format == self.native:
            ask = stream_usage and self.usage_unasked(req)
            # A server that refuses stream_options refuses the client's own too (it is estimated instead).
            strip = not stream_usage and api_format == "openai" and self.stream(req)
            key = ("rewrite", ask, strip, reasoning)
            found = req.memo.get(key)
            if found is None:
                raw, losses = self.same_format(req, reasoning)
                if ask or (strip and b'"stream_options"' in raw):
                    raw = with_stream_usage(raw, ask)
                found = req.memo[key] = ModelRewriter(raw, self.model(req)), tuple(losses)
            rewrite, losses = found
            return Outbound(PATHS[api_format], rewrite(upstream_model), self.stream(req), headers, losses)
        key = ("body", api_format, upstream_model, stream_usage, reasoning, max_tokens_field)
        if key not in req.memo:
            body, losses = self._translate(req, api_format, upstream_model, reasoning)
            if api_format == "openai" and not stream_usage and self.stream(req):
                body = with_stream_usage(body, False)     # the translation asks for it: this server refuses it
            if api_format == "openai" and max_tokens_field != "max_completion_tokens":
                body = with_max_tokens_field(body, max_tokens_field)
            req.memo[key] = body, losses
        body, losses = req.memo[key]
        return Outbound(PATHS[api_format], body, self.stream(req) and api_format != "images", headers,
                        tuple(losses), tool_objects=self.native == "anthropic")

    def same_format(self, req: Inbound, reasoning: str | None) -> tuple[bytes, list[Loss]]:
        """The client's body for a backend of its own format, and what it lost: the client's bytes, but for what
        no backend of the format takes (unsigned thinking toward Anthropic, a reasoning field toward a model that
        does not reason: ``reasoning`` None), dropped and listed as a translation drops it."""
        return req.raw, []

    def usage_unasked(self, req: Inbound) -> bool:
        """Whether the client streams a Chat answer without asking for its usage chunk: the router asks for it,
        and drops it from what the client receives (``stream_translator``). Only Chat has the option."""
        return False

    def provider_headers(self, req: Inbound, api_format: str) -> tuple[tuple[str, str | bytes], ...]:
        """The protocol headers a backend of ``api_format`` gets: the client's own betas and version
        when the body goes to it unchanged, and an Anthropic backend always an anthropic-version."""
        headers = req.headers if api_format == self.native else ()
        if api_format == "anthropic" and not any(k == ANTHROPIC_VERSION for k, _ in headers):
            headers += ((ANTHROPIC_VERSION, anthropic.API_VERSION),)
        return headers

    def refuse_empty(self, req: Inbound, api_formats: Iterable[str]) -> None:
        """A 400 naming the client's own field when a backend of one of ``api_formats`` would get a translated
        request with no turn (``input: []``, a Messages turn of no content, only system messages, only items the
        translation drops): a Chat or Messages backend refuses ``messages: []`` in its words, after a round trip,
        and a backend of the client's own format gets the client's body, so only translated ones are checked.
        The pipeline asks before it calls any candidate; a translation asks again for its own format."""
        translated = any(f != self.native and f in BY_FORMAT for f in api_formats)
        if translated and not self.conversation(req)[0].turns:
            raise self.request_error(self._no_turns(req))

    def carried_by(self, req: Inbound, api_format: str) -> bool:
        """Whether a backend of ``api_format`` can answer ``req`` in the shape the client reads: a field it would
        lose that changes that shape (Chat's ``n``: fewer choices) is not a loss to report but a refusal (or
        another candidate): the client's code would break on it. Other losses are dropped and listed."""
        return True

    def uncarried(self, req: Inbound, candidates: Iterable[Any]) -> RequestError:
        """The 400 when none of ``candidates`` (``ProviderModel``s) is ``carried_by``."""
        raise AssertionError("every candidate carries every request of this API")

    def _no_turns(self, req: Inbound) -> Problem:
        """Where the client's conversation has nothing to translate, in the client's own field."""
        return Problem("invalid", ("messages",), NO_TURNS)

    def _translate(self, req: Inbound, api_format: str, model: str, reasoning: str | None = None
                   ) -> tuple[bytes, list[Loss]]:
        if api_format == "images":
            raise UnsupportedCapability(f"the {self.api} API cannot return an image; "
                                        "an images model serves the Responses and Images APIs")
        self.refuse_empty(req, (api_format,))
        conv, read_losses = self.conversation(req)
        if reasoning is None:
            # gpt-4o and its like refuse a reasoning effort (400 unsupported_parameter), Claude's older models
            # thinking: whatever asks for one. Thinking off is written only in Messages' words (OpenAI's have none).
            if conv.thinking is not None:
                if api_format == "anthropic" or conv.thinking.get("type") != "disabled":
                    read_losses = [*read_losses, dropped("thinking", "model_does_not_reason")]
                conv = msgspec.structs.replace(conv, thinking=None)
            if conv.reasoning_effort is not None:
                conv = msgspec.structs.replace(conv, reasoning_effort=None)
                read_losses = [*read_losses, dropped(self.EFFORT, "model_does_not_reason")]
        try:
            if api_format == "responses":   # a reasoning model's chain asked for back (RESPONSES.write_request)
                body, write_losses = RESPONSES.write_request(conv, model, reasons=reasoning is not None)
            else:
                body, write_losses = BY_FORMAT[api_format].write_request(conv, model)
        except NoTurns:
            raise self.request_error(self._no_turns(req)) from None
        return body, [*read_losses, *write_losses]

    def conversation(self, req: Inbound) -> tuple[Conversation, list[Loss]]:
        """The client's request as the neutral conversation (memoised), with what reading it lost."""
        found = req.memo.get("conversation")
        if found is None:
            found = req.memo["conversation"] = self._read(req)
        return found

    @abc.abstractmethod
    def _read(self, req: Inbound) -> tuple[Conversation, list[Loss]]:
        """The client's request as the neutral conversation, with what reading it lost."""

    # --- answers --------------------------------------------------------------------------

    def whole(self, req: Inbound, api_format: str, status: int, body: bytes, content_type: str = JSON, *,
              estimate: Estimate | None = None) -> Reply:
        """A complete backend answer (or error answer) in the client's protocol; a
        same-protocol answer passes unchanged, with the backend's ``content_type``, and so
        does an error already in the client's shape. Any other error body (an HTML page, an
        empty one, JSON of another shape) becomes an error of the client's protocol with the
        backend's status: an SDK reads a message from nothing else. ``estimate``: the usage a
        translated answer carries when the backend reported none (as a stream's, ``Translating``)."""
        if status >= 400:
            return self.error_answer(api_format, status, body, content_type)
        if api_format == self.native:
            return Reply(status, content_type, body)
        try:
            answer, read_losses = self._read_answer(api_format, body)
        except msgspec.DecodeError as exc:
            return self._error_reply(_unreadable(exc))
        except VsrError as exc:   # a Responses answer whose status is failed
            return self._error_reply(exc)
        if answer.usage is None and estimate is not None:
            answer.usage = estimate()
        if self._json_answer(req, api_format):
            answer, unwrap_losses = MESSAGES.unwrap_json(answer)
            read_losses = [*read_losses, *unwrap_losses]
        out, write_losses = self._write_answer(req, answer)
        return Reply(status, JSON, out, (*read_losses, *write_losses))

    def error_answer(self, api_format: str, status: int, body: bytes, content_type: str = JSON,
                     tried: str = "") -> Reply:
        """A backend's error answer in the client's shape: as it came when it has that shape already and no
        attempts before it are to be named (``tried``, after its message); else read, its message and code kept."""
        if not tried and api_format == self.native and is_error_of(self.native, body, status):
            return Reply(status, content_type or JSON, body)
        err = read_error(status, body, content_type)
        err.param = client_param(api_format, self.native, err.param)   # the client's field, not the backend's
        if tried:
            err = UpstreamAnswer(f"{err.message} ({tried})", status=status, code=err.code, type_=err.type)
        return self._error_reply(err)

    def _read_answer(self, api_format: str, body: bytes) -> tuple[Answer, list[Loss]]:
        reader = IMAGES if api_format == "images" else BY_FORMAT[api_format]
        return reader.read_answer(body)

    @abc.abstractmethod
    def _write_answer(self, req: Inbound, answer: Answer) -> tuple[bytes, list[Loss]]:
        """A neutral answer in the client's protocol."""

    def stream_translator(self, req: Inbound, api_format: str, *, new_id: NewId = new_id,
                          estimate: Estimate | None = None) -> StreamTranslator:
        """A sans-I/O translator from the backend's SSE bytes to the client's; ``estimate``: the usage the
        client reads when the backend reports none (``Translating``)."""
        if api_format == self.native:
            return Passthrough(self._passthrough_fail)
        writer = self._writer(req, new_id)
        if api_format == "images":
            return WholeToStream(IMAGES.read_answer, writer)
        reader = BY_FORMAT[api_format].StreamReader()
        if self._json_answer(req, api_format):
            reader = MESSAGES.JsonUnwrapping(reader)
        return Translating(reader, writer, estimate)

    def _json_answer(self, req: Inbound, api_format: str) -> bool:
        """Whether the backend answers the client's structured output as a call of Claude's JSON tool
        (``MESSAGES.JSON_TOOL``), which the client is to get as the answer's text."""
        return api_format == "anthropic" and self.native in ("openai", "responses") and \
            MESSAGES.json_schema(self.conversation(req)[0].response_format) is not None

    def whole_as_stream(self, req: Inbound, *, new_id: NewId = new_id) -> StreamTranslator:
        """A whole answer already in the client's protocol written as the client's stream, for a client that
        asked for one from a backend that answered whole: fed the body, it writes the events at ``close``."""
        return WholeToStream(BY_FORMAT[self.native].read_answer, self._writer(req, new_id))

    @abc.abstractmethod
    def _writer(self, req: Inbound, new_id: NewId):
        """The client protocol's stream writer."""

    @abc.abstractmethod
    def _passthrough_fail(self, message: str, status: int, code: str | None, kind: str, events: int,
                          head: bytes) -> bytes:
        """The in-stream error event (``kind``: the error's type) that ends a same-protocol stream of ``events``
        events, ``head`` the first."""

    async def remember(self, req: Inbound, body: bytes | None) -> None:
        """Keep an answer for later turns; only Responses does."""

    def served_again(self, req: Inbound, body: bytes, streamed: bool) -> tuple[bytes, bytes | None]:
        """A cached answer (``body``, in this protocol, whole or its SSE) as the answer to ``req``, and what to
        ``remember`` of it: here itself and nothing; Responses gives it an id of its own."""
        return body, None

    # --- a cached answer in the other form ------------------------------------------------

    def replayed(self, req: Inbound, body: bytes, streamed: bool) -> bytes | None:
        """A cached answer in this protocol (``body``: whole, or its SSE when ``streamed``) in the form ``req``
        asks (``stream``): as it is, a whole answer written as the protocol's stream, or a stream's events
        assembled whole; None when it cannot be told so whole (a stream that did not end, an answer the other
        form would lose a part of: Chat's choices past the first)."""
        asked = self.stream(req)
        if asked == streamed and not (streamed and self._restream(req, body)):
            return body
        if self.native not in BY_FORMAT or (getattr(req.body, "n", None) or 1) > 1:
            return None
        if streamed:
            try:
                answer = events_answer(self.held_events(body))
            except (msgspec.DecodeError, msgspec.ValidationError):    # an event cut (a store's garbage)
                answer = None
            if answer is None:
                return None
            body, losses = self._write_answer(req, answer)
            if losses:
                return None
        if not asked:
            return body
        tr = self.whole_as_stream(req)
        out = tr.feed(body) + tr.close()
        return None if tr.losses else out

    def _restream(self, req: Inbound, sse: bytes) -> bool:
        """Whether a stored stream must be written again for ``req``, which asks for another stream (Chat's usage
        chunk)."""
        return False

    # --- the response guard ----------------------------------------------------------------

    def guardable(self) -> bool:
        """Whether the response guard reads this API's answers (Chat, Messages, Responses; not Images)."""
        return self.native in BY_FORMAT

    def answer_text(self, body: bytes) -> str:
        """The text of a whole answer in this client's protocol, as the guard reads it."""
        return GUARDED.answer_text(BY_FORMAT[self.native], body)

    def held_events(self, sse: bytes) -> list:
        """A held stream in this client's protocol, read back into neutral events."""
        return GUARDED.stream_events(BY_FORMAT[self.native], sse)

    def held_text(self, events: list) -> str:
        return GUARDED.stream_text(events)

    def held_failure(self, events: list) -> str | None:
        """Why a held stream is not a whole answer (its error event, or no end), or None."""
        return GUARDED.failure_of(events)

    def noted_whole(self, req: Inbound, body: bytes, note: str) -> bytes:
        """A whole answer in this client's protocol with ``note`` at the head of its text."""
        answer, _ = BY_FORMAT[self.native].read_answer(body)
        out, _ = self._write_answer(req, GUARDED.noted_answer(answer, note))
        return out

    def noted_stream(self, req: Inbound, events: list, note: str, *, new_id: NewId = new_id) -> tuple[bytes, bytes | None]:
        """A held stream re-encoded by this protocol's writer with ``note`` at its head, and (Responses)
        the completed response to remember."""
        writer = self._writer(req, new_id)
        out = b"".join(writer.write(ev) for ev in GUARDED.noted_events(events, note))
        return out, getattr(writer, "final", None)

    def stream_failure(self, exc: VsrError) -> bytes:
        """The protocol's in-stream error event, alone: what a held stream the guard refused carries."""
        return self._passthrough_fail(exc.message, exc.status, exc.code, exc.type, 0, b"")

    # --- errors -----------------------------------------------------------------------------

    def error(self, exc: VsrError) -> tuple[int, str, bytes]:
        """``(status, content_type, body)`` of one of our errors in the client's shape; a backend's error answer
        the router gave up with (``UpstreamStatus``: every attempt failed, the last so) is that answer."""
        if isinstance(exc, UpstreamStatus):
            reply = self.error_answer(exc.api_format, exc.status, exc.body, exc.content_type, exc.tried)
            return reply.status, reply.content_type, reply.body
        return self._own_error(exc)

    def _own_error(self, exc: VsrError) -> tuple[int, str, bytes]:
        """One of the router's own errors in the client's shape (OpenAI's)."""
        status = self.error_status(exc)
        return status, JSON, openai_error_body(exc, status)

    def error_status(self, exc: VsrError) -> int:
        """The status one of our errors answers with whole: what a stream that ends with it is counted as.
        The router's own ``code == "overloaded"`` answers 429, which OpenAI clients retry; a backend's status
        (its 529 too, which they retry as any 5xx) is kept."""
        return 429 if exc.code == "overloaded" and not anthropic.relayed(exc) else exc.status

    def _error_reply(self, exc: VsrError) -> Reply:
        status, content_type, body = self.error(exc)
        return Reply(status, content_type, body)


def same_format_headers(api_format: str, headers: Iterable[tuple[bytes, bytes]]) -> tuple[tuple[str, bytes], ...]:
    """The client's headers that ``api_format`` defines for its bodies (header registry: SAME_FORMAT)."""
    names = SAME_FORMAT.get(api_format)
    if not names:
        return ()
    return tuple((k.decode("latin-1"), v) for k, v in headers if k.decode("latin-1") in names)


def with_stream_usage(raw: bytes, ask: bool) -> bytes:
    """A Chat request body asking for the stream's usage chunk (``ask``), or with no ``stream_options``."""
    top = dict(chat.TOP_LEVEL_DECODER.decode(raw))
    if not ask:
        top.pop("stream_options", None)
        return chat.ENCODER.encode(top)
    old = top.get("stream_options")
    options = msgspec.json.decode(old) if old is not None else None
    top["stream_options"] = {**(options if isinstance(options, dict) else {}), "include_usage": True}
    return chat.ENCODER.encode(top)


def with_max_tokens_field(raw: bytes, field: str) -> bytes:
    """A translated Chat request body with its output limit under ``field`` (the translation writes
    ``max_completion_tokens``)."""
    top = dict(chat.TOP_LEVEL_DECODER.decode(raw))
    if "max_completion_tokens" not in top:
        return raw
    top[field] = top.pop("max_completion_tokens")
    return chat.ENCODER.encode(top)


class _NoUsageChunk:
    """A same-protocol Chat stream less the usage-only chunk (``choices: []``) the router asked the backend for
    and the client did not: the client reads what it would have read from the backend itself."""

    __slots__ = ("inner",)

    def __init__(self, inner: StreamTranslator) -> None:
        self.inner = inner

    @property
    def losses(self):
        return self.inner.losses

    def feed(self, chunk: bytes) -> bytes:
        return _drop_usage_chunks(self.inner.feed(chunk))

    def close(self) -> bytes:
        return _drop_usage_chunks(self.inner.close())

    def fail(self, exc: VsrError) -> bytes:
        return self.inner.fail(exc)

    def final(self) -> bytes | None:
        return self.inner.final()


class _ChunkHead(msgspec.Struct):
    id: Any = ""
    created: Any = 0
    model: Any = ""


_CHUNK_HEAD = msgspec.json.Decoder(_ChunkHead)
_DONE = b"data: [DONE]"
# A chunk's usage object, as servers write it (not OpenAI's ``"usage": null`` on every other chunk); in a text
# its quotes are escaped (``\"usage\":{``), which neither matches.
_USAGE_OBJECTS = (b'"usage":{', b'"usage": {')


class _EstimatedUsageChunk:
    """A same-protocol Chat stream whose client asked for its usage chunk (``include_usage``) and whose backend
    sent none (a model with ``stream_usage: false``, a server that ignores ``stream_options``): the router's
    estimate goes before ``[DONE]`` as the backend's usage chunk would, so the client reads the usage it asked
    for (the access log and the record mark it estimated)."""

    __slots__ = ("inner", "estimate", "head", "seen", "done")

    def __init__(self, inner: StreamTranslator, estimate: Estimate) -> None:
        self.inner, self.estimate = inner, estimate
        self.head: _ChunkHead | None = None
        self.seen = self.done = False

    @property
    def losses(self):
        return self.inner.losses

    def feed(self, chunk: bytes) -> bytes:
        return self._added(self.inner.feed(chunk))

    def close(self) -> bytes:
        out = self._added(self.inner.close())
        if not (self.seen or self.done):     # a stream ended by its finish_reasons alone, no [DONE]
            self.seen = True
            out += self._chunk()
        return out

    def fail(self, exc: VsrError) -> bytes:
        return self.inner.fail(exc)

    def final(self) -> bytes | None:
        return self.inner.final()

    def _added(self, out: bytes) -> bytes:
        if self.seen or self.done or not out:
            return out
        if self.head is None and out.startswith(b"data: {"):
            try:
                self.head = _CHUNK_HEAD.decode(out[6:_EVENT_END.search(out).start()])
            except (msgspec.DecodeError, AttributeError):
                self.head = _ChunkHead()
        if _USAGE_OBJECTS[0] in out or _USAGE_OBJECTS[1] in out:
            self.seen = True
            return out
        at = out.find(_DONE)
        if at < 0 or (at and out[at - 1:at] != b"\n"):
            return out
        self.done = True
        return out[:at] + self._chunk() + out[at:]

    def _chunk(self) -> bytes:
        head = self.head or _ChunkHead()
        given = self.estimate()
        return b"data: " + chat.ENCODER.encode({"id": head.id, "object": "chat.completion.chunk",
                                                "created": head.created, "model": head.model, "choices": [],
                                                "usage": CHAT.write_usage(given)}) + b"\n\n"


class _UsageChunk(msgspec.Struct):
    choices: list[msgspec.Raw] | None = None
    usage: dict | None = None
    looper: dict | None = None          # an executor's own report (selection.synthesis): the router's, kept


_USAGE_CHUNK = msgspec.json.Decoder(_UsageChunk)
_EVENT_END = re.compile(rb"(\r?\n\r?\n)")


def _drop_usage_chunks(out: bytes) -> bytes:
    """``out`` (whole events) without its usage-only chunks; one ``in`` test when it has none."""
    if b'"usage"' not in out:
        return out
    parts = _EVENT_END.split(out)       # event, its end, event, its end, ..., what follows the last end
    kept = []
    for i in range(0, len(parts) - 1, 2):
        event = parts[i]
        if b'"usage"' in event and event.startswith(b"data:"):
            try:
                doc = _USAGE_CHUNK.decode(event[5:])
            except (msgspec.DecodeError, msgspec.ValidationError):
                doc = None
            if doc is not None and doc.usage is not None and doc.choices == [] and doc.looper is None:
                continue
        kept += (event, parts[i + 1])
    kept.append(parts[-1])
    return b"".join(kept)


def _unreadable(exc: msgspec.DecodeError) -> UpstreamError:
    return UpstreamError(f"the upstream answer could not be read: {exc}")


class ChatAdapter(Adapter):
    api, native = "chat", "openai"
    _decoder = chat.REQUEST_DECODER

    def decode(self, raw: bytes, headers: Iterable[tuple[bytes, bytes]] = ()) -> Inbound:
        req = super().decode(raw, headers)
        problem = format_problem(req.body.response_format, ("response_format",), ("json_schema",))
        if problem is not None:
            raise self.request_error(problem)
        return req

    def canonical(self, req: Inbound, identity: Identity = ANONYMOUS) -> CanonicalRequest:
        return CanonicalRequest.from_chat(req.body, identity)

    def _read(self, req: Inbound) -> tuple[Conversation, list[Loss]]:
        return CHAT.read_request(req.body, req.raw)

    def _write_answer(self, req: Inbound, answer: Answer) -> tuple[bytes, list[Loss]]:
        return CHAT.write_answer(answer, CHAT.legacy_functions(req.body))

    def carried_by(self, req: Inbound, api_format: str) -> bool:
        """``n`` above one only to an openai-format backend: Messages and Responses answer one choice, and a
        client reading ``choices[1]`` breaks (LiteLLM refuses it too, UnsupportedParamsError)."""
        return not (req.body.n and req.body.n > 1) or api_format == self.native

    def uncarried(self, req: Inbound, candidates: Iterable[Any]) -> RequestError:
        models = ", ".join(f"{c.name!r} (api_format {c.api_format})" for c in candidates)
        return RequestError(f"n={req.body.n} asks for {req.body.n} choices, and model {models} answers one: "
                            f"send n=1 (or leave n out), or name a model of api_format openai", param="n")

    def same_format(self, req: Inbound, reasoning: str | None) -> tuple[bytes, list[Loss]]:
        """The client's body as it came, less a reasoning effort toward a model that does not reason, and vLLM's
        ``chat_template_kwargs`` toward a model whose ``reasoning_family`` is not vLLM's (OpenAI answers 400 to an
        argument it does not know). The rest passes: an openai-format backend may be a LiteLLM proxy that enforces
        ``guardrails``, ``tags``, ``fallbacks``, ``metadata``... (dropped, with a warning, only where the body is
        translated)."""
        effort = reasoning is None and req.body.reasoning_effort is not None
        if not effort and (reasoning == "chat_template_kwargs" or b"chat_template_kwargs" not in req.raw):
            return req.raw, []
        top = dict(chat.TOP_LEVEL_DECODER.decode(req.raw))
        losses = []
        if effort:
            del top["reasoning_effort"]
            losses.append(dropped("reasoning_effort", "model_does_not_reason"))
        if reasoning != "chat_template_kwargs" and top.pop("chat_template_kwargs", None) is not None:
            losses.append(dropped("chat_template_kwargs", "model_does_not_reason" if reasoning is None
                                  else "reasoning_family"))
        return (chat.ENCODER.encode(top), losses) if losses else (req.raw, [])

    def usage_unasked(self, req: Inbound) -> bool:
        options = req.body.stream_options
        return bool(req.body.stream) and not (options and options.include_usage)

    def stream_translator(self, req: Inbound, api_format: str, *, new_id: NewId = new_id,
                          estimate: Estimate | None = None) -> StreamTranslator:
        if api_format != self.native:
            return super().stream_translator(req, api_format, new_id=new_id, estimate=estimate)
        tr = Passthrough(self._passthrough_fail, restate=CHAT.CallSplitter())
        if self.usage_unasked(req):
            return _NoUsageChunk(tr)
        return _EstimatedUsageChunk(tr, estimate) if estimate is not None and req.body.stream else tr

    def _writer(self, req: Inbound, new_id: NewId):
        options = req.body.stream_options
        return CHAT.StreamWriter(bool(options and options.include_usage), CHAT.legacy_functions(req.body))

    def _restream(self, req: Inbound, sse: bytes) -> bool:
        """A stored stream has its usage chunk (``choices: []``) exactly when its client asked for one
        (``stream_options.include_usage``); a client that did not ask may read ``choices[0]`` of every chunk."""
        options = req.body.stream_options
        has_usage = _CHAT_USAGE_CHUNK.search(sse, max(0, len(sse) - 4096)) is not None
        return bool(options and options.include_usage) != has_usage

    def _passthrough_fail(self, message: str, status: int, code: str | None, kind: str, events: int,
                          head: bytes) -> bytes:
        return CHAT.StreamWriter(False).fail(message, status, code, kind)


class MessagesAdapter(Adapter):
    api, native = "messages", "anthropic"
    _decoder = anthropic.REQUEST_DECODER

    def decode(self, raw: bytes, headers: Iterable[tuple[bytes, bytes]] = ()) -> Inbound:
        kept = same_format_headers(self.native, headers)
        return Inbound(self.api, raw, self.decode_as(self._decoder, raw, kept), headers=kept)

    def decode_as(self, decoder: msgspec.json.Decoder, raw: bytes, kept: tuple[tuple[str, bytes], ...]) -> Any:
        """``raw`` by ``decoder`` (a Messages or a count_tokens body), refused in Anthropic's words. A field
        Anthropic does not define in a turn is refused, unless the request names betas (``kept``: its
        anthropic-beta), which add such fields (Claude Code's per-turn ``output_config``): then the turns let
        them pass. Only such a request is decoded twice."""
        try:
            return decode_body(decoder, raw)
        except BodyProblem as exc:
            p = exc.problem
            if not (p.kind == "unknown" and len(p.path) == 3 and p.path[0] == "messages"
                    and any(name == ANTHROPIC_BETA for name, _ in kept)):
                raise self.request_error(p) from None
        try:
            return decode_body(anthropic.BETA_DECODERS[decoder], raw)
        except BodyProblem as exc:
            raise self.request_error(exc.problem) from None

    def _redecode(self, req: Inbound, raw: bytes) -> Any:
        return self.decode_as(self._decoder, raw, req.headers)

    def _read(self, req: Inbound) -> tuple[Conversation, list[Loss]]:
        return MESSAGES.read_request(req.body, req.raw)

    def same_format(self, req: Inbound, reasoning: str | None) -> tuple[bytes, list[Loss]]:
        raw, losses = MESSAGES.signed_only(req.body, req.raw)
        if reasoning is not None:
            return raw, losses
        raw, dropped_here = MESSAGES.without_reasoning(raw)
        return raw, [*losses, *dropped_here]

    def canonical(self, req: Inbound, identity: Identity = ANONYMOUS) -> CanonicalRequest:
        conv, _ = self.conversation(req)
        meta = {k: v for k, v in (req.body.metadata or {}).items() if isinstance(v, str)}
        return CanonicalRequest(chat_messages(conv), tools=len(req.body.tools or ()), metadata=meta,
                                identity=identity)

    def _write_answer(self, req: Inbound, answer: Answer) -> tuple[bytes, list[Loss]]:
        return MESSAGES.write_answer(answer)

    def _writer(self, req: Inbound, new_id: NewId):
        return MESSAGES.StreamWriter()

    def _passthrough_fail(self, message: str, status: int, code: str | None, kind: str, events: int,
                          head: bytes) -> bytes:
        return MESSAGES.StreamWriter().fail(message, status, code, kind)

    def _own_error(self, exc: VsrError) -> tuple[int, str, bytes]:
        """Anthropic's shape and statuses: 529 overloaded_error for ``code == "overloaded"``."""
        status, body = anthropic.vsr_error_answer(exc)
        return status, JSON, body

    def error_status(self, exc: VsrError) -> int:
        return anthropic.error_status_and_type(exc.status, exc.code, anthropic.relayed(exc))[0]

    def request_error(self, problem: Problem) -> RequestError:
        """Anthropic's words (``messages.1.role: Input should be ...``): Claude Code reads them."""
        return anthropic_request_error(problem)

    def _no_turns(self, req: Inbound) -> Problem:
        """The first turn's content: empty, or only blocks no other API carries (thinking, server tools)."""
        first = next((i for i, m in enumerate(req.body.messages) if m.role != "system"), None)
        if first is None:
            return super()._no_turns(req)
        if not req.body.messages[first].content:     # a string content, even empty, is a text turn
            return Problem("length", ("messages", first, "content"), expected=">= 1", got="array")
        return Problem("invalid", ("messages", first, "content"), NO_TURNS)


class ResponsesAdapter(Adapter):
    """Responses, with ``previous_response_id`` served from ``store``."""

    api, native = "responses", "responses"
    EFFORT = "reasoning.effort"
    _decoder = responses.REQUEST_DECODER

    def __init__(self, store: responses.ResponseStore) -> None:
        self.store = store

    def decode(self, raw: bytes, headers: Iterable[tuple[bytes, bytes]] = ()) -> Inbound:
        """As every API, and a body without ``input`` refused naming it, unless something the backend keeps
        stands for it (``previous_response_id``, a stored ``prompt``, a ``conversation``): forwarded, it would be
        an invented empty user turn, answered and billed. ``background: true`` is refused naming it: the router
        answers in the request and keeps no running response to poll or cancel, and a backend that ran one would
        leave the client a ``queued`` object the router can never complete."""
        req = super().decode(raw, headers)
        body = req.body
        if body.background:
            raise UnsupportedParameter(
                "Unsupported parameter: 'background' is not supported by this router: it answers in the request "
                "that asks; send background false or leave it out (stream: true reads the answer as it is made).",
                param="background")
        effort = (body.reasoning or {}).get("effort")
        if effort is not None and effort not in chat.EFFORTS:
            # ``reasoning`` stays a dict (its other keys are the backend's to judge); its effort is OpenAI's enum.
            raise self.request_error(Problem("enum", ("reasoning", "effort"), value=str(effort),
                                             options=chat.EFFORTS))
        fmt = (body.text or {}).get("format")
        problem = format_problem(fmt, ("text", "format"), ("schema",))
        if problem is not None:
            raise self.request_error(problem)
        if body.input == "" and body.previous_response_id is None and body.prompt is None \
                and body.conversation is None and "input" not in chat.TOP_LEVEL_DECODER.decode(raw):
            raise self.request_error(Problem("missing", ("input",), "Object missing required field `input`"))
        return req

    async def prepare(self, req: Inbound) -> Inbound:
        """Expand ``previous_response_id`` into the stored conversation, so any backend can
        continue it; an unknown id is a 400 naming the field, as OpenAI answers. So is another owner's id
        (``StoredResponse.owner``): the same answer, word for word, so an id's existence is not told either."""
        previous = req.body.previous_response_id
        if previous is None:
            return req
        record = await self.store.get(previous)
        if record is None or record.owner != req.owner:
            raise echoing(PreviousResponseNotFound, "Previous response with id {} not found.", previous,
                          param="previous_response_id")
        top = dict(chat.TOP_LEVEL_DECODER.decode(req.raw))
        top["input"] = msgspec.Raw(_join_arrays(bytes(record.items), _input_items(top.get("input"))))
        top.pop("previous_response_id")
        raw = responses.ENCODER.encode(top)
        try:
            body = responses.REQUEST_DECODER.decode(raw)
        except msgspec.DecodeError as exc:   # a stored item the current schema refuses
            raise openai_request_error(problem_of(exc, responses.ResponsesRequest)) from None
        return replace(req, raw=raw, body=body, previous_response_id=previous, memo={})

    def with_output_tools(self, req: Inbound, output: Any) -> Inbound:
        tools = [getattr(tool, "type", None) for tool in (req.body.tools or ())]
        plan = output_rules.image_tool_plan("responses", output, [t for t in tools if t], req.body.tool_choice)
        if plan.add_tool or plan.force_tool:
            return self.with_image_tool(req, add=plan.add_tool, force=plan.force_tool)
        return req

    def with_image_tool(self, req: Inbound, *, add: bool, force: bool) -> Inbound:
        """The request with the ``image_generation`` tool added and/or forced, as
        ``config.output.image_tool_plan`` decides for an image decision (spec 5.8)."""
        if not (add or force):
            return req
        top = dict(chat.TOP_LEVEL_DECODER.decode(req.raw))
        if add:
            tools = [msgspec.Raw(responses.ENCODER.encode(t)) for t in req.body.tools or ()]
            top["tools"] = [*tools, {"type": "image_generation"}]
        if force:
            top["tool_choice"] = {"type": "image_generation"}
        raw = responses.ENCODER.encode(top)
        return replace(req, raw=raw, body=responses.REQUEST_DECODER.decode(raw), memo={})

    def canonical(self, req: Inbound, identity: Identity = ANONYMOUS) -> CanonicalRequest:
        """As for every API, with every tool the client declared counted: Codex declares its tools in
        additional_tools input items, grouped in namespaces; hosted tools count too."""
        conv, _ = self.conversation(req)
        return CanonicalRequest(chat_messages(conv), tools=RESPONSES.declared_tool_count(req.body),
                                metadata=conv.metadata, identity=identity)

    def _read(self, req: Inbound) -> tuple[Conversation, list[Loss]]:
        return RESPONSES.read_request(req.body, req.raw)

    def same_format(self, req: Inbound, reasoning: str | None) -> tuple[bytes, list[Loss]]:
        if reasoning is not None or not req.body.reasoning:
            return req.raw, []
        top = dict(chat.TOP_LEVEL_DECODER.decode(req.raw))
        del top["reasoning"]
        return responses.ENCODER.encode(top), [dropped(f"reasoning.{k}", "model_does_not_reason")
                                              for k in req.body.reasoning]   # Codex's context among them

    def _no_turns(self, req: Inbound) -> Problem:
        if req.body.input == []:
            return Problem("length", ("input",), expected=">= 1", got="array")
        return Problem("invalid", ("input",), NO_TURNS)

    def _translate(self, req: Inbound, api_format: str, model: str, reasoning: str | None = None
                   ) -> tuple[bytes, list[Loss]]:
        if api_format != "images":
            return super()._translate(req, api_format, model, reasoning)
        conv, read_losses = self.conversation(req)
        tools = req.body.tools or ()
        tool = next((msgspec.structs.asdict(t) for t in tools if t.type == "image_generation"), None)
        # The Images API is the image_generation tool: neither it (its options go into the
        # request) nor a tool_choice forcing it is lost. The readers reported both as hosted
        # tools, which a text backend could not run.
        carried = {f"tools[{i}]" for i, t in enumerate(tools) if t.type == "image_generation"}
        choice = req.body.tool_choice
        if isinstance(choice, dict) and choice.get("type") == "image_generation":
            carried.add("tool_choice")
        read_losses = [x for x in read_losses if not (x.action == "dropped" and x.field in carried)]
        body, write_losses = IMAGES.write_images_request(conv, model, tool)
        return body, [*read_losses, *write_losses]

    def _echo(self, req: Inbound) -> Any:
        echo = RESPONSES.Echo(req.body)
        if req.previous_response_id is not None:
            echo.fields["previous_response_id"] = req.previous_response_id
        if req.echoed is not None:
            echo.fields.update(req.echoed)
        return echo

    def _write_answer(self, req: Inbound, answer: Answer) -> tuple[bytes, list[Loss]]:
        return RESPONSES.write_answer(answer, self._echo(req))

    def _writer(self, req: Inbound, new_id: NewId):
        return RESPONSES.StreamWriter(self._echo(req), new_id)

    def stream_translator(self, req: Inbound, api_format: str, *, new_id: NewId = new_id,
                          estimate: Estimate | None = None) -> StreamTranslator:
        if api_format == self.native:
            restate = RESPONSES.ErrorRestater()
            if req.previous_response_id is not None:
                def restated(out: bytes, events: int, head: bytes) -> bytes:
                    return self.with_previous(req, restate(out, events, head))
                tr = Passthrough(self._passthrough_fail, tap=req.body.store is not False, restate=restated)
            else:
                tr = Passthrough(self._passthrough_fail, tap=req.body.store is not False, restate=restate)
            return _OwnIdStream(tr, new_id("resp_"))
        return super().stream_translator(req, api_format, new_id=new_id, estimate=estimate)

    def _passthrough_fail(self, message: str, status: int, code: str | None, kind: str, events: int,
                          head: bytes) -> bytes:
        return RESPONSES.passthrough_fail(message, status, code, kind, events, head)

    def served_again(self, req: Inbound, body: bytes, streamed: bool) -> tuple[bytes, bytes | None]:
        """A cached answer with a new response id, and its response object to remember. The cache may serve
        callers of another owner than the one it answered (its scope's principal): the first caller's id is
        theirs, stored under their owner, and the receiver could not continue it (previous_response_id)."""
        final: bytes | None = body
        if streamed:
            tap = Passthrough(self._passthrough_fail, tap=True)
            tap.feed(body)
            tap.close()
            final = tap.final()
        if final is None:
            return body, None
        try:
            old = responses.REMEMBERED_DECODER.decode(final).id
        except msgspec.DecodeError:
            return body, None
        if not old:
            return body, final
        now = msgspec.json.encode(new_id("resp_"))
        return _renamed(body, old, now), _renamed(final, old, now)

    async def remember(self, req: Inbound, body: bytes | None) -> None:
        """Store the conversation so far under the answer's id (unless ``store: false``)."""
        if body is None or req.body.store is False:
            return
        try:
            answer = responses.REMEMBERED_DECODER.decode(body)
        except msgspec.DecodeError:
            return   # an error body: nothing to continue from
        top = chat.TOP_LEVEL_DECODER.decode(req.raw)
        output = b"[" + b",".join(bytes(item) for item in answer.output) + b"]"
        items = _join_arrays(_input_items(top.get("input")), output)
        await self.store.put(responses.StoredResponse(answer.id, msgspec.Raw(items), answer.model, req.owner,
                                                      msgspec.Raw(self.with_previous(req, body))))

    def with_previous(self, req: Inbound, body: bytes) -> bytes:
        """A Responses backend's answer (a response object, or events carrying one) to a request whose
        ``previous_response_id`` the router expanded: naming it, as the backend would have had it kept the
        conversation; the backend itself was sent none and says null. The field's JSON, unescaped, is found only
        as a key of the response object (inside a string, its quotes are escaped)."""
        if req.previous_response_id is None:
            return body
        return _NO_PREVIOUS.sub(b'"previous_response_id":' + msgspec.json.encode(req.previous_response_id), body)

    def whole(self, req: Inbound, api_format: str, status: int, body: bytes, content_type: str = JSON, *,
              estimate: Estimate | None = None) -> Reply:
        """As every API; a Responses backend's answer under an id of the router's own (``_OwnIdStream``), and
        naming the ``previous_response_id`` the router expanded (a translated answer has both already: Echo)."""
        reply = super().whole(req, api_format, status, body, content_type, estimate=estimate)
        if api_format != self.native or reply.status >= 400:
            return reply
        try:
            theirs = _RESPONSE_ID.decode(reply.body).id
        except msgspec.DecodeError:
            theirs = ""
        out = _renamed(reply.body, theirs, msgspec.json.encode(new_id("resp_"))) if theirs else reply.body
        return replace(reply, body=self.with_previous(req, out))


class _ResponseId(msgspec.Struct):
    id: str = ""


class _Carrier(msgspec.Struct):
    """A Responses stream event, as far as the id of the response it carries."""

    response: _ResponseId | None = None


_RESPONSE_ID = msgspec.json.Decoder(_ResponseId)
_CARRIER = msgspec.json.Decoder(_Carrier)


def _renamed(body: bytes, theirs: str, ours: bytes) -> bytes:
    """``body`` with the response id ``theirs`` replaced by ``ours`` (JSON) wherever it is a JSON string (inside
    another string, its quotes would be escaped): the response object, in every event that carries it."""
    return body.replace(msgspec.json.encode(theirs), ours)


class _OwnIdStream:
    """A Responses backend's stream, passed through, under a response id of the router's own.

    The router stores each answer under its id (``previous_response_id``, ``GET /v1/responses/{id}``), and a
    backend's ids are not the router's to trust: one that repeats an id (another deployment, a proxy, a bug) would
    have one owner's answer replace another's. So every answer gets a fresh id, as translated ones and cache hits
    (``served_again``) do: learned from the first event that carries the response object (``response.created``),
    replaced in it and in every event after, in the in-stream failure and in the final object remembered.
    """

    def __init__(self, inner: Passthrough, ours: str) -> None:
        self._inner = inner
        self.losses = inner.losses
        self._ours = msgspec.json.encode(ours)
        self._theirs: str | None = None

    def _own(self, out: bytes) -> bytes:
        if not out:
            return out
        if self._theirs is None:
            for _, data in SSEParser().feed(out):
                try:
                    carried = _CARRIER.decode(data).response
                except msgspec.DecodeError:
                    continue
                if carried is not None and carried.id:
                    self._theirs = carried.id
                    break
            else:
                return out
        return _renamed(out, self._theirs, self._ours)

    def feed(self, chunk: bytes) -> bytes:
        return self._own(self._inner.feed(chunk))

    def close(self) -> bytes:
        return self._own(self._inner.close())

    def fail(self, exc: VsrError) -> bytes:
        return self._own(self._inner.fail(exc))

    def final(self) -> bytes | None:
        final = self._inner.final()
        if final is None:
            return None
        if self._theirs is None:    # not seen in the events released (none carried it): the object's own
            try:
                self._theirs = _RESPONSE_ID.decode(final).id or None
            except msgspec.DecodeError:
                return final
        return _renamed(final, self._theirs, self._ours) if self._theirs else final


# A response object's previous_response_id the backend left null (``ResponsesAdapter.with_previous``).
_NO_PREVIOUS = re.compile(rb'"previous_response_id"\s*:\s*null')


def _input_items(raw: msgspec.Raw | None) -> bytes:
    """A request's ``input`` as a JSON array of items (a string input is one user message)."""
    if raw is None:
        return b"[]"
    value = bytes(raw).strip()
    if value.startswith(b"["):
        return value
    return responses.ENCODER.encode([{"type": "message", "role": "user", "content": msgspec.Raw(value)}])


def _join_arrays(first: bytes, second: bytes) -> bytes:
    a, b = first.strip()[1:-1].strip(), second.strip()[1:-1].strip()
    return b"[" + a + (b"," if a and b else b"") + b + b"]"


class ImagesAdapter(Adapter):
    api, native = "images", "images"
    _decoder = images.REQUEST_DECODER

    def decode(self, raw: bytes, headers: Iterable[tuple[bytes, bytes]] = ()) -> Inbound:
        req = super().decode(raw, headers)
        if req.body.stream:
            # Partial-image streaming is a later codec; say so rather than answer whole.
            raise RequestError("Streaming image generation is not supported", param="stream")
        return req

    def canonical(self, req: Inbound, identity: Identity = ANONYMOUS) -> CanonicalRequest:
        return CanonicalRequest([chat.Message(role="user", content=req.body.prompt)], identity=identity)

    def _translate(self, req: Inbound, api_format: str, model: str, reasoning: str | None = None
                   ) -> tuple[bytes, list[Loss]]:
        if api_format != "responses":
            raise UnsupportedCapability(f"an image is generated on the Images or Responses API, "
                                        f"not api_format {api_format!r}")
        return IMAGES.images_to_responses(req.body, model)

    def _write_answer(self, req: Inbound, answer: Answer) -> tuple[bytes, list[Loss]]:
        return IMAGES.write_answer(answer, req.body)

    def stream_translator(self, req: Inbound, api_format: str, *, new_id: NewId = new_id,
                          estimate: Estimate | None = None) -> StreamTranslator:
        raise UnsupportedCapability("image generation answers whole")

    def refuse_empty(self, req: Inbound, api_formats: Iterable[str]) -> None:
        """Nothing: an Images request is a prompt, not a conversation."""

    # An Images request is a prompt, read by canonical(); its answers are never streamed (decode refuses it).
    def _read(self, req: Inbound) -> tuple[Conversation, list[Loss]]:
        raise UnsupportedCapability("an Images request is a prompt, not a conversation")

    def _writer(self, req: Inbound, new_id: NewId):
        raise UnsupportedCapability("image generation answers whole")

    def _passthrough_fail(self, message: str, status: int, code: str | None, kind: str, events: int,
                          head: bytes) -> bytes:
        raise UnsupportedCapability("image generation answers whole")


def make_adapters(store: responses.ResponseStore) -> dict[str, Adapter]:
    """One adapter per client API; the Responses one keeps its answers in ``store``."""
    return {"chat": ChatAdapter(), "messages": MessagesAdapter(), "responses": ResponsesAdapter(store),
            "images": ImagesAdapter()}


__all__ = ["Adapter", "ChatAdapter", "ImagesAdapter", "Inbound", "MessagesAdapter", "Outbound", "Reply",
           "ResponsesAdapter", "chat_messages", "make_adapters"]
