# cython: language_level=3
"""UTF-8 and Unicode helpers shared by the kernels: inline C, no Python objects.

Only inline functions and C declarations live here, so cimporting this file
adds no runtime import: each kernel module compiles its own copy.
"""

from libc.stdint cimport uint32_t

cdef extern from "Python.h":
    # Table lookups in CPython's Unicode database: no Python objects, no GIL needed.
    # Declared here rather than cimported from cpython.unicode, whose declarations
    # lack `nogil`.
    uint32_t _vsr_tolower "Py_UNICODE_TOLOWER" (uint32_t ch) nogil
    bint _vsr_isalnum "Py_UNICODE_ISALNUM" (uint32_t ch) nogil
    # What str.lower() itself calls for one character (CPython's lower_ucs4):
    # the full lowercase mapping, 1 to 3 code points written to res, and the two
    # properties of the Final_Sigma rule for U+03A3 (see _lower_sigma in bm25.pyx).
    # Private CPython functions, exported by 3.11's headers (cpython/unicodeobject.h).
    int _vsr_lower_full "_PyUnicode_ToLowerFull" (uint32_t ch, uint32_t* res) nogil
    bint _vsr_is_cased "_PyUnicode_IsCased" (uint32_t ch) nogil
    bint _vsr_is_case_ignorable "_PyUnicode_IsCaseIgnorable" (uint32_t ch) nogil

cdef extern from *:
    """
    /* The code-point ranges (inclusive) that hold CJK characters: Han ideographs,
       kana, Bopomofo and Hangul. One list for the tokenizer, the keyword
       boundary rule and the n-gram/fuzzy word splitter. Hangul is in it because
       Korean particles attach to nouns, so a word boundary would reject
       "서울에서" for the keyword "서울". */
    static const uint32_t VSR_CJK_FLAT[] = {
        0x1100, 0x11FF,    /* Hangul Jamo */
        0x3005, 0x3007,    /* ideographic iteration mark, closing mark, number zero */
        0x3040, 0x30FF,    /* Hiragana, Katakana */
        0x3100, 0x312F,    /* Bopomofo */
        0x3130, 0x318F,    /* Hangul Compatibility Jamo */
        0x31A0, 0x31BF,    /* Bopomofo Extended */
        0x31F0, 0x31FF,    /* Katakana Phonetic Extensions */
        0x3400, 0x4DBF,    /* CJK Extension A */
        0x4E00, 0x9FFF,    /* CJK Unified Ideographs */
        0xA960, 0xA97F,    /* Hangul Jamo Extended-A */
        0xAC00, 0xD7FF,    /* Hangul Syllables, Hangul Jamo Extended-B */
        0xF900, 0xFAFF,    /* CJK Compatibility Ideographs */
        0xFF66, 0xFFDC,    /* halfwidth Katakana and Hangul */
        0x1B000, 0x1B16F,  /* Kana Supplement, Extended-A, Small Kana Extension */
        0x20000, 0x323AF,  /* CJK Extensions B to H, Compatibility Supplement */
    };
    #define VSR_CJK_NRANGES ((Py_ssize_t)(sizeof(VSR_CJK_FLAT) / sizeof(VSR_CJK_FLAT[0]) / 2))

    /* Code points whose case fold (see vsr_fold) differs from CPython's simple
       lowercase mapping, outside the Cherokee blocks, which vsr_fold handles as
       ranges. Pairs (code point, fold), sorted. Generated from Python 3.11's Unicode 14
       database; tests/test_ext_keywords.py re-derives the fold of every code
       point and fails if a Unicode update changes it. */
    static const uint32_t VSR_FOLD_EXC[] = {
        0x00B5, 0x03BC, 0x0130, 0x0130, 0x017F, 0x0073, 0x0345, 0x03B9,
        0x03C2, 0x03C3, 0x03D0, 0x03B2, 0x03D1, 0x03B8, 0x03D5, 0x03C6,
        0x03D6, 0x03C0, 0x03F0, 0x03BA, 0x03F1, 0x03C1, 0x03F5, 0x03B5,
        0x1C80, 0x0432, 0x1C81, 0x0434, 0x1C82, 0x043E, 0x1C83, 0x0441,
        0x1C84, 0x0442, 0x1C85, 0x0442, 0x1C86, 0x044A, 0x1C87, 0x0463,
        0x1C88, 0xA64B, 0x1E9B, 0x1E61, 0x1FBE, 0x03B9,
    };
    #define VSR_FOLD_NEXC ((Py_ssize_t)(sizeof(VSR_FOLD_EXC) / sizeof(VSR_FOLD_EXC[0]) / 2))
    """
    const uint32_t* VSR_CJK_FLAT
    const Py_ssize_t VSR_CJK_NRANGES
    const uint32_t* VSR_FOLD_EXC
    const Py_ssize_t VSR_FOLD_NEXC


cdef inline bint is_cont(unsigned char c) noexcept nogil:
    """A UTF-8 continuation byte (10xxxxxx): never the start of a code point."""
    return (c & 0xC0) == 0x80


cdef inline Py_ssize_t utf8_decode(const unsigned char* p, Py_ssize_t n, Py_ssize_t i,
                                   uint32_t* cp) noexcept nogil:
    """Decode the code point at p[i] (i < n); return its byte length.

    Bytes that do not start a complete sequence decode as U+FFFD of length 1,
    so callers that walk invalid input still make progress and never read past n.
    """
    cdef unsigned char c = p[i]
    cdef Py_ssize_t k, length
    cdef uint32_t v, least
    if c < 0x80:
        cp[0] = c
        return 1
    if 0xC2 <= c <= 0xDF:
        length, v, least = 2, c & 0x1F, 0x80
    elif 0xE0 <= c <= 0xEF:
        length, v, least = 3, c & 0x0F, 0x800
    elif 0xF0 <= c <= 0xF4:
        length, v, least = 4, c & 0x07, 0x10000
    else:
        cp[0] = 0xFFFD
        return 1
    if i + length > n:
        cp[0] = 0xFFFD
        return 1
    for k in range(1, length):
        if not is_cont(p[i + k]):
            cp[0] = 0xFFFD
            return 1
        v = (v << 6) | (p[i + k] & 0x3F)
    # Overlong forms, UTF-16 surrogates and values past U+10FFFF are invalid.
    if v < least or 0xD800 <= v <= 0xDFFF or v > 0x10FFFF:
        cp[0] = 0xFFFD
        return 1
    cp[0] = v
    return length


cdef inline Py_ssize_t utf8_prev(const unsigned char* p, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """Start of the code point that ends just before p[i] (0 < i <= n)."""
    cdef Py_ssize_t j = i - 1
    cdef uint32_t cp
    while j > 0 and i - j < 4 and is_cont(p[j]):
        j -= 1
    # An invalid tail (stray continuation bytes) is one byte a code point, as in
    # utf8_decode, so walking back and forth agree.
    if utf8_decode(p, n, j, &cp) != i - j:
        return i - 1
    return j


cdef inline Py_ssize_t utf8_encode(uint32_t cp, unsigned char* out) noexcept nogil:
    """Write cp as UTF-8 into out (room for 4 bytes); return the byte count."""
    if cp < 0x80:
        out[0] = <unsigned char>cp
        return 1
    if cp < 0x800:
        out[0] = <unsigned char>(0xC0 | (cp >> 6))
        out[1] = <unsigned char>(0x80 | (cp & 0x3F))
        return 2
    if cp < 0x10000:
        out[0] = <unsigned char>(0xE0 | (cp >> 12))
        out[1] = <unsigned char>(0x80 | ((cp >> 6) & 0x3F))
        out[2] = <unsigned char>(0x80 | (cp & 0x3F))
        return 3
    out[0] = <unsigned char>(0xF0 | (cp >> 18))
    out[1] = <unsigned char>(0x80 | ((cp >> 12) & 0x3F))
    out[2] = <unsigned char>(0x80 | ((cp >> 6) & 0x3F))
    out[3] = <unsigned char>(0x80 | (cp & 0x3F))
    return 4


cdef inline bint is_cjk(uint32_t cp) noexcept nogil:
    """cp lies in one of the CJK ranges (VSR_CJK_FLAT)."""
    cdef Py_ssize_t r
    if cp < 0x1100:
        return False
    for r in range(VSR_CJK_NRANGES):
        if cp < VSR_CJK_FLAT[2 * r]:
            return False
        if cp <= VSR_CJK_FLAT[2 * r + 1]:
            return True
    return False


cdef inline bint is_alnum(uint32_t cp) noexcept nogil:
    """str.isalnum() for one code point (the same database call)."""
    if cp < 0x80:
        return (0x30 <= cp <= 0x39) or (0x41 <= cp <= 0x5A) or (0x61 <= cp <= 0x7A)
    return _vsr_isalnum(cp)


cdef inline bint is_boundary_word(uint32_t cp) noexcept nogil:
    """A character that blocks a keyword boundary: regex \\w, less CJK.

    CJK text runs its words together, so a CJK neighbour never blocks a match.
    """
    if cp == 0x5F:
        return True
    return is_alnum(cp) and not is_cjk(cp)


cdef inline uint32_t fold(uint32_t cp) noexcept nogil:
    """Simple case fold of one code point: one code point in, one out.

    str.casefold() where that gives one code point, else str.lower() where that
    gives one, else cp itself (so ß and İ fold to themselves). Keeping the fold
    1:1 keeps positions and lengths in code points unchanged.
    """
    cdef Py_ssize_t lo, hi, mid
    if cp < 0x80:
        if 0x41 <= cp <= 0x5A:
            return cp + 32
        return cp
    # Cherokee: casefold maps the small letters to the capitals, unlike lower().
    if 0x13A0 <= cp <= 0x13FD:
        return cp - 8 if cp >= 0x13F8 else cp
    if 0xAB70 <= cp <= 0xABBF:
        return cp - 0xAB70 + 0x13A0
    if cp <= 0x1FBE:
        lo, hi = 0, VSR_FOLD_NEXC
        while lo < hi:
            mid = (lo + hi) >> 1
            if VSR_FOLD_EXC[2 * mid] < cp:
                lo = mid + 1
            else:
                hi = mid
        if lo < VSR_FOLD_NEXC and VSR_FOLD_EXC[2 * lo] == cp:
            return VSR_FOLD_EXC[2 * lo + 1]
    return _vsr_tolower(cp)


cdef inline Py_ssize_t lower_full(uint32_t cp, uint32_t* out) noexcept nogil:
    """str.lower() of one character other than U+03A3 (capital sigma, which
    depends on its neighbours: see the kernels' own Final_Sigma helper): 1 to 3
    code points into out, their number returned. Only U+0130 gives more than one
    (i + U+0307) in Unicode 14."""
    if cp < 0x80:
        out[0] = cp + 32 if 0x41 <= cp <= 0x5A else cp
        return 1
    return _vsr_lower_full(cp, out)
