# cython: language_level=3
"""Okapi BM25 over a fixed set of short tokenised documents, scored in C.

Scores equal rank_bm25.BM25Okapi's on the same tokens (same idf, same epsilon
floor for negative idf, same float operations). Tokens are interned to term ids
when the index is built; a query is scored by walking the CSR postings of its
terms, so its cost grows with the postings it touches, not with the corpus.

scores_text() tokenizes in C as tokenize() does, reading the str's own code
points (1, 2 or 4 bytes each, no UTF-8 copy): each token's lowercase code points
are hashed as they are read and looked up in an open-addressing table of the
vocabulary built with the index, so a token the index does not know costs no
Python object.
"""

from cpython.unicode cimport PyUnicode_FromKindAndData
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy

import math
import re

import numpy as np

from _text cimport (
    VSR_CJK_FLAT,
    VSR_CJK_NRANGES,
    _vsr_is_case_ignorable,
    _vsr_is_cased,
    _vsr_isalnum,
    is_cjk,
    lower_full,
)

cdef extern from "Python.h":
    int PyUnicode_READY(object) except -1
    int PyUnicode_KIND(object)
    void* PyUnicode_DATA(object)
    int PyUnicode_1BYTE_KIND
    int PyUnicode_2BYTE_KIND
    int PyUnicode_4BYTE_KIND

__all__ = ["CJK_RANGES", "BM25Index", "tokenize"]

CJK_RANGES = tuple(
    (<Py_ssize_t>VSR_CJK_FLAT[2 * r], <Py_ssize_t>VSR_CJK_FLAT[2 * r + 1])
    for r in range(VSR_CJK_NRANGES)
)

_CJK_CLASS = "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in CJK_RANGES)
# An alphanumeric CJK character alone, or a run of other alphanumerics.
# [^\W_] is str.isalnum(): the regex engine uses the same database call.
_TOKEN = re.compile(f"(?:(?=[{_CJK_CLASS}])[^\\W_])|[^\\W_{_CJK_CLASS}]+")


def tokenize(str text not None):
    """The router's BM25 tokenizer: text.lower(), then runs of alphanumerics.

    Each alphanumeric CJK character (see CJK_RANGES) is a token of its own, since
    CJK text does not separate its words; everything else that is not
    alphanumeric (punctuation, spaces, '_', emoji, combining marks) separates.
    """
    return _TOKEN.findall(text.lower())


# --------------------------------------------------------------------------- C tokenizer

ctypedef fused char_t:
    uint8_t
    uint16_t
    uint32_t

cdef extern from *:
    """
    /* FNV-1a over a token's code points (each as one 32-bit unit), then a
       multiplicative spread for the table slot. */
    #define VSR_SEED ((uint64_t)0xCBF29CE484222325ULL)
    #define VSR_PRIME ((uint64_t)0x100000001B3ULL)
    #define VSR_SPREAD ((uint64_t)0x9E3779B97F4A7C15ULL)
    """
    const uint64_t _SEED "VSR_SEED"
    const uint64_t _PRIME "VSR_PRIME"
    const uint64_t _SPREAD "VSR_SPREAD"

# ASCII: lowercase of each byte, and 0 for the bytes that are not alphanumeric.
cdef uint8_t _ASCII_TOKEN[128]
for _c in range(128):
    _ASCII_TOKEN[_c] = 0
    if 0x30 <= _c <= 0x39 or 0x61 <= _c <= 0x7A:
        _ASCII_TOKEN[_c] = _c
    elif 0x41 <= _c <= 0x5A:
        _ASCII_TOKEN[_c] = _c + 32
del _c


cdef inline uint64_t _hash_cps(const uint32_t* cps, Py_ssize_t length) noexcept nogil:
    cdef uint64_t h = _SEED
    cdef Py_ssize_t i
    for i in range(length):
        h = (h ^ cps[i]) * _PRIME
    return h


cdef uint32_t _lower_sigma(const char_t* data, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """str.lower() of the U+03A3 at data[i]: final sigma (U+03C2) when a cased
    character precedes it and none follows it, case-ignorable ones skipped both
    ways; else U+03C3. CPython's handle_capital_sigma, read for read."""
    cdef Py_ssize_t j
    cdef uint32_t c = 0
    cdef bint final_sigma
    j = i - 1
    while j >= 0:
        c = data[j]
        if not _vsr_is_case_ignorable(c):
            break
        j -= 1
    final_sigma = j >= 0 and _vsr_is_cased(c)
    if final_sigma and i + 1 < n:
        j = i + 1
        while j < n:
            c = data[j]
            if not _vsr_is_case_ignorable(c):
                break
            j += 1
        final_sigma = j == n or not _vsr_is_cased(c)
    return 0x3C2 if final_sigma else 0x3C3


# Called with each token's lowercase code points: buf[:min(length, cap)], and
# the hash of all `length` of them. A token longer than cap was not kept whole.
ctypedef void (*_emit_fn)(void* sink, const uint32_t* buf, Py_ssize_t length, uint64_t h) noexcept nogil


cdef void _scan(const char_t* data, Py_ssize_t n, uint32_t* buf, Py_ssize_t cap,
                _emit_fn emit, void* sink) noexcept nogil:
    """The tokens of tokenize(text) for the str whose code points are data[:n].

    Each character is lowercased as str.lower() does (full mapping, final sigma
    in context), and each code point of its lowercase then either extends the
    current run of alphanumerics, ends it, or (alphanumeric CJK) is a token alone.
    buf holds cap >= 1 code points.
    """
    cdef Py_ssize_t i, k, nout, length = 0
    cdef uint64_t h = _SEED
    cdef uint32_t c, lc
    cdef uint32_t low[4]
    for i in range(n):
        c = data[i]
        if c < 0x80:
            lc = _ASCII_TOKEN[c]
            if lc:
                if length < cap:
                    buf[length] = lc
                length += 1
                h = (h ^ lc) * _PRIME
            elif length:
                emit(sink, buf, length, h)
                length = 0
                h = _SEED
            continue
        if c == 0x3A3:
            low[0] = _lower_sigma(data, n, i)
            nout = 1
        else:
            nout = lower_full(c, low)
        for k in range(nout):
            lc = low[k]
            if not _vsr_isalnum(lc):
                if length:
                    emit(sink, buf, length, h)
                    length = 0
                    h = _SEED
            elif is_cjk(lc):
                if length:
                    emit(sink, buf, length, h)
                    length = 0
                buf[0] = lc
                emit(sink, buf, 1, (_SEED ^ lc) * _PRIME)
                h = _SEED
            else:
                if length < cap:
                    buf[length] = lc
                length += 1
                h = (h ^ lc) * _PRIME
    if length:
        emit(sink, buf, length, h)


cdef int _scan_str(str text, uint32_t* buf, Py_ssize_t cap, _emit_fn emit, void* sink) except -1:
    """_scan over a str in its own storage (1, 2 or 4 bytes a code point)."""
    PyUnicode_READY(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef Py_ssize_t n = len(text)
    with nogil:
        if kind == PyUnicode_1BYTE_KIND:
            _scan(<const uint8_t*>data, n, buf, cap, emit, sink)
        elif kind == PyUnicode_2BYTE_KIND:
            _scan(<const uint16_t*>data, n, buf, cap, emit, sink)
        else:
            _scan(<const uint32_t*>data, n, buf, cap, emit, sink)
    return 0


cdef struct _Collect:
    uint32_t* cps      # every token's code points, one after another
    Py_ssize_t n_cps
    Py_ssize_t* ends   # token t is cps[ends[t - 1]:ends[t]]
    Py_ssize_t n_tokens


cdef void _collect(void* sink, const uint32_t* buf, Py_ssize_t length, uint64_t h) noexcept nogil:
    cdef _Collect* c = <_Collect*>sink
    memcpy(c.cps + c.n_cps, buf, length * sizeof(uint32_t))
    c.n_cps += length
    c.ends[c.n_tokens] = c.n_cps
    c.n_tokens += 1


def _c_tokens(str text not None):
    """The tokens BM25Index.scores_text() reads from text, as strs.

    For the parity tests: equal to tokenize(text) for every str.
    """
    cdef Py_ssize_t n = len(text), t, start = 0
    cdef _Collect c
    # A character lowercases to at most 3 code points, so tokens hold at most 3n.
    cdef Py_ssize_t cap = 3 * n + 1
    c.cps = <uint32_t*>malloc(cap * sizeof(uint32_t))
    c.ends = <Py_ssize_t*>malloc((n + 1) * sizeof(Py_ssize_t))
    cdef uint32_t* buf = <uint32_t*>malloc(cap * sizeof(uint32_t))
    c.n_cps = c.n_tokens = 0
    try:
        if c.cps == NULL or c.ends == NULL or buf == NULL:
            raise MemoryError()
        _scan_str(text, buf, cap, _collect, &c)
        tokens = []
        for t in range(c.n_tokens):
            tokens.append(PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, c.cps + start, c.ends[t] - start))
            start = c.ends[t]
        return tokens
    finally:
        free(c.cps)
        free(c.ends)
        free(buf)


# The vocabulary as an open-addressing table, and the postings to add.
cdef struct _Lookup:
    const uint64_t* slot_hash   # per slot: the term's hash
    const int32_t* slot_term    # per slot: term id, -1 for an empty slot
    uint64_t mask
    int shift                   # slot = (hash * _SPREAD) >> shift
    const int64_t* term_off     # term t's code points: pool[term_off[t]:term_off[t + 1]]
    const uint32_t* pool
    Py_ssize_t max_len          # the longest term, in code points
    const int64_t* offsets      # CSR postings, as in BM25Index
    const int32_t* docs
    const double* weights
    double* out


cdef void _score_token(void* sink, const uint32_t* buf, Py_ssize_t length, uint64_t h) noexcept nogil:
    """Add the token's postings to out if the vocabulary has it."""
    cdef _Lookup* lk = <_Lookup*>sink
    cdef uint64_t slot
    cdef int32_t t
    cdef Py_ssize_t j, end
    if length > lk.max_len:
        return
    slot = (h * _SPREAD) >> lk.shift
    while True:
        t = lk.slot_term[slot]
        if t < 0:
            return
        if (lk.slot_hash[slot] == h and lk.term_off[t + 1] - lk.term_off[t] == length
                and memcmp(lk.pool + lk.term_off[t], buf, length * sizeof(uint32_t)) == 0):
            break
        slot = (slot + 1) & lk.mask
    end = lk.offsets[t + 1]
    for j in range(lk.offsets[t], end):
        lk.out[lk.docs[j]] += lk.weights[j]


cdef class BM25Index:
    """Okapi BM25 index over tokenised documents (lists of token strings)."""

    cdef readonly Py_ssize_t n_docs
    cdef readonly double k1, b, epsilon, avgdl, average_idf
    cdef dict _vocab
    # numpy arrays own the memory; the pointers below read them in nogil loops.
    cdef object _offsets_arr, _docs_arr, _weights_arr
    cdef const int64_t* _offsets
    cdef const int32_t* _docs
    cdef const double* _weights
    # The vocabulary's hash table for scores_text(); _lookup.out is set per call.
    cdef object _table_arrs
    cdef _Lookup _lookup

    def __init__(self, corpus, double k1=1.5, double b=0.75, double epsilon=0.25):
        if not k1 >= 0.0:
            raise ValueError(f"k1 must be >= 0, got {k1}")
        if not 0.0 <= b <= 1.0:
            raise ValueError(f"b must be in [0, 1], got {b}")
        if not math.isfinite(epsilon):
            raise ValueError(f"epsilon must be finite, got {epsilon}")
        self.k1, self.b, self.epsilon = k1, b, epsilon
        vocab = {}
        post_docs = []
        post_tfs = []
        doc_lens = []
        for d, document in enumerate(corpus):
            doc_lens.append(len(document))
            freqs = {}
            for tok in document:
                freqs[tok] = freqs.get(tok, 0) + 1
            # Term ids follow first appearance, as rank_bm25's dicts do, so the idf
            # sum below adds in its order and rounds the same.
            for tok, tf in freqs.items():
                tid = vocab.get(tok)
                if tid is None:
                    tid = vocab[tok] = len(vocab)
                    post_docs.append([])
                    post_tfs.append([])
                post_docs[tid].append(d)
                post_tfs[tid].append(tf)
        self._vocab = vocab
        self.n_docs = len(doc_lens)
        total_len = sum(doc_lens)
        self.avgdl = total_len / self.n_docs if self.n_docs else 0.0
        idf = self._idf(post_docs)
        self._build_postings(post_docs, post_tfs, doc_lens, idf)
        self._build_table(list(vocab))

    def _idf(self, post_docs):
        n = self.n_docs
        idf = []
        idf_sum = 0.0
        for docs in post_docs:
            freq = len(docs)
            value = math.log(n - freq + 0.5) - math.log(freq + 0.5)
            idf.append(value)
            idf_sum += value
        # rank_bm25 floors a negative idf (a term in more than half the documents)
        # at epsilon times the average idf.
        self.average_idf = idf_sum / len(idf) if idf else 0.0
        eps = self.epsilon * self.average_idf
        return [eps if value < 0 else value for value in idf]

    def _build_postings(self, post_docs, post_tfs, doc_lens, idf):
        k1, b, avgdl = self.k1, self.b, self.avgdl
        # rank_bm25's per-document length factor, operation for operation.
        norm = [k1 * (1 - b + b * dl / avgdl) for dl in doc_lens] if avgdl else [0.0] * len(doc_lens)
        offsets = [0]
        docs = []
        weights = []
        for tid, term_docs in enumerate(post_docs):
            term_idf = idf[tid]
            for d, tf in zip(term_docs, post_tfs[tid]):
                docs.append(d)
                # A term's whole contribution to a document, precomputed: the
                # query loop only adds.
                weights.append(term_idf * (tf * (k1 + 1) / (tf + norm[d])))
            offsets.append(len(docs))
        self._offsets_arr = np.asarray(offsets, dtype=np.int64)
        self._docs_arr = np.asarray(docs, dtype=np.int32)
        self._weights_arr = np.asarray(weights, dtype=np.float64)
        cdef const int64_t[::1] off_view = self._offsets_arr
        self._offsets = &off_view[0]
        cdef const int32_t[::1] docs_view = self._docs_arr
        self._docs = &docs_view[0] if docs else NULL
        cdef const double[::1] weights_view = self._weights_arr
        self._weights = &weights_view[0] if weights else NULL

    def _build_table(self, terms):
        """The hash table of the vocabulary (terms in term-id order) for scores_text().

        Terms hash by their code points as _scan hashes a token's. A term that no
        token can equal (upper case, punctuation, ...) is in it all the same and
        simply never found.
        """
        cdef Py_ssize_t n_terms = len(terms), size = 8, bits = 3, t
        while size < 2 * n_terms:
            size *= 2
            bits += 1
        # surrogatepass: a term may hold a lone surrogate, as a str may.
        pool = np.frombuffer("".join(terms).encode("utf-32-le", "surrogatepass") or b"\0\0\0\0",
                             dtype=np.uint32)
        term_off = np.zeros(n_terms + 1, dtype=np.int64)
        if n_terms:
            np.cumsum([len(term) for term in terms], out=term_off[1:])
        slot_hash = np.zeros(size, dtype=np.uint64)
        slot_term = np.full(size, -1, dtype=np.int32)
        self._table_arrs = (pool, term_off, slot_hash, slot_term)
        cdef const uint32_t[::1] pool_view = pool
        cdef const int64_t[::1] off_view = term_off
        cdef uint64_t[::1] hash_view = slot_hash
        cdef int32_t[::1] term_view = slot_term
        cdef uint64_t h, slot, mask = <uint64_t>size - 1
        cdef int shift = 64 - bits
        cdef Py_ssize_t max_len = 0
        for t in range(n_terms):
            h = _hash_cps(&pool_view[0] + off_view[t], off_view[t + 1] - off_view[t])
            slot = (h * _SPREAD) >> shift
            while term_view[slot] >= 0:
                slot = (slot + 1) & mask
            hash_view[slot] = h
            term_view[slot] = <int32_t>t
            if off_view[t + 1] - off_view[t] > max_len:
                max_len = off_view[t + 1] - off_view[t]
        self._lookup.slot_hash = &hash_view[0]
        self._lookup.slot_term = &term_view[0]
        self._lookup.mask = mask
        self._lookup.shift = shift
        self._lookup.term_off = &off_view[0]
        self._lookup.pool = &pool_view[0]
        self._lookup.max_len = max_len
        self._lookup.offsets = self._offsets
        self._lookup.docs = self._docs
        self._lookup.weights = self._weights
        self._lookup.out = NULL

    @property
    def n_terms(self):
        """Number of distinct tokens in the corpus."""
        return len(self._vocab)

    def scores(self, query_tokens):
        """BM25 score of every document for the query tokens: float64 array of n_docs.

        A repeated query token counts each time, and an unknown one adds 0, as in
        rank_bm25.
        """
        result = np.zeros(self.n_docs, dtype=np.float64)
        cdef Py_ssize_t nq = len(query_tokens), m = 0, i
        cdef int32_t stack_ids[64]
        cdef int32_t* ids = stack_ids
        if self.n_docs == 0 or nq == 0:
            return result
        if nq > 64:
            ids = <int32_t*>malloc(nq * sizeof(int32_t))
            if ids == NULL:
                raise MemoryError()
        cdef double[::1] out = result
        try:
            vocab = self._vocab
            for tok in query_tokens:
                tid = vocab.get(tok)
                if tid is not None:
                    ids[m] = tid
                    m += 1
            with nogil:
                self._accumulate(ids, m, &out[0])
        finally:
            if ids != stack_ids:
                free(ids)
        return result

    def scores_text(self, str text not None):
        """scores(tokenize(text)), tokenizing in C: the same float64 array, bit for bit.

        Tokens are lowercased, hashed and looked up without building a str, and
        their postings added in text order, as scores() adds its query's.
        """
        result = np.zeros(self.n_docs, dtype=np.float64)
        if self.n_docs == 0 or len(text) == 0:
            return result
        cdef double[::1] out = result
        cdef _Lookup lookup = self._lookup
        lookup.out = &out[0]
        # Only tokens up to the longest term's length can be found: keep that much.
        cdef uint32_t stack_buf[128]
        cdef uint32_t* buf = stack_buf
        cdef Py_ssize_t cap = lookup.max_len + 1
        if cap > 128:
            buf = <uint32_t*>malloc(cap * sizeof(uint32_t))
            if buf == NULL:
                raise MemoryError()
        try:
            _scan_str(text, buf, cap, _score_token, &lookup)
        finally:
            if buf != stack_buf:
                free(buf)
        return result

    cdef void _accumulate(self, const int32_t* ids, Py_ssize_t m, double* out) noexcept nogil:
        cdef Py_ssize_t i, j, end
        cdef const int32_t* docs = self._docs
        cdef const double* weights = self._weights
        # Terms in query order, as rank_bm25 adds them, so the sums round the same.
        for i in range(m):
            end = self._offsets[ids[i] + 1]
            for j in range(self._offsets[ids[i]], end):
                out[docs[j]] += weights[j]

    def top_k(self, query_tokens, Py_ssize_t k):
        """The k best documents as [(doc_index, score)], best first; ties by lower index."""
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        scores = self.scores(query_tokens)
        cdef const double[::1] view = scores
        cdef Py_ssize_t n = self.n_docs, got
        if k > n:
            k = n
        if k == 0:
            return []
        cdef int32_t* heap = <int32_t*>malloc(k * sizeof(int32_t))
        if heap == NULL:
            raise MemoryError()
        try:
            with nogil:
                got = _select_top(&view[0], n, k, heap)
            return [(heap[i], view[heap[i]]) for i in range(got)]
        finally:
            free(heap)


cdef inline bint _worse(const double* s, int32_t a, int32_t b) noexcept nogil:
    """Document a ranks below document b: lower score, or equal and later."""
    return s[a] < s[b] or (s[a] == s[b] and a > b)


cdef void _sift_down(const double* s, int32_t* heap, Py_ssize_t size, Py_ssize_t i) noexcept nogil:
    cdef Py_ssize_t child
    cdef int32_t tmp
    while True:
        child = 2 * i + 1
        if child >= size:
            return
        if child + 1 < size and _worse(s, heap[child + 1], heap[child]):
            child += 1
        if not _worse(s, heap[child], heap[i]):
            return
        tmp = heap[i]
        heap[i] = heap[child]
        heap[child] = tmp
        i = child


cdef Py_ssize_t _select_top(const double* s, Py_ssize_t n, Py_ssize_t k, int32_t* heap) noexcept nogil:
    """Fill heap[:k] with the k best documents, best first (a min-heap, then sorted)."""
    cdef Py_ssize_t i, j, size = 0
    cdef int32_t tmp
    # k <= n here, so the heap is full after the first k documents.
    for i in range(n):
        if size < k:
            heap[size] = <int32_t>i
            size += 1
            if size == k:
                for j in range(k // 2 - 1, -1, -1):
                    _sift_down(s, heap, k, j)
        elif _worse(s, heap[0], <int32_t>i):
            heap[0] = <int32_t>i
            _sift_down(s, heap, k, 0)
    # Heapsort in place: popping the worst to the back leaves the best first.
    i = size - 1
    while i > 0:
        tmp = heap[0]
        heap[0] = heap[i]
        heap[i] = tmp
        _sift_down(s, heap, i, 0)
        i -= 1
    return size
