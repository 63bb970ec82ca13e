# cython: language_level=3
"""Keyword kernels over UTF-8 text: literal counts, trigram similarity, fuzzy words.

Texts are read as UTF-8 bytes (a str's own UTF-8, which CPython caches on it);
the loops never touch Python objects and run without the GIL. Three notions are
shared by every matcher here and by vsr_fast._ext._reference:

- Case folding (case_sensitive=False) is `fold_case`: one code point to one,
  so positions and lengths in code points survive folding.
- A CJK character is a code point in CJK_RANGES. CJK text runs its words
  together, so a keyword with a CJK character has no boundary check, and a CJK
  neighbour never blocks a boundary.
- Words (n-gram and fuzzy matching) are runs of alphanumeric characters, each
  alphanumeric CJK character a word of its own: the BM25 tokenizer's rule.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, qsort
from libc.string cimport memcpy, memset

from collections import deque

import numpy as np

from _text cimport (
    VSR_CJK_FLAT,
    VSR_CJK_NRANGES,
    fold,
    is_alnum,
    is_boundary_word,
    is_cjk,
    utf8_decode,
    utf8_encode,
    utf8_prev,
)

__all__ = [
    "CJK_RANGES",
    "FuzzyMatcher",
    "KeywordMatcher",
    "NgramMatcher",
    "count_keywords",
    "density",
    "fold_case",
    "fuzzy_match",
    "ngram_match",
]

# Which edges of a keyword get a word-boundary check: only those that are word
# characters. A boundary is about not cutting a word; punctuation, symbols and
# emoji at an edge cut nothing, so "!" counts every "!" in "day!!!".
cdef enum:
    _LEFT = 1
    _RIGHT = 2

CJK_RANGES = tuple(
    (<Py_ssize_t>VSR_CJK_FLAT[2 * r], <Py_ssize_t>VSR_CJK_FLAT[2 * r + 1])
    for r in range(VSR_CJK_NRANGES)
)


# --------------------------------------------------------------------------- text access

cdef const unsigned char* _utf8(object text, Py_ssize_t* n) except NULL:
    """The UTF-8 bytes of a str or a bytes object, without a copy for bytes or ASCII str.

    For a non-ASCII str, CPython builds its UTF-8 once and keeps it on the object.
    """
    if isinstance(text, str):
        return <const unsigned char*>PyUnicode_AsUTF8AndSize(text, n)
    if isinstance(text, bytes):
        n[0] = PyBytes_GET_SIZE(text)
        return <const unsigned char*>PyBytes_AS_STRING(text)
    raise TypeError(f"text must be str or UTF-8 bytes, not {type(text).__name__}")


cdef Py_ssize_t _count_chars(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Code points in p[:n], an invalid byte counting as one (as utf8_decode reads it)."""
    cdef Py_ssize_t i = 0, count = 0
    cdef uint32_t cp
    while i < n:
        if p[i] < 0x80:
            i += 1
        else:
            i += utf8_decode(p, n, i, &cp)
        count += 1
    return count


cdef Py_ssize_t _fold_utf8(const unsigned char* p, Py_ssize_t n, unsigned char* out) noexcept nogil:
    """Fold p[:n] into out (NULL: only measure); return the folded byte length."""
    cdef Py_ssize_t i = 0, m = 0, length, flen
    cdef uint32_t cp, f
    cdef unsigned char enc[4]
    while i < n:
        length = utf8_decode(p, n, i, &cp)
        f = fold(cp)
        if f == cp:
            if out != NULL:
                memcpy(out + m, p + i, length)
            m += length
        else:
            flen = utf8_encode(f, enc)
            if out != NULL:
                memcpy(out + m, enc, flen)
            m += flen
        i += length
    return m


def fold_case(str text not None):
    """Simple case fold, one code point to one: casefold() where that is a single
    code point, else lower() where that is, else the character itself.
    """
    cdef Py_ssize_t n, m
    cdef const unsigned char* p = _utf8(text, &n)
    with nogil:
        m = _fold_utf8(p, n, NULL)
    cdef unsigned char* buf = <unsigned char*>malloc(m + 1)
    if buf == NULL:
        raise MemoryError()
    try:
        with nogil:
            _fold_utf8(p, n, buf)
        return PyUnicode_DecodeUTF8(<char*>buf, m, NULL)
    finally:
        free(buf)


def density(Py_ssize_t total_matches, Py_ssize_t text_len_chars):
    """Matches per 1,000 characters (code points) of text, the spec's unit; 0.0 for empty text."""
    if total_matches < 0 or text_len_chars < 0:
        raise ValueError("total_matches and text_len_chars must be >= 0")
    if text_len_chars == 0:
        return 0.0
    return total_matches * 1000.0 / text_len_chars


# --------------------------------------------------------------------------- literal keywords

def _build_automaton(patterns):
    """Aho-Corasick DFA over the bytes of `patterns`, as flat tables.

    Bytes that occur in no pattern share class 0, so a row has one column per
    distinct pattern byte plus one. Returns (classes[256], ncls, delta, n_states,
    out_offsets, out_ids, first_output_state); delta[s * ncls + c] holds the next
    state's row offset (state * ncls), and the states that report a match are
    numbered last, from first_output_state, so the scan tests one comparison.
    """
    alphabet = sorted({byte for pattern in patterns for byte in pattern})
    classes = np.zeros(256, dtype=np.int32)
    for i, byte in enumerate(alphabet):
        classes[byte] = i + 1
    ncls = len(alphabet) + 1
    goto = [{}]
    outputs = [[]]
    for k, pattern in enumerate(patterns):
        state = 0
        for byte in pattern:
            nxt = goto[state].get(byte)
            if nxt is None:
                nxt = len(goto)
                goto[state][byte] = nxt
                goto.append({})
                outputs.append([])
            state = nxt
        outputs[state].append(k)
    n_states = len(goto)
    if n_states * ncls >= 2**31:
        raise ValueError("too many keyword bytes for one matcher; split the keyword set")
    delta = np.zeros((n_states, ncls), dtype=np.int64)
    fail = [0] * n_states
    queue = deque()
    for byte, child in goto[0].items():
        delta[0, classes[byte]] = child
        queue.append(child)
    # Breadth first, so a state's fail state (shallower) is complete before it.
    while queue:
        state = queue.popleft()
        delta[state] = delta[fail[state]]
        for byte, child in goto[state].items():
            fail[child] = delta[fail[state], classes[byte]]
            outputs[child].extend(outputs[fail[child]])
            delta[state, classes[byte]] = child
            queue.append(child)
    order = [s for s in range(n_states) if not outputs[s]] + [s for s in range(n_states) if outputs[s]]
    renumber = np.empty(n_states, dtype=np.int64)
    renumber[order] = np.arange(n_states)
    table = np.empty((n_states, ncls), dtype=np.int32)
    table[renumber] = renumber[delta] * ncls
    out_offsets = [0]
    out_ids = []
    for s in order:
        out_ids.extend(outputs[s])
        out_offsets.append(len(out_ids))
    first_output = n_states - sum(1 for s in range(n_states) if outputs[s])
    return (classes, ncls, table.ravel(), n_states,
            np.asarray(out_offsets, dtype=np.int32), np.asarray(out_ids, dtype=np.int32), first_output)


cdef class KeywordMatcher:
    """Counts many literal keywords at once over a text, in one pass of an Aho-Corasick DFA.

    Each keyword counts its own non-overlapping occurrences, leftmost first (as
    str.count does). Word boundaries are checked only at a keyword's edges that
    are word characters (regex \\w, CJK excepted): "c++" needs no word character
    before it but may be followed by anything, "!" matches wherever it occurs,
    and "!!!" holds three "!". A keyword with a CJK character has no check.
    """

    cdef readonly tuple keywords
    cdef readonly bint case_sensitive
    cdef Py_ssize_t _nk, _ncls
    cdef int32_t _out_row
    cdef object _arrays  # owns the memory the pointers below read
    cdef const int32_t* _classes
    cdef const int32_t* _rawclasses
    cdef const int32_t* _delta
    cdef const int32_t* _out_off
    cdef const int32_t* _out_ids
    cdef const int32_t* _kbytes
    cdef const int32_t* _kchars
    cdef const unsigned char* _boundary

    def __init__(self, keywords, *, bint case_sensitive=False):
        self.keywords = tuple(keywords)
        self.case_sensitive = case_sensitive
        self._nk = len(self.keywords)
        patterns = []
        kchars = []
        boundary = []
        for keyword in self.keywords:
            if not isinstance(keyword, str):
                raise TypeError(f"keywords must be str, got {keyword!r}")
            if not keyword:
                raise ValueError("keywords must be non-empty")
            folded = keyword if case_sensitive else fold_case(keyword)
            patterns.append(folded.encode())
            kchars.append(len(folded))
            boundary.append(_edges(folded) if not any(_is_cjk_py(ord(ch)) for ch in keyword) else 0)
        classes, ncls, delta, n_states, out_off, out_ids, first_output = _build_automaton(patterns)
        rawclasses = classes.copy()
        if not case_sensitive:
            # ASCII folds inside the class table: 'A' reads as 'a' at no cost.
            rawclasses[ord("A"):ord("Z") + 1] = classes[ord("a"):ord("z") + 1]
        kbytes = np.asarray([len(p) for p in patterns] or [0], dtype=np.int32)
        kchars_arr = np.asarray(kchars or [0], dtype=np.int32)
        boundary_arr = np.asarray(boundary or [0], dtype=np.uint8)
        if out_ids.size == 0:
            out_ids = np.zeros(1, dtype=np.int32)
        self._arrays = (classes, rawclasses, delta, out_off, out_ids, kbytes, kchars_arr, boundary_arr)
        self._ncls = ncls
        self._out_row = <int32_t>(first_output * ncls)
        cdef const int32_t[::1] v
        v = classes
        self._classes = &v[0]
        v = rawclasses
        self._rawclasses = &v[0]
        v = delta
        self._delta = &v[0]
        v = out_off
        self._out_off = &v[0]
        v = out_ids
        self._out_ids = &v[0]
        v = kbytes
        self._kbytes = &v[0]
        v = kchars_arr
        self._kchars = &v[0]
        cdef const unsigned char[::1] b = boundary_arr
        self._boundary = &b[0]

    def counts(self, text):
        """Per-keyword match counts (int64 array, keyword order) and their total."""
        cdef Py_ssize_t n, i, total = 0
        cdef const unsigned char* p = _utf8(text, &n)
        result = np.zeros(self._nk, dtype=np.int64)
        if self._nk == 0 or n == 0:
            return result, 0
        cdef int64_t[::1] counts = result
        cdef Py_ssize_t* last_end = <Py_ssize_t*>malloc(self._nk * sizeof(Py_ssize_t))
        if last_end == NULL:
            raise MemoryError()
        try:
            with nogil:
                memset(last_end, 0, self._nk * sizeof(Py_ssize_t))
                self._scan(p, n, &counts[0], last_end)
                for i in range(self._nk):
                    total += counts[i]
        finally:
            free(last_end)
        return result, total

    def density(self, text):
        """Total matches per 1,000 characters (code points) of text."""
        _, total = self.counts(text)
        cdef Py_ssize_t n, chars
        cdef const unsigned char* p
        if isinstance(text, str):
            chars = len(text)
        else:
            p = _utf8(text, &n)
            with nogil:
                chars = _count_chars(p, n)
        return density(total, chars)

    cdef void _scan(self, const unsigned char* p, Py_ssize_t n, int64_t* counts,
                    Py_ssize_t* last_end) noexcept nogil:
        cdef const int32_t* delta = self._delta
        cdef const int32_t* rawclasses = self._rawclasses
        cdef const int32_t* classes = self._classes
        cdef int32_t row = 0, out_row = self._out_row
        cdef Py_ssize_t i = 0, j, length, flen
        cdef uint32_t cp, f
        cdef unsigned char c
        cdef unsigned char enc[4]
        # Set once a fold changed a character's byte length: from then on a match's
        # start is found by walking back over characters, not by subtracting bytes.
        cdef bint shifted = False
        if self.case_sensitive:
            while i < n:
                row = delta[row + rawclasses[p[i]]]
                i += 1
                if row >= out_row:
                    self._report(p, n, row, i, False, counts, last_end)
            return
        while i < n:
            c = p[i]
            if c < 0x80:
                row = delta[row + rawclasses[c]]
                i += 1
            else:
                length = utf8_decode(p, n, i, &cp)
                f = fold(cp)
                if f == cp:
                    for j in range(length):
                        row = delta[row + rawclasses[p[i + j]]]
                else:
                    flen = utf8_encode(f, enc)
                    if flen != length:
                        shifted = True
                    for j in range(flen):
                        row = delta[row + classes[enc[j]]]
                i += length
            # Keywords are whole characters, so a match can only end where a
            # character ends: testing here, after each one, misses none.
            if row >= out_row:
                self._report(p, n, row, i, shifted, counts, last_end)

    cdef void _report(self, const unsigned char* p, Py_ssize_t n, int32_t row, Py_ssize_t end,
                      bint shifted, int64_t* counts, Py_ssize_t* last_end) noexcept nogil:
        cdef Py_ssize_t state = row // self._ncls, j, k, start, steps
        cdef uint32_t cp
        cdef bint ci = not self.case_sensitive
        for j in range(self._out_off[state], self._out_off[state + 1]):
            k = self._out_ids[j]
            if shifted:
                start = end
                steps = self._kchars[k]
                while steps > 0 and start > 0:
                    start = utf8_prev(p, n, start)
                    steps -= 1
            else:
                start = end - self._kbytes[k]
            if start < last_end[k]:
                continue  # overlaps this keyword's previous match
            if self._boundary[k] & _LEFT:
                if start > 0:
                    utf8_decode(p, n, utf8_prev(p, n, start), &cp)
                    if is_boundary_word(fold(cp) if ci else cp):
                        continue
            if self._boundary[k] & _RIGHT:
                if end < n:
                    utf8_decode(p, n, end, &cp)
                    if is_boundary_word(fold(cp) if ci else cp):
                        continue
            counts[k] += 1
            last_end[k] = end


def count_keywords(text, keywords, *, bint case_sensitive=False):
    """Per-keyword counts and total of `keywords` in `text`; see KeywordMatcher."""
    return KeywordMatcher(keywords, case_sensitive=case_sensitive).counts(text)


cdef bint _is_cjk_py(Py_ssize_t cp):
    return is_cjk(<uint32_t>cp)


cdef unsigned char _edges(str folded):
    cdef unsigned char out = 0
    if is_boundary_word(<uint32_t>ord(folded[0])):
        out |= _LEFT
    if is_boundary_word(<uint32_t>ord(folded[len(folded) - 1])):
        out |= _RIGHT
    return out


# --------------------------------------------------------------------------- words and spans

cdef struct _Words:
    uint32_t* cps        # the text's code points, folded unless case-sensitive
    Py_ssize_t n_cps
    Py_ssize_t* starts   # word i covers cps[starts[i]:ends[i]]
    Py_ssize_t* ends
    Py_ssize_t n_words


cdef int _split_words(const unsigned char* p, Py_ssize_t n, bint ci, _Words* w) except -1 nogil:
    """Decode (and fold) p[:n] into code points and find its words; free with _free_words."""
    cdef Py_ssize_t i = 0, m = 0, nw = 0
    cdef uint32_t cp
    w.cps = <uint32_t*>malloc((n + 1) * sizeof(uint32_t))
    w.starts = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
    w.ends = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
    if w.cps == NULL or w.starts == NULL or w.ends == NULL:
        _free_words(w)
        with gil:
            raise MemoryError()
    while i < n:
        i += utf8_decode(p, n, i, &cp)
        w.cps[m] = fold(cp) if ci else cp
        m += 1
    w.n_cps = m
    i = 0
    while i < m:
        cp = w.cps[i]
        if not is_alnum(cp):
            i += 1
            continue
        w.starts[nw] = i
        i += 1
        if not is_cjk(cp):
            while i < m and is_alnum(w.cps[i]) and not is_cjk(w.cps[i]):
                i += 1
        w.ends[nw] = i
        nw += 1
    w.n_words = nw
    return 0


cdef void _free_words(_Words* w) noexcept nogil:
    free(w.cps)
    free(w.starts)
    free(w.ends)
    w.cps, w.starts, w.ends = NULL, NULL, NULL


cdef _keyword_spans(keywords, bint ci):
    """Each keyword's span (first word start to last word end) as code points, and
    its word count: the flat code points, their offsets, and the counts.
    """
    cdef _Words w
    cdef Py_ssize_t n, i
    cdef const unsigned char* p
    flat = []
    offsets = [0]
    n_words = []
    for keyword in keywords:
        if not isinstance(keyword, str):
            raise TypeError(f"keywords must be str, got {keyword!r}")
        p = _utf8(keyword, &n)
        _split_words(p, n, ci, &w)
        try:
            if w.n_words:
                for i in range(w.starts[0], w.ends[w.n_words - 1]):
                    flat.append(w.cps[i])
            n_words.append(w.n_words)
            offsets.append(len(flat))
        finally:
            _free_words(&w)
    return (np.asarray(flat or [0], dtype=np.uint32), np.asarray(offsets, dtype=np.int64),
            np.asarray(n_words or [0], dtype=np.int64))


# --------------------------------------------------------------------------- trigram similarity

cdef inline uint64_t _short_gram(const uint32_t* cps, Py_ssize_t length) noexcept nogil:
    """The one "gram" of a string shorter than 3: tagged with bit 63, which no
    trigram code sets (3 x 21 bits), and its length, so it equals only itself."""
    cdef uint64_t code = (<uint64_t>1 << 63) | (<uint64_t>length << 61)
    cdef Py_ssize_t i
    for i in range(length):
        code |= <uint64_t>cps[i] << (21 * (length - 1 - i))
    return code


cdef int _cmp_u64(const void* a, const void* b) noexcept nogil:
    cdef uint64_t x = (<const uint64_t*>a)[0], y = (<const uint64_t*>b)[0]
    return (x > y) - (x < y)


cdef Py_ssize_t _gram_set(const uint32_t* cps, Py_ssize_t s, Py_ssize_t e, uint64_t* out) noexcept nogil:
    """The sorted, distinct trigram codes of cps[s:e] into out; return their number."""
    cdef Py_ssize_t length = e - s, count, i, j, unique
    cdef uint64_t x
    if length <= 0:
        return 0
    if length < 3:
        out[0] = _short_gram(cps + s, length)
        return 1
    count = length - 2
    for i in range(count):
        out[i] = (<uint64_t>cps[s + i] << 42) | (<uint64_t>cps[s + i + 1] << 21) | cps[s + i + 2]
    if count <= 24:
        for i in range(1, count):  # insertion sort: spans are mostly a word or two
            x = out[i]
            j = i - 1
            while j >= 0 and out[j] > x:
                out[j + 1] = out[j]
                j -= 1
            out[j + 1] = x
    else:
        qsort(out, count, sizeof(uint64_t), _cmp_u64)
    unique = 1
    for i in range(1, count):
        if out[i] != out[unique - 1]:
            out[unique] = out[i]
            unique += 1
    return unique


cdef extern from *:
    """
    #define VSR_GRAM_SPREAD ((uint64_t)0x9E3779B97F4A7C15ULL)
    """
    const uint64_t _SPREAD "VSR_GRAM_SPREAD"  # slot = (code * _SPREAD) >> shift


# The text's trigrams at positions lo <= i < hi, counted (the trigram at i is
# cps[i:i + 3]). Each distinct trigram code of the text gets a dense id from a
# hash table, the keywords' trigrams first (ids below n_kgrams), so moving the
# window updates counts, the number of distinct trigrams in it, and, for each
# keyword, how many of its trigrams are in it: no set is built or sorted.
cdef struct _Window:
    const uint32_t* cps
    int32_t* table         # open addressing: the id in each slot, -1 if free
    uint64_t* codes        # the trigram code of each id
    uint64_t mask
    int shift
    int32_t n_ids
    int32_t* pos_id        # id of the trigram at each position, -1 until first seen
    int32_t* counts        # occurrences in the window, by id
    Py_ssize_t distinct
    Py_ssize_t lo, hi
    int32_t n_kgrams
    const int64_t* kg_off  # keywords with trigram id g: kg_kw[kg_off[g]:kg_off[g + 1]]
    const int32_t* kg_kw
    Py_ssize_t* common     # per keyword: its trigrams in the window


cdef inline int32_t _gram_id(_Window* win, uint64_t code) noexcept nogil:
    """The id of a trigram code, a new one if the text has not shown it before."""
    cdef uint64_t slot = (code * _SPREAD) >> win.shift
    cdef int32_t gid
    while True:
        gid = win.table[slot]
        if gid < 0:
            gid = win.table[slot] = win.n_ids
            win.codes[gid] = code
            win.n_ids += 1
            return gid
        if win.codes[gid] == code:
            return gid
        slot = (slot + 1) & win.mask


cdef inline void _window_add(_Window* win, Py_ssize_t i) noexcept nogil:
    cdef int32_t gid = win.pos_id[i]
    cdef Py_ssize_t j
    if gid < 0:
        gid = _gram_id(win, (<uint64_t>win.cps[i] << 42) | (<uint64_t>win.cps[i + 1] << 21) | win.cps[i + 2])
        win.pos_id[i] = gid
    win.counts[gid] += 1
    if win.counts[gid] == 1:
        win.distinct += 1
        if gid < win.n_kgrams:
            for j in range(win.kg_off[gid], win.kg_off[gid + 1]):
                win.common[win.kg_kw[j]] += 1


cdef inline void _window_remove(_Window* win, Py_ssize_t i) noexcept nogil:
    cdef int32_t gid = win.pos_id[i]  # set: i was added
    cdef Py_ssize_t j
    win.counts[gid] -= 1
    if win.counts[gid] == 0:
        win.distinct -= 1
        if gid < win.n_kgrams:
            for j in range(win.kg_off[gid], win.kg_off[gid + 1]):
                win.common[win.kg_kw[j]] -= 1


cdef inline void _window_move(_Window* win, Py_ssize_t lo, Py_ssize_t hi) noexcept nogil:
    """Make the window [lo, hi); neither bound may move back."""
    if lo >= win.hi:
        # Disjoint from the current window: empty it, start afresh.
        while win.lo < win.hi:
            _window_remove(win, win.lo)
            win.lo += 1
        win.lo = win.hi = lo
    else:
        while win.lo < lo:
            _window_remove(win, win.lo)
            win.lo += 1
    while win.hi < hi:
        _window_add(win, win.hi)
        win.hi += 1


cdef class NgramMatcher:
    """Trigram (Jaccard) similarity of each keyword with the text's word spans.

    A keyword of m words is compared with every run of m consecutive words of
    the text, as the span from the first word's start to the last word's end.
    Similarity is |A & B| / |A | B| over the two spans' sets of character
    trigrams; a span shorter than 3 characters is its own single gram.

    The spans of m words, taken in order, start and end further and further
    into the text, so one window slides over the text's trigrams for each m:
    |A & B| and |B| are kept up to date as trigrams enter and leave it, and
    |A | B| = |A| + |B| - |A & B|.
    """

    cdef readonly tuple keywords
    cdef readonly double threshold
    cdef readonly bint case_sensitive
    cdef Py_ssize_t _nk, _max_words, _n_kgrams
    cdef object _arrays
    cdef const int64_t* _kwords
    cdef const int64_t* _gram_off
    cdef const uint64_t* _grams
    cdef const int64_t* _group_ids   # keyword ids ordered by word count
    cdef const uint64_t* _kg_codes   # the distinct trigram codes of all keywords
    cdef const int64_t* _kg_off      # and the keywords that hold each (CSR)
    cdef const int32_t* _kg_kw

    def __init__(self, keywords, double threshold, *, bint case_sensitive=False):
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        self.keywords = tuple(keywords)
        self.threshold = threshold
        self.case_sensitive = case_sensitive
        self._nk = len(self.keywords)
        cps, offsets, kwords = _keyword_spans(self.keywords, not case_sensitive)
        cdef const uint32_t[::1] cview = cps
        cdef const int64_t[::1] oview = offsets
        cdef Py_ssize_t k, i, count
        cdef Py_ssize_t longest = int(np.diff(offsets).max()) if self._nk else 0
        cdef uint64_t* buf = <uint64_t*>malloc((longest + 1) * sizeof(uint64_t))
        if buf == NULL:
            raise MemoryError()
        grams = []
        gram_off = [0]
        holders = {}  # trigram code -> the keywords that hold it
        try:
            for k in range(self._nk):
                count = _gram_set(&cview[0], oview[k], oview[k + 1], buf)
                for i in range(count):
                    grams.append(buf[i])
                    if not buf[i] >> 63:  # a short span's gram is compared apart
                        holders.setdefault(buf[i], []).append(k)
                gram_off.append(len(grams))
        finally:
            free(buf)
        group_ids = np.argsort(kwords[:self._nk], kind="stable").astype(np.int64)
        grams_arr = np.asarray(grams or [0], dtype=np.uint64)
        gram_off_arr = np.asarray(gram_off, dtype=np.int64)
        if group_ids.size == 0:
            group_ids = np.zeros(1, dtype=np.int64)
        self._n_kgrams = len(holders)
        kg_codes = np.asarray(list(holders) or [0], dtype=np.uint64)
        kg_off = np.zeros(len(holders) + 1, dtype=np.int64)
        np.cumsum([len(ks) for ks in holders.values()], out=kg_off[1:])
        kg_kw = np.asarray([k for ks in holders.values() for k in ks] or [0], dtype=np.int32)
        self._max_words = int(kwords[:self._nk].max()) if self._nk else 0
        self._arrays = (kwords, grams_arr, gram_off_arr, group_ids, kg_codes, kg_off, kg_kw)
        cdef const int64_t[::1] v
        v = kwords
        self._kwords = &v[0]
        v = gram_off_arr
        self._gram_off = &v[0]
        v = group_ids
        self._group_ids = &v[0]
        v = kg_off
        self._kg_off = &v[0]
        cdef const uint64_t[::1] g = grams_arr
        self._grams = &g[0]
        g = kg_codes
        self._kg_codes = &g[0]
        cdef const int32_t[::1] kw = kg_kw
        self._kg_kw = &kw[0]

    def best(self, text):
        """Each keyword's best similarity over the text's spans (float64 array; 0.0: none)."""
        cdef Py_ssize_t n
        cdef const unsigned char* p = _utf8(text, &n)
        result = np.zeros(self._nk, dtype=np.float64)
        if self._nk == 0:
            return result
        cdef double[::1] best = result
        cdef _Words w
        cdef _Window win
        cdef Py_ssize_t n_pos, cap, size, bits
        cdef bint ok
        with nogil:
            _split_words(p, n, not self.case_sensitive, &w)
            n_pos = w.n_cps - 2 if w.n_cps > 2 else 0
            cap = self._n_kgrams + n_pos  # distinct trigrams: at most the keywords' and the text's
            size, bits = 16, 4
            while size < cap + cap // 2:
                size *= 2
                bits += 1
            win.cps = w.cps
            win.table = <int32_t*>malloc(size * sizeof(int32_t))
            win.codes = <uint64_t*>malloc((cap + 1) * sizeof(uint64_t))
            win.mask = <uint64_t>size - 1
            win.shift = <int>(64 - bits)
            win.pos_id = <int32_t*>malloc((n_pos + 1) * sizeof(int32_t))
            win.counts = <int32_t*>calloc(cap + 1, sizeof(int32_t))
            win.common = <Py_ssize_t*>calloc(self._nk, sizeof(Py_ssize_t))
            ok = win.table != NULL and win.codes != NULL and win.pos_id != NULL and win.counts != NULL and win.common != NULL
            if ok:
                self._best(&w, &win, &best[0])
            free(win.table)
            free(win.codes)
            free(win.pos_id)
            free(win.counts)
            free(win.common)
            _free_words(&w)
        if not ok:
            raise MemoryError()
        return result

    def match(self, text):
        """[(keyword_index, similarity)] of the keywords whose best similarity >= threshold."""
        cdef const double[::1] best = self.best(text)
        cdef Py_ssize_t k
        return [(k, best[k]) for k in range(self._nk) if best[k] >= self.threshold]

    cdef void _best(self, _Words* w, _Window* win, double* best) noexcept nogil:
        cdef Py_ssize_t g = 0, gi, words, start, j, idx, k, kcount, common, s, e
        cdef uint64_t short_code
        cdef double similarity
        memset(win.table, 0xFF, (win.mask + 1) * sizeof(int32_t))
        memset(win.pos_id, 0xFF, (w.n_cps - 2 if w.n_cps > 2 else 0) * sizeof(int32_t))
        win.n_ids = 0
        win.n_kgrams = <int32_t>self._n_kgrams
        win.kg_off = self._kg_off
        win.kg_kw = self._kg_kw
        for gi in range(self._n_kgrams):  # distinct codes: ids 0 .. n_kgrams - 1
            _gram_id(win, self._kg_codes[gi])
        # Keywords in order of word count: for each count, one pass of the window.
        while g < self._nk:
            words = self._kwords[self._group_ids[g]]
            j = g
            while j < self._nk and self._kwords[self._group_ids[j]] == words:
                j += 1
            if words > 0:
                win.lo = win.hi = 0
                win.distinct = 0
                for start in range(w.n_words - words + 1):
                    s = w.starts[start]
                    e = w.ends[start + words - 1]
                    # The span's trigrams start at s .. e - 3; none if it is shorter than 3.
                    _window_move(win, s, e - 2 if e - 2 > s else s)
                    if e - s < 3:
                        # Its one gram is itself: it matches (1.0) only a keyword that is the same short span.
                        short_code = _short_gram(w.cps + s, e - s)
                        for idx in range(g, j):
                            k = self._group_ids[idx]
                            if (self._gram_off[k + 1] - self._gram_off[k] == 1
                                    and self._grams[self._gram_off[k]] == short_code):
                                best[k] = 1.0
                        continue
                    for idx in range(g, j):
                        k = self._group_ids[idx]
                        common = win.common[k]
                        if common == 0:
                            continue
                        kcount = self._gram_off[k + 1] - self._gram_off[k]
                        similarity = <double>common / <double>(kcount + win.distinct - common)
                        if similarity > best[k]:
                            best[k] = similarity
                _window_move(win, win.hi, win.hi)  # empty: counts and common back to 0
            g = j


def ngram_match(text, keywords, double threshold, *, bint case_sensitive=False):
    """[(keyword_index, similarity)] of keywords with a span of similarity >= threshold."""
    return NgramMatcher(keywords, threshold, case_sensitive=case_sensitive).match(text)


# --------------------------------------------------------------------------- fuzzy words

cdef Py_ssize_t _levenshtein(const uint32_t* a, Py_ssize_t la, const uint32_t* b, Py_ssize_t lb,
                             Py_ssize_t cutoff, Py_ssize_t* row) noexcept nogil:
    """Edit distance of a and b in code points if <= cutoff, else cutoff + 1.

    row has room for lb + 1 entries. A row whose minimum exceeds the cutoff
    ends the search: later rows never go below it.
    """
    cdef Py_ssize_t i, j, diag, up, value, row_min
    if (la - lb if la > lb else lb - la) > cutoff:
        return cutoff + 1
    for j in range(lb + 1):
        row[j] = j
    for i in range(1, la + 1):
        diag = row[0]
        row[0] = i
        row_min = i
        for j in range(1, lb + 1):
            up = row[j]
            value = diag + (a[i - 1] != b[j - 1])
            if up + 1 < value:
                value = up + 1
            if row[j - 1] + 1 < value:
                value = row[j - 1] + 1
            row[j] = value
            diag = up
            if value < row_min:
                row_min = value
        if row_min > cutoff:
            return cutoff + 1
    return row[lb] if row[lb] <= cutoff else cutoff + 1


cdef class FuzzyMatcher:
    """Keywords within Levenshtein distance max_distance (in code points) of a text span.

    A keyword of m words is compared with every run of m consecutive words of
    the text, as the span from the first word's start to the last word's end.
    """

    cdef readonly tuple keywords
    cdef readonly Py_ssize_t max_distance
    cdef readonly bint case_sensitive
    cdef Py_ssize_t _nk, _max_len
    cdef object _arrays
    cdef const uint32_t* _cps
    cdef const int64_t* _off
    cdef const int64_t* _kwords

    def __init__(self, keywords, Py_ssize_t max_distance, *, bint case_sensitive=False):
        if max_distance < 0:
            raise ValueError(f"max_distance must be >= 0, got {max_distance}")
        self.keywords = tuple(keywords)
        self.max_distance = max_distance
        self.case_sensitive = case_sensitive
        self._nk = len(self.keywords)
        cps, offsets, kwords = _keyword_spans(self.keywords, not case_sensitive)
        self._max_len = int(np.diff(offsets).max()) if self._nk else 0
        self._arrays = (cps, offsets, kwords)
        cdef const uint32_t[::1] c = cps
        self._cps = &c[0]
        cdef const int64_t[::1] v
        v = offsets
        self._off = &v[0]
        v = kwords
        self._kwords = &v[0]

    def distances(self, text):
        """Each keyword's least distance to a span if <= max_distance, else -1 (int64 array)."""
        cdef Py_ssize_t n
        cdef const unsigned char* p = _utf8(text, &n)
        result = np.full(self._nk, -1, dtype=np.int64)
        if self._nk == 0:
            return result
        cdef int64_t[::1] out = result
        cdef _Words w
        cdef Py_ssize_t* row = <Py_ssize_t*>malloc((self._max_len + 1) * sizeof(Py_ssize_t))
        if row == NULL:
            raise MemoryError()
        try:
            with nogil:
                _split_words(p, n, not self.case_sensitive, &w)
                self._distances(&w, row, &out[0])
                _free_words(&w)
        finally:
            free(row)
        return result

    def match(self, text):
        """[(keyword_index, distance)] of the keywords within max_distance of some span."""
        distances = self.distances(text)
        return [(int(k), int(distances[k])) for k in np.flatnonzero(distances >= 0)]

    cdef void _distances(self, _Words* w, Py_ssize_t* row, int64_t* out) noexcept nogil:
        cdef Py_ssize_t k, start, words, klen, best, d, s, e
        cdef const uint32_t* kcps
        for k in range(self._nk):
            words = self._kwords[k]
            if words == 0:
                continue
            kcps = self._cps + self._off[k]
            klen = self._off[k + 1] - self._off[k]
            best = self.max_distance + 1
            for start in range(w.n_words - words + 1):
                s = w.starts[start]
                e = w.ends[start + words - 1]
                # Only a strictly better distance matters: cut off at best - 1.
                d = _levenshtein(w.cps + s, e - s, kcps, klen, best - 1, row)
                if d < best:
                    best = d
                    if best == 0:
                        break
            if best <= self.max_distance:
                out[k] = best


def fuzzy_match(text, keywords, Py_ssize_t max_distance, *, bint case_sensitive=False):
    """[(keyword_index, distance)] of keywords within max_distance of some text span."""
    return FuzzyMatcher(keywords, max_distance, case_sensitive=case_sensitive).match(text)
