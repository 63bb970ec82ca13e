"""``POST /v1/responses/input_tokens``: how many input tokens a Responses request holds, in OpenAI's shape
(``{"object": "response.input_tokens", "input_tokens": N}``).

Always the router's estimate, marked ``x-vsr-token-count: estimate``: the count ``/v1/messages/count_tokens``
answers when no Anthropic backend counts (``protocol.prompt_texts.conversation_texts``, vsr-static-1's WordPiece
tokenizer), of the conversation the request would send: ``previous_response_id`` expanded from the caller's own
stored responses, as ``POST /v1/responses`` expands it. A ``conversation`` (OpenAI's Conversations API) is kept
by OpenAI, not the router: its items cannot be counted, so it is refused naming it rather than counted as none.

The caller's key is held as on ``/v1/responses``: a ``model`` it may not name is a 403, a key over one of its
limits gets 429 with Retry-After; as count_tokens, a count takes no place in the window. No route is chosen:
nothing is sent to a model, so no decision model is asked either.
"""
from __future__ import annotations

import msgspec
import trio

from ..auth.access import check_name
from ..errors import UnsupportedParameter, VsrError
from ..protocol import chat, responses
from ..protocol.adapters import Inbound
from ..protocol.errors import BodyProblem, decode_body, openai_request_error
from ..protocol.prompt_texts import conversation_texts
from .asgi import Receive, Scope, Send, read_body
from .count_tokens import ESTIMATED, estimate, refused_count, send_count
from .pipeline.offload import off_loop
from .state import AppState

PATH = "/v1/responses/input_tokens"
# Parameters the count checks and then leaves out of the Responses request it reads.
_CHECKED_ONLY = ("personality",)


class InputTokens(msgspec.Struct, frozen=True):
    input_tokens: int
    object: str = "response.input_tokens"


async def handle_input_tokens(state: AppState, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer one input_tokens request in OpenAI's shape, errors included."""
    adapter = state.adapters["responses"]
    identity = state.identity(scope)
    extra: list[tuple[bytes, bytes]] = []
    limited = False
    try:
        raw = await read_body(scope, receive, state.max_body_bytes, state.body_pace)
        asked = await off_loop(state.metrics, "decode", len(raw), _checked, raw)
        if asked.conversation is not None:
            raise UnsupportedParameter(
                "Unsupported parameter: 'conversation': its items are kept by OpenAI, not by this router, which "
                "cannot count them; send the items as input, or previous_response_id of a response it answered.",
                param="conversation")
        if asked.model:
            check_name(identity, asked.model, state.table.by_name, state.table.models)
        if state.limiter.active:
            extra += await state.limiter.check(identity, "responses")
        req = await off_loop(state.metrics, "decode", len(raw), _as_request, adapter, raw, scope["headers"])
        req.owner = identity.owner
        req = await adapter.prepare(req)
        conv, _ = adapter.conversation(req)
        count = await trio.to_thread.run_sync(estimate, conversation_texts(conv))
        status, out = 200, msgspec.json.encode(InputTokens(count))
        extra.append(ESTIMATED)
    except VsrError as exc:
        status, out, limited = refused_count(adapter, exc, extra)
    await send_count(state, send, status, out, extra, limited)


def _checked(raw: bytes) -> responses.InputTokensRequest:
    """The body by OpenAI's input_tokens parameters, or a 400 naming the bad one."""
    try:
        return decode_body(responses.INPUT_TOKENS_DECODER, raw)
    except BodyProblem as exc:
        raise openai_request_error(exc.problem) from None


def _as_request(adapter, raw: bytes, headers) -> Inbound:
    """The body as the Responses request whose input is counted: the parameters only input_tokens has left
    out, and a null the create request would refuse (``model: null``, which OpenAI takes as no model)."""
    top = {k: v for k, v in chat.TOP_LEVEL_DECODER.decode(raw).items()
           if k not in _CHECKED_ONLY and bytes(v) != b"null"}
    return adapter.decode(responses.ENCODER.encode(top), headers)


__all__ = ["PATH", "handle_input_tokens"]
