# The compiled canonical GLMs: ``CyGLM`` and its families.
#
# ``CyGLM`` implements the ``CyModel`` contract (``_cymodel.pxd``) for canonical
# GLMs over a ``Rows`` object: its loops over data are the three ``term_*``
# methods, which the six kernel methods call at a fixed order (``CyTermModel``);
# the family is a subclass (``CyLogistic``, ``CyPoisson``, ``CyGaussian``) that
# only names its per-datum functions of the scalar linear predictor ``eta`` (a
# ``GLMFamily`` of ``_glm_terms.pxd``).
from libc.stdint cimport int64_t, uint8_t
from bayes_subsample.models._cymodel cimport CyTermModel, MODEL_CHUNK
from bayes_subsample.models._rows cimport Rows
from bayes_subsample.models._glm_terms cimport GLMFamily


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


cdef class CyGLM(CyTermModel):
    cdef readonly bint dense            # rows is a DenseRows
    cdef const uint8_t[::1] y8          # the targets as 0/1 bytes (labels8: 1 byte a row;
                                        # then y is not set)
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

    # eta[i] = x_{idx[i]} . theta (+ offset_{idx[i]}): the linear predictors of c data
    cdef inline void predict(self, const int64_t* idx, Py_ssize_t c, const double* theta,
                             double* eta) noexcept nogil:
        self.rows.dot(idx, c, theta, eta)
        self.add_offset(idx, c, eta)

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
