# cython: language_level=3
"""Okapi BM25 over a fixed set of short tokenised documents, scored in C.

Scores equal rank_bm25.BM25Okapi's on the same tokens (same idf, same epsilon
floor for negative idf, same float operations). Tokens are interned to term ids
when the index is built; a query is scored by walking the CSR postings of its
terms, so its cost grows with the postings it touches, not with the corpus.
"""

from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

import math
import re

import numpy as np

from _text cimport VSR_CJK_FLAT, VSR_CJK_NRANGES

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
