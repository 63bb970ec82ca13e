"""masking end to end (spec 5.7): real router and mock upstream processes, the official SDKs as clients.

Every client API reaches a backend of every api_format; the provider-bound request the mock upstream
logged must hold no email address or phone number in any position (system, messages, tool-call
arguments, tool results, the text a system prompt added), and the replay record neither.
"""
from __future__ import annotations

import json
import re

import anthropic
import httpx
import openai
import pytest

from .procs import config, mock_upstream, model, refused_port, router, wait_for_value, write_config

EMAIL = "jane.doe@example.com"
OTHER_EMAIL = "ops-desk@example.org"
PHONE = "+1 650-253-0000"
FORMATS = ("openai", "anthropic", "responses")
PII_SIGNALS = {"pii": [{"name": "personal"}],
               "keywords": [{"name": fmt, "operator": "OR", "keywords": [f"via {fmt}"]} for fmt in FORMATS]}
PLUGINS = [
    {"type": "system_prompt", "configuration": {"mode": "insert",
                                                "system_prompt": f"Escalations go to {OTHER_EMAIL}."}},
    {"type": "masking", "configuration": {"enabled": True, "signal": "personal",
                                          "entity_types": ["EMAIL_ADDRESS", "PHONE_NUMBER"],
                                          "placeholders": {"PHONE_NUMBER": "<phone>"}}},
]


@pytest.fixture(scope="module")
def masked(tmp_path_factory):
    with mock_upstream() as upstream:
        models = [{**model(f"m-{fmt}", f"{upstream.url}/v1"), "api_format": fmt} for fmt in FORMATS]
        decisions = [{"name": f"to-{fmt}", "priority": 10, "plugins": PLUGINS,
                      "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": fmt}]},
                      "modelRefs": [{"model": f"m-{fmt}"}]} for fmt in FORMATS]
        doc = config(models, decisions, signals=PII_SIGNALS)
        doc["global"] = {"plugins": [{"type": "router_replay", "configuration": {
            "enabled": True, "capture_request_body": True, "capture_response_body": True,
            "max_body_bytes": 65536}}]}
        with router(write_config(doc, str(tmp_path_factory.mktemp("masked")))) as proc:
            yield proc, upstream


def sent(upstream) -> str:
    """The provider-bound request as the mock upstream received it, as one JSON text."""
    return json.dumps(httpx.get(f"{upstream.url}/_mock/stats").json()["last_request"]["body"])


def assert_clean(text: str) -> None:
    for value in (EMAIL, OTHER_EMAIL, PHONE, "650-253-0000", "jane.doe", "ops-desk"):
        assert value not in text, f"{value!r} reached the provider: {text}"


def assert_masked(proc, upstream, replay_id: str | None) -> None:
    text = sent(upstream)
    assert_clean(text)
    assert "[EMAIL_ADDRESS_1]" in text and "<phone_1>" in text
    assert "Escalations go to [EMAIL_ADDRESS_" in text          # the system prompt's own text, masked too
    if replay_id:
        # The record is built by a consumer of the event stream, after the answer: wait for its answer's event.
        def complete():
            r = httpx.get(f"{proc.url}/api/v1/replay/{replay_id}")
            return r.json() if r.status_code == 200 and r.json().get("status") else None

        record = wait_for_value(complete, f"the complete replay record {replay_id}")
        assert_clean(json.dumps(record))
        assert any("masking: masked" in p for p in record["plugins"]), record["plugins"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_chat_request_reaches_every_api_format_masked(masked, fmt):
    proc, upstream = masked
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
    raw = client.chat.completions.with_raw_response.create(model="vsr/auto", messages=[
        {"role": "system", "content": f"The user is {EMAIL}."},
        {"role": "user", "content": f"Find the account of {EMAIL}, phone {PHONE}."},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"email": EMAIL, "phone": PHONE})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": f"Account 42 belongs to {EMAIL}, {PHONE}."},
        {"role": "user", "content": f"Summarise it via {fmt}."},
    ], tools=[{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}])
    assert raw.http_response.status_code == 200
    assert_masked(proc, upstream, raw.headers.get("x-vsr-replay-id"))


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_messages_request_reaches_every_api_format_masked(masked, fmt, stream):
    proc, upstream = masked
    client = anthropic.Anthropic(base_url=proc.url, api_key="k")
    messages = [
        {"role": "user", "content": f"Find the account of {EMAIL}, phone {PHONE}."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup",
                                           "input": {"contact": {"email": EMAIL, "phone": PHONE}}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1",
             "content": [{"type": "text", "text": f"Account 42 belongs to {EMAIL}, {PHONE}."}]},
            {"type": "text", "text": f"Summarise it via {fmt}."}]},
    ]
    tools = [{"name": "lookup", "input_schema": {"type": "object"}}]
    if stream:
        with client.messages.stream(model="vsr/auto", max_tokens=64, system=f"The user is {EMAIL}.",
                                    messages=messages, tools=tools) as s:
            s.get_final_message()
        replay_id = None
    else:
        raw = client.messages.with_raw_response.create(model="vsr/auto", max_tokens=64, system=f"The user is {EMAIL}.",
                                                       messages=messages, tools=tools)
        replay_id = raw.headers.get("x-vsr-replay-id")
    assert_masked(proc, upstream, replay_id)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_responses_request_reaches_every_api_format_masked(masked, fmt):
    proc, upstream = masked
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
    raw = client.responses.with_raw_response.create(model="vsr/auto", instructions=f"The user is {EMAIL}.", input=[
        {"role": "user", "content": f"Find the account of {EMAIL}, phone {PHONE}."},
        {"type": "function_call", "call_id": "call_1", "name": "lookup",
         "arguments": json.dumps({"email": EMAIL, "phone": PHONE})},
        {"type": "function_call_output", "call_id": "call_1", "output": f"Account 42 belongs to {EMAIL}, {PHONE}."},
        {"role": "user", "content": [{"type": "input_text", "text": f"Summarise it via {fmt}."}]},
    ], tools=[{"type": "function", "name": "lookup", "parameters": {"type": "object"}}])
    assert raw.http_response.status_code == 200
    assert_masked(proc, upstream, raw.headers.get("x-vsr-replay-id"))


TOOL_EMAIL = "alice.smith@example.com"
# A tool schema whose personal data sits in a description, a default, an enum and an example, under properties
# named like the keys masking skips in messages ("name", "type").
TOOL_SCHEMA = {"type": "object", "description": f"Contacts such as {TOOL_EMAIL}.", "properties": {
    "name": {"type": "string", "description": f"Defaults to {TOOL_EMAIL}'s name.", "default": TOOL_EMAIL},
    "type": {"type": "string", "enum": [TOOL_EMAIL, "other"], "examples": [TOOL_EMAIL]}}, "required": ["name"]}
TOOL_DESCRIPTION = f"Look a customer up; escalate to {TOOL_EMAIL}."


def tool_request(proc, api: str, fmt: str):
    """One request of ``api`` whose only personal data is in its tool definition (and, for Responses, its
    instructions; for Messages, a system block and a stop sequence; for Chat, a stop sequence), through the
    official SDK."""
    text = f"Look the customer up via {fmt}."
    if api == "chat":
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
        return client.chat.completions.with_raw_response.create(
            model="vsr/auto", messages=[{"role": "user", "content": text}], stop=[f"Write to {TOOL_EMAIL}"],
            tools=[{"type": "function", "function": {"name": "lookup", "description": TOOL_DESCRIPTION,
                                                     "parameters": TOOL_SCHEMA}}])
    if api == "messages":
        client = anthropic.Anthropic(base_url=proc.url, api_key="k")
        return client.messages.with_raw_response.create(
            model="vsr/auto", max_tokens=64, messages=[{"role": "user", "content": text}],
            system=[{"type": "text", "text": f"Escalate to {TOOL_EMAIL}."}], stop_sequences=[f"Write to {TOOL_EMAIL}"],
            tools=[{"name": "lookup", "description": TOOL_DESCRIPTION, "input_schema": TOOL_SCHEMA}])
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
    return client.responses.with_raw_response.create(
        model="vsr/auto", input=text, instructions=f"Escalate to {TOOL_EMAIL}.",
        tools=[{"type": "function", "name": "lookup", "description": TOOL_DESCRIPTION, "parameters": TOOL_SCHEMA,
                "strict": False}])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
def test_personal_data_in_tool_definitions_and_stop_sequences_is_masked(masked, api, fmt):
    proc, upstream = masked
    raw = tool_request(proc, api, fmt)
    assert raw.http_response.status_code == 200
    got = sent(upstream)
    assert TOOL_EMAIL not in got and "alice.smith" not in got, f"{TOOL_EMAIL!r} reached the provider: {got}"
    # One address, one placeholder in every position (the system prompt's own address is another one).
    placeholder = re.search(r"escalate to (\[EMAIL_ADDRESS_\d\])", got).group(1)
    assert f'"default": "{placeholder}"' in got and f'"enum": ["{placeholder}", "other"]' in got
    body = json.loads(got)
    # The schema still declares what it did: property names, types and the required list untouched.
    schemas = json.dumps([t.get("input_schema") or t.get("parameters") or t["function"]["parameters"]
                          for t in body["tools"]])
    assert '"properties": {"name": {"type": "string"' in schemas and '"required": ["name"]' in schemas


def test_a_request_without_personal_data_is_sent_as_the_client_wrote_it(masked):
    proc, upstream = masked
    body = {"model": "vsr/auto", "messages": [{"role": "user", "content": "Hello there, via openai."}]}
    r = httpx.post(f"{proc.url}/v1/chat/completions", json=body)
    assert r.status_code == 200
    got = json.loads(sent(upstream))
    assert got["messages"][-1]["content"] == "Hello there, via openai."
    # The system prompt's own address is still masked: masking reads what the plugins before it wrote.
    assert got["messages"][0]["content"] == "Escalations go to [EMAIL_ADDRESS_1]."


def test_masking_fails_the_request_closed_when_its_rule_cannot_be_read(tmp_path_factory):
    """The pii rule's deployment does not answer: 503 masking_unavailable, and the provider gets nothing."""
    with mock_upstream() as upstream:
        doc = config([model("m", f"{upstream.url}/v1")],
                     [{"name": "only", "rules": {"operator": "AND", "conditions": []}, "modelRefs": [{"model": "m"}],
                       "plugins": [{"type": "masking", "configuration": {"signal": "personal"}}]}],
                     signals={"pii": [{"name": "personal", "deployment": "gone"}]})
        doc["global"] = {"model_catalog": {"deployments": {"gone": {
            "provider": "systemone", "endpoint": f"http://127.0.0.1:{refused_port()}/v1/systemone", "model": "x",
            "timeout_ms": 500, "capabilities": {"question_types": ["span", "choice", "noul"]}}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("closed")))) as proc:
            client = anthropic.Anthropic(base_url=proc.url, api_key="k", max_retries=0)
            with pytest.raises(anthropic.InternalServerError) as caught:
                client.messages.create(model="vsr/auto", max_tokens=10,
                                       messages=[{"role": "user", "content": f"Mail {EMAIL}"}])
            assert caught.value.status_code == 529      # Anthropic's words for a 503
            assert EMAIL not in caught.value.response.text and "masking" in caught.value.response.text
            r = httpx.post(f"{proc.url}/v1/chat/completions", json={
                "model": "vsr/auto", "messages": [{"role": "user", "content": f"Mail {EMAIL}"}]})
            assert r.status_code == 503 and r.json()["error"]["code"] == "masking_unavailable"
            assert EMAIL not in r.text
            assert httpx.get(f"{upstream.url}/_mock/stats").json()["requests"] == 0


@pytest.fixture(scope="module")
def reusing(tmp_path_factory):
    """(router, fake System One, upstream): the pii rule and the masking on a remote decision model."""
    from bench.fake_systemone import process as fake_process

    with fake_process() as fake, mock_upstream() as upstream:
        doc = config([model("m", f"{upstream.url}/v1")],
                     [{"name": "private", "rules": {"operator": "AND", "conditions": [{"type": "pii", "name": "personal"}]},
                       "modelRefs": [{"model": "m"}],
                       "plugins": [{"type": "masking", "configuration": {"signal": "personal"}}]}],
                     signals={"pii": [{"name": "personal"}]}, fallback={"modelRefs": [{"model": "m"}]})
        doc["global"] = {"model_catalog": {
            "deployments": {"s1": {"provider": "systemone", "endpoint": f"{fake.url}/v1/systemone", "model": "fake",
                                   "capabilities": {"question_types": ["span", "choice", "noul"]}}},
            "system": {"decision_model": {"deployment": "s1"}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("reuse")))) as proc:
            yield proc, fake, upstream


@pytest.mark.parametrize("users", [[f"Mail me at {EMAIL} please."], [f"Mail me at {EMAIL} please.", f"Or call {PHONE}."]],
                         ids=["one message", "two messages"])
def test_masking_reuses_the_routing_answer_and_asks_only_the_texts_routing_did_not_read(reusing, users):
    """A remote decision model: routing asks the pii rule about the current turn; masking asks one more call,
    about the other texts only (the system message), and masks what both answers labelled. Consecutive user
    messages are one current turn, read as one text: masking reuses its spans for each message by its own
    offsets."""
    proc, fake, upstream = reusing
    # Each case's system message its own: an answer the router kept from the other case's would spare a call.
    turn, system = "\n\n".join(users), f"Ops ({len(users)}): {OTHER_EMAIL}"
    labels = {EMAIL: "EMAIL_ADDRESS", PHONE: "PHONE_NUMBER", OTHER_EMAIL: "EMAIL_ADDRESS"}
    httpx.post(f"{fake.url}/_fake/reset").raise_for_status()
    rules = [{"question": "preset:pii", "request_contains": text, "answer": {"span": [
                 [label, text.index(value), text.index(value) + len(value)]
                 for value, label in labels.items() if value in text]}} for text in (turn, system)]
    httpx.post(f"{fake.url}/_fake/rules", json={"rules": rules}).raise_for_status()
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
    raw = client.chat.completions.with_raw_response.create(model="vsr/auto", messages=[
        {"role": "system", "content": system}, *({"role": "user", "content": u} for u in users)])
    assert raw.headers["x-vsr-selected-decision"] == "private"
    text = sent(upstream)
    assert_clean(text)
    # The system message comes first: its address is the first.
    assert text.count("[EMAIL_ADDRESS_1]") == 1 and text.count("[EMAIL_ADDRESS_2]") == 1
    assert text.count("[PHONE_NUMBER_1]") == (len(users) > 1)
    calls = [c["body"] for c in httpx.get(f"{fake.url}/_fake/calls").json()["calls"]]
    assert len(calls) == 2
    assert calls[0]["state"]["request"] == turn                   # routing read the whole current turn
    assert calls[1]["state"]["request"] == system                 # masking asked only what it lacked


def test_a_long_tool_result_is_read_whole_in_windows_and_masked(masked):
    proc, upstream = masked
    filler = "The quarterly numbers were reviewed line by line. " * 400          # ~20 KB: many scan windows
    result = f"{filler}Contact {EMAIL} or {PHONE}. {filler}Again: {EMAIL}."
    r = httpx.post(f"{proc.url}/v1/chat/completions", json={"model": "vsr/auto", "messages": [
        {"role": "user", "content": "Check the report via anthropic."},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "report", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": result}],
        "tools": [{"type": "function", "function": {"name": "report", "parameters": {"type": "object"}}}]})
    assert r.status_code == 200, r.text
    text = sent(upstream)
    assert_clean(text)
    # The system prompt's address, then the result's twice, under one placeholder.
    assert text.count("[EMAIL_ADDRESS_1]") == 1 and text.count("[EMAIL_ADDRESS_2]") == 2 and "<phone_1>" in text


ID_EMAIL = "bob.jones@example.net"
NATIVE = {"chat": "openai", "messages": "anthropic", "responses": "responses"}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("api", ["chat", "messages", "responses"])
def test_an_email_address_used_as_the_callers_id_is_masked(masked, api, fmt):
    """The caller's identifiers (user, safety_identifier, prompt_cache_key, metadata; Messages' user_id) are
    stored by the provider like the text: an e-mail address there never reaches it, whatever the translation."""
    proc, upstream = masked
    text = f"What are your opening hours? Ask via {fmt}."
    if api == "messages":
        client = anthropic.Anthropic(base_url=proc.url, api_key="k")
        raw = client.messages.with_raw_response.create(model="vsr/auto", max_tokens=64, metadata={
            "user_id": ID_EMAIL}, messages=[{"role": "user", "content": text}])
    elif api == "chat":
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
        raw = client.chat.completions.with_raw_response.create(
            model="vsr/auto", messages=[{"role": "user", "content": text}], user=ID_EMAIL,
            safety_identifier=ID_EMAIL, prompt_cache_key=f"conv:{ID_EMAIL}", metadata={"who": ID_EMAIL}, store=True)
    else:
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
        raw = client.responses.with_raw_response.create(
            model="vsr/auto", input=text, user=ID_EMAIL, safety_identifier=ID_EMAIL,
            prompt_cache_key=f"conv:{ID_EMAIL}", metadata={"who": ID_EMAIL})
    assert raw.http_response.status_code == 200
    got = sent(upstream)
    assert ID_EMAIL not in got and "bob.jones" not in got, f"{ID_EMAIL!r} reached the provider: {got}"
    body = json.loads(got)
    if NATIVE[api] == fmt:          # the fields pass through: masked, not dropped
        if fmt == "anthropic":
            assert body["metadata"] == {"user_id": "[EMAIL_ADDRESS_2]"}     # the system prompt's is the first
        else:
            assert body["user"] == body["safety_identifier"] == "[EMAIL_ADDRESS_2]"
            assert body["prompt_cache_key"] == "conv:[EMAIL_ADDRESS_2]" and body["metadata"] == {"who": "[EMAIL_ADDRESS_2]"}
