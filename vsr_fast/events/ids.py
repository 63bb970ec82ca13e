"""A request's ids without a syscall each: random bits drawn from the OS in blocks.

``uuid.uuid4().hex`` and ``os.urandom(6)`` cost a getrandom call and (for the
uuid) an object per request; here one ``os.urandom`` call serves ``BLOCK``
requests. The ids are the same: a request id is a version-4 UUID's 32 hex
digits (122 random bits from the OS, version and variant set as RFC 4122 says),
a replay id 12 hex digits of milliseconds then 12 random ones. A forked child
starts with empty pools, so no two processes hand out the same bits.
"""
from __future__ import annotations

import os

BLOCK = 256
# Over a block of BLOCK 128-bit UUIDs at once (one big-integer AND and OR, not a Python loop per id):
# clear the version nibble and the variant's two bits, then set version 4 and variant RFC 4122.
_KEEP = int.from_bytes(bytes.fromhex("ffffffffffff0fff3fffffffffffffff") * BLOCK, "big")
_SET = int.from_bytes(bytes.fromhex("00000000000040008000000000000000") * BLOCK, "big")
_uuids: list[str] = []
_randoms: list[bytes] = []


def _fill_uuids() -> None:
    bits = int.from_bytes(os.urandom(16 * BLOCK), "big") & _KEEP | _SET
    digits = bits.to_bytes(16 * BLOCK, "big").hex()
    _uuids.extend([digits[i:i + 32] for i in range(0, 32 * BLOCK, 32)])


def _fill_randoms() -> None:
    raw = os.urandom(6 * BLOCK)
    _randoms.extend([raw[i:i + 6] for i in range(0, 6 * BLOCK, 6)])


def request_id() -> str:
    """A new request id: what ``uuid.uuid4().hex`` gives."""
    try:
        return _uuids.pop()
    except IndexError:              # empty (a list pop is atomic: two threads never get one id)
        _fill_uuids()
        return _uuids.pop()


def replay_id(ms: int) -> str:
    """A new 24-hex-digit replay id created at ``ms`` (epoch milliseconds): it sorts by creation time."""
    try:
        tail = _randoms.pop()
    except IndexError:
        _fill_randoms()
        tail = _randoms.pop()
    # ``f"{ms:012x}"`` and the 6 random bytes' hex, as one hex call (ms < 2**48: until the year 10889).
    return (ms.to_bytes(6, "big") + tail).hex()


def _forget() -> None:
    _uuids.clear()
    _randoms.clear()


os.register_at_fork(after_in_child=_forget)

__all__ = ["request_id", "replay_id"]
