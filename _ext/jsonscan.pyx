# cython: language_level=3
"""A scan of raw JSON text before any decoder reads it: how deeply it nests, how many items it holds.

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
"""

from libc.string cimport memchr

__all__ = ["json_shape", "nesting_depth"]


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


cdef Py_ssize_t _scan(const unsigned char* p, Py_ssize_t n, Py_ssize_t depth_limit, Py_ssize_t items_limit,
                      Py_ssize_t* items, Py_ssize_t* key) noexcept nogil:
    """The deepest nesting; ``items`` and ``key`` (the opening quote of the top-level member being read,
    -1 before any) filled in. Stops once the depth passes ``depth_limit`` or the items ``items_limit``."""
    cdef Py_ssize_t i = 0, depth = 0, deepest = 0, count = 0, end
    cdef unsigned char c
    cdef bint expect_key = False
    key[0] = -1
    while i < n:
        c = p[i]
        if c == b'[' or c == b'{':
            depth += 1
            count += 1
            expect_key = depth == 1 and c == b'{'
            if depth > deepest:
                deepest = depth
                if deepest > depth_limit:
                    break
            if count > items_limit:
                break
        elif c == b']' or c == b'}':
            depth -= 1
        elif c == b',':
            count += 1
            expect_key = depth == 1
            if count > items_limit:
                break
        elif c == b'"':
            end = _string_end(p, n, i)
            if expect_key:
                key[0] = i
                expect_key = False
            i = end
        i += 1
    items[0] = count
    return deepest


def nesting_depth(const unsigned char[::1] data, Py_ssize_t limit):
    """The deepest nesting of arrays and objects in JSON text `data`, or `limit` + 1
    as soon as it is known to exceed `limit`. Brackets inside strings do not
    count; the text is not validated (a decoder does that next)."""
    cdef Py_ssize_t n = data.shape[0], deepest, items, key
    if n == 0:
        return 0
    with nogil:
        deepest = _scan(&data[0], n, limit, n + 1, &items, &key)
    return deepest


def json_shape(const unsigned char[::1] data, Py_ssize_t depth_limit, Py_ssize_t items_limit):
    """``(deepest, items, key)`` of JSON text `data`: its deepest nesting, its items (arrays, objects and
    commas outside strings), and the offset of the opening quote of the top-level member the scan was
    in when it stopped (-1 if none). The scan stops as soon as the depth passes `depth_limit` or the
    items `items_limit`, so either is then the limit + 1. Not validated, as ``nesting_depth``."""
    cdef Py_ssize_t n = data.shape[0], deepest, items, key
    if n == 0:
        return 0, 0, -1
    with nogil:
        deepest = _scan(&data[0], n, depth_limit, items_limit, &items, &key)
    return deepest, items, key
