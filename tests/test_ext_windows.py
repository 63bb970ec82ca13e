"""vsr_fast._ext.windows: parity with the pure-Python reference, and the properties
the guard and the routing view rely on (valid UTF-8 cuts, coverage, overlap, budget)."""

import re

import numpy as np
import pytest

from .stubs import assert_surface_is_the_stub
from hypothesis import given, settings
from hypothesis import strategies as st

from vsr_fast._ext import _reference as ref
from vsr_fast._ext import windows

MODULE = windows

# Any UTF-8 character, often from the scripts that break naive byte cuts.
CHARS = st.one_of(
    st.characters(codec="utf-8"),
    st.sampled_from(list("aé中文日本語한국어😀👍🏽🇫🇷\u0301\u0300ß\n ")),
)
TEXT = st.text(CHARS, max_size=200).map(str.encode)
MARKER = re.compile(rb"\[\.\.\. (\d+) tokens omitted \.\.\.\]")


def char_starts(data: bytes) -> list[int]:
    """Byte offset of every code point, plus len(data): the only legal cuts."""
    offsets = [0]
    for ch in data.decode():
        offsets.append(offsets[-1] + len(ch.encode()))
    return offsets


def char_end(data: bytes, i: int) -> int:
    """End of the code point that starts at byte i."""
    return i + len(data[i:i + 4].decode(errors="ignore")[:1].encode())


def check_windows(data: bytes, size: int, overlap: int) -> np.ndarray:
    got = windows.byte_windows(data, size, overlap)
    assert got.dtype == np.int64 and got.ndim == 2 and got.shape[1] == 2
    assert got.tolist() == [list(w) for w in ref.byte_windows(data, size, overlap)]
    if not data:
        assert got.shape == (0, 2)
        return got
    legal = set(char_starts(data))
    pairs = [tuple(w) for w in got.tolist()]
    assert pairs[0][0] == 0 and pairs[-1][1] == len(data)
    for start, end in pairs:
        assert start in legal and end in legal and start < end
        piece = data[start:end].decode()  # raises if a cut split a character
        assert end - start <= size or len(piece) == 1
        # As long as it can be: the next character would not fit.
        assert end == len(data) or char_end(data, end) - start > size
    for (s0, e0), (s1, e1) in zip(pairs, pairs[1:]):
        assert s0 < s1 <= e0 < e1  # in order, no gap, each window adds text
        got_overlap = e0 - s1
        assert got_overlap <= overlap + 3
        if got_overlap < overlap:
            # Only when starting one character earlier would not have left room
            # for the character after the previous window, or would not progress.
            earlier = max(b for b in legal if b < s1)
            assert earlier <= s0 or char_end(data, e0) - earlier > size
    return got


@settings(max_examples=300, deadline=None)
@given(TEXT, st.integers(1, 64), st.data())
def test_byte_windows_properties_and_parity(data, size, draw):
    overlap = draw.draw(st.integers(0, size - 1))
    check_windows(data, size, overlap)


@pytest.mark.parametrize(
    ("text", "size", "overlap", "expected"),
    [
        ("", 4, 0, []),
        ("abc", 10, 3, [(0, 3)]),
        ("abcd", 2, 1, [(0, 2), (1, 3), (2, 4)]),
        ("abcd", 1, 0, [(0, 1), (1, 2), (2, 3), (3, 4)]),
        # A 4-byte emoji in 1-byte windows: one whole code point each.
        ("😀😀", 1, 0, [(0, 4), (4, 8)]),
        ("😀😀a", 3, 2, [(0, 4), (4, 8), (8, 9)]),
        # 3-byte CJK in 4-byte windows: one character a window; no overlap fits.
        ("中文字", 4, 1, [(0, 3), (3, 6), (6, 9)]),
        ("é" * 4, 5, 2, [(0, 4), (2, 6), (4, 8)]),
    ],
)
def test_byte_windows_table(text, size, overlap, expected):
    got = check_windows(text.encode(), size, overlap)
    assert [tuple(w) for w in got.tolist()] == expected


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (-1, 0), (4, 4), (4, 5), (4, -1)])
def test_byte_windows_rejects_bad_arguments(size, overlap):
    with pytest.raises(ValueError):
        windows.byte_windows(b"abc", size, overlap)
    with pytest.raises(ValueError):
        ref.byte_windows(b"abc", size, overlap)


def test_byte_windows_one_megabyte():
    unit = "Routing 路由 😀 ünïcode text, line after line.\n".encode()
    data = unit * (2**20 // len(unit) + 1)
    got = check_windows(data, 32768, 2048)
    assert 30 < len(got) < 40


def test_byte_windows_accepts_buffers_and_survives_invalid_utf8():
    assert windows.byte_windows(bytearray(b"abcd"), 2, 0).tolist() == [[0, 2], [2, 4]]
    assert windows.byte_windows(memoryview(b"abcd"), 3, 1).tolist() == [[0, 3], [2, 4]]
    junk = b"\x80" * 50 + b"\xf0\x9f" + b"abc" + b"\xff" * 9
    got = windows.byte_windows(junk, 4, 1).tolist()
    assert got[0][0] == 0 and got[-1][1] == len(junk)
    assert all(s0 < s1 <= e0 < e1 for (s0, e0), (s1, e1) in zip(got, got[1:]))


# ------------------------------------------------------------------ routing view

def check_view(data: bytes, budget: int, head_share: float) -> bytes:
    offsets = windows.routing_view_offsets(data, budget, head_share)
    assert offsets == ref.routing_view_offsets(data, budget, head_share)
    view = windows.routing_view(data, budget, head_share)
    assert view == ref.routing_view(data, budget, head_share)
    head_end, tail_start, omitted = offsets
    if len(data) <= budget:
        assert view is data and offsets == (len(data), len(data), 0)
        return view
    assert len(view) <= budget
    view.decode()  # both cuts on code-point boundaries
    (count,) = MARKER.findall(view)
    assert int(count) == omitted == -(-(tail_start - head_end) // 4) >= 1
    assert view == data[:head_end] + b"[... %d tokens omitted ...]" % omitted + data[tail_start:]
    # The head is head_share of what the marker leaves, give or take a cut.
    avail = budget - len(b"[...  tokens omitted ...]") - len(str(-(-len(data) // 4)))
    assert int(avail * head_share) - 3 <= head_end <= int(avail * head_share)
    assert avail - int(avail * head_share) - 3 <= len(data) - tail_start <= avail - int(avail * head_share)
    return view


@settings(max_examples=300, deadline=None)
@given(TEXT, st.integers(64, 400), st.floats(0.0, 1.0))
def test_routing_view_properties_and_parity(data, budget, head_share):
    check_view(data * 3, budget, head_share)


def test_routing_view_spec_example():
    # Omitting 164,000 bytes reads as the spec's "[... 41000 tokens omitted ...]".
    avail = 32768 - len(b"[... 49185 tokens omitted ...]")
    data = b"x" * (164_000 + avail)
    view = check_view(data, 32768, 0.25)
    assert b"[... 41000 tokens omitted ...]" in view
    assert view.index(b"[...") == int(avail * 0.25)


@pytest.mark.parametrize("head_share", [0.0, 1.0])
def test_routing_view_all_head_or_all_tail(head_share):
    data = ("中" * 1000).encode()
    view = check_view(data, 1024, head_share)
    assert view.startswith(b"[...") if head_share == 0.0 else view.endswith(b"...]")


def test_routing_view_fits_unchanged_and_one_megabyte():
    data = "😀 tail-heavy instruction".encode() * 10
    assert windows.routing_view(data, len(data), 0.25) is data
    big = ("log line ünïcode 路由 " * 60_000).encode()[: 2**20]
    big = big[: len(big.decode(errors="ignore").encode())]
    check_view(big, 32768, 0.25)


@pytest.mark.parametrize(("budget", "head_share"), [(63, 0.25), (0, 0.25), (1024, -0.1), (1024, 1.5), (1024, float("nan"))])
def test_routing_view_rejects_bad_arguments(budget, head_share):
    with pytest.raises(ValueError):
        windows.routing_view(b"x" * 2000, budget, head_share)
    with pytest.raises(ValueError):
        windows.routing_view_offsets(b"x" * 2000, budget, head_share)
    with pytest.raises(ValueError):
        ref.routing_view(b"x" * 2000, budget, head_share)


def test_routing_view_constants_match_the_spec():
    assert windows.OMISSION_PREFIX + b"41000" + windows.OMISSION_SUFFIX == b"[... 41000 tokens omitted ...]"
    assert windows.BYTES_PER_TOKEN == 4
    assert windows.ROUTING_VIEW_MIN_BYTES == 64


def test_public_surface_is_the_stub():
    assert_surface_is_the_stub(MODULE)
