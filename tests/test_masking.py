"""masking: its configuration's bad forms (one line each, with the path), layering, and the walk over each
api_format's body (every text position read, every copy of a value replaced, names and ids left alone)."""
from __future__ import annotations

import base64
import copy
import json

import pytest

from vsr_fast.plugins import masking
from vsr_fast.plugins.unmask import Restorer, StreamRestorer
from vsr_fast.routing import load_raw
from vsr_fast.server.recording import Policies

from . import test_plugins_config as plugins_config
from .test_plugins_config import errors_of


def doc(decision_plugins: list, global_plugins: list | None = None, pii: list | None = None) -> dict:
    out = plugins_config.doc(decision_plugins, global_plugins)
    out["recipes"][0]["signals"] = {"pii": pii if pii is not None else [{"name": "personal"}]}
    return out


AT = f"{plugins_config.AT}.configuration"


@pytest.mark.parametrize(("configuration", "line"), [
    ({"signal": "nobody"}, f"{AT}.signal: unknown_signal: masking names pii rule 'nobody', which "
                           "recipes[default].signals.pii does not declare"),
    ({"enabled": True}, f"{AT}.signal: missing_field: masking names the pii rule"),
    ({"signal": "personal", "entity_types": ["EMAIL"]},
     f"{AT}.entity_types[0]: invalid_value: 'EMAIL' is not a label of preset pii"),
    ({"signal": "personal", "placeholders": {"PHONE": "<p>"}},
     f"{AT}.placeholders.PHONE: invalid_value: 'PHONE' is not a label of preset pii"),
    ({"signal": "personal", "placeholders": {"PHONE_NUMBER": ""}}, f"{AT}.placeholders.PHONE_NUMBER: invalid_value"),
    ({"signal": "personal", "entity_types": "EMAIL_ADDRESS"}, f"{AT}.entity_types: invalid_type"),
    ({"signal": "personal", "mask_char": "*"}, f"{AT}.mask_char: unknown_field"),
])
def test_each_bad_form_is_one_line_with_its_path(configuration, line):
    lines = errors_of(doc([{"type": "masking", "configuration": configuration}]))
    assert len(lines) == 1 and lines[0].startswith(line), lines


def test_a_global_block_takes_its_rule_from_the_decision_and_a_decision_may_turn_it_off():
    loaded = load_raw(doc([{"type": "masking", "configuration": {"signal": "personal"}}],
                          global_plugins=[{"type": "masking", "configuration": {"entity_types": ["EMAIL_ADDRESS"]}}]))
    policy = Policies(loaded).masking("default", "d")
    assert policy == masking.Masking("personal", frozenset({"EMAIL_ADDRESS"}), {})
    off = load_raw(doc([{"type": "masking", "configuration": {"enabled": False}}],
                       global_plugins=[{"type": "masking", "configuration": {"signal": "personal"}}]))
    assert Policies(off).masking("default", "d") is None
    # A global block naming a rule a recipe lacks fails at the global block.
    lines = errors_of(doc([], global_plugins=[{"type": "masking", "configuration": {"signal": "personal"}}], pii=[]))
    assert lines == ["global.plugins[0].configuration.signal: unknown_signal: masking "
                     "names pii rule 'personal', which recipes[default].signals.pii does not declare"]


def test_masking_withholds_the_request_from_the_record_unless_personal_data_is_captured():
    replay = {"type": "router_replay", "configuration": {"capture_request_body": True}}
    plain = Policies(load_raw(doc([{"type": "masking", "configuration": {"signal": "personal"}}], [replay])))
    assert plain.withholds_request("default", "d") is True
    opted = {"type": "router_replay", "configuration": {"capture_request_body": True, "capture_personal_data": True}}
    clear = Policies(load_raw(doc([{"type": "masking", "configuration": {"signal": "personal"}}], [opted])))
    assert clear.withholds_request("default", "d") is False
    assert Policies(load_raw(doc([], [replay]))).withholds_request("default", "d") is False


def test_a_private_request_gets_no_semantic_cache_entry_and_its_answer_bypasses_the_stream():
    """Masking (without capture_personal_data: true) or capture_personal_data: false: the plan is private and its
    cache exact (a semantic entry is the request's text); the e2e side is test_e2e_cache_personal_data."""
    cache = {"type": "response_cache", "configuration": {"mode": "exact_then_semantic"}}
    mask = {"type": "masking", "configuration": {"signal": "personal"}}
    opted = {"type": "router_replay", "configuration": {"capture_personal_data": True}}
    refused = {"type": "router_replay", "configuration": {"capture_personal_data": False}}
    for plugins, private in (([mask], True), ([mask, opted], False), ([refused], True), ([], False)):
        plan = Policies(load_raw(doc(plugins, [cache]))).plan("default", "d")
        assert plan.private is private, plugins
        assert plan.cache.mode == ("exact" if private else "exact_then_semantic"), plugins
        assert (plan.cache.match is None) is private


E, P = "a@example.com", "+1 650-253-0000"
BODIES = {
    "openai": {"model": "x", "tools": [{"type": "function", "function": {"name": "lookup", "description": E}}],
               "messages": [
                   {"role": "system", "content": f"sys {E}"},
                   {"role": "user", "content": [{"type": "text", "text": f"hi {E}"},
                                                {"type": "image_url", "image_url": {"url": "https://x/cat.png"}}]},
                   {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
                       "name": "lookup", "arguments": json.dumps({"e": E, "p": P})}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": f"{P} and {P}"}]},
    "anthropic": {"model": "x", "system": [{"type": "text", "text": f"sys {E}"}], "messages": [
        {"role": "user", "content": f"hi {E}"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "lookup",
                                           "input": {"who": {"e": E}, "list": [P]}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": f"{P}"},
                                     {"type": "document", "source": {"type": "base64", "media_type": "text/plain",
                                                                     "data": base64.b64encode(f"doc {E}".encode()).decode()}}]}]},
    "responses": {"model": "x", "instructions": f"sys {E}", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": f"hi {E}"}]},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": json.dumps({"e": E})},
        {"type": "function_call_output", "call_id": "c1", "output": P},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": f"patch {E}"}]},
}


@pytest.mark.parametrize("part", [
    {"type": "image_url", "image_url": {"url": f"https://x/{E}"}},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
    {"type": "file", "file": {"filename": "a.pdf", "file_data": "QUJD"}},
    {"type": "input_audio", "input_audio": {"data": "QUJD", "format": "wav"}}])
def test_an_attachment_masking_cannot_clean_is_unreadable_with_its_place(part):
    body = {"model": "x", "messages": [{"role": "user", "content": [{"type": "text", "text": f"hi {E}"}, part]}]}
    with pytest.raises(masking.Unreadable) as raised:
        masking.texts(body, "openai")
        masking.replace(body, "openai", {E: "[EMAIL_ADDRESS_1]"})
    where = masking.path(body, raised.value.node, raised.value.key)
    assert where is not None and where.startswith("messages[0].content[1].") and E not in raised.value.what


@pytest.mark.parametrize("fmt", sorted(BODIES))
def test_every_text_position_is_read_and_every_copy_replaced(fmt):
    body = copy.deepcopy(BODIES[fmt])
    found = masking.texts(body, fmt)
    assert any(E in t for t in found) and any(P in t for t in found)
    assert "lookup" not in found and "x" not in found                           # names, ids: not text
    count = masking.replace(body, fmt, {E: "[EMAIL_ADDRESS]", P: "[PHONE_NUMBER]"})
    text = json.dumps(body)
    assert count >= 4
    # Tool definitions are not a text position the spec names; the conversation is clean.
    conversation = json.dumps({k: v for k, v in body.items() if k != "tools"})
    assert E not in conversation and P not in conversation and "[EMAIL_ADDRESS]" in text
    assert masking.replace(body, fmt, {E: "x"}) == 0                               # nothing left to replace


@pytest.mark.parametrize("fmt, ids", [
    ("openai", {"user": E, "safety_identifier": f"sid-{E}", "prompt_cache_key": f"conv:{E}", "metadata": {"who": E}}),
    ("responses", {"user": E, "safety_identifier": E, "prompt_cache_key": E, "metadata": {"who": f"is {E}"}}),
    ("anthropic", {"metadata": {"user_id": E}}),
])
def test_the_callers_identifiers_are_read_and_masked(fmt, ids):
    """An e-mail address as a user id, a cache key or metadata reaches the provider's logs like any text."""
    body = {**copy.deepcopy(BODIES[fmt]), **copy.deepcopy(ids)}
    found = masking.texts(body, fmt)
    for value in ids.values():
        for text in (value.values() if isinstance(value, dict) else (value,)):
            assert text in found
    masking.replace(body, fmt, {E: "[EMAIL_ADDRESS]"})
    assert E not in json.dumps(body)
    assert list(body.get("metadata", {})) == list(ids.get("metadata", {}))   # the keys stay: names, not text



@pytest.mark.parametrize("placeholders, label, want", [
    ({}, "EMAIL_ADDRESS", "[EMAIL_ADDRESS_2]"),
    ({"PHONE_NUMBER": "<phone>"}, "PHONE_NUMBER", "<phone_2>"),
    ({"PERSON": "REDACTED"}, "PERSON", "REDACTED_2"),
])
def test_a_placeholder_is_numbered_inside_its_closing_bracket(placeholders, label, want):
    assert masking.Masking("personal", None, placeholders).placeholder(label, 2) == want


QUOTED = 'o"brien\\x@example.com'      # a value a JSON string must escape
RESTORER = Restorer({"[EMAIL_ADDRESS_1]": QUOTED, "[EMAIL_ADDRESS_12]": "twelve@example.com"})


def test_a_whole_answer_gets_its_values_back_and_tool_arguments_stay_valid_json():
    args = json.dumps({"to": "[EMAIL_ADDRESS_1]", "cc": "[EMAIL_ADDRESS_12]"})
    body = json.dumps({"choices": [{"message": {"content": "to [EMAIL_ADDRESS_1]", "tool_calls": [
        {"function": {"name": "mail", "arguments": args}}]}}]}).encode()
    got = json.loads(RESTORER.whole(body))["choices"][0]["message"]
    assert got["content"] == f"to {QUOTED}"
    assert json.loads(got["tool_calls"][0]["function"]["arguments"]) == {"to": QUOTED, "cc": "twelve@example.com"}


def sse_events(raw: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")]


def test_a_messages_stream_holds_a_split_placeholder_until_it_completes_and_flushes_a_dangling_one():
    def ev(name, doc):
        return f"event: {name}\ndata: {json.dumps(doc)}\n\n".encode()

    def delta(kind, key, text):
        return ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": kind, key: text}})

    s = StreamRestorer(RESTORER, "anthropic")
    raw = b"".join([delta("text_delta", "text", "hi [EMAIL_"), delta("text_delta", "text", "ADDRESS_1"),
                    delta("text_delta", "text", "2] and [EMAIL_ADDRESS_1] ["),
                    ev("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    delta("input_json_delta", "partial_json", '{"to": "[EMAIL_ADDRESS_'),
                    delta("input_json_delta", "partial_json", '1]"}')])
    # Fed in uneven byte pieces: an event split across reads is read whole.
    out = b"".join(s.feed(raw[i:i + 7]) for i in range(0, len(raw), 7)) + s.close()
    events = sse_events(out)
    texts = [e["delta"]["text"] for e in events if e.get("delta", {}).get("type") == "text_delta"]
    assert "".join(texts) == f"hi twelve@example.com and {QUOTED} ["
    assert events[[e["type"] for e in events].index("content_block_stop") - 1]["delta"]["text"] == "["
    args = "".join(e["delta"]["partial_json"] for e in events if e.get("delta", {}).get("type") == "input_json_delta")
    assert json.loads(args) == {"to": QUOTED}


@pytest.mark.parametrize("text, values, want", [
    # A value of letters alone is a word: never inside another ("Ann" in "Annual", "Mi" in "Miami").
    ("Hi, I'm Ann. Any announcement? I'm on the Annual plan", {"Ann": "[PERSON_1]"},
     "Hi, I'm [PERSON_1]. Any announcement? I'm on the Annual plan"),
    ("Mi pedido no llegó a Miami", {"Mi": "[PERSON_1]"}, "[PERSON_1] pedido no llegó a Miami"),
    ("Jürgen Müller, Jürgen Müllers", {"Jürgen Müller": "[PERSON_1]"}, "[PERSON_1], Jürgen Müllers"),
    # Scripts written without spaces (CJK, kana, Hangul, Thai) are word boundaries, as the pii rule reads them.
    ("山田さんに連絡して。山田太郎です", {"山田": "[PERSON_1]"}, "[PERSON_1]さんに連絡して。[PERSON_1]太郎です"),
    ("Please call Tanakaさん", {"Tanaka": "[PERSON_1]"}, "Please call [PERSON_1]さん"),
    # A value with a digit or an "@" is the same datum glued to text or in a URL: every copy.
    ("mailto:ann@example.com?cc=xann@example.comy", {"ann@example.com": "[EMAIL_ADDRESS_1]"},
     "mailto:[EMAIL_ADDRESS_1]?cc=x[EMAIL_ADDRESS_1]y"),
    ("card4111111111111111.", {"4111111111111111": "[CREDIT_CARD_1]"}, "card[CREDIT_CARD_1]."),
    # One pass, the longest first: a placeholder is never read again as text.
    ("Ann Lee and Ann", {"Ann": "[PERSON_2]", "Ann Lee": "[PERSON_1]"}, "[PERSON_1] and [PERSON_2]"),
])
def test_a_value_is_replaced_where_it_stands_as_itself(text, values, want):
    body = {"messages": [{"role": "user", "content": text}]}
    masking.replace(body, "openai", values)
    assert body["messages"][0]["content"] == want


def test_a_chat_messages_name_is_read_as_the_words_it_spells_and_takes_a_placeholder_a_name_may_have():
    body = {"messages": [{"role": "user", "name": "maria_gonzalez", "content": "hello"},
                         {"role": "user", "name": "bot-7", "content": "x"},
                         {"role": "function", "name": "maria_gonzalez", "content": "y"}],
            "tools": [{"type": "function", "function": {"name": "maria_gonzalez"}}]}
    assert masking.texts(body, "openai") == ["hello", "x", "y", "Maria Gonzalez", "bot-7"]
    assert masking.replace(body, "openai", {"Maria Gonzalez": "<person_1>"}) == 1
    assert body["messages"][0]["name"] == "_person_1_"          # OpenAI refuses "<" and ">" in a name
    # A function's name, in a tool or a "function" message, is no text.
    assert body["tools"][0]["function"]["name"] == body["messages"][2]["name"] == "maria_gonzalez"


TEXTUAL = Restorer({f"EMAIL_{i}": f"customer{i}@example.com" for i in range(1, 13)})


def test_a_text_placeholder_is_restored_only_as_a_token_of_its_own():
    assert TEXTUAL.text("EMAIL_100, EMAIL_10, EMAIL_1x, XEMAIL_1, EMAIL_12.") == \
        "EMAIL_100, customer10@example.com, EMAIL_1x, XEMAIL_1, customer12@example.com."
    assert TEXTUAL.text('"a\\nEMAIL_2"', escaped=True) == '"a\\ncustomer2@example.com"'    # a JSON line's start


def test_a_streamed_text_placeholder_waits_for_the_character_after_it():
    def chunk(text: str) -> bytes:
        return f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': text}}]})}\n\n".encode()

    s = StreamRestorer(TEXTUAL, "openai")
    pieces = ["to EMAIL_1", "0 and EMAIL_1", "00 and EMAIL_", "1", "2, X", "EMAIL_3 and EMAIL_1"]
    out = b"".join(s.feed(chunk(p)) for p in pieces) + s.feed(b"data: [DONE]\n\n") + s.close()
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in sse_events(out))
    assert text == ("to customer10@example.com and EMAIL_100 and customer12@example.com, XEMAIL_3 and "
                    "customer1@example.com")


def test_any_placeholder_of_a_policy_is_found_whatever_its_number():
    named = masking.Masking("p", frozenset({"EMAIL_ADDRESS", "PHONE_NUMBER"}), {"PHONE_NUMBER": "<phone>"}).named()
    assert named.findall("[EMAIL_ADDRESS_2] <phone_13> [PERSON_1] <phone> x[EMAIL_ADDRESS_]") == \
        ["[EMAIL_ADDRESS_2]", "<phone_13>"]
    textual = masking.Masking("p", frozenset({"EMAIL_ADDRESS"}), {"EMAIL_ADDRESS": "EMAIL"}).named()
    assert textual.findall("EMAIL_3, EMAIL_3x, XEMAIL_4") == ["EMAIL_3"]
    assert masking.Masking("p").named().findall("[PERSON_1] [IBAN_CODE_2] [x_1]") == ["[PERSON_1]", "[IBAN_CODE_2]"]
