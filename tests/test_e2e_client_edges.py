"""End to end, issue 10: the edges real clients hit, against a real router process.

- Bad input on every client API (Chat, Messages, Responses, Images, count_tokens): each answer
  in the API's own error shape, with the bad field's path, never a 5xx; the router keeps serving.
- 413 for an over-limit body the client keeps sending: the client reads the 413 (lingering close).
- Claude Code's body, with its betas, reaches an Anthropic backend that refuses beta fields
  without their header (the scripted agent model, as Anthropic's API does); its system
  messages in ``messages`` reach every backend.
- Codex's freeform tool, through a Chat backend, comes back as a ``custom_tool_call``.
- ``POST /v1/messages/count_tokens``: counted by an Anthropic backend, estimated otherwise.
"""
from __future__ import annotations

import json
import socket
import threading

import anthropic
import httpx
import httpx2
import openai
import pytest

from .client_shapes import FIXTURES
from .procs import config, model, router, write_config

MIB = 1 << 20
HI = [{"role": "user", "content": "hi"}]
DEEP = b'{"model": "m-openai", "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
NESTED = b"[" * 300 + b"]" * 300
# Past MAX_JSON_ITEMS (200,000): 20,000 small tools of 12 items each, refused before msgspec decodes them.
_TOOL = (b'{"type":"function","function":{"name":"f","description":"d",'
         b'"parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}')
MANY_TOOLS = b'{"model": "m-openai", "messages": [{"role": "user", "content": "hi"}], "tools": [' + \
    b",".join([_TOOL] * 20_000) + b"]}"
MANY_ANTHROPIC_TOOLS = (b'{"model": "m-anthropic", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], '
                        b'"tools": [' + b",".join([b'{"name":"f","input_schema":{"type":"object","properties":'
                                                   b'{"a":{"type":"string"}}}}'] * 40_000) + b"]}")
MANY_INPUTS = b'{"model": "m-responses", "input": [' + b",".join([b'{"role":"user","content":"x"}'] * 110_000) + b"]}"


@pytest.fixture(scope="module")
def gw(mock, agent, tmp_path_factory):
    """One router: a model of each api_format on the mock, and two on the scripted agent model."""
    models = [{**model(f"m-{fmt}", f"{mock.url}/v1"), "api_format": fmt}
              for fmt in ("openai", "anthropic", "responses")]
    # Claude Code's body reaches Claude as it came, its thinking included: the Claude model reasons.
    models += [{**model(f"agent-{fmt}", f"{agent.url}/v1", upstream_name="agent-model"), "api_format": fmt,
                **({"capabilities": ["reasoning"]} if fmt == "anthropic" else {})} for fmt in ("openai", "anthropic")]
    doc = config(models, [{"name": "general", "modelRefs": [{"model": "m-openai"}]}])
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg-edges")))) as proc:
        yield proc


def agent_log(agent) -> list[dict]:
    return httpx.get(f"{agent.url}/_agent/log").json()


def still_serves(gw) -> None:
    """Every client API answers after a bad request."""
    for path, body in (("/v1/chat/completions", {"model": "m-openai", "messages": HI}),
                       ("/v1/messages", {"model": "m-anthropic", "max_tokens": 8, "messages": HI}),
                       ("/v1/responses", {"model": "m-responses", "input": "hi"}),
                       ("/v1/messages/count_tokens", {"model": "m-openai", "messages": HI})):
        r = httpx.post(f"{gw.url}{path}", json=body, timeout=10)
        assert r.status_code == 200, (path, r.text)


# --- bad input on every client API --------------------------------------------------------------------------

OPENAI_CASES = [
    # path, body, code, param
    ("/v1/chat/completions", b'{"model": "m-openai", "messages": [', "invalid_json", None),
    ("/v1/chat/completions", DEEP, "invalid_json", "x"),           # the top-level field the depth passed in
    ("/v1/chat/completions", b'{"model": "m-openai", "messages": ' + NESTED + b"}", "invalid_json", "messages"),
    ("/v1/chat/completions", b'{"model": "m-openai", "messages": []}', "empty_array", "messages"),
    ("/v1/chat/completions", b'{"model": "m-openai", "messages": [{"role": "robot", "content": "x"}]}',
     "invalid_value", "messages[0].role"),
    ("/v1/chat/completions", b'{"model": "m-openai", "messages": [{"role": "user", "content": "x"}], '
                             b'"tool_choice": "always"}', "invalid_value", "tool_choice"),
    ("/v1/chat/completions", b'{"model": "m-openai", "messages": [{"role": "user", "content": "\xff"}]}',
     "invalid_utf8", "messages[0].content"),
    ("/v1/responses", b'{"model": "m-responses", "input": ', "invalid_json", None),
    ("/v1/responses", DEEP, "invalid_json", "x"),
    ("/v1/responses", b'{"model": "m-responses", "messages": [{"role": "user", "content": "hi"}]}',
     "unknown_parameter", "messages"),
    ("/v1/responses", b'{"model": "m-responses", "input": [{"role": "robot", "content": "x"}]}',
     "invalid_value", "input[0].role"),
    ("/v1/responses", b'{"model": "m-responses", "input": "x", "tool_choice": "always"}', "invalid_value",
     "tool_choice"),
    ("/v1/responses", b'{"model": "m-responses", "input": "\xff\xfe"}', "invalid_utf8", "input"),
    ("/v1/images/generations", DEEP, "invalid_json", "x"),
    ("/v1/chat/completions", MANY_TOOLS, "invalid_value", "tools"),
    ("/v1/responses", MANY_INPUTS, "invalid_value", "input"),
    ("/v1/images/generations", b'{"prompt": "a cat", "n": "two"}', "invalid_type", "n"),
    # An integer past 4,300 digits: msgspec refuses it (in linear time), a 400 naming the field, not a 500.
    ("/v1/chat/completions", b'{"model": "m-openai", "messages": [{"role": "user", "content": "x"}], "seed": '
                             + b"9" * 5000 + b"}", "invalid_value", "seed"),
    ("/v1/responses", b'{"model": "m-responses", "input": "x", "max_output_tokens": ' + b"9" * 5000 + b"}",
     "invalid_value", "max_output_tokens"),
]


@pytest.mark.parametrize(("path", "body", "code", "param"), OPENAI_CASES)
def test_bad_input_gets_openais_shape_and_the_router_keeps_serving(gw, path, body, code, param):
    r = httpx.post(f"{gw.url}{path}", content=body, headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(r.json()) == {"error"} and err["type"] == "invalid_request_error"
    assert (err["code"], err["param"]) == (code, param) and err["message"]
    assert r.headers["x-vsr-response-path"] == "error"
    still_serves(gw)


ANTHROPIC_CASES = [
    # path, body, message (its start)
    ("/v1/messages", b'{"model": "m-anthropic", "max_tokens": 8, "messages": [', "There was an error parsing"),
    ("/v1/messages", DEEP, "x: The request body is not accepted: JSON nested deeper than 256 levels"),
    ("/v1/messages", MANY_ANTHROPIC_TOOLS, "tools: The request body is not accepted: JSON of more than 200000 items"),
    ("/v1/messages", b'{"model": "m-anthropic", "max_tokens": 8, "messages": []}',
     "messages: at least one message is required"),
    ("/v1/messages", b'{"model": "m-anthropic", "max_tokens": 8, "messages": [{"role": "robot", "content": "x"}]}',
     "messages.0.role: Input should be 'assistant', 'system' or 'user'"),
    ("/v1/messages", b'{"model": "m-anthropic", "messages": [{"role": "user", "content": "x"}]}',
     "max_tokens: Field required"),
    ("/v1/messages", b'{"model": "m-anthropic", "max_tokens": 8, "messages": [{"role": "user", "content": "\xff"}]}',
     "messages.0.content: The request body is not valid UTF-8"),
    ("/v1/messages/count_tokens", b'{"model": "m-anthropic", "messages": [', "There was an error parsing"),
    ("/v1/messages/count_tokens", DEEP, "x: The request body is not accepted"),
    ("/v1/messages/count_tokens", b'{"model": "m-anthropic", "messages": []}',
     "messages: at least one message is required"),
    ("/v1/messages/count_tokens", b'{"model": "m-anthropic", "messages": [{"role": "user", "content": 5}]}',
     "messages.0.content: Input should be a valid string or a valid list"),
    ("/v1/messages", b'{"model": "m-anthropic", "max_tokens": ' + b"9" * 5000 + b', "messages": []}',
     "max_tokens: Integer value out of range"),
]


@pytest.mark.parametrize(("path", "body", "message"), ANTHROPIC_CASES)
def test_bad_input_gets_anthropics_shape_and_words(gw, path, body, message):
    r = httpx.post(f"{gw.url}{path}", content=body, headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 400, r.text
    doc = r.json()
    assert doc.pop("request_id") == r.headers["request-id"] == r.headers["x-request-id"]
    assert doc == {"type": "error", "error": {"type": "invalid_request_error", "message": doc["error"]["message"]}}
    assert doc["error"]["message"].startswith(message), doc
    still_serves(gw)


LONE_HIGH = b"a\\ud800b"   # a high surrogate escape, then no escape: msgspec said "Input data was truncated"


@pytest.mark.parametrize(("path", "body", "prefix"), [
    ("/v1/chat/completions", b'{"model": "m-openai", "messages": [{"role": "user", "content": "%s"}]}',
     "Request body is not valid JSON: "),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "%s"}], "model": "m-openai"}',
     "Request body is not valid JSON: "),
    ("/v1/chat/completions", b'{"model": "m-openai", "x": "%s", "messages": [{"role": "user", "content": "x"}]}',
     "Request body is not valid JSON: "),
    ("/v1/responses", b'{"model": "m-responses", "input": "%s"}', "Request body is not valid JSON: "),
    ("/v1/messages", b'{"model": "m-anthropic", "max_tokens": 8, "messages": [{"role": "user", "content": "%s"}]}',
     "There was an error parsing the body of your request: "),
])
def test_a_lone_high_surrogate_is_named_with_its_position_not_called_truncated(gw, path, body, prefix):
    body = body % LONE_HIGH
    r = httpx.post(f"{gw.url}{path}", content=body, headers={"content-type": "application/json"}, timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    expected = f"{prefix}JSON is malformed: invalid utf-16 surrogate pair (byte {body.index(b'b', body.index(LONE_HIGH))})"
    assert err["message"] == expected
    # A lone low surrogate has always been named so: the two read alike.
    low = httpx.post(f"{gw.url}{path}", content=body.replace(b"ud800", b"udc00"),
                     headers={"content-type": "application/json"}, timeout=30)
    assert low.json()["error"]["message"] == expected
    still_serves(gw)


def test_the_sdks_raise_their_own_bad_request_errors(gw):
    client = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0,
                                 http_client=httpx2.Client(timeout=10))
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model="m-anthropic", max_tokens=8, messages=[])
    assert info.value.body["error"]["message"] == "messages: at least one message is required"
    with pytest.raises(anthropic.BadRequestError):
        client.messages.count_tokens(model="m-anthropic", messages=[{"role": "wizard", "content": "x"}])
    with pytest.raises(anthropic.BadRequestError) as info:     # a turn's extra field, as Anthropic refuses it
        client.messages.count_tokens(model="m-anthropic", messages=[{"role": "user", "content": "x", "extra": 1}])
    assert info.value.body["error"]["message"] == "messages.0.extra: Extra inputs are not permitted"
    oa = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0, timeout=10)
    with pytest.raises(openai.BadRequestError) as oinfo:
        oa.responses.create(model="m-responses", input="x", extra_body={"messages": []})
    assert (oinfo.value.code, oinfo.value.param) == ("unknown_parameter", "messages")
    with pytest.raises(openai.BadRequestError) as cinfo:
        oa.chat.completions.create(model="m-openai", messages=[])
    assert cinfo.value.code == "empty_array"
    still_serves(gw)


def mock_requests(mock) -> int:
    return httpx.get(f"{mock.url}/_mock/stats").json()["requests"]


# Values OpenAI refuses, each to a backend of another api_format too (where nothing would refuse them after).
OPENAI_RANGE_CASES = [
    ("chat", "m-anthropic", {"max_tokens": -1}, "max_tokens"),
    ("chat", "m-openai", {"max_completion_tokens": 0}, "max_completion_tokens"),
    ("chat", "m-responses", {"n": 0}, "n"),
    ("chat", "m-openai", {"n": 129}, "n"),
    ("chat", "m-anthropic", {"temperature": 5}, "temperature"),
    ("chat", "m-openai", {"top_p": 1.5}, "top_p"),
    ("chat", "m-openai", {"presence_penalty": 2.5}, "presence_penalty"),
    ("chat", "m-anthropic", {"frequency_penalty": -3}, "frequency_penalty"),
    ("responses", "m-anthropic", {"temperature": 2.5}, "temperature"),
    ("responses", "m-openai", {"top_p": -0.5}, "top_p"),
    # Integers past what any backend takes: a seed is an int64, a count at most int32's largest.
    ("chat", "m-openai", {"max_tokens": 10**42}, "max_tokens"),
    ("chat", "m-anthropic", {"max_completion_tokens": 2**31}, "max_completion_tokens"),
    ("chat", "m-openai", {"seed": -99999999999999999999999999999}, "seed"),
    ("chat", "m-openai", {"seed": 2**63}, "seed"),
    ("chat", "m-openai", {"top_logprobs": 21}, "top_logprobs"),
    ("responses", "m-openai", {"max_output_tokens": 10**42}, "max_output_tokens"),
    ("responses", "m-anthropic", {"max_tool_calls": 10**30}, "max_tool_calls"),
]


@pytest.mark.parametrize(("api", "model_name", "extra", "param"), OPENAI_RANGE_CASES)
def test_values_openai_refuses_are_refused_before_any_backend(gw, mock, api, model_name, extra, param):
    oa = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0, timeout=10)
    before = mock_requests(mock)
    with pytest.raises(openai.BadRequestError) as info:
        if api == "chat":
            oa.chat.completions.create(model=model_name, messages=HI, extra_body=extra)
        else:
            oa.responses.create(model=model_name, input="hi", extra_body=extra)
    assert (info.value.code, info.value.param) == ("invalid_value", param), info.value.body
    assert mock_requests(mock) == before
    still_serves(gw)


ANTHROPIC_RANGE_CASES = [
    ({"max_tokens": -1}, "max_tokens: Input should be greater than or equal to 1"),
    ({"temperature": 1.5}, "temperature: Input should be less than or equal to 1"),
    ({"top_p": 2}, "top_p: Input should be less than or equal to 1"),
    ({"top_k": -1}, "top_k: Input should be greater than or equal to 0"),
    ({"tool_choice": {"type": "tool"}}, "tool_choice.name: Field required"),
    ({"thinking": {"type": "bogus"}}, "thinking: Input tag 'bogus' found using 'type' does not match"),
    ({"thinking": {"type": "enabled"}}, "thinking.budget_tokens: Field required"),
    ({"max_tokens": 10**42}, "max_tokens: Input should be less than or equal to 2147483647"),
    ({"top_k": 2**31}, "top_k: Input should be less than or equal to 2147483647"),
    ({"thinking": {"type": "enabled", "budget_tokens": 10**30}},
     "thinking.budget_tokens: Input should be less than or equal to 2147483647"),
]


@pytest.mark.parametrize("model_name", ["m-anthropic", "m-openai"])
@pytest.mark.parametrize(("extra", "message"), ANTHROPIC_RANGE_CASES)
def test_values_anthropic_refuses_are_refused_before_any_backend(gw, mock, model_name, extra, message):
    client = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0, http_client=httpx2.Client(timeout=10))
    before = mock_requests(mock)
    body = {"max_tokens": 8, **extra}
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model=model_name, messages=HI, max_tokens=body.pop("max_tokens"), extra_body=body)
    assert info.value.body["error"]["message"].startswith(message), info.value.body
    assert mock_requests(mock) == before
    still_serves(gw)


def test_every_thinking_type_of_the_sdk_is_served(gw):
    client = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0, http_client=httpx2.Client(timeout=10))
    for thinking in ({"type": "enabled", "budget_tokens": 1024}, {"type": "disabled"},
                     {"type": "adaptive", "display": "omitted"}, {"type": "between_tools"}):
        answer = client.messages.create(model="m-anthropic", max_tokens=2048, messages=HI, thinking=thinking,
                                        tools=[{"name": "f", "input_schema": {"type": "object"}}],
                                        tool_choice={"type": "tool", "name": "f"})
        assert answer.content, thinking


# --- an empty conversation is refused before any backend, not sent as messages: [] -----------------------------


@pytest.fixture(scope="module")
def mixed(mock, tmp_path_factory):
    """A router whose one decision falls back from the Responses model to the Chat and Messages ones."""
    models = [{**model(f"m-{fmt}", f"{mock.url}/v1"), "api_format": fmt} for fmt in ("responses", "openai", "anthropic")]
    doc = config(models, [{"name": "general", "modelRefs": [{"model": m["name"]} for m in models]}])
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg-mixed")))) as proc:
        yield proc


REASONING_ONLY = [{"type": "reasoning", "id": "rs_1", "summary": []}]


@pytest.mark.parametrize("model_name", ["m-openai", "m-anthropic", "vsr/auto"])
@pytest.mark.parametrize(("items", "code"), [([], "empty_array"), (REASONING_ONLY, "invalid_value")],
                         ids=["empty", "reasoning-only"])
def test_an_empty_responses_input_is_refused_naming_input(mixed, mock, model_name, items, code):
    # vsr/auto: its first candidate is a Responses model, which would get the body as sent; the Chat and
    # Messages ones after it would not, so nothing is sent to any of them.
    oa = openai.OpenAI(base_url=f"{mixed.url}/v1", api_key="x", max_retries=0, timeout=10)
    before = mock_requests(mock)
    with pytest.raises(openai.BadRequestError) as info:
        oa.responses.create(model=model_name, input=items)
    assert (info.value.code, info.value.param) == (code, "input"), info.value.body
    assert mock_requests(mock) == before


@pytest.mark.parametrize("model_name", ["m-responses", "m-openai", "vsr/auto"])
def test_a_responses_request_without_input_is_refused_naming_input(mixed, mock, model_name):
    """Not sent as an invented empty user turn (and billed): OpenAI's API has nothing to answer either."""
    oa = openai.OpenAI(base_url=f"{mixed.url}/v1", api_key="x", max_retries=0, timeout=10)
    before = mock_requests(mock)
    with pytest.raises(openai.BadRequestError) as info:
        oa.responses.create(model=model_name)
    assert (info.value.code, info.value.param) == ("invalid_value", "input"), info.value.body
    assert "input" in info.value.body["message"] and info.value.body["type"] == "invalid_request_error"
    r = httpx.post(f"{mixed.url}/v1/responses", json={}, timeout=10)
    assert r.status_code == 400 and r.json()["error"]["param"] == "input", r.text
    assert mock_requests(mock) == before


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/chat/completions", {"model": "vsr/auto"}), ("/v1/chat/completions", {}),
    ("/v1/messages", {"model": "vsr/auto", "max_tokens": 8}), ("/v1/messages", {}),
])
def test_a_chat_or_messages_request_without_messages_is_refused_naming_messages(mixed, mock, path, body):
    before = mock_requests(mock)
    r = httpx.post(f"{mixed.url}{path}", json=body, timeout=10)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    if path == "/v1/messages":
        assert r.json()["type"] == "error" and error["message"].startswith("messages: Field required"), error
    else:
        assert (error["param"], error["type"]) == ("messages", "invalid_request_error"), error
    assert mock_requests(mock) == before


@pytest.mark.parametrize("model_name", ["m-openai", "m-responses", "vsr/auto"])
@pytest.mark.parametrize(("content", "message"), [
    ([], "messages.0.content: List should have at least 1 item"),
    ([{"type": "thinking", "thinking": "hm", "signature": "s"}], "messages.0.content: Expected a user or assistant"),
], ids=["empty", "thinking-only"])
def test_a_messages_turn_of_no_content_is_refused_naming_it(mixed, mock, model_name, content, message):
    client = anthropic.Anthropic(base_url=mixed.url, api_key="x", max_retries=0, http_client=httpx2.Client(timeout=10))
    before = mock_requests(mock)
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model=model_name, max_tokens=8, messages=[{"role": "user", "content": content}])
    assert info.value.body["error"]["message"].startswith(message), info.value.body
    assert mock_requests(mock) == before


def test_a_chat_of_system_messages_alone_is_refused_for_a_messages_backend_only(mixed, mock):
    oa = openai.OpenAI(base_url=f"{mixed.url}/v1", api_key="x", max_retries=0, timeout=10)
    system = [{"role": "system", "content": "Be brief."}]
    before = mock_requests(mock)
    with pytest.raises(openai.BadRequestError) as info:
        oa.chat.completions.create(model="m-anthropic", messages=system)
    assert (info.value.code, info.value.param) == ("invalid_value", "messages")
    assert mock_requests(mock) == before
    assert oa.chat.completions.create(model="m-openai", messages=system).choices   # its own API: sent as it is


def test_get_on_count_tokens_is_a_405_in_anthropics_shape(gw):
    r = httpx.get(f"{gw.url}/v1/messages/count_tokens")
    assert r.status_code == 405 and r.json()["type"] == "error" and r.headers["allow"] == "POST"


# --- the model lists, each SDK's own ---------------------------------------------------------------------------

LISTED = ["vsr/auto", "m-openai", "m-anthropic", "m-responses", "agent-openai", "agent-anthropic"]


def test_openais_sdk_lists_and_retrieves_each_model(gw):
    oa = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="k", max_retries=0, timeout=10)
    listed = list(oa.models.list())
    assert [m.id for m in listed] == LISTED
    for m in listed:
        assert oa.models.retrieve(m.id) == m          # vsr/auto too: the SDK sends vsr%2Fauto
    # An unlisted name is not found, though the default entrypoint's recipe (the catch-all) serves it: OpenAI's
    # and LiteLLM's rule, what the list does not show (Anthropic's SDK finds it: Claude Code's default model).
    with pytest.raises(openai.NotFoundError) as info:
        oa.models.retrieve("gpt-nothing")
    assert info.value.body["code"] == "model_not_found"


def test_anthropics_sdk_lists_and_retrieves_each_model(gw):
    an = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0, timeout=10)
    page = an.models.list()
    assert [m.id for m in page.data] == LISTED and page.has_more is False
    assert (page.first_id, page.last_id) == (LISTED[0], LISTED[-1])
    first = page.data[0]
    assert first.type == "model" and first.display_name == "vsr/auto" and first.created_at.year == 1970
    assert an.models.retrieve("m-anthropic").id == "m-anthropic"
    assert [m.id for m in an.models.list(limit=2)] == LISTED          # the SDK follows the pages
    second = an.models.list(limit=2, after_id="m-openai")
    assert [m.id for m in second.data] == LISTED[2:4] and second.has_more is True
    before = an.models.list(limit=3, before_id="m-responses")
    assert [m.id for m in before.data] == LISTED[0:3] and before.has_more is False
    # Claude Code's default model, unlisted, is one the default entrypoint's recipe serves: found, as it is served.
    assert an.models.retrieve("claude-opus-5-5").id == "claude-opus-5-5"
    assert an.messages.create(model="claude-opus-5-5", max_tokens=5, messages=HI).content
    with pytest.raises(anthropic.BadRequestError) as info:
        an.models.list(limit=0)
    assert info.value.body["error"]["type"] == "invalid_request_error"


def test_the_model_list_s_shape_follows_anthropic_version(gw):
    openai_shape = httpx.get(f"{gw.url}/v1/models", timeout=10).json()
    assert openai_shape["object"] == "list" and openai_shape["data"][0] == {
        "id": "vsr/auto", "object": "model", "created": 0, "owned_by": "vsr-fast"}
    one = httpx.get(f"{gw.url}/v1/models/vsr/auto", headers={"anthropic-version": "2023-06-01"}, timeout=10)
    assert one.json()["type"] == "model" and one.json()["created_at"] == "1970-01-01T00:00:00Z"


@pytest.mark.parametrize("path", ["/v1/messages/batches", "/v1/messages/batches/msgbatch_1/results"])
def test_a_missing_route_under_messages_is_a_404_in_anthropics_shape(gw, path):
    an = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0, timeout=10)
    r = httpx.get(f"{gw.url}{path}", timeout=10)
    assert r.status_code == 404 and r.json()["type"] == "error" and r.json()["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.NotFoundError):
        an.messages.batches.list()


# --- 413 with a lingering close ------------------------------------------------------------------------------


def send_whole_body_and_read(port: int, path: str, size: int) -> bytes:
    """Send a body of ``size`` bytes with its Content-Length in full (as clients do), reading meanwhile."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {size}\r\n\r\n").encode()
        failure: list[BaseException] = []

        def write() -> None:
            try:
                s.sendall(head + b"{" + b" " * (size - 1))
            except OSError as exc:   # what a client sees when the router closes too soon
                failure.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        answer = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
            if b"\r\n\r\n" in answer:
                head_end = answer.index(b"\r\n\r\n") + 4
                length = int(next(line.split(b":")[1] for line in answer[:head_end].split(b"\r\n")
                                  if line.lower().startswith(b"content-length")))
                if len(answer) >= head_end + length:
                    break
        writer.join(30)
        assert not failure, f"the client could not send its body: {failure[0]!r}"
        return answer


@pytest.mark.parametrize(("path", "shape"), [("/v1/chat/completions", b'"code":"request_too_large"'),
                                             ("/v1/messages", b'"type":"request_too_large"'),
                                             ("/v1/messages/count_tokens", b'"type":"request_too_large"'),
                                             ("/v1/responses", b'"code":"request_too_large"'),
                                             ("/v1/images/generations", b'"code":"request_too_large"')])
def test_an_over_limit_body_sent_whole_reads_the_413(gw, path, shape):
    answer = send_whole_body_and_read(gw.port, path, 65 * MIB)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert shape in answer
    still_serves(gw)


def test_an_over_limit_chunked_body_reads_the_413(gw):
    def chunks():
        block = b"x" * MIB
        for _ in range(66):
            yield block

    r = httpx.post(f"{gw.url}/v1/chat/completions", content=chunks(), timeout=60,
                   headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    still_serves(gw)


# --- Claude Code and Codex through the router ------------------------------------------------------------------


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_claude_codes_body_and_betas_reach_an_anthropic_backend(gw, agent, stream):
    doc = fixture("claude_code.tool_result")
    body = {**doc["body"], "model": "agent-anthropic", "stream": stream}
    httpx.post(f"{agent.url}/_agent/reset")
    r = httpx.post(f"{gw.url}/v1/messages", json=body, headers=doc["headers"], timeout=30)
    # The agent model refuses context_management unless anthropic-beta unlocks it, as Anthropic does.
    assert r.status_code == 200, r.text
    seen = agent_log(agent)[-1]
    assert seen["headers"]["anthropic-beta"] == doc["headers"]["anthropic-beta"]
    assert seen["headers"]["anthropic-version"] == doc["headers"]["anthropic-version"]
    assert seen["body"] == {**doc["body"], "model": "agent-model", "stream": stream}
    assert seen["answer"]["text"].startswith("AGENT_MODEL_DONE")
    assert ("event: message_stop" in r.text) if stream else r.json()["content"][0]["text"] == seen["answer"]["text"]


def test_claude_codes_system_messages_reach_a_chat_backend_in_place(gw, agent):
    doc = fixture("claude_code.tool_result")
    assert any(m["role"] == "system" for m in doc["body"]["messages"][1:])
    httpx.post(f"{agent.url}/_agent/reset")
    r = httpx.post(f"{gw.url}/v1/messages", json={**doc["body"], "model": "agent-openai", "stream": False},
                   headers=doc["headers"], timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["cache_read_input_tokens"] == 0   # integers, never null
    seen = agent_log(agent)[-1]
    assert "anthropic-beta" not in seen["headers"]   # a translated body carries no betas
    roles = [m["role"] for m in seen["body"]["messages"]]
    assert roles[0] == "system" and "system" in roles[1:]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_codexs_freeform_tool_comes_back_as_a_custom_tool_call(gw, agent, stream):
    doc = fixture("codex.first")
    httpx.post(f"{agent.url}/_agent/reset")
    oa = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0, timeout=30)
    kw = {k: v for k, v in doc["body"].items() if k not in ("model", "stream", "client_metadata")}
    kw["extra_body"] = {"client_metadata": doc["body"]["client_metadata"]}
    if stream:
        with oa.responses.stream(model="agent-openai", **kw) as s:
            final = s.get_final_response()
    else:
        final = oa.responses.create(model="agent-openai", **kw)
    seen = agent_log(agent)[-1]
    called = seen["answer"]["tool"]["name"]
    assert called == "functions__exec" and seen["api"] == "chat"
    call = next(o for o in final.output if o.type == "custom_tool_call")
    assert (call.name, call.namespace, call.input) == ("exec", "functions", "vsr-agent-model")


# --- count_tokens ---------------------------------------------------------------------------------------


def test_count_tokens_is_counted_by_an_anthropic_backend(gw, agent):
    httpx.post(f"{agent.url}/_agent/reset")
    client = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0, http_client=httpx2.Client(timeout=10))
    raw = client.messages.with_raw_response.count_tokens(
        model="agent-anthropic", messages=[{"role": "user", "content": "How many tokens is this?"}],
        extra_headers={"anthropic-beta": "context-management-2025-06-27"})
    counted = raw.parse()
    seen = agent_log(agent)[-1]
    assert seen["path"] == "/v1/messages/count_tokens" and seen["body"]["model"] == "agent-model"
    assert seen["headers"]["anthropic-beta"] == "context-management-2025-06-27"
    assert counted.input_tokens > 0
    assert "x-vsr-token-count" not in raw.headers
    assert raw.headers["x-vsr-selected-model"] == "agent-anthropic"


@pytest.mark.parametrize("model_name", ["m-openai", "m-responses", "m-anthropic", "vsr/auto"])
def test_count_tokens_is_an_estimate_elsewhere(gw, model_name):
    """A Chat or Responses backend has no count; the mock's Anthropic route has none either (404)."""
    client = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0, http_client=httpx2.Client(timeout=10))
    short = client.messages.with_raw_response.count_tokens(model=model_name, messages=HI)
    long = client.messages.with_raw_response.count_tokens(
        model=model_name, system="You are terse.", messages=[{"role": "user", "content": "hello " * 200}],
        tools=[{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}])
    assert short.headers["x-vsr-token-count"] == long.headers["x-vsr-token-count"] == "estimate"
    assert 0 < short.parse().input_tokens < long.parse().input_tokens
    assert long.parse().input_tokens >= 200


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages/count_tokens"])
def test_a_non_ascii_header_bound_for_the_provider_is_served(gw, agent, path):
    """User-Agent reaches providers; a client's non-ASCII one goes as the bytes it sent."""
    httpx.post(f"{agent.url}/_agent/reset")
    model_name = "agent-openai" if path == "/v1/chat/completions" else "agent-anthropic"
    body = {"model": model_name, "messages": HI}
    r = httpx.post(f"{gw.url}{path}", json=body, headers={"user-agent": "caf\u00e9-client/1".encode("latin-1")},
                   timeout=30)
    assert r.status_code == 200, r.text
    assert agent_log(agent)[-1]["headers"]["user-agent"] == "caf\u00e9-client/1"
