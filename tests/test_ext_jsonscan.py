"""The JSON nesting scan (C kernel) against its Python reference, and a hand-computed table."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vsr_fast._ext import _reference as ref
from vsr_fast._ext import jsonscan
from vsr_fast._ext.jsonscan import json_shape, nesting_depth

from .stubs import assert_surface_is_the_stub

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\u00e9😀'),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet='[]{}"\\k'), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(json_values, st.integers(0, 12))
def test_depth_matches_reference(value, limit):
    raw = json.dumps(value, ensure_ascii=False).encode()
    assert nesting_depth(raw, limit) == ref.nesting_depth(raw, limit)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.integers(0, 8))
def test_any_bytes_match_reference(raw, limit):
    # Not JSON at all: the scan still ends and agrees (a decoder refuses the text next).
    assert nesting_depth(raw, limit) == ref.nesting_depth(raw, limit)


@pytest.mark.parametrize(("raw", "depth"), [
    (b"", 0),
    (b"1", 0),
    (b"[]", 1),
    (b'{"a": [1, {"b": []}]}', 4),
    (b'{"a": "[[[{{{"}', 1),                 # brackets in strings do not count
    (b'["\\"[[", "\\\\", []]', 2),            # an escaped quote stays inside; "\\\\" ends its string
    (b'["unterminated [[[', 1),
    (b"]]]][", 0),                            # unbalanced: the scan does not validate
])
def test_depth_table(raw, depth):
    assert nesting_depth(raw, 100) == depth == ref.nesting_depth(raw, 100)


def test_stops_past_the_limit_on_a_very_deep_body():
    raw = b"[" * 200_000 + b"]" * 200_000
    assert nesting_depth(raw, 256) == 257 == ref.nesting_depth(raw, 256)
    assert nesting_depth(bytearray(raw), 300_000) == 200_000


def test_surface_is_the_stub():
    assert_surface_is_the_stub(jsonscan)


@settings(max_examples=400, deadline=None)
@given(json_values, st.integers(0, 12), st.integers(0, 40))
def test_shape_matches_reference(value, depth_limit, items_limit):
    raw = json.dumps(value, ensure_ascii=False).encode()
    assert json_shape(raw, depth_limit, items_limit) == ref.json_shape(raw, depth_limit, items_limit)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.integers(0, 8), st.integers(0, 8))
def test_shape_of_any_bytes_matches_reference(raw, depth_limit, items_limit):
    assert json_shape(raw, depth_limit, items_limit) == ref.json_shape(raw, depth_limit, items_limit)


@pytest.mark.parametrize(("raw", "limit", "shape"), [
    (b"", 10, (0, 0, -1)),
    (b'{"a": [1, 2], "b": "x"}', 10, (2, 4, 14)),        # {, [, two commas; "b" was the member last read
    (b'{"a": "[,{", "b": 1}', 10, (1, 2, 13)),           # brackets and commas in strings do not count
    (b'{"model": "m", "tools": [{}, {}, {}]}', 3, (3, 4, 15)),   # stopped inside "tools"
    (b'{"model": "m,", "tools": [{}]}', 1, (1, 2, 1)),   # stopped at the comma ending "model": not yet in "tools"
    (b"[1, 2, 3]", 1, (1, 2, -1)),                       # no object: no member named
])
def test_shape_table(raw, limit, shape):
    assert json_shape(raw, 100, limit) == shape == ref.json_shape(raw, 100, limit)
