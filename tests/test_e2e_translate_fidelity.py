"""End to end: what translation keeps of a request or answer that one protocol has and another spells differently
(outside trial 7c, findings 6-12): prompt-caching markers, refusals, the parameters Chat and Responses share, a
Messages prefill, JPEG's other media type, an answer cut short, several text blocks, a failed tool's result.

The router and the mock upstream run as real processes, the official SDKs are the clients, and what a provider got
is read back from the mock's ``last_request``; each body is also held to the provider rules of ``provider_rules``.
"""
from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest

from bench.mock_upstream import PNG_B64

from .procs import config, model, router, write_config
from .provider_rules import problems
from .test_e2e_protocols import HeaderTap, loss, warnings_of

BACKENDS = ("openai", "anthropic", "responses")
REFUSAL = "I can't help with that."
EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture(scope="module")
def gw(mock, tmp_path_factory):
    # Reasoning models (gpt-5's like): a client's reasoning effort reaches them (capabilities: [reasoning]).
    models = [{**model(f"m-{fmt}", f"{mock.url}/v1"), "api_format": fmt, "capabilities": ["reasoning"]}
              for fmt in BACKENDS]
    doc = config(models, [{"name": "general", "modelRefs": [{"model": "m-openai"}]}])
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg")))) as proc:
        yield proc


@pytest.fixture
def scripted(mock):
    """Set the mock's answer knobs for one test; back to ordinary answers after it."""
    def configure(**knobs) -> None:
        httpx.post(f"{mock.url}/_mock/config", json=knobs).raise_for_status()
    yield configure
    configure(refusal=None, finish_reason=None)


def sent(mock, api_format: str) -> dict:
    """The body the provider got last, checked against the rules providers of ``api_format`` enforce."""
    body = httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["body"]
    assert problems(body, api_format) == [], body
    return body


def chat(gw) -> tuple[openai.OpenAI, HeaderTap]:
    tap = HeaderTap()
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key="x", max_retries=0, http_client=tap.http), tap


def messages(gw) -> tuple[anthropic.Anthropic, HeaderTap]:
    tap = HeaderTap()
    return anthropic.Anthropic(base_url=gw.url, api_key="x", max_retries=0, http_client=tap.http), tap


# --- 8, 11: prompt caching and image/jpg to an Anthropic provider ------------------------------------------------


def test_chat_cache_control_and_a_jpg_image_reach_an_anthropic_provider(gw, mock):
    client, tap = chat(gw)
    client.chat.completions.create(model="m-anthropic", max_tokens=64, messages=[
        {"role": "system", "content": [{"type": "text", "text": "long rules", "cache_control": EPHEMERAL}]},
        {"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": f"data:image/jpg;base64,{PNG_B64}"},
             "cache_control": {"type": "ephemeral", "ttl": "5m"}},
            {"type": "text", "text": "long document", "cache_control": EPHEMERAL},
            {"type": "text", "text": "the question"}]}])
    body = sent(mock, "anthropic")
    assert body["system"] == [{"type": "text", "text": "long rules", "cache_control": EPHEMERAL}]
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": PNG_B64},
         "cache_control": {"type": "ephemeral", "ttl": "5m"}},
        {"type": "text", "text": "long document", "cache_control": EPHEMERAL},
        {"type": "text", "text": "the question"}]}]
    assert warnings_of(tap.headers) == set()


def test_chat_tool_and_message_cache_control_reach_an_anthropic_provider(gw, mock):
    """LiteLLM's clients mark a tool and a whole message: the tool keeps its marker, a message's goes on its last
    content block (as LiteLLM places it), a system message's on its system block."""
    client, tap = chat(gw)
    tool = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}},
            "cache_control": EPHEMERAL}
    client.chat.completions.create(model="m-anthropic", max_tokens=64, tools=[tool], messages=[
        {"role": "system", "content": "long rules", "cache_control": EPHEMERAL},
        {"role": "user", "content": [{"type": "text", "text": "long document"}, {"type": "text", "text": "q"}],
         "cache_control": EPHEMERAL},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "q2", "cache_control": EPHEMERAL}])
    body = sent(mock, "anthropic")
    assert body["tools"][0]["cache_control"] == EPHEMERAL
    assert body["system"] == [{"type": "text", "text": "long rules", "cache_control": EPHEMERAL}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "long document"},
                                     {"type": "text", "text": "q", "cache_control": EPHEMERAL}]},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
        {"role": "user", "content": [{"type": "text", "text": "q2", "cache_control": EPHEMERAL}]}]
    assert warnings_of(tap.headers) == set()


def test_a_chat_tool_messages_cache_control_marks_its_result(gw, mock):
    client, tap = chat(gw)
    tool = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}}}
    client.chat.completions.create(model="m-anthropic", max_tokens=64, tools=[tool], messages=[
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny", "cache_control": EPHEMERAL}])
    [result] = sent(mock, "anthropic")["messages"][-1]["content"]
    assert result["content"] == [{"type": "text", "text": "sunny", "cache_control": EPHEMERAL}]
    assert warnings_of(tap.headers) == set()


def test_cache_control_a_provider_cannot_carry_is_listed(gw, mock):
    """A Responses provider has no prompt-caching markers, and an assistant message ending in a tool call has no
    block of Anthropic's here to carry one: each is dropped and listed, never silently."""
    client, tap = chat(gw)
    tool = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}},
            "cache_control": EPHEMERAL}
    ask = [{"role": "user", "content": [{"type": "text", "text": "q", "cache_control": EPHEMERAL}]},
           {"role": "assistant", "content": None, "cache_control": EPHEMERAL, "tool_calls": [
               {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]},
           {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
           {"role": "user", "content": "q2", "cache_control": EPHEMERAL}]
    client.chat.completions.create(model="m-responses", max_tokens=64, tools=[tool], messages=ask)
    assert "cache_control" not in json.dumps(sent(mock, "responses"))
    assert warnings_of(tap.headers) == {loss("dropped", "unsupported", f) for f in (
        "tools[0].cache_control", "messages[0].content[0].cache_control", "messages[1].cache_control",
        "messages[3].cache_control")}
    client.chat.completions.create(model="m-anthropic", max_tokens=64, tools=[tool], messages=ask)
    assert warnings_of(tap.headers) == {loss("dropped", "unsupported", "messages[1].cache_control")}


# --- 10: a refusal in each client's own shape ----------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_chat_providers_refusal_is_a_refusal_part_for_a_responses_client(gw, scripted, stream):
    scripted(refusal=REFUSAL)
    client, tap = chat(gw)
    if stream:
        kinds = []
        with client.responses.stream(model="m-openai", input="how do I pick a lock?") as s:
            for ev in s:
                kinds.append(ev.type)
                if ev.type == "response.refusal.done":
                    assert ev.refusal == REFUSAL
            resp = s.get_final_response()
        assert "response.refusal.delta" in kinds and "response.output_text.delta" not in kinds, kinds
    else:
        resp = client.responses.create(model="m-openai", input="how do I pick a lock?")
    assert resp.status == "completed"
    [item] = resp.output
    assert [(p.type, p.refusal) for p in item.content] == [("refusal", REFUSAL)]
    assert resp.output_text == ""
    assert warnings_of(tap.headers) == set()


@pytest.mark.parametrize("provider", ["m-openai", "m-responses"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_providers_refusal_stops_a_messages_answer_for_refusal(gw, scripted, provider, stream):
    scripted(refusal=REFUSAL)
    client, tap = messages(gw)
    kw = {"model": provider, "max_tokens": 64, "messages": [{"role": "user", "content": "how do I pick a lock?"}]}
    if stream:
        with client.messages.stream(**kw) as s:
            msg = s.get_final_message()
    else:
        msg = client.messages.create(**kw)
    assert msg.stop_reason == "refusal"
    assert [(b.type, b.text) for b in msg.content] == [("text", REFUSAL)]
    assert warnings_of(tap.headers) == set()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_responses_providers_refusal_is_chats_refusal(gw, scripted, stream):
    scripted(refusal=REFUSAL)
    client, tap = chat(gw)
    kw = {"model": "m-responses", "max_tokens": 64, "messages": [{"role": "user", "content": "how do I pick a lock?"}]}
    if stream:
        content, refusal, finish = "", "", None
        for c in client.chat.completions.create(stream=True, **kw):
            for choice in c.choices:
                content += choice.delta.content or ""
                refusal += choice.delta.refusal or ""
                finish = choice.finish_reason or finish
    else:
        choice = client.chat.completions.create(**kw).choices[0]
        content, refusal, finish = choice.message.content or "", choice.message.refusal, choice.finish_reason
    assert (content, refusal, finish) == ("", REFUSAL, "stop")
    assert warnings_of(tap.headers) == set()




# --- 6, 9: the parameters Chat and Responses share --------------------------------------------------------------------


def test_chat_parameters_responses_shares_reach_a_responses_provider(gw, mock):
    client, tap = chat(gw)
    client.chat.completions.create(
        model="m-responses", messages=[{"role": "user", "content": "hi"}], max_tokens=64, logprobs=True,
        top_logprobs=3, store=True, service_tier="flex", prompt_cache_key="k1", safety_identifier="u-hash",
        extra_body={"verbosity": "low"})
    body = sent(mock, "responses")
    assert body["text"] == {"verbosity": "low"}
    assert body["include"] == ["message.output_text.logprobs"] and body["top_logprobs"] == 3
    assert (body["store"], body["service_tier"], body["prompt_cache_key"], body["safety_identifier"]) == (
        True, "flex", "k1", "u-hash")
    assert warnings_of(tap.headers) == set()


def test_responses_parameters_chat_shares_reach_a_chat_provider(gw, mock):
    client, tap = chat(gw)
    client.responses.create(
        model="m-openai", input="hi", max_output_tokens=64, top_logprobs=2, include=["message.output_text.logprobs"],
        service_tier="flex", prompt_cache_key="k1", safety_identifier="u-hash",
        text={"verbosity": "high", "format": {"type": "json_object"}},
        reasoning={"effort": "low", "summary": "auto"})
    body = sent(mock, "openai")
    assert (body["verbosity"], body["logprobs"], body["top_logprobs"]) == ("high", True, 2)
    assert (body["service_tier"], body["prompt_cache_key"], body["safety_identifier"]) == ("flex", "k1", "u-hash")
    assert body["response_format"] == {"type": "json_object"} and body["reasoning_effort"] == "low"
    assert "store" not in body   # a Responses client's store is the router's (previous_response_id)
    assert warnings_of(tap.headers) == {loss("dropped", "unsupported", "reasoning.summary")}


def test_unknown_keys_of_text_and_reasoning_are_reported(gw, mock):
    client, tap = chat(gw)
    client.responses.create(model="m-anthropic", input="hi", max_output_tokens=64,
                            text={"verbosity": "low", "novel": 1}, reasoning={"effort": "low", "summary": "auto"},
                            include=["reasoning.encrypted_content"])
    body = sent(mock, "anthropic")
    assert "verbosity" not in json.dumps(body)
    assert warnings_of(tap.headers) == {
        loss("dropped", "unsupported", "text.novel"), loss("dropped", "unsupported", "reasoning.summary"),
        # include[0] (reasoning.encrypted_content) is honoured: Claude's thinking comes back sealed in it
        loss("dropped", "unsupported", "text.verbosity"),
        # the effort is Claude's thinking budget (1,024), which needs a max_tokens above it
        loss("converted", "thinking", "max_tokens")}


def test_shared_parameters_an_anthropic_provider_lacks_are_reported(gw, mock):
    client, tap = chat(gw)
    client.chat.completions.create(model="m-anthropic", messages=[{"role": "user", "content": "hi"}], max_tokens=64,
                                   service_tier="flex", store=False, extra_body={"verbosity": "low"})
    body = sent(mock, "anthropic")
    assert not {"service_tier", "store", "verbosity"} & body.keys()
    assert warnings_of(tap.headers) == {loss("dropped", "unsupported", k) for k in ("service_tier", "store", "verbosity")}


# --- 7: a Messages prefill ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_prefill_to_a_provider_that_cannot_continue_a_turn_is_warned(gw, mock, backend):
    client, tap = messages(gw)
    client.messages.create(model=f"m-{backend}", max_tokens=64, messages=[
        {"role": "user", "content": "Name a colour as JSON."}, {"role": "assistant", "content": '{"colour": "'}])
    body = sent(mock, backend)
    expected = set() if backend == "anthropic" else {loss("converted", "prefill", "messages[1]")}
    assert warnings_of(tap.headers) == expected
    last = body["input"][-1] if backend == "responses" else body["messages"][-1]
    assert last["role"] == "assistant"


# --- 12 -------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_an_answer_cut_short_leaves_its_message_item_incomplete(gw, scripted, stream):
    scripted(finish_reason="length")
    client, _ = chat(gw)
    if stream:
        # The SDK's stream helper waits for response.completed only: the events, as they come.
        events = list(client.responses.create(model="m-openai", input="write a long story", max_output_tokens=16,
                                              stream=True))
        assert [ev.item.status for ev in events if ev.type == "response.output_item.done"] == ["incomplete"]
        assert events[-1].type == "response.incomplete"
        resp = events[-1].response
    else:
        resp = client.responses.create(model="m-openai", input="write a long story", max_output_tokens=16)
    assert resp.status == "incomplete" and resp.incomplete_details.reason == "max_output_tokens"
    assert [(i.type, i.status) for i in resp.output] == [("message", "incomplete")]


def test_several_text_and_system_blocks_stay_apart_for_a_chat_provider(gw, mock):
    client, _ = messages(gw)
    client.messages.create(model="m-openai", max_tokens=64,
                           system=[{"type": "text", "text": "rule one"}, {"type": "text", "text": "rule two"}],
                           messages=[{"role": "user", "content": [{"type": "text", "text": "part one"},
                                                                  {"type": "text", "text": "part two"}]}])
    body = sent(mock, "openai")
    assert body["messages"] == [
        {"role": "system", "content": [{"type": "text", "text": "rule one"}, {"type": "text", "text": "rule two"}]},
        {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]}]


@pytest.mark.parametrize("backend", ["openai", "responses"])
def test_an_assistant_turns_text_blocks_stay_apart_for_a_chat_or_responses_provider(gw, mock, backend):
    """As a user turn's: glued, "Answer one." and "Answer two." became "Answer one.Answer two."."""
    client, _ = messages(gw)
    client.messages.create(model=f"m-{backend}", max_tokens=64, messages=[
        {"role": "user", "content": "Two answers, please."},
        {"role": "assistant", "content": [{"type": "text", "text": "Answer one."},
                                          {"type": "text", "text": "Answer two."}]},
        {"role": "user", "content": "Thanks."}])
    body = sent(mock, backend)
    if backend == "openai":
        assert body["messages"][1] == {"role": "assistant", "content": [
            {"type": "text", "text": "Answer one."}, {"type": "text", "text": "Answer two."}]}
    else:
        assert body["input"][1] == {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "Answer one."}, {"type": "output_text", "text": "Answer two."}]}


@pytest.mark.parametrize("backend", ["openai", "responses"])
def test_a_failed_tool_result_stays_marked_as_an_error(gw, mock, backend):
    client, tap = messages(gw)
    tool = {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    client.messages.create(model=f"m-{backend}", max_tokens=64, tools=[tool], messages=[
        {"role": "user", "content": "weather in Paris?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                           "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                                      "content": "service unavailable"}]}])
    body = sent(mock, backend)
    if backend == "openai":
        [result] = [m for m in body["messages"] if m["role"] == "tool"]
        assert result["content"] == "Error: service unavailable"
    else:
        [result] = [i for i in body["input"] if i.get("type") == "function_call_output"]
        assert result["output"] == "Error: service unavailable"
    assert warnings_of(tap.headers) == {loss("converted", "unsupported", "messages[2].content[0].is_error")}


# --- images in a tool's result, to a Chat provider (outside trial) ---------------------------------------------------


def test_a_messages_tool_results_images_follow_the_tool_messages_for_a_chat_provider(gw, mock):
    """A Chat tool message carries text only: the text stays in it, the images go in a user message right after the
    turn's tool messages (LiteLLM's placement), so the model sees them; each listed as moved."""
    client, tap = messages(gw)
    tool = {"name": "shot", "input_schema": {"type": "object", "properties": {}}}
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64}}
    client.messages.create(model="m-openai", max_tokens=64, tools=[tool], messages=[
        {"role": "user", "content": "take two screenshots"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "shot", "input": {}},
                                          {"type": "tool_use", "id": "toolu_2", "name": "shot", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "first"}, image]},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": [image]},
            {"type": "text", "text": "what do they show?"}]}])
    body = sent(mock, "openai")
    url = f"data:image/png;base64,{PNG_B64}"
    # Each result's images under a line naming its call; an image-only result's tool message says where it is.
    assert body["messages"][2:] == [
        {"role": "tool", "tool_call_id": "toolu_1", "content": "first"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "(the output of this call follows in the next message)"},
        {"role": "user", "content": [{"type": "text", "text": "Output of call toolu_1:"},
                                     {"type": "image_url", "image_url": {"url": url}},
                                     {"type": "text", "text": "Output of call toolu_2:"},
                                     {"type": "image_url", "image_url": {"url": url}}]},
        {"role": "user", "content": "what do they show?"}]
    assert warnings_of(tap.headers) == {loss("moved", "position", f"messages[2].content[{i}]")
                                        for i in ("0].content[1", "1].content[0")}


def test_a_responses_function_call_outputs_image_follows_it_for_a_chat_provider(gw, mock):
    client, tap = chat(gw)
    url = f"data:image/png;base64,{PNG_B64}"
    client.responses.create(model="m-openai", max_output_tokens=64, tools=[
        {"type": "function", "name": "shot", "parameters": {"type": "object", "properties": {}}}], input=[
        {"role": "user", "content": "take a screenshot"},
        {"type": "function_call", "call_id": "call_1", "name": "shot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": [
            {"type": "input_text", "text": "here"}, {"type": "input_image", "image_url": url}]}])
    body = sent(mock, "openai")
    assert body["messages"][-2:] == [
        {"role": "tool", "tool_call_id": "call_1", "content": "here"},
        {"role": "user", "content": [{"type": "text", "text": "Output of call call_1:"},
                                     {"type": "image_url", "image_url": {"url": url}}]}]
    assert warnings_of(tap.headers) == {loss("moved", "position", "input[2].output[1]")}
