"""End to end: the masking cookbook (config/cookbook/pii-masking.yaml) as shipped, on the embedded decision
model, keeps personal data from the external model in the turns after the one that carried it.

The pii rule reads the earlier user turns and the tool results (``input: {history: true, tool_results: true}``):
a second Responses turn through ``previous_response_id`` and a Messages request whose last turn is benign
still take the ``masked`` decision, and the body the mock upstream received holds no email or phone.
"""
from __future__ import annotations

import json

import anthropic
import httpx
import openai
import pytest
import yaml

from .procs import ROOT, router, write_config

EMAIL = "jane.doe@example.com"
PHONE = "+1 650-253-0000"
DEBUG = {"x-vsr-debug": "1"}


@pytest.fixture(scope="module")
def cookbook(mock, tmp_path_factory):
    doc = yaml.safe_load((ROOT / "config" / "cookbook" / "pii-masking.yaml").read_text())
    for m in doc["providers"]["models"]:
        m["backend_refs"] = [{"endpoint": f"{mock.url}/v1"}]
    with router(write_config(doc, str(tmp_path_factory.mktemp("pii")))) as proc:
        yield proc


def sent(mock) -> str:
    """The provider-bound request as the mock upstream received it, as one JSON text."""
    return json.dumps(httpx.get(f"{mock.url}/_mock/stats").json()["last_request"]["body"])


def assert_clean(text: str) -> None:
    for value in (EMAIL, PHONE, "650-253-0000", "jane.doe"):
        assert value not in text, f"{value!r} reached the external model: {text}"


def test_a_second_responses_turn_masks_the_first_turns_personal_data(cookbook, mock):
    client = openai.OpenAI(base_url=f"{cookbook.url}/v1", api_key="x", max_retries=0)
    first = client.responses.with_raw_response.create(
        model="vsr/auto", input=f"Please email {EMAIL} or call {PHONE} about the minutes.", extra_headers=DEBUG)
    assert first.headers["x-vsr-selected-decision"] == "masked", first.headers.get("x-vsr-trace")
    assert_clean(sent(mock))
    second = client.responses.with_raw_response.create(
        model="vsr/auto", input="Write a haiku about the sea", previous_response_id=first.parse().id,
        extra_headers=DEBUG)
    assert second.headers["x-vsr-selected-decision"] == "masked", second.headers.get("x-vsr-trace")
    body = sent(mock)
    assert "haiku" in body and "[email_1]" in body and "[phone_1]" in body      # turn 1 went along, masked
    assert_clean(body)


def test_a_benign_messages_turn_after_a_tool_result_masks_the_system_prompt_and_the_result(cookbook, mock):
    client = anthropic.Anthropic(base_url=cookbook.url, api_key="x", max_retries=0)
    raw = client.messages.with_raw_response.create(
        model="vsr/auto", max_tokens=64, extra_headers=DEBUG,
        system=f"You help Jane ({EMAIL}, {PHONE}) with her calendar.",
        tools=[{"name": "lookup", "description": "Look a contact up", "input_schema": {"type": "object"}}],
        messages=[
            {"role": "user", "content": "Who organises the minutes?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": f"Jane Doe, {EMAIL}, {PHONE}"},
                {"type": "text", "text": "Write a haiku about the sea"}]}])
    assert raw.headers["x-vsr-selected-decision"] == "masked", raw.headers.get("x-vsr-trace")
    body = sent(mock)
    assert "haiku" in body and "[email_1]" in body and "[phone_1]" in body
    assert_clean(body)


def test_a_benign_conversation_is_sent_as_written(cookbook, mock):
    client = anthropic.Anthropic(base_url=cookbook.url, api_key="x", max_retries=0)
    raw = client.messages.with_raw_response.create(
        model="vsr/auto", max_tokens=64, extra_headers=DEBUG, system="You write short poems.",
        messages=[{"role": "user", "content": "A poem about rain"}, {"role": "assistant", "content": "Rain falls."},
                  {"role": "user", "content": "Write a haiku about the sea"}])
    assert raw.headers["x-vsr-selected-decision"] == "plain", raw.headers.get("x-vsr-trace")
    assert "A poem about rain" in sent(mock)
