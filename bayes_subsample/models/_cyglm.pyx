# cython: language_level=3
"""The compiled canonical GLMs (see ``_cyglm.pxd``): ``CyGLM``'s loops over
chunks of data indices, its fused full-data pass and its control-variate
residuals, and the family subclasses ``CyLogistic``, ``CyPoisson`` and
``CyGaussian``; plus Python entry points of the SIMD math of ``_simd.h`` and
the 0/1 label count (``count_binary``) the GLMs' compact labels rest on.

Conventions (those of ``CyModel``, ``_cymodel.pyx``): ``theta`` is float64 of
length ``p = n_features + intercept`` with the intercept last; indices are
int64; every accumulation is in double and runs over the data in index order,
so results do not depend on how a caller splits its work into chunks or
threads.
"""
import numpy as np
from cython.parallel cimport prange
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t,
                           uint64_t)
from libc.string cimport memset
from libc.stdlib cimport calloc, free
from bayes_subsample.models._checks cimport check_cache, check_indices, check_theta
from bayes_subsample.models._cymodel cimport (CyTermModel, MODEL_CHUNK, sum_slot_triangles,
                                               sum_slots)
from bayes_subsample.models._rows cimport Rows, DenseRows
from bayes_subsample.models._glm_terms cimport (
    GLMFamily, GLM_LOGISTIC, GLM_POISSON, GLM_GAUSSIAN, Family, Logistic, Poisson, Gaussian,
    glm_terms, glm_cv_consts, glm_cv_residuals, bs_exp, bs_log1p01, bs_expm1, bs_log1p,
    bs_sum)

# rows per task of the threaded full pass: the reduction is over fixed chunks
# in a fixed order, so the result does not depend on the number of threads
DEF PASS_CHUNK = 4096


cdef inline Py_ssize_t _imin(Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    return a if a < b else b


# ---------------------------------------------------------------------------------------
# Python entry points of the SIMD math (_simd.h), for the tests
# ---------------------------------------------------------------------------------------
ctypedef fused label_t:
    double
    float
    int64_t
    int32_t
    int16_t
    int8_t
    uint64_t
    uint32_t
    uint16_t
    uint8_t


def _count01(const label_t[::1] y):
    """``(zeros, ones)`` of a 1-D array of one of the ``label_t`` types (the
    type is dispatched on once, by Cython, from the buffer's format)."""
    cdef Py_ssize_t i, z = 0, o = 0
    with nogil:
        for i in range(y.shape[0]):
            z += y[i] == 0
            o += y[i] == 1
    return int(z), int(o)


def count_binary(y):
    """``(zeros, ones)``: how many values of the 1-D numeric array ``y`` are 0
    and how many are 1 (NaN neither), in one compiled read without temporaries:
    the check that labels are 0/1 (``zeros + ones == len(y)``) and which of the
    two occur. bool arrays count as bytes."""
    y = np.ascontiguousarray(y)
    if y.ndim != 1:
        raise ValueError(f"y must be 1-D, got shape {y.shape}")
    if y.dtype == np.bool_:
        y = y.view(np.uint8)
    elif y.dtype.kind not in "iuf" or y.dtype.itemsize > 8 or y.dtype == np.float16:
        raise TypeError(f"count_binary needs a numeric array, got dtype {y.dtype}")
    elif not y.dtype.isnative:
        y = y.astype(y.dtype.newbyteorder("="))
    return _count01(y)


ctypedef double (*scalar_fn)(double) noexcept nogil


cdef object _elementwise(scalar_fn f, x):
    """``f`` elementwise over a float64 array (the tests' entry to the C math)."""
    cdef double[::1] a = np.ascontiguousarray(x, dtype=np.float64).ravel()
    cdef double[::1] out = np.empty(a.shape[0])
    cdef Py_ssize_t i
    for i in range(a.shape[0]):
        out[i] = f(a[i])
    return np.asarray(out)


def _simd_exp(x):
    """``bs_exp`` elementwise over a float64 array (tests)."""
    return _elementwise(bs_exp, x)


def _simd_log1p01(x):
    """``bs_log1p01`` elementwise over a float64 array in [0, 1] (tests)."""
    a = np.asarray(x, dtype=np.float64)
    if a.size and not (np.min(a) >= 0.0 and np.max(a) <= 1.0):
        raise ValueError("bs_log1p01 is defined on [0, 1]")
    return _elementwise(bs_log1p01, a)


def _simd_expm1(x):
    """``bs_expm1`` elementwise over a float64 array (tests)."""
    return _elementwise(bs_expm1, x)


def _simd_log1p(x):
    """``bs_log1p`` elementwise over a float64 array in [-0.5, inf] (tests)."""
    a = np.asarray(x, dtype=np.float64)
    if np.any(a < -0.5):
        raise ValueError("bs_log1p is defined on [-0.5, inf]")
    return _elementwise(bs_log1p, a)


# ---------------------------------------------------------------------------------------
# canonical GLMs
# ---------------------------------------------------------------------------------------
cdef class CyGLM(CyTermModel):
    """Compiled canonical GLM over a :class:`Rows` object (abstract: the family
    is a subclass).

    Parameters
    ----------
    rows : Rows
        The design (``DenseRows(X, intercept)``).
    y : array-like of shape (n,)
        Targets: float64, or 0/1 labels as uint8 or bool (read in place, one
        byte a row; the logistic family's compact labels).
    phi : float, default=1.0
        Dispersion (the Gaussian family's noise variance).
    offset : array-like of shape (n,), optional
        Per-datum offsets: the linear predictor is ``x_k . theta + offset_k``
        (a Poisson model's log exposure), in every term, pass and residual.
    weight : array-like of shape (n,), optional
        Per-datum weights ``w_k >= 0``: every term ``l_k`` (and so every
        residual, gradient and curvature) is ``w_k`` times the unweighted one
        (``sample_weight``; integer weights are duplicated rows).
    """

    def __init__(self, Rows rows, y, double phi=1.0, offset=None, weight=None):
        if type(self) is CyGLM:
            raise TypeError("CyGLM is abstract: use its family subclasses "
                            "(CyLogistic, CyPoisson, CyGaussian)")
        y = np.asarray(y)
        self.labels8 = y.dtype == np.uint8 or y.dtype == np.bool_
        y = np.ascontiguousarray(y.view(np.uint8) if self.labels8 else y,
                                 dtype=np.uint8 if self.labels8 else np.float64)
        if y.shape != (rows.n_rows,):
            raise ValueError(f"y must have shape ({rows.n_rows},), got {y.shape}")
        if not phi > 0:
            raise ValueError(f"phi must be > 0, got {phi}")
        self.rows = rows
        self.dense = isinstance(rows, DenseRows) and rows.n_features > 0
        if self.labels8:
            if y.shape[0] and np.max(y) > 1:
                raise ValueError("uint8 targets must be 0/1 labels")
            self.y8 = y
        else:
            self.y = y
        self.phi = phi
        if offset is not None:
            offset = np.ascontiguousarray(offset, dtype=np.float64)
            if offset.shape != (rows.n_rows,):
                raise ValueError(f"offset must have shape ({rows.n_rows},), got {offset.shape}")
            if not np.isfinite(offset).all():
                raise ValueError("offset contains NaN or infinity")
            self.offset = offset
        self.has_offset = offset is not None
        self.n_data = rows.n_rows
        self.n_params = rows.n_cols
        self.n_features = rows.n_features
        self.intercept = rows.intercept
        self.cv_cost = 1
        self._set_weight(weight)

    # ---- the family's terms over a chunk (the family is chosen once per chunk) ----------
    cdef void link_terms(self, Py_ssize_t m, const double* y, const double* eta,
                         bint want_ll, double* ll, double* r, double* w) noexcept nogil:
        if self.family == GLM_LOGISTIC:
            glm_terms(Logistic(self.phi), m, y, eta, want_ll, ll, r, w)
        elif self.family == GLM_POISSON:
            glm_terms(Poisson(self.phi), m, y, eta, want_ll, ll, r, w)
        else:
            glm_terms(Gaussian(self.phi), m, y, eta, want_ll, ll, r, w)

    cdef void cv_consts(self, Py_ssize_t m, const double* eta_star, double* c0, double* c1,
                        double* c2) noexcept nogil:
        if self.family == GLM_LOGISTIC:
            glm_cv_consts(Logistic(self.phi), m, eta_star, c0, c1, c2)
        elif self.family == GLM_POISSON:
            glm_cv_consts(Poisson(self.phi), m, eta_star, c0, c1, c2)
        else:
            glm_cv_consts(Gaussian(self.phi), m, eta_star, c0, c1, c2)

    cdef void cv_terms(self, int order, Py_ssize_t m, const double* y, const double* eta,
                       const double* eta_star, const double* c0, const double* c1,
                       const double* c2, double* d, double* dp) noexcept nogil:
        if self.family == GLM_LOGISTIC:
            glm_cv_residuals(Logistic(self.phi), order, m, y, eta, eta_star, c0, c1, c2, d, dp)
        elif self.family == GLM_POISSON:
            glm_cv_residuals(Poisson(self.phi), order, m, y, eta, eta_star, c0, c1, c2, d, dp)
        else:
            glm_cv_residuals(Gaussian(self.phi), order, m, y, eta, eta_star, c0, c1, c2, d, dp)

    # ---- the loops over chunks of indices ------------------------------------------------
    cdef void _setup(self, Chunk* b, int order, const double* theta_star,
                     const double* eta_star, const int64_t* idx, Py_ssize_t c) noexcept nogil:
        """The chunk's targets and, for residuals, its linear predictors at theta_star
        (from the cache eta_star if given) and Taylor constants."""
        cdef Py_ssize_t i
        for i in range(c):
            b.y[i] = self.target(idx[i])
        if order < 0:
            return
        if eta_star != NULL:
            for i in range(c):
                b.eta_star[i] = eta_star[idx[i]]
        else:
            self.predict(idx, c, theta_star, b.eta_star)
        self.cv_consts(c, b.eta_star, b.c0, b.c1, b.c2)

    cdef void _terms(self, Chunk* b, int order, Py_ssize_t c, const double* eta, bint want_t,
                     double* t, double* dt) noexcept nogil:
        """t = the chunk's terms at the linear predictors eta (only if want_t for the
        log-likelihood), dt = their derivatives in eta."""
        if order < 0:
            self.link_terms(c, b.y, eta, want_t, t, dt, b.w)
        else:
            self.cv_terms(order, c, b.y, eta, b.eta_star, b.c0, b.c1, b.c2, t, dt)

    cdef int _values(self, int order, const double* theta_star, const double* eta_star,
                     const double* theta, const int64_t* idx, Py_ssize_t m, double* t,
                     double* dt) noexcept nogil:
        cdef Chunk b
        cdef Py_ssize_t s, c
        s = 0
        while s < m:
            c = _imin(MODEL_CHUNK, m - s)
            self.predict(idx + s, c, theta, b.eta)
            self._setup(&b, order, theta_star, eta_star, idx + s, c)
            self._terms(&b, order, c, b.eta, True, t + s, &b.dt[0] if dt == NULL else dt + s)
            self.weigh(idx + s, c, t + s)
            if dt != NULL:
                self.weigh(idx + s, c, dt + s)
            s += c
        return 0

    cdef void _term_pair(self, int order, const double* theta_star, const double* eta_star,
                         const double* theta, const double* theta_new, const int64_t* idx,
                         Py_ssize_t c, double* t, double* t_new) noexcept nogil:
        cdef Chunk b
        self.rows.dot2(idx, c, theta, theta_new, b.eta, b.eta_new)
        self.add_offset(idx, c, b.eta)
        self.add_offset(idx, c, b.eta_new)
        self._setup(&b, order, theta_star, eta_star, idx, c)
        self._terms(&b, order, c, b.eta, True, t, b.dt)
        self._terms(&b, order, c, b.eta_new, True, t_new, b.dt)

    cdef int term_grad_sum(self, int order, const double* theta_star, const double* eta_star,
                           const double* theta, const int64_t* idx, Py_ssize_t m,
                           double* grad, double* total) noexcept nogil:
        cdef Chunk b
        cdef Py_ssize_t s, c
        cdef double tsum = 0.0
        memset(grad, 0, self.n_params * sizeof(double))
        s = 0
        while s < m:
            c = _imin(MODEL_CHUNK, m - s)
            self.predict(idx + s, c, theta, b.eta)
            self._setup(&b, order, theta_star, eta_star, idx + s, c)
            self._terms(&b, order, c, b.eta, total != NULL, b.t, b.dt)
            self.weigh(idx + s, c, b.dt)
            if total != NULL:
                self.weigh(idx + s, c, b.t)
                tsum += bs_sum(c, b.t)
            self.rows.add_xt(idx + s, c, b.dt, grad)
            s += c
        if total != NULL:
            total[0] = tsum
        return 0

    cdef void copy_targets(self, const int64_t* idx, Py_ssize_t m, double* y) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(m):
            y[i] = self.target(idx[i])

    cdef double pass_range(self, Py_ssize_t start, Py_ssize_t stop, const double* theta,
                           bint want_ll, double* grad, double* neg_hess,
                           Py_ssize_t hess_every, bint diag=False) noexcept nogil:
        cdef Chunk b
        cdef Py_ssize_t s, c, i
        cdef double llsum = 0.0
        s = start
        while s < stop:
            c = _imin(MODEL_CHUNK, stop - s)
            self.rows.dot_range(s, s + c, theta, b.eta)
            self.add_offset_range(s, c, b.eta)
            if self.labels8:    # 0/1 bytes to the chunk's doubles
                for i in range(c):
                    b.y[i] = self.y8[s + i]
                self.link_terms(c, &b.y[0], b.eta, want_ll, b.t, b.dt, b.w)
            else:
                self.link_terms(c, &self.y[s], b.eta, want_ll, b.t, b.dt, b.w)
            if self.has_weight:
                if want_ll:
                    self.weigh_range(s, c, b.t)
                self.weigh_range(s, c, b.dt)
                self.weigh_range(s, c, b.w)
            if want_ll:
                llsum += bs_sum(c, b.t)
            if grad != NULL:
                self.rows.add_xt_range(s, s + c, b.dt, grad)
            if neg_hess != NULL and diag:
                self.rows.add_xwx_diag_range(s, s + c, b.w, neg_hess)
            # start is a multiple of PASS_CHUNK, so s one of MODEL_CHUNK
            elif neg_hess != NULL and (hess_every == 1 or (s // MODEL_CHUNK) % hess_every == 0):
                self.rows.add_xwx_range(s, s + c, b.w, neg_hess)
            s += c
        return llsum

    # ---- Python-callable GLM extras -------------------------------------------------------
    def sampled_hessian_pass(self, theta, Py_ssize_t hess_every, int n_threads=1):
        """``full_pass(theta, True, True, True, n_threads)`` with the Hessian summed
        over the chunks of MODEL_CHUNK rows ``0, hess_every, 2 hess_every, ...``
        only; returns ``(ll, grad, hess, rows)``, ``rows`` the number of rows in
        the Hessian's sum (``n`` at ``hess_every = 1``: the full pass). Counts as
        a full pass; bit-identical for any ``n_threads``."""
        if hess_every < 1:
            raise ValueError(f"hess_every must be >= 1, got {hess_every}")
        cdef double[::1] th = check_theta(self, theta)
        cdef Py_ssize_t p = self.n_params, n = self.n_data, j
        cdef Py_ssize_t rows = 0
        cdef double ll = 0.0
        cdef double[::1] grad = np.zeros(p)
        cdef double[:, ::1] hess = np.zeros((p, p))
        cdef int rc
        with nogil:
            rc = self.sampled_sums(&th[0], &ll, &grad[0], &hess[0, 0], n_threads, hess_every)
        if rc:
            self.raise_error()
        for j in range(0, (n + MODEL_CHUNK - 1) // MODEL_CHUNK, hess_every):
            rows += _imin(MODEL_CHUNK, n - j * MODEL_CHUNK)
        return ll, np.asarray(grad), np.asarray(hess), int(rows)


    def diag_hessian_pass(self, theta, int n_threads=1):
        """One full pass: ``(sum l_k, sum grad l_k, diag sum Hessian l_k)`` -- the
        diagonal only (``p`` numbers where the Hessian is ``p x p``: wide data).
        Counts as a full pass; bit-identical for any ``n_threads``."""
        cdef double[::1] th = check_theta(self, theta)
        cdef Py_ssize_t p = self.n_params
        cdef double ll = 0.0
        cdef double[::1] grad = np.zeros(p), hd = np.zeros(p)
        cdef int rc
        with nogil:
            rc = self.sampled_sums(&th[0], &ll, &grad[0], &hd[0], n_threads, 1, True)
        if rc:
            self.raise_error()
        return ll, np.asarray(grad), np.asarray(hd)

    def eta(self, theta, idx=None):
        """Linear predictors ``x_k . theta`` (intercept included, plus the offset
        when there is one) for ``k`` in ``idx``."""
        cdef double[::1] th = check_theta(self, theta)
        cdef int64_t[::1] ix = check_indices(self, idx)
        cdef double[::1] out = np.empty(ix.shape[0])
        if ix.shape[0]:
            with nogil:
                self.predict(&ix[0], ix.shape[0], &th[0], &out[0])
        return np.asarray(out)

    def offsets(self, idx=None):
        """``offset_k`` for ``k`` in ``idx`` (zeros without an offset)."""
        ix = check_indices(self, idx)
        if not self.has_offset:
            return np.zeros(ix.shape[0])
        return np.asarray(self.offset)[ix]

    def cv_cache(self, theta_star):
        """The linear predictors at ``theta_star`` for every datum (8 bytes per
        datum): the residual methods then skip one row dot product per datum."""
        return self.eta(theta_star)

    def targets(self, idx=None):
        """``y_k`` for ``k`` in ``idx`` (a copy)."""
        ix = check_indices(self, idx)
        if self.labels8:
            return np.asarray(self.y8)[ix].astype(np.float64)
        return np.asarray(self.y)[ix]

    def link_terms_array(self, y, eta, bint want_ll=True):
        """``(ll, r, w)`` of the family for arrays of targets and linear predictors."""
        cdef double[::1] yy = np.ascontiguousarray(y, dtype=np.float64)
        cdef double[::1] ee = np.ascontiguousarray(eta, dtype=np.float64)
        if yy.shape[0] != ee.shape[0]:
            raise ValueError("y and eta must have the same length")
        cdef Py_ssize_t m = yy.shape[0]
        cdef double[::1] ll = np.zeros(m), r = np.empty(m), w = np.empty(m)
        if m:
            with nogil:
                self.link_terms(m, &yy[0], &ee[0], want_ll, &ll[0], &r[0], &w[0])
        return np.asarray(ll), np.asarray(r), np.asarray(w)

    def cv_terms_array(self, int order, y, eta, eta_star):
        """``(d, d')`` of the family for arrays of targets, predictors and predictors at
        the expansion point."""
        cdef double[::1] yy = np.ascontiguousarray(y, dtype=np.float64)
        cdef double[::1] ee = np.ascontiguousarray(eta, dtype=np.float64)
        cdef double[::1] es = np.ascontiguousarray(eta_star, dtype=np.float64)
        if not (yy.shape[0] == ee.shape[0] == es.shape[0]):
            raise ValueError("y, eta and eta_star must have the same length")
        cdef Py_ssize_t m = yy.shape[0]
        cdef double[::1] c0 = np.empty(m), c1 = np.empty(m), c2 = np.empty(m)
        cdef double[::1] d = np.empty(m), dp = np.empty(m)
        if m:
            with nogil:
                self.cv_consts(m, &es[0], &c0[0], &c1[0], &c2[0])
                self.cv_terms(order, m, &yy[0], &ee[0], &es[0], &c0[0], &c1[0], &c2[0],
                              &d[0], &dp[0])
        return np.asarray(d), np.asarray(dp)

    def cv_derivatives(self, int order, theta_star, theta, idx=None, eta_star=None):
        """``(d_k, d'_k = dd_k / deta_k)``: the scalar form of the residuals."""
        cdef double[::1] ts = check_theta(self, theta_star, "theta_star")
        cdef double[::1] th = check_theta(self, theta)
        cdef int64_t[::1] ix = check_indices(self, idx)
        cdef const double[::1] ec = check_cache(self, eta_star)
        cdef const double* es = NULL if ec is None else &ec[0]
        cdef Py_ssize_t m = ix.shape[0]
        cdef double[::1] d = np.empty(m), dp = np.empty(m)
        if m:
            with nogil:
                self._values(order, &ts[0], es, &th[0], &ix[0], m, &d[0], &dp[0])
        return np.asarray(d), np.asarray(dp)

    def grad_terms(self, theta, idx=None):
        """Per-datum gradients ``grad l_k(theta)``, shape (len(idx), p)."""
        ix = check_indices(self, idx)
        _, r, _ = self.link_terms_array(self.targets(ix), self.eta(theta, ix), False)
        if self.has_weight:
            r = r * np.asarray(self.weight)[ix]
        return r[:, None] * self.gather(ix)

    cdef int full_sums(self, const double* theta, double* ll, double* grad, double* hess,
                       int n_threads) noexcept nogil:
        """The fused pass over a fixed partition of the rows into slots (contiguous
        runs of PASS_CHUNK-row chunks, their number a function of n and p alone),
        each summed in row order, the slots' sums added in slot order: the result
        is bit-identical for any n_threads. At most 64 slots, fewer when their
        p x p Hessian sums would exceed 256 MB (p > 724), one at p > 2048 (passes
        without the Hessian keep 64 slots: wide models' gradients in threads)."""
        return self.sampled_sums(theta, ll, grad, hess, n_threads, 1)

    cdef int sampled_sums(self, const double* theta, double* ll, double* grad, double* hess,
                          int n_threads, Py_ssize_t hess_every, bint diag=False) noexcept nogil:
        """full_sums, the Hessian over every hess_every-th chunk of MODEL_CHUNK rows
        (which chunks: a function of n alone, so still bit-identical for any
        n_threads). With ``diag``, ``hess[:p]`` is the diagonal of the Hessian
        sum over all rows (no p x p matrix anywhere: wide data)."""
        cdef Py_ssize_t n = self.n_data, p = self.n_params
        self._count_pass()
        cdef Py_ssize_t n_chunks = (n + PASS_CHUNK - 1) // PASS_CHUNK, k, j, l
        cdef bint want_ll = ll != NULL, want_g = grad != NULL, want_h = hess != NULL
        # as many slots as fit 256 MB of their sums (the p x p Hessian's decide)
        cdef Py_ssize_t per_slot = (p if diag else p * p) if want_h else p
        cdef Py_ssize_t S = max(1, _imin(_imin(64, n_chunks), (1 << 25) // per_slot))
        cdef Py_ssize_t gp = p if want_g else 0
        cdef Py_ssize_t hp = (p if diag else p * p) if want_h else 0
        cdef double* ll_s = <double*> calloc(S, sizeof(double))
        cdef double* g_s = <double*> calloc(S * gp + 1, sizeof(double))
        cdef double* h_s = <double*> calloc(S * hp + 1, sizeof(double))
        if ll_s == NULL or g_s == NULL or h_s == NULL:
            free(ll_s)
            free(g_s)
            free(h_s)
            with gil:
                try:
                    raise MemoryError("full pass: cannot allocate the per-slot sums")
                except MemoryError:
                    return self._fail()
        if n_threads > 1 and S > 1:
            for k in prange(S, schedule="static", num_threads=n_threads):
                ll_s[k] = self.pass_range(
                    (k * n_chunks // S) * PASS_CHUNK,
                    _imin(((k + 1) * n_chunks // S) * PASS_CHUNK, n), theta, want_ll,
                    g_s + k * gp if want_g else NULL, h_s + k * hp if want_h else NULL,
                    hess_every, diag)
        else:
            for k in range(S):
                ll_s[k] = self.pass_range(
                    (k * n_chunks // S) * PASS_CHUNK,
                    _imin(((k + 1) * n_chunks // S) * PASS_CHUNK, n), theta, want_ll,
                    g_s + k * gp if want_g else NULL, h_s + k * hp if want_h else NULL,
                    hess_every, diag)
        if want_ll:
            sum_slots(S, ll_s, 1, 1, ll)
        if want_g:
            sum_slots(S, g_s, gp, p, grad)
        if want_h and diag:
            memset(hess, 0, p * sizeof(double))
            for k in range(S):
                for j in range(p):
                    hess[j] -= h_s[k * hp + j]
        elif want_h:
            sum_slot_triangles(S, h_s, hp, p, -1.0, hess)
        free(ll_s)
        free(g_s)
        free(h_s)
        return 0


cdef class CyLogistic(CyGLM):
    """Logistic regression, ``y`` in {0, 1}."""

    def __cinit__(self, *args, **kwargs):
        self.family = GLM_LOGISTIC


cdef class CyPoisson(CyGLM):
    """Poisson regression with the log link, ``y`` counts."""

    def __cinit__(self, *args, **kwargs):
        self.family = GLM_POISSON


cdef class CyGaussian(CyGLM):
    """Linear regression with Gaussian noise of known variance ``phi``."""

    def __cinit__(self, *args, **kwargs):
        self.family = GLM_GAUSSIAN
