# The compiled model object every kernel takes as a typed argument.
#
# ``CyModel`` is the per-datum part of a posterior: log-likelihood terms, their
# differences, gradient sums and the residuals of Taylor control variates,
# over a chunk of data indices, as ``noexcept nogil`` methods. Kernels
# (approximate MH decisions, stochastic gradients, HMC-ECS) call these and
# never look inside a model. Every method returns 0, or -1 after an error in a
# user callback (the exception is kept; ``raise_error()`` re-raises it with
# the GIL held).
#
# The ``term_*`` methods take the Taylor order as an argument, a negative one
# (``LOGLIK``) standing for the log-likelihood terms themselves: kernels that
# run with or without control variates call those.
#
# ``CyGLM`` implements them for canonical GLMs over a ``Rows`` object: its loops
# over data are the three ``term_*`` methods, which the six kernel methods
# call at a fixed order; the family is a subclass (``CyLogistic``,
# ``CyPoisson``, ``CyGaussian``) that only names its per-datum functions of the
# scalar linear predictor ``eta`` (a ``GLMFamily`` of ``_glm_terms.pxd``).
# ``CyCallbackModel`` (``_callback.pxd``) runs a Python ``Model`` (e.g.
# ``FunctionModel``) through the same interface, calling back into NumPy with
# the GIL, so user models go through the very same kernels.
from libc.stdint cimport int64_t, uint8_t

cdef extern from *:
    """
    static inline void _bs_atomic_add(int64_t* x, int64_t k) {
        __atomic_fetch_add(x, k, __ATOMIC_RELAXED);
    }
    """
    void _atomic_add "_bs_atomic_add"(int64_t* x, int64_t k) noexcept nogil
from bayes_subsample.models._rows cimport Rows, DenseRows
from bayes_subsample.models._glm_terms cimport GLMFamily

cdef enum:
    # indices per chunk inside the methods (stack buffers of this size)
    MODEL_CHUNK = 256
    # the Taylor order that stands for the log-likelihood terms themselves
    # (``term_*`` methods; any negative order)
    LOGLIK = -1


# the scratch of one chunk of at most MODEL_CHUNK data (on the stack of a loop;
# the buffers every loop uses first, so that they are contiguous)
cdef struct Chunk:
    double y[MODEL_CHUNK]           # targets
    double eta[MODEL_CHUNK]         # linear predictors at theta
    double t[MODEL_CHUNK]           # terms (log-likelihood or residuals)
    double dt[MODEL_CHUNK]          # their derivatives in eta
    double w[MODEL_CHUNK]           # -d^2 l / d eta^2
    double eta_new[MODEL_CHUNK]     # linear predictors at theta_new
    double eta_star[MODEL_CHUNK]    # ... at theta_star (control variates)
    double c0[MODEL_CHUNK]          # Taylor constants at eta_star
    double c1[MODEL_CHUNK]
    double c2[MODEL_CHUNK]


cdef class CyModel:
    cdef readonly Py_ssize_t n_data
    cdef readonly Py_ssize_t n_params
    # per-datum evaluations of one control-variate residual (and its gradient):
    # 2 in general (the datum at theta and at theta*), 1 for the GLMs (scalar form)
    cdef readonly int cv_cost
    # doubles per datum of the cache ``cv_cache`` returns (passed back to the
    # methods as ``eta_star``): 1 for the GLMs (eta*), 2K + 1 for the multinomial
    cdef readonly Py_ssize_t cache_width
    cdef object _errors           # thread id -> exception from a callback
    # full-data passes made (``full_sums`` calls of the compiled models; atomic:
    # chains in threads share the object); read as ``n_full_passes``
    cdef int64_t _n_passes
    # per-datum weights w_k >= 0 (sample_weight; only when has_weight): every
    # term l_k, its derivatives and curvature are w_k times the unweighted ones
    cdef const double[::1] weight
    cdef readonly bint has_weight

    # a[i] *= w_{idx[i]} (a[s + i] *= ... for the range form; nothing unweighted)
    cdef inline void weigh(self, const int64_t* idx, Py_ssize_t c, double* a) noexcept nogil:
        cdef Py_ssize_t i
        if self.has_weight:
            for i in range(c):
                a[i] *= self.weight[idx[i]]

    cdef inline void weigh_range(self, Py_ssize_t s, Py_ssize_t c, double* a) noexcept nogil:
        cdef Py_ssize_t i
        if self.has_weight:
            for i in range(c):
                a[i] *= self.weight[s + i]

    # w_k (1 unweighted)
    cdef inline double row_weight(self, Py_ssize_t k) noexcept nogil:
        return self.weight[k] if self.has_weight else 1.0

    cdef _set_weight(self, weight)

    # out[i] = l_{idx[i]}(theta)
    cdef int loglik(self, const double* theta, const int64_t* idx, Py_ssize_t m,
                    double* out) noexcept nogil
    # out[i] = l_{idx[i]}(theta_new) - l_{idx[i]}(theta)  (one read of each datum)
    cdef int loglik_diff(self, const double* theta, const double* theta_new,
                         const int64_t* idx, Py_ssize_t m, double* out) noexcept nogil
    # grad[:p] = sum_i grad l_{idx[i]}(theta); ll[0] = sum_i l_{idx[i]}(theta)
    cdef int grad_sum(self, const double* theta, const int64_t* idx, Py_ssize_t m,
                      double* grad, double* ll) noexcept nogil
    # Taylor control variates of order 0/1/2 around theta_star (eta_star: the
    # linear predictors at theta_star for all n data, or NULL; GLMs only):
    # out[i] = d_{idx[i]}(theta_new) - d_{idx[i]}(theta)
    cdef int cv_residual_diff(self, int order, const double* theta_star,
                              const double* eta_star, const double* theta,
                              const double* theta_new, const int64_t* idx, Py_ssize_t m,
                              double* out) noexcept nogil
    # grad[:p] = sum_i grad d_{idx[i]}(theta); dsum[0] = sum_i d_{idx[i]}(theta)
    cdef int cv_grad_sum(self, int order, const double* theta_star, const double* eta_star,
                         const double* theta, const int64_t* idx, Py_ssize_t m,
                         double* grad, double* dsum) noexcept nogil
    # d[i] = d_{idx[i]}(theta)
    cdef int cv_residuals(self, int order, const double* theta_star, const double* eta_star,
                          const double* theta, const int64_t* idx, Py_ssize_t m,
                          double* d) noexcept nogil

    # the same by Taylor order: the terms t_k are the log-likelihood l_k for a
    # negative order (LOGLIK), else the residuals d_k of that order; out[i] =
    # t_{idx[i]}(theta), out[i] = t_{idx[i]}(theta_new) - t_{idx[i]}(theta), grad[:p]
    # = sum_i grad t_{idx[i]}(theta) and total[0] = sum_i t_{idx[i]}(theta) (if not NULL)
    cdef int term_values(self, int order, const double* theta_star, const double* eta_star,
                         const double* theta, const int64_t* idx, Py_ssize_t m,
                         double* out) noexcept nogil
    cdef int term_diffs(self, int order, const double* theta_star, const double* eta_star,
                        const double* theta, const double* theta_new, const int64_t* idx,
                        Py_ssize_t m, double* out) noexcept nogil
    cdef int term_grad_sum(self, int order, const double* theta_star, const double* eta_star,
                           const double* theta, const int64_t* idx, Py_ssize_t m,
                           double* grad, double* total) noexcept nogil

    # full-data sums: ll[0] = sum_k l_k, grad[:p] = sum_k grad l_k, hess[:p*p] = sum_k
    # Hessian l_k (symmetric, row-major); NULL outputs are skipped. Results do not
    # depend on n_threads.
    cdef int full_sums(self, const double* theta, double* ll, double* grad, double* hess,
                       int n_threads) noexcept nogil

    cdef int _fail(self) noexcept    # store the current exception (GIL held)
    cdef inline void _count_pass(self) noexcept nogil:
        _atomic_add(&self._n_passes, 1)


# a compiled model that implements the term_* loops by Taylor order: the kernel
# methods above (loglik, cv_residuals, ...) are those loops at a fixed order
cdef class CyTermModel(CyModel):
    pass


cdef class CyGLM(CyTermModel):
    cdef readonly Rows rows
    cdef readonly bint dense            # rows is a DenseRows
    cdef const double[::1] y            # the targets as float64 ...
    cdef const uint8_t[::1] y8          # ... or as 0/1 bytes (labels8: 1 byte a row)
    cdef readonly bint labels8
    cdef readonly double phi            # dispersion (Gaussian: noise variance)
    cdef readonly Py_ssize_t n_features
    cdef readonly bint intercept
    cdef GLMFamily family               # set by the family subclass
    cdef const double[::1] offset       # per-datum offsets added to eta (has_offset)
    cdef readonly bint has_offset

    # eta[i] += offset[idx[i]] (eta[i] += offset[s + i] for the range form)
    cdef inline void add_offset(self, const int64_t* idx, Py_ssize_t c,
                                double* eta) noexcept nogil:
        cdef Py_ssize_t i
        if self.has_offset:
            for i in range(c):
                eta[i] += self.offset[idx[i]]

    cdef inline void add_offset_range(self, Py_ssize_t s, Py_ssize_t c,
                                      double* eta) noexcept nogil:
        cdef Py_ssize_t i
        if self.has_offset:
            for i in range(c):
                eta[i] += self.offset[s + i]

    # y_k as a double, whichever way the targets are stored
    cdef inline double target(self, Py_ssize_t k) noexcept nogil:
        return <double> self.y8[k] if self.labels8 else self.y[k]

    # ---- the family's per-datum scalar terms of eta over a chunk ---------------------
    # ll = log-likelihood term, r = d ll / d eta, w = -d^2 ll / d eta^2
    cdef void link_terms(self, Py_ssize_t m, const double* y, const double* eta,
                         bint want_ll, double* ll, double* r, double* w) noexcept nogil
    # constants of the Taylor expansion at eta*: c0 = b(eta*), c1 = b'(eta*),
    # c2 = b''(eta*) / phi (cached by subsample buffers)
    cdef void cv_consts(self, Py_ssize_t m, const double* eta_star, double* c0, double* c1,
                        double* c2) noexcept nogil
    # residual d = l - q of the order-0/1/2 expansion and d' = dd/deta
    cdef void cv_terms(self, int order, Py_ssize_t m, const double* y, const double* eta,
                       const double* eta_star, const double* c0, const double* c1,
                       const double* c2, double* d, double* dp) noexcept nogil

    # ---- shared ----------------------------------------------------------------------------
    # X[i, :p] = x_{idx[i]} (float64, intercept column included), y[i] = y_{idx[i]}:
    # a subsample copied into a caller's buffers (HMC-ECS)
    cdef void gather_rows(self, const int64_t* idx, Py_ssize_t m, double* X,
                          double* y) noexcept nogil
    # full_sums with the Hessian summed over the rows of every hess_every-th
    # MODEL_CHUNK-row chunk only (chunk k * hess_every, k = 0, 1, ...; all rows
    # at 1): an estimate of it at the cost of the gradient pass and a fraction
    # of the Hessian's (refine_theta_star's first step)
    cdef int sampled_sums(self, const double* theta, double* ll, double* grad, double* hess,
                          int n_threads, Py_ssize_t hess_every, bint diag=*) noexcept nogil
    # one contiguous range of rows of the fused full pass (log-likelihood sum,
    # gradient sum, lower triangle of the sum of -Hessians over the chunks of
    # MODEL_CHUNK rows whose index (from row 0) is a multiple of hess_every; with
    # diag, the diagonal of the sum of -Hessians over all rows, p numbers)
    cdef double pass_range(self, Py_ssize_t start, Py_ssize_t stop, const double* theta,
                           bint want_ll, double* grad, double* neg_hess,
                           Py_ssize_t hess_every, bint diag=*) noexcept nogil
    # term_values with dt = the derivatives of the terms in eta (or NULL)
    cdef int _values(self, int order, const double* theta_star, const double* eta_star,
                     const double* theta, const int64_t* idx, Py_ssize_t m, double* t,
                     double* dt) noexcept nogil
    # one chunk of the term_* loops (idx: the chunk's c indices)
    cdef void _setup(self, Chunk* b, int order, const double* theta_star,
                     const double* eta_star, const int64_t* idx, Py_ssize_t c) noexcept nogil
    cdef void _terms(self, Chunk* b, int order, Py_ssize_t c, const double* eta, bint want_t,
                     double* t, double* dt) noexcept nogil


cdef class CyLogistic(CyGLM):
    pass


cdef class CyPoisson(CyGLM):
    pass


cdef class CyGaussian(CyGLM):
    pass
