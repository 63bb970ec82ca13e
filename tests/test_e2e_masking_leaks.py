"""Masking's leaks found by an outside trial (a data-protection officer): every spelling of a masked value,
structured values written the ways people write them, every field the provider reads, attached files and URLs,
the error paths. Real router and mock upstream processes, the official SDKs as clients; each test asserts the
planted values are absent from what the provider received."""
from __future__ import annotations

import base64
import json

import anthropic
import httpx
import openai
import pytest
import redis

from vsr_fast.events.types import decode_event

from .procs import mock_upstream, model, redis_prefix, router, wait_for_value, wait_until, write_config

FORMATS = ("openai", "anthropic", "responses")
PII = {"pii": [{"name": "personal", "on_unknown": "match", "input": {"history": True, "tool_results": True}}]}
PLUGINS = [{"type": "masking", "configuration": {"enabled": True, "signal": "personal"}},
           {"type": "router_replay", "configuration": {"capture_request_body": True,
                                                       "capture_response_body": True}}]


@pytest.fixture(scope="module")
def leaks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("leaks")
    with mock_upstream("--echo") as upstream, redis_prefix("leaks") as prefix:
        doc = {
            "version": "v0.5",
            "providers": {"models": [{**model(f"m-{f}", f"{upstream.url}/v1"), "api_format": f} for f in FORMATS]},
            "recipes": [{"name": f"r-{f}", "signals": PII, "decisions": [
                {"name": "support", "rules": {"operator": "AND", "conditions": []},
                 "modelRefs": [{"model": f"m-{f}"}], "plugins": PLUGINS}]} for f in FORMATS],
            "entrypoints": [{"api": "chat", "model_names": [f"vsr/{f}"], "recipe": f"r-{f}", "default": f == "openai"}
                            for f in FORMATS],
            "global": {"router": {"access_log": {"enabled": True, "path": str(folder / "access.log")}},
                       "stores": {"event_stream": {"backend": "redis", "stream": f"{prefix}events"}}},
        }
        with router(write_config(doc, str(folder))) as proc:    # the mock echoes the last user message
            proc.access_log, proc.events = folder / "access.log", f"{prefix}events"
            yield proc, upstream


def last(upstream) -> dict:
    return httpx.get(f"{upstream.url}/_mock/stats").json()["last_request"]


def sent(upstream) -> str:
    """The provider-bound body as the mock upstream received it, as one JSON text (non-ASCII kept)."""
    return json.dumps(last(upstream)["body"], ensure_ascii=False)


def assert_absent(text: str, *values: str) -> None:
    for value in values:
        assert value not in text, f"{value!r} reached the provider: {text}"


def chat(proc):
    return openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)


def messages(proc):
    return anthropic.Anthropic(base_url=proc.url, api_key="k", max_retries=0)


# --- 1. every spelling of a masked value ------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_other_spellings_of_a_masked_name_are_masked_too(leaks, fmt):
    proc, upstream = leaks
    text = ("I'm Maria Gonzalez from Madrid. Please cc MARIA GONZALEZ and maria gonzalez on the reply. "
            "My colleague Jürgen Müller agrees; write JÜRGEN MÜLLER and jürgen müller and Jurgen Muller too.")
    chat(proc).chat.completions.create(model=f"vsr/{fmt}", messages=[{"role": "user", "content": text}])
    body = sent(upstream)
    assert_absent(body, "Maria Gonzalez", "MARIA GONZALEZ", "maria gonzalez", "Jürgen Müller", "JÜRGEN MÜLLER",
                  "jürgen müller", "Jurgen Muller")


# --- 2. structured values as people write them ------------------------------------------------------------------

STRUCTURED = [
    ("Write to _maria.gonzalez@example.com_ please.", ["maria.gonzalez@example.com", "maria.gonzalez"]),
    ("Mail maria.gonzalez@example.com_ (work) today.", ["maria.gonzalez@example.com", "maria.gonzalez"]),
    ("Call +49 151 23456789_ now.", ["23456789"]),
    ("Phone: _+49 151 23456789_", ["+49", "23456789"]),
    ("Mail maria.gon\u200bzalez@example.com today.", ["maria.gon", "example.com"]),
    ("Mail maria\u00ad.gonzalez@example.com today.", ["maria", "gonzalez"]),
    ("Call +49 151\n23456789 after six.", ["23456789"]),
    ("Call 0049 151 23456789 after six.", ["23456789", "0049 151"]),
    ("IBAN de89370400440532013000 for the refund.", ["370400440532013000"]),
    ("IBAN DE89-3704-0044-0532-0130-00 for the refund.", ["3704-0044-0532"]),
    ("Card 4111.1111.1111.1111 expired.", ["4111.1111.1111.1111", "1111.1111"]),
    ("Reach me at maria.gonzalez @ example.com soon.", ["maria.gonzalez"]),
    ("Reach me at maria.gonzalez(at)example.com soon.", ["maria.gonzalez"]),
]


@pytest.mark.parametrize("text,values", STRUCTURED, ids=[t[:24] for t, _ in STRUCTURED])
def test_structured_values_written_the_ways_people_write_them_are_masked(leaks, text, values):
    proc, upstream = leaks
    chat(proc).chat.completions.create(model="vsr/openai", messages=[{"role": "user", "content": text}])
    body = last(upstream)["body"]["messages"][0]["content"]
    assert_absent(body, *values)


# --- 3. every field the provider reads ----------------------------------------------------------------------

EMAIL = "maria.gonzalez@example.com"


def test_responses_prompt_variables_are_masked(leaks):
    proc, upstream = leaks
    chat(proc).responses.create(model="vsr/responses", input="Draft the letter.", prompt={
        "id": "pmpt_1", "variables": {"customer": f"Maria at {EMAIL}",
                                      "card": {"type": "input_text", "text": f"cc {EMAIL}"}}})
    body = sent(upstream)
    assert "pmpt_1" in body and "[EMAIL_ADDRESS_1]" in body
    assert_absent(body, EMAIL)


@pytest.mark.parametrize("field", ["output_format", "output_config"])
def test_messages_output_format_schemas_are_masked_on_an_anthropic_backend(leaks, field):
    proc, upstream = leaks
    fmt = {"type": "json_schema", "schema": {"type": "object", "properties": {
        "to": {"type": "string", "enum": [EMAIL, "other"], "description": f"Write to {EMAIL}."}}}}
    extra = {"output_format": fmt} if field == "output_format" else {"output_config": {"format": fmt}}
    messages(proc).messages.create(model="vsr/anthropic", max_tokens=32, extra_body=extra,
                                   messages=[{"role": "user", "content": "Answer in JSON."}])
    body = sent(upstream)
    assert field in body and "[EMAIL_ADDRESS_1]" in body
    assert_absent(body, EMAIL)


def test_chat_web_search_user_location_is_masked(leaks):
    proc, upstream = leaks
    chat(proc).chat.completions.create(
        model="vsr/openai", messages=[{"role": "user", "content": "Where is the nearest office?"}],
        web_search_options={"user_location": {"type": "approximate", "approximate": {
            "city": "Call +49 151 23456789", "region": EMAIL}}})
    body = sent(upstream)
    assert "user_location" in body
    assert_absent(body, EMAIL, "23456789")


# --- 4. attached files and URLs ---------------------------------------------------------------------------------

LETTER = f"Dear team,\nplease refund Maria Gonzalez, {EMAIL}, +49 151 23456789.\n"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def decoded_files(body: dict) -> str:
    """Every base64 payload of the provider-bound body, decoded where it is text."""
    out = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if isinstance(v, str) and k in ("file_data", "data"):
                    out.append(base64.b64decode(v.split(",", 1)[-1]).decode())
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(body)
    return "\n".join(out)


@pytest.mark.parametrize("api", ["responses", "chat", "messages"])
def test_a_text_file_is_decoded_masked_and_re_encoded(leaks, api):
    proc, upstream = leaks
    if api == "responses":
        chat(proc).responses.create(model="vsr/responses", input=[{"role": "user", "content": [
            {"type": "input_text", "text": "Summarise the letter."},
            {"type": "input_file", "filename": "letter.txt", "file_data": f"data:text/plain;base64,{b64(LETTER)}"}]}])
    elif api == "chat":
        chat(proc).chat.completions.create(model="vsr/openai", messages=[{"role": "user", "content": [
            {"type": "text", "text": "Summarise the letter."},
            {"type": "file", "file": {"filename": "letter.csv", "file_data": f"data:text/csv;base64,{b64(LETTER)}"}}]}])
    else:
        messages(proc).messages.create(model="vsr/anthropic", max_tokens=32, messages=[{"role": "user", "content": [
            {"type": "document", "source": {"type": "base64", "media_type": "text/plain", "data": b64(LETTER)}},
            {"type": "text", "text": "Summarise the letter."}]}])
    body = last(upstream)["body"]
    files = decoded_files(body)
    assert "Dear team" in files and "[EMAIL_ADDRESS_1]" in files, files
    assert_absent(files + sent(upstream), EMAIL, "23456789", "Maria Gonzalez")


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(64))).decode()
PDF = base64.b64encode(b"%PDF-1.4\n" + bytes(range(64))).decode()


@pytest.mark.parametrize("case", ["chat image", "chat url", "messages pdf", "messages url", "responses pdf"])
def test_a_file_or_url_masking_cannot_clean_fails_closed_naming_its_field(leaks, case):
    proc, upstream = leaks
    marker = f"Describe it, case {case}."
    url = f"https://files.example/{EMAIL}/cv.pdf"
    try:
        if case.startswith("chat"):
            part = ({"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}} if case == "chat image"
                    else {"type": "image_url", "image_url": {"url": url}})
            chat(proc).chat.completions.create(model="vsr/openai", messages=[{"role": "user", "content": [
                {"type": "text", "text": marker}, part]}])
        elif case.startswith("messages"):
            source = ({"type": "base64", "media_type": "application/pdf", "data": PDF} if case == "messages pdf"
                      else {"type": "url", "url": url})
            messages(proc).messages.create(model="vsr/anthropic", max_tokens=32, messages=[{"role": "user", "content": [
                {"type": "document", "source": source}, {"type": "text", "text": marker}]}])
        else:
            chat(proc).responses.create(model="vsr/responses", input=[{"role": "user", "content": [
                {"type": "input_text", "text": marker},
                {"type": "input_file", "filename": "cv.pdf", "file_data": f"data:application/pdf;base64,{PDF}"}]}])
    except (openai.BadRequestError, anthropic.BadRequestError) as exc:
        text = str(exc) + json.dumps(exc.body)
        assert "masking cannot read and clean" in text and (case.startswith("messages") or "masking_unreadable" in text), text
        field = {"chat image": "image_url.url", "chat url": "image_url.url", "messages pdf": "source.data",
                 "messages url": "source.url", "responses pdf": "file_data"}[case]
        assert field in text and ("messages[0]" in text or "input[0]" in text), text
        assert EMAIL not in text
    else:
        pytest.fail(f"{case}: forwarded")
    last_body = last(upstream)
    assert last_body is None or marker not in json.dumps(last_body["body"])


# --- 5. the error path and the event stream ---------------------------------------------------------------------

def logged(proc, request_id: str) -> str:
    """The access log's line and every event of one request, as one text."""
    def line():
        text = proc.access_log.read_text() if proc.access_log.exists() else ""
        return next((l for l in text.splitlines() if request_id in l), None)
    out = [wait_for_value(line, f"the access log line of {request_id}")]
    for _, fields in redis.Redis().xrange(proc.events):
        for value in fields.values():
            try:
                ev = decode_event(value)
            except Exception:
                continue
            if getattr(ev, "request_id", None) == request_id:
                out.append(repr(ev))
    return "\n".join(out)


def test_a_metadata_key_holding_personal_data_stays_out_of_the_logs(leaks):
    proc, upstream = leaks
    key = f"Maria Gonzalez {EMAIL}"
    r = httpx.post(f"{proc.url}/v1/chat/completions", json={
        "model": "vsr/openai", "messages": [{"role": "user", "content": "hi"}], "metadata": {key: 5}})
    assert r.status_code == 400, r.text
    assert_absent(logged(proc, r.headers["x-request-id"]), EMAIL, "Maria Gonzalez")


def test_a_model_name_that_is_an_address_stays_out_of_the_events(leaks):
    proc, upstream = leaks
    raw = chat(proc).chat.completions.with_raw_response.create(
        model=EMAIL, messages=[{"role": "user", "content": "hi"}])
    rid = raw.headers["x-request-id"]
    wait_until(lambda: "answer_completed" in logged(proc, rid).lower() or "AnswerCompleted" in logged(proc, rid),
               "the answer's event")
    assert_absent(logged(proc, rid), EMAIL)


# --- 6. a refusal before the decision, on an entrypoint whose decisions mask ------------------------------------

@pytest.mark.parametrize("api", ["chat", "messages"])
def test_a_refusal_before_the_decision_does_not_echo_the_clients_value(leaks, api):
    proc, upstream = leaks
    role = f"Maria Gonzalez {EMAIL}"
    if api == "chat":
        r = httpx.post(f"{proc.url}/v1/chat/completions", json={
            "model": "vsr/openai", "messages": [{"role": role, "content": "hi"}]})
    else:
        r = httpx.post(f"{proc.url}/v1/messages", json={
            "model": "vsr/anthropic", "max_tokens": 8, "messages": [{"role": role, "content": "hi"}]})
    assert r.status_code == 400 and "messages" in r.text and "role" in r.text, r.text
    assert_absent(r.text + logged(proc, r.headers["x-request-id"]), EMAIL, "Maria Gonzalez")


# --- 7. one value, one placeholder, restored as the client wrote it --------------------------------------------

def test_an_address_in_markdown_bold_is_one_value_with_one_placeholder(leaks):
    proc, upstream = leaks
    text = f"Write to **{EMAIL}** or to {EMAIL}."
    answer = chat(proc).chat.completions.create(model="vsr/openai", messages=[{"role": "user", "content": text}])
    body = last(upstream)["body"]["messages"][0]["content"]
    assert body == "Write to **[EMAIL_ADDRESS_1]** or to [EMAIL_ADDRESS_1].", body
    assert answer.choices[0].message.content == text


def test_a_chat_name_is_restored_as_the_client_wrote_it(leaks):
    proc, upstream = leaks
    text = "Please greet juergen_mueller."
    answer = chat(proc).chat.completions.create(model="vsr/openai", messages=[
        {"role": "user", "name": "juergen_mueller", "content": text}])
    assert_absent(sent(upstream), "juergen_mueller", "Juergen Mueller")
    assert answer.choices[0].message.content == text


# --- 8. a placeholder the client wrote itself -------------------------------------------------------------------

def test_a_literal_placeholder_in_the_clients_text_is_left_as_it_is(leaks):
    proc, upstream = leaks
    text = "The template says [PERSON_1] and [EMAIL_ADDRESS_1]. I'm Maria Gonzalez, maria.gonzalez@example.com."
    answer = chat(proc).chat.completions.create(model="vsr/openai", messages=[{"role": "user", "content": text}])
    body = last(upstream)["body"]["messages"][0]["content"]
    assert body == "The template says [PERSON_1] and [EMAIL_ADDRESS_1]. I'm [PERSON_2], [EMAIL_ADDRESS_2].", body
    assert answer.choices[0].message.content == text


# --- 9. the client's User-Agent ------------------------------------------------------------------------------

def test_the_clients_user_agent_does_not_reach_the_provider_on_a_masking_decision(leaks):
    proc, upstream = leaks
    agent = "SupportDesk/1.0 (agent Maria Gonzalez maria.gonzalez@example.com)"
    chat(proc).chat.completions.create(model="vsr/openai", messages=[{"role": "user", "content": "hi"}],
                                       extra_headers={"User-Agent": agent})
    agents = [v for k, v in last(upstream)["headers"].items() if k.lower() == "user-agent"]
    assert agents and all("Gonzalez" not in a and "SupportDesk" not in a for a in agents), agents


def test_the_clients_user_agent_stays_out_of_the_access_log_on_a_masking_decision(leaks):
    proc, _ = leaks
    agent = "SupportDesk/1.0 (agent Maria Gonzalez maria.gonzalez@example.com)"
    r = httpx.post(f"{proc.url}/v1/chat/completions", headers={"User-Agent": agent},
                   json={"model": "vsr/openai", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200, r.text
    line = json.loads(logged(proc, r.headers["x-request-id"]).splitlines()[0])
    assert line["decision"] and line["user_agent"] == "(not shown)", line


# --- 9. an agent's tool definitions (fix133) -----------------------------------------------------------------------

def test_an_agents_tool_definitions_keep_their_ranges_and_the_users_phone_is_masked(leaks):
    """Codex's exec tool reached the provider as "[PHONE_NUMBER_1] ms": a range of durations is no phone number.
    The definitions are still read (an app may write personal data there): the user's phone beside them is masked."""
    proc, upstream = leaks
    described = "Runs a command. With yield_time_ms, empty polls wait 5000-300000 ms; output is capped at 10000 tokens."
    timeout = "Timeout in ms (1000-600000); row ids such as 2345678901 are passed through."
    tools = [{"type": "function", "name": "exec_command", "description": described, "parameters": {
        "type": "object", "properties": {"cmd": {"type": "string"}, "timeout_ms": {"type": "integer",
                                                                                  "description": timeout}}}}]
    chat(proc).responses.create(model="vsr/anthropic", tools=tools,
                                input="My phone is +1 650-253-0000, call me when the build is done.")
    body = last(upstream)["body"]
    assert body["tools"][0]["description"] == described
    assert body["tools"][0]["input_schema"]["properties"]["timeout_ms"]["description"] == timeout
    assert_absent(sent(upstream), "+1 650-253-0000", "650-253-0000")
    assert "[PHONE_NUMBER_1]" in sent(upstream)
