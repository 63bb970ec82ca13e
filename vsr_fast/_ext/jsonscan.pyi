"""A scan of raw JSON text before any decoder reads it (C kernel: _ext/jsonscan.pyx)."""

from typing_extensions import Buffer

def nesting_depth(data: Buffer, limit: int) -> int:
    """The deepest nesting of arrays and objects in JSON text `data`, or `limit` + 1 as soon
    as it is known to exceed `limit`. Brackets inside strings do not count; the text is
    not validated (a decoder does that next). Bytes or any contiguous byte buffer."""

def json_shape(data: Buffer, depth_limit: int, items_limit: int) -> tuple[int, int, int]:
    """`(deepest, items, key)` of JSON text `data`: its deepest nesting, its items (arrays, objects and
    commas outside strings), and the offset of the opening quote of the top-level member the scan was
    in when it stopped (-1 if none). The scan stops as soon as the depth passes `depth_limit` or the
    items `items_limit`, so either is then the limit + 1. Not validated, as `nesting_depth`."""
