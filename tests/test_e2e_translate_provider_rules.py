"""Translated requests a provider accepts, and usage details that survive translation (trial 7c findings 1-5, 12).

The router and bench.mock_upstream as real processes, the official SDKs as clients, each client naming a model of
another api_format, whole and streamed. The provider-bound body (the mock's last request) is held to the rules
providers enforce with a 400 (tests/provider_rules.py); what the translation left out is in x-vsr-warnings. The
mock answers with reasoning and cache-read tokens, which reach every client in its own usage fields.
"""
from __future__ import annotations

import anthropic
import httpx
import httpx2
import openai
import pytest

from .procs import config, mock_upstream, model, router, write_config
from .provider_rules import problems

REASONING, CACHED = 250, 40
FORMAT = {"oa": "openai", "an": "anthropic", "rs": "responses"}
NATIVE = {"chat": "oa", "messages": "an", "responses": "rs"}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


def loss(action: str, reason: str, field: str) -> str:
    return f'translation_loss;action="{action}";reason="{reason}";field="{field}"'


@pytest.fixture(scope="module")
def upstream():
    with mock_upstream("--reasoning-tokens", str(REASONING), "--cached-tokens", str(CACHED)) as proc:
        yield proc


@pytest.fixture(scope="module")
def gw(upstream, tmp_path_factory):
    models = [{**model(name, f"{upstream.url}/v1"), "api_format": fmt} for name, fmt in FORMAT.items()]
    doc = config(models, [{"name": "general", "modelRefs": [{"model": "oa"}]}])
    with router(write_config(doc, str(tmp_path_factory.mktemp("cfg")))) as proc:
        yield proc


class Clients:
    """The three SDKs on one HTTP client that keeps the last response's headers."""

    def __init__(self, url: str) -> None:
        self.headers = None
        http = httpx2.Client(timeout=10, event_hooks={"response": [self._keep]})
        self.openai = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, http_client=http)
        self.anthropic = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, http_client=http)

    def _keep(self, response) -> None:
        self.headers = response.headers

    def warnings(self) -> set[str]:
        value = self.headers.get("x-vsr-warnings", "") if self.headers is not None else ""
        return {w.strip() for w in value.split(", ") if w.strip()}

    def chat(self, stream: bool, **kw) -> dict | None:
        """The answer's usage as the client got it."""
        if not stream:
            return self.openai.chat.completions.create(**kw).usage.model_dump()
        usage = None
        for chunk in self.openai.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw):
            usage = chunk.usage.model_dump() if chunk.usage is not None else usage
        return usage

    def responses(self, stream: bool, **kw) -> dict | None:
        if not stream:
            return self.openai.responses.create(**kw).usage.model_dump()
        with self.openai.responses.stream(**kw) as s:
            for _ in s:
                pass
            return s.get_final_response().usage.model_dump()

    def messages(self, stream: bool, **kw) -> dict:
        kw.setdefault("max_tokens", 64)
        if not stream:
            return self.anthropic.messages.create(**kw).usage.model_dump()
        with self.anthropic.messages.stream(**kw) as s:
            return s.get_final_message().usage.model_dump()


@pytest.fixture(scope="module")
def clients(gw) -> Clients:
    return Clients(gw.url)


def sent(upstream) -> dict:
    return httpx.get(f"{upstream.url}/_mock/stats").json()["last_request"]["body"]


HELLO = [{"role": "user", "content": "Say hello"}]


def ask(clients: Clients, api: str, target: str, stream: bool) -> dict:
    if api == "chat":
        return clients.chat(stream, model=target, messages=HELLO)
    if api == "responses":
        return clients.responses(stream, model=target, input="Say hello")
    return clients.messages(stream, model=target, messages=HELLO)


# --- finding 1: reasoning and cached tokens --------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(("api", "target"), [
    ("responses", "oa"), ("responses", "an"), ("chat", "rs"), ("chat", "an"), ("messages", "oa"), ("messages", "rs")])
def test_reasoning_and_cached_tokens_reach_every_client(clients, upstream, api, target, stream):
    usage = ask(clients, api, target, stream)
    reasons = target != "an"    # Anthropic counts thinking in output_tokens, with no field of its own
    if api == "responses":
        assert usage["input_tokens_details"]["cached_tokens"] == CACHED, usage
        assert usage["output_tokens_details"]["reasoning_tokens"] == (REASONING if reasons else 0), usage
        assert usage["output_tokens"] > REASONING and usage["input_tokens"] > CACHED, usage
    elif api == "chat":
        assert usage["prompt_tokens_details"]["cached_tokens"] == CACHED, usage
        details = usage["completion_tokens_details"]
        assert (details or {}).get("reasoning_tokens", 0) == (REASONING if reasons else 0), usage
        assert usage["completion_tokens"] > REASONING and usage["prompt_tokens"] > CACHED, usage
    else:
        # Messages: the cache's reads apart from input_tokens; the reasoning counted in output_tokens.
        assert usage["cache_read_input_tokens"] == CACHED and usage["output_tokens"] > REASONING, usage


# --- finding 2: max_completion_tokens -------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", ["messages", "responses"])
def test_a_chat_provider_gets_max_completion_tokens(clients, upstream, api, stream):
    if api == "messages":
        clients.messages(stream, model="oa", messages=HELLO, max_tokens=300)
    else:
        clients.responses(stream, model="oa", input="Say hello", max_output_tokens=300, reasoning={"effort": "low"})
    body = sent(upstream)
    assert body["max_completion_tokens"] == 300 and "max_tokens" not in body, body
    assert problems(body, "openai") == [], body


# --- finding 3: metadata without store --------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_responses_metadata_is_dropped_for_a_chat_provider_with_a_warning(clients, upstream, stream):
    clients.responses(stream, model="oa", input="Say hello", metadata={"team": "a"})
    body = sent(upstream)
    assert "metadata" not in body and problems(body, "openai") == [], body
    assert loss("dropped", "requires_store", "metadata") in clients.warnings()


# --- finding 4: whitespace stop sequences ------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_whitespace_stops_are_dropped_for_anthropic_with_a_warning(clients, upstream, stream):
    clients.chat(stream, model="an", messages=HELLO, stop=["\n\n", "END", " "])
    body = sent(upstream)
    assert body["stop_sequences"] == ["END"] and problems(body, "anthropic") == [], body
    assert {loss("dropped", "whitespace", "stop[0]"), loss("dropped", "whitespace", "stop[2]")} <= clients.warnings()
    clients.chat(stream, model="an", messages=HELLO, stop="\n")
    body = sent(upstream)
    assert "stop_sequences" not in body and problems(body, "anthropic") == [], body
    assert loss("dropped", "whitespace", "stop") in clients.warnings()


# --- finding 5: a tool_choice whose tool was dropped ------------------------------------------------------

WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 1}
WEATHER = {"name": "get_weather", "description": "The weather", "input_schema": SCHEMA}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("target", ["oa", "rs"])
@pytest.mark.parametrize(("tools", "choice", "kept"), [
    ([WEB_SEARCH], {"type": "tool", "name": "web_search"}, False),
    ([WEB_SEARCH], {"type": "any", "disable_parallel_tool_use": True}, False),
    ([WEB_SEARCH], {"type": "auto"}, False),
    ([WEATHER, WEB_SEARCH], {"type": "tool", "name": "web_search"}, False),
    ([WEATHER, WEB_SEARCH], {"type": "tool", "name": "get_weather"}, True),
], ids=["names-server-tool", "any-without-tools", "auto-without-tools", "names-dropped-one", "names-kept-one"])
def test_a_tool_choice_naming_a_dropped_tool_is_dropped(clients, upstream, target, tools, choice, kept, stream):
    clients.messages(stream, model=target, messages=HELLO, tools=tools, tool_choice=choice)
    body = sent(upstream)
    assert problems(body, FORMAT[target]) == [], body
    assert ("tool_choice" in body) is kept, body
    assert (loss("dropped", "unsupported", "tool_choice") in clients.warnings()) is not kept
    if not kept:
        assert "parallel_tool_calls" not in body, body


# --- finding 12: empty content --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_empty_assistant_turn_stays_a_turn_for_a_responses_provider(clients, upstream, stream):
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": ""},
                {"role": "user", "content": "Are you there?"}]
    clients.chat(stream, model="rs", messages=messages)
    roles = [(item.get("role"), item.get("content")) for item in sent(upstream)["input"]]
    assert roles[1] == ("assistant", ""), roles
    assert [r for r, _ in roles] == ["user", "assistant", "user"], roles


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_lone_empty_user_message_is_text_for_responses_and_a_400_before_anthropic(clients, upstream, stream):
    lone = [{"role": "user", "content": ""}]
    clients.chat(stream, model="rs", messages=lone)
    body = sent(upstream)
    assert problems(body, "responses") == [] and body["input"][0]["content"] == "", body
    before = httpx.get(f"{upstream.url}/_mock/stats").json()["requests"]
    with pytest.raises(openai.BadRequestError) as refused:
        clients.chat(stream, model="an", messages=lone)
    assert refused.value.body["param"] == "messages" and refused.value.body["code"] == "invalid_value"
    assert httpx.get(f"{upstream.url}/_mock/stats").json()["requests"] == before


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_empty_user_content_never_reaches_anthropic(clients, upstream, stream):
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": ""}, {"role": "assistant", "content": "Still here"},
                {"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "Go on"}]}]
    clients.chat(stream, model="an", messages=messages)
    body = sent(upstream)
    assert problems(body, "anthropic") == [], body
    assert body["messages"][-1]["content"] == [{"type": "text", "text": "Go on"}], body
    assert loss("dropped", "empty", "messages[2]") in clients.warnings()
