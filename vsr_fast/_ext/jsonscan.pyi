"""A scan of raw JSON text before any decoder reads it (C kernel: _ext/jsonscan.pyx)."""

from typing_extensions import Buffer

def nesting_depth(data: Buffer, limit: int) -> int:
    """The deepest nesting of arrays and objects in JSON text `data`, or `limit` + 1 as soon
    as it is known to exceed `limit`. Brackets inside strings do not count; the text is
    not validated (a decoder does that next). Bytes or any contiguous byte buffer."""
