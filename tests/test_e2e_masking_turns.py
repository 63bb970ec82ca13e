"""masking across the turns of a conversation: the router's own placeholders mean the same values every turn.

An outside trial drove Codex and the SDKs through a masking decision to a thinking Claude: turn 2's user turn
reached the provider as ``[EMAIL_ADDRESS_2]`` while the model's own signed thinking, round-tripped in the router's
``vsr-thinking:`` blob (or in a response stored for ``previous_response_id``), still said ``[EMAIL_ADDRESS_1]``;
the model's history disagreed with itself and the client read a literal ``[EMAIL_ADDRESS_1]``. A scripted Claude
started here checks each thinking block it gets back against its signature (as Anthropic does), thinks about the
address it was sent, and on its second turn answers with the placeholder its own thinking named. The router runs
as a real process; the official SDKs are the clients.
"""
from __future__ import annotations

import hashlib
import json
import re

import anthropic
import openai
import pytest

from . import hostile_upstream
from .procs import config, router, write_config
from .test_e2e_stream_tool_calls import named

EMAIL = "jane.doe@example.com"
NAMED = re.compile(r"\[EMAIL_ADDRESS_\d+\]")
BARE = re.compile(r"(?<!\d)\d{10}(?!\d)")
MASKING = {"type": "masking", "configuration": {"enabled": True, "signal": "personal",
                                                "entity_types": ["EMAIL_ADDRESS", "PHONE_NUMBER"]}}
EXEC = {"type": "function", "name": "exec_command", "description": "Runs a shell command.",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}


def signed(text: str) -> str:
    return "sig:" + hashlib.sha256(text.encode()).hexdigest()


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return " ".join(b.get("text") or json.dumps(b.get("content")) for b in content if isinstance(b, dict))


class Claude(hostile_upstream.Handler):
    """A thinking Claude: a thinking block sent back other than as signed is a 400; a first turn thinks about the
    address it reads (and calls ``exec_command`` with it when given tools); a later turn answers with the
    placeholder its own last thinking named."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        BODIES.keep(body)
        memory = []             # what the model thought, or else said, in its last turn
        for m in body["messages"]:
            if m["role"] != "assistant":
                continue
            blocks = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
            for b in blocks:
                if b.get("type") == "thinking" and b.get("signature") != signed(b["thinking"]):
                    self.whole(400, json.dumps({"type": "error", "error": {
                        "type": "invalid_request_error", "message": "Invalid signature in thinking block"}}).encode())
                    return
            said = [b.get("thinking") or b.get("text") or "" for b in blocks if b.get("type") in ("thinking", "text")]
            memory = said[:1]
        if memory:
            said = NAMED.findall(memory[0])[0]
            thought, reply = f"I noted the address as {said}.", {"type": "text", "text": f"Your email is {said}."}
        else:
            asked = _text(body["messages"][-1]["content"])
            said = NAMED.findall(asked)[0]
            thought = f"The user's email is {said}." + "".join(f" Phone: {d}." for d in BARE.findall(asked))
            reply = ({"type": "tool_use", "id": "toolu_1", "name": "exec_command", "input": {"cmd": f"echo {said}"}}
                     if body.get("tools") else {"type": "text", "text": f"Noted, {said}."})
        doc = {"id": "msg_s", "type": "message", "role": "assistant", "model": "claude",
               "content": [{"type": "thinking", "thinking": thought, "signature": signed(thought)}, reply],
               "stop_reason": "tool_use" if reply["type"] == "tool_use" else "end_turn", "stop_sequence": None,
               "usage": {"input_tokens": 9, "output_tokens": 7}}
        if body.get("stream"):
            self.sse(streamed(doc))
        else:
            self.whole(200, json.dumps(doc).encode())


def streamed(doc: dict) -> list[bytes]:
    """``doc`` as Anthropic streams it: the thinking in a delta, then its signature; a tool's input as JSON text."""
    out = [named("message_start", {"message": {**doc, "content": [], "stop_reason": None}})]
    for i, b in enumerate(doc["content"]):
        start, deltas = {**b}, []
        if b["type"] == "thinking":
            start.update(thinking="", signature="")
            deltas = [{"type": "thinking_delta", "thinking": b["thinking"]},
                      {"type": "signature_delta", "signature": b["signature"]}]
        elif b["type"] == "text":
            start["text"], deltas = "", [{"type": "text_delta", "text": b["text"]}]
        else:
            start["input"], deltas = {}, [{"type": "input_json_delta", "partial_json": json.dumps(b["input"])}]
        out.append(named("content_block_start", {"index": i, "content_block": start}))
        out += [named("content_block_delta", {"index": i, "delta": d}) for d in deltas]
        out.append(named("content_block_stop", {"index": i}))
    return out + [named("message_delta", {"delta": {"stop_reason": doc["stop_reason"], "stop_sequence": None},
                                          "usage": {"output_tokens": 7}}), named("message_stop", {})]


BODIES = hostile_upstream.Bodies()


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    with hostile_upstream.serving(Claude) as url:
        models = [{"name": "claude", "api_format": "anthropic", "capabilities": ["reasoning"],
                   "backend_refs": [{"endpoint": f"{url}/v1"}]}]
        keep = {"type": "masking", "configuration": {**MASKING["configuration"], "unmask": False}}
        doc = config(models, [{"name": "private", "modelRefs": [{"model": "claude"}], "plugins": [MASKING]},
                              {"name": "masked", "priority": 20, "modelRefs": [{"model": "claude"}], "plugins": [keep],
                               "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "keep"}]}}],
                     signals={"pii": [{"name": "personal"}],
                              "keywords": [{"name": "keep", "operator": "OR", "keywords": ["as masked"]}]})
        doc["global"] = {"router": {"upstream": {"retries": {"max_retries": 0}}}}
        with router(write_config(doc, str(tmp_path_factory.mktemp("masking-turns")))) as proc:
            yield proc


def assert_one_placeholder() -> None:
    """The last provider-bound body names the address by one placeholder everywhere: the user's turns and the
    model's own thinking agree."""
    sent = json.dumps(BODIES.last())
    assert EMAIL not in sent
    assert set(NAMED.findall(sent)) == {"[EMAIL_ADDRESS_1]"}, sent


def responses(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.url}/v1", api_key="k", max_retries=0)


def codex_turn(gw, stream: bool, items: list):
    """One Responses turn as Codex sends it (store: false, the encrypted reasoning asked for): the final response."""
    kw = {"model": "vsr/auto", "input": items, "tools": [EXEC], "store": False,
          "include": ["reasoning.encrypted_content"], "reasoning": {"effort": "medium"}}
    if not stream:
        return responses(gw).responses.create(**kw)
    with responses(gw).responses.stream(**kw) as s:
        for _ in s:
            pass
        return s.get_final_response()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_codex_tool_loop_keeps_the_placeholder_of_its_sealed_thinking(gw, stream):
    """Codex (store: false): the reasoning item's encrypted_content carries the model's thinking back."""
    ask = [{"role": "user", "content": f"My email is {EMAIL}. Run echo with it"}]
    first = codex_turn(gw, stream, ask)
    call = next(i for i in first.output if i.type == "function_call")
    assert json.loads(call.arguments) == {"cmd": f"echo {EMAIL}"}
    items = [i.model_dump(exclude_none=True) for i in first.output]
    second = codex_turn(gw, stream, [*ask, *items, {"type": "function_call_output", "call_id": call.call_id,
                                                    "output": EMAIL + "\n"}])
    assert_one_placeholder()
    assert second.output_text == f"Your email is {EMAIL}."


def test_previous_response_id_keeps_the_placeholder_of_the_stored_thinking(gw):
    client = responses(gw)
    kw = {"model": "vsr/auto", "reasoning": {"effort": "medium"}}
    first = client.responses.create(input=f"My email is {EMAIL}.", **kw)
    assert first.output_text == f"Noted, {EMAIL}."
    second = client.responses.create(input="What is my email?", previous_response_id=first.id, **kw)
    assert_one_placeholder()
    assert second.output_text == f"Your email is {EMAIL}."


def claude_code_loop(gw, asked: str, thought: str) -> None:
    """A Messages client's tool loop as Claude Code runs it: its first turn's thinking reads ``thought``, its second
    sends that turn back with the tool's result; the provider gets one placeholder and the client its address."""
    client = anthropic.Anthropic(base_url=gw.url, api_key="k", max_retries=0)
    kw = {"model": "vsr/auto", "max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024},
          "tools": [{"name": EXEC["name"], "description": EXEC["description"], "input_schema": EXEC["parameters"]}]}
    ask = [{"role": "user", "content": asked}]
    first = client.messages.create(messages=ask, **kw)
    thinking, call = first.content
    assert thinking.thinking == thought and call.input == {"cmd": f"echo {EMAIL}"}
    history = [*ask, {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": EMAIL}]}]
    second = client.messages.create(messages=history, **kw)
    assert_one_placeholder()
    assert second.content[-1].text == f"Your email is {EMAIL}."


def test_claude_code_thinking_comes_back_as_it_was_signed(gw):
    """A Messages client reads the thinking restored; masked again, it is the text the model signed."""
    claude_code_loop(gw, f"My email is {EMAIL}. Run echo with it", f"The user's email is {EMAIL}.")


@pytest.mark.parametrize("named", [EMAIL, "[EMAIL_ADDRESS_1]"], ids=["address", "placeholder"])
def test_an_answer_left_masked_and_carried_back_keeps_its_placeholder(gw, named):
    """``unmask: false``: the client reads the router's placeholder and sends it back in the assistant turn; the
    address in its own turns gets the same one, not the next, and so it does when the user quotes the placeholder
    the answer showed (it names the router's value, not a template's)."""
    client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="k", max_retries=0)
    ask = [{"role": "user", "content": f"My email is {EMAIL}, as masked."}]
    first = client.chat.completions.create(model="vsr/auto", messages=ask).choices[0].message.content
    assert first == "Noted, [EMAIL_ADDRESS_1]."
    history = [*ask, {"role": "assistant", "content": first},
               {"role": "user", "content": f"Is {named} right, as masked?"}]
    second = client.chat.completions.create(model="vsr/auto", messages=history).choices[0].message.content
    assert_one_placeholder()
    assert second == "Your email is [EMAIL_ADDRESS_1]."


def test_a_value_only_the_models_own_thinking_names_comes_back_as_it_was_signed(gw):
    """The user's bare "4155552671" is no phone where it stands (no cue), and reached the model as written; the
    model's thinking calls it a phone. Masked in that thinking on the next turn, the block would no longer be the
    one the model signed (Anthropic refuses the turn): a value the provider itself wrote there is left as it is."""
    claude_code_loop(gw, f"My email is {EMAIL}. Run echo with it and with 4155552671",
                     f"The user's email is {EMAIL}. Phone: 4155552671.")
