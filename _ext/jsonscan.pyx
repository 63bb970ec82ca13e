# cython: language_level=3
"""A scan of raw JSON text before any decoder reads it: how deeply it nests.

msgspec decodes ~100,000 levels before raising RecursionError, and what then
walks the decoded value (msgspec.to_builtins, an encoder, a Python walk) hits
the interpreter's recursion limit near 1,000. So a body is refused on its
depth first, by this scan: brackets outside strings counted, strings skipped
with memchr (base64 images are long strings), nothing decoded or copied.
"""

from libc.string cimport memchr

__all__ = ["nesting_depth"]


def nesting_depth(const unsigned char[::1] data, Py_ssize_t limit):
    """The deepest nesting of arrays and objects in JSON text `data`, or `limit` + 1
    as soon as it is known to exceed `limit`. Brackets inside strings do not
    count; the text is not validated (a decoder does that next)."""
    cdef Py_ssize_t n = data.shape[0], i = 0, depth = 0, deepest = 0, k
    cdef const unsigned char* p
    cdef const unsigned char* q
    cdef unsigned char c
    if n == 0:
        return 0
    p = &data[0]
    with nogil:
        while i < n:
            c = p[i]
            if c == b'[' or c == b'{':
                depth += 1
                if depth > deepest:
                    deepest = depth
                    if deepest > limit:
                        break
            elif c == b']' or c == b'}':
                depth -= 1
            elif c == b'"':
                # The closing quote is the next one not escaped: preceded by an even
                # number of backslashes.
                i += 1
                while i < n:
                    q = <const unsigned char*>memchr(p + i, b'"', n - i)
                    if q == NULL:
                        i = n
                        break
                    i = q - p
                    k = i
                    while k > 0 and p[k - 1] == b'\\':
                        k -= 1
                    if (i - k) % 2 == 0:
                        break
                    i += 1
            i += 1
    return deepest
