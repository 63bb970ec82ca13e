"""Error events of the shapes real servers send, before any of the answer (outside trial, review of fix51's
failover): the status they stand for, whether they count against the backend's health, and the bound on how long
the router holds a stream's opening events before the client sees a status line.

- vLLM's and SGLang's ``{"error": {"type": "BadRequestError", "code": 400}}`` (a prompt past the context) is a 400:
  relayed, never retried, never held against the backend, however many clients send one;
- Ollama's and TGI's ``{"error": "..."}``, a plain string, keeps its message; an error event the router cannot
  read a status from fails over as a 502 that does not count against the backend's health;
- a Responses ``response.failed`` for the client's input (``invalid_image_url``) is a 400, Anthropic's
  ``billing_error`` a 402;
- a backend holding the stream in its opening events (``message_start`` and pings) past 1 MiB gets its events
  released to the client, and an error after that reaches the client in the stream: no failover.

A scripted backend started here answers by hand (the first path segment picks the shape); the bench mock upstream is
the healthy candidate; the router runs as a real process, the official SDKs are the clients.
"""
from __future__ import annotations

import json
import re

import anthropic
import httpx
import openai
import pytest

from . import hostile_upstream
from .procs import config, router, write_config
from .test_e2e_translate_fidelity import chat, messages

ASK = [{"role": "user", "content": "Where is the Louvre?"}]
VLLM_MESSAGE = "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens."
OLLAMA_MESSAGE = "llama runner process has terminated: signal: killed"
PING = b'event: ping\ndata: {"type": "ping"}\n\n'
MESSAGE_START = hostile_upstream.MESSAGES_EVENTS[0]
OVERLOADED = b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
RESPONSE = {"id": "resp_1", "object": "response", "created_at": 0, "model": "scripted", "status": "in_progress",
            "output": [], "error": None}


def sse(name: str, data: dict) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (name.encode(), json.dumps(data).encode())


# The events each scripted backend streams with its 200, by the first segment of its path.
EVENTS = {
    "vllm": [b"data: " + json.dumps({"error": {"object": "error", "message": VLLM_MESSAGE, "type": "BadRequestError",
                                               "param": None, "code": 400}}).encode() + b"\n\n"],
    "ollama": [b"data: " + json.dumps({"error": OLLAMA_MESSAGE}).encode() + b"\n\n"],
    "odd": [b'data: {"error": {"type": "something_new", "message": "who knows"}}\n\n'],
    "image": [sse("response.created", {"type": "response.created", "response": RESPONSE}),
              sse("response.in_progress", {"type": "response.in_progress", "response": RESPONSE}),
              sse("response.failed", {"type": "response.failed", "response": {**RESPONSE, "status": "failed", "error": {
                  "code": "invalid_image_url", "message": "Error while downloading https://x.invalid/a.png."}}})],
    "billing": [b'event: error\ndata: {"type":"error","error":{"type":"billing_error",'
                b'"message":"Your credit balance is too low"}}\n\n'],
    # More than the 1 MiB held of pings before the answer (past any one read of the router), then an overload.
    "pings": [MESSAGE_START, PING * (1200 * 1024 // len(PING)), OVERLOADED],
}
SEEN: list[str] = []     # the mode of each request the scripted backend got


class Backend(hostile_upstream.Handler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        mode = self.path.strip("/").split("/")[0]
        SEEN.append(mode)
        self.sse(EVENTS[mode])


FORMATS = {"vllm": "openai", "ollama": "openai", "odd": "openai", "image": "responses", "billing": "anthropic",
           "pings": "anthropic"}


@pytest.fixture(scope="module")
def gw(mock, tmp_path_factory):
    """Each scripted backend's model first, the healthy mock second; the default outlier threshold (5 failures)."""
    with hostile_upstream.serving(Backend) as url:
        models = [{"name": mode, "api_format": fmt, "backend_refs": [{"endpoint": f"{url}/{mode}/v1", "name": mode}]}
                  for mode, fmt in FORMATS.items()]
        models.append({"name": "good", "backend_refs": [{"endpoint": f"{mock.url}/v1", "name": "good"}]})
        doc = config(models, [{"name": "d", "modelRefs": [{"model": "good"}]}])
        doc["recipes"] += [{"name": mode, "decisions": [{"name": mode, "modelRefs": [{"model": mode},
                                                                                     {"model": "good"}]}]}
                           for mode in FORMATS]
        doc["recipes"].append({"name": "ollama-only", "decisions": [{"name": "o", "modelRefs": [{"model": "ollama"}]}]})
        doc["entrypoints"] += [{"model_names": [f"{name}-first" if name in FORMATS else name], "recipe": name}
                               for name in (*FORMATS, "ollama-only")]
        doc["global"] = {"router": {"upstream": {"retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("cfg")))) as proc:
            yield proc


def metric(gw, name: str, backend: str) -> float | None:
    text = httpx.get(f"{gw.url}/metrics").text
    found = re.search(rf'^{name}\{{model="{backend}",backend="{backend}"\}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else None


def mock_requests(mock) -> int:
    return httpx.get(f"{mock.url}/_mock/stats").json()["requests"]


def stream_chat(gw, model: str) -> str:
    stream = chat(gw)[0].chat.completions.create(model=model, max_tokens=64, messages=ASK, stream=True)
    return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


def test_a_vllm_error_event_with_an_integer_code_is_its_400_and_never_ejects_the_backend(gw, mock):
    answered = mock_requests(mock)
    for _ in range(6):      # past the outlier threshold
        with pytest.raises(openai.BadRequestError) as caught:
            stream_chat(gw, "vllm-first")
        assert VLLM_MESSAGE in caught.value.message
    assert mock_requests(mock) == answered, "the request's own fault is not retried on the next candidate"
    assert metric(gw, "vsr_backend_up", "vllm") == 1
    assert (metric(gw, "vsr_backend_ejections_total", "vllm") or 0) == 0


@pytest.mark.parametrize("mode", ["ollama", "odd"])
def test_an_error_event_with_no_status_fails_over_without_counting_against_the_backend(gw, mode):
    for _ in range(6):
        client, tap = chat(gw)
        text = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model=f"{mode}-first", max_tokens=64, messages=ASK, stream=True) if c.choices)
        assert text and tap.headers["x-vsr-selected-model"] == "good"
    assert metric(gw, "vsr_backend_up", mode) == 1
    assert (metric(gw, "vsr_backend_ejections_total", mode) or 0) == 0


def test_a_string_error_event_keeps_the_backends_message(gw):
    with pytest.raises(openai.APIStatusError) as caught:
        stream_chat(gw, "ollama-only")
    assert caught.value.status_code == 502
    assert OLLAMA_MESSAGE in caught.value.message


def test_a_responses_failure_of_the_clients_input_is_a_400(gw, mock):
    answered = mock_requests(mock)
    with pytest.raises(openai.BadRequestError) as caught:
        list(chat(gw)[0].responses.create(model="image-first", input="describe it", stream=True))
    assert caught.value.body["code"] == "invalid_image_url"
    assert mock_requests(mock) == answered


def test_anthropics_billing_error_is_a_402(gw):
    with pytest.raises(anthropic.APIStatusError) as caught:
        with messages(gw)[0].messages.stream(model="billing-first", max_tokens=64, messages=ASK) as s:
            list(s)
    assert caught.value.status_code == 402
    assert caught.value.body["error"]["type"] == "billing_error"


def test_opening_events_past_1_mib_are_released_and_a_later_error_stays_in_the_stream(gw, mock):
    answered = mock_requests(mock)
    with httpx.stream("POST", f"{gw.url}/v1/messages", headers={"x-api-key": "x", "anthropic-version": "2023-06-01"},
                      json={"model": "pings-first", "max_tokens": 64, "messages": ASK, "stream": True},
                      timeout=30) as r:
        body = r.read()
    assert r.status_code == 200
    assert body.count(b"event: ping") > 30_000 and b"overloaded_error" in body
    assert mock_requests(mock) == answered, "the client already had its status line: no failover"
