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
# ``CyGLM`` (``_cyglm.pxd``) implements them for canonical GLMs over a ``Rows``
# object; ``CyCallbackModel`` (``_callback.pxd``) runs a Python ``Model`` (e.g.
# ``FunctionModel``) through the same interface, calling back into NumPy with
# the GIL, so user models go through the very same kernels.
from libc.stdint cimport int64_t
from bayes_subsample.models._rows cimport Rows

cdef extern from *:
    """
    static inline void _bs_atomic_add(int64_t* x, int64_t k) {
        __atomic_fetch_add(x, k, __ATOMIC_RELAXED);
    }
    """
    void _atomic_add "_bs_atomic_add"(int64_t* x, int64_t k) noexcept nogil

cdef enum:
    # indices per chunk inside the methods (stack buffers of this size)
    MODEL_CHUNK = 256
    # the Taylor order that stands for the log-likelihood terms themselves
    # (``term_*`` methods; any negative order)
    LOGLIK = -1

# out[:width] = the sum over slots s < S of parts[s * stride : s * stride + width],
# added slot by slot in order: the per-slot sums of a full pass reduced the same way
# for any number of threads
cdef inline void sum_slots(Py_ssize_t S, const double* parts, Py_ssize_t stride,
                           Py_ssize_t width, double* out) noexcept nogil:
    cdef Py_ssize_t s, j
    for j in range(width):
        out[j] = 0.0
    for s in range(S):
        for j in range(width):
            out[j] += parts[s * stride + j]


# the same for the lower triangles of the p x p matrices at parts + s * stride, each
# times sign (-1: minus the sums), then mirrored: out[:p * p] symmetric
cdef inline void sum_slot_triangles(Py_ssize_t S, const double* parts, Py_ssize_t stride,
                                    Py_ssize_t p, double sign, double* out) noexcept nogil:
    cdef Py_ssize_t s, j, l
    for j in range(p * p):
        out[j] = 0.0
    for s in range(S):
        for j in range(p):
            for l in range(j + 1):
                out[j * p + l] += sign * parts[s * stride + j * p + l]
    for j in range(p):
        for l in range(j):
            out[l * p + j] = out[j * p + l]


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

    # a[i] = (a[i] - b[i]) w_{idx[i]}: a chunk's term differences, from its terms at
    # theta_new (a) and at theta (b)
    cdef inline void weigh_diffs(self, const int64_t* idx, Py_ssize_t c, double* a,
                                 const double* b) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(c):
            a[i] = a[i] - b[i]
        self.weigh(idx, c, a)

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
    # store a MemoryError naming the model's class and the method ``where``; -1
    cdef int _nomem(self, const char* where) noexcept with gil
    cdef inline void _count_pass(self) noexcept nogil:
        _atomic_add(&self._n_passes, 1)


# a compiled model that implements the term_* loops by Taylor order: the kernel
# methods above (loglik, cv_residuals, ...) are those loops at a fixed order
cdef class CyTermModel(CyModel):
    cdef readonly Rows rows             # the data x_k, one row per datum
    cdef const double[::1] y            # the targets y_k as float64 (the multinomial
                                        # model's: class indices)

    # t[i] = t_{idx[i]}(theta), the terms by order as term_values computes them
    # (term_values is this with dt = NULL), and if dt is not NULL their
    # derivatives in the datum's linear predictors (1 for a GLM, K for the
    # multinomial model, 2 for the noise-scale model: in eta and in tau); both
    # times the datum's weight when weighted
    cdef int _values(self, int order, const double* theta_star, const double* eta_star,
                     const double* theta, const int64_t* idx, Py_ssize_t m, double* t,
                     double* dt) noexcept nogil
    # the terms of the chunk idx[:c] (c <= MODEL_CHUNK) at theta to t and at theta_new
    # to t_new, unweighted, from one read of each row: the per-chunk part of
    # term_diffs, which is the loop over chunks (the multinomial model has its own)
    cdef void _term_pair(self, int order, const double* theta_star, const double* eta_star,
                         const double* theta, const double* theta_new, const int64_t* idx,
                         Py_ssize_t c, double* t, double* t_new) noexcept nogil

    # y[i] = y_{idx[i]} as doubles (from ``y``; a model that stores its targets
    # otherwise overrides it)
    cdef void copy_targets(self, const int64_t* idx, Py_ssize_t m, double* y) noexcept nogil
    # X[i, :p1] = x_{idx[i]} (float64, intercept column included), y[i] = y_{idx[i]}:
    # a subsample copied into a caller's buffers (HMC-ECS)
    cdef void gather_rows(self, const int64_t* idx, Py_ssize_t m, double* X,
                          double* y) noexcept nogil
