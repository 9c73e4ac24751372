# cython: language_level=3, auto_pickle=False
# auto_pickle=False: the pickling Cython generated for these classes crashed the
# interpreter (it reads their memoryviews); pickle now raises TypeError, and the
# models pickle by rebuilding their compiled objects (models/_base.py)
"""Row access for the compiled models (see ``_rows.pxd``).

``DenseRows`` wraps a C-contiguous float32 or float64 array without copying
it (read-only and memory-mapped arrays work); ``CsrRows`` (``_csr_rows.pyx``)
a canonical scipy.sparse CSR matrix, also without copying it. Every accumulation is in
double, but for the Hessian sums of dense float32 rows on CPUs with AVX2 and
FMA, summed in float32 over blocks of 32 rows (``_simd.h``), each block within
``FLOAT32_HESSIAN_RTOL`` of its sum of absolute terms (``Rows.hessian_rtol``).
The float32/float64 (and, for CSR, int32/int64 index) choice is made once per
call (a fused-type function per method), not once per row.
:func:`make_rows` picks the class for a validated design matrix.
"""
import numpy as np
from scipy import sparse
from libc.stdint cimport int64_t
from cython.parallel cimport prange
from bayes_subsample._typedefs cimport floating

#: the relative error bound, against the sum of the absolute terms
#: ``sum_i |w_i x_ij x_ik|``, of the Hessian sums of dense float32 rows (their
#: 32-row blocks summed in float32 with fused multiply-adds: 34 roundings of 2^-24,
#: and w rounded to float32); float64 and CSR rows: that of double arithmetic
FLOAT32_HESSIAN_RTOL = 36 * 2.0**-24


# the dense row loops of a full pass, compiled to SIMD code (several instruction sets,
# chosen at load time; see _simd.h)
cdef extern from "_simd.h" nogil:
    void bs_dot_range_f32(const float* X, Py_ssize_t d, int icpt, Py_ssize_t start,
                          Py_ssize_t stop, const double* theta, double* out)
    void bs_dot_range_f64(const double* X, Py_ssize_t d, int icpt, Py_ssize_t start,
                          Py_ssize_t stop, const double* theta, double* out)
    void bs_add_xt_range_f32(const float* X, Py_ssize_t d, int icpt, Py_ssize_t start,
                             Py_ssize_t stop, const double* c, double* out)
    void bs_add_xt_range_f64(const double* X, Py_ssize_t d, int icpt, Py_ssize_t start,
                             Py_ssize_t stop, const double* c, double* out)
    void bs_add_xwx_range_f32(const float* X, Py_ssize_t d, int icpt, Py_ssize_t start,
                              Py_ssize_t stop, const double* w, double* H)
    void bs_add_xwx_range_f64(const double* X, Py_ssize_t d, int icpt, Py_ssize_t start,
                              Py_ssize_t stop, const double* w, double* H)
    int bs_all_finite_f32(const float* x, Py_ssize_t m)
    int bs_all_finite_f64(const double* x, Py_ssize_t m)


cdef extern from *:
    """
    /* a read prefetch into all cache levels (a no-op where the builtin is missing) */
    #if defined(__GNUC__) || defined(__clang__)
    #define BS_PREFETCH(p) __builtin_prefetch((const void*)(p), 0, 3)
    #else
    #define BS_PREFETCH(p) ((void)(p))
    #endif
    """
    void BS_PREFETCH(const void* p) noexcept nogil


# rows fetched ahead by the gathering loops: a row's dot products take ~10-40 ns, a
# random row ~80-100 ns from DRAM, so ~8 rows in flight hide the latency
cdef enum:
    PREFETCH_AHEAD = 8


cdef inline void _prefetch_row(const void* x, Py_ssize_t nbytes) noexcept nogil:
    """Prefetch every cache line of a row of ``nbytes`` bytes at ``x``."""
    cdef const char* c = <const char*> x
    cdef Py_ssize_t off
    for off in range(0, nbytes, 64):
        BS_PREFETCH(c + off)
    BS_PREFETCH(c + nbytes - 1)


def checked_indices(idx, Py_ssize_t n, str what="index"):
    """``idx`` as a 1-D int64 array of values in ``[0, n)`` (``what`` names them
    in the error)."""
    i = np.ascontiguousarray(idx, dtype=np.int64)
    if i.ndim != 1:
        raise ValueError(f"indices must be 1-D, got shape {i.shape}")
    if i.shape[0] and (i.min() < 0 or i.max() >= n):
        raise IndexError(f"{what} out of range [0, {n})")
    return i


cdef class Rows:
    """Abstract row source; see ``DenseRows``."""

    cdef void dot(self, const int64_t* idx, Py_ssize_t m, const double* theta,
                  double* out) noexcept nogil:
        pass

    cdef void dot_range(self, Py_ssize_t start, Py_ssize_t stop, const double* theta,
                        double* out) noexcept nogil:
        pass

    cdef bint dot_classes_range(self, Py_ssize_t start, Py_ssize_t stop, const double* theta,
                                Py_ssize_t K, double* out) noexcept nogil:
        return False

    cdef void dot2(self, const int64_t* idx, Py_ssize_t m, const double* a, const double* b,
                   double* out_a, double* out_b) noexcept nogil:
        pass

    cdef void add_xt(self, const int64_t* idx, Py_ssize_t m, const double* c,
                     double* out) noexcept nogil:
        pass

    cdef void add_xt_range(self, Py_ssize_t start, Py_ssize_t stop, const double* c,
                           double* out) noexcept nogil:
        pass

    cdef void add_xwx_range(self, Py_ssize_t start, Py_ssize_t stop, const double* w,
                            double* H) noexcept nogil:
        pass

    cdef void add_xwx_diag_range(self, Py_ssize_t start, Py_ssize_t stop, const double* w,
                                 double* h) noexcept nogil:
        pass

    cdef void gather(self, const int64_t* idx, Py_ssize_t m, double* out) noexcept nogil:
        pass

    cdef void row(self, Py_ssize_t k, double* out) noexcept nogil:
        pass

    @property
    def hessian_rtol(self):
        """The relative error of the Hessian sums (``add_xwx_range``) beyond
        double rounding, against their sums of absolute terms ``sum_i |w_i
        x_ij x_ik|``: ``FLOAT32_HESSIAN_RTOL`` for dense float32 rows, else 0."""
        return 0.0

    # ---- Python entry points of the nogil methods (tests, debugging) -------------------
    # Each validates its arguments and calls the method once on the whole chunk, so a
    # test sees exactly what a kernel gets.
    def _idx(self, idx):
        return checked_indices(idx, self.n_rows, "row index")

    def _range(self, start, stop):
        if not 0 <= start <= stop <= self.n_rows:
            raise IndexError(f"row range [{start}, {stop}) is not within [0, {self.n_rows}]")
        return int(start), int(stop)

    def _vec(self, v, Py_ssize_t size, str name):
        a = np.ascontiguousarray(v, dtype=np.float64)
        if a.shape != (size,):
            raise ValueError(f"{name} must have shape ({size},), got {a.shape}")
        return a

    def _acc(self, out, shape):
        if out is None:
            return np.zeros(shape)
        if not (isinstance(out, np.ndarray) and out.dtype == np.float64
                and out.flags.c_contiguous and out.flags.writeable and out.shape == shape):
            raise ValueError(f"out must be a writeable C-contiguous float64 array of shape "
                             f"{shape}")
        return out

    def py_dot(self, idx, theta):
        """``x_k . theta`` for ``k`` in ``idx`` (the ``dot`` method)."""
        cdef int64_t[::1] ix = self._idx(idx)
        cdef double[::1] th = self._vec(theta, self.n_cols, "theta")
        cdef double[::1] out = np.zeros(max(1, ix.shape[0]))
        if ix.shape[0]:
            self.dot(&ix[0], ix.shape[0], &th[0], &out[0])
        return np.asarray(out)[:ix.shape[0]].copy()

    def py_dot_range(self, start, stop, theta):
        """``x_k . theta`` for ``k`` in ``[start, stop)`` (the ``dot_range`` method)."""
        start, stop = self._range(start, stop)
        cdef double[::1] th = self._vec(theta, self.n_cols, "theta")
        cdef double[::1] out = np.zeros(max(1, stop - start))
        if stop > start:
            self.dot_range(start, stop, &th[0], &out[0])
        return np.asarray(out)[:stop - start].copy()

    def py_dot2(self, idx, a, b):
        """``(x_k . a, x_k . b)`` for ``k`` in ``idx`` (the ``dot2`` method)."""
        cdef int64_t[::1] ix = self._idx(idx)
        cdef double[::1] aa = self._vec(a, self.n_cols, "a")
        cdef double[::1] bb = self._vec(b, self.n_cols, "b")
        cdef double[::1] oa = np.zeros(max(1, ix.shape[0]))
        cdef double[::1] ob = np.zeros(max(1, ix.shape[0]))
        if ix.shape[0]:
            self.dot2(&ix[0], ix.shape[0], &aa[0], &bb[0], &oa[0], &ob[0])
        return np.asarray(oa)[:ix.shape[0]].copy(), np.asarray(ob)[:ix.shape[0]].copy()

    def py_add_xt(self, idx, c, out=None):
        """``out += sum_i c[i] x_{idx[i]}`` (the ``add_xt`` method); returns ``out``."""
        cdef int64_t[::1] ix = self._idx(idx)
        cdef double[::1] cc = self._vec(c, ix.shape[0], "c")
        res = self._acc(out, (self.n_cols,))
        cdef double[::1] o = res
        if ix.shape[0]:
            self.add_xt(&ix[0], ix.shape[0], &cc[0], &o[0])
        return res

    def py_add_xt_range(self, start, stop, c, out=None):
        """``out += sum_{k in [start, stop)} c[k - start] x_k`` (``add_xt_range``)."""
        start, stop = self._range(start, stop)
        cdef double[::1] cc = self._vec(c, stop - start, "c")
        res = self._acc(out, (self.n_cols,))
        cdef double[::1] o = res
        if stop > start:
            self.add_xt_range(start, stop, &cc[0], &o[0])
        return res

    def py_add_xwx_diag_range(self, start, stop, w, out=None):
        """``out += sum_{k in [start, stop)} w[k - start] x_k**2`` (elementwise: the
        diagonal of ``add_xwx_range``; the ``add_xwx_diag_range`` method)."""
        start, stop = self._range(start, stop)
        cdef double[::1] ww = self._vec(w, stop - start, "w")
        res = self._acc(out, (self.n_cols,))
        cdef double[::1] o = res
        if stop > start:
            self.add_xwx_diag_range(start, stop, &ww[0], &o[0])
        return res

    def py_add_xwx_range(self, start, stop, w, out=None):
        """Lower triangle of ``out += sum_{k in [start, stop)} w[k - start] x_k x_k^T``
        (``add_xwx_range``; the strict upper triangle is not touched)."""
        start, stop = self._range(start, stop)
        cdef double[::1] ww = self._vec(w, stop - start, "w")
        res = self._acc(out, (self.n_cols, self.n_cols))
        cdef double[:, ::1] o = res
        if stop > start:
            self.add_xwx_range(start, stop, &ww[0], &o[0, 0])
        return res

    def py_gather(self, idx):
        """Rows ``x_k`` for ``k`` in ``idx``, float64 with the intercept column
        (the ``gather`` method)."""
        cdef int64_t[::1] ix = self._idx(idx)
        # NaN-filled: gather must write every entry of its rows
        cdef double[:, ::1] out = np.full((max(1, ix.shape[0]), self.n_cols), np.nan)
        if ix.shape[0]:
            self.gather(&ix[0], ix.shape[0], &out[0, 0])
        return np.asarray(out)[:ix.shape[0]].copy()

    def py_row(self, Py_ssize_t k):
        """Row ``x_k``, float64 with the intercept column (the ``row`` method)."""
        if not 0 <= k < self.n_rows:
            raise IndexError(f"row index out of range [0, {self.n_rows})")
        cdef double[::1] out = np.full(self.n_cols, np.nan)
        self.row(k, &out[0])
        return np.asarray(out)


def _dot_classes(X, theta, bint by_row_dot=False):
    """``X @ theta.T`` by ``dot_classes`` (or ``row_dot`` row by row and class by
    class with ``by_row_dot``) for float64 ``X`` (n, d) and ``theta`` (K, d) (tests)."""
    cdef double[:, ::1] Xv = np.ascontiguousarray(X, dtype=np.float64)
    cdef double[:, ::1] T = np.ascontiguousarray(theta, dtype=np.float64)
    cdef Py_ssize_t n = Xv.shape[0], d = Xv.shape[1], K = T.shape[0], i, k
    if T.shape[1] != d or K < 1:
        raise ValueError("X (n, d) and theta (K, d) with K >= 1")
    cdef double[:, ::1] out = np.zeros((n, K))
    if n and d:
        if by_row_dot:
            for i in range(n):
                for k in range(K):
                    out[i, k] = row_dot(&Xv[i, 0], &T[k, 0], d, False)
        else:
            dot_classes(&Xv[0, 0], d, n, &T[0, 0], K, &out[0, 0])
    return np.asarray(out)


def make_rows(X, bint intercept):
    """The :class:`Rows` of a design matrix (no copy of it).

    Parameters
    ----------
    X : ndarray or scipy.sparse CSR matrix/array of shape (n, d)
        A C-contiguous float32/float64 ndarray (:class:`DenseRows`) or a
        canonical CSR matrix with float32/float64 data (:class:`CsrRows`), as
        ``check_design`` returns them.
    intercept : bool
        Append a virtual column of ones.
    """
    if sparse.issparse(X):
        from bayes_subsample.models._csr_rows import CsrRows
        return CsrRows(X, intercept)
    return DenseRows(X, intercept)


def all_finite(X, int n_threads=1):
    """Whether every value of the C-contiguous float32/float64 array ``X`` is
    finite (no NaN, no infinity): one read of X in ``n_threads`` threads (at
    memory bandwidth; NumPy's ``isfinite(X).all()`` writes a boolean array
    and reads it again, in one thread)."""
    if not isinstance(X, np.ndarray) or not X.flags.c_contiguous:
        raise TypeError("all_finite needs a C-contiguous ndarray")
    if X.dtype != np.float32 and X.dtype != np.float64:
        raise TypeError(f"all_finite needs float32 or float64 data, got {X.dtype}")
    cdef Py_ssize_t m = X.size, S, k
    if m == 0:
        return True
    cdef const float[::1] x32
    cdef const double[::1] x64
    cdef bint is32 = X.dtype == np.float32
    cdef const float* p32 = NULL
    cdef const double* p64 = NULL
    if is32:
        x32 = X.reshape(-1)
        p32 = &x32[0]
    else:
        x64 = X.reshape(-1)
        p64 = &x64[0]
    # slices of at least 2^20 values, at most 64 of them
    S = max(1, min(64, m >> 20))
    cdef int[::1] ok = np.ones(S, dtype=np.intc)
    with nogil:
        for k in prange(S, schedule="static", num_threads=max(1, n_threads)):
            if is32:
                ok[k] = bs_all_finite_f32(p32 + k * m // S, (k + 1) * m // S - k * m // S)
            else:
                ok[k] = bs_all_finite_f64(p64 + k * m // S, (k + 1) * m // S - k * m // S)
    return bool(np.all(np.asarray(ok)))


# ---- fused implementations over a base pointer and a row length ------------------------
cdef inline void _dot(const floating* X, Py_ssize_t d, bint icpt, const int64_t* idx,
                      Py_ssize_t m, const double* theta, double* out) noexcept nogil:
    cdef Py_ssize_t i
    cdef Py_ssize_t nb = d * sizeof(floating)
    for i in range(m):
        if i + PREFETCH_AHEAD < m:
            _prefetch_row(X + idx[i + PREFETCH_AHEAD] * d, nb)
        out[i] = row_dot(X + idx[i] * d, theta, d, icpt)


cdef inline void _dot2(const floating* X, Py_ssize_t d, bint icpt, const int64_t* idx,
                       Py_ssize_t m, const double* a, const double* b, double* oa,
                       double* ob) noexcept nogil:
    cdef Py_ssize_t i
    cdef Py_ssize_t nb = d * sizeof(floating)
    cdef const floating* x
    for i in range(m):
        if i + PREFETCH_AHEAD < m:
            _prefetch_row(X + idx[i + PREFETCH_AHEAD] * d, nb)
        x = X + idx[i] * d
        oa[i] = row_dot(x, a, d, icpt)
        ob[i] = row_dot(x, b, d, icpt)


cdef inline void _add_xt(const floating* X, Py_ssize_t d, bint icpt, const int64_t* idx,
                         Py_ssize_t m, const double* c, double* out) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef const floating* x
    cdef double ci
    for i in range(m):
        x = X + idx[i] * d
        ci = c[i]
        for j in range(d):
            out[j] += ci * x[j]
        if icpt:
            out[d] += ci


cdef inline void _add_xwx_diag_range(const floating* X, Py_ssize_t d, bint icpt,
                                     Py_ssize_t start, Py_ssize_t stop, const double* w,
                                     double* h) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef const floating* x
    cdef double wi
    for i in range(start, stop):
        x = X + i * d
        wi = w[i - start]
        for j in range(d):
            h[j] += wi * x[j] * x[j]
        if icpt:
            h[d] += wi


cdef inline void _gather(const floating* X, Py_ssize_t d, bint icpt, const int64_t* idx,
                         Py_ssize_t m, double* out) noexcept nogil:
    cdef Py_ssize_t i, j, p = d + (1 if icpt else 0)
    cdef const floating* x
    for i in range(m):
        x = X + idx[i] * d
        for j in range(d):
            out[i * p + j] = x[j]
        if icpt:
            out[i * p + d] = 1.0


cdef class DenseRows(Rows):
    """Rows of a dense C-contiguous float32/float64 array (no copy).

    Parameters
    ----------
    X : ndarray of shape (n, d), float32 or float64, C-contiguous
    intercept : bool
        Append a virtual column of ones (``n_cols = d + 1``).
    """

    def __init__(self, X, bint intercept):
        if not isinstance(X, np.ndarray) or X.ndim != 2 or not X.flags.c_contiguous:
            raise TypeError("DenseRows needs a 2-D C-contiguous ndarray")
        if X.dtype == np.float32:
            self.is32 = True
            self.X32 = X
        elif X.dtype == np.float64:
            self.is32 = False
            self.X64 = X
        else:
            raise TypeError(f"DenseRows needs float32 or float64 data, got {X.dtype}")
        self.array = X
        self.n_rows = X.shape[0]
        self.n_features = X.shape[1]
        self.intercept = intercept
        self.n_cols = self.n_features + (1 if intercept else 0)

    cdef void dot(self, const int64_t* idx, Py_ssize_t m, const double* theta,
                  double* out) noexcept nogil:
        if self.is32:
            _dot(&self.X32[0, 0], self.n_features, self.intercept, idx, m, theta, out)
        else:
            _dot(&self.X64[0, 0], self.n_features, self.intercept, idx, m, theta, out)

    cdef void dot_range(self, Py_ssize_t start, Py_ssize_t stop, const double* theta,
                        double* out) noexcept nogil:
        if self.is32:
            bs_dot_range_f32(&self.X32[0, 0], self.n_features, self.intercept, start, stop,
                             theta, out)
        else:
            bs_dot_range_f64(&self.X64[0, 0], self.n_features, self.intercept, start, stop,
                             theta, out)

    cdef bint dot_classes_range(self, Py_ssize_t start, Py_ssize_t stop, const double* theta,
                                Py_ssize_t K, double* out) noexcept nogil:
        """float64 rows: K predictors per row in one read of it (``dot_range``'s bits)."""
        if self.is32:
            return False
        if stop > start:
            bs_dot_classes(&self.X64[start, 0], self.n_features, self.intercept, stop - start,
                           theta, self.n_cols, K, out)
        return True

    cdef void dot2(self, const int64_t* idx, Py_ssize_t m, const double* a, const double* b,
                   double* out_a, double* out_b) noexcept nogil:
        if self.is32:
            _dot2(&self.X32[0, 0], self.n_features, self.intercept, idx, m, a, b, out_a, out_b)
        else:
            _dot2(&self.X64[0, 0], self.n_features, self.intercept, idx, m, a, b, out_a, out_b)

    cdef void add_xt(self, const int64_t* idx, Py_ssize_t m, const double* c,
                     double* out) noexcept nogil:
        if self.is32:
            _add_xt(&self.X32[0, 0], self.n_features, self.intercept, idx, m, c, out)
        else:
            _add_xt(&self.X64[0, 0], self.n_features, self.intercept, idx, m, c, out)

    cdef void add_xt_range(self, Py_ssize_t start, Py_ssize_t stop, const double* c,
                           double* out) noexcept nogil:
        if self.is32:
            bs_add_xt_range_f32(&self.X32[0, 0], self.n_features, self.intercept, start, stop,
                                c, out)
        else:
            bs_add_xt_range_f64(&self.X64[0, 0], self.n_features, self.intercept, start, stop,
                                c, out)

    cdef void add_xwx_range(self, Py_ssize_t start, Py_ssize_t stop, const double* w,
                            double* H) noexcept nogil:
        if self.is32:
            bs_add_xwx_range_f32(&self.X32[0, 0], self.n_features, self.intercept, start, stop,
                                 w, H)
        else:
            bs_add_xwx_range_f64(&self.X64[0, 0], self.n_features, self.intercept, start, stop,
                                 w, H)

    cdef void add_xwx_diag_range(self, Py_ssize_t start, Py_ssize_t stop, const double* w,
                                 double* h) noexcept nogil:
        if self.is32:
            _add_xwx_diag_range(&self.X32[0, 0], self.n_features, self.intercept, start, stop,
                                w, h)
        else:
            _add_xwx_diag_range(&self.X64[0, 0], self.n_features, self.intercept, start, stop,
                                w, h)

    cdef void gather(self, const int64_t* idx, Py_ssize_t m, double* out) noexcept nogil:
        if self.is32:
            _gather(&self.X32[0, 0], self.n_features, self.intercept, idx, m, out)
        else:
            _gather(&self.X64[0, 0], self.n_features, self.intercept, idx, m, out)

    cdef void row(self, Py_ssize_t k, double* out) noexcept nogil:
        cdef int64_t kk = k
        self.gather(&kk, 1, out)

    @property
    def hessian_rtol(self):
        """``FLOAT32_HESSIAN_RTOL`` for float32 rows (summed in float32 blocks),
        0 for float64 rows (see ``Rows.hessian_rtol``)."""
        return FLOAT32_HESSIAN_RTOL if self.is32 else 0.0

    def row_norms(self, start=0, stop=None):
        """``||x_k||`` (the intercept column included) for ``k`` in ``[start, stop)``."""
        start, stop = self._range(start, self.n_rows if stop is None else stop)
        cdef Py_ssize_t s = start, e = stop, d = self.n_features, i, j
        cdef double acc, v, icpt = 1.0 if self.intercept else 0.0
        cdef double[::1] out = np.empty(max(1, e - s))
        with nogil:
            for i in range(s, e):
                acc = icpt
                if self.is32:
                    for j in range(d):
                        v = self.X32[i, j]
                        acc += v * v
                else:
                    for j in range(d):
                        v = self.X64[i, j]
                        acc += v * v
                out[i - s] = acc
        return np.sqrt(np.asarray(out)[:e - s])

    def row_norm_max(self):
        """``max_k ||x_k||`` (the intercept column included), in double."""
        cdef Py_ssize_t n = self.n_rows, d = self.n_features, i, j
        cdef double s, best = 0.0, v
        with nogil:
            for i in range(n):
                s = 1.0 if self.intercept else 0.0
                if self.is32:
                    for j in range(d):
                        v = self.X32[i, j]
                        s += v * v
                else:
                    for j in range(d):
                        v = self.X64[i, j]
                        s += v * v
                if s > best:
                    best = s
        return best ** 0.5
