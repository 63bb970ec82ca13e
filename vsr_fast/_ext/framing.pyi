"""The journal's frames of a batch in one buffer (C kernel: _ext/framing.pyx); journal.py's format, byte for byte."""

from collections.abc import Iterable
from typing import Final

from typing_extensions import Buffer

HEADER_SIZE: Final[int]  # 32: u32 length, u32 crc32, u64 index, 16 bytes space

def pack_many(items: Iterable[tuple[bytes, int, Buffer]]) -> bytes:
    """The frames of ``(space, index, payload)`` items, back to back: ``journal.pack_many``'s bytes.

    - ``space`` is 16 bytes (ValueError otherwise); ``index`` fits a u64 (OverflowError otherwise).
    - An empty payload is a 32-byte frame; no items give b"".
    - Batches of 64 KiB or more are framed without the GIL.
    """

def pack_fresh(items: Iterable[tuple[bytes, int, Buffer]], marks: dict[bytes, int]) -> tuple[bytes, int, dict[bytes, int]]:
    """``(frames, count, advanced)`` of the items whose index is above their space's mark: ``journal.pack_fresh``.

    - An item's mark is ``marks[space]`` (0 when absent) as moved by the earlier fresh items of the batch.
    - ``marks`` is not changed; ``advanced`` holds each space's new mark where one moved.
    """
