"""masking's placeholders, numbered per value and restored in the answer, end to end.

A real router and the mock upstream as processes, the official SDKs as clients. The mock echoes the last user
turn as it received it (masked), streamed in pieces so small that every placeholder is split across deltas;
a tool call carries that turn as its JSON arguments. Two addresses must reach the provider as two placeholders,
and the client must read its own text back, whole and streamed, on Chat, Messages and Responses, from a backend
of every format; with ``unmask: false`` it reads the placeholders. The replay record keeps the masked answer,
and a cached answer is stored masked and restored for the request it serves.
"""
from __future__ import annotations

import json
import re

import anthropic
import httpx
import openai
import pytest

from .procs import config, mock_upstream, model, replay_record, router, wait_for_value, write_config
from .test_e2e_masking import sent

A, B = "alice.liddell@example.com", "bob.stone@example.org"
PHONE = "+1 650-253-0000"
FORMATS = ("openai", "anthropic", "responses")
APIS = ("chat", "messages", "responses")
MASKING = {"type": "masking", "configuration": {"enabled": True, "signal": "personal",
                                                "entity_types": ["EMAIL_ADDRESS", "PHONE_NUMBER"],
                                                "placeholders": {"PHONE_NUMBER": "<phone>"}}}
KEEP = {"type": "masking", "configuration": {**MASKING["configuration"], "unmask": False}}
CACHE = {"type": "response_cache", "configuration": {"ttl_seconds": 300}}
TOOLS = {"chat": [{"type": "function", "function": {"name": "send_mail", "parameters": {"type": "object"}}}],
         "messages": [{"name": "send_mail", "input_schema": {"type": "object"}}],
         "responses": [{"type": "function", "name": "send_mail", "parameters": {"type": "object"}}]}


@pytest.fixture(scope="module")
def echoing(tmp_path_factory):
    with mock_upstream("--echo", "--chunks", "60") as upstream:
        models = [{**model(f"m-{fmt}", f"{upstream.url}/v1"), "api_format": fmt} for fmt in FORMATS]

        def decision(name: str, signal: str, fmt: str, plugins: list, priority: int = 10) -> dict:
            return {"name": name, "priority": priority, "plugins": plugins, "modelRefs": [{"model": f"m-{fmt}"}],
                    "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": signal}]}}

        decisions = [decision(f"to-{fmt}", fmt, fmt, [MASKING]) for fmt in FORMATS]
        decisions += [decision(f"keep-{fmt}", f"keep-{fmt}", fmt, [KEEP], 20) for fmt in FORMATS]
        decisions += [decision(f"cache-{fmt}", f"cache-{fmt}", fmt, [MASKING, CACHE], 20) for fmt in FORMATS]
        # An operator who keeps the bodies of masked requests: the answer's is kept as the model wrote it.
        keep_bodies = {"type": "router_replay", "configuration": {"capture_personal_data": True}}
        decisions.append(decision("record", "record", "openai", [MASKING, keep_bodies], 20))
        keywords = [{"name": "record", "operator": "OR", "keywords": ["record this"]}]
        keywords += [{"name": fmt, "operator": "OR", "keywords": [f"via {fmt}"]} for fmt in FORMATS]
        keywords += [{"name": f"keep-{fmt}", "operator": "OR", "keywords": [f"keep {fmt}"]} for fmt in FORMATS]
        keywords += [{"name": f"cache-{fmt}", "operator": "OR", "keywords": [f"cache {fmt}"]} for fmt in FORMATS]
        doc = config(models, decisions, signals={"pii": [{"name": "personal"}], "keywords": keywords})
        doc["global"] = {"plugins": [{"type": "router_replay", "configuration": {
            "enabled": True, "capture_request_body": True, "capture_response_body": True,
            "max_body_bytes": 65536}}],
            # The embedded pii model's deadline, generous: the big request's 82 texts take the default 1 s's
            # worth of its two threads on a starved CI box, and a late read fails the request closed (503,
            # test_e2e_masking's), which is no outcome these tests are about.
            "model_catalog": {"deployments": {"primary": {"provider": "model_runtime", "timeout_ms": 30000}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("unmask")))) as proc:
            yield proc, upstream


def every_way(test):
    """``test`` for each client API, each backend format, whole and streamed."""
    for mark in (pytest.mark.parametrize("api", APIS), pytest.mark.parametrize("fmt", FORMATS),
                 pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])):
        test = mark(test)
    return test


def upstream_deltas(upstream) -> list[str]:
    """The text or argument deltas of the last stream the mock sent, in any format."""
    out = []
    for line in httpx.get(f"{upstream.url}/_mock/last_stream").text.splitlines():
        if not line.startswith("data: {"):
            continue
        ev = json.loads(line[6:])
        for c in ev.get("choices") or ():
            d = c.get("delta") or {}
            out += [d["content"]] if d.get("content") else []
            out += [t["function"]["arguments"] for t in d.get("tool_calls") or () if t["function"].get("arguments")]
        d = ev.get("delta")
        if isinstance(d, dict):
            out += [d[k] for k in ("text", "partial_json") if d.get(k)]
        elif isinstance(d, str) and d:
            out.append(d)
    return out


class Answer:
    def __init__(self, text: str | None, args: str | dict | None, headers) -> None:
        self.text, self.args, self.headers = text, args, headers


def ask(proc, api: str, system: str, text: str, stream: bool, tools: bool = False) -> Answer:
    """One request through the client API's official SDK: the text or tool arguments its client read."""
    if api == "chat":
        client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
        extra = {"tools": TOOLS["chat"]} if tools else {}
        raw = client.chat.completions.with_raw_response.create(
            model="vsr/auto", messages=[{"role": "system", "content": system}, {"role": "user", "content": text}],
            stream=stream, **extra)
        if not stream:
            msg = raw.parse().choices[0].message
            return Answer(msg.content, msg.tool_calls[0].function.arguments if msg.tool_calls else None, raw.headers)
        chunks = [c for c in raw.parse() if c.choices]
        content = "".join(c.choices[0].delta.content or "" for c in chunks)
        args = "".join(t.function.arguments or "" for c in chunks for t in c.choices[0].delta.tool_calls or ())
        return Answer(content, args or None, raw.headers)
    if api == "messages":
        client = anthropic.Anthropic(base_url=proc.url, api_key="k", max_retries=0)
        extra = {"tools": TOOLS["messages"]} if tools else {}
        kwargs = dict(model="vsr/auto", max_tokens=256, system=system, messages=[{"role": "user", "content": text}],
                      **extra)
        if not stream:
            raw = client.messages.with_raw_response.create(**kwargs)
            msg, headers = raw.parse(), raw.headers
        else:
            with client.messages.stream(**kwargs) as s:
                deltas = "".join(s.text_stream)
                msg, headers = s.get_final_message(), s.response.headers
            assert deltas == "".join(b.text for b in msg.content if b.type == "text")
        block = msg.content[0]
        return Answer(block.text if block.type == "text" else None,
                      block.input if block.type == "tool_use" else None, headers)
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0)
    extra = {"tools": TOOLS["responses"]} if tools else {}
    raw = client.responses.with_raw_response.create(model="vsr/auto", instructions=system, input=text, stream=stream,
                                                    **extra)
    if stream:
        events = list(raw.parse())
        final = next(e.response for e in events if e.type == "response.completed")
        deltas = "".join(e.delta for e in events if e.type in ("response.output_text.delta",
                                                                "response.function_call_arguments.delta"))
        done = [e.text for e in events if e.type == "response.output_text.done"]
        done += [e.arguments for e in events if e.type == "response.function_call_arguments.done"]
        assert done == [deltas]          # what the deltas add up to is what the done event says
    else:
        final = raw.parse()
    item = final.output[0]
    return Answer(final.output_text if item.type == "message" else None,
                  item.arguments if item.type == "function_call" else None, raw.headers)


@every_way
def test_two_addresses_are_two_placeholders_upstream_and_the_client_reads_both_back(echoing, api, fmt, stream):
    proc, upstream = echoing
    system = f"The customer is {B}."
    text = f"Write to {A} and {B}, call {PHONE}; cc {A} via {fmt}."
    got = ask(proc, api, system, text, stream)
    body = sent(upstream)
    for value in (A, B, PHONE):
        assert value not in body, f"{value!r} reached the provider: {body}"
    # One placeholder per value, the same in every position, numbered as they first appear (the system first).
    assert "The customer is [EMAIL_ADDRESS_1]." in body
    assert "Write to [EMAIL_ADDRESS_2] and [EMAIL_ADDRESS_1], call <phone_1>; cc [EMAIL_ADDRESS_2] via" in body
    if stream:
        deltas = upstream_deltas(upstream)
        assert "[EMAIL_ADDRESS_2]" in "".join(deltas) and not any("[EMAIL_ADDRESS_2]" in d for d in deltas)
    assert got.text == text


@every_way
def test_tool_call_arguments_come_back_with_the_values_as_valid_json(echoing, api, fmt, stream):
    proc, upstream = echoing
    text = f'Use the tool: mail "{A}" and {B} via {fmt}.'
    got = ask(proc, api, "You send mail.", text, stream, tools=True)
    assert '[EMAIL_ADDRESS_1]' in sent(upstream) and A not in sent(upstream)
    args = got.args if isinstance(got.args, dict) else json.loads(got.args)
    assert args == {"text": text}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", APIS)
def test_unmask_false_leaves_the_placeholders_in_the_answer(echoing, api, stream):
    proc, upstream = echoing
    fmt = {"chat": "anthropic", "messages": "responses", "responses": "openai"}[api]
    got = ask(proc, api, "Be brief.", f"Write to {A} and {B}, keep {fmt}.", stream)
    assert got.text == f"Write to [EMAIL_ADDRESS_1] and [EMAIL_ADDRESS_2], keep {fmt}."


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_replay_record_keeps_the_masked_answer(echoing, stream):
    proc, _ = echoing
    text = f"Write to {A} and {B}, record this."
    got = ask(proc, "chat", "Be brief.", text, stream)
    assert got.text == text
    record = wait_for_value(lambda: (lambda r: r if r.get("response_body") else None)(
        replay_record(proc, got.headers["x-vsr-replay-id"])), "the record's answer")
    assert kept_text(record, stream) == "Write to [EMAIL_ADDRESS_1] and [EMAIL_ADDRESS_2], record this."


def kept_text(record: dict, stream: bool) -> str:
    """The text of the Chat answer a replay record kept."""
    kept = record["response_body"]
    if stream:
        return "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                       for line in kept.splitlines() if line.startswith("data: {"))
    return json.loads(kept)["choices"][0]["message"]["content"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_masking_decision_keeps_no_request_copy_but_the_masked_answer_by_default(echoing, stream):
    """Trial 28: capture_personal_data left unset on a masking decision withheld the request as received (the
    client's values) and the answer too (response_body: null). The answer as the model wrote it holds only the
    placeholders the provider was sent: capture_response_body keeps it."""
    proc, _ = echoing
    text = f"Write to {A} and {B}, via openai."
    got = ask(proc, "chat", "Be brief.", text, stream)
    assert got.text == text
    record = replay_record(proc, got.headers["x-vsr-replay-id"], answered=True)
    assert record["request_body"] is None and record["response_body"], record
    assert A not in record["response_body"] and B not in record["response_body"], record
    assert kept_text(record, stream) == "Write to [EMAIL_ADDRESS_1] and [EMAIL_ADDRESS_2], via openai."


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", APIS)
def test_a_cached_answer_is_served_with_the_requests_own_values(echoing, api, stream):
    proc, _ = echoing
    fmt = {"chat": "responses", "messages": "openai", "responses": "anthropic"}[api]
    text = f"Write to {A} and {B} ({api} {stream}), cache {fmt}."
    first = ask(proc, api, "Be brief.", text, stream)
    assert first.headers["x-vsr-response-path"] == "upstream" and first.text == text
    again = wait_for_value(lambda: (lambda a: a if a.headers["x-vsr-response-path"] == "cache" else None)(
        ask(proc, api, "Be brief.", text, stream)), f"a cache hit for the {api} request")
    assert again.text == text


def unmask_steps(proc) -> float:
    for line in httpx.get(f"{proc.url}/metrics").text.splitlines():
        if line.startswith('vsr_off_loop_steps_total{step="unmask"}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def big_ask(proc, parts: list[str], stream: bool) -> tuple[str, str]:
    """One Chat request whose user turn is ``parts`` (each a text masking reads on its own): the text its client
    read, and the response path."""
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0, timeout=120)
    raw = client.chat.completions.with_raw_response.create(
        model="vsr/auto", stream=stream, messages=[{"role": "system", "content": "Be brief."}, {
            "role": "user", "content": [{"type": "text", "text": p} for p in parts]}])
    if stream:
        text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    else:
        text = raw.parse().choices[0].message.content
    return text, raw.headers["x-vsr-response-path"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_big_cached_answer_is_read_and_restored_off_the_loop(echoing, stream):
    """A private request's hit (its decision masks) read the stored answer's texts and put its values back on the
    event loop, a JSON decode of the whole answer each, however big: past the big-body threshold (256 KiB) both
    run in a worker thread, as a big request's steps do, and the client reads the same answer."""
    proc, _ = echoing
    parts = [f"Write to {A} and {B} ({stream}), cache openai. "]
    parts += [" ".join(f"w{i}-{j}" for j in range(500)) + " " for i in range(80)]     # ~330 KB echoed back
    text = "".join(parts)
    assert big_ask(proc, parts, stream) == (text, "upstream")
    before = unmask_steps(proc)
    again = wait_for_value(lambda: (lambda a: a if a[1] == "cache" else None)(big_ask(proc, parts, stream)),
                           "a cache hit for the big request")
    assert again[0] == text
    # Its placeholders' check (``defines``) and their restoring, each once a hit.
    assert unmask_steps(proc) - before >= 2


@pytest.fixture(scope="module")
def held(tmp_path_factory):
    """Masking beside a response guard that holds the stream until it has read it all (a block rule)."""
    from bench.fake_systemone import process as fake_process

    with fake_process() as fake, mock_upstream("--echo", "--chunks", "60") as upstream:
        httpx.post(f"{fake.url}/_fake/rules", json={"rules": [
            {"question": "preset:jailbreak", "answer": {"choice": {"jailbreak": 0.01, "benign": 0.99}}}]}
                   ).raise_for_status()
        models = [{**model(f"m-{fmt}", f"{upstream.url}/v1"), "api_format": fmt} for fmt in FORMATS]
        guard = {"type": "response_guard", "configuration": {"rules": [
            {"when": {"type": "jailbreak", "name": "unsafe_completion"}, "action": "block"}]}}
        decisions = [{"name": f"to-{fmt}", "priority": 10, "plugins": [MASKING, guard],
                      "modelRefs": [{"model": f"m-{fmt}"}],
                      "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": fmt}]}}
                     for fmt in FORMATS]
        signals = {"pii": [{"name": "personal"}],
                   "jailbreak": [{"name": "unsafe_completion", "stage": "response", "deployment": "s1",
                                  "predicate": {"gte": 0.9}}],
                   "keywords": [{"name": fmt, "operator": "OR", "keywords": [f"via {fmt}"]} for fmt in FORMATS]}
        doc = config(models, decisions, signals=signals)
        doc["global"] = {"model_catalog": {"deployments": {"s1": {
            "provider": "systemone", "endpoint": f"{fake.url}/v1/systemone", "model": "fake",
            "capabilities": {"question_types": ["choice", "noul", "span"]}}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("held")))) as proc:
            yield proc


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("api", APIS)
def test_a_stream_held_for_the_guard_is_released_with_the_values_back(held, api, fmt):
    text = f"Write to {A} and {B} via {fmt}."
    got = ask(held, api, "Be brief.", text, stream=True)
    assert "content-length" in got.headers       # held: it left whole, once the guard had read it
    assert got.text == text


@pytest.fixture(scope="module")
def remembering(tmp_path_factory):
    """(router, its echoing upstream): masking beside a memory each user has of their own (trusted identity
    headers), so each test below remembers as a user of its own."""
    context = {"type": "context", "configuration": {"sources": [
        {"type": "memory", "store": {"auto": True},
         "match": {"recall": {"method": "embedding", "top_k": 3, "min_similarity": 0}}}]}}
    with mock_upstream("--echo") as upstream:
        doc = config([model("m", f"{upstream.url}/v1")],
                     [{"name": "d", "modelRefs": [{"model": "m"}], "plugins": [MASKING, context]}],
                     signals={"pii": [{"name": "personal"}]})
        doc["listeners"] = [{"name": "main", "identity": {"trust_headers": True}}]
        with router(write_config(doc, str(tmp_path_factory.mktemp("remembering")))) as proc:
            yield proc, upstream


def memory_writes(proc) -> int:
    found = re.search(r'^vsr_context_memory_writes_total\{outcome="ok"\} (\S+)$', httpx.get(f"{proc.url}/metrics").text,
                      re.M)
    return int(float(found.group(1))) if found else 0


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_memory_keeps_the_answer_as_the_client_read_it_so_a_later_request_numbers_it_with_the_rest(
        remembering, stream):
    """Placeholders are numbered per request: a memory that kept the answer masked would carry the first request's
    numbers into a later one that numbers the same values otherwise. Here the second request's own address comes
    first (the memory goes after it, as a tool exchange), so A is [EMAIL_ADDRESS_2] there: the memory must name A
    with that number in both of its halves, and the client, reading the echoed memory restored, must read A, not B."""
    proc, upstream = remembering
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0,
                           default_headers={"x-authz-user-id": f"carl-{'streamed' if stream else 'whole'}"})

    def say(text: str, tools: list | None = None) -> str:
        extra = {"tools": tools} if tools else {}
        messages = [{"role": "user", "content": text}]
        if not stream:
            return client.chat.completions.create(model="vsr/auto", messages=messages,
                                                  **extra).choices[0].message.content
        return "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model="vsr/auto", messages=messages, stream=True, **extra) if c.choices)

    before = memory_writes(proc)
    assert say(f"Please write to {A}.") == f"Please write to {A}."
    wait_for_value(lambda: memory_writes(proc) == before + 1, "the memory write")
    answer = say(f"Now write to {B}.", TOOLS["chat"])
    provider = sent(upstream)
    assert A not in provider and B not in provider, provider
    assert ("User: Please write to [EMAIL_ADDRESS_2].\\nAssistant: Please write to [EMAIL_ADDRESS_2]."
            in provider), provider
    assert f"User: Please write to {A}.\nAssistant: Please write to {A}." in answer, answer


def test_a_cached_answer_whose_request_masking_cannot_read_is_never_served_masked(tmp_path):
    """A hit puts this request's values back in the stored (masked) answer, numbered by reading the request
    again; when that read fails (the pii rule's model late or down), the client must not read the placeholders:
    the hit is a miss, and the request goes on as one, read again before it is sent (503 if that fails too).
    The decision model is delegated, so no answer of the first request's read is reused for the hit's."""
    from bench.fake_systemone import process as fake_process

    cred = "cred-carl-" + "c" * 24
    spans = {"question": "preset:pii", "request_contains": A, "answer": {"span": [["EMAIL_ADDRESS", 9, 9 + len(A)]]}}
    with fake_process() as fake, mock_upstream("--echo") as upstream:
        doc = config([model("m", f"{upstream.url}/v1")],
                     [{"name": "d", "modelRefs": [{"model": "m"}], "plugins": [MASKING, CACHE]}],
                     signals={"pii": [{"name": "personal"}]})
        doc["global"] = {"model_catalog": {
            "deployments": {"s1": {"provider": "systemone", "endpoint": f"{fake.url}/v1/systemone", "model": "fake",
                                   "timeout_ms": 5000, "auth": {"credential": "delegated"},
                                   "capabilities": {"question_types": ["span", "choice", "noul"]}}},
            "system": {"decision_model": {"deployment": "s1"}}},
            "services": {"authz": {"delegated_credential": {"enabled": True}}}}
        with router(write_config(doc, str(tmp_path))) as proc:
            client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", max_retries=0,
                                   default_headers={"x-vsr-delegated-credential": cred})
            text = f"Write to {A} soon."

            def say() -> tuple[str, str]:
                raw = client.chat.completions.with_raw_response.create(
                    model="vsr/auto", messages=[{"role": "user", "content": text}])
                return raw.parse().choices[0].message.content, raw.headers["x-vsr-response-path"]

            def rules(*extra: dict) -> None:
                httpx.post(f"{fake.url}/_fake/rules", json={"rules": [*extra, spans]}).raise_for_status()

            rules()
            assert say() == (text, "upstream")
            assert "[EMAIL_ADDRESS_1]" in sent(upstream)
            assert wait_for_value(lambda: (lambda a: a if a[1] == "cache" else None)(say()), "a hit") == (text, "cache")
            # The hit's read fails once: the request is read again as a miss, and the client reads its own text.
            rules({"question": "preset:pii", "fail": {"kind": "status", "status": 503}, "times": 1})
            assert say() == (text, "upstream")
            # Every read fails: 503, never the stored answer's placeholders.
            rules({"question": "preset:pii", "fail": {"kind": "status", "status": 503}})
            with pytest.raises(openai.InternalServerError) as caught:
                say()
            assert caught.value.status_code == 503 and "masking" in caught.value.response.text
            assert "[EMAIL_ADDRESS_1]" not in caught.value.response.text
