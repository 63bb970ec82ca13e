"""A scan of raw JSON text before any decoder reads it (C kernel: _ext/jsonscan.pyx)."""

from typing_extensions import Buffer

def nesting_depth(data: Buffer, limit: int) -> int:
    """The deepest nesting of arrays and objects in JSON text `data`, or `limit` + 1 as soon
    as it is known to exceed `limit`. Brackets inside strings do not count; the text is
    not validated (a decoder does that next). Bytes or any contiguous byte buffer."""

def json_shape(data: Buffer, depth_limit: int, items_limit: int) -> tuple[int, int, int, int]:
    """`(deepest, items, key, repeated)` of JSON text `data`: its deepest nesting, its items (arrays, objects
    and commas outside strings), the offset of the opening quote of the top-level member the scan was in when
    it stopped (-1 if none), and that of the first key its object names twice, unescaped text compared (-1 if
    none). The scan stops as soon as the depth passes `depth_limit`, the items `items_limit` (either is then
    the limit + 1) or at that key. Not validated, as `nesting_depth`."""

def json_path(data: Buffer, offset: int) -> list[int | tuple[int]]:
    """Where `offset` is in JSON text `data`: for each array or object it is inside, outermost first, the
    element's index (`int`) or the offset of the opening quote of the member's key (a 1-tuple; -1 before
    any); a key at `offset` is its own member. Not validated, as `nesting_depth`."""
