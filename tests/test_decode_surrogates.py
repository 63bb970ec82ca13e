"""decode_body names a lone high surrogate escape as msgspec names a lone low one, and nothing else."""
from __future__ import annotations

import pytest

from vsr_fast.protocol.chat import REQUEST_DECODER
from vsr_fast.protocol.errors import BodyProblem, decode_body

HEAD = b'{"model": "m", "messages": [{"role": "user", "content": "'
BS = b"\\"


def detail(raw: bytes) -> str:
    with pytest.raises(BodyProblem) as info:
        decode_body(REQUEST_DECODER, raw)
    return info.value.problem.detail


@pytest.mark.parametrize("after", [b"b", b"", BS + b"n", b"bcdefghijk", b"x" * 100])
def test_a_lone_high_surrogate_is_an_invalid_pair_at_the_byte_after_it(after):
    raw = HEAD + b"a" + BS + b"ud800" + after + b'"}]}'
    at = len(HEAD) + 7
    assert detail(raw) == f"JSON is malformed: invalid utf-16 surrogate pair (byte {at})"


def test_in_a_field_that_is_skipped_too():
    raw = b'{"x": "' + BS + b'udbff!", ' + HEAD[1:] + b'hi"}]}'
    assert detail(raw) == "JSON is malformed: invalid utf-16 surrogate pair (byte 13)"


def test_the_first_lone_one_after_a_whole_pair_and_an_escaped_backslash():
    text = BS + b"ud83d" + BS + b"ude00" + BS + BS + b"ud800" + BS + b"ud800."
    raw = HEAD + text + b'"}]}'
    assert detail(raw) == f"JSON is malformed: invalid utf-16 surrogate pair (byte {len(HEAD) + len(text) - 1})"


@pytest.mark.parametrize("cut", [b"", BS, BS + b"u", BS + b"udc0"])
def test_a_body_cut_off_after_a_high_surrogate_is_still_truncated(cut):
    assert detail(HEAD + b"a" + BS + b"ud800" + cut) == "Input data was truncated"


def test_other_errors_keep_msgspecs_words():
    assert detail(HEAD + b"a") == "Input data was truncated"
    assert detail(HEAD + BS + b'u12"}]}').startswith("JSON is malformed: invalid character in unicode escape")
    assert decode_body(REQUEST_DECODER, HEAD + BS + BS + b'ud800"}]}').messages[0].content == "\\ud800"
