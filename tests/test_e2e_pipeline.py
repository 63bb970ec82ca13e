"""The request pipeline end to end, with real processes: one deadline per request, a client that leaves
during routing, and the request plugins' provider-bound requests as the mock upstream received them."""
from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from vsr_fast.plugins import fast_response

from .procs import config, mock_upstream, model, replay_record, router, wait_until, write_config
from .provider_rules import problems

BODIES = {
    "chat": ("/v1/chat/completions", {"model": "vsr/auto", "messages": [{"role": "user", "content": "hello"}]}),
    "messages": ("/v1/messages", {"model": "vsr/auto", "max_tokens": 64,
                                  "messages": [{"role": "user", "content": "hello"}]}),
    "responses": ("/v1/responses", {"model": "vsr/auto", "input": "hello"}),
}


def metric(proc, name: str, **labels) -> float:
    """The sum of ``name``'s series whose labels include ``labels``."""
    total = 0.0
    for line in httpx.get(f"{proc.url}/metrics").text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


# --- one deadline per request ----------------------------------------------------------------------


FORMATS = {"chat": "openai", "messages": "anthropic", "responses": "responses"}


@pytest.fixture(scope="module")
def trickle():
    """A backend whose stream sends an event every 1.2 s: its second event comes past the router's hold of the
    opening events (1 s, checked as each event arrives) and before the 1.5 s deadline, whatever the load. At 1 s the
    second event raced the hold's end; held on, the client got the dispatch stage's 504 instead of a cut stream."""
    with mock_upstream("--chunks", "60", "--chunk-interval-ms", "1200") as proc:
        yield proc


@pytest.fixture(scope="module")
def slow():
    """A backend whose stream is 4 chunks 1 s apart: it outlasts the router's deadline and its grace (2.5 s)."""
    with mock_upstream("--chunks", "4", "--chunk-interval-ms", "1000") as proc:
        yield proc


@pytest.fixture(scope="module")
def deadlines(silent, trickle, slow, tmp_path_factory):
    """One router, a request deadline of 1.5 s, an entrypoint per case: ``vsr/silent-<format>`` and
    ``vsr/trickle-<format>`` (a model of that API format on that backend), ``vsr/own`` (a decision's own 0.7 s on the
    silent backend) and ``vsr/later`` (a decision's own 8 s on the slow backend). The timeout counters are read as
    deltas, labelled by the client API and the stage."""
    models, recipes = [], {}
    for upstream, proc in (("silent", silent), ("trickle", trickle)):
        for fmt in FORMATS.values():
            name = f"{upstream}-{fmt}"
            models.append({**model(name, f"{proc.url}/v1"), "api_format": fmt})
            recipes[name] = [{"name": name, "rules": {"operator": "AND", "conditions": []},
                              "modelRefs": [{"model": name}]}]
    models += [model("own", f"{silent.url}/v1"), model("later", f"{slow.url}/v1")]
    recipes["own"] = [{"name": "only", "request_timeout_ms": 700, "rules": {"operator": "AND", "conditions": []},
                       "modelRefs": [{"model": "own"}]}]
    recipes["later"] = [{"name": "later", "request_timeout_ms": 8000, "rules": {"operator": "AND", "conditions": []},
                         "modelRefs": [{"model": "later"}]}]
    doc = {"version": "v0.5", "providers": {"models": models},
           "recipes": [{"name": name, "decisions": decisions} for name, decisions in recipes.items()],
           "entrypoints": [{"api": "chat", "model_names": [f"vsr/{name}"], "recipe": name, "default": i == 0}
                           for i, name in enumerate(recipes)],
           "global": {"router": {"limits": {"request_timeout_ms": 1500}}}}
    with router(write_config(doc, str(tmp_path_factory.mktemp("deadline")))) as proc:
        yield proc


@pytest.mark.parametrize("api", sorted(BODIES))
@pytest.mark.parametrize("stream", [False, True])
def test_a_silent_backend_gets_the_client_its_504_at_the_request_deadline(deadlines, api, stream):
    proc = deadlines
    path, body = BODIES[api]
    body = {**body, "model": f"vsr/silent-{FORMATS[api]}"}
    before = metric(proc, "vsr_request_timeouts_total", api=api, stage="dispatch")
    r = httpx.post(f"{proc.url}{path}", json={**body, "stream": stream}, timeout=30)
    assert r.status_code == 504, r.text
    text = r.text
    assert "within its deadline" in text and "dispatch stage" in text
    assert r.headers["x-vsr-response-path"] == "error"
    assert metric(proc, "vsr_request_timeouts_total", api=api, stage="dispatch") == before + 1
    # The router keeps serving: a second request is cut the same way, not queued behind the first.
    assert httpx.post(f"{proc.url}{path}", json=body, timeout=30).status_code == 504


@pytest.mark.parametrize("api", sorted(BODIES))
def test_a_trickling_stream_is_cut_at_the_deadline_with_the_protocols_error_event(deadlines, api):
    proc = deadlines
    path, body = BODIES[api]
    before = metric(proc, "vsr_request_timeouts_total", api=api, stage="answer")
    body = {**body, "model": f"vsr/trickle-{FORMATS[api]}", "stream": True}
    with httpx.stream("POST", f"{proc.url}{path}", json=body, timeout=30) as r:
        assert r.status_code == 200
        text = "".join(r.iter_text())
    assert "request's deadline (1.5 s) passed" in text     # the limit named, as a whole answer's 504 does
    assert "[DONE]" not in text
    assert metric(proc, "vsr_request_timeouts_total", api=api, stage="answer") == before + 1


def test_a_decision_may_set_its_own_deadline(deadlines):
    r = httpx.post(f"{deadlines.url}/v1/chat/completions", json={**BODIES["chat"][1], "model": "vsr/own"}, timeout=30)
    assert r.status_code == 504 and "0.7" not in r.headers.get("x-vsr-selected-decision", "")
    assert r.headers["x-vsr-selected-decision"] == "only"
    # The deadline the message names is the one that passed, the decision's, not the router's 1.5 s.
    assert "within its deadline (0.7 s; it was at the dispatch stage)" in r.json()["error"]["message"]


def test_a_decision_s_later_deadline_covers_its_whole_stream(deadlines):
    # The router's deadline (1.5 s, plus its 1 s of grace for the answer stage) passes while the stream
    # (4 chunks 1 s apart) is still coming; the decision's own 8 s is the one that holds.
    path, body = BODIES["chat"]
    before = metric(deadlines, "vsr_request_timeouts_total")
    with httpx.stream("POST", f"{deadlines.url}{path}", json={**body, "model": "vsr/later", "stream": True},
                      timeout=30) as r:
        assert r.status_code == 200
        text = "".join(r.iter_text())
    assert text.rstrip().endswith("data: [DONE]"), text[-300:]
    assert metric(deadlines, "vsr_request_timeouts_total") == before


def reset_fake(fake) -> None:
    """The shared fake System One with its calls forgotten and one rule: answer after 30 s."""
    httpx.post(f"{fake.url}/_fake/reset").raise_for_status()
    httpx.post(f"{fake.url}/_fake/rules", json={"rules": [{"latency_ms": 30000}]}).raise_for_status()


def test_a_client_that_leaves_during_routing_cancels_the_system_one_call(fake, mock, tmp_path_factory):
    reset_fake(fake)
    doc = config([model("m", f"{mock.url}/v1")],
                 [{"name": "asks", "rules": {"operator": "AND", "conditions": [{"type": "systemone", "name": "q"}]},
                   "modelRefs": [{"model": "m"}]}],
                 signals={"systemone": [{"name": "q", "question": {"type": "noul", "instructions": "Is it?"}}]},
                 fallback={"modelRefs": [{"model": "m"}]})
    doc["global"] = {"model_catalog": {
        "deployments": {"s1": {"provider": "systemone", "endpoint": f"{fake.url}/v1/systemone", "model": "fake",
                               "timeout_ms": 60000,
                               "capabilities": {"question_types": ["noul"]}}},
        "system": {"decision_model": {"deployment": "s1"}}}}
    with router(write_config(doc, str(tmp_path_factory.mktemp("leave")))) as proc:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{proc.url}/v1/chat/completions", json=BODIES["chat"][1], timeout=3.0)
        # The router noticed the client leave and closed its System One call: the fake saw it go
        # (30 s before the fake would have answered), and the router counted the disconnect.
        def left() -> bool:
            calls = httpx.get(f"{fake.url}/_fake/calls").json()["calls"]
            return bool(calls) and calls[0]["disconnected"] is True and calls[0]["status"] is None

        wait_until(left, "the fake System One to see the router hang up", timeout=15)
        wait_until(lambda: metric(proc, "vsr_client_disconnects_total", api="chat") == 1,
                   "the router to count the client that left", timeout=15)


# --- the request plugins -----------------------------------------------------------------------------

PLUGINS = [
    {"type": "system_prompt", "configuration": {"mode": "insert", "system_prompt": "Answer briefly."}},
    {"type": "header_mutation", "configuration": {"add": [{"name": "X-Tenant-Tier", "value": "premium"}],
                                                  "update": [{"name": "user-agent", "value": "vsr-test"}],
                                                  "delete": ["traceparent"]}},
    {"type": "request_params", "configuration": {"blocked_params": ["logprobs"], "max_tokens_limit": 100,
                                                 "temperature": {"max": 1.0},
                                                 "generation": {"thinking": True, "thinking_budget": 64,
                                                                "reasoning_effort": "low"}}},
    {"type": "prompt_cache", "configuration": {"enabled": True}},
]


TIER = {"type": "request_params", "configuration": {
    "generation": {"thinking": True, "max_tokens": 2048, "thinking_budget": 1024}}}
HOUR = {"type": "prompt_cache", "configuration": {"ttl": "1h", "targets": ["tools", "system", "messages"]}}
FAST_MESSAGE = "We are closed today."

@pytest.fixture(scope="module")
def plugged(mock, tmp_path_factory):
    """One router, its decisions picked by a keyword of the request, each backend a model of the mock:
    openai, anthropic, responses: the request PLUGINS in front of a backend of that format; deep: the
    quickstart's thinking tier (TIER) in front of a Messages backend; hello: a fast_response (FAST_MESSAGE);
    any other request: a Messages backend behind a prompt_cache that writes 1h markers on tools, system and
    messages (HOUR)."""
    # Models that reason, so the tiers' thinking reaches them; the Chat one a vLLM (chat_template_kwargs).
    models = [{**model(f"m-{fmt}", f"{mock.url}/v1"), "api_format": fmt, "capabilities": ["reasoning"]}
              for fmt in ("openai", "anthropic", "responses")]
    models[0]["reasoning_family"] = "chat_template_kwargs"
    models += [{**model("claude", f"{mock.url}/v1"), "api_format": "anthropic", "capabilities": ["reasoning"]},
               {**model("claude-hour", f"{mock.url}/v1"), "api_format": "anthropic"}]

    def on(keyword: str) -> dict:
        return {"operator": "AND", "conditions": [{"type": "keyword", "name": keyword}]}

    decisions = [{"name": f"to-{fmt}", "priority": 10, "plugins": PLUGINS, "rules": on(fmt),
                  "modelRefs": [{"model": f"m-{fmt}"}]} for fmt in ("openai", "anthropic", "responses")]
    decisions += [{"name": "deep", "priority": 10, "plugins": [TIER], "rules": on("deep"),
                   "modelRefs": [{"model": "claude"}]},
                  {"name": "closed", "priority": 10, "modelRefs": [], "rules": on("closed"),
                   "plugins": [{"type": "fast_response", "configuration": {"message": FAST_MESSAGE}}]},
                  {"name": "pc", "rules": {"operator": "AND", "conditions": []}, "plugins": [HOUR],
                   "modelRefs": [{"model": "claude-hour"}]}]
    keywords = {"openai": "openai", "anthropic": "anthropic", "responses": "responses", "deep": "deep",
                "closed": "hello"}
    doc = config(models, decisions, signals={"keywords": [{"name": name, "operator": "OR", "keywords": [word]}
                                                          for name, word in keywords.items()]})
    doc["global"] = {"plugins": [{"type": "router_replay", "configuration": {"enabled": True}}]}
    with router(write_config(doc, str(tmp_path_factory.mktemp("plugged")))) as proc:
        yield proc


@pytest.fixture
def shaped(plugged, mock):
    return plugged, mock


def last_request(upstream) -> dict:
    return httpx.get(f"{upstream.url}/_mock/stats").json()["last_request"]


def test_plugins_shape_a_chat_backends_request_from_the_openai_sdk(shaped):
    proc, upstream = shaped
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k", default_headers={"traceparent": "00-a-b-01"})
    client.chat.completions.create(model="vsr/auto", max_tokens=5000, temperature=1.7, logprobs=True,
                                   messages=[{"role": "system", "content": "Mine."},
                                             {"role": "user", "content": "go openai"}])
    sent = last_request(upstream)
    body, headers = sent["body"], sent["headers"]
    assert [m["content"] for m in body["messages"][:2]] == ["Answer briefly.", "Mine."]    # insert keeps the caller's
    assert body["max_tokens"] == 100 and body["temperature"] == 1.0 and "logprobs" not in body
    assert body["chat_template_kwargs"] == {"enable_thinking": True, "thinking_budget": 64}
    assert body["reasoning_effort"] == "low"
    assert headers["x-tenant-tier"] == "premium" and headers["user-agent"] == "vsr-test"
    assert "traceparent" not in headers
    assert "cache_control" not in str(body)                       # prompt_cache leaves OpenAI alone


def test_a_token_cap_holds_a_request_that_names_no_budget(shaped):
    """A client that leaves max_tokens out would get the backend's own budget: the cap sets it."""
    proc, upstream = shaped
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
    client.chat.completions.create(model="vsr/auto", messages=[{"role": "user", "content": "go openai"}])
    assert last_request(upstream)["body"]["max_completion_tokens"] == 100
    client.responses.create(model="vsr/auto", input="go responses")
    assert last_request(upstream)["body"]["max_output_tokens"] == 100


def test_plugins_shape_a_messages_backends_request_from_the_anthropic_sdk(shaped):
    proc, upstream = shaped
    client = anthropic.Anthropic(base_url=proc.url, api_key="k")
    reply = client.messages.with_raw_response.create(
        model="vsr/auto", max_tokens=5000, system="Mine.", tools=[{"name": "t", "input_schema": {"type": "object"}}],
        messages=[{"role": "user", "content": "go anthropic"}])
    sent = last_request(upstream)
    body, headers = sent["body"], sent["headers"]
    assert body["system"][0]["text"] == "Answer briefly.\n\nMine."
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    # Anthropic's smallest thinking budget is 1,024, below max_tokens (100 was the cap): raised to fit.
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024} and body["max_tokens"] > 1024
    assert headers["x-tenant-tier"] == "premium" and headers["anthropic-version"]
    record = replay_record(proc, reply.headers["x-vsr-replay-id"])
    assert any(p.startswith("m-anthropic: system_prompt: insert") for p in record["plugins"])
    assert any("prompt_cache: markers on tools, system, messages" in p for p in record["plugins"])


def test_plugins_shape_a_responses_backends_request(shaped):
    proc, upstream = shaped
    client = openai.OpenAI(base_url=f"{proc.url}/v1", api_key="k")
    client.responses.create(model="vsr/auto", input="go responses", instructions="Mine.", max_output_tokens=5000)
    body = last_request(upstream)["body"]
    assert body["instructions"] == "Answer briefly.\n\nMine."
    assert body["max_output_tokens"] == 100 and body["reasoning"] == {"effort": "low"}


def test_a_chat_client_reaching_a_messages_backend_gets_the_shape_in_anthropic_fields(shaped):
    proc, upstream = shaped
    r = httpx.post(f"{proc.url}/v1/chat/completions", json={
        "model": "vsr/auto", "max_tokens": 50, "messages": [{"role": "user", "content": "go anthropic"}]})
    assert r.status_code == 200
    body = last_request(upstream)["body"]
    assert body["system"][0]["text"].startswith("Answer briefly.") and "chat_template_kwargs" not in body
    assert body["thinking"]["type"] == "enabled"


@pytest.fixture
def thinking_tier(plugged, mock):
    """The quickstart's thinking tier in front of a Messages backend (``go deep``)."""
    return plugged, mock


def test_a_thinking_tier_sends_anthropic_what_it_accepts_beside_thinking(thinking_tier):
    """Anthropic rejects thinking beside a changed temperature, top_k or a top_p below 0.95; a max_tokens
    at or below the budget is raised to the tier's own ceiling, not past it."""
    proc, upstream = thinking_tier
    client = anthropic.Anthropic(base_url=proc.url, api_key="k")
    # The SDK no longer types the sampling fields; older SDKs and translated Chat requests still send them.
    client.messages.create(model="vsr/auto", max_tokens=1000, extra_body={"temperature": 0.2, "top_k": 5, "top_p": 0.5},
                           messages=[{"role": "user", "content": "go deep"}])
    body = last_request(upstream)["body"]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["max_tokens"] == 2048
    assert not {"temperature", "top_k", "top_p"} & body.keys()
    client.messages.create(model="vsr/auto", max_tokens=4000, extra_body={"temperature": 1, "top_p": 0.97},
                           messages=[{"role": "user", "content": "go deep"}])
    body = last_request(upstream)["body"]
    assert body["max_tokens"] == 2048 and body["temperature"] == 1 and body["top_p"] == 0.97


def test_a_thinking_tier_leaves_a_forced_tool_alone(thinking_tier):
    """A tool choice that forces a tool cannot go with thinking: the client's choice wins, thinking stays off."""
    proc, upstream = thinking_tier
    client = anthropic.Anthropic(base_url=proc.url, api_key="k")
    client.messages.create(model="vsr/auto", max_tokens=1000, tool_choice={"type": "any"},
                           tools=[{"name": "t", "input_schema": {"type": "object"}}],
                           messages=[{"role": "user", "content": "go deep"}])
    body = last_request(upstream)["body"]
    assert "thinking" not in body and body["tool_choice"] == {"type": "any"}


def test_the_signals_take_half_of_what_the_request_has_left_and_the_model_the_rest(fake, mock, tmp_path_factory):
    """signal_timeout_ms 0 (the default): a decision model that never answers is given up on at half the
    request's deadline, the question reads unknown, and the request is still answered before the deadline."""
    reset_fake(fake)
    doc = config([model("m", f"{mock.url}/v1"), model("other", f"{mock.url}/v1")],
                 [{"name": "asks", "rules": {"operator": "AND", "conditions": [{"type": "systemone", "name": "q"}]},
                   "modelRefs": [{"model": "other"}]}],
                 signals={"systemone": [{"name": "q", "question": {"type": "noul", "instructions": "Is it?"}}]},
                 fallback={"modelRefs": [{"model": "m"}]})
    doc["global"] = {"router": {"limits": {"request_timeout_ms": 3000}}, "model_catalog": {
        "deployments": {"s1": {"provider": "systemone", "endpoint": f"{fake.url}/v1/systemone", "model": "fake",
                               "timeout_ms": 60000, "capabilities": {"question_types": ["noul"]}}},
        "system": {"decision_model": {"deployment": "s1"}}}}
    with router(write_config(doc, str(tmp_path_factory.mktemp("half")))) as proc:
        r = httpx.post(f"{proc.url}/v1/chat/completions", json=BODIES["chat"][1], timeout=30)
        assert r.status_code == 200, r.text
        assert r.headers["x-vsr-response-path"] == "upstream" and r.headers["x-vsr-selected-model"] == "m"
        assert "x-vsr-selected-decision" not in r.headers      # the recipe's fallback answered
        assert metric(proc, "vsr_request_timeouts_total") == 0


# --- fast_response and a Chat client's n: n choices, indexes 0..n-1, each the message, whole and streamed


def sse_events(sse: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in sse.decode().splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


def test_fast_response_whole_answer_has_n_choices_each_the_message():
    body = json.loads(fast_response.chat_completion(FAST_MESSAGE, "d", 3))
    assert [(c["index"], c["message"]["content"], c["finish_reason"]) for c in body["choices"]] == [
        (i, FAST_MESSAGE, "stop") for i in range(3)]
    assert len(json.loads(fast_response.chat_completion(FAST_MESSAGE, "d"))["choices"]) == 1


def test_fast_response_stream_has_each_choice_from_role_to_finish_then_usage():
    chunks = sse_events(fast_response.chat_stream(FAST_MESSAGE, "d", 2))
    text = {0: "", 1: ""}
    finished = []
    for chunk in chunks:
        for choice in chunk["choices"]:
            text[choice["index"]] += choice["delta"].get("content") or ""
            if choice["finish_reason"]:
                finished.append(choice["index"])
    assert text == {0: FAST_MESSAGE, 1: FAST_MESSAGE} and finished == [0, 1]
    assert chunks[-1]["choices"] == [] and "usage" in chunks[-1]


@pytest.fixture
def fast_closed(plugged):
    """A request saying hello is answered by fast_response."""
    return plugged


def test_fast_response_to_a_chat_client_asking_n_2_gets_two_choices_whole_and_streamed(fast_closed):
    client = openai.OpenAI(base_url=f"{fast_closed.url}/v1", api_key="k", max_retries=0)
    whole = client.chat.completions.create(model="vsr/auto", n=2, messages=[{"role": "user", "content": "hello"}])
    assert [(c.index, c.message.content) for c in whole.choices] == [(0, FAST_MESSAGE), (1, FAST_MESSAGE)]
    text: dict[int, str] = {}
    for chunk in client.chat.completions.create(model="vsr/auto", n=2, stream=True,
                                                messages=[{"role": "user", "content": "hello"}]):
        for c in chunk.choices:
            text[c.index] = text.get(c.index, "") + (c.delta.content or "")
    assert text == {0: FAST_MESSAGE, 1: FAST_MESSAGE}


def test_fast_response_to_a_messages_client_with_no_n_is_one_answer(fast_closed):
    msg = anthropic.Anthropic(base_url=fast_closed.url, api_key="k", max_retries=0).messages.create(
        model="vsr/auto", max_tokens=20, messages=[{"role": "user", "content": "hello"}])
    assert [b.text for b in msg.content] == [FAST_MESSAGE]


def test_a_fast_response_carries_the_answer_id_of_the_clients_protocol(fast_closed):
    """Anthropic's ids are msg_..., OpenAI's chatcmpl-... and resp_...: a fast_response (written as Chat) had
    chatcmpl-fast-... on Messages, whole and streamed."""
    claude = anthropic.Anthropic(base_url=fast_closed.url, api_key="k", max_retries=0)
    ask = {"model": "vsr/auto", "max_tokens": 20, "messages": [{"role": "user", "content": "hello"}]}
    assert claude.messages.create(**ask).id.startswith("msg_")
    with claude.messages.stream(**ask) as s:
        assert s.get_final_message().id.startswith("msg_")
    gpt = openai.OpenAI(base_url=f"{fast_closed.url}/v1", api_key="k", max_retries=0)
    assert gpt.chat.completions.create(model="vsr/auto", messages=ask["messages"]).id.startswith("chatcmpl-")
    assert gpt.responses.create(model="vsr/auto", input="hello").id.startswith("resp_")
    with gpt.responses.stream(model="vsr/auto", input="hello") as s:
        assert s.get_final_response().id.startswith("resp_")


# --- prompt_cache beside the client's own markers -----------------------------------------------------------


@pytest.fixture
def hour_cache(plugged, mock):
    """A Messages backend behind a decision whose prompt_cache writes 1h markers on tools, system and messages
    (any request without a keyword)."""
    return plugged, mock


def hour_cached(hour_cache, **args) -> dict:
    proc, upstream = hour_cache
    client = anthropic.Anthropic(base_url=proc.url, api_key="k", max_retries=0)
    assert client.messages.create(model="vsr/auto", max_tokens=64, **args).content
    return last_request(upstream)["body"]


TOOL = {"name": "lookup", "input_schema": {"type": "object"}}


def test_prompt_cache_writes_its_ttl_where_the_client_marked_nothing(hour_cache):
    body = hour_cached(hour_cache, system="Be brief.", tools=[TOOL], messages=[{"role": "user", "content": "hi"}])
    hour = {"type": "ephemeral", "ttl": "1h"}
    assert body["tools"][-1]["cache_control"] == body["system"][-1]["cache_control"] == hour
    assert body["messages"][-1]["content"][-1]["cache_control"] == hour
    assert problems(body, "anthropic") == []


def test_prompt_cache_never_writes_a_longer_ttl_after_the_clients_shorter_marker(hour_cache):
    """Anthropic reads tools, system, messages and refuses a 1h marker after a 5m one: after the client's 5m
    marker on its tool, the plugin's markers take 5m."""
    body = hour_cached(hour_cache, system="Be brief.", tools=[{**TOOL, "cache_control": {"type": "ephemeral"}}],
                       messages=[{"role": "user", "content": "hi"}])
    assert problems(body, "anthropic") == [], body
    assert body["tools"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_prompt_cache_counts_the_clients_four_markers_and_adds_none(hour_cache):
    """The client's markers, one inside a tool result, fill Anthropic's four: a fifth is a 400."""
    mark = {"type": "ephemeral", "ttl": "1h"}
    body = hour_cached(
        hour_cache, tools=[{**TOOL, "cache_control": mark}, {**TOOL, "name": "other"}],
        system=[{"type": "text", "text": "Be brief.", "cache_control": mark}, {"type": "text", "text": "Be kind."}],
        messages=[{"role": "user", "content": [{"type": "text", "text": "look it up", "cache_control": mark}]},
                  {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup",
                                                     "input": {}}]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                      {"type": "text", "text": "found it", "cache_control": mark}]}]}])
    assert problems(body, "anthropic") == [], body
    assert "cache_control" not in body["tools"][-1] and "cache_control" not in body["system"][-1]
