# The compiled model of linear regression with the Gaussian noise's log scale
# sampled (see ``_cylinear.pyx``).
#
# ``theta`` is (beta, t): the p1 = n_features + intercept coefficients (intercept
# last), then t = log(sigma / s), s a fixed scale of the data (``log_scale`` =
# log s), so tau = log sigma = log_scale + t. The per-datum terms are those of
# ``_scale_terms.pxd`` at (eta = x . beta, tau). The cache of the control-variate
# methods (``cv_cache``, passed back as ``eta_star``) is the linear predictor at
# theta* (one double per datum, as for the GLMs).
#
# Full-data sums: every sum of the likelihood is a function of tau and of three
# sums over the data at beta, the raw sums S_rr = sum r^2, S_rx = sum r x and
# S_xx = sum x x^T (r = y - x . beta). With sufficient statistics (S_rr, S_rx at a
# reference beta0, and S_xx) the raw sums at any beta follow exactly, in O(p1^2)
# and without reading the data:
#   S_rx(beta) = S_rx0 - S_xx delta,  S_rr(beta) = S_rr0 - delta . (2 S_rx0 - S_xx delta),
# delta = beta - beta0. Without them, a pass over the rows computes the raw sums.
#
# Weights (``weight=``, the base class's ``has_weight``): every term, its
# derivatives and curvature are w_k times the unweighted ones, so the raw sums
# are the weighted S_rr = sum w r^2, S_rx = sum w r x, S_xx = sum w x x^T (the
# statistics too) and the count n in the full-data sums is ``weight_sum`` =
# sum w_k (n unweighted).
from libc.stdint cimport int64_t
from bayes_subsample.models._cymodel cimport CyTermModel
from bayes_subsample.models._rows cimport Rows, DenseRows
from bayes_subsample.models._scale_terms cimport ScaleConsts


cdef class CyGaussianScale(CyTermModel):
    cdef readonly bint dense              # rows is a DenseRows (with columns)
    cdef readonly Py_ssize_t n_features   # d
    cdef readonly Py_ssize_t n_cols       # p1 = d + intercept (n_params = p1 + 1)
    cdef readonly bint intercept
    cdef readonly double log_scale        # log s: tau = log_scale + theta[p1]
    cdef readonly double weight_sum       # sum_k w_k (n_data unweighted)
    # the sufficient statistics (``set_statistics``)
    cdef readonly bint has_statistics
    cdef double[::1] beta0, srx0
    cdef double[:, ::1] sxx
    cdef double srr0

    # the constants of the terms of ``order`` at theta (theta_star for residuals)
    cdef void consts(self, int order, const double* theta, const double* theta_star,
                     ScaleConsts* k) noexcept nogil
    # the raw sums at beta (theta[:p1]): srr[0], srx[:p1], and (if sxx is not NULL) the
    # full symmetric sxx[:p1 * p1]; from the statistics, else by a pass over the rows
    # (counted). -1 if out of memory
    cdef int raw_sums(self, const double* beta, double* srr, double* srx, double* sxx,
                      int n_threads) noexcept nogil

    # ---- internals -----------------------------------------------------------------------
    # t[i] *= w_{idx[i]} and, if dt is not NULL, dt[2i], dt[2i + 1] *= w_{idx[i]}
    # (weighted models only: callers branch on has_weight)
    cdef void _weigh_terms(self, const int64_t* idx, Py_ssize_t c, double* t,
                           double* dt) noexcept nogil
    # (_values, CyTermModel's: dt[2i], dt[2i + 1] the derivatives in eta and tau)
    # a chunk's targets to yb and, for residuals, its eta* to es (from the cache, else
    # x . theta_star); returns es, or NULL for the log-likelihood
    cdef const double* _setup(self, int order, const double* theta_star,
                              const double* eta_star, const int64_t* idx, Py_ssize_t c,
                              double* yb, double* es) noexcept nogil
    # rows [start, stop) of the raw-sums pass, in row order
    cdef double _range_sums(self, Py_ssize_t start, Py_ssize_t stop, const double* beta,
                            double* srx, double* sxx) noexcept nogil
