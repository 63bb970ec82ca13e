"""Just enough of Apache Parquet to read one string column at build time; never imported at run time.

The named-entity build reads the SEC's company list out of edgartools' wheel, where it ships as a
Parquet file (``edgar/reference/data/company_tickers.parquet``). pyarrow is a 40 MB dependency for
a 300 KB file, so this reads the subset that file uses: the footer (Thrift compact protocol),
dictionary and data pages (v1 and v2), PLAIN byte arrays, RLE_DICTIONARY indices, definition levels
of an optional column, and Snappy or no compression. Anything else raises ``ParquetError``.
"""
from __future__ import annotations

import struct

MAGIC = b"PAR1"
_CODECS = {0: "none", 1: "snappy"}
_PLAIN, _PLAIN_DICTIONARY, _RLE_DICTIONARY = 0, 2, 8
_BYTE_ARRAY = 6
_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3


class ParquetError(ValueError):
    """The file uses a part of Parquet this reader does not."""


# --- Thrift compact protocol: structs as {field id: value} ---------------------------------------

class _Thrift:
    def __init__(self, blob: bytes, at: int = 0) -> None:
        self.blob, self.at = blob, at

    def varint(self) -> int:
        shift = value = 0
        while True:
            byte = self.blob[self.at]
            self.at += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, kind: int):
        if kind in (1, 2):                        # booleans in a list: one byte each
            return kind == 1
        if kind == 3:
            self.at += 1
            return struct.unpack_from("b", self.blob, self.at - 1)[0]
        if kind in (4, 5, 6):
            return self.zigzag()
        if kind == 7:
            self.at += 8
            return struct.unpack_from("<d", self.blob, self.at - 8)[0]
        if kind == 8:
            n = self.varint()
            self.at += n
            return self.blob[self.at - n:self.at]
        if kind in (9, 10):
            head = self.blob[self.at]
            self.at += 1
            n, item = head >> 4, head & 0x0F
            if n == 15:
                n = self.varint()
            return [self._item(item) for _ in range(n)]
        if kind == 12:
            return self.struct()
        raise ParquetError(f"thrift type {kind}")

    def _item(self, kind: int):
        if kind in (1, 2):                        # a boolean element is a byte of its own
            self.at += 1
            return self.blob[self.at - 1] == 1
        return self.value(kind)

    def struct(self) -> dict:
        out, last = {}, 0
        while True:
            head = self.blob[self.at]
            self.at += 1
            if head == 0:
                return out
            kind, delta = head & 0x0F, head >> 4
            field = last + delta if delta else self.zigzag()
            out[field] = kind == 1 if kind in (1, 2) else self.value(kind)
            last = field


# --- Snappy and the RLE/bit-packed hybrid -----------------------------------------------------

def snappy(blob: bytes) -> bytes:
    """Decompress a raw Snappy block."""
    t = _Thrift(blob)
    size = t.varint()
    out = bytearray()
    at = t.at
    while at < len(blob):
        tag = blob[at]
        at += 1
        kind = tag & 3
        if kind == 0:
            n = tag >> 2
            if n >= 60:
                extra = n - 59
                n = int.from_bytes(blob[at:at + extra], "little")
                at += extra
            out += blob[at:at + n + 1]
            at += n + 1
            continue
        if kind == 1:
            n, offset = ((tag >> 2) & 7) + 4, ((tag >> 5) << 8) | blob[at]
            at += 1
        elif kind == 2:
            n, offset = (tag >> 2) + 1, int.from_bytes(blob[at:at + 2], "little")
            at += 2
        else:
            n, offset = (tag >> 2) + 1, int.from_bytes(blob[at:at + 4], "little")
            at += 4
        start = len(out) - offset
        if offset >= n:
            out += out[start:start + n]
        else:                                     # an overlapping copy repeats what it copies
            for i in range(n):
                out.append(out[start + i])
    if len(out) != size:
        raise ParquetError(f"snappy: {len(out)} bytes, header says {size}")
    return bytes(out)


def hybrid(blob: bytes, width: int, count: int) -> list[int]:
    """``count`` values of the RLE/bit-packed hybrid encoding, ``width`` bits each."""
    t, out = _Thrift(blob), []
    while len(out) < count:
        head = t.varint()
        if head & 1:                              # bit-packed: groups of 8 values
            n = (head >> 1) * 8
            bits = int.from_bytes(blob[t.at:t.at + (head >> 1) * width], "little")
            t.at += (head >> 1) * width
            out += [(bits >> (i * width)) & ((1 << width) - 1) for i in range(n)]
        else:                                     # a run of one value
            size = (width + 7) // 8
            value = int.from_bytes(blob[t.at:t.at + size], "little")
            t.at += size
            out += [value] * (head >> 1)
    return out[:count]


# --- the file ---------------------------------------------------------------------------------

def strings(blob: bytes, column: str) -> list[str | None]:
    """Every value of one optional or required UTF-8 column, in row order (None for a null)."""
    if blob[:4] != MAGIC or blob[-4:] != MAGIC:
        raise ParquetError("not a Parquet file")
    footer = struct.unpack_from("<i", blob, len(blob) - 8)[0]
    meta = _Thrift(blob, len(blob) - 8 - footer).struct()
    schema = {e[4].decode(): e for e in meta[2][1:]}          # field 4: name; [0] is the root
    optional = schema[column].get(3, 0) == 1                  # field 3: repetition (1: optional)
    out: list[str | None] = []
    for group in meta[4]:
        chunk = next(c[3] for c in group[1] if [p.decode() for p in c[3][3]] == [column])
        if chunk[1] != _BYTE_ARRAY:
            raise ParquetError(f"{column}: physical type {chunk[1]}")
        codec = _CODECS.get(chunk[4])
        if codec is None:
            raise ParquetError(f"codec {chunk[4]}")
        at = chunk.get(11, chunk[9])
        end = at + chunk[7]
        dictionary: list[str] = []
        while at < end and len(out) < sum(g[3] for g in meta[4]):
            t = _Thrift(blob, at)
            header = t.struct()
            body = blob[t.at:t.at + header[3]]
            at = t.at + header[3]
            if header[1] == _DICTIONARY_PAGE:
                page = snappy(body) if codec == "snappy" else body
                dictionary = _plain(page, header[7][1])
            elif header[1] == _DATA_PAGE:
                page = snappy(body) if codec == "snappy" else body
                n, encoding = header[5][1], header[5][2]
                defined, pos = [1] * n, 0
                if optional:
                    size = struct.unpack_from("<i", page, 0)[0]
                    defined, pos = hybrid(page[4:4 + size], 1, n), 4 + size
                out += _values(page[pos:], encoding, defined, dictionary)
            elif header[1] == _DATA_PAGE_V2:
                v2 = header[8]
                levels = v2[5] + v2[6]
                rest = body[levels:]
                if v2.get(7, True) and codec == "snappy":
                    rest = snappy(rest)
                n = v2[1]
                defined = hybrid(body[v2[6]:levels], 1, n) if optional else [1] * n
                out += _values(rest, v2[4], defined, dictionary)
    return out


def _plain(page: bytes, n: int) -> list[str]:
    out, at = [], 0
    for _ in range(n):
        size = struct.unpack_from("<i", page, at)[0]
        out.append(page[at + 4:at + 4 + size].decode())
        at += 4 + size
    return out


def _values(page: bytes, encoding: int, defined: list[int], dictionary: list[str]) -> list[str | None]:
    present = sum(defined)
    if encoding in (_RLE_DICTIONARY, _PLAIN_DICTIONARY):
        values = [dictionary[i] for i in hybrid(page[1:], page[0], present)]
    elif encoding == _PLAIN:
        values = _plain(page, present)
    else:
        raise ParquetError(f"encoding {encoding}")
    it = iter(values)
    return [next(it) if d else None for d in defined]
