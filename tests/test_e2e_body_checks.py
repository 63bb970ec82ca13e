"""End to end, trial 27 (an outside SRE on the request body checks), against a real router process:

- a key named twice in one JSON object is a 400 in each client API's own shape (Chat, Responses, Messages,
  System One) naming the key's path, never routed by its last value while the backend reads its first: a keyword
  rule sending ``launchcodes`` to ``blocked`` is not bypassed; ``"a"`` and ``"\\u0061"`` are one key;
- a value under a mapping names its key in the path (``logit_bias.50256``), also when the value is a number past
  a float's range, where the body's second read failed on the same number; an integer past 64 bits is called an
  integer;
- nesting past 256 levels names the top-level field it is in, and invalid UTF-8 the field its first bad byte is in.
"""
from __future__ import annotations

import json

import anthropic
import httpx
import httpx2
import openai
import pytest

from .procs import router, write_config

JSON = {"content-type": "application/json"}
BLOCKED_TEXT = "tell me the launchcodes"


@pytest.fixture(scope="module")
def gw(mock, tmp_path_factory):
    """A keyword rule sends ``launchcodes`` to ``blocked`` (its own model), anything else to ``general``; the
    three client APIs' backends on the mock, and a System One entrypoint on a scripted deployment."""
    doc = {
        "version": "v0.5",
        "providers": {"models": [
            {"name": "m-blocked", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]},
            {"name": "m-general", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]},
            {"name": "m-anthropic", "api_format": "anthropic", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]},
            {"name": "m-responses", "api_format": "responses", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]},
            {"name": "local-scripted", "api_format": "systemone", "deployment": "local", "description": "Scripted"},
        ]},
        "global": {"model_catalog": {"deployments": {
            "local": {"provider": "model_runtime", "artifact": "tests.scripted_model:make"}}}},
        "recipes": [
            {"name": "chat", "signals": {"keywords": [{"name": "codes", "operator": "OR", "keywords": ["launchcodes"]}]},
             "decisions": [
                 {"name": "blocked", "priority": 10, "modelRefs": [{"model": "m-blocked"}],
                  "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "codes"}]}},
                 {"name": "general", "modelRefs": [{"model": "m-general"}]}]},
            {"name": "native", "decisions": [{"name": "to_local", "modelRefs": [{"model": "local-scripted"}]}]},
        ],
        "entrypoints": [{"api": "chat", "model_names": ["vsr/auto"], "recipe": "chat", "default": True},
                        {"api": "systemone", "model_names": ["router-s1"], "recipe": "native"}],
    }
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg-body-checks")))) as proc:
        yield proc


def post(gw, path: str, body: bytes) -> httpx.Response:
    return httpx.post(f"{gw.url}{path}", content=body, headers=JSON, timeout=30)


def mock_requests(mock) -> int:
    return httpx.get(f"{mock.url}/_mock/stats").json()["requests"]


# --- 1. a key named twice ---------------------------------------------------------------------------------------

TWICE = b'{"role": "user", "content": "tell me the launchcodes", "content": "hello"}'


def test_the_rule_routes_each_text_alone(gw):
    # The two texts, each sent once: the keyword rule tells them apart (what a repeated key would bypass).
    for text, decision in ((BLOCKED_TEXT, "blocked"), ("hello", "general")):
        r = httpx.post(f"{gw.url}/v1/chat/completions", timeout=30,
                       json={"model": "vsr/auto", "messages": [{"role": "user", "content": text}]})
        assert r.status_code == 200 and r.headers["x-vsr-selected-decision"] == decision, r.text


OPENAI_TWICE = [
    # path, body, param
    ("/v1/chat/completions", b'{"model": "vsr/auto", "messages": [%s]}' % TWICE, "messages[0].content"),
    ("/v1/chat/completions", b'{"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}], '
                             b'"model": "m-blocked"}', "model"),
    ("/v1/chat/completions", b'{"model": "vsr/auto", "messages": [{"role": "user", "content": "hi"}, '
                             b'{"role": "user", "content": "a", "\\u0063ontent": "b"}]}', "messages[1].content"),
    ("/v1/responses", b'{"model": "m-responses", "input": [%s]}' % TWICE, "input[0].content"),
    ("/v1/responses", b'{"model": "m-responses", "input": "x", "instructions": "a", "instructions": "b"}',
     "instructions"),
    ("/v1/responses/input_tokens", b'{"model": "m-responses", "input": [%s]}' % TWICE, "input[0].content"),
]


def refused(gw, mock, path: str, body: bytes) -> dict:
    """The 400 answering ``body``; nothing reached a backend."""
    before = mock_requests(mock)
    r = post(gw, path, body)
    assert r.status_code == 400, r.text
    assert mock_requests(mock) == before
    return r.json()


@pytest.mark.parametrize(("path", "body", "param"), OPENAI_TWICE)
def test_a_key_named_twice_is_openais_400_naming_its_path(gw, mock, path, body, param):
    err = refused(gw, mock, path, body)["error"]
    assert (err["type"], err["code"], err["param"]) == ("invalid_request_error", "invalid_json", param), err
    assert f"`{param}`" in err["message"] and "twice" in err["message"], err


ANTHROPIC_TWICE = [
    ("/v1/messages", b'{"model": "m-anthropic", "max_tokens": 8, "messages": [%s]}' % TWICE, "messages.0.content"),
    ("/v1/messages", b'{"model": "m-anthropic", "max_tokens": 8, "max_tokens": 9, "messages": '
                     b'[{"role": "user", "content": "hi"}]}', "max_tokens"),
    ("/v1/messages/count_tokens", b'{"model": "m-anthropic", "messages": [%s]}' % TWICE, "messages.0.content"),
]


@pytest.mark.parametrize(("path", "body", "where"), ANTHROPIC_TWICE)
def test_a_key_named_twice_is_anthropics_400_naming_its_path(gw, mock, path, body, where):
    doc = refused(gw, mock, path, body)
    assert doc["type"] == "error" and doc["error"]["type"] == "invalid_request_error", doc
    assert doc["error"]["message"].startswith(f"{where}: "), doc


@pytest.mark.parametrize(("body", "where"), [
    (b'{"model": "router-s1", "state": {"request": "launchcodes", "request": "hello"}, '
     b'"questions": {"ok": {"type": "noul"}}}', "$.state.request"),
    (b'{"model": "router-s1", "state": {"request": "x"}, "questions": {"ok": {"type": "noul"}, '
     b'"ok": {"type": "noul"}}}', "$.questions.ok"),
    (b'{"model": "router-s1", "model": "other", "state": {"request": "x"}, "questions": {"ok": {"type": "noul"}}}',
     "$.model"),
])
def test_a_key_named_twice_is_system_ones_400_naming_its_path(gw, body, where):
    r = post(gw, "/v1/systemone", body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "systemone_error" and err["code"] == "invalid_request", err
    assert err["message"].endswith(f" - at `{where}`") and "twice" in err["message"], err


def _twice(http, request):
    """What an SDK sends, its first turn given ``content`` twice (the blocked text first): the bytes a client with
    a first-wins JSON writer, or a hand-built body, puts on the wire. ``http``: httpx, or the Anthropic SDK's
    httpx2."""
    body = request.read().replace(b'{"role"', b'{"content": "%s", "role"' % BLOCKED_TEXT.encode(), 1)
    return http.Request(request.method, request.url, content=body,
                        headers={k: v for k, v in request.headers.items() if k.lower() != "content-length"})


class _Twice(httpx.HTTPTransport):
    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return super().handle_request(_twice(httpx, request))


class _Twice2(httpx2.HTTPTransport):
    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        return super().handle_request(_twice(httpx2, request))


def test_the_sdks_read_the_refusal_as_their_bad_request_error(gw):
    oa = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0,
                       http_client=httpx.Client(transport=_Twice(), timeout=10))
    with pytest.raises(openai.BadRequestError) as chat:
        oa.chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": "hello"}])
    assert (chat.value.code, chat.value.param, chat.value.type) == \
        ("invalid_json", "messages[0].content", "invalid_request_error")
    with pytest.raises(openai.BadRequestError) as resp:
        oa.responses.create(model="m-responses", input=[{"role": "user", "content": "hello"}])
    assert (resp.value.code, resp.value.param) == ("invalid_json", "input[0].content")
    client = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0,
                                 http_client=httpx2.Client(transport=_Twice2(), timeout=10))
    with pytest.raises(anthropic.BadRequestError) as msg:
        client.messages.create(model="m-anthropic", max_tokens=8, messages=[{"role": "user", "content": "hello"}])
    assert msg.value.body["error"]["type"] == "invalid_request_error"
    assert msg.value.body["error"]["message"].startswith("messages.0.content: "), msg.value.body


# --- 2. the key under a mapping, a number past a float's range ---------------------------------------------------

HI = b'"messages": [{"role": "user", "content": "hi"}]'


@pytest.mark.parametrize(("body", "code", "param", "words"), [
    (b'{"model": "m-general", %s, "logit_bias": {"50256": 1e400}}' % HI, "invalid_value", "logit_bias.50256",
     "Number out of range"),
    (b'{"model": "m-general", %s, "logit_bias": {"1": 5, "50256": -1e400}}' % HI, "invalid_value",
     "logit_bias.50256", "Number out of range"),
    (b'{"model": "m-general", %s, "response_format": {"type": "json_schema", "json_schema": {"name": "n", '
     b'"schema": {"type": "number", "maximum": 1e400}}}}' % HI, "invalid_value",
     "response_format.json_schema.schema.maximum", "Number out of range"),
    (b'{"model": "m-general", %s, "metadata": {"a": 123456789012345678901234567890}}' % HI, "invalid_type",
     "metadata.a", "got `int`"),
    (b'{"model": "m-general", %s, "metadata": {"a": 1.5}}' % HI, "invalid_type", "metadata.a", "got `float`"),
])
def test_a_value_under_a_mapping_names_its_key(gw, body, code, param, words):
    r = post(gw, "/v1/chat/completions", body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert (err["code"], err["param"]) == (code, param) and words in err["message"], err


# --- 3. the field of a depth or encoding refusal -----------------------------------------------------------------

DEEP_METADATA = b'{"a": ' * 300 + b"1" + b"}" * 300


@pytest.mark.parametrize(("path", "body", "named"), [
    # path, body, the param (OpenAI's shape) or the message's start (Anthropic's)
    ("/v1/chat/completions", b'{"model": "m-general", %s, "metadata": %s}' % (HI, DEEP_METADATA), "metadata"),
    ("/v1/responses", b'{"model": "m-responses", "input": "x", "metadata": %s}' % DEEP_METADATA, "metadata"),
    ("/v1/chat/completions", b'{"model": "m-general", "messages": [{"role": "user", "content": "caf\xe9"}]}',
     "messages[0].content"),
    ("/v1/responses", b'{"model": "m-responses", "input": [{"role": "user", "content": "\xff"}]}',
     "input[0].content"),
    ("/v1/messages", b'{"model": "m-anthropic", "max_tokens": 8, %s, "metadata": %s}' % (HI, DEEP_METADATA),
     "metadata: The request body is not accepted: JSON nested deeper than 256 levels"),
    ("/v1/messages", b'{"model": "m-anthropic", "max_tokens": 8, "messages": [{"role": "user", "content": "\xff"}]}',
     "messages.0.content: The request body is not valid UTF-8"),
])
def test_depth_and_encoding_refusals_name_the_field(gw, mock, path, body, named):
    err = refused(gw, mock, path, body)["error"]
    if path == "/v1/messages":
        assert err["message"].startswith(named), err
        return
    assert err["param"] == named and err["code"] in ("invalid_json", "invalid_utf8"), err
    assert named in err["message"], err


@pytest.mark.parametrize(("body", "where"), [
    (b'{"model": "router-s1", "state": {"request": "x", "extra": %s}, "questions": {"ok": {"type": "noul"}}}'
     % DEEP_METADATA, "$.state"),
    (b'{"model": "router-s1", "state": {"request": "\xff"}, "questions": {"ok": {"type": "noul"}}}',
     "$.state.request"),
])
def test_depth_and_encoding_refusals_name_the_field_in_system_ones_words(gw, body, where):
    r = post(gw, "/v1/systemone", body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["message"].endswith(f" - at `{where}`"), r.json()


def test_the_router_still_routes_after_the_refusals(gw):
    body = {"model": "vsr/auto", "messages": [{"role": "user", "content": json.dumps({"a": 1})}]}
    r = httpx.post(f"{gw.url}/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200 and r.headers["x-vsr-selected-decision"] == "general", r.text
