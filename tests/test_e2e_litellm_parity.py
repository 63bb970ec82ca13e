"""End to end: what a team moving from LiteLLM found missing or different (outside trial, LiteLLM user).

1. per-key limits without a shared key store are each worker's own: said at start, naming the keys;
2. legacy Chat ``functions`` / ``function_call`` carried to an Anthropic or Responses backend as tools, and the
   answer's call returned as ``message.function_call`` (finish_reason ``function_call``), whole and streamed;
3. the client routes served with and without ``/v1`` (``/models``, ``/responses``, ``/messages``), admin routes not;
4. a Responses answer from a Chat backend echoes ``text``, ``service_tier``, ``top_logprobs``,
   ``safety_identifier``, ``prompt_cache_key`` and ``truncation``, and a backend's error names Responses fields;
5. ``parallel_tool_calls`` (and a tool_choice) without tools is not sent to an OpenAI Chat backend;
6. a bad value under a dict names its key in ``param`` (``metadata.tags``);
7. ``GET /v1/models/{id}`` of an id the list does not show is a 404 ``model_not_found``.

The router and the bench mock upstream run as real processes; the official SDKs are the clients; what a provider
got is read back from the mock's ``last_request`` and held to the provider rules of ``provider_rules``.
"""
from __future__ import annotations

import json

import httpx
import openai
import pytest

from .procs import config, model, redis_prefix, router, wait_until, write_config
from .test_e2e_auth import REDIS_URL, sha
from .test_e2e_protocols import warnings_of
from .test_e2e_translate_fidelity import chat
from .test_e2e_translate_params import last

BACKENDS = ("openai", "anthropic", "responses")
WEATHER_FN = {"name": "weather", "description": "the weather in a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
USE = [{"role": "user", "content": "Please use the tool for Paris"}]


@pytest.fixture(scope="module")
def gw(mock, tmp_path_factory):
    models = [{**model(f"m-{fmt}", f"{mock.url}/v1"), "api_format": fmt} for fmt in BACKENDS]
    doc = config(models, [{"name": "general", "modelRefs": [{"model": "m-openai"}]}])
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg")))) as proc:
        yield proc


# --- 1: per-key limits and --workers --------------------------------------------------------------------------


def _limited_doc(mock_url: str, store: dict | None = None) -> dict:
    doc = config([model("m", f"{mock_url}/v1")], [{"name": "all", "modelRefs": [{"model": "m"}]}])
    auth: dict = {"enabled": True, "keys": [
        {"id": "capped", "sha256": sha("vsk-capped-" + "c" * 32), "limits": {"rpm": 3}},
        {"id": "free", "sha256": sha("vsk-free-" + "f" * 32)}]}
    if store is not None:
        auth["store"] = store
    doc["global"] = {"router": {"auth": auth, "rate_limits": {"teams": {"blue": {"concurrent": 2}}}}}
    return doc


def _limits_warnings(proc) -> list[str]:
    return [line for line in proc.lines if line.startswith("warning:") and "workers" in line]


def test_key_limits_without_a_store_are_said_to_be_each_workers_own(mock, tmp_path):
    with router(write_config(_limited_doc(mock.url), str(tmp_path)), "--workers", "2") as proc:
        wait_until(lambda: sum("serving on" in line for line in proc.lines) == 2, "both workers serving")
        [line] = _limits_warnings(proc)
    assert "keys[capped]" in line and "keys[free]" not in line and "teams[blue]" in line
    assert "each of the 2 workers" in line and "up to 2x" in line and "auth.store" in line


def test_key_limits_with_a_shared_store_say_nothing_of_workers(mock, tmp_path):
    with redis_prefix("workers") as prefix:
        doc = _limited_doc(mock.url, {"backend": "redis", "url": REDIS_URL, "prefix": prefix})
        with router(write_config(doc, str(tmp_path)), "--workers", "2") as proc:
            wait_until(lambda: sum("serving on" in line for line in proc.lines) == 2, "both workers serving")
            assert _limits_warnings(proc) == []


# --- 2: legacy functions ------------------------------------------------------------------------------------------


def _legacy(client, stream: bool, **kw) -> tuple[str, dict | None, str, bool]:
    """(content, function_call as {name, arguments}, finish_reason, whether any tool_calls came)."""
    if not stream:
        choice = client.chat.completions.create(**kw).choices[0]
        fc = choice.message.function_call
        return (choice.message.content or "", fc and {"name": fc.name, "arguments": fc.arguments},
                choice.finish_reason, bool(choice.message.tool_calls))
    content, fc, finish, tools = "", None, None, False
    for chunk in client.chat.completions.create(stream=True, **kw):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            tools |= bool(choice.delta.tool_calls)
            if choice.delta.function_call is not None:
                fc = fc or {"name": "", "arguments": ""}
                fc["name"] += choice.delta.function_call.name or ""
                fc["arguments"] += choice.delta.function_call.arguments or ""
            finish = choice.finish_reason or finish
    return content, fc, finish, tools


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("backend", ["anthropic", "responses"])
def test_legacy_functions_reach_the_backend_as_tools_and_come_back_as_function_call(gw, mock, backend, stream):
    client, tap = chat(gw)
    content, fc, finish, tools = _legacy(client, stream, model=f"m-{backend}", max_tokens=64, messages=USE,
                                         functions=[WEATHER_FN], function_call="auto")
    body = last(mock, backend)
    [tool] = body["tools"]
    if backend == "anthropic":
        assert tool == {"name": "weather", "description": WEATHER_FN["description"],
                        "input_schema": WEATHER_FN["parameters"]}
        # A legacy client reads one call: the backend is asked for one.
        assert body["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    else:
        assert (tool["type"], tool["name"], tool["parameters"]) == ("function", "weather", WEATHER_FN["parameters"])
        assert body["tool_choice"] == "auto" and body["parallel_tool_calls"] is False
    assert fc is not None and fc["name"] == "weather" and json.loads(fc["arguments"]) == {"city": "Paris"}
    assert (content, finish, tools) == ("", "function_call", False)
    assert warnings_of(tap.headers) == set()


@pytest.mark.parametrize("choice,anthropic_choice,responses_choice", [
    ("none", {"type": "none"}, "none"),
    ({"name": "weather"}, {"type": "tool", "name": "weather", "disable_parallel_tool_use": True},
     {"type": "function", "name": "weather"}),
])
def test_legacy_function_call_is_the_tool_choice(gw, mock, choice, anthropic_choice, responses_choice):
    client, tap = chat(gw)
    for backend, expected in (("anthropic", anthropic_choice), ("responses", responses_choice)):
        client.chat.completions.create(model=f"m-{backend}", max_tokens=64, messages=USE, functions=[WEATHER_FN],
                                       function_call=choice)
        assert last(mock, backend)["tool_choice"] == expected
        assert warnings_of(tap.headers) == set()


@pytest.mark.parametrize("backend", ["anthropic", "responses"])
def test_a_legacy_function_result_goes_back_as_the_calls_result(gw, mock, backend):
    client, tap = chat(gw)
    history = [*USE, {"role": "assistant", "content": None,
                      "function_call": {"name": "weather", "arguments": '{"city": "Paris"}'}},
               {"role": "function", "name": "weather", "content": "sunny, 21C"}]
    answer = client.chat.completions.create(model=f"m-{backend}", max_tokens=64, messages=history,
                                            functions=[WEATHER_FN])
    assert answer.choices[0].message.content == "The tool said: sunny, 21C"
    assert answer.choices[0].finish_reason == "stop"
    body = last(mock, backend)
    if backend == "anthropic":
        call = body["messages"][1]["content"][-1]
        result = body["messages"][2]["content"][0]
        assert (call["type"], call["name"], call["input"]) == ("tool_use", "weather", {"city": "Paris"})
        assert (result["type"], result["tool_use_id"]) == ("tool_result", call["id"])
    else:
        call = next(i for i in body["input"] if i.get("type") == "function_call")
        result = next(i for i in body["input"] if i.get("type") == "function_call_output")
        assert (call["name"], result["call_id"], result["output"]) == ("weather", call["call_id"], "sunny, 21C")
    assert warnings_of(tap.headers) == set()


# --- 3: the routes without /v1 -------------------------------------------------------------------------------


def test_the_client_routes_are_served_without_v1_too(gw):
    oa = openai.OpenAI(base_url=gw.url, api_key="x", max_retries=0, timeout=20)
    listed = [m.id for m in oa.models.list()]
    assert listed == [m.id for m in openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x").models.list()]
    assert oa.models.retrieve("vsr/auto").id == "vsr/auto"        # /models/vsr%2Fauto
    stored = oa.responses.create(model="m-openai", input="hi", max_output_tokens=32)
    assert stored.output_text
    assert oa.responses.retrieve(stored.id).id == stored.id      # /responses/{id}
    assert [i.type for i in oa.responses.input_items.list(stored.id)] == ["message"]
    with oa.responses.stream(model="m-anthropic", input="hi", max_output_tokens=32) as s:
        assert s.get_final_response().output_text
    r = httpx.post(f"{gw.url}/messages", json={"model": "m-anthropic", "max_tokens": 16,
                                                "messages": [{"role": "user", "content": "hi"}]}, timeout=20)
    assert r.status_code == 200 and r.json()["type"] == "message", r.text
    # The operator's routes keep their one spelling.
    assert httpx.get(f"{gw.url}/metrics", timeout=10).status_code == 200
    assert httpx.get(f"{gw.url}/v1/metrics", timeout=10).status_code == 404


# --- 4: the Response object's echoed fields through a Chat backend ------------------------------------------------


ECHOED = {"service_tier": "flex", "top_logprobs": 2, "safety_identifier": "user-7", "prompt_cache_key": "pk-1",
          "truncation": "auto"}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_response_from_a_chat_backend_echoes_the_requests_settings(gw, mock, stream):
    client, _ = chat(gw)
    text = {"format": {"type": "text"}, "verbosity": "low"}
    kw = {"model": "m-openai", "input": "hi", "max_output_tokens": 32, "text": text, **ECHOED}
    if stream:
        with client.responses.stream(**kw) as s:
            got = s.get_final_response()
    else:
        got = client.responses.create(**kw)
    doc = got.model_dump(exclude_unset=True)     # what the router's JSON held, not the SDK's defaults
    assert doc["text"] == text
    assert {k: doc[k] for k in ECHOED} == ECHOED
    plain = client.responses.create(model="m-openai", input="hi", max_output_tokens=32).model_dump(exclude_unset=True)
    assert plain["text"] == {"format": {"type": "text"}}
    assert (plain["truncation"], plain["top_logprobs"], plain["safety_identifier"]) == ("disabled", 0, None)


OVERFLOW = {"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages "
                                 "resulted in 200000 tokens.", "type": "invalid_request_error", "param": "messages",
                      "code": "context_length_exceeded"}}


def test_a_chat_backends_error_names_the_responses_field(gw, mock):
    client, _ = chat(gw)
    httpx.post(f"{mock.url}/_mock/config", json={"fail_first": 1, "fail_status": 400,
                                                 "fail_body": json.dumps(OVERFLOW)}).raise_for_status()
    try:
        with pytest.raises(openai.BadRequestError) as info:
            client.responses.create(model="m-openai", input="hi", max_output_tokens=32)
    finally:
        httpx.post(f"{mock.url}/_mock/config", json={"fail_first": 0, "fail_status": 500,
                                                     "fail_body": None}).raise_for_status()
    err = info.value.body
    assert (err["code"], err["param"]) == ("context_length_exceeded", "input")


# --- 5: parallel_tool_calls without tools ---------------------------------------------------------------------


@pytest.mark.parametrize("choice", [None, "auto"])
def test_parallel_tool_calls_without_tools_is_not_sent_to_a_chat_backend(gw, mock, choice):
    client, tap = chat(gw)
    extra = {} if choice is None else {"tool_choice": choice}
    got = client.responses.create(model="m-openai", input="hi", max_output_tokens=32, parallel_tool_calls=True,
                                  **extra)
    assert got.output_text
    body = last(mock, "openai")
    assert "parallel_tool_calls" not in body and "tool_choice" not in body
    assert warnings_of(tap.headers) == set()


# --- 6: the key under a dict in param ------------------------------------------------------------------------


@pytest.mark.parametrize("metadata,param", [
    ({"tags": ["x"]}, "metadata.tags"),
    ({"ok": "fine", "a.b c": 3}, 'metadata."a.b c"'),
    ({"k" * 300: 3}, 'metadata."' + "k" * 64 + '..."'),
])
def test_a_bad_value_under_a_dict_names_its_key(gw, metadata, param):
    client, _ = chat(gw)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="m-openai", messages=USE, metadata=metadata)
    err = info.value.body
    assert err["param"] == param and err["code"] == "invalid_type"
    assert f"at `{param}`" in err["message"]


# --- 7: one model by id, by the list's rule --------------------------------------------------------------------


def test_a_model_the_list_does_not_show_is_not_found(gw):
    oa = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0)
    assert "gpt-nothing" not in [m.id for m in oa.models.list()]
    with pytest.raises(openai.NotFoundError) as info:
        oa.models.retrieve("gpt-nothing")
    assert info.value.body == {"message": "The model 'gpt-nothing' does not exist", "type": "invalid_request_error",
                               "param": "model", "code": "model_not_found"}
    assert oa.models.retrieve("m-anthropic").id == "m-anthropic"
