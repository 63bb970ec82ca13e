"""UTF-8-safe byte windows and the routing view of a long input (C kernel: _ext/windows.pyx)."""

from typing import Final

import numpy as np
import numpy.typing as npt
from typing_extensions import Buffer

OMISSION_PREFIX: Final[bytes]  # b"[... "
OMISSION_SUFFIX: Final[bytes]  # b" tokens omitted ...]"
BYTES_PER_TOKEN: Final[int]  # 4: the spec counts a token as four bytes
ROUTING_VIEW_MIN_BYTES: Final[int]  # 64: room for the longest marker

def byte_windows(data: Buffer, size: int, overlap: int) -> npt.NDArray[np.int64]:
    """Windows of UTF-8 `data` as an int64 array of shape (n, 2): [start, end) byte offsets.

    - Cuts only at code-point boundaries; windows are in order and cover data whole.
    - Each window takes as many whole code points as fit in `size` bytes; a code
      point longer than `size` (size < 4) is a window of its own.
    - The next window starts `overlap` bytes before the previous end, moved back to
      a boundary (so the overlap is overlap..overlap+3 bytes), unless it could then
      not hold the code point after the previous end (size - overlap tiny): then
      it starts as late as that needs, and never at or before the previous start.
    - Empty data gives shape (0, 2). Invalid UTF-8 is cut anywhere, still covered.
    Raises ValueError unless size >= 1 and 0 <= overlap < size.
    """

def routing_view_offsets(data: Buffer, budget_bytes: int, head_share: float = 0.25) -> tuple[int, int, int]:
    """(head_end, tail_start, omitted_tokens): the view is data[:head_end] + marker + data[tail_start:].

    (len, len, 0) when data fits the budget. See routing_view for the rules.
    """

def routing_view(data: bytes, budget_bytes: int, head_share: float = 0.25) -> bytes:
    """The routing view of a long turn (spec: system-one-performance-and-cost.md, "Long inputs").

    - data of at most budget_bytes is returned unchanged (the same object).
    - Otherwise head + b"[... N tokens omitted ...]" + tail, at most budget_bytes in
      all: the marker counts against the budget (its digits reserved for the
      largest possible N), the head takes floor(head_share * the rest) and the
      tail the remainder; the head's end moves back and the tail's start forward
      to code-point boundaries. N = ceil(omitted bytes / 4): rounded up so a view
      that dropped bytes never says 0. No separator is added around the marker.
    Raises ValueError unless budget_bytes >= ROUTING_VIEW_MIN_BYTES and 0 <= head_share <= 1.
    """
