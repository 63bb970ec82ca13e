"""The JSON scan (C kernel: nesting, items, keys named twice, the path to an offset) against its Python
reference, and hand-computed tables."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vsr_fast._ext import _reference as ref
from vsr_fast._ext import jsonscan
from vsr_fast._ext.jsonscan import json_path, json_shape, nesting_depth

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
    (b"", 10, (0, 0, -1, -1)),
    (b'{"a": [1, 2], "b": "x"}', 10, (2, 4, 14, -1)),        # {, [, two commas; "b" was the member last read
    (b'{"a": "[,{", "b": 1}', 10, (1, 2, 13, -1)),           # brackets and commas in strings do not count
    (b'{"model": "m", "tools": [{}, {}, {}]}', 3, (3, 4, 15, -1)),   # stopped inside "tools"
    (b'{"model": "m,", "tools": [{}]}', 1, (1, 2, 1, -1)),   # stopped at the comma ending "model": not yet in "tools"
    (b"[1, 2, 3]", 1, (1, 2, -1, -1)),                       # no object: no member named
])
def test_shape_table(raw, limit, shape):
    assert json_shape(raw, 100, limit) == shape == ref.json_shape(raw, 100, limit)


# --- keys named twice -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "repeated"), [
    # the body, the key found named twice (its last occurrence), or None
    (b'{"a": 1, "a": 2}', b'"a"'),
    (b'{"a": 1, "\\u0061": 2}', b'"\\u0061"'),                   # one key once unescaped
    (b'{"\\ud83d\\ude00": 1, "\xf0\x9f\x98\x80": 2}', b'"\xf0'),    # a surrogate pair is its UTF-8 character
    (b'{"a\\"": 1, "a\\u0022": 2}', b'"a\\u0022"'),
    (b'{"a\\\\": 1, "a\\u005c": 2}', b'"a\\u005c"'),
    (b'{"a": 1, "ab": 2, "A": 3}', None),
    (b'{"a": {"b": 1}, "c": {"b": 2}}', None),                 # one key in two objects
    (b'[{"x": 1}, {"x": 1}]', None),
    (b'{"a": {"b": 1, "c": {"b": 1}}, "a": 0}', b'"a"'),       # the outer object's own keys, past a nested one
    (b'{"m": [{"role": "user", "content": "x", "content": "y"}]}', b'"content"'),
    (b'{"a": "b", "b": "a"}', None),                           # a value is no key
    (b'{"a": 1, "a', None),                                    # an unterminated key is the decoder's to refuse
])
def test_repeated_keys_table(raw, repeated):
    expected = -1 if repeated is None else raw.rindex(repeated)
    assert json_shape(raw, 100, 100)[3] == expected == ref.json_shape(raw, 100, 100)[3]


def test_an_object_of_many_keys_is_hashed_and_still_exact():
    # Past the keys compared one by one (16): the rest in a hash table, a closed object's keys dropped.
    keys = [b'"k%d": %d' % (i, i) for i in range(5000)]
    inner = b"{" + b", ".join(keys) + b"}"
    raw = b'{"a": [' + b", ".join([inner] * 3) + b'], "k1": 1, "z": ' + inner[:-1] + b', "\\u006b4999": 0}'
    shape = json_shape(raw, 256, 10**6)
    assert shape[3] == raw.rindex(b'"\\u006b4999"') and shape == ref.json_shape(raw, 256, 10**6)
    assert json_shape(raw[:raw.rindex(b", ")] + b"}", 256, 10**6)[3] == -1
    # Objects of 17 keys one after another: each past the direct compares, the closed ones' keys dropped.
    many = b"[" + b", ".join([b"{" + b", ".join(keys[:17]) + b"}"] * 2000) + b", {" + b", ".join(keys[:17]) + \
        b', "k3": 0}]'
    assert json_shape(many, 256, 10**6) == ref.json_shape(many, 256, 10**6)
    assert json_shape(many, 256, 10**6)[3] == many.rindex(b'"k3"')


def _text(value, escape) -> str:
    """JSON text of ``value`` whose objects are lists of (key, value) pairs: keys may repeat, and are escaped
    where ``escape`` says (``\\uXXXX`` for every character)."""
    if isinstance(value, tuple):
        key, inner = value
        if escape:
            key = "".join(f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else json.dumps(ch) [1:-1] for ch in key)
            return f'"{key}": {_text(inner, escape)}'
        return f"{json.dumps(key, ensure_ascii=False)}: {_text(inner, escape)}"
    if isinstance(value, list) and value and all(isinstance(v, tuple) for v in value):
        return "{" + ", ".join(_text(v, escape) for v in value) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_text(v, escape) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


pair_values = st.recursive(
    st.none() | st.integers() | st.text(alphabet='[]{}"\\ab\u00e9😀', max_size=4),
    lambda inner: st.lists(inner, max_size=4)
    | st.lists(st.tuples(st.text(alphabet='ab"\\é😀', max_size=2), inner), min_size=1, max_size=5),
    max_leaves=30,
)


def _has_repeat(text: str) -> bool:
    found = []
    json.loads(text, object_pairs_hook=lambda pairs: found.append(len({k for k, _ in pairs}) < len(pairs)))
    return any(found)


@settings(max_examples=400, deadline=None)
@given(pair_values, st.booleans())
def test_repeated_keys_match_reference_and_json(value, escape):
    raw = _text(value, escape).encode()
    shape = json_shape(raw, 256, 10**6)
    assert shape == ref.json_shape(raw, 256, 10**6)
    assert (shape[3] >= 0) == _has_repeat(raw.decode())


# --- the path to an offset --------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "at", "path"), [
    (b'{"model": "m", "messages": [{"role": "user", "content": "x", "content": "y"}]}', b'"content": "y"',
     [(15,), 0, (61,)]),
    (b'{"a": [1, 2, [3, "\xff"]]}', b"\xff", [(1,), 2, 1]),
    (b'{"a": {', b"{", [(1,), (-1,)]),                        # an object no key of which is read yet
    (b'"x"', b"x", []),
])
def test_path_table(raw, at, path):
    offset = raw.rindex(at)
    assert json_path(raw, offset) == path == ref.json_path(raw, offset)


@settings(max_examples=300, deadline=None)
@given(pair_values, st.booleans(), st.integers(0, 400))
def test_path_matches_reference(value, escape, offset):
    raw = _text(value, escape).encode()
    assert json_path(raw, offset) == ref.json_path(raw, offset)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.integers(0, 64))
def test_path_and_repeats_of_any_bytes_match_reference(raw, offset):
    assert json_path(raw, offset) == ref.json_path(raw, offset)
    assert json_shape(raw, 8, 64) == ref.json_shape(raw, 8, 64)
