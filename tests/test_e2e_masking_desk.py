"""masking as a support desk runs it, end to end: the embedded model's pii rule (names, addresses, cards,
SSNs, IBANs; dates, places and firms ignored), masking on the decision, the response cache in Redis,
router_replay without personal data.

A real router and the mock upstream as processes, the official SDKs as clients. Every body that leaves for
a provider is masked, count_tokens's too; a stored copy (the cache entry, the answer's event) keeps the
placeholders the model read, never the client's values; a value is masked as a whole word, not inside
another; a cached answer naming a placeholder the new request lacks is a miss; a text-style placeholder is
restored only as a token of its own, whole and streamed; a Chat message's ``name`` is masked too.
"""
from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest
import redis

from vsr_fast.events.types import AnswerCompleted, decode_event

from .procs import REDIS_URL, config, mock_upstream, model, redis_prefix, router, wait_for_value, write_config
from .test_e2e_masking import sent

FORMATS = ("openai", "anthropic", "responses")
TYPES = ["EMAIL_ADDRESS", "PHONE_NUMBER", "CREDIT_CARD", "PERSON", "STREET_ADDRESS", "US_SSN", "IBAN_CODE"]
MASK = {"type": "masking", "configuration": {"signal": "customer", "entity_types": TYPES}}
# Twelve addresses under a text placeholder: EMAIL_1 ... EMAIL_12.
TEXTUAL = {"type": "masking", "configuration": {"signal": "customer", "entity_types": ["EMAIL_ADDRESS"],
                                                "placeholders": {"EMAIL_ADDRESS": "EMAIL"}}}
CACHE = {"type": "response_cache", "configuration": {"ttl_seconds": 300}}
SIMILAR = {"type": "response_cache", "configuration": {"ttl_seconds": 300, "mode": "semantic"}}
NO_PERSONAL_DATA = {"type": "router_replay", "configuration": {"capture_personal_data": False}}

SYSTEM = "Customer: Maria Gonzalez, card 4111 1111 1111 1111"
TURN = "I'm Maria Gonzalez, maria.gonzalez@example.com, (415) 555-0132"
CLEAR = ("Maria Gonzalez", "4111 1111 1111 1111", "maria.gonzalez@example.com", "(415) 555-0132")
INSTRUCTIONS = "Customer: Jürgen Müller, juergen.mueller@example.de, SSN 536-22-8719"


@pytest.fixture(scope="module")
def desk(tmp_path_factory):
    with redis_prefix("desk") as prefix, mock_upstream("--echo", "--chunks", "60", "--count-tokens") as upstream:
        models = [{**model(f"m-{fmt}", f"{upstream.url}/v1"), "api_format": fmt} for fmt in FORMATS]

        def decision(name: str, fmt: str, plugins: list, priority: int = 10) -> dict:
            return {"name": name, "priority": priority, "plugins": [*plugins, NO_PERSONAL_DATA],
                    "modelRefs": [{"model": f"m-{fmt}"}],
                    "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": name}]}}

        decisions = [decision(f"via-{fmt}", fmt, [MASK, CACHE]) for fmt in FORMATS]
        decisions += [decision("similar", "openai", [MASK, SIMILAR], 20), decision("textual", "openai", [TEXTUAL], 20)]
        keywords = [{"name": d["name"], "operator": "OR", "keywords": [d["name"].replace("-", " ")]}
                    for d in decisions]
        signals = {"pii": [{"name": "customer", "ignore_labels": ["DATE_TIME", "LOCATION", "ORGANIZATION"]}],
                   "keywords": keywords}
        doc = config(models, decisions, signals=signals)
        doc["global"] = {
            "plugins": [{"type": "router_replay", "configuration": {
                "enabled": True, "capture_request_body": True, "capture_response_body": True}}],
            "stores": {"event_stream": {"backend": "redis", "stream": f"{prefix}events"},
                       "response_cache": {"backend_type": "redis", "prefix": prefix}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("desk")))) as proc:
            yield proc, upstream, prefix


def counted(upstream) -> dict:
    return httpx.get(f"{upstream.url}/_mock/stats").json()["last_count"]


# --- 1. count_tokens -----------------------------------------------------------------------------------


def test_count_tokens_sends_the_body_masked_as_messages_would(desk):
    proc, upstream, _ = desk
    client = anthropic.Anthropic(base_url=proc.url, api_key="k", max_retries=0)
    messages = [{"role": "user", "content": f"{TURN} via anthropic"}]
    raw = client.messages.with_raw_response.count_tokens(model="vsr/auto", system=SYSTEM, messages=messages)
    assert "x-vsr-token-count" not in raw.headers, "the backend counted, not the estimate"
    assert raw.parse().input_tokens > 0
    body = counted(upstream)
    text = json.dumps(body, ensure_ascii=False)
    for value in CLEAR:
        assert value not in text, f"{value!r} reached the provider: {text}"
    assert body["system"] == "Customer: [PERSON_1], card [CREDIT_CARD_1]"
    # The very body /v1/messages sends: the count is of what the model would read.
    client.messages.create(model="vsr/auto", max_tokens=64, system=SYSTEM, messages=messages)
    generated = json.loads(sent(upstream))
    assert (generated["system"], generated["messages"]) == (body["system"], body["messages"])


# --- 2. stored copies keep the placeholders ----------------------------------------------------------------


def stored_copies(r: redis.Redis, prefix: str, replay_id: str) -> tuple[list[bytes], bytes]:
    """The response cache's entries under ``prefix``, and the body of the request's answer_completed event."""
    entries = [r.get(k) for k in r.scan_iter(f"{prefix}*") if r.type(k) == b"string"]

    def answered() -> bytes | None:
        for _, fields in r.xrange(f"{prefix}events"):
            for value in fields.values():
                try:
                    ev = decode_event(value)
                except Exception:
                    continue
                if isinstance(ev, AnswerCompleted) and ev.replay_id == replay_id:
                    return ev.body or b"-"      # a masking decision's event may keep no body at all
        return None
    return entries, wait_for_value(answered, "the answer's event")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_responses_answer_is_stored_with_the_placeholders_the_model_read(desk, fmt, stream):
    """A Responses answer translated from another API's repeats the request's instructions: written by the router,
    which must write them as the provider read them, and restore them for the client alone."""
    proc, upstream, prefix = desk
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
    text = f"Where is my parcel ({stream})? via {fmt}"
    raw = client.responses.with_raw_response.create(model="vsr/auto", instructions=INSTRUCTIONS, input=text,
                                                    stream=stream)
    final = next(e.response for e in raw.parse() if e.type == "response.completed") if stream else raw.parse()
    assert final.instructions == INSTRUCTIONS, "the client reads its own instructions back"
    assert final.output_text == text
    provider = sent(upstream)
    assert "juergen.mueller@example.de" not in provider and "536-22-8719" not in provider
    r = redis.Redis.from_url(REDIS_URL)
    entries = wait_for_value(lambda: (lambda e: e or None)(
        [e for e in stored_copies(r, prefix, raw.headers["x-vsr-replay-id"])[0] if text.encode() in e]),
        "the cache entry")
    _, event_body = stored_copies(r, prefix, raw.headers["x-vsr-replay-id"])
    for copy in [*entries, event_body]:
        decoded = copy.decode("utf-8", "replace")
        for value in ("juergen.mueller@example.de", "536-22-8719", "Jürgen", "J\\u00fcrgen"):
            assert value not in decoded, f"{value!r} stored: {decoded[:400]}"
    for copy in entries:        # the cache keeps what the model read
        decoded = copy.decode("utf-8", "replace")
        assert "[US_SSN_1]" in decoded and "[EMAIL_ADDRESS_1]" in decoded
    again = client.responses.create(model="vsr/auto", instructions=INSTRUCTIONS, input=text)
    assert again.instructions == INSTRUCTIONS and again.output_text == text


# --- 3. whole words only ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_name_is_masked_as_a_word_never_inside_another(desk, stream):
    proc, upstream, _ = desk
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
    english = "Hi, I'm Ann. Any announcement? I'm on the Annual plan, via openai"
    spanish = "Mi pedido 4411 no ha llegado a Miami. Eres un agente de soporte."
    messages = [{"role": "system", "content": spanish}, {"role": "user", "content": english}]
    got = client.chat.completions.create(model="vsr/auto", messages=messages, stream=stream)
    text = "".join(c.choices[0].delta.content or "" for c in got if c.choices) if stream \
        else got.choices[0].message.content
    assert text == english
    body = json.loads(sent(upstream))
    assert body["messages"][1]["content"] == "Hi, I'm [PERSON_1]. Any announcement? I'm on the Annual plan, via openai"
    assert body["messages"][0]["content"] == spanish, "no name in it: nothing masked"


# --- 4. a cached answer naming a value the request lacks ------------------------------------------------


def test_a_similar_answer_naming_a_placeholder_the_request_lacks_is_a_miss(desk):
    proc, upstream, _ = desk
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)

    def ask(text: str):
        raw = client.chat.completions.with_raw_response.create(
            model="vsr/auto", messages=[{"role": "user", "content": text}])
        return raw.headers["x-vsr-response-path"], raw.parse().choices[0].message.content

    two = "Please forward the refund receipt to ana.perez@example.com and luis.ortiz@example.org today, similar"
    assert ask(two) == ("upstream", two)
    # The same request with two other addresses is served from the cache with its own values...
    other_two = "Please forward the refund receipt to eva.ruiz@example.com and tom.diaz@example.org today, similar"
    assert wait_for_value(lambda: (lambda a: a if a[0] == "cache" else None)(ask(other_two)), "a similar hit") \
        == ("cache", other_two)
    # ...one with a single address would read [EMAIL_ADDRESS_2], which it does not define: a miss.
    one = "Please forward the refund receipt to eva.ruiz@example.com today, similar"
    assert ask(one) == ("upstream", one)


# --- 5. text placeholders restored as tokens of their own ------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_text_placeholder_is_restored_only_as_a_token_of_its_own(desk, stream):
    proc, upstream, _ = desk
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
    emails = ", ".join(f"customer{i}@example.com" for i in range(1, 13))
    text = f"Write to {emails}; see EMAIL_100 and EMAIL_1x; textual"
    got = client.chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": text}],
                                         stream=stream)
    answer = "".join(c.choices[0].delta.content or "" for c in got if c.choices) if stream \
        else got.choices[0].message.content
    provider = json.loads(sent(upstream))["messages"][0]["content"]
    assert provider.startswith("Write to EMAIL_1, EMAIL_2,") and "customer" not in provider
    assert answer == text


# --- 6. a Chat message's name -----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_chat_messages_name_is_masked(desk, stream):
    proc, upstream, _ = desk
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
    messages = [{"role": "user", "name": "maria_gonzalez", "content": f"{TURN} via openai"}]
    got = client.chat.completions.create(model="vsr/auto", messages=messages, stream=stream)
    text = "".join(c.choices[0].delta.content or "" for c in got if c.choices) if stream \
        else got.choices[0].message.content
    assert text == f"{TURN} via openai"
    body = json.loads(sent(upstream))
    assert body["messages"][0]["name"] == "[PERSON_1]", body["messages"][0]
    assert body["messages"][0]["content"].startswith("I'm [PERSON_1], [EMAIL_ADDRESS_1]")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_text_placeholder_against_text_written_without_spaces_is_restored(desk, stream):
    """Japanese writes no space between words: "EMAIL_1まで" is the placeholder and a particle, as the pii rule
    reads "yamada@example.jpまで" (an address, then a word)."""
    proc, upstream, _ = desk
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
    text = "メールはyamada@example.jpまでお願いします。textual"
    got = client.chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": text}],
                                         stream=stream)
    answer = "".join(c.choices[0].delta.content or "" for c in got if c.choices) if stream \
        else got.choices[0].message.content
    assert json.loads(sent(upstream))["messages"][0]["content"] == "メールはEMAIL_1までお願いします。textual"
    assert answer == text


# --- 7. what a support desk's trial found (fix97) ------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_slashed_side_by_side_numbers_and_internationalised_addresses_each_get_a_placeholder(desk, stream):
    """German numbers with a slash, two numbers with only a space or a comma between them, addresses whose local
    part starts with a letter beyond ASCII: each value its own placeholder, none of it reaching the provider, and
    the client's text restored."""
    proc, upstream, _ = desk
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
    text = ("Mobil 0151/2345678, Büro 030/12345678; or 0151 2345678 0170 9876543, or +49 151 2345678, "
            "+49 170 9876543. Mail élodie.martin@example.fr, Øyvind@example.no and jürgen@beispiel.de, via openai")
    got = client.chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": text}],
                                         stream=stream)
    answer = "".join(c.choices[0].delta.content or "" for c in got if c.choices) if stream \
        else got.choices[0].message.content
    assert answer == text
    provider = json.loads(sent(upstream))["messages"][0]["content"]
    assert provider == ("Mobil [PHONE_NUMBER_1], Büro [PHONE_NUMBER_2]; or [PHONE_NUMBER_3] [PHONE_NUMBER_4], or "
                        "[PHONE_NUMBER_5], [PHONE_NUMBER_6]. Mail [EMAIL_ADDRESS_1], [EMAIL_ADDRESS_2] and "
                        "[EMAIL_ADDRESS_3], via openai"), provider
