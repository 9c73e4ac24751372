# cython: language_level=3, auto_pickle=False
# auto_pickle=False: as for ``_rows.pyx`` (pickle raises TypeError; the models
# pickle by rebuilding their compiled objects)
"""Rows of a canonical scipy.sparse CSR matrix for the compiled models (see
``_csr_rows.pxd``): :class:`CsrRows`, the sparse sibling of ``_rows.pyx``'s
:class:`DenseRows`, behind the same :class:`Rows` interface. The int32/int64
index and float32/float64 data choice is made once per call (a fused-type
function per method), not once per row."""
import numpy as np
from scipy import sparse
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memset
from bayes_subsample._typedefs cimport floating
from bayes_subsample.models._rows cimport Rows, index_t


# ---- CSR: fused implementations over (data, indices, indptr) ------------------------------
cdef inline double csr_row_dot(const floating* data, const index_t* ind, Py_ssize_t lo,
                               Py_ssize_t hi, const double* theta) noexcept nogil:
    """``sum_{k in [lo, hi)} data[k] theta[ind[k]]``, four accumulators in a fixed
    order (as ``row_dot``): the result never depends on threads."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t k, hi4 = lo + (hi - lo) - (hi - lo) % 4
    for k in range(lo, hi4, 4):
        s0 += data[k] * theta[ind[k]]
        s1 += data[k + 1] * theta[ind[k + 1]]
        s2 += data[k + 2] * theta[ind[k + 2]]
        s3 += data[k + 3] * theta[ind[k + 3]]
    for k in range(hi4, hi):
        s0 += data[k] * theta[ind[k]]
    return (s0 + s1) + (s2 + s3)


cdef inline void _csr_dot(const floating* data, const index_t* ind, const index_t* ptr,
                          Py_ssize_t d, bint icpt, const int64_t* idx, Py_ssize_t m,
                          const double* theta, double* out) noexcept nogil:
    cdef Py_ssize_t i, k
    for i in range(m):
        k = idx[i]
        out[i] = csr_row_dot(data, ind, ptr[k], ptr[k + 1], theta)
        if icpt:
            out[i] += theta[d]


cdef inline void _csr_dot_range(const floating* data, const index_t* ind, const index_t* ptr,
                                Py_ssize_t d, bint icpt, Py_ssize_t start, Py_ssize_t stop,
                                const double* theta, double* out) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(start, stop):
        out[i - start] = csr_row_dot(data, ind, ptr[i], ptr[i + 1], theta)
        if icpt:
            out[i - start] += theta[d]


cdef inline void _csr_dot2(const floating* data, const index_t* ind, const index_t* ptr,
                           Py_ssize_t d, bint icpt, const int64_t* idx, Py_ssize_t m,
                           const double* a, const double* b, double* oa,
                           double* ob) noexcept nogil:
    cdef Py_ssize_t i, k
    for i in range(m):
        k = idx[i]
        oa[i] = csr_row_dot(data, ind, ptr[k], ptr[k + 1], a)
        ob[i] = csr_row_dot(data, ind, ptr[k], ptr[k + 1], b)
        if icpt:
            oa[i] += a[d]
            ob[i] += b[d]


cdef inline void _csr_add_row(const floating* data, const index_t* ind, Py_ssize_t lo,
                              Py_ssize_t hi, double c, double* out) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(lo, hi):
        out[ind[k]] += c * data[k]


cdef inline void _csr_add_xt(const floating* data, const index_t* ind, const index_t* ptr,
                             Py_ssize_t d, bint icpt, const int64_t* idx, Py_ssize_t m,
                             const double* c, double* out) noexcept nogil:
    cdef Py_ssize_t i, k
    for i in range(m):
        k = idx[i]
        _csr_add_row(data, ind, ptr[k], ptr[k + 1], c[i], out)
        if icpt:
            out[d] += c[i]


cdef inline void _csr_add_xt_range(const floating* data, const index_t* ind,
                                   const index_t* ptr, Py_ssize_t d, bint icpt,
                                   Py_ssize_t start, Py_ssize_t stop, const double* c,
                                   double* out) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(start, stop):
        _csr_add_row(data, ind, ptr[i], ptr[i + 1], c[i - start], out)
        if icpt:
            out[d] += c[i - start]


cdef inline void _csr_add_xwx_diag_range(const floating* data, const index_t* ind,
                                         const index_t* ptr, Py_ssize_t d, bint icpt,
                                         Py_ssize_t start, Py_ssize_t stop, const double* w,
                                         double* h) noexcept nogil:
    cdef Py_ssize_t i, k
    cdef double wi
    for i in range(start, stop):
        wi = w[i - start]
        for k in range(ptr[i], ptr[i + 1]):
            h[ind[k]] += wi * data[k] * data[k]
        if icpt:
            h[d] += wi


cdef inline void _csr_add_xwx_range(const floating* data, const index_t* ind,
                                    const index_t* ptr, Py_ssize_t d, bint icpt,
                                    Py_ssize_t start, Py_ssize_t stop, const double* w,
                                    double* H) noexcept nogil:
    """Over the row's nonzeros only, O(nnz_row^2) per row: the indices of a
    canonical row increase, so ``(ind[a], ind[b])`` with ``b <= a`` is in the
    lower triangle (and each entry is hit once per row: no duplicates)."""
    cdef Py_ssize_t i, a, b, lo, hi, ja, p = d + (1 if icpt else 0)
    cdef double wi, xa
    for i in range(start, stop):
        wi = w[i - start]
        lo = ptr[i]
        hi = ptr[i + 1]
        for a in range(lo, hi):
            ja = ind[a]
            xa = wi * data[a]
            for b in range(lo, a + 1):
                H[ja * p + ind[b]] += xa * data[b]
            if icpt:
                H[d * p + ja] += xa
        if icpt:
            H[d * p + d] += wi


cdef inline void _csr_gather(const floating* data, const index_t* ind, const index_t* ptr,
                             Py_ssize_t d, bint icpt, const int64_t* idx, Py_ssize_t m,
                             double* out) noexcept nogil:
    cdef Py_ssize_t i, k, r, p = d + (1 if icpt else 0)
    cdef double* o
    for i in range(m):
        r = idx[i]
        o = out + i * p
        memset(o, 0, d * sizeof(double))
        for k in range(ptr[r], ptr[r + 1]):
            o[ind[k]] = data[k]
        if icpt:
            o[d] = 1.0


cdef inline double _csr_sq_norm(const floating* data, Py_ssize_t lo,
                                Py_ssize_t hi) noexcept nogil:
    cdef Py_ssize_t k
    cdef double s = 0.0, v
    for k in range(lo, hi):
        v = data[k]
        s += v * v
    return s


cdef Py_ssize_t _csr_check(const index_t* ind, const index_t* ptr, Py_ssize_t n,
                           Py_ssize_t d, Py_ssize_t size) noexcept nogil:
    """-1 if the structure is a canonical CSR matrix of n rows and d columns
    whose index arrays hold ``size`` entries; else the first bad row (n for a
    bad ``indptr[n]``)."""
    cdef Py_ssize_t i, k
    if ptr[0] != 0 or ptr[n] > size:
        return n
    for i in range(n):
        if ptr[i + 1] < ptr[i]:
            return i
        for k in range(ptr[i], ptr[i + 1]):
            if ind[k] < 0 or ind[k] >= d or (k > ptr[i] and ind[k] <= ind[k - 1]):
                return i
    return -1


cdef class CsrRows(Rows):
    """Rows of a canonical scipy.sparse CSR matrix (no copy).

    Every method reads only the stored entries of a row: a dot product costs
    ``nnz_row``, ``add_xwx_range`` ``nnz_row^2 / 2`` per row; ``gather``
    writes dense float64 rows into the caller's buffer (its contract: the
    HMC-ECS subsample is a dense ``m x p`` block).

    Parameters
    ----------
    X : scipy.sparse csr_matrix or csr_array of shape (n, d)
        Float32 or float64 data, int32 or int64 ``indices``/``indptr``, in
        canonical form (sorted indices, no duplicates: ``X.sum_duplicates()``),
        checked here in one O(nnz) pass. Explicit zeros are allowed.
    intercept : bool
        Append a virtual column of ones (``n_cols = d + 1``).

    Notes
    -----
    Memory: the matrix's own arrays are used as they are, ``nnz`` x (4 or 8
    bytes of data + 4 or 8 bytes of index) + (n + 1) x (4 or 8) bytes. The one
    copy made here is when ``indices`` and ``indptr`` have different integer
    types (not the case for matrices scipy builds): both are then read as
    int64, a copy of the int32 one.
    """

    def __init__(self, X, bint intercept):
        if not sparse.issparse(X) or X.format != "csr":
            raise TypeError("CsrRows needs a scipy.sparse CSR matrix or array "
                            f"(got {type(X).__name__}); convert with X.tocsr()")
        if len(X.shape) != 2:
            raise ValueError(f"CsrRows needs a 2-D matrix, got shape {X.shape}")
        data = np.asarray(X.data)
        if data.dtype == np.float32:
            self.is32 = True
        elif data.dtype == np.float64:
            self.is32 = False
        else:
            raise TypeError(f"CsrRows needs float32 or float64 data, got {data.dtype}")
        indices, indptr = np.asarray(X.indices), np.asarray(X.indptr)
        if indices.dtype == np.int32 and indptr.dtype == np.int32:
            self.index64 = False
        else:
            # mixed (or other integer) index types: read both as int64
            self.index64 = True
            indices = indices.astype(np.int64, copy=False)
            indptr = indptr.astype(np.int64, copy=False)
        data, indices, indptr = (np.ascontiguousarray(a) for a in (data, indices, indptr))
        n, d = X.shape
        if indptr.ndim != 1 or indptr.shape[0] != n + 1:
            raise ValueError(f"CsrRows: indptr must have {n + 1} entries, got {indptr.shape}")
        size = min(data.shape[0], indices.shape[0])
        # a matrix without stored entries: one-entry arrays give valid pointers
        # (never read: every row is empty)
        if data.shape[0] == 0:
            data = np.zeros(1, dtype=data.dtype)
        if indices.shape[0] == 0:
            indices = np.zeros(1, dtype=indices.dtype)
        cdef const float[::1] d32
        cdef const double[::1] d64
        cdef const int32_t[::1] i32, p32
        cdef const int64_t[::1] i64, p64
        cdef Py_ssize_t bad, nn = n, dd = d, sz = size
        if self.is32:
            d32 = data
            self.data32 = &d32[0]
        else:
            d64 = data
            self.data64 = &d64[0]
        if self.index64:
            i64 = indices
            p64 = indptr
            self.indices64 = &i64[0]
            self.indptr64 = &p64[0]
            with nogil:
                bad = _csr_check(self.indices64, self.indptr64, nn, dd, sz)
        else:
            i32 = indices
            p32 = indptr
            self.indices32 = &i32[0]
            self.indptr32 = &p32[0]
            with nogil:
                bad = _csr_check(self.indices32, self.indptr32, nn, dd, sz)
        if bad == n:
            raise ValueError("CsrRows: invalid indptr (it must start at 0 and end at most "
                             "at the length of data and indices)")
        if bad >= 0:
            raise ValueError(
                f"CsrRows needs a canonical CSR matrix (in each row, column indices in "
                f"[0, {d}), increasing, without duplicates); row {bad} is not. Call "
                "X.sum_duplicates() (it sorts the indices too) on a copy of X.")
        self._keep = (data, indices, indptr)
        self.matrix = X
        self.nnz = int(indptr[n])
        self.n_rows = n
        self.n_features = d
        self.intercept = intercept
        self.n_cols = d + (1 if intercept else 0)

    cdef void dot(self, const int64_t* idx, Py_ssize_t m, const double* theta,
                  double* out) noexcept nogil:
        cdef Py_ssize_t d = self.n_features
        if self.is32:
            if self.index64:
                _csr_dot(self.data32, self.indices64, self.indptr64, d, self.intercept, idx, m,
                         theta, out)
            else:
                _csr_dot(self.data32, self.indices32, self.indptr32, d, self.intercept, idx, m,
                         theta, out)
        else:
            if self.index64:
                _csr_dot(self.data64, self.indices64, self.indptr64, d, self.intercept, idx, m,
                         theta, out)
            else:
                _csr_dot(self.data64, self.indices32, self.indptr32, d, self.intercept, idx, m,
                         theta, out)

    cdef void dot_range(self, Py_ssize_t start, Py_ssize_t stop, const double* theta,
                        double* out) noexcept nogil:
        cdef Py_ssize_t d = self.n_features
        if self.is32:
            if self.index64:
                _csr_dot_range(self.data32, self.indices64, self.indptr64, d, self.intercept,
                               start, stop, theta, out)
            else:
                _csr_dot_range(self.data32, self.indices32, self.indptr32, d, self.intercept,
                               start, stop, theta, out)
        else:
            if self.index64:
                _csr_dot_range(self.data64, self.indices64, self.indptr64, d, self.intercept,
                               start, stop, theta, out)
            else:
                _csr_dot_range(self.data64, self.indices32, self.indptr32, d, self.intercept,
                               start, stop, theta, out)

    cdef void dot2(self, const int64_t* idx, Py_ssize_t m, const double* a, const double* b,
                   double* out_a, double* out_b) noexcept nogil:
        cdef Py_ssize_t d = self.n_features
        if self.is32:
            if self.index64:
                _csr_dot2(self.data32, self.indices64, self.indptr64, d, self.intercept, idx,
                          m, a, b, out_a, out_b)
            else:
                _csr_dot2(self.data32, self.indices32, self.indptr32, d, self.intercept, idx,
                          m, a, b, out_a, out_b)
        else:
            if self.index64:
                _csr_dot2(self.data64, self.indices64, self.indptr64, d, self.intercept, idx,
                          m, a, b, out_a, out_b)
            else:
                _csr_dot2(self.data64, self.indices32, self.indptr32, d, self.intercept, idx,
                          m, a, b, out_a, out_b)

    cdef void add_xt(self, const int64_t* idx, Py_ssize_t m, const double* c,
                     double* out) noexcept nogil:
        cdef Py_ssize_t d = self.n_features
        if self.is32:
            if self.index64:
                _csr_add_xt(self.data32, self.indices64, self.indptr64, d, self.intercept, idx,
                            m, c, out)
            else:
                _csr_add_xt(self.data32, self.indices32, self.indptr32, d, self.intercept, idx,
                            m, c, out)
        else:
            if self.index64:
                _csr_add_xt(self.data64, self.indices64, self.indptr64, d, self.intercept, idx,
                            m, c, out)
            else:
                _csr_add_xt(self.data64, self.indices32, self.indptr32, d, self.intercept, idx,
                            m, c, out)

    cdef void add_xt_range(self, Py_ssize_t start, Py_ssize_t stop, const double* c,
                           double* out) noexcept nogil:
        cdef Py_ssize_t d = self.n_features
        if self.is32:
            if self.index64:
                _csr_add_xt_range(self.data32, self.indices64, self.indptr64, d,
                                  self.intercept, start, stop, c, out)
            else:
                _csr_add_xt_range(self.data32, self.indices32, self.indptr32, d,
                                  self.intercept, start, stop, c, out)
        else:
            if self.index64:
                _csr_add_xt_range(self.data64, self.indices64, self.indptr64, d,
                                  self.intercept, start, stop, c, out)
            else:
                _csr_add_xt_range(self.data64, self.indices32, self.indptr32, d,
                                  self.intercept, start, stop, c, out)

    cdef void add_xwx_range(self, Py_ssize_t start, Py_ssize_t stop, const double* w,
                            double* H) noexcept nogil:
        cdef Py_ssize_t d = self.n_features
        if self.is32:
            if self.index64:
                _csr_add_xwx_range(self.data32, self.indices64, self.indptr64, d,
                                   self.intercept, start, stop, w, H)
            else:
                _csr_add_xwx_range(self.data32, self.indices32, self.indptr32, d,
                                   self.intercept, start, stop, w, H)
        else:
            if self.index64:
                _csr_add_xwx_range(self.data64, self.indices64, self.indptr64, d,
                                   self.intercept, start, stop, w, H)
            else:
                _csr_add_xwx_range(self.data64, self.indices32, self.indptr32, d,
                                   self.intercept, start, stop, w, H)

    cdef void add_xwx_diag_range(self, Py_ssize_t start, Py_ssize_t stop, const double* w,
                                 double* h) noexcept nogil:
        cdef Py_ssize_t d = self.n_features
        if self.is32:
            if self.index64:
                _csr_add_xwx_diag_range(self.data32, self.indices64, self.indptr64, d,
                                        self.intercept, start, stop, w, h)
            else:
                _csr_add_xwx_diag_range(self.data32, self.indices32, self.indptr32, d,
                                        self.intercept, start, stop, w, h)
        else:
            if self.index64:
                _csr_add_xwx_diag_range(self.data64, self.indices64, self.indptr64, d,
                                        self.intercept, start, stop, w, h)
            else:
                _csr_add_xwx_diag_range(self.data64, self.indices32, self.indptr32, d,
                                        self.intercept, start, stop, w, h)

    cdef void gather(self, const int64_t* idx, Py_ssize_t m, double* out) noexcept nogil:
        cdef Py_ssize_t d = self.n_features
        if self.is32:
            if self.index64:
                _csr_gather(self.data32, self.indices64, self.indptr64, d, self.intercept, idx,
                            m, out)
            else:
                _csr_gather(self.data32, self.indices32, self.indptr32, d, self.intercept, idx,
                            m, out)
        else:
            if self.index64:
                _csr_gather(self.data64, self.indices64, self.indptr64, d, self.intercept, idx,
                            m, out)
            else:
                _csr_gather(self.data64, self.indices32, self.indptr32, d, self.intercept, idx,
                            m, out)

    cdef void row(self, Py_ssize_t k, double* out) noexcept nogil:
        cdef int64_t kk = k
        self.gather(&kk, 1, out)

    cdef double _sq_norm(self, Py_ssize_t i) noexcept nogil:
        cdef Py_ssize_t lo, hi
        if self.index64:
            lo = self.indptr64[i]
            hi = self.indptr64[i + 1]
        else:
            lo = self.indptr32[i]
            hi = self.indptr32[i + 1]
        if self.is32:
            return _csr_sq_norm(self.data32, lo, hi)
        return _csr_sq_norm(self.data64, lo, hi)

    def row_norms(self, start=0, stop=None):
        """``||x_k||`` (the intercept column included) for ``k`` in ``[start, stop)``."""
        start, stop = self._range(start, self.n_rows if stop is None else stop)
        cdef Py_ssize_t i, s = start, e = stop
        cdef double icpt = 1.0 if self.intercept else 0.0
        cdef double[::1] out = np.empty(max(1, e - s))
        with nogil:
            for i in range(s, e):
                out[i - s] = self._sq_norm(i) + icpt
        return np.sqrt(np.asarray(out)[:e - s])

    def row_norm_max(self):
        """``max_k ||x_k||`` (the intercept column included), in double."""
        cdef Py_ssize_t i, n = self.n_rows
        cdef double s, best = 0.0, icpt = 1.0 if self.intercept else 0.0
        with nogil:
            for i in range(n):
                s = self._sq_norm(i) + icpt
                if s > best:
                    best = s
        return best ** 0.5
