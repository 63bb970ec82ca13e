"""The JSON nesting scan (C kernel) against its Python reference, and a hand-computed table."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vsr_fast._ext import _reference as ref
from vsr_fast._ext import jsonscan
from vsr_fast._ext.jsonscan import nesting_depth

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
