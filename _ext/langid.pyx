# cython: language_level=3
"""Language identification equal to py3langid 0.4's, with the model walked in C.

`LangId` is built from a loaded py3langid `LanguageIdentifier(norm_probs=True)`
and answers what its `classify` answers: the same text preprocessing, the same
byte-DFA features, the same naive Bayes sums and softmax temperature. Only the
rounding differs: py3langid computes in float32 (summing in OpenBLAS's order),
this kernel in double, which makes it the more exact of the two.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.math cimport exp, log1p, sqrt
from libc.stdint cimport int32_t, uint16_t, uint32_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memmove, memset

import unicodedata

import numpy as np
from py3langid.langid import decode_trimmed

__all__ = ["LangId"]


cdef inline float _half(uint16_t h) noexcept nogil:
    """A normal IEEE half (not zero, subnormal, inf or NaN) as a float, exactly.

    For normal numbers the conversion is only moving the sign and rebiasing the
    exponent (15 -> 127): integer ops, so the loop over a row vectorises.
    """
    cdef uint32_t bits = ((<uint32_t>h & 0x8000u) << 16) | (((<uint32_t>h & 0x7fffu) << 13) + 0x38000000u)
    cdef float f
    memcpy(&f, &bits, 4)
    return f


cdef enum:
    # The walk runs as up to _MAX_CHAINS chains in lockstep (see _walk), each on
    # at least _MIN_CHUNK bytes, all but the first started _WARMUP bytes early.
    _MAX_CHAINS = 8
    _MIN_CHUNK = 32
    _WARMUP = 16


cdef struct _Dfa:
    const uint32_t* nextmove  # state, byte -> state: nextmove[rowbase[state] + byte]
    const uint32_t* rowbase
    const int32_t* output  # state -> the feature it emits, or -1


cdef inline uint32_t _step(const _Dfa* d, uint32_t state, unsigned char byte) noexcept nogil:
    return d.nextmove[d.rowbase[state] + byte]


cdef Py_ssize_t _walk_from(const _Dfa* d, uint32_t* state, const unsigned char* p, Py_ssize_t n,
                           int32_t* feats) noexcept nogil:
    """Walk p[:n] from state[0], left updated: the features emitted, in order, into feats."""
    cdef uint32_t s = state[0]
    cdef int32_t f
    cdef Py_ssize_t i, m = 0
    for i in range(n):
        s = _step(d, s, p[i])
        f = d.output[s]
        # Stored always and kept only if a feature (f >= 0): whether a byte emits
        # one follows no pattern a branch predictor could learn.
        feats[m] = f
        m += f >= 0
    state[0] = s
    return m


cdef inline Py_ssize_t _walk_chains(const _Dfa* d, const unsigned char* p, Py_ssize_t n,
                                   int32_t* feats, int chains) noexcept nogil:
    """_walk with `chains` chains (a constant where inlined, so the lockstep loop unrolls)."""
    cdef uint32_t state[_MAX_CHAINS]
    cdef uint32_t start[_MAX_CHAINS]
    cdef Py_ssize_t m[_MAX_CHAINS]
    cdef Py_ssize_t size = n // chains, k, t, end, total
    cdef int32_t f
    # Chunk k is p[k*size : (k+1)*size] (the last runs to n); a byte emits at
    # most one feature, so its features fit at feats[k*size:] until compacted.
    for k in range(chains):
        state[k] = 0
    for t in range(_WARMUP):
        for k in range(1, chains):
            state[k] = _step(d, state[k], p[k * size - _WARMUP + t])
    for k in range(chains):
        start[k] = state[k]
        m[k] = k * size
    for t in range(size):
        for k in range(chains):
            state[k] = _step(d, state[k], p[k * size + t])
            f = d.output[state[k]]
            feats[m[k]] = f
            m[k] += f >= 0
    k = chains - 1
    m[k] += _walk_from(d, &state[k], p + chains * size, n - chains * size, feats + m[k])
    total = m[0]
    for k in range(1, chains):
        # state[k - 1] is the true walk's state at chunk k's start (chunk k - 1
        # was checked, or walked again, before).
        if start[k] != state[k - 1]:
            end = (k + 1) * size if k < chains - 1 else n
            state[k] = state[k - 1]
            m[k] = k * size + _walk_from(d, &state[k], p + k * size, end - k * size, feats + k * size)
        memmove(feats + total, feats + k * size, (m[k] - k * size) * sizeof(int32_t))
        total += m[k] - k * size
    return total


cdef Py_ssize_t _walk(const _Dfa* d, const unsigned char* p, Py_ssize_t n, int32_t* feats) noexcept nogil:
    """py3langid's visit_counts: the features p[:n] emits from state 0, in order, into feats.

    One walk is a chain of dependent loads from a 40 MB table, bound by cache
    latency, so the text is cut into chunks walked in lockstep, their loads in
    flight together. Chunk k > 0 starts _WARMUP bytes early from state 0: the
    model is an Aho-Corasick automaton over byte n-grams (its deepest state is 6
    bytes from state 0), so its state depends only on the last few bytes read,
    and the chain reaches the chunk start in the true walk's state. That is
    checked, not assumed: a chunk whose start state differs is walked again.
    """
    cdef uint32_t state = 0
    if n >= 8 * _MIN_CHUNK:
        return _walk_chains(d, p, n, feats, 8)
    if n >= 4 * _MIN_CHUNK:
        return _walk_chains(d, p, n, feats, 4)
    if n >= 2 * _MIN_CHUNK:
        return _walk_chains(d, p, n, feats, 2)
    return _walk_from(d, &state, p, n, feats)


cdef Py_ssize_t _count(const int32_t* feats, Py_ssize_t m, int32_t* slots, int bits,
                       int32_t* uniq, int32_t* counts) noexcept nogil:
    """The distinct features of feats[:m] into uniq, first seen first (Counter's order), with counts.

    slots: an open-addressing table of 2**bits entries, more than twice the
    distinct features, holding indexes into uniq. Returns the distinct count.
    """
    cdef uint32_t mask = (1u << bits) - 1, h
    cdef Py_ssize_t j, k = 0
    cdef int32_t f, s
    memset(slots, 0xff, (<size_t>1 << bits) * sizeof(int32_t))
    for j in range(m):
        f = feats[j]
        h = (<uint32_t>f * 2654435761u) >> (32 - bits)  # Fibonacci hashing: the top bits mix best
        while True:
            s = slots[h]
            if s < 0:
                slots[h] = <int32_t>k
                uniq[k] = f
                counts[k] = 1
                k += 1
                break
            if uniq[s] == f:
                counts[s] += 1
                break
            h = (h + 1) & mask
    return k


cdef extern from *:
    """
    #if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    #include <immintrin.h>
    /* The extension is built for baseline x86-64 (SSE2), where each float16 weight
       costs a few integer ops to widen. x86 CPUs since 2013 widen 8 in one
       instruction (F16C) and multiply-add 4 doubles (AVX2, FMA): this loop is
       compiled for those alone and picked at run time when the CPU has them. */
    __attribute__((target("avx2,fma,f16c")))
    static inline void vsr_fma8(double* acc, __m256d w, const uint16_t* row) {
        __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)row));
        _mm256_storeu_pd(acc, _mm256_fmadd_pd(w, _mm256_cvtps_pd(_mm256_castps256_ps128(x)),
                                              _mm256_loadu_pd(acc)));
        _mm256_storeu_pd(acc + 4, _mm256_fmadd_pd(w, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)),
                                                  _mm256_loadu_pd(acc + 4)));
    }
    __attribute__((target("avx2,fma,f16c")))
    static void vsr_accumulate_f16c(const uint16_t* ptc, Py_ssize_t nc, const int32_t* uniq,
                                    const double* weights, Py_ssize_t k, double* acc) {
        Py_ssize_t j = 0, c;
        /* Two features a pass: half the loads and stores of acc. */
        for (; j + 2 <= k; j += 2) {
            const uint16_t* r0 = ptc + (Py_ssize_t)uniq[j] * nc;
            const uint16_t* r1 = ptc + (Py_ssize_t)uniq[j + 1] * nc;
            __m256d w0 = _mm256_set1_pd(weights[j]), w1 = _mm256_set1_pd(weights[j + 1]);
            for (c = 0; c + 8 <= nc; c += 8) {
                __m256 x0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(r0 + c)));
                __m256 x1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(r1 + c)));
                __m256d lo = _mm256_loadu_pd(acc + c), hi = _mm256_loadu_pd(acc + c + 4);
                lo = _mm256_fmadd_pd(w0, _mm256_cvtps_pd(_mm256_castps256_ps128(x0)), lo);
                hi = _mm256_fmadd_pd(w0, _mm256_cvtps_pd(_mm256_extractf128_ps(x0, 1)), hi);
                lo = _mm256_fmadd_pd(w1, _mm256_cvtps_pd(_mm256_castps256_ps128(x1)), lo);
                hi = _mm256_fmadd_pd(w1, _mm256_cvtps_pd(_mm256_extractf128_ps(x1, 1)), hi);
                _mm256_storeu_pd(acc + c, lo);
                _mm256_storeu_pd(acc + c + 4, hi);
            }
            for (; c < nc; c++)
                acc[c] += weights[j] * (double)_cvtsh_ss(r0[c]) + weights[j + 1] * (double)_cvtsh_ss(r1[c]);
        }
        for (; j < k; j++) {
            const uint16_t* row = ptc + (Py_ssize_t)uniq[j] * nc;
            __m256d w = _mm256_set1_pd(weights[j]);
            for (c = 0; c + 8 <= nc; c += 8)
                vsr_fma8(acc + c, w, row + c);
            for (; c < nc; c++)
                acc[c] += weights[j] * (double)_cvtsh_ss(row[c]);
        }
    }
    static int vsr_has_f16c(void) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
               && __builtin_cpu_supports("f16c");
    }
    #else
    static void vsr_accumulate_f16c(const uint16_t* ptc, Py_ssize_t nc, const int32_t* uniq,
                                    const double* weights, Py_ssize_t k, double* acc) {}
    static int vsr_has_f16c(void) { return 0; }
    #endif
    """
    void vsr_accumulate_f16c(const uint16_t* ptc, Py_ssize_t nc, const int32_t* uniq,
                             const double* weights, Py_ssize_t k, double* acc) nogil
    int vsr_has_f16c() nogil


cdef bint _F16C = vsr_has_f16c()


def _use_f16c(bint enabled):
    """Test hook: allow the F16C loop (if the CPU has it) or force the portable one; returns the previous state."""
    global _F16C
    previous = _F16C
    _F16C = enabled and vsr_has_f16c()
    return previous


cdef void _accumulate_half(const uint16_t* ptc, Py_ssize_t nc, const int32_t* uniq,
                           const double* weights, Py_ssize_t k, double* acc) noexcept nogil:
    """acc[c] += sum of weight * ptc[feature, c] over the features."""
    cdef Py_ssize_t j, c
    cdef double w
    cdef const uint16_t* row
    if _F16C:
        vsr_accumulate_f16c(ptc, nc, uniq, weights, k, acc)
        return
    for j in range(k):
        w = weights[j]
        row = ptc + <Py_ssize_t>uniq[j] * nc
        for c in range(nc):
            acc[c] += w * <double>_half(row[c])


cdef void _accumulate_float(const float* ptc, Py_ssize_t nc, const int32_t* uniq,
                            const double* weights, Py_ssize_t k, double* acc) noexcept nogil:
    """_accumulate_half for a float32 table."""
    cdef Py_ssize_t j, c
    cdef double w
    cdef const float* row
    for j in range(k):
        w = weights[j]
        row = ptc + <Py_ssize_t>uniq[j] * nc
        for c in range(nc):
            acc[c] += w * <double>row[c]


cdef enum:
    _LOG1P_SIZE = 256

# A feature's weight is log1p(its count), and counts are mostly small: a table
# of the same libm values saves a call per distinct feature (~3 us for 2 KB).
cdef double _LOG1P[_LOG1P_SIZE]


cdef void _fill_log1p() noexcept:
    cdef int c
    for c in range(_LOG1P_SIZE):
        _LOG1P[c] = log1p(<double>c)


_fill_log1p()


cdef class LangId:
    """py3langid's LanguageIdentifier(norm_probs=True).classify, with the model walk in C."""

    cdef readonly tuple classes
    cdef readonly object min_confidence
    cdef Py_ssize_t _nc, _nfeat, _nalias
    # numpy arrays own (or share) the memory; the pointers below read them in nogil loops.
    cdef object _nextmove_arr, _rowbase_arr, _output_arr, _ptc_arr, _pc_arr, _alias_arr
    cdef _Dfa _dfa
    cdef const uint16_t* _ptc_half  # NULL when the table is float32 (_ptc_float)
    cdef const float* _ptc_float
    cdef const float* _pc
    cdef const int32_t* _alias

    def __init__(self, identifier):
        if not identifier._norm_probs:
            raise ValueError("LangId reproduces norm_probs=True scores; this identifier has norm_probs=False")
        self.classes = tuple(identifier.nb_classes)
        self.min_confidence = identifier.min_confidence
        self._nc = len(self.classes)
        self._build_dfa(identifier.tk_nextmove, identifier.tk_row, identifier.tk_output)
        self._build_model(identifier.nb_ptc, identifier.nb_pc, identifier._alias_pairs)

    cdef _build_dfa(self, tk_nextmove, tk_row, tk_output):
        # The transition table is the model's bulk (~40 MB): shared, not copied,
        # when it already holds uint32 (py3langid's array('I')).
        nextmove = np.asarray(tk_nextmove).reshape(-1)
        if nextmove.dtype != np.uint32:
            nextmove = nextmove.astype(np.int64)
        row = np.asarray(tk_row).astype(np.int64)
        output = np.asarray(tk_output, dtype=np.int64)
        nstates = len(output)
        # The walk reads without bounds checks, so tables that disagree are
        # refused here rather than read out of bounds.
        if nstates == 0 or len(row) != nstates:
            raise ValueError("LangId: the model needs one tk_row and one tk_output entry per DFA state")
        if row.min() < 0 or (row.max() + 1) * 256 > len(nextmove) or len(nextmove) >= 1 << 32:
            raise ValueError("LangId: tk_row points outside tk_nextmove")
        if nextmove.min() < 0 or nextmove.max() >= nstates:
            raise ValueError("LangId: tk_nextmove names a state outside tk_output")
        # A feature index fits the hash table's 32-bit arithmetic with room to spare.
        if output.min() < -1 or output.max() >= 1 << 28:
            raise ValueError("LangId: tk_output holds a feature index outside [-1, 2**28)")
        self._nfeat = int(output.max()) + 1
        self._nextmove_arr = np.ascontiguousarray(nextmove, dtype=np.uint32)
        self._rowbase_arr = (row << 8).astype(np.uint32)  # pre-shifted, as py3langid's _rowbase
        self._output_arr = output.astype(np.int32)
        cdef const uint32_t[::1] nm_view = self._nextmove_arr
        cdef const uint32_t[::1] rb_view = self._rowbase_arr
        cdef const int32_t[::1] out_view = self._output_arr
        self._dfa.nextmove = &nm_view[0]
        self._dfa.rowbase = &rb_view[0]
        self._dfa.output = &out_view[0]

    cdef _build_model(self, nb_ptc, nb_pc, alias_pairs):
        nc = self._nc
        ptc = np.asarray(nb_ptc)
        pc = np.ascontiguousarray(nb_pc, dtype=np.float32)
        if nc == 0 or ptc.ndim != 2 or ptc.shape[1] != nc or pc.shape != (nc,):
            raise ValueError(f"LangId: nb_ptc must be (features, {nc}) and nb_pc ({nc},), one per class")
        if ptc.shape[0] < self._nfeat:
            raise ValueError("LangId: tk_output names a feature past nb_ptc's rows")
        cdef const uint16_t[:, ::1] half_view
        cdef const float[:, ::1] float_view
        self._ptc_half = NULL
        self._ptc_float = NULL
        if ptc.dtype == np.float16:
            bits = np.ascontiguousarray(ptc).view(np.uint16)
            exponent = (bits >> 10) & 0x1F
            # py3langid's shipped table is float16 with only normal weights: read
            # in place (~28 MB) through _half. Any other table is read as float32.
            if not ((exponent == 0) | (exponent == 0x1F)).any():
                self._ptc_arr = bits
                half_view = bits
                self._ptc_half = &half_view[0, 0]
        if self._ptc_half == NULL:
            self._ptc_arr = np.ascontiguousarray(ptc, dtype=np.float32)
            float_view = self._ptc_arr
            self._ptc_float = &float_view[0, 0]
        self._pc_arr = pc
        cdef const float[::1] pc_view = pc
        self._pc = &pc_view[0]
        alias = np.ascontiguousarray(np.asarray(list(alias_pairs), dtype=np.int32).reshape(-1, 2))
        if alias.size and (alias.min() < 0 or alias.max() >= nc):
            raise ValueError("LangId: an alias pair names a column past nb_classes")
        self._alias_arr = alias
        self._nalias = alias.shape[0]
        cdef const int32_t[:, ::1] alias_view = alias
        self._alias = &alias_view[0, 0] if self._nalias else NULL

    cdef int _decide(self, const unsigned char* p, Py_ssize_t n, double* probs) noexcept nogil:
        """probs[:nc]: py3langid's _decide for the encoded text p[:n]. -1 when out of memory."""
        cdef Py_ssize_t nc = self._nc, m, k = 0, c, distinct, i, a, b
        cdef int bits = 4
        cdef void* scratch = NULL
        cdef double* acc
        cdef double* weights
        cdef int32_t* feats
        cdef int32_t* uniq
        cdef int32_t* counts
        cdef int32_t* slots
        cdef double inv_t, top, total
        if n > 0:
            # weights, feats, uniq and counts take n at most; the hash table more
            # than twice the distinct features, which the model caps.
            distinct = n if n < self._nfeat else self._nfeat
            while (<Py_ssize_t>1 << bits) < 2 * distinct:
                bits += 1
            scratch = malloc((nc + n) * sizeof(double) + (3 * n + (<Py_ssize_t>1 << bits)) * sizeof(int32_t))
            if scratch == NULL:
                return -1
            acc = <double*>scratch  # the doubles first, so they are aligned
            weights = acc + nc
            feats = <int32_t*>(weights + n)
            uniq = feats + n
            counts = uniq + n
            slots = counts + n
            m = _walk(&self._dfa, p, n, feats)
            if m:
                k = _count(feats, m, slots, bits, uniq, counts)
                for i in range(k):
                    weights[i] = _LOG1P[counts[i]] if counts[i] < _LOG1P_SIZE else log1p(<double>counts[i])
                memset(acc, 0, nc * sizeof(double))
                if self._ptc_half != NULL:
                    _accumulate_half(self._ptc_half, nc, uniq, weights, k, acc)
                else:
                    _accumulate_float(self._ptc_float, nc, uniq, weights, k, acc)
                for c in range(nc):
                    probs[c] = acc[c] + self._pc[c]
        if k == 0:
            # No feature: py3langid scores 0 for every class, a uniform answer.
            for c in range(nc):
                probs[c] = 0.0
        free(scratch)
        # Softmax at temperature sqrt(bytes), py3langid's calibration.
        inv_t = 1.0 / sqrt(<double>(n if n else 1))
        top = probs[0]
        for c in range(1, nc):
            if probs[c] > top:
                top = probs[c]
        total = 0.0
        for c in range(nc):
            probs[c] = exp((probs[c] - top) * inv_t)
            total += probs[c]
        for c in range(nc):
            probs[c] /= total
        # A label in two columns (sr: Cyrillic and Latin) keeps the sum in the first.
        for i in range(self._nalias):
            a, b = self._alias[2 * i], self._alias[2 * i + 1]
            probs[a] += probs[b]
            probs[b] = 0.0
        return 0

    cdef bytes _encode(self, text):
        """py3langid's _encode: bytes decoded (unless undecodable), ALL-CAPS lowered, NFC, UTF-8."""
        if isinstance(text, bytes):
            decoded = decode_trimmed(text)
            if decoded is None:
                return text  # walked as they are, as py3langid does
            text = decoded
        elif not isinstance(text, str):
            raise TypeError(f"text must be str or bytes, not {type(text).__name__}")
        if text.isupper():
            text = text.lower()
        return unicodedata.normalize("NFC", text).encode("utf-8", "surrogatepass")

    cdef _fill(self, text, double* probs):
        cdef bytes data = self._encode(text)
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
        cdef int status
        with nogil:
            status = self._decide(p, n, probs)
        if status < 0:
            raise MemoryError()

    def scores(self, text):
        """Probability of each class (column of `classes`), float64; an aliased column's second is 0."""
        result = np.empty(self._nc, dtype=np.float64)
        cdef double[::1] out = result
        self._fill(text, &out[0])
        return result

    def classify(self, text):
        """(label, probability) of the most likely class, the first on ties; "und" below min_confidence."""
        cdef double stack_probs[256]
        cdef double* probs = stack_probs
        cdef Py_ssize_t c, best = 0
        if self._nc > 256:
            probs = <double*>malloc(self._nc * sizeof(double))
            if probs == NULL:
                raise MemoryError()
        try:
            self._fill(text, probs)
            for c in range(1, self._nc):
                if probs[c] > probs[best]:
                    best = c
            conf = probs[best]
        finally:
            if probs != stack_probs:
                free(probs)
        if self.min_confidence is not None and conf < self.min_confidence:
            return "und", conf
        return self.classes[best], conf
