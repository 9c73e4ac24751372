# cython: language_level=3, auto_pickle=False
# auto_pickle=False: the pickling Cython generated for these classes crashed the
# interpreter (it reads their memoryviews); pickle now raises TypeError, and the
# models pickle by rebuilding their compiled objects (models/_base.py)
"""The compiled model of linear regression with the noise's log scale sampled
(see ``_cylinear.pxd`` for the layout of ``theta`` and the raw sums).

The per-datum loops follow ``CyGLM``'s: a chunk of at most ``MODEL_CHUNK``
indices at a time, the linear predictors by the ``Rows`` methods (so dense,
float32 and CSR rows work unchanged), the terms of ``_scale_terms.pxd``, and
gradients ``dt/deta x`` accumulated by ``add_xt``, plus the sum of ``dt/dtau``
for the last entry. The constants of the terms (``tau``, ``exp(-2 tau)`` and
the residuals' coefficients) are those of the whole call.

The full-data sums are functions of tau and the raw sums at beta; with the
sufficient statistics (``set_statistics``, set by the Python model) a full
pass costs ``O(p1^2)`` and reads no data, so it is not counted in
``n_full_passes``. The pass over the rows (without statistics) splits the rows
into slots fixed by ``n`` alone, sums each in row order and adds the slots in
slot order, so its result does not depend on the number of threads.

With per-datum weights ``w_k`` (``weight=``) the log-likelihood is ``sum_k w_k
l_k``: each loop multiplies the terms and both their derivatives (in eta and
in tau) by the weights after computing them, the raw-sums pass sums ``w r^2``,
``w r x`` and ``w x x^T``, and the count ``n`` of the full-data sums is the sum
of the weights, so integer weights are exactly duplicated rows. Unweighted
models branch off before any of it and run the loops they ran before.
"""
import numpy as np
from cython.parallel cimport prange
from libc.math cimport exp
from libc.stdint cimport int64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memset
from bayes_subsample.models._checks cimport check_indices, check_theta
from bayes_subsample.models._cymodel cimport (CyModel, MODEL_CHUNK, LOGLIK, sum_slot_triangles,
                                               sum_slots)
from bayes_subsample.models._rows cimport Rows, DenseRows
from bayes_subsample.models._scale_terms cimport (
    ScaleConsts, scale_consts, scale_terms_block, HALF_LOG_2PI)

cdef enum:
    # rows per task of the threaded raw-sums pass (fixed: the partition, and so the
    # result, does not depend on the number of threads)
    PASS_CHUNK = 4096
    MAX_SLOTS = 64


cdef inline Py_ssize_t _imin(Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    return a if a < b else b


cdef void _to_likelihood_sums(double n, Py_ssize_t p1, double tau, double srr,
                              const double* srx, const double* sxx, double* ll,
                              double* grad, double* hess) noexcept nogil:
    """The log-likelihood's sums at (beta, tau) from the raw sums at beta (``sxx``
    full and symmetric; NULL outputs skipped); ``n`` the number of rows, or the
    sum of their weights (the raw sums then weighted)."""
    cdef double w = exp(-2.0 * tau)
    cdef Py_ssize_t j, l, P = p1 + 1
    if ll != NULL:
        ll[0] = -n * tau - n * HALF_LOG_2PI - 0.5 * w * srr
    if grad != NULL:
        for j in range(p1):
            grad[j] = w * srx[j]
        grad[p1] = w * srr - n
    if hess != NULL:
        for j in range(p1):
            for l in range(p1):
                hess[j * P + l] = -w * sxx[j * p1 + l]
            hess[j * P + p1] = -2.0 * w * srx[j]
            hess[p1 * P + j] = -2.0 * w * srx[j]
        hess[p1 * P + p1] = -2.0 * w * srr


cdef class CyGaussianScale(CyTermModel):
    """Compiled linear regression with Gaussian noise of scale ``sigma`` sampled,
    ``theta = (beta, log(sigma / s))``, over a :class:`Rows` object.

    Parameters
    ----------
    rows : Rows
        The design (``DenseRows(X, intercept)`` or ``CsrRows``).
    y : array-like of shape (n,)
        Targets (float64).
    log_scale : float
        ``log s``: the noise's log scale is ``log_scale + theta[-1]``.
    weight : array-like of shape (n,), optional
        Per-datum weights ``w_k >= 0``: every term ``l_k`` (and so every
        residual, derivative in eta and in tau, and curvature) is ``w_k`` times
        the unweighted one, the raw sums and the statistics are weighted sums,
        and ``n`` in the full-data sums is ``weight_sum = sum_k w_k``
        (``sample_weight``; integer weights are duplicated rows).
    """

    def __init__(self, Rows rows, y, double log_scale, weight=None):
        y = np.ascontiguousarray(y, dtype=np.float64)
        if y.shape != (rows.n_rows,):
            raise ValueError(f"y must have shape ({rows.n_rows},), got {y.shape}")
        if not np.isfinite(log_scale):
            raise ValueError(f"log_scale must be finite, got {log_scale}")
        self.rows = rows
        self.dense = isinstance(rows, DenseRows) and rows.n_features > 0
        self.y = y
        self.log_scale = log_scale
        self.n_data = rows.n_rows
        self.n_cols = rows.n_cols
        self.n_params = rows.n_cols + 1
        self.n_features = rows.n_features
        self.intercept = rows.intercept
        self.cv_cost = 1
        self.cache_width = 1
        self.has_statistics = False
        self._set_weight(weight)
        self.weight_sum = (float(np.sum(np.asarray(self.weight), dtype=np.float64))
                           if self.has_weight else <double> self.n_data)

    cdef void consts(self, int order, const double* theta, const double* theta_star,
                     ScaleConsts* k) noexcept nogil:
        cdef Py_ssize_t p1 = self.n_cols
        scale_consts(order, self.log_scale + theta[p1],
                     self.log_scale + theta_star[p1] if order >= 0 else 0.0, k)

    cdef void _weigh_terms(self, const int64_t* idx, Py_ssize_t c, double* t,
                           double* dt) noexcept nogil:
        cdef Py_ssize_t i
        cdef double wk
        for i in range(c):
            wk = self.weight[idx[i]]
            t[i] *= wk
            if dt != NULL:
                dt[2 * i] *= wk
                dt[2 * i + 1] *= wk

    # ---- the loops over chunks of indices ------------------------------------------------
    cdef const double* _setup(self, int order, const double* theta_star,
                              const double* eta_star, const int64_t* idx, Py_ssize_t c,
                              double* yb, double* es) noexcept nogil:
        """The chunk's targets to ``yb`` and, for residuals, its eta* to ``es`` (from
        the cache ``eta_star`` if given, else ``x . theta_star``); returns ``es``, or
        NULL for the log-likelihood (``order < 0``)."""
        cdef Py_ssize_t i
        for i in range(c):
            yb[i] = self.y[idx[i]]
        if order < 0:
            return NULL
        if eta_star != NULL:
            for i in range(c):
                es[i] = eta_star[idx[i]]
        else:
            self.rows.dot(idx, c, theta_star, es)
        return es

    cdef int _values(self, int order, const double* theta_star, const double* eta_star,
                     const double* theta, const int64_t* idx, Py_ssize_t m, double* t,
                     double* dt) noexcept nogil:
        cdef ScaleConsts k
        cdef double yb[MODEL_CHUNK]
        cdef double eta[MODEL_CHUNK]
        cdef double es[MODEL_CHUNK]
        cdef Py_ssize_t s = 0, c, i
        self.consts(order, theta, theta_star, &k)
        while s < m:
            c = _imin(MODEL_CHUNK, m - s)
            self.rows.dot(idx + s, c, theta, eta)
            scale_terms_block(&k, c, yb, eta,
                              self._setup(order, theta_star, eta_star, idx + s, c, yb, es),
                              t + s, NULL if dt == NULL else dt + 2 * s)
            if self.has_weight:
                self._weigh_terms(idx + s, c, t + s, NULL if dt == NULL else dt + 2 * s)
            s += c
        return 0

    cdef void _term_pair(self, int order, const double* theta_star, const double* eta_star,
                         const double* theta, const double* theta_new, const int64_t* idx,
                         Py_ssize_t c, double* t, double* t_new) noexcept nogil:
        cdef ScaleConsts k, k_new
        cdef double yb[MODEL_CHUNK]
        cdef double eta[MODEL_CHUNK]
        cdef double eta_new[MODEL_CHUNK]
        cdef double es[MODEL_CHUNK]
        cdef const double* esc
        self.consts(order, theta, theta_star, &k)
        self.consts(order, theta_new, theta_star, &k_new)
        self.rows.dot2(idx, c, theta, theta_new, eta, eta_new)
        esc = self._setup(order, theta_star, eta_star, idx, c, yb, es)
        scale_terms_block(&k, c, yb, eta, esc, t, NULL)
        scale_terms_block(&k_new, c, yb, eta_new, esc, t_new, NULL)

    cdef int term_grad_sum(self, int order, const double* theta_star, const double* eta_star,
                           const double* theta, const int64_t* idx, Py_ssize_t m,
                           double* grad, double* total) noexcept nogil:
        cdef ScaleConsts k
        cdef double yb[MODEL_CHUNK]
        cdef double eta[MODEL_CHUNK]
        cdef double es[MODEL_CHUNK]
        cdef double t[MODEL_CHUNK]
        cdef double dt[2 * MODEL_CHUNK]
        cdef double r[MODEL_CHUNK]
        cdef Py_ssize_t s = 0, c, i, p1 = self.n_cols
        cdef double tsum = 0.0, gtau = 0.0, bsum
        cdef const double* esc
        memset(grad, 0, self.n_params * sizeof(double))
        self.consts(order, theta, theta_star, &k)
        while s < m:
            c = _imin(MODEL_CHUNK, m - s)
            self.rows.dot(idx + s, c, theta, eta)
            esc = self._setup(order, theta_star, eta_star, idx + s, c, yb, es)
            if self.has_weight:
                scale_terms_block(&k, c, yb, eta, esc, t, dt)
                self._weigh_terms(idx + s, c, t, dt)
                bsum = 0.0
                for i in range(c):
                    bsum += t[i]
                tsum += bsum
            else:
                tsum += scale_terms_block(&k, c, yb, eta, esc, t, dt)
            for i in range(c):
                r[i] = dt[2 * i]
                gtau += dt[2 * i + 1]
            self.rows.add_xt(idx + s, c, r, grad)
            s += c
        grad[p1] = gtau
        if total != NULL:
            total[0] = tsum
        return 0

    # ---- the full-data sums -------------------------------------------------------------------
    cdef double _range_sums(self, Py_ssize_t start, Py_ssize_t stop, const double* beta,
                            double* srx, double* sxx) noexcept nogil:
        """Rows ``[start, stop)``: returns ``sum r^2``; ``srx += sum r x``, the lower
        triangle of ``sxx`` (if not NULL) ``+= sum x x^T`` (weighted models: ``sum w
        r^2``, ``sum w r x``, ``sum w x x^T``)."""
        cdef double eta[MODEL_CHUNK]
        cdef double ones[MODEL_CHUNK]
        cdef Py_ssize_t s = start, c, i
        cdef double srr = 0.0, r, wr
        if self.has_weight:
            while s < stop:
                c = _imin(MODEL_CHUNK, stop - s)
                self.rows.dot_range(s, s + c, beta, eta)
                for i in range(c):
                    r = self.y[s + i] - eta[i]
                    wr = self.weight[s + i] * r
                    eta[i] = wr
                    srr += wr * r
                self.rows.add_xt_range(s, s + c, eta, srx)
                if sxx != NULL:
                    self.rows.add_xwx_range(s, s + c, &self.weight[s], sxx)
                s += c
            return srr
        for i in range(MODEL_CHUNK):
            ones[i] = 1.0
        while s < stop:
            c = _imin(MODEL_CHUNK, stop - s)
            self.rows.dot_range(s, s + c, beta, eta)
            for i in range(c):
                r = self.y[s + i] - eta[i]
                eta[i] = r
                srr += r * r
            self.rows.add_xt_range(s, s + c, eta, srx)
            if sxx != NULL:
                self.rows.add_xwx_range(s, s + c, ones, sxx)
            s += c
        return srr

    cdef int raw_sums(self, const double* beta, double* srr, double* srx, double* sxx,
                      int n_threads) noexcept nogil:
        cdef Py_ssize_t n = self.n_data, p1 = self.n_cols, j, l, kk
        cdef Py_ssize_t n_chunks, S, hp
        cdef double* d
        cdef double* srr_s
        cdef double* g_s
        cdef double* h_s
        cdef double q = 0.0, v
        if self.has_statistics:
            d = <double*> malloc(2 * p1 * sizeof(double))
            if d == NULL:
                return self._nomem("raw_sums")
            for j in range(p1):
                d[j] = beta[j] - self.beta0[j]
            # S_xx delta, then the raw sums' exact update
            for j in range(p1):
                v = 0.0
                for l in range(p1):
                    v += self.sxx[j, l] * d[l]
                d[p1 + j] = v
            for j in range(p1):
                srx[j] = self.srx0[j] - d[p1 + j]
                q += d[j] * (2.0 * self.srx0[j] - d[p1 + j])
            srr[0] = max(0.0, self.srr0 - q)
            if sxx != NULL:
                for j in range(p1):
                    for l in range(p1):
                        sxx[j * p1 + l] = self.sxx[j, l]
            free(d)
            return 0
        self._count_pass()
        n_chunks = (n + PASS_CHUNK - 1) // PASS_CHUNK
        hp = p1 * p1 if sxx != NULL else 0
        S = max(1, _imin(_imin(MAX_SLOTS, n_chunks), (1 << 25) // (p1 + hp)))
        srr_s = <double*> calloc(S, sizeof(double))
        g_s = <double*> calloc(S * p1, sizeof(double))
        h_s = <double*> calloc(S * hp + 1, sizeof(double))
        if srr_s == NULL or g_s == NULL or h_s == NULL:
            free(srr_s)
            free(g_s)
            free(h_s)
            return self._nomem("raw_sums")
        if n_threads > 1 and S > 1:
            for kk in prange(S, schedule="static", num_threads=n_threads):
                srr_s[kk] = self._range_sums(
                    (kk * n_chunks // S) * PASS_CHUNK,
                    _imin(((kk + 1) * n_chunks // S) * PASS_CHUNK, n), beta, g_s + kk * p1,
                    h_s + kk * hp if hp else NULL)
        else:
            for kk in range(S):
                srr_s[kk] = self._range_sums(
                    (kk * n_chunks // S) * PASS_CHUNK,
                    _imin(((kk + 1) * n_chunks // S) * PASS_CHUNK, n), beta, g_s + kk * p1,
                    h_s + kk * hp if hp else NULL)
        sum_slots(S, srr_s, 1, 1, srr)
        sum_slots(S, g_s, p1, p1, srx)
        if hp:
            sum_slot_triangles(S, h_s, hp, p1, 1.0, sxx)
        free(srr_s)
        free(g_s)
        free(h_s)
        return 0

    cdef int full_sums(self, const double* theta, double* ll, double* grad, double* hess,
                       int n_threads) noexcept nogil:
        """The sums of the log-likelihood (and of its gradient and Hessian) from the
        raw sums at beta: ``O(p1^2)`` with the statistics, else one pass over the
        rows (bit-identical for any n_threads)."""
        cdef Py_ssize_t p1 = self.n_cols
        cdef double srr = 0.0
        cdef double* srx = <double*> malloc(p1 * sizeof(double))
        cdef double* sxx = NULL
        cdef int rc
        if srx == NULL:
            return self._nomem("full_sums")
        if hess != NULL:
            sxx = <double*> malloc(p1 * p1 * sizeof(double))
            if sxx == NULL:
                free(srx)
                return self._nomem("full_sums")
        rc = self.raw_sums(theta, &srr, srx, sxx, n_threads)
        if rc == 0:
            _to_likelihood_sums(self.weight_sum, p1, self.log_scale + theta[p1], srr, srx, sxx,
                                ll, grad, hess)
        free(srx)
        free(sxx)
        return rc

    # ---- Python-callable extras ----------------------------------------------------------------
    def set_statistics(self, beta0, double srr0, srx0, sxx):
        """Use the sufficient statistics ``S_rr``, ``S_rx`` at ``beta0`` and ``S_xx``
        (the raw sums of ``_cylinear.pxd``: weighted sums for a weighted model) for
        every later full-data sum; ``None`` for all four: pass over the rows
        instead."""
        if beta0 is None:
            self.has_statistics = False
            self.beta0 = self.srx0 = None
            self.sxx = None
            return
        p1 = self.n_cols
        b = np.ascontiguousarray(beta0, dtype=np.float64).copy()
        g = np.ascontiguousarray(srx0, dtype=np.float64).copy()
        G = np.ascontiguousarray(sxx, dtype=np.float64).copy()
        if b.shape != (p1,) or g.shape != (p1,) or G.shape != (p1, p1):
            raise ValueError(f"the statistics must have shapes ({p1},), ({p1},), ({p1}, {p1})")
        if not (np.isfinite(srr0) and srr0 >= 0 and np.isfinite(b).all()
                and np.isfinite(g).all() and np.isfinite(G).all()):
            raise ValueError("the statistics must be finite (and S_rr >= 0)")
        self.beta0, self.srx0, self.sxx, self.srr0 = b, g, 0.5 * (G + G.T), srr0
        self.has_statistics = True

    def statistics(self):
        """``(beta0, S_rr0, S_rx0, S_xx)`` (copies), or None without statistics."""
        if not self.has_statistics:
            return None
        return (np.asarray(self.beta0).copy(), self.srr0, np.asarray(self.srx0).copy(),
                np.asarray(self.sxx).copy())

    def raw_sums_at(self, beta, bint with_sxx=False, int n_threads=1):
        """``(S_rr, S_rx, S_xx or None)`` at ``beta`` (p1 coefficients; weighted sums
        for a weighted model): from the statistics if set, else one pass over the
        rows (counted)."""
        cdef double[::1] b = np.ascontiguousarray(beta, dtype=np.float64)
        if b.shape[0] != self.n_cols:
            raise ValueError(f"beta must have shape ({self.n_cols},), got ({b.shape[0]},)")
        cdef Py_ssize_t p1 = self.n_cols
        cdef double srr = 0.0
        cdef double[::1] srx = np.zeros(p1)
        cdef double[:, ::1] sxx = np.zeros((p1, p1)) if with_sxx else None
        cdef int rc
        with nogil:
            rc = self.raw_sums(&b[0], &srr, &srx[0], &sxx[0, 0] if with_sxx else NULL,
                               n_threads)
        if rc:
            self.raise_error()
        return srr, np.asarray(srx), (np.asarray(sxx) if with_sxx else None)

    def cv_cache(self, theta_star):
        """The linear predictors at ``theta_star`` for every datum (8 bytes per
        datum): the residual methods then skip one row dot product per datum."""
        return self.eta(theta_star)

    def eta(self, theta, idx=None):
        """Linear predictors ``x_k . beta`` (intercept included) for ``k`` in ``idx``."""
        cdef double[::1] th = check_theta(self, theta)
        cdef int64_t[::1] ix = check_indices(self, idx)
        cdef double[::1] out = np.empty(ix.shape[0])
        if ix.shape[0]:
            with nogil:
                self.rows.dot(&ix[0], ix.shape[0], &th[0], &out[0])
        return np.asarray(out)

    def targets(self, idx=None):
        """``y_k`` for ``k`` in ``idx`` (a copy)."""
        return np.asarray(self.y)[check_indices(self, idx)]

    def term_derivatives(self, int order, theta_star, theta, idx=None, eta_star=None):
        """``(t, dt)``: the terms ``t_k`` (log-likelihood for a negative order, else
        the residuals of that order at ``theta_star``) and ``dt[i] = (dt/deta,
        dt/dtau)`` of ``idx[i]``, shape (m, 2), all times the datum's weight
        (weighted models). The gradient of ``t_k`` is ``(dt/deta x_k, dt/dtau)``."""
        return self._term_derivatives(order, theta_star, theta, idx, eta_star, 2)

    def grad_terms(self, theta, idx=None):
        """Per-datum gradients ``grad l_k(theta)``, shape (m, p1 + 1)."""
        ix = check_indices(self, idx)
        _, dt = self.term_derivatives(LOGLIK, None, theta, ix)
        return np.column_stack([dt[:, :1] * self.gather(ix), dt[:, 1]])
