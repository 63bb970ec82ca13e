"""A client's bad value is not copied back whole, nor into the logs (real router and bench mock processes, the
openai and anthropic SDKs and raw HTTP as clients, the access log's file):

- a 400 names the path of the bad field and what was expected, and quotes the value at most 64 characters long,
  its control and bidi characters escaped (a refused ``reasoning_effort`` of 5,000 characters came back whole, a
  BEL or a bidi override in it raw, and so did a role, a tool_choice type, a request method, an Origin);
- the access log (and the event journal) keeps the message with the value withheld: a bad field may hold personal
  data, and the log's retention is not the request's;
- a private request (router_replay ``capture_personal_data: false``) hears no value back at all.
"""
from __future__ import annotations

import json
import re

import anthropic
import httpx
import openai
import pytest

from .procs import config, router, wait_until, write_config
from .test_e2e_fuzzed_edges import exchange

EMAIL = "alice.private@example.com"
LONG = f"{EMAIL} \x07\u202e" + "z" * 5000           # personal data, a BEL, a bidi override, then length
HI = [{"role": "user", "content": "hi"}]


def make_gw(mock, directory, *, private: bool):
    """A router with its access log in ``directory`` (``proc.log``); ``private``: capture_personal_data: false."""
    log = directory / "access.log"
    doc = config([{"name": "m", "backend_refs": [{"endpoint": f"{mock.url}/v1"}]}],
                 [{"name": "d", "modelRefs": [{"model": "m"}]}])
    doc["global"] = {"router": {"access_log": {"enabled": True, "path": str(log)},
                                "cors": {"allow_origins": ["https://ok.example"]}}}
    if private:
        doc["global"]["plugins"] = [{"type": "router_replay", "configuration": {"capture_personal_data": False}}]
    with router(write_config(doc, str(directory))) as proc:
        proc.log = log
        yield proc


@pytest.fixture(scope="module", params=[False], ids=["open"])
def gw(mock, tmp_path_factory, request):
    yield from make_gw(mock, tmp_path_factory.mktemp("echo"), private=request.param)


@pytest.fixture(scope="module", params=[True], ids=["private"])
def private_gw(mock, tmp_path_factory, request):
    yield from make_gw(mock, tmp_path_factory.mktemp("echo"), private=request.param)


def logged(proc, rid: str) -> dict:
    """The access log's line of request ``rid`` (the file is written off the loop: waited for)."""
    def line():
        for text in proc.log.read_text().splitlines() if proc.log.exists() else ():
            doc = json.loads(text)
            if doc.get("request_id") == rid:
                return doc
        return None
    wait_until(lambda: line() is not None, f"the access log's line of {rid}")
    return line()


def assert_shown_cut(message: str) -> None:
    """The value quoted as ``shown`` writes it: its first 64 characters, escaped, and how many more there were."""
    assert EMAIL in message and "\\x07" in message and "\\u202e" in message, message
    assert "\x07" not in message and "\u202e" not in message and "z" * 65 not in message, message
    assert re.search(r"\(and \d{4} more characters\)", message), message


def assert_withheld(text: str) -> None:
    assert EMAIL not in text and "zzzz" not in text and "(value not shown)" in text, text


def chat_error(proc, rid: str, **body) -> openai.BadRequestError:
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="x", max_retries=0,
                           default_headers={"x-request-id": rid})
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="vsr/auto", messages=HI, **body)
    return info.value


def test_a_refused_enum_value_is_quoted_cut_and_escaped_and_the_log_withholds_it(gw):
    error = chat_error(gw, "echo-enum-1", reasoning_effort=LONG)
    assert error.body["param"] == "reasoning_effort" and error.body["code"] == "invalid_value", error.body
    assert "Supported values are: " in error.body["message"]
    assert_shown_cut(error.body["message"])
    line = logged(gw, "echo-enum-1")
    assert line["status"] == 400 and line["error"] == "invalid_value", line
    assert_withheld(line["message"])
    assert "reasoning_effort" in line["message"], line


def test_a_refused_block_type_in_anthropics_words_is_cut_and_the_log_withholds_it(gw):
    client = anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0,
                                 default_headers={"x-request-id": "echo-tag-1"})
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model="vsr/auto", max_tokens=8, messages=HI, tool_choice={"type": LONG})
    message = info.value.body["error"]["message"]
    assert message.startswith("tool_choice: Input tag "), message
    assert_shown_cut(message)
    assert_withheld(logged(gw, "echo-tag-1")["message"])


def refused_role(proc, rid: str, role: str) -> str:
    """The message of a Chat request refused for its ``role``, once its access log line withholds the value."""
    error = chat_error(proc, rid, extra_body={"messages": [{"role": role, "content": "hi"}]})
    assert error.body["param"] == "messages[0].role" and "Supported values are: " in error.body["message"], error.body
    assert_withheld(logged(proc, rid)["message"])
    return error.body["message"]


def test_a_refused_role_is_cut_in_chat_too(gw):
    assert_shown_cut(refused_role(gw, "echo-role-1", LONG))


def raw_exchange(port: int, request: bytes) -> tuple[bytes, bytes]:
    head, _, body = exchange(port, request).partition(b"\r\n\r\n")
    return head, body


def test_a_refused_origin_is_quoted_cut_and_the_log_withholds_it(gw):
    body = json.dumps({"model": "vsr/auto", "messages": HI}).encode()
    origin = b"https://" + EMAIL.encode() + b"\x7f" + b"o" * 400
    head, answer = raw_exchange(gw.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nOrigin: " + origin +
                                b"\r\nx-request-id: echo-origin-1\r\nContent-Type: application/json\r\n"
                                b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    assert head.startswith(b"HTTP/1.1 403 "), head
    message = json.loads(answer)["error"]["message"]
    assert "\\x7f" in message and "o" * 65 not in message and "more characters)" in message, message
    line = logged(gw, "echo-origin-1")
    assert EMAIL not in line["message"] and "(value not shown)" in line["message"], line


def test_a_lowercase_method_is_quoted_cut(gw):
    head, answer = raw_exchange(gw.port, b"g" * 200 + b" /health HTTP/1.1\r\nHost: x\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 "), head
    message = json.loads(answer)["error"]["message"]
    assert "g" * 65 not in message and "(and 136 more characters)" in message, message


def test_a_private_request_hears_where_and_what_was_expected_but_no_value(private_gw):
    error = chat_error(private_gw, "echo-private-1", reasoning_effort=LONG)
    assert error.body["param"] == "reasoning_effort" and "Supported values are: " in error.body["message"]
    assert_withheld(error.body["message"])


def test_a_private_request_with_a_short_value_hears_none_of_it_either(private_gw):
    assert_withheld(refused_role(private_gw, "echo-private-2", EMAIL))


def test_an_unknown_field_is_named_cut_and_escaped(gw):
    """Responses refuses an unknown top-level field by name: the name is the client's, any length."""
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="vsr/auto", input="hi", extra_body={"\x1b[31m" + "k" * 3000: 1})
    body = info.value.body
    assert body["code"] == "unknown_parameter", body
    assert body["param"].startswith("\\x1b[31m") and "k" * 65 not in body["param"], body
    assert "\x1b" not in body["message"] and "k" * 65 not in body["message"], body


def test_a_refused_content_encoding_is_quoted_cut_and_the_log_withholds_it(gw):
    coding = EMAIL + "\x01" + "c" * 2000
    r = httpx.post(f"{gw.url}/v1/chat/completions", timeout=20, json={"model": "vsr/auto", "messages": HI},
                   headers={"content-encoding": coding, "x-request-id": "echo-coding-1"})
    assert r.status_code == 415, r.text
    message = r.json()["error"]["message"]
    assert "\\x01" in message and "c" * 65 not in message and "more characters)" in message, message
    assert_withheld(logged(gw, "echo-coding-1")["message"])


def test_a_private_router_quotes_no_header_value_either(private_gw):
    r = httpx.post(f"{private_gw.url}/v1/chat/completions", timeout=20, json={"model": "vsr/auto", "messages": HI},
                   headers={"content-encoding": EMAIL})
    assert r.status_code == 415 and "Content-Encoding" in r.json()["error"]["message"], r.text
    assert_withheld(r.json()["error"]["message"])
