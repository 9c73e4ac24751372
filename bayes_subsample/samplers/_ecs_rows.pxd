# The rows HMC-ECS's subsampled potential reads (``_hmc_ecs_fast.pyx``), for
# the three kinds of compiled model it serves: the scalar GLMs (``CyGLM``: one
# linear predictor per row), multinomial logistic regression (``CyMultinomial``:
# K predictors per row, ``theta`` of shape (K, p1)) and linear regression with
# the noise's log scale sampled (``CyGaussianScale``: one predictor and the log
# scale, K = 2 derivatives per row). ``ECSRows`` is the one place that knows
# which kind it reads: it copies a block of rows (``RowBlock``), caches their
# constants at theta*, evaluates their control-variate residuals d_i and
# derivatives d'_i (K per row) at theta, and sums the gradient ``sum_i c_i x_i``
# of per-row weights c_i. The estimator built on the residuals (``ECSCore``)
# never looks at the model.
cimport cython
from libc.stdint cimport int64_t
from bayes_subsample.models._cyglm cimport CyGLM
from bayes_subsample.models._cylinear cimport CyGaussianScale
from bayes_subsample.models._cymultinomial cimport CyMultinomial
from bayes_subsample.models._rows cimport Rows


# a block of rows with their cached constants at theta* (row i of the block is
# the row idx[i] of the caller's index array)
@cython.final
cdef class RowBlock:
    cdef readonly Py_ssize_t count
    cdef double[:, ::1] X            # the rows (float64, intercept column; one dummy row
                                     # when the rows are read in place)
    cdef double[::1] y, w            # targets, weights (weighted models)
    cdef double[::1] es, c0, c1, c2  # one predictor per row: eta* (and the GLMs' Taylor
                                     # constants at eta*)
    cdef double[:, ::1] MC           # multinomial: the cache (eta*, p*, lse*) per row


@cython.final
cdef class ECSRows:
    cdef CyGLM glm                   # the model: one of these three
    cdef CyMultinomial mult
    cdef CyGaussianScale lin
    cdef readonly Rows rows          # the model's rows
    cdef readonly bint multi         # multinomial
    cdef readonly bint scale         # the noise-scale model
    cdef readonly bint direct        # rows read in place (no copy in RowBlock.X)
    cdef readonly bint weighted      # the model has row weights
    cdef readonly int order          # Taylor order of the control variates
    # derivatives per row, columns per row (intercept included), doubles of a row's
    # multinomial cache, features, parameters, rows of the model
    cdef readonly Py_ssize_t K, p1, W, n_features, dim, n_data
    cdef readonly bint intercept
    cdef double[::1] theta_star      # the expansion point (set by the core)

    # a block of ``count`` rows' buffers (with the GIL)
    cdef RowBlock block(self, Py_ssize_t count)
    # the rows idx[:count] into b: targets, weights and (unless direct) the rows
    cdef void copy_rows(self, const int64_t* idx, RowBlock b, Py_ssize_t count) noexcept nogil
    # their constants at theta_star (multinomial: the cache; else eta* and c0, c1, c2)
    cdef void cache_rows(self, const int64_t* idx, RowBlock b, Py_ssize_t count) noexcept nogil
    # rows [0, count) of frm to rows [at, at + count) of dst (with their constants)
    cdef void move_rows(self, RowBlock dst, Py_ssize_t at, RowBlock frm,
                        Py_ssize_t count) noexcept nogil
    # residuals of the rows at th: D[i] = d_i, DP[i K:(i + 1) K] = d'_i (times the
    # rows' weights), eta (count K) the scratch of the predictors; returns sum d_i
    cdef double evaluate(self, const int64_t* idx, RowBlock b, Py_ssize_t count,
                         const double* th, double* eta, double* D, double* DP) noexcept nogil
    # the same for rows [start, start + count) of b (idx from the block's start; eta,
    # D, DP from these rows' start); thread-safe on disjoint ranges
    cdef double evaluate_part(self, const int64_t* idx, RowBlock b, Py_ssize_t start,
                              Py_ssize_t count, const double* th, double* eta, double* D,
                              double* DP) noexcept nogil
    # the same for rows [start, stop) of b by row-by-row products (small blocks),
    # to D[i - start], DP[(i - start) K:]
    cdef double block_residuals(self, const int64_t* idx, RowBlock b, Py_ssize_t start,
                                Py_ssize_t stop, const double* th, double* eta, double* D,
                                double* DP) noexcept nogil
    # out[:dim] = the gradient sum_i c_i (x) x_i of the rows with weights c (K per row;
    # the noise-scale model's second is the log scale's); may overwrite c
    cdef void grad(self, const int64_t* idx, RowBlock b, Py_ssize_t count, double* c,
                   double* out) noexcept nogil
    # the same for rows [start, start + count) of b (c from these rows' start)
    cdef void grad_part(self, const int64_t* idx, RowBlock b, Py_ssize_t start,
                        Py_ssize_t count, double* c, double* out) noexcept nogil

    # ---- internals -----------------------------------------------------------------------
    cdef double _source_weight(self, int64_t k) noexcept nogil
    cdef void _row_eta(self, const int64_t* idx, RowBlock b, Py_ssize_t start,
                       Py_ssize_t count, const double* th, double* eta) noexcept nogil
    cdef double _weigh_rows(self, Py_ssize_t count, const double* w, double* D,
                            double* DP) noexcept nogil
    cdef double _row_terms(self, const double* th, Py_ssize_t count, const double* y,
                           const double* w, const double* eta, const double* es,
                           const double* c0, const double* c1, const double* c2, double* D,
                           double* DP) noexcept nogil
