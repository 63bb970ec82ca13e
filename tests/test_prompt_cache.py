"""prompt_cache's markers beside the client's own, on the Messages body as the dispatch hands it over: what
Anthropic would refuse (tests/provider_rules.py) never comes out of a body it accepted."""
from __future__ import annotations

import copy

import pytest

from vsr_fast.plugins.prompt_cache import PromptCache

from .provider_rules import problems

FIVE, HOUR = {"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}


def body(**extra) -> dict:
    return {"model": "m", "max_tokens": 8, "tools": [{"name": "t", "input_schema": {"type": "object"}}],
            "system": "Be brief.", "messages": [{"role": "user", "content": "hi"}], **extra}


def test_a_client_hour_marker_on_the_last_message_keeps_five_minute_markers_from_going_before_it():
    sent = body(messages=[{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": HOUR}]}])
    assert PromptCache(ttl="5m").apply(sent, "anthropic") is None
    assert problems(sent, "anthropic") == [] and "cache_control" not in sent["tools"][0]


def test_a_shorter_client_marker_shortens_the_markers_after_it_and_says_so():
    sent = body(system=[{"type": "text", "text": "Be brief.", "cache_control": FIVE}])
    change = PromptCache(ttl="1h").apply(sent, "anthropic")
    assert sent["tools"][0]["cache_control"] == HOUR, "before the client's 5m marker the 1h TTL stands"
    assert sent["messages"][0]["content"][0]["cache_control"] == FIVE
    assert change == "markers on tools, messages (5m, as the client's marker before it)"
    assert problems(sent, "anthropic") == []


@pytest.mark.parametrize("automatic", [FIVE, HOUR])
def test_a_top_level_automatic_marker_takes_a_slot_and_the_last_block(automatic):
    """Automatic caching marks the last block: another TTL there is a 400. It counts among the four."""
    sent = body(cache_control=automatic)
    PromptCache(ttl="1h").apply(sent, "anthropic")
    assert problems(sent, "anthropic") == []
    assert sent["messages"] == [{"role": "user", "content": "hi"}]
    assert sent["tools"][0]["cache_control"] == sent["system"][0]["cache_control"] == HOUR, "1h may precede 5m"

    full = body(cache_control=FIVE, tools=[{"name": f"t{i}", "cache_control": FIVE} for i in range(3)])
    before = copy.deepcopy(full)
    assert PromptCache(ttl="5m").apply(full, "anthropic") is None and full == before


def test_a_marker_ttl_the_plugin_cannot_read_stops_it_placing_any_around_it():
    sent = body(system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral", "ttl": "2h"}}])
    assert PromptCache(ttl="1h").apply(sent, "anthropic") is None


def test_prefer_prefix_retention_asks_each_api_to_keep_the_prefix_longer():
    from vsr_fast.plugins.prompt_cache import retain_prefix
    body: dict = {"messages": []}
    assert retain_prefix(body, "openai") == "prompt_cache_retention 24h" and body["prompt_cache_retention"] == "24h"
    own = {"prompt_cache_retention": "in-memory"}
    assert retain_prefix(own, "responses") is None and own["prompt_cache_retention"] == "in-memory"
    # Anthropic: every 5-minute marker (written or implied) becomes 1 hour, so no longer one follows a shorter one.
    msg = {"system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
           "messages": [{"role": "user", "content": [
               {"type": "text", "text": "a", "cache_control": {"type": "ephemeral", "ttl": "5m"}},
               {"type": "text", "text": "b", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}],
           "cache_control": {"type": "ephemeral"}}
    assert retain_prefix(msg, "anthropic") == "3 prompt-cache markers kept 1h"
    ttls = [msg["system"][0]["cache_control"]["ttl"], *(b["cache_control"]["ttl"] for b in msg["messages"][0]["content"]),
            msg["cache_control"]["ttl"]]
    assert ttls == ["1h", "1h", "1h", "1h"]
    assert retain_prefix({"messages": []}, "anthropic") is None
