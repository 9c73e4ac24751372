# cython: language_level=3
"""Row access for the compiled models (see ``_rows.pxd``).

``DenseRows`` wraps a C-contiguous float32 or float64 array without copying
it (read-only and memory-mapped arrays work); every accumulation is in
double. The float32/float64 choice is made once per call (a fused-type
function per method), not once per row.
"""
import numpy as np
from libc.stdint cimport int64_t
from libc.string cimport memset
from bayes_subsample._typedefs cimport floating


cdef class Rows:
    """Abstract row source; see ``DenseRows``."""

    cdef void dot(self, const int64_t* idx, Py_ssize_t m, const double* theta,
                  double* out) noexcept nogil:
        pass

    cdef void dot_range(self, Py_ssize_t start, Py_ssize_t stop, const double* theta,
                        double* out) noexcept nogil:
        pass

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

    cdef void gather(self, const int64_t* idx, Py_ssize_t m, double* out) noexcept nogil:
        pass

    cdef void row(self, Py_ssize_t k, double* out) noexcept nogil:
        pass


# ---- fused implementations over a base pointer and a row length ------------------------
cdef inline void _dot(const floating* X, Py_ssize_t d, bint icpt, const int64_t* idx,
                      Py_ssize_t m, const double* theta, double* out) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(m):
        out[i] = row_dot(X + idx[i] * d, theta, d, icpt)


cdef inline void _dot_range(const floating* X, Py_ssize_t d, bint icpt, Py_ssize_t start,
                            Py_ssize_t stop, const double* theta, double* out) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(start, stop):
        out[i - start] = row_dot(X + i * d, theta, d, icpt)


cdef inline void _dot2(const floating* X, Py_ssize_t d, bint icpt, const int64_t* idx,
                       Py_ssize_t m, const double* a, const double* b, double* oa,
                       double* ob) noexcept nogil:
    cdef Py_ssize_t i
    cdef const floating* x
    for i in range(m):
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


cdef inline void _add_xt_range(const floating* X, Py_ssize_t d, bint icpt, Py_ssize_t start,
                               Py_ssize_t stop, const double* c, double* out) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef const floating* x
    cdef double ci
    for i in range(start, stop):
        x = X + i * d
        ci = c[i - start]
        for j in range(d):
            out[j] += ci * x[j]
        if icpt:
            out[d] += ci


cdef inline void _add_xwx_range(const floating* X, Py_ssize_t d, bint icpt, Py_ssize_t start,
                                Py_ssize_t stop, const double* w, double* H) noexcept nogil:
    cdef Py_ssize_t i, j, l, p = d + (1 if icpt else 0)
    cdef const floating* x
    cdef double wi, xj
    for i in range(start, stop):
        x = X + i * d
        wi = w[i - start]
        for j in range(d):
            xj = wi * x[j]
            for l in range(j + 1):
                H[j * p + l] += xj * x[l]
        if icpt:
            for l in range(d):
                H[d * p + l] += wi * x[l]
            H[d * p + d] += wi


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
            _dot_range(&self.X32[0, 0], self.n_features, self.intercept, start, stop, theta, out)
        else:
            _dot_range(&self.X64[0, 0], self.n_features, self.intercept, start, stop, theta, out)

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
            _add_xt_range(&self.X32[0, 0], self.n_features, self.intercept, start, stop, c, out)
        else:
            _add_xt_range(&self.X64[0, 0], self.n_features, self.intercept, start, stop, c, out)

    cdef void add_xwx_range(self, Py_ssize_t start, Py_ssize_t stop, const double* w,
                            double* H) noexcept nogil:
        if self.is32:
            _add_xwx_range(&self.X32[0, 0], self.n_features, self.intercept, start, stop, w, H)
        else:
            _add_xwx_range(&self.X64[0, 0], self.n_features, self.intercept, start, stop, w, H)

    cdef void gather(self, const int64_t* idx, Py_ssize_t m, double* out) noexcept nogil:
        if self.is32:
            _gather(&self.X32[0, 0], self.n_features, self.intercept, idx, m, out)
        else:
            _gather(&self.X64[0, 0], self.n_features, self.intercept, idx, m, out)

    cdef void row(self, Py_ssize_t k, double* out) noexcept nogil:
        cdef int64_t kk = k
        self.gather(&kk, 1, out)

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
