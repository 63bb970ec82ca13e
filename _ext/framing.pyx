# cython: language_level=3
"""The journal's frames of a batch (events/journal.py's format), built in one buffer.

A frame is ``u32 payload length | u32 crc32(space, index, payload) | u64 index | 16 bytes space | payload``,
little-endian; ``journal.pack_many`` is the pure-Python definition and the reference these must equal byte for
byte (tests/test_events_framing.py). Python spent ~2 µs a frame on it (a struct pack for the crc's prefix,
two crc32 calls, a struct pack for the header, a join); here it is one pass to size the batch, one allocation
and one pass of memcpy and zlib's crc32. The second pass runs without the GIL when the batch is large enough
for the request path to gain from it (a few hundred bytes is less work than handing the GIL over and back).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

cdef extern from "zlib.h" nogil:
    unsigned long crc32(unsigned long crc, const unsigned char* buf, unsigned int length)

__all__ = ["HEADER_SIZE", "pack_fresh", "pack_many"]

HEADER_SIZE = 32
cdef enum:
    _HEADER = 32
    _SPACE = 16
    _NOGIL_BYTES = 65536      # batches at least this large release the GIL while framed
cdef Py_ssize_t _MAX_LENGTH = 0xFFFFFFFF   # the header's u32


cdef struct _Item:
    const unsigned char* space
    const unsigned char* payload
    Py_ssize_t length
    uint64_t index


cdef inline void _put32(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = v & 0xFF
    p[1] = (v >> 8) & 0xFF
    p[2] = (v >> 16) & 0xFF
    p[3] = (v >> 24) & 0xFF


cdef inline void _put64(unsigned char* p, uint64_t v) noexcept nogil:
    _put32(p, <uint32_t>v)      # the low half (a cast truncates)
    _put32(p + 4, <uint32_t>(v >> 32))


cdef void _frame_all(const _Item* items, Py_ssize_t n, unsigned char* out) noexcept nogil:
    cdef Py_ssize_t i
    cdef unsigned long crc
    cdef unsigned char* head
    for i in range(n):
        head = out
        # The crc covers the id as the reader packs it (16 bytes space, then the u64 index) and the payload.
        memcpy(head + 16, items[i].space, _SPACE)
        _put64(head + 8, items[i].index)
        crc = crc32(0, head + 16, _SPACE)
        crc = crc32(crc, head + 8, 8)
        if items[i].length:
            memcpy(head + _HEADER, items[i].payload, items[i].length)
            crc = crc32(crc, head + _HEADER, <unsigned int>items[i].length)
        _put32(head, <uint32_t>items[i].length)
        _put32(head + 4, <uint32_t>crc)
        out += _HEADER + items[i].length


cdef object _pack(object items, object marks, bint fresh_only):
    """The frames of ``items`` (those above ``marks`` when ``fresh_only``), their count and the new marks."""
    cdef list seq = items if type(items) is list else list(items)
    cdef Py_ssize_t n = len(seq), i, kept = 0, total = 0
    cdef _Item* buf
    cdef object item, space, payload, index_obj, advanced = None
    cdef object last_space = None
    cdef uint64_t index, last_mark = 0
    cdef list held = None          # payloads converted to bytes (another buffer type): kept alive here
    cdef bytes out
    cdef unsigned char* dest
    cdef bint dirty = False
    if fresh_only:
        advanced = {}
    if n == 0:
        return b"", 0, advanced
    buf = <_Item*>PyMem_Malloc(n * sizeof(_Item))
    if buf == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            item = seq[i]
            space, index_obj, payload = item
            if not PyBytes_CheckExact(space) or PyBytes_GET_SIZE(space) != _SPACE:
                raise ValueError(f"item {i}: the space must be 16 bytes, not {space!r}")
            index = index_obj          # OverflowError below 0 or past u64, as struct's "Q" refuses them
            if fresh_only:
                # A batch is one space's run of indexes, as a rule: the dicts are touched when the space changes.
                if space is not last_space and (last_space is None or space != last_space):
                    if dirty:
                        advanced[last_space] = last_mark
                    last_space, dirty = space, False
                    mark = advanced.get(space)
                    if mark is None:
                        mark = marks.get(space, 0)
                    last_mark = mark
                if index <= last_mark:
                    continue
                last_mark, dirty = index, True
            if not PyBytes_CheckExact(payload):
                payload = bytes(payload)
                if held is None:
                    held = []
                held.append(payload)
            if PyBytes_GET_SIZE(payload) > _MAX_LENGTH:
                raise OverflowError(f"item {i}: a payload of {PyBytes_GET_SIZE(payload)} bytes does not fit a frame")
            buf[kept].space = <const unsigned char*>PyBytes_AS_STRING(space)
            buf[kept].payload = <const unsigned char*>PyBytes_AS_STRING(payload)
            buf[kept].length = PyBytes_GET_SIZE(payload)
            buf[kept].index = index
            total += _HEADER + buf[kept].length
            kept += 1
        if dirty:
            advanced[last_space] = last_mark
        if kept == 0:
            return b"", 0, advanced
        out = PyBytes_FromStringAndSize(NULL, total)
        dest = <unsigned char*>PyBytes_AS_STRING(out)
        # ``seq`` is this call's own list or the caller's, whose items (tuples) hold the spaces and payloads:
        # without the GIL the caller's list could change under us, so a large batch frames from a copy.
        if total >= _NOGIL_BYTES:
            if seq is items:
                seq = list(seq)
            with nogil:
                _frame_all(buf, kept, dest)
        else:
            _frame_all(buf, kept, dest)
        return out, kept, advanced
    finally:
        PyMem_Free(buf)


def pack_many(items):
    """The frames of ``(space, index, payload)`` items, back to back: ``journal.pack_many``'s bytes.

    ``space`` is 16 bytes (ValueError otherwise), ``index`` fits a u64 (OverflowError), ``payload`` is
    bytes or any buffer."""
    return _pack(items, None, False)[0]


def pack_fresh(items, dict marks):
    """``(frames, count, advanced)``: the frames of the items whose index is above their space's mark, as the
    embedded journal appends them (``journal.pack_fresh``). ``marks`` (space -> highest index appended) is
    read, not changed; ``advanced`` maps each space that had a fresh item to its new mark."""
    return _pack(items, marks, True)
