# cython: language_level=3
"""UTF-8-safe byte windows and the routing view of a long input.

Both work on UTF-8 bytes and only ever cut at code-point boundaries. Guard rules
scan an input in overlapping windows (`byte_windows`); routing rules read a
bounded head-and-tail view (`routing_view`), as the spec's "Long inputs"
section describes (system-one-performance-and-cost.md).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int64_t
from libc.stdio cimport snprintf
from libc.string cimport memcpy

import numpy as np

from _text cimport is_cont

__all__ = [
    "BYTES_PER_TOKEN",
    "OMISSION_PREFIX",
    "OMISSION_SUFFIX",
    "ROUTING_VIEW_MIN_BYTES",
    "byte_windows",
    "routing_view",
    "routing_view_offsets",
]

# The marker's text is the spec's: "[... 41000 tokens omitted ...]".
OMISSION_PREFIX = b"[... "
OMISSION_SUFFIX = b" tokens omitted ...]"
cdef enum:
    # A token counts as four bytes (the spec: "A token ... counts as four bytes").
    _BYTES_PER_TOKEN = 4
    _MARKER_FIXED = 25  # len(OMISSION_PREFIX) + len(OMISSION_SUFFIX)

BYTES_PER_TOKEN = _BYTES_PER_TOKEN
# The longest marker (19 digits: any count a Py_ssize_t can hold) is 44 bytes, so
# a budget of 64 always leaves room for text besides the marker. The spec's own
# floor, 256 tokens, is 1,024 bytes.
ROUTING_VIEW_MIN_BYTES = 64


cdef Py_ssize_t _walk(const unsigned char* p, Py_ssize_t n, Py_ssize_t size,
                      Py_ssize_t overlap, int64_t* out) noexcept nogil:
    """Count the windows of p[:n] and, when out is not NULL, write their bounds.

    Valid UTF-8 never needs more than 3 steps to reach a boundary; the step
    limits keep invalid input (long runs of continuation bytes) linear.
    """
    cdef Py_ssize_t start = 0, end, nxt, lo, steps, count = 0
    if n == 0:
        return 0
    while True:
        if n - start <= size:
            end = n
        else:
            end = start + size
            steps = 0
            while end > start and steps < 3 and is_cont(p[end]):
                end -= 1
                steps += 1
            if end == start:
                # size is smaller than the code point at start: take it whole.
                end = start + 1
                while end < n and end - start < 4 and is_cont(p[end]):
                    end += 1
        if out != NULL:
            out[2 * count] = start
            out[2 * count + 1] = end
        count += 1
        if end >= n:
            return count
        # Back to a boundary, so the overlap is at least the one asked for
        # (text across the cut is read whole), at most 3 bytes more.
        nxt = end - overlap
        steps = 0
        while nxt > start and steps < 3 and is_cont(p[nxt]):
            nxt -= 1
            steps += 1
        # The next window must still hold the code point at `end`, or it would
        # add nothing: with a tiny size - overlap this shortens the overlap.
        lo = end + 1
        while lo < n and lo - end < 4 and is_cont(p[lo]):
            lo += 1
        lo -= size
        if nxt < lo:
            nxt = lo if lo < end else end
            steps = 0
            while nxt < end and steps < 3 and is_cont(p[nxt]):
                nxt += 1
                steps += 1
        if nxt <= start:
            # The overlap would stall the walk: advance by one code point.
            nxt = start + 1
            while nxt < end and is_cont(p[nxt]):
                nxt += 1
        start = nxt


def byte_windows(const unsigned char[::1] data not None, Py_ssize_t size, Py_ssize_t overlap):
    """Split UTF-8 bytes into windows of at most `size` bytes, cut at code-point boundaries.

    Returns an int64 array of shape (n, 2) of [start, end) byte offsets; see windows.pyi.
    """
    if size < 1:
        raise ValueError(f"size must be >= 1 byte, got {size}")
    if overlap < 0 or overlap >= size:
        raise ValueError(f"overlap must be in [0, size), got {overlap} for size {size}")
    cdef const unsigned char* p = &data[0] if data.shape[0] else NULL
    cdef Py_ssize_t n = data.shape[0], count
    with nogil:
        count = _walk(p, n, size, overlap, NULL)
    result = np.empty((count, 2), dtype=np.int64)
    cdef int64_t[:, ::1] out = result
    if count:
        with nogil:
            _walk(p, n, size, overlap, &out[0, 0])
    return result


cdef Py_ssize_t _decimal_digits(Py_ssize_t v) noexcept nogil:
    cdef Py_ssize_t d = 1
    while v >= 10:
        v //= 10
        d += 1
    return d


cdef void _view_offsets(const unsigned char* p, Py_ssize_t n, Py_ssize_t budget,
                        double head_share, Py_ssize_t* head_end, Py_ssize_t* tail_start,
                        Py_ssize_t* omitted_tokens) noexcept nogil:
    cdef Py_ssize_t reserve, avail, head, tail, steps
    if n <= budget:
        head_end[0], tail_start[0], omitted_tokens[0] = n, n, 0
        return
    # The marker counts against the budget, so a view never exceeds it (the spec
    # sizes views so that none overruns the model). Its digits are reserved for
    # the largest count possible, ceil(n / 4); the real count is never larger.
    reserve = _MARKER_FIXED + _decimal_digits((n + _BYTES_PER_TOKEN - 1) // _BYTES_PER_TOKEN)
    avail = budget - reserve
    head = <Py_ssize_t>(avail * head_share)
    tail = n - (avail - head)
    steps = 0
    while head > 0 and steps < 3 and is_cont(p[head]):
        head -= 1
        steps += 1
    steps = 0
    while tail < n and steps < 3 and is_cont(p[tail]):
        tail += 1
        steps += 1
    head_end[0], tail_start[0] = head, tail
    # Rounded up, so a view that dropped any byte never reports 0 tokens omitted.
    omitted_tokens[0] = (tail - head + _BYTES_PER_TOKEN - 1) // _BYTES_PER_TOKEN


cdef _check_view_args(Py_ssize_t budget_bytes, double head_share):
    if budget_bytes < ROUTING_VIEW_MIN_BYTES:
        raise ValueError(
            f"budget_bytes must be >= {ROUTING_VIEW_MIN_BYTES} (room for the marker), got {budget_bytes}"
        )
    if not (0.0 <= head_share <= 1.0):  # also rejects NaN
        raise ValueError(f"head_share must be in [0, 1], got {head_share}")


def routing_view_offsets(const unsigned char[::1] data not None, Py_ssize_t budget_bytes,
                         double head_share=0.25):
    """Return (head_end, tail_start, omitted_tokens) of the routing view of `data`.

    The view is data[:head_end] + marker + data[tail_start:]; (n, n, 0) when it fits.
    """
    _check_view_args(budget_bytes, head_share)
    cdef const unsigned char* p = &data[0] if data.shape[0] else NULL
    cdef Py_ssize_t head_end, tail_start, omitted
    _view_offsets(p, data.shape[0], budget_bytes, head_share, &head_end, &tail_start, &omitted)
    return head_end, tail_start, omitted


def routing_view(bytes data not None, Py_ssize_t budget_bytes, double head_share=0.25):
    """Head and tail of `data` around "[... N tokens omitted ...]", within budget_bytes.

    Input that fits is returned unchanged (the same object); N rounds up.
    """
    _check_view_args(budget_bytes, head_share)
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data), head_end, tail_start, omitted
    cdef Py_ssize_t marker_len, tail_len
    cdef char marker[64]
    _view_offsets(p, n, budget_bytes, head_share, &head_end, &tail_start, &omitted)
    if omitted == 0:
        return data
    marker_len = snprintf(marker, sizeof(marker), b"[... %zd tokens omitted ...]", omitted)
    tail_len = n - tail_start
    view = PyBytes_FromStringAndSize(NULL, head_end + marker_len + tail_len)
    cdef char* out = PyBytes_AS_STRING(view)
    with nogil:
        memcpy(out, p, head_end)
        memcpy(out + head_end, marker, marker_len)
        memcpy(out + head_end + marker_len, p + tail_start, tail_len)
    return view
