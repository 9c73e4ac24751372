# Row access for the compiled models: the design matrix behind one interface.
#
# A ``Rows`` object hands out the rows ``x_k`` of a design matrix with the
# intercept (if any) as a virtual last column of ones, so every caller works
# with ``p = n_features + intercept`` columns and ``X`` is never copied to add
# it. All methods work on a chunk of rows (an index array or a contiguous
# range) in one call, so the virtual dispatch costs one indirect call per
# chunk, never one per row. ``DenseRows`` stores a C-contiguous float32 or
# float64 array; ``CsrRows`` a canonical CSR matrix (scipy.sparse) behind the
# same methods, so the models and the samplers never see which one they read.
from libc.stdint cimport int32_t, int64_t
from bayes_subsample._typedefs cimport floating

# index type of a CSR matrix (scipy uses int32, or int64 for large matrices)
ctypedef fused index_t:
    int32_t
    int64_t


cdef extern from "_simd.h" nogil:
    double bs_row_dot_f32(const float* x, const double* theta, Py_ssize_t d, int icpt)
    double bs_row_dot_f64(const double* x, const double* theta, Py_ssize_t d, int icpt)
    void bs_dot_range_f64(const double* X, Py_ssize_t d, int icpt, Py_ssize_t start,
                          Py_ssize_t stop, const double* v, double* out)
    void bs_dot_classes(const double* X, Py_ssize_t d, int icpt, Py_ssize_t count,
                        const double* theta, Py_ssize_t ts, Py_ssize_t K, double* out)


cdef inline double row_dot(const floating* x, const double* theta, Py_ssize_t d,
                           bint intercept) noexcept nogil:
    """``x . theta[:d] (+ theta[d])``: the one row dot product of the package
    (``_simd.h``: eight partial sums in a fixed order, so results never depend on
    threads, blocks or the instruction set)."""
    if floating is float:
        return bs_row_dot_f32(x, theta, d, intercept)
    else:
        return bs_row_dot_f64(x, theta, d, intercept)


cdef inline void matvec(const double* A, Py_ssize_t p, const double* x,
                        double* y) noexcept nogil:
    """``y = A x`` for a row-major ``p x p`` matrix ``A``: each ``y_j`` is
    ``row_dot(A_j, x)`` (the AVX2 kernel where the processor has it, four rows
    at a time): the same bits on every instruction set and in every thread, and
    four to eight times faster than a scalar loop, whose sum is a chain of
    dependent additions (the p x p metric and Hessian products of the
    Hamiltonian samplers at a few hundred parameters)."""
    bs_dot_range_f64(A, p, 0, 0, p, x, y)


cdef inline void dot_classes(const double* X, Py_ssize_t d, Py_ssize_t count,
                             const double* theta, Py_ssize_t K, double* out) noexcept nogil:
    """``out[i K + k] = row_dot(X_i, theta_k)`` for the ``count`` rows of the
    row-major ``X`` (``d`` columns) and the ``K`` rows of the row-major ``theta``:
    the same bits as ``row_dot``, four classes of a row at a time (AVX2)."""
    bs_dot_classes(X, d, 0, count, theta, d, K, out)


cdef class Rows:
    cdef readonly Py_ssize_t n_rows       # n
    cdef readonly Py_ssize_t n_features   # d (stored columns)
    cdef readonly Py_ssize_t n_cols       # p = d + intercept
    cdef readonly bint intercept

    # eta[i] = x_{idx[i]} . theta
    cdef void dot(self, const int64_t* idx, Py_ssize_t m, const double* theta,
                  double* out) noexcept nogil
    # eta[i - start] = x_i . theta for i in [start, stop)
    cdef void dot_range(self, Py_ssize_t start, Py_ssize_t stop, const double* theta,
                        double* out) noexcept nogil
    # out[(i - start) K + k] = x_i . theta_k for i in [start, stop) and the K rows of
    # theta (row-major, K x n_cols): 1, or 0 where the rows have no such kernel
    cdef bint dot_classes_range(self, Py_ssize_t start, Py_ssize_t stop, const double* theta,
                                Py_ssize_t K, double* out) noexcept nogil
    # both linear predictors x . a and x . b in one read of each row
    cdef void dot2(self, const int64_t* idx, Py_ssize_t m, const double* a, const double* b,
                   double* out_a, double* out_b) noexcept nogil
    # out[:p] += sum_i c[i] x_{idx[i]}
    cdef void add_xt(self, const int64_t* idx, Py_ssize_t m, const double* c,
                     double* out) noexcept nogil
    # out[:p] += sum_{i in [start, stop)} c[i - start] x_i
    cdef void add_xt_range(self, Py_ssize_t start, Py_ssize_t stop, const double* c,
                           double* out) noexcept nogil
    # lower triangle of H (p x p, row-major) += sum_i w[i - start] x_i x_i^T
    cdef void add_xwx_range(self, Py_ssize_t start, Py_ssize_t stop, const double* w,
                            double* H) noexcept nogil
    # h[:p] += sum_i w[i - start] x_i**2 (elementwise: the diagonal of add_xwx_range)
    cdef void add_xwx_diag_range(self, Py_ssize_t start, Py_ssize_t stop, const double* w,
                                 double* h) noexcept nogil
    # out[i, :p] = x_{idx[i]} (float64, the intercept column included)
    cdef void gather(self, const int64_t* idx, Py_ssize_t m, double* out) noexcept nogil
    # out[:p] = x_k (float64, the intercept column included)
    cdef void row(self, Py_ssize_t k, double* out) noexcept nogil


cdef class DenseRows(Rows):
    cdef const float[:, ::1] X32
    cdef const double[:, ::1] X64
    cdef readonly bint is32
    cdef readonly object array     # the NumPy array (kept alive, never copied)
