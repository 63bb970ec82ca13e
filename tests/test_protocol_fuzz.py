"""No client input becomes a 5xx: bodies with any JSON value in any field, through every step.

Each case starts from a valid request of a client API and puts another JSON value at one of
its fields, down to six keys deep: each of a list of confusing values (a sweep), and any
value hypothesis draws. Whatever decodes must then give a
canonical request and a body for every backend format, or fail with one of our errors
(a 4xx the client reads); any other exception would be a 500 from the gateway.
"""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vsr_fast.errors import VsrError
from vsr_fast.protocol.adapters import make_adapters
from vsr_fast.protocol.responses import MemoryResponseStore

ADAPTERS = make_adapters(MemoryResponseStore())
FORMATS = ("openai", "anthropic", "responses", "images")
BASE = {
    "chat": {"model": "m", "messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": [
            {"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,AA", "filename": "a.pdf"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "tool_choice": "auto", "stop": ["x"], "response_format": {"type": "json_object"}},
    "messages": {"model": "m", "max_tokens": 8, "system": "s", "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}},
            {"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}, "title": "a"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "system", "content": "mid"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}]}],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "auto"},
        "metadata": {"user_id": "u"}},
    "responses": {"model": "m", "instructions": "s", "input": [
        {"type": "additional_tools", "tools": [{"type": "namespace", "name": "ns", "tools": [
            {"type": "custom", "name": "c", "format": {"type": "grammar", "syntax": "lark", "definition": "x"}}]}]},
        {"role": "user", "content": [{"type": "input_text", "text": "hi"},
                                     {"type": "input_image", "image_url": "data:image/png;base64,AA"},
                                     {"type": "input_file", "file_data": "data:application/pdf;base64,AA"}]},
        {"type": "custom_tool_call", "call_id": "k1", "name": "c", "namespace": "ns", "input": "x"},
        {"type": "custom_tool_call_output", "call_id": "k1", "output": "r"}],
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        "tool_choice": {"type": "custom", "name": "c"}, "text": {"format": {"type": "json_object"}},
        "reasoning": {"effort": "low"}},
    "images": {"model": "m", "prompt": "a cat", "n": 1, "size": "1024x1024"},
}

# Strings the readers compare against, so that generated values take their branches.
WORDS = ["function", "custom", "namespace", "text", "json_schema", "json_object", "grammar", "base64", "url",
         "user", "assistant", "system", "tool", "auto", "required", "image", "input_text", "message",
         "data:image/png;base64,AA", "data:application/pdf;base64,AA"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6) | st.sampled_from(WORDS),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ["type", "name", "text", "content", "function", "json_schema", "file_data", "input", "tools", "role"]),
        inner, max_size=3),
    max_leaves=8,
)


def paths(doc, prefix=()):
    """Every place a value sits in ``doc``, down to six keys deep."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        yield (*prefix, key)
        if len(prefix) < 5:
            yield from paths(value, (*prefix, key))


def put(doc, path, value):
    doc = json.loads(json.dumps(doc))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


def exercise(api: str, raw: bytes) -> None:
    adapter = ADAPTERS[api]
    try:
        req = adapter.decode(raw)
        adapter.canonical(req)
    except VsrError as exc:
        assert exc.status < 500, exc
        return
    for fmt in FORMATS:
        try:
            adapter.upstream(req, fmt, "u")
            adapter.stream_translator(req, fmt)
        except VsrError as exc:
            assert exc.status < 500, exc


CASES = [(api, path) for api, doc in BASE.items() for path in paths(doc)]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CASES), json_values)
def test_any_value_anywhere_is_served_or_refused_with_a_4xx(case, value):
    api, path = case
    exercise(api, json.dumps(put(BASE[api], path, value)).encode())


# Values that confuse a reader expecting another type, or a dict of the wrong inner types.
CONFUSING = [None, True, 0, -1, 1.5, "", "x", "function", "data:image/png;base64,AA", [], [None], [1], {},
             {"type": "function", "function": "x"}, {"type": "function", "name": 1},
             {"type": "json_schema", "json_schema": "x"}, {"type": "custom", "name": "c", "namespace": 1},
             {"type": "grammar", "syntax": 1, "definition": None}, {"type": "text", "text": 1},
             {"type": "base64", "media_type": 1, "data": 2}, {"file_data": 1, "file_id": [], "filename": {}}]


def test_every_field_with_every_confusing_value():
    """The deterministic sweep: each field of each API, each value above."""
    for api, path in CASES:
        for value in CONFUSING:
            exercise(api, json.dumps(put(BASE[api], path, value)).encode())


def test_the_base_requests_are_valid():
    for api, doc in BASE.items():
        req = ADAPTERS[api].decode(json.dumps(doc).encode())
        ADAPTERS[api].canonical(req)
