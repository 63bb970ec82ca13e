# cython: language_level=3
"""A scan of raw JSON text before any decoder reads it: how deeply it nests, how many items it holds, and
whether an object names a member twice.

msgspec decodes ~100,000 levels before raising RecursionError, and what then
walks the decoded value (msgspec.to_builtins, an encoder, a Python walk) hits
the interpreter's recursion limit near 1,000. So a body is refused on its
depth first, by this scan: brackets outside strings counted, strings skipped
with memchr (base64 images are long strings), nothing decoded or copied.

msgspec also holds the GIL for a whole decode (~0.5 µs per value): a 60 MB
body of 420,000 small tools is seconds in one C call, which no worker thread
hides. So the scan counts items too (arrays, objects and commas outside
strings, about one per value) and names the top-level member it was in when
a bound passed, without the GIL.

A key sent twice in one object is read by msgspec (and the router) as its
last value, and forwarded as sent: a backend that reads the first one (or
refuses the body) then sees another request than the one routed. The scan
keeps each open object's keys in one hash table (SipHash, the interpreter's
own seeded hash, so no body can force collisions), compares them as their
unescaped text (``"a"`` and ``"\\u0061"`` are one key), and stops at the first
repeated one. A closed object's keys are dropped when the table grows.
"""

from libc.stdint cimport INT64_MAX, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memchr, memcmp, memcpy

__all__ = ["json_path", "json_shape", "nesting_depth"]


cdef extern from "Python.h":
    Py_hash_t _Py_HashBytes(const void* src, Py_ssize_t length) nogil


cdef Py_ssize_t _string_end(const unsigned char* p, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """The index of the quote that closes the string whose opening quote is at ``i`` (``n`` if none): the
    next one preceded by an even number of backslashes."""
    cdef Py_ssize_t k
    cdef const unsigned char* q
    i += 1
    while i < n:
        q = <const unsigned char*>memchr(p + i, b'"', n - i)
        if q == NULL:
            return n
        i = q - p
        k = i
        while k > 0 and p[k - 1] == b'\\':
            k -= 1
        if (i - k) % 2 == 0:
            return i
        i += 1
    return n


# --- a key's text, unescaped --------------------------------------------------------------------------

cdef int _hex4(const unsigned char* p) noexcept nogil:
    """The value of the four hex digits at ``p``, or -1."""
    cdef int v = 0, k, d
    cdef unsigned char c
    for k in range(4):
        c = p[k]
        if c >= b'0' and c <= b'9':
            d = c - 48          # '0'
        elif c >= b'a' and c <= b'f':
            d = c - 87          # 'a' - 10
        elif c >= b'A' and c <= b'F':
            d = c - 55          # 'A' - 10
        else:
            return -1
        v = v * 16 + d
    return v


cdef Py_ssize_t _unescape(const unsigned char* p, Py_ssize_t i, Py_ssize_t end, unsigned char* out) noexcept nogil:
    """The UTF-8 text of the string content ``p[i:end]`` written to ``out`` (at most ``end - i`` bytes): its
    length. A lone surrogate escape is written as its three bytes, a malformed escape as it is (a decoder
    refuses either next)."""
    cdef Py_ssize_t j = 0
    cdef int cp, low
    cdef unsigned char c, e
    while i < end:
        c = p[i]
        if c != b'\\' or i + 1 >= end:
            out[j] = c
            j += 1
            i += 1
            continue
        e = p[i + 1]
        if e == b'u':
            cp = _hex4(p + i + 2) if i + 6 <= end else -1
            if cp < 0:
                out[j] = c
                j += 1
                i += 1
                continue
            i += 6
            if 0xD800 <= cp < 0xDC00 and i + 6 <= end and p[i] == b'\\' and p[i + 1] == b'u':
                low = _hex4(p + i + 2)
                if 0xDC00 <= low < 0xE000:
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
            if cp < 0x80:
                out[j] = cp
                j += 1
            elif cp < 0x800:
                out[j] = 0xC0 | (cp >> 6)
                out[j + 1] = 0x80 | (cp & 0x3F)
                j += 2
            elif cp < 0x10000:
                out[j] = 0xE0 | (cp >> 12)
                out[j + 1] = 0x80 | ((cp >> 6) & 0x3F)
                out[j + 2] = 0x80 | (cp & 0x3F)
                j += 3
            else:
                out[j] = 0xF0 | (cp >> 18)
                out[j + 1] = 0x80 | ((cp >> 12) & 0x3F)
                out[j + 2] = 0x80 | ((cp >> 6) & 0x3F)
                out[j + 3] = 0x80 | (cp & 0x3F)
                j += 4
            continue
        if e == b'n':
            c = b'\n'
        elif e == b't':
            c = b'\t'
        elif e == b'r':
            c = b'\r'
        elif e == b'b':
            c = 8
        elif e == b'f':
            c = 12
        elif e == b'"' or e == b'\\' or e == b'/':
            c = e
        else:
            out[j] = c
            j += 1
            i += 1
            continue
        out[j] = c
        j += 1
        i += 2
    return j


# --- the keys of the open objects -----------------------------------------------------------------------

# An object's first LINEAR keys are compared with each new one directly (most objects of a request have a
# handful: a few ns a key); an object past that has its keys hashed, so one of 100,000 keys stays linear.
# A hashed key's index fits the table's 32 bits: the scan stops at its items bound long before.
DEF LINEAR = 16
DEF SHORT = 256        # an escaped key up to this long is unescaped on the stack


cdef struct Member:
    Py_ssize_t start      # the key's first byte after its opening quote
    Py_ssize_t length     # its bytes as sent
    uint64_t head         # its first 8 bytes (zeros past a shorter key's end): most keys differ there
    bint escaped          # a backslash in it: compared once unescaped
    uint32_t hashed       # its hash's table half, once in the table (its object past LINEAR keys)


cdef struct Keys:
    Py_ssize_t* objects   # by depth: the open object's number, 0 for an array
    Py_ssize_t* base      # by depth: where the open object's keys start in ``members``
    Member* members       # the keys of the open objects, outermost object's first
    Py_ssize_t top, capacity
    bint members_owned    # ``members`` was malloc'ed (not the caller's stack array)
    # The keys of objects past LINEAR keys, hashed: each slot its key's hash (high half) and index in
    # ``members`` + 1 (low half), 0 if empty. Eight bytes a key; a closed object's entries stay until the table
    # grows, pointing at a member below ``base`` of any object looked up later, or at one of its own keys
    # (then compared as one).
    uint64_t* slots       # NULL until an object passes LINEAR keys
    Py_ssize_t mask       # slots - 1 (a power of two)
    Py_ssize_t used


cdef bint _same(const unsigned char* p, Member* a, Member* b) noexcept nogil:
    """Whether keys ``a`` and ``b`` are one text once unescaped."""
    cdef Py_ssize_t la = a.length, lb = b.length
    cdef unsigned char short[2 * SHORT]
    cdef unsigned char* ua
    cdef bint same
    if not a.escaped and not b.escaped:
        return la == lb and a.head == b.head and (la <= 8 or memcmp(p + a.start + 8, p + b.start + 8, la - 8) == 0)
    # Unescaping only shortens a text: an escaped key can equal no plain one longer than it.
    if (not a.escaped and la > lb) or (not b.escaped and lb > la):
        return False
    ua = &short[0] if la <= SHORT and lb <= SHORT else <unsigned char*>malloc(la + lb + 1)
    if ua == NULL:
        return False
    la = _unescape(p, a.start, a.start + la, ua)
    lb = _unescape(p, b.start, b.start + lb, ua + la)
    same = la == lb and memcmp(ua, ua + la, la) == 0
    if ua != &short[0]:
        free(ua)
    return same


cdef Py_hash_t _hash(const unsigned char* p, Member* m) noexcept nogil:
    """The interpreter's own (seeded) hash of ``m``'s unescaped text; -1 when out of memory."""
    cdef unsigned char short[SHORT]
    cdef unsigned char* text
    cdef Py_hash_t h
    if not m.escaped:
        return _Py_HashBytes(p + m.start, m.length) & INT64_MAX
    text = &short[0] if m.length <= SHORT else <unsigned char*>malloc(m.length + 1)
    if text == NULL:
        return -1
    h = _Py_HashBytes(text, _unescape(p, m.start, m.start + m.length, text)) & INT64_MAX
    if text != &short[0]:
        free(text)
    return h


cdef inline bint _live(Keys* keys, uint64_t entry) noexcept nogil:
    """Whether ``entry`` is a key of an open object: its member is still there, with its hash."""
    cdef Py_ssize_t at = <Py_ssize_t>(entry & 0xFFFFFFFFULL) - 1
    return at < keys.top and keys.members[at].hashed == <uint32_t>(entry >> 32)


cdef int _grow(Keys* keys) noexcept nogil:
    """Rehash the open objects' entries (a closed object's are dropped) into a table at least twice their number
    (64 slots at least): 0, or -1 when out of memory."""
    cdef Py_ssize_t size = 64, k, s, live = 0, old = keys.mask + 1 if keys.slots != NULL else 0
    cdef uint64_t* slots
    for k in range(old):
        if keys.slots[k] != 0 and _live(keys, keys.slots[k]):
            live += 1
    while size < 2 * (live + LINEAR + 1):
        size *= 2
    slots = <uint64_t*>calloc(size, sizeof(uint64_t))
    if slots == NULL:
        return -1
    for k in range(old):
        if keys.slots[k] != 0 and _live(keys, keys.slots[k]):
            s = <Py_ssize_t>(keys.slots[k] >> 32) & (size - 1)
            while slots[s] != 0:
                s = (s + 1) & (size - 1)
            slots[s] = keys.slots[k]
    free(keys.slots)
    keys.slots, keys.mask, keys.used = slots, size - 1, live
    return 0


cdef int _hashed(Keys* keys, const unsigned char* p, Member* m, Py_ssize_t index, Py_ssize_t depth) noexcept nogil:
    """Add ``m`` (``members[index]``, of the object open at ``depth``) to the table: 1 if that object has it
    already, 0 if not, -1 when out of memory."""
    cdef Py_hash_t h = _hash(p, m)
    cdef uint64_t entry, hashed
    cdef Py_ssize_t s, at, first = keys.base[depth]
    if h < 0 or index >= <Py_ssize_t>0xFFFFFFFFLL:
        return -1
    if (keys.slots == NULL or 4 * (keys.used + 1) > 3 * (keys.mask + 1)) and _grow(keys) < 0:
        return -1
    hashed = <uint64_t>h & 0xFFFFFFFFULL        # SipHash's bits, seeded: no body chooses where its keys land
    s = <Py_ssize_t>hashed & keys.mask
    entry = keys.slots[s]
    while entry != 0:
        at = <Py_ssize_t>(entry & 0xFFFFFFFFULL) - 1
        # Only this object's keys count: those from its base up (a closed object's lie there no more).
        if entry >> 32 == hashed and first <= at < keys.top and _same(p, &keys.members[at], m):
            return 1
        s = (s + 1) & keys.mask
        entry = keys.slots[s]
    keys.slots[s] = (hashed << 32) | <uint64_t>(index + 1)
    keys.used += 1
    m.hashed = <uint32_t>hashed
    return 0


cdef int _remember(Keys* keys, const unsigned char* p, Py_ssize_t n, Py_ssize_t start, Py_ssize_t end,
                   Py_ssize_t depth) noexcept nogil:
    """Add the key ``p[start:end]`` (of text ``p[:n]``) of the object open at ``depth``: 1 if that object has it
    already, 0 if not, -1 when out of memory."""
    cdef Member m
    cdef Py_ssize_t k, first = keys.base[depth], count = keys.top - first
    cdef Member* grown
    cdef int found
    cdef Member* other
    cdef uint64_t v
    m.start, m.length, m.head, m.hashed = start, end - start, 0, 0
    if start + 8 <= n:              # one load (a key is followed by its quote and a colon at least)
        memcpy(&m.head, p + start, 8)
        if m.length < 8:
            m.head &= (<uint64_t>1 << (8 * m.length)) - 1
    else:
        for k in range(min(m.length, 8)):
            m.head |= <uint64_t>p[start + k] << (8 * k)
    # A backslash in the head: a byte of head ^ 0x5c5c... is zero (the word-at-a-time test; the zeros past a
    # short key's end are 0x5c then, never zero).
    v = m.head ^ 0x5C5C5C5C5C5C5C5CULL
    m.escaped = ((v - 0x0101010101010101ULL) & ~v & 0x8080808080808080ULL) != 0 or \
        (m.length > 8 and memchr(p + start + 8, b'\\', m.length - 8) != NULL)
    if count < LINEAR:
        for k in range(first, keys.top):
            other = &keys.members[k]
            # Two plain keys differ in length or head, most often: no call for them.
            if not m.escaped and not other.escaped and (other.length != m.length or other.head != m.head):
                continue
            if _same(p, other, &m):
                return 1
    else:
        if count == LINEAR:       # the object's first keys, all different, join the table
            for k in range(first, keys.top):
                if _hashed(keys, p, &keys.members[k], k, depth) < 0:
                    return -1
        found = _hashed(keys, p, &m, keys.top, depth)
        if found != 0:
            return found
    if keys.top == keys.capacity:
        grown = <Member*>malloc(2 * keys.capacity * sizeof(Member))
        if grown == NULL:
            return -1
        memcpy(grown, keys.members, keys.top * sizeof(Member))
        if keys.members_owned:
            free(keys.members)
        keys.members, keys.capacity, keys.members_owned = grown, 2 * keys.capacity, True
    keys.members[keys.top] = m
    keys.top += 1
    return 0


# --- the scan -------------------------------------------------------------------------------------------

cdef Py_ssize_t _scan(const unsigned char* p, Py_ssize_t n, Py_ssize_t depth_limit, Py_ssize_t items_limit,
                      Py_ssize_t* items, Py_ssize_t* key, Keys* keys, Py_ssize_t* repeated) noexcept nogil:
    """The deepest nesting; ``items`` and ``key`` (the opening quote of the top-level member being read,
    -1 before any) filled in. Stops once the depth passes ``depth_limit`` or the items ``items_limit``.
    With ``keys``, also at the first key its object has already (its opening quote in ``repeated``, else
    -1); -1 returned when out of memory."""
    cdef Py_ssize_t i = 0, depth = 0, deepest = 0, count = 0, end, serial = 0
    cdef unsigned char c
    cdef bint expect_key = False, expect_member = False
    cdef int found
    key[0] = -1
    repeated[0] = -1
    while i < n:
        c = p[i]
        if c == b'[' or c == b'{':
            depth += 1
            count += 1
            expect_key = depth == 1 and c == b'{'
            expect_member = c == b'{'
            if depth > deepest:
                deepest = depth
                if deepest > depth_limit:
                    break
            if count > items_limit:
                break
            if keys != NULL and depth > 0:
                if c == b'{':
                    serial += 1
                    keys.objects[depth] = serial
                else:
                    keys.objects[depth] = 0
                keys.base[depth] = keys.top
        elif c == b']' or c == b'}':
            if keys != NULL and depth > 0:
                keys.top = keys.base[depth]     # the closed object's keys are done with
            depth -= 1
            expect_member = False
        elif c == b',':
            count += 1
            expect_key = depth == 1
            expect_member = keys != NULL and depth > 0 and keys.objects[depth] != 0
            if count > items_limit:
                break
        elif c == b'"':
            end = _string_end(p, n, i)
            if expect_key:
                key[0] = i
                expect_key = False
            if expect_member:
                expect_member = False
                if keys != NULL and depth > 0 and end < n:
                    found = _remember(keys, p, n, i + 1, end, depth)
                    if found < 0:
                        return -1
                    if found:
                        repeated[0] = i
                        break
            i = end
        i += 1
    items[0] = count
    return deepest


def nesting_depth(const unsigned char[::1] data, Py_ssize_t limit):
    """The deepest nesting of arrays and objects in JSON text `data`, or `limit` + 1
    as soon as it is known to exceed `limit`. Brackets inside strings do not
    count; the text is not validated (a decoder does that next)."""
    cdef Py_ssize_t n = data.shape[0], deepest, items, key, repeated
    if n == 0:
        return 0
    with nogil:
        deepest = _scan(&data[0], n, limit, n + 1, &items, &key, NULL, &repeated)
    return deepest


def json_shape(const unsigned char[::1] data, Py_ssize_t depth_limit, Py_ssize_t items_limit):
    """``(deepest, items, key, repeated)`` of JSON text `data`: its deepest nesting, its items (arrays, objects
    and commas outside strings), the offset of the opening quote of the top-level member the scan was in when
    it stopped (-1 if none), and that of the first key its object names twice, unescaped text compared (-1 if
    none). The scan stops as soon as the depth passes `depth_limit`, the items `items_limit` (either is then
    the limit + 1) or at that key. Not validated, as ``nesting_depth``."""
    cdef Py_ssize_t n = data.shape[0], deepest, items, key, repeated, levels
    cdef Keys keys
    # Most bodies' keys and levels fit on the stack: no allocation on the way of a request.
    cdef Member members[64]
    cdef Py_ssize_t objects[2 * 258]
    if n == 0:
        return 0, 0, -1, -1
    levels = min(depth_limit, n) + 2         # the scan stops past depth_limit: deeper levels are never indexed
    keys.objects = &objects[0] if levels <= 258 else <Py_ssize_t*>malloc(2 * levels * sizeof(Py_ssize_t))
    if keys.objects == NULL:
        raise MemoryError
    keys.base = keys.objects + levels
    keys.members, keys.top, keys.capacity, keys.members_owned = &members[0], 0, 64, False
    keys.slots, keys.mask, keys.used = NULL, 0, 0
    with nogil:
        deepest = _scan(&data[0], n, depth_limit, items_limit, &items, &key, &keys, &repeated)
    if keys.objects != &objects[0]:
        free(keys.objects)
    if keys.members_owned:
        free(keys.members)
    free(keys.slots)
    if deepest < 0:
        raise MemoryError
    return deepest, items, key, repeated


def json_path(const unsigned char[::1] data, Py_ssize_t offset):
    """Where `offset` is in JSON text `data`: for each array or object it is inside, outermost first, the
    element's index (``int``) or the offset of the opening quote of the member's key (a 1-tuple; -1 before
    any); a key at `offset` is its own member. Not validated, as ``nesting_depth``."""
    cdef Py_ssize_t n = data.shape[0], i = 0, depth = 0, size = 16, end
    cdef const unsigned char* p
    cdef unsigned char c
    cdef bint expect_key = False
    # By depth (from 1): the member's key offset (>= 0) in an object, -1 - the element's index in an array.
    cdef Py_ssize_t* at = <Py_ssize_t*>malloc(size * sizeof(Py_ssize_t))
    cdef Py_ssize_t* grown
    cdef bint* objects = <bint*>malloc(size * sizeof(bint))
    cdef bint* grown_objects
    if at == NULL or objects == NULL:
        free(at)
        free(objects)
        raise MemoryError
    if n > 0:
        p = &data[0]
        with nogil:
            while i < n and i <= offset:
                c = p[i]
                if c == b'[' or c == b'{':
                    depth += 1
                    if depth >= size:
                        size *= 2
                        grown = <Py_ssize_t*>realloc(at, size * sizeof(Py_ssize_t))
                        if grown != NULL:
                            at = grown
                        grown_objects = <bint*>realloc(objects, size * sizeof(bint))
                        if grown_objects != NULL:
                            objects = grown_objects
                        if grown == NULL or grown_objects == NULL:
                            depth = -1
                            break
                    objects[depth] = c == b'{'
                    at[depth] = -1
                    expect_key = c == b'{'
                elif c == b']' or c == b'}':
                    if depth > 0:
                        depth -= 1
                    expect_key = False
                elif c == b',':
                    if depth > 0:
                        expect_key = objects[depth]
                        if not objects[depth]:
                            at[depth] -= 1
                elif c == b'"':
                    end = _string_end(p, n, i)
                    if expect_key and depth > 0:
                        at[depth] = i
                    expect_key = False
                    i = end
                i += 1
    if depth < 0:
        free(at)
        free(objects)
        raise MemoryError
    out = []
    for k in range(1, depth + 1):
        out.append((at[k],) if objects[k] else <object>(-1 - at[k]))
    free(at)
    free(objects)
    return out
