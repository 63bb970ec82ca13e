"""How a Chat backend's answer that did not end well reaches Messages and Responses clients, over real sockets: a
scripted Chat backend started here, a real router subprocess, the official SDKs.

- ``finish_reason: "length"`` in the middle of a tool call (arguments ``'{"command": "ec'``) is the model's own
  end, not a broken answer: whole or streamed, a Messages client reads ``stop_reason: max_tokens`` and a Responses
  client ``status: incomplete`` (``max_output_tokens``), and no other candidate is asked;
- a stream that ends with ``[DONE]`` and no ``finish_reason`` did not say how the answer ended: as one that ends
  with no terminator at all, each client gets its protocol's error ending, never ``end_turn`` or
  ``response.completed``.
"""
from __future__ import annotations

import json
import threading

import anthropic
import openai
import pytest

from . import hostile_upstream
from .procs import router, write_config

CUT = '{"command": "ec'
BASH = {"name": "Bash", "description": "Run a shell command.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}
FUNCTION = {"type": "function", "name": "Bash", "description": "Run a shell command.",
            "parameters": BASH["input_schema"]}
ASKED: dict[str, int] = {}
_LOCK = threading.Lock()


def chunk(delta: dict, finish: str | None = None) -> bytes:
    doc = {"id": "chatcmpl-cut", "object": "chat.completion.chunk", "created": 1, "model": "scripted",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(doc).encode() + b"\n\n"


CALL = {"id": "call_cut", "type": "function", "function": {"name": "Bash", "arguments": CUT}}
STREAMS = {
    "cut": [chunk({"role": "assistant", "content": None, "tool_calls": [{"index": 0, **CALL, "function": {
                "name": "Bash", "arguments": ""}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": CUT}}]}),
            chunk({}, "length"), b"data: [DONE]\n\n"],
    "nofinish": [chunk({"role": "assistant", "content": ""}), chunk({"content": "Hello "}), chunk({"content": "the"}),
                 b"data: [DONE]\n\n"],
}
WHOLE = {"cut": {"id": "chatcmpl-cut", "object": "chat.completion", "created": 1, "model": "scripted",
                 "choices": [{"index": 0, "finish_reason": "length",
                              "message": {"role": "assistant", "content": None, "tool_calls": [CALL]}}],
                 "usage": {"prompt_tokens": 5, "completion_tokens": 8, "total_tokens": 13}}}


class Scripted(hostile_upstream.Handler):
    """``/<mode>/v1/chat/completions``: ``cut``, ``nofinish`` as above, ``ok`` a plain answer; each counted."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        mode = self.path.strip("/").split("/")[0]
        with _LOCK:
            ASKED[mode] = ASKED.get(mode, 0) + 1
        if mode == "ok" or (not body.get("stream") and mode not in WHOLE):
            self.whole(200, json.dumps(hostile_upstream.CHAT).encode())
        elif body.get("stream"):
            data = b"".join(STREAMS[mode])
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self.whole(200, json.dumps(WHOLE[mode]).encode())


@pytest.fixture(scope="module")
def routed(tmp_path_factory):
    """Entrypoint ``cut``: the cut model, then ``ok`` as its fallback; ``nofinish``: that model alone."""
    with hostile_upstream.serving(Scripted) as url:
        models = [{"name": f"m-{m}", "api_format": "openai", "backend_refs": [{"endpoint": f"{url}/{m}/v1"}]}
                  for m in ("cut", "nofinish", "ok")]
        recipes = {"cut": ["cut", "ok"], "nofinish": ["nofinish"]}
        doc = {"version": "v0.5", "providers": {"models": models},
               "recipes": [{"name": r, "decisions": [{"name": r, "modelRefs": [{"model": f"m-{m}"} for m in refs]}]}
                           for r, refs in recipes.items()],
               "entrypoints": [{"api": "chat", "model_names": [r], "recipe": r, "default": r == "cut"}
                               for r in recipes],
               "global": {"stores": {"event_stream": {"backend": "none"}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("cut")))) as proc:
            yield proc


def asked_ok() -> int:
    with _LOCK:
        return ASKED.get("ok", 0)


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_call_cut_by_length_is_max_tokens_to_a_messages_client_without_failover(routed, stream):
    client = anthropic.Anthropic(base_url=routed.url, api_key="k", max_retries=0, timeout=20)
    before = asked_ok()
    args = dict(model="cut", max_tokens=8, tools=[BASH], messages=[{"role": "user", "content": "Run echo hi."}])
    if stream:
        with client.messages.stream(**args) as s:
            message = s.get_final_message()
    else:
        message = client.messages.create(**args)
    assert message.stop_reason == "max_tokens"
    assert [b.name for b in message.content if b.type == "tool_use"] == ["Bash"]
    assert asked_ok() == before, "a cut answer is the model's own: no other candidate is asked"


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_call_cut_by_length_is_incomplete_to_a_responses_client(routed, stream):
    client = openai.OpenAI(base_url=f"{routed.url}/v1", api_key="k", max_retries=0, timeout=20)
    before = asked_ok()
    if stream:     # the SDK's stream helper wants response.completed: the events read one by one
        ends = [ev for ev in client.responses.create(model="cut", input="Run echo hi.", tools=[FUNCTION], stream=True)
                if ev.type.startswith("response.") and hasattr(ev, "response")]
        response = ends[-1].response
    else:
        response = client.responses.create(model="cut", input="Run echo hi.", tools=[FUNCTION])
    assert (response.status, response.incomplete_details.reason) == ("incomplete", "max_output_tokens")
    assert asked_ok() == before


def test_a_stream_ending_with_done_and_no_finish_is_an_error_to_a_messages_client(routed):
    client = anthropic.Anthropic(base_url=routed.url, api_key="k", max_retries=0, timeout=20)
    events = []
    with pytest.raises(anthropic.APIStatusError):
        with client.messages.create(model="nofinish", max_tokens=50, stream=True,
                                    messages=[{"role": "user", "content": "Say hello."}]) as s:
            for ev in s:
                events.append(ev.type)
    assert "message_stop" not in events and "message_delta" not in events, events


def test_a_stream_ending_with_done_and_no_finish_is_not_completed_to_a_responses_client(routed):
    client = openai.OpenAI(base_url=f"{routed.url}/v1", api_key="k", max_retries=0, timeout=20)
    kinds = []
    try:
        for ev in client.responses.create(model="nofinish", input="Say hello.", stream=True):
            kinds.append(ev.type)
    except openai.APIError:
        kinds.append("raised")
    assert "response.completed" not in kinds and ("response.failed" in kinds or "raised" in kinds), kinds
