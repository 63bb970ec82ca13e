"""A mock OpenAI-compatible upstream for end-to-end tests and benchmarks.

Run it as ``python -m bench.mock_upstream --host 127.0.0.1 --port 0`` and read the port
from the ``mock_upstream: listening on http://HOST:PORT`` line it prints to stderr.

It shares the machine's two cores with the router under test, so it is a hand-written
HTTP/1.1 server on raw trio sockets rather than hypercorn (which costs ~1.2 ms of CPU per
request here). Every response, and every chunk of a stream, leaves in one send() on a
TCP_NODELAY socket, so Nagle and delayed ACKs never add their 40 ms to a measurement.

Why trio and not asyncio: measured here with sr-bench (20,000 whole answers), this server
costs ~85 µs of CPU per request at concurrency 1 and ~30 µs at 16; an asyncio Protocol
version of the same code costs ~45 and ~20 µs. The difference is 1-4% of the 1.1-2.2 ms
the floor proxy (hypercorn-trio + httpx) spends per request here, so the stack-consistent
trio code won, with disconnect detection as a plain sibling task, not callback bookkeeping.

Besides Chat Completions it answers, each in its real wire shape, Anthropic Messages
(``POST /v1/messages``, whole and SSE), OpenAI Responses (``POST /v1/responses``, whole and
SSE) and Images (``POST /v1/images/generations``). Answers stay deterministic:

- the canned ``--content`` text, by default;
- a tool call to the request's first function tool with arguments ``{"city": "Paris"}``
  (streamed as two argument deltas) when the request offers tools and its last message is
  a user turn containing "use the tool";
- ``The tool said: <result>`` when the last message is a tool result;
- with ``echo`` set, the last user turn as the mock received it (a tool call's arguments
  ``{"text": <that turn>}``), in ``chunks`` pieces: a request rewrite comes back in the answer;
- a 1x1 PNG as an ``image_generation_call`` when a Responses request offers the
  ``image_generation`` tool, and as ``b64_json`` (or a URL, if asked) from the Images route.

Counters (``GET /_mock/stats``), for generation requests (every route above): ``requests`` =
received; ``completed`` = successful answers written in full; ``cancelled`` = answers whose
client went away first (during --latency-ms or mid-stream); ``failures_injected``; so at rest
requests = completed + cancelled + failures_injected + malformed requests. ``by_api`` counts
received requests per route (chat, messages, responses, images); ``usage`` sums the token
counts the answers reported (``input_tokens``, ``output_tokens``); ``embeddings`` counts
``POST /v1/embeddings`` calls; ``connections`` counts accepted connections (what a client's reuse saves), each answered with deterministic hashed bag-of-words vectors
(``--embedding-dimensions`` wide unless the request asks for ``dimensions``), so texts sharing
words are near. With ``count_tokens`` set, ``POST /v1/messages/count_tokens`` answers ``input_tokens`` (its
body's bytes over four) and keeps its body as ``last_count``, apart from the last generation request (unset, it is
a 404, as a backend without the route). ``last_models_headers``: the headers of the last ``GET /v1/models`` (what
a router's health check sends). ``GET /_mock/last_stream``
returns the SSE bytes of the last stream it answered, unframed, so a test can compare what a
client received with what the model sent.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import random
import re
import sys
import time
from typing import Annotated, Literal

import msgspec
import trio

from bench._http import (
    Reader,
    Request,
    Server,
    abort,
    chunk,
    response_bytes,
    send_all,
    serve_until_signal,
    watched,
)

MODEL_ID = "mock-model"
MIDSTREAM_CHUNKS = 2
# A Responses stream opens with two events before its answer (response.created, response.in_progress): a cut after
# those alone is a failure before the answer began, which a router answers by falling back, not mid-stream.
OPENING_EVENTS = {"responses": 2}


class MockConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The knobs, settable from the command line and from ``POST /_mock/config``."""

    latency_ms: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    chunks: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 8
    chunk_interval_ms: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    fail_rate: Annotated[float, msgspec.Meta(ge=0, le=1)] = 0.0
    fail_status: Annotated[int, msgspec.Meta(ge=400, le=599)] = 500
    # status: an error answer of fail_status; reset: the connection dropped; midstream: a stream cut after two
    # chunks; error_event: a 200 stream whose one event is the API's error for fail_status (a Responses stream:
    # response.created and response.in_progress first, then response.failed), as a provider overloaded at once sends.
    fail_mode: Literal["status", "reset", "midstream", "error_event"] = "status"
    fail_first: Annotated[int, msgspec.Meta(ge=0)] = 0     # the next N generation requests fail, whatever the rate
    retry_after: str | None = None      # a Retry-After header on injected status failures
    # The body of injected status failures in place of the generated one: a provider's own error (OpenAI's
    # context_length_exceeded with its param, say).
    fail_body: str | None = None
    content: str = "Hello! This is a canned answer from the mock upstream."
    seed: int | None = None
    embedding_dimensions: Annotated[int, msgspec.Meta(ge=1, le=65_536)] = 64
    # Chat answers only: every token's logprob (with a runner-up 1.0 below it in top_logprobs), and a refusal
    # answered in place of the content (Chat and Responses answers), for the Looper's accept checks and translation.
    logprob: float | None = None
    refusal: str | None = None
    finish_reason: str | None = None      # e.g. "length": a truncated answer
    # The answer repeats the last user turn as received (a tool call: its arguments are {"text": that turn}),
    # streamed in ``chunks`` pieces: what a router rewrote in the request comes back in the answer.
    echo: bool = False
    count_tokens: bool = False      # serve POST /v1/messages/count_tokens (else 404)
    # A stream request answered whole (200 application/json), as a backend that ignores ``stream`` does.
    whole_for_stream: bool = False
    # Usage details, as a reasoning model with a warm prompt cache reports them: of the output tokens this many
    # reasoned (Chat completion_tokens_details, Responses output_tokens_details), of the input this many read
    # from the cache (Chat prompt_tokens_details, Responses input_tokens_details, Messages cache_read_input_tokens).
    reasoning_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0
    cached_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0
    # Response headers ("Name: value") on every answer, whole, streamed or an injected status failure: a
    # provider's own x-ratelimit-*, say.
    headers: list[str] = []
    # Every Responses answer carries this id (whole and in every event), as a backend whose ids collide with
    # another's: the router must not store two callers' answers under one id.
    response_id: str | None = None

    def extra_headers(self) -> bytes:
        return b"".join(b"%s\r\n" % h.encode("latin-1") for h in self.headers)


class StreamOptions(msgspec.Struct):
    """The request's stream_options; only include_usage changes the answer."""

    include_usage: bool = False


class ChatRequest(msgspec.Struct):
    """The few request fields the mock looks at; everything else is skipped unparsed.

    ``tools`` and ``messages`` stay raw JSON: only the last message is decoded, and only
    when the answer may depend on it. Measured: a plain chat request's decode went from
    ~0.4 to ~1.6 µs, against the ~30-85 µs the mock spends per request.
    """

    model: str = MODEL_ID
    stream: bool = False
    stream_options: StreamOptions | None = None
    tools: list[msgspec.Raw] | None = None
    messages: list[msgspec.Raw] = []


class MessagesRequest(msgspec.Struct):
    """An Anthropic Messages request, as little of it as the answer depends on."""

    model: str = MODEL_ID
    stream: bool = False
    tools: list[msgspec.Raw] | None = None
    messages: list[msgspec.Raw] = []
    tool_choice: dict | None = None


class ResponsesRequest(msgspec.Struct):
    """An OpenAI Responses request, as little of it as the answer depends on."""

    model: str = MODEL_ID
    stream: bool = False
    tools: list[msgspec.Raw] | None = None
    input: str | list[msgspec.Raw] = ""


class ImagesRequest(msgspec.Struct):
    model: str = "mock-image"
    prompt: str = ""
    n: int = 1
    response_format: str | None = None


class LastMessage(msgspec.Struct):
    """The last message or input item: its role or type and content, whatever the protocol."""

    role: str | None = None
    type: str | None = None
    content: str | list[dict] | None = None
    output: str | list[dict] | None = None


class ToolEntry(msgspec.Struct):
    """A tool definition in any of the three shapes (Chat nests the name under ``function``)."""

    type: str | None = None
    name: str | None = None
    function: dict | None = None


TRIGGER = "use the tool"
TOOL_ARGS = ('{"city": ', '"Paris"}')   # streamed as two argument deltas
# A 1x1 transparent PNG: the smallest real image every client can decode.
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
ROUTES = {
    b"/v1/chat/completions": "chat", b"/chat/completions": "chat",
    b"/v1/messages": "messages", b"/messages": "messages",
    b"/v1/responses": "responses", b"/responses": "responses",
    b"/v1/images/generations": "images", b"/images/generations": "images",
}


class Plan(msgspec.Struct):
    """What one answer will be, whatever protocol carries it."""

    api: str
    model: str
    stream: bool = False
    include_usage: bool = False
    text: str | None = None          # None: the canned content (the precomputed fast path)
    tool: str | None = None          # answer with a call to this tool
    image: bool = False              # answer with a generated image
    n: int = 1
    url: bool = False                # Images: a URL rather than b64_json
    tools_raw: list[msgspec.Raw] | None = None
    args: tuple[str, ...] = TOOL_ARGS        # a tool call's arguments, as its argument deltas


class Stats:
    """Counters served by ``/_mock/stats``; the last request is kept raw and decoded on demand."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Zero every counter and forget the last request."""
        self.requests = self.completed = self.cancelled = 0
        self.streams_started = self.failures_injected = 0
        self.by_api = {"chat": 0, "messages": 0, "responses": 0, "images": 0}
        self.input_tokens = self.output_tokens = 0
        self.embeddings = 0
        self.connections = 0        # accepted, so a client's connection reuse can be read
        self.last_headers: dict[bytes, bytes] | None = None
        self.last_body = b""
        self.last_count: bytes | None = None     # the last count_tokens body
        self.last_models_headers: dict[bytes, bytes] | None = None     # the last GET /v1/models (a health check)
        self.arrivals: list[float] = []     # time.monotonic() of each generation request (kept for the first 10k)

    def as_json(self) -> bytes:
        """The counters and the last generation request as a JSON document."""
        last = None
        if self.last_headers is not None:
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in self.last_headers.items()}
            try:
                body = msgspec.json.decode(self.last_body)
            except msgspec.DecodeError:
                body = self.last_body.decode("utf-8", "replace")
            last = {"headers": headers, "body": body}
        return msgspec.json.encode(
            {
                "requests": self.requests,
                "completed": self.completed,
                "cancelled": self.cancelled,
                "streams_started": self.streams_started,
                "failures_injected": self.failures_injected,
                "by_api": self.by_api,
                "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens},
                "embeddings": self.embeddings,
                "connections": self.connections,
                "last_request": last,
                "last_count": msgspec.json.decode(self.last_count) if self.last_count else None,
                "last_models_headers": {k.decode("latin-1"): v.decode("latin-1")
                                        for k, v in self.last_models_headers.items()}
                if self.last_models_headers is not None else None,
                "arrivals": self.arrivals,
            }
        )


def split_even(text: str, parts: int) -> list[str]:
    """Cut text into `parts` consecutive pieces of near-equal length (some may be empty)."""
    size, extra = divmod(len(text), parts)
    pieces, pos = [], 0
    for i in range(parts):
        end = pos + size + (1 if i < extra else 0)
        pieces.append(text[pos:end])
        pos = end
    return pieces


def stream_deltas(content: str, chunks: int) -> list[bytes]:
    """The encoded `"delta":...,"finish_reason":...` tail of each stream chunk.

    Deltas concatenate to exactly `content`: a role chunk, content chunks, a stop chunk,
    folded together when fewer than three chunks are asked for.
    """
    enc = msgspec.json.encode
    pieces = split_even(content, max(chunks - 2, 1))
    if chunks == 1:
        deltas = [({"role": "assistant", "content": content}, "stop")]
    elif chunks == 2:
        deltas = [({"role": "assistant", "content": content}, None), ({}, "stop")]
    else:
        deltas = [({"role": "assistant", "content": ""}, None)]
        deltas += [({"content": p}, None) for p in pieces]
        deltas.append(({}, "stop"))
    return [
        b'"delta":%s,"logprobs":null,"finish_reason":%s}]}' % (enc(d), enc(f)) for d, f in deltas
    ]


def bag_of_words(text: str, dim: int) -> list[float]:
    """A unit vector: each lower-cased word adds +-1 at a slot its hash picks (a zero vector without words)."""
    vec = [0.0] * dim
    for word in re.findall(r"\w+", text.lower()):
        h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        vec[h % dim] += 1.0 if (h >> 32) & 1 else -1.0
    norm = sum(v * v for v in vec) ** 0.5
    return [v / norm for v in vec] if norm else vec


def error_body(message: str, status: int, api: str = "chat") -> bytes:
    """An error document: Anthropic's shape on the Messages route, OpenAI's elsewhere."""
    if api == "messages":
        kind = {400: "invalid_request_error", 404: "not_found_error", 429: "rate_limit_error",
                529: "overloaded_error"}.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return msgspec.json.encode({"type": "error", "error": {"type": kind, "message": message}})
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return msgspec.json.encode(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}
    )


# An error event's kind by the status a whole answer would have had: (Anthropic's type, OpenAI's code).
_EVENT_ERRORS = {400: ("invalid_request_error", "invalid_prompt"), 429: ("rate_limit_error", "rate_limit_exceeded"),
                 503: ("overloaded_error", "server_is_overloaded"), 529: ("overloaded_error", "server_is_overloaded")}


def error_events(plan: Plan, status: int) -> list[bytes]:
    """A stream that fails before its answer begins: its API's error event(s) for ``status``."""
    kind, code = _EVENT_ERRORS.get(status, ("api_error", "server_error"))
    message = "Overloaded" if kind == "overloaded_error" else f"injected error event (status {status})"
    if plan.api == "messages":
        return [sse("error", {"type": "error", "error": {"type": kind, "message": message}})]
    if plan.api == "chat":
        return [b"data: %s\n\n" % _enc({"error": {"message": message, "type": code, "param": None, "code": code}})]
    response = {"id": "resp_failed", "object": "response", "created_at": 0, "model": plan.model,
                "status": "in_progress", "output": [], "error": None}
    return [sse("response.created", {"type": "response.created", "sequence_number": 0, "response": response}),
            sse("response.in_progress", {"type": "response.in_progress", "sequence_number": 1, "response": response}),
            sse("response.failed", {"type": "response.failed", "sequence_number": 2, "response": {
                **response, "status": "failed", "error": {"code": code, "message": message}}})]


def stream_head(keep_alive: bool, extra: bytes = b"") -> bytes:
    """The head of a chunked SSE response; ``extra``: complete ``Name: value\\r\\n`` lines."""
    close = b"" if keep_alive else b"Connection: close\r\n"
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Transfer-Encoding: chunked\r\n%s%s\r\n" % (extra, close)
    )


def usage(prompt_bytes: int, content: str) -> dict[str, int]:
    """Token counts of a rough 4-bytes-per-token estimate; clients only need them consistent."""
    prompt = max(1, prompt_bytes // 4)
    completion = max(1, len(content) // 4)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class MockUpstream(Server):
    """The server: one trio task per connection (``bench._http.Server``), requests answered in order."""

    def __init__(self, config: MockConfig) -> None:
        self.stats = Stats()
        self.ids = itertools.count(1)
        self.last_stream = b""      # the SSE bytes of the last stream answered, as sent (GET /_mock/last_stream)
        self.apply(config)

    async def connection(self, sock: trio.socket.SocketType) -> None:
        self.stats.connections += 1
        await super().connection(sock)

    def apply(self, config: MockConfig) -> None:
        """Install a configuration; a seed restarts the failure sequence."""
        self.config = config
        self.rng = random.Random(config.seed)
        self.deltas = stream_deltas(config.content, config.chunks)
        self.content_json = msgspec.json.encode(config.content)

    def bad_request(self, message: str) -> bytes:
        """The body of the 400 a request that is not HTTP/1.1 gets."""
        return error_body(message, 400)

    async def dispatch(self, sock: trio.socket.SocketType, reader: Reader, req: Request) -> bool:
        """Answer one request; returns whether the connection stays open."""
        api = ROUTES.get(req.path)
        if req.method == b"POST" and api is not None:
            return await self.generate(sock, reader, req, api)
        if req.method == b"GET" and req.path in (b"/v1/models", b"/models"):
            self.stats.last_models_headers = req.headers
            body = msgspec.json.encode(
                {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "mock"}]}
            )
            status = 200
        elif req.method == b"POST" and req.path in (b"/v1/messages/count_tokens", b"/messages/count_tokens") \
                and self.config.count_tokens:
            self.stats.last_count = req.body
            status, body = 200, msgspec.json.encode({"input_tokens": len(req.body) // 4})
        elif req.method == b"POST" and req.path in (b"/v1/embeddings", b"/embeddings"):
            status, body = self.embed(req.body)
        elif req.path.startswith(b"/_mock/"):
            status, body = self.admin(req)
        else:
            status, body = 404, error_body(f"no route for {req.method.decode()} {req.path.decode()}", 404)
        await send_all(sock, response_bytes(status, body, req.keep_alive))
        return req.keep_alive

    def embed(self, body: bytes) -> tuple[int, bytes]:
        """An OpenAI embeddings answer: one hashed bag-of-words unit vector per input text."""
        self.stats.embeddings += 1
        try:
            doc = msgspec.json.decode(body)
            texts = doc["input"] if isinstance(doc["input"], list) else [doc["input"]]
            dim = int(doc.get("dimensions") or self.config.embedding_dimensions)
        except (msgspec.DecodeError, KeyError, TypeError, ValueError) as exc:
            return 400, error_body(f"bad embeddings request: {exc!r}", 400)
        data = [{"object": "embedding", "index": i, "embedding": bag_of_words(str(t), dim)} for i, t in enumerate(texts)]
        tokens = sum(len(str(t).split()) for t in texts)
        return 200, msgspec.json.encode({"object": "list", "data": data, "model": doc.get("model", MODEL_ID),
                                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def admin(self, req: Request) -> tuple[int, bytes]:
        """The test-only routes under /_mock/."""
        if req.path == b"/_mock/stats" and req.method == b"GET":
            return 200, self.stats.as_json()
        if req.path == b"/_mock/last_stream" and req.method == b"GET":
            return 200, self.last_stream
        if req.path == b"/_mock/reset" and req.method == b"POST":
            self.stats.reset()
            return 200, b'{"ok":true}'
        if req.path == b"/_mock/config":
            if req.method == b"POST":
                try:
                    self.apply(self.updated_config(req.body))
                except (msgspec.DecodeError, msgspec.ValidationError, TypeError) as exc:
                    return 400, error_body(f"bad config: {exc}", 400)
            return 200, msgspec.json.encode(self.config)
        return 404, error_body(f"no admin route {req.path.decode()}", 404)

    def updated_config(self, body: bytes) -> MockConfig:
        """The current config with the keys of a JSON object (dashes or underscores) replaced."""
        changes = msgspec.json.decode(body or b"{}")
        if not isinstance(changes, dict):
            raise TypeError("config must be a JSON object")
        merged = msgspec.structs.asdict(self.config)
        merged.update({key.replace("-", "_"): value for key, value in changes.items()})
        return msgspec.convert(merged, MockConfig)

    async def generate(self, sock: trio.socket.SocketType, reader: Reader, req: Request, api: str) -> bool:
        """Answer a generation request of any route: whole, streamed, or an injected failure."""
        stats = self.stats
        stats.requests += 1
        stats.by_api[api] += 1
        if len(stats.arrivals) < 10_000:
            stats.arrivals.append(time.monotonic())
        stats.last_headers, stats.last_body = req.headers, req.body
        try:
            plan = make_plan(api, req.body)
        except msgspec.DecodeError as exc:   # ValidationError included
            body = error_body(f"bad request body: {exc}", 400, api)
            await send_all(sock, response_bytes(400, body, req.keep_alive))
            return req.keep_alive
        config = self.config
        if config.echo and not plan.image:
            echo(plan, api, req.body, config.chunks)
        failing = config.fail_rate > 0 and self.rng.random() < config.fail_rate
        if config.fail_first > 0:
            config.fail_first -= 1
            failing = True
        if failing:
            stats.failures_injected += 1
            return await self.fail(sock, req, plan, config)
        if config.latency_ms <= 0 and (not plan.stream or config.whole_for_stream):
            await send_all(sock, response_bytes(200, self.whole_body(req, plan, config), req.keep_alive,
                                                extra_headers=config.extra_headers()))
            stats.completed += 1
            return req.keep_alive
        finished = await watched(reader, self.answer(sock, req, plan, config))
        if finished:
            stats.completed += 1
        else:
            stats.cancelled += 1
        return finished and req.keep_alive

    async def answer(self, sock: trio.socket.SocketType, req: Request, plan: Plan, config: MockConfig) -> None:
        """The successful answer, after the configured latency."""
        if config.latency_ms > 0:
            await trio.sleep(config.latency_ms / 1000)
        if not plan.stream or config.whole_for_stream:
            await send_all(sock, response_bytes(200, self.whole_body(req, plan, config), req.keep_alive,
                                                extra_headers=config.extra_headers()))
            return
        self.stats.streams_started += 1
        events = self.stream_events(req, plan, config)
        await send_all(sock, stream_head(req.keep_alive, config.extra_headers()) + events[0])
        interval = config.chunk_interval_ms / 1000
        for event in events[1:]:
            if interval > 0:
                await trio.sleep(interval)
            await send_all(sock, event)

    def count(self, prompt_bytes: int, content: str) -> dict[str, int]:
        """The answer's usage, added to the totals."""
        u = usage(prompt_bytes, content)
        c = self.config
        if c.reasoning_tokens or c.cached_tokens:
            u["prompt_tokens"] += c.cached_tokens
            u["completion_tokens"] += c.reasoning_tokens
            u["total_tokens"] = u["prompt_tokens"] + u["completion_tokens"]
            u["prompt_tokens_details"] = {"cached_tokens": c.cached_tokens}
            u["completion_tokens_details"] = {"reasoning_tokens": c.reasoning_tokens}
        self.stats.input_tokens += u["prompt_tokens"]
        self.stats.output_tokens += u["completion_tokens"]
        return u

    def whole_body(self, req: Request, plan: Plan, config: MockConfig) -> bytes:
        """The body of a non-streamed answer in the route's shape."""
        ident = next(self.ids)
        return fixed_id(self._whole_body(req, plan, config, ident), plan, ident, config)

    def _whole_body(self, req: Request, plan: Plan, config: MockConfig, ident: int) -> bytes:
        created = int(time.time())
        if plan.api == "chat" and plan.tool is None and scripted(config):
            content = plan_content(plan, config)
            return chat_scripted(plan, ident, created, self.count(len(req.body), content), content, config)
        if plan.api == "responses" and plan.tool is None and not plan.image and config.refusal:
            u = self.count(len(req.body), config.refusal)
            return _enc(responses_object(plan, ident, created, "completed", [refusal_item(ident, config.refusal)], u))
        if plan.api == "chat" and plan.text is None and plan.tool is None:
            return b"".join((   # the hot path of the benchmarks: the canned text, pre-encoded
                b'{"id":"chatcmpl-mock-%d","object":"chat.completion","created":%d,"model":%s,'
                % (ident, created, msgspec.json.encode(plan.model)),
                b'"choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null},'
                % self.content_json,
                b'"logprobs":null,"finish_reason":"stop"}],"usage":%s}'
                % msgspec.json.encode(self.count(len(req.body), config.content)),
            ))
        content = plan_content(plan, config)
        u = self.count(len(req.body), content)
        return WHOLE[plan.api](plan, ident, created, u, content)

    def stream_events(self, req: Request, plan: Plan, config: MockConfig) -> list[bytes]:
        """Every write of a stream after the head, each a framed chunk; the last ends the body."""
        ident, created = next(self.ids), int(time.time())
        content = plan_content(plan, config)
        u = self.count(len(req.body), content)
        if plan.api == "chat" and plan.tool is None and scripted(config):
            events = chat_scripted_events(plan, ident, created, u, content, config)
        elif plan.api == "responses" and plan.tool is None and not plan.image and config.refusal:
            events = responses_refusal_events(plan, ident, created, u, config.refusal)
        elif plan.api == "chat" and plan.tool is None:
            deltas = self.deltas if plan.text is None else stream_deltas(content, config.chunks)
            prefix = b'data: {"id":"chatcmpl-mock-%d","object":"chat.completion.chunk","created":%d,"model":%s,' % (
                ident, created, msgspec.json.encode(plan.model)
            )
            events = [prefix + b'"choices":[{"index":0,' + delta + b"\n\n" for delta in deltas]
            if plan.include_usage:
                events.append(prefix + b'"choices":[],"usage":%s}\n\n' % msgspec.json.encode(u))
            events.append(b"data: [DONE]\n\n")
        else:
            events = EVENTS[plan.api](plan, ident, created, u, content, config.chunks)
        events = [fixed_id(e, plan, ident, config) for e in events]
        self.last_stream = b"".join(events)
        framed = [chunk(event) for event in events]
        framed[-1] += b"0\r\n\r\n"
        return framed

    async def fail(self, sock: trio.socket.SocketType, req: Request, plan: Plan, config: MockConfig) -> bool:
        """Inject the configured failure; returns whether the connection stays open."""
        if config.latency_ms > 0:
            await trio.sleep(config.latency_ms / 1000)
        if config.fail_mode == "reset":
            abort(sock)
            return False
        if config.fail_mode == "midstream":
            await self.fail_midstream(sock, req, plan, config)
            return False
        if config.fail_mode == "error_event" and plan.stream:
            events = error_events(plan, config.fail_status)
            await send_all(sock, stream_head(req.keep_alive, config.extra_headers()) + b"".join(map(chunk, events))
                           + b"0\r\n\r\n")
            return req.keep_alive
        status = config.fail_status
        body = config.fail_body.encode() if config.fail_body is not None else error_body(
            f"injected failure (status {status})", status, plan.api)
        extra = b"Retry-After: %s\r\n" % config.retry_after.encode() if config.retry_after else b""
        extra += config.extra_headers()
        await send_all(sock, response_bytes(status, body, req.keep_alive, extra_headers=extra))
        return req.keep_alive

    async def fail_midstream(self, sock: trio.socket.SocketType, req: Request, plan: Plan, config: MockConfig) -> None:
        """Start the answer, then drop the connection: two chunks of a stream's answer, half a whole body."""
        if not plan.stream:
            body = self.whole_body(req, plan, config)
            await send_all(sock, response_bytes(200, body, req.keep_alive)[: -(len(body) // 2)])
            return
        self.stats.streams_started += 1
        events = self.stream_events(req, plan, config)[:MIDSTREAM_CHUNKS + OPENING_EVENTS.get(plan.api, 0)]
        await send_all(sock, stream_head(req.keep_alive) + events[0])
        for event in events[1:]:
            await send_all(sock, event)


# --- what to answer -----------------------------------------------------------------------------


def make_plan(api: str, body: bytes) -> Plan:
    """Decode as little of the request as the answer depends on."""
    if api == "chat":
        r = msgspec.json.decode(body, type=ChatRequest)
        include = bool(r.stream_options and r.stream_options.include_usage)
        return converse(Plan(api, r.model, r.stream, include, tools_raw=r.tools), r.messages[-1] if r.messages else None)
    if api == "messages":
        m = msgspec.json.decode(body, type=MessagesRequest)
        plan = converse(Plan(api, m.model, m.stream, tools_raw=m.tools), m.messages[-1] if m.messages else None)
        return forced(plan, m.tool_choice)
    if api == "responses":
        q = msgspec.json.decode(body, type=ResponsesRequest)
        plan = Plan(api, q.model, q.stream, tools_raw=q.tools)
        if any(tool_entry(t).type == "image_generation" for t in q.tools or ()):
            plan.image = True
            return plan
        if isinstance(q.input, str):
            return converse(plan, LastMessage(role="user", content=q.input))
        return converse(plan, q.input[-1] if q.input else None)
    i = msgspec.json.decode(body, type=ImagesRequest)
    return Plan(api, i.model, n=max(1, min(i.n, 10)), url=i.response_format == "url", image=True)


def converse(plan: Plan, last: msgspec.Raw | LastMessage | None) -> Plan:
    """A tool call if the user asks for one and tools are offered; a quote of a tool result."""
    if last is None:
        return plan
    if type(last) is msgspec.Raw:
        if plan.tools_raw is None:
            raw = bytes(last)
            # "tool" covers Chat's tool role and Messages' tool_result blocks.
            if b"tool" not in raw and b"function_call_output" not in raw:
                return plan   # a plain turn: skip decoding it (the benchmarks' hot path)
        last = msgspec.json.decode(last, type=LastMessage)
    result = tool_result(last)
    if result is not None:
        plan.text = f"The tool said: {result}"
    elif plan.tools_raw and last.role == "user" and TRIGGER in text_of(last.content).lower():
        plan.tool = next((n for n in (tool_name(t) for t in plan.tools_raw) if n), None)
    return plan


def forced(plan: Plan, choice: dict | None) -> Plan:
    """A Messages tool_choice that makes the model call a tool (``tool``: that one; ``any``: the first, as the mock
    picks), unless the turn answers a tool result."""
    kind = (choice or {}).get("type")
    if plan.tool is None and plan.text is None and plan.tools_raw and kind in ("tool", "any"):
        plan.tool = choice.get("name") if kind == "tool" else tool_name(plan.tools_raw[0])
    return plan


class _Turns(msgspec.Struct):
    messages: list[LastMessage] = []
    input: str | list[LastMessage] = ""


def echo(plan: Plan, api: str, body: bytes, chunks: int) -> None:
    """``plan`` answering with the last user turn's text (``MockConfig.echo``)."""
    turns = msgspec.json.decode(body, type=_Turns)
    last = turns.input if api == "responses" else turns.messages
    text = last if isinstance(last, str) else text_of(last[-1].content) if last else ""
    if plan.tool is not None:
        plan.args = tuple(pieces(_enc({"text": text}).decode(), chunks))
    else:
        plan.text = text


def tool_result(last: LastMessage) -> str | None:
    """The text of a tool result, if the last message is one (Chat, Messages or Responses)."""
    if last.role == "tool":
        return text_of(last.content)
    if last.type == "function_call_output":
        return text_of(last.output)
    if last.role == "user" and isinstance(last.content, list):
        results = [b for b in last.content if b.get("type") == "tool_result"]
        if results:
            return text_of(results[-1].get("content"))
    return None


def text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def tool_entry(raw: msgspec.Raw) -> ToolEntry:
    return msgspec.json.decode(raw, type=ToolEntry)


def tool_name(raw: msgspec.Raw) -> str | None:
    """A function tool's name in any of the three shapes; None for hosted tools."""
    t = tool_entry(raw)
    if t.function is not None:
        return t.function.get("name")
    if t.type in (None, "custom", "function"):
        return t.name
    return None


def plan_content(plan: Plan, config: MockConfig) -> str:
    """The answer's text (or, for a tool call, its arguments: what usage counts)."""
    if plan.tool is not None:
        return "".join(plan.args)
    if plan.image:
        return ""
    return plan.text if plan.text is not None else config.content


def pieces(text: str, chunks: int) -> list[str]:
    """Text deltas for a stream of about `chunks` events, none empty (one, if text is)."""
    return [p for p in split_even(text, max(chunks - 2, 1)) if p] or [text]


_enc = msgspec.json.encode


def sse(name: str, data: dict) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (name.encode(), _enc(data))


# Chat Completions (the tool-call and tool-result answers; plain text keeps its fast path).


def chat_whole(plan: Plan, ident: int, created: int, u: dict, content: str) -> bytes:
    message: dict = {"role": "assistant", "content": content, "refusal": None}
    if plan.tool is not None:
        message["content"] = None
        message["tool_calls"] = [{"id": f"call_mock_{ident}", "type": "function",
                                  "function": {"name": plan.tool, "arguments": content}}]
    return _enc({"id": f"chatcmpl-mock-{ident}", "object": "chat.completion", "created": created,
                 "model": plan.model, "choices": [{"index": 0, "message": message, "logprobs": None,
                                                   "finish_reason": "tool_calls" if plan.tool else "stop"}],
                 "usage": u})


def chat_events(plan: Plan, ident: int, created: int, u: dict, content: str, chunks: int) -> list[bytes]:
    head = {"id": f"chatcmpl-mock-{ident}", "object": "chat.completion.chunk", "created": created,
            "model": plan.model}

    def event(delta: dict, finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return b"data: " + _enc({**head, "choices": [choice]}) + b"\n\n"

    call = {"index": 0, "id": f"call_mock_{ident}", "type": "function", "function": {"name": plan.tool, "arguments": ""}}
    events = [event({"role": "assistant", "content": None, "tool_calls": [call]})]
    events += [event({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}) for piece in plan.args]
    events.append(event({}, "tool_calls"))
    if plan.include_usage:
        events.append(b"data: " + _enc({**head, "choices": [], "usage": u}) + b"\n\n")
    return events + [b"data: [DONE]\n\n"]


def scripted(config: MockConfig) -> bool:
    return config.logprob is not None or config.refusal is not None or config.finish_reason is not None


def _logprobs(text: str, lp: float | None) -> dict | None:
    if lp is None:
        return None
    return {"content": [{"token": t, "logprob": lp, "top_logprobs": [{"token": t, "logprob": lp},
                                                                      {"token": "~", "logprob": lp - 1.0}]}
                        for t in text.split()]}


def chat_scripted(plan: Plan, ident: int, created: int, u: dict, content: str, config: MockConfig) -> bytes:
    """A whole Chat answer with scripted logprobs, or a refusal."""
    message = {"role": "assistant", "content": None if config.refusal else content, "refusal": config.refusal}
    choice = {"index": 0, "message": message, "logprobs": _logprobs(content, config.logprob),
              "finish_reason": config.finish_reason or "stop"}
    return _enc({"id": f"chatcmpl-mock-{ident}", "object": "chat.completion", "created": created,
                 "model": plan.model, "choices": [choice], "usage": u})


def chat_scripted_events(plan: Plan, ident: int, created: int, u: dict, content: str,
                         config: MockConfig) -> list[bytes]:
    head = {"id": f"chatcmpl-mock-{ident}", "object": "chat.completion.chunk", "created": created,
            "model": plan.model}

    def event(delta: dict, logprobs: dict | None = None, finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
        return b"data: " + _enc({**head, "choices": [choice]}) + b"\n\n"

    if config.refusal:
        events = [event({"role": "assistant", "refusal": config.refusal})]
    else:
        events = [event({"role": "assistant", "content": ""})]
        events += [event({"content": piece}, _logprobs(piece, config.logprob))
                   for piece in pieces(content, config.chunks)]
    events.append(event({}, None, config.finish_reason or "stop"))
    if plan.include_usage:
        events.append(b"data: " + _enc({**head, "choices": [], "usage": u}) + b"\n\n")
    return events + [b"data: [DONE]\n\n"]


# Anthropic Messages.


def messages_block(plan: Plan, ident: int, content: str) -> dict:
    if plan.tool is not None:
        return {"type": "tool_use", "id": f"toolu_mock_{ident}", "name": plan.tool, "input": msgspec.json.decode("".join(plan.args))}
    return {"type": "text", "text": content}


def messages_whole(plan: Plan, ident: int, created: int, u: dict, content: str) -> bytes:
    return _enc({"id": f"msg_mock_{ident}", "type": "message", "role": "assistant", "model": plan.model,
                 "content": [messages_block(plan, ident, content)],
                 "stop_reason": "tool_use" if plan.tool else "end_turn", "stop_sequence": None,
                 "usage": messages_usage(u)})


def messages_usage(u: dict) -> dict:
    """Messages' usage: the cache's reads apart from input_tokens; reasoning has no field of its own."""
    cached = u.get("prompt_tokens_details", {}).get("cached_tokens", 0)
    usage_doc = {"input_tokens": u["prompt_tokens"] - cached, "output_tokens": u["completion_tokens"]}
    if cached:
        usage_doc["cache_read_input_tokens"] = cached
    return usage_doc


def messages_events(plan: Plan, ident: int, created: int, u: dict, content: str, chunks: int) -> list[bytes]:
    message = {"id": f"msg_mock_{ident}", "type": "message", "role": "assistant", "model": plan.model,
               "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {**messages_usage(u), "output_tokens": 1}}
    if plan.tool is not None:
        block = {**messages_block(plan, ident, content), "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in plan.args]
    else:
        block = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in pieces(content, chunks)]
    events = [sse("message_start", {"type": "message_start", "message": message}),
              sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
              sse("ping", {"type": "ping"})]
    events += [sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d}) for d in deltas]
    events += [sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
               sse("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": "tool_use" if plan.tool else "end_turn",
                                               "stop_sequence": None},
                                     "usage": {"output_tokens": u["completion_tokens"]}}),
               sse("message_stop", {"type": "message_stop"})]
    return events


# OpenAI Responses.


def responses_item(plan: Plan, ident: int, content: str) -> dict:
    if plan.image:
        return {"type": "image_generation_call", "id": f"ig_mock_{ident}", "status": "completed", "result": PNG_B64}
    if plan.tool is not None:
        return {"type": "function_call", "id": f"fc_mock_{ident}", "call_id": f"call_mock_{ident}",
                "name": plan.tool, "arguments": content, "status": "completed"}
    return {"type": "message", "id": f"msg_mock_{ident}", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": content, "annotations": []}]}


def fixed_id(body: bytes, plan: Plan, ident: int, config: MockConfig) -> bytes:
    """A Responses answer (or event) with its id replaced by ``config.response_id``, when one is set."""
    if config.response_id is None or plan.api != "responses":
        return body
    return body.replace(b'"resp_mock_%d"' % ident, msgspec.json.encode(config.response_id))


def responses_object(plan: Plan, ident: int, created: int, status: str, output: list, u: dict | None) -> dict:
    usage_doc = None if u is None else {
        "input_tokens": u["prompt_tokens"], "output_tokens": u["completion_tokens"],
        "input_tokens_details": {"cached_tokens": u.get("prompt_tokens_details", {}).get("cached_tokens", 0),
                                 "cache_write_tokens": 0},
        "output_tokens_details": {
            "reasoning_tokens": u.get("completion_tokens_details", {}).get("reasoning_tokens", 0)},
        "total_tokens": u["total_tokens"]}
    return {"id": f"resp_mock_{ident}", "object": "response", "created_at": created, "status": status,
            "error": None, "incomplete_details": None, "instructions": None, "max_output_tokens": None,
            "metadata": {}, "model": plan.model, "output": output, "parallel_tool_calls": True,
            "previous_response_id": None, "store": True, "temperature": 1.0,
            "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": plan.tools_raw or [],
            "top_p": 1.0, "truncation": "disabled", "usage": usage_doc}


def refusal_item(ident: int, refusal: str) -> dict:
    return {"type": "message", "id": f"msg_mock_{ident}", "status": "completed", "role": "assistant",
            "content": [{"type": "refusal", "refusal": refusal}]}


def responses_refusal_events(plan: Plan, ident: int, created: int, u: dict, refusal: str) -> list[bytes]:
    """A streamed refusal, as OpenAI streams one: a refusal part, its delta and done events."""
    seq = itertools.count()

    def event(kind: str, **fields) -> bytes:
        return sse(kind, {"type": kind, "sequence_number": next(seq), **fields})

    item = refusal_item(ident, refusal)
    where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
    pending = responses_object(plan, ident, created, "in_progress", [], None)
    return [event("response.created", response=pending), event("response.in_progress", response=pending),
            event("response.output_item.added", output_index=0, item={**item, "status": "in_progress", "content": []}),
            event("response.content_part.added", **where, part={"type": "refusal", "refusal": ""}),
            event("response.refusal.delta", **where, delta=refusal),
            event("response.refusal.done", **where, refusal=refusal),
            event("response.content_part.done", **where, part=item["content"][0]),
            event("response.output_item.done", output_index=0, item=item),
            event("response.completed", response=responses_object(plan, ident, created, "completed", [item], u))]


def responses_whole(plan: Plan, ident: int, created: int, u: dict, content: str) -> bytes:
    return _enc(responses_object(plan, ident, created, "completed", [responses_item(plan, ident, content)], u))


def responses_events(plan: Plan, ident: int, created: int, u: dict, content: str, chunks: int) -> list[bytes]:
    seq = itertools.count()

    def event(kind: str, **fields) -> bytes:
        return sse(kind, {"type": kind, "sequence_number": next(seq), **fields})

    item = responses_item(plan, ident, content)
    pending = responses_object(plan, ident, created, "in_progress", [], None)
    events = [event("response.created", response=pending), event("response.in_progress", response=pending)]
    if plan.image:
        events.append(event("response.output_item.added", output_index=0,
                            item={**item, "status": "in_progress", "result": None}))
    elif plan.tool is not None:
        events.append(event("response.output_item.added", output_index=0,
                            item={**item, "arguments": "", "status": "in_progress"}))
        events += [event("response.function_call_arguments.delta", item_id=item["id"], output_index=0, delta=p)
                   for p in plan.args]
        events.append(event("response.function_call_arguments.done", item_id=item["id"], output_index=0,
                            arguments=content))
    else:
        where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
        events.append(event("response.output_item.added", output_index=0,
                            item={**item, "status": "in_progress", "content": []}))
        events.append(event("response.content_part.added", **where,
                            part={"type": "output_text", "text": "", "annotations": []}))
        events += [event("response.output_text.delta", **where, delta=p, logprobs=[]) for p in pieces(content, chunks)]
        events.append(event("response.output_text.done", **where, text=content, logprobs=[]))
        events.append(event("response.content_part.done", **where, part=item["content"][0]))
    events.append(event("response.output_item.done", output_index=0, item=item))
    done = responses_object(plan, ident, created, "completed", [item], u)
    events.append(event("response.completed", response=done))
    return events


# Images.


def images_whole(plan: Plan, ident: int, created: int, u: dict, content: str) -> bytes:
    data = [{"url": f"https://images.mock.invalid/{ident}-{i}.png"} if plan.url else {"b64_json": PNG_B64}
            for i in range(plan.n)]
    return _enc({"created": created, "data": data,
                 "usage": {"input_tokens": u["prompt_tokens"], "output_tokens": plan.n,
                           "total_tokens": u["prompt_tokens"] + plan.n,
                           "input_tokens_details": {"text_tokens": u["prompt_tokens"], "image_tokens": 0}}})


WHOLE = {"chat": chat_whole, "messages": messages_whole, "responses": responses_whole, "images": images_whole}
EVENTS = {"chat": chat_events, "messages": messages_events, "responses": responses_events}


async def run(host: str, port: int, config: MockConfig) -> None:
    """Serve until SIGTERM or SIGINT."""
    await serve_until_signal(MockUpstream(config), "mock_upstream", host, port)


def build_parser() -> argparse.ArgumentParser:
    """The command line; every knob can also be changed later through POST /_mock/config."""
    d = MockConfig()
    p = argparse.ArgumentParser(
        prog="python -m bench.mock_upstream",
        description="A cheap mock LLM upstream (OpenAI Chat Completions, Responses and Images; "
        "Anthropic Messages) for tests and benchmarks.",
        epilog="Routes: POST /v1/chat/completions, /v1/messages, /v1/responses, /v1/images/generations "
        "(each also without /v1), GET /v1/models; for tests "
        "GET /_mock/stats, POST /_mock/reset (zero the counters), POST /_mock/config with a JSON "
        "object of any knob above, e.g. {\"fail_rate\": 1, \"fail_status\": 429}.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    p.add_argument("--port", type=int, default=8001, help="port to bind; 0 picks a free one (default %(default)s)")
    p.add_argument("--latency-ms", type=float, default=d.latency_ms, help="delay before the response head")
    p.add_argument("--chunks", type=int, default=d.chunks, help="chat.completion.chunk events per stream; Messages and Responses streams "
                   "carry chunks-2 text deltas too (default %(default)s)")
    p.add_argument("--chunk-interval-ms", type=float, default=d.chunk_interval_ms, help="pause between stream chunks")
    p.add_argument("--fail-rate", type=float, default=d.fail_rate, help="probability 0..1 of an injected failure")
    p.add_argument("--fail-status", type=int, default=d.fail_status, help="status of injected failures (default %(default)s)")
    p.add_argument(
        "--fail-mode", choices=["status", "reset", "midstream"], default=d.fail_mode,
        help="status: an OpenAI error JSON; reset: RST without answering; midstream: drop the connection "
        "after 2 stream chunks (after half the body of a whole answer)",
    )
    p.add_argument("--fail-first", type=int, default=d.fail_first, help="fail the next N generation requests")
    p.add_argument("--header", dest="headers", action="append", default=[],
                   help="'Name: value' on every answer (repeatable), e.g. a provider's x-ratelimit-*")
    p.add_argument("--fail-body", default=d.fail_body, help="the body of injected status failures (JSON text), "
                   "in place of the generated error")
    p.add_argument("--retry-after", default=d.retry_after, help="Retry-After header value on injected failures")
    p.add_argument("--content", default=d.content, help="the fixed completion text")
    p.add_argument("--seed", type=int, default=None, help="seed for deterministic failure injection")
    p.add_argument("--logprob", type=float, default=None, help="Chat answers carry this logprob for every token")
    p.add_argument("--refusal", default=None, help="Chat and Responses answers refuse with this text instead of the content")
    p.add_argument("--finish-reason", default=None, help="Chat answers end with this finish_reason (e.g. length)")
    p.add_argument("--response-id", default=None, help="every Responses answer carries this id (colliding ids)")
    p.add_argument("--echo", action="store_true", help="answer with the last user turn as received (a tool "
                   "call: arguments {\"text\": that turn}), streamed in --chunks pieces")
    p.add_argument("--count-tokens", action="store_true", help="serve POST /v1/messages/count_tokens: "
                   "input_tokens = the body's bytes / 4 (default: 404)")
    p.add_argument("--whole-for-stream", action="store_true", help="answer a stream request whole "
                   "(200 application/json), as a backend that ignores stream does")
    p.add_argument("--reasoning-tokens", type=int, default=d.reasoning_tokens,
                   help="answers count this many reasoning tokens in their output (default %(default)s)")
    p.add_argument("--cached-tokens", type=int, default=d.cached_tokens,
                   help="answers count this many cache-read tokens in their input (default %(default)s)")
    p.add_argument("--embedding-dimensions", type=int, default=d.embedding_dimensions,
                   help="width of /v1/embeddings vectors when the request names no dimensions")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.mock_upstream``."""
    args = build_parser().parse_args(argv)
    try:
        config = msgspec.convert(
            {k: getattr(args, k) for k in MockConfig.__struct_fields__}, MockConfig
        )
    except msgspec.ValidationError as exc:
        print(f"mock_upstream: {exc}", file=sys.stderr)
        return 2
    trio.run(run, args.host, args.port, config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
