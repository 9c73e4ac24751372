# The compiled multinomial (softmax) logistic regression model.
#
# ``theta`` is (K, p1) row-major, p1 = n_features + intercept (see
# ``_multinomial.py``); the per-datum terms are those of ``_softmax_terms.pxd``
# of the K linear predictors eta_k = x . theta_k. The cache of the
# control-variate methods (``cv_cache``, passed back as ``eta_star``) holds
# ``2K + 1`` doubles per datum (eta*, p*, lse(eta*)). A weighted model
# (``weight=``, ``CyModel.has_weight``) multiplies every term, derivative and
# curvature of datum k by w_k; the cache is not weighted.
from libc.stdint cimport int64_t
from bayes_subsample.models._cymodel cimport CyTermModel
from bayes_subsample.models._rows cimport Rows


# the scratch of one loop over chunks of at most c data (on the heap: K is not bounded)
cdef struct Scratch:
    double* E       # (K, c) class-major: linear predictors at theta
    double* E2      # (K, c) at theta_new, or at theta_star while caches are computed
    double* R       # (K, c) class-major: derivatives of the terms in eta
    double* C       # (c, 2K + 1): caches computed on the fly
    double* e       # (K,) one datum's predictors
    double* e2      # (K,)
    double* dt      # (K,) one datum's derivatives
    double* p       # (K,) softmax scratch


cdef class CyMultinomial(CyTermModel):
    cdef readonly Py_ssize_t n_classes  # K
    cdef readonly Py_ssize_t n_cols     # p1 = n_features + intercept
    cdef readonly Py_ssize_t n_features
    cdef readonly bint intercept

    # ---- internals (_cymultinomial.pyx) -----------------------------------------------------
    # E[k * c + i] = x_{idx[i]} . theta_k (class-major, K x c)
    cdef void _eta(self, const int64_t* idx, Py_ssize_t c, const double* theta,
                   double* E) noexcept nogil
    # the same for the rows [s, s + c)
    cdef void _eta_range(self, Py_ssize_t s, Py_ssize_t c, const double* theta,
                         double* E) noexcept nogil
    # out[i * (2K + 1) :] = the cache of the predictors E[:, i] (e: K doubles of scratch)
    cdef void _softmax_caches(self, const double* E, Py_ssize_t c, double* e,
                              double* out) noexcept nogil
    # b.C[i * (2K + 1) :] = the cache of datum idx[i] at theta_star
    cdef void _caches(self, Scratch* b, const double* theta_star, const int64_t* idx,
                      Py_ssize_t c) noexcept nogil
    # the loop over chunks of m indices that _values, term_diffs and term_grad_sum
    # share (kind: VALUES, DIFFS or GRAD of _cymultinomial.pyx), and its three bodies
    # for one chunk of c indices (idx, t, dt, out: the chunk's own)
    cdef int _chunks(self, int kind, int order, const double* theta_star,
                     const double* eta_star, const double* theta, const double* theta_new,
                     const int64_t* idx, Py_ssize_t m, double* out, double* dt, double* grad,
                     double* total, const char* where) noexcept nogil
    cdef void _values_chunk(self, Scratch* b, int order, const double* eta_star,
                            const double* theta, const int64_t* idx, Py_ssize_t c, double* t,
                            double* dt) noexcept nogil
    cdef void _diffs_chunk(self, Scratch* b, int order, const double* eta_star,
                           const double* theta, const double* theta_new, const int64_t* idx,
                           Py_ssize_t c, double* out) noexcept nogil
    cdef double _grad_chunk(self, Scratch* b, int order, const double* eta_star,
                            const double* theta, const int64_t* idx, Py_ssize_t c,
                            double* grad, double tsum) noexcept nogil
    # (_values, CyTermModel's: dt[i * K + k] = d t / d eta_k)
    # slots of the full pass (a function of n and p only)
    cdef Py_ssize_t _n_slots(self) noexcept nogil
    # rows [start, stop) of the full pass: ll[0] = sum l, grad += sum grad l, lower
    # triangles of the class pairs' G_q += sum p_a p_b x x^T (grad, G may be NULL; the
    # pairs in n_threads threads; every row's share times w_k when weighted); -1 if out
    # of memory
    cdef int _pass_range(self, Py_ssize_t start, Py_ssize_t stop, const double* theta,
                         double* ll, double* grad, double* G, int n_threads) noexcept nogil
    # out[k * (2K + 1) :] = the cache of datum k at theta_star, k in [start, stop)
    cdef int _cache_range(self, Py_ssize_t start, Py_ssize_t stop, const double* theta_star,
                          double* out) noexcept nogil
