# cython: language_level=3
"""The compiled model contract (see ``_cymodel.pxd``): ``CyModel``, the
per-datum terms, full-data sums and control-variate residuals every kernel
calls, with their Python-callable forms, and ``CyTermModel``, the models that
implement them as loops by Taylor order. The models themselves are
subclasses in their own modules: the GLMs (``_cyglm.pyx``), multinomial
regression (``_cymultinomial.pyx``), the noise-scale linear regression
(``_cylinear.pyx``), the MLP (``_cymlp.pyx``) and user callbacks
(``_callback.pyx``).

Conventions: ``theta`` is float64 of length ``p = n_features + intercept``
with the intercept last; indices are int64; every accumulation is in double
and runs over the data in index order, so results do not depend on how a
caller splits its work into chunks or threads.
"""
import threading

import numpy as np
from libc.stdint cimport int64_t
from bayes_subsample.models._checks cimport check_cache, check_indices, check_theta, gather_rows


cdef class CyModel:
    """Abstract compiled model; see ``CyGLM`` and ``CyCallbackModel``.

    The ``*_terms`` / ``*_sum`` methods are the Python-callable forms of the
    ``nogil`` methods that kernels call (for tests and the NumPy-level
    :class:`~bayes_subsample.models.Model` API).
    """

    def __cinit__(self, *args, **kwargs):
        self._errors = {}
        self.cv_cost = 2
        self.cache_width = 1

    cdef int loglik(self, const double* theta, const int64_t* idx, Py_ssize_t m,
                    double* out) noexcept nogil:
        return -1

    cdef int loglik_diff(self, const double* theta, const double* theta_new,
                         const int64_t* idx, Py_ssize_t m, double* out) noexcept nogil:
        return -1

    cdef int grad_sum(self, const double* theta, const int64_t* idx, Py_ssize_t m,
                      double* grad, double* ll) noexcept nogil:
        return -1

    cdef int cv_residual_diff(self, int order, const double* theta_star,
                              const double* eta_star, const double* theta,
                              const double* theta_new, const int64_t* idx, Py_ssize_t m,
                              double* out) noexcept nogil:
        return -1

    cdef int cv_grad_sum(self, int order, const double* theta_star, const double* eta_star,
                         const double* theta, const int64_t* idx, Py_ssize_t m,
                         double* grad, double* dsum) noexcept nogil:
        return -1

    cdef int cv_residuals(self, int order, const double* theta_star, const double* eta_star,
                          const double* theta, const int64_t* idx, Py_ssize_t m,
                          double* d) noexcept nogil:
        return -1

    cdef int full_sums(self, const double* theta, double* ll, double* grad, double* hess,
                       int n_threads) noexcept nogil:
        return -1

    cdef int term_values(self, int order, const double* theta_star, const double* eta_star,
                         const double* theta, const int64_t* idx, Py_ssize_t m,
                         double* out) noexcept nogil:
        if order < 0:
            return self.loglik(theta, idx, m, out)
        return self.cv_residuals(order, theta_star, eta_star, theta, idx, m, out)

    cdef int term_diffs(self, int order, const double* theta_star, const double* eta_star,
                        const double* theta, const double* theta_new, const int64_t* idx,
                        Py_ssize_t m, double* out) noexcept nogil:
        if order < 0:
            return self.loglik_diff(theta, theta_new, idx, m, out)
        return self.cv_residual_diff(order, theta_star, eta_star, theta, theta_new, idx, m, out)

    cdef int term_grad_sum(self, int order, const double* theta_star, const double* eta_star,
                           const double* theta, const int64_t* idx, Py_ssize_t m,
                           double* grad, double* total) noexcept nogil:
        if order < 0:
            return self.grad_sum(theta, idx, m, grad, total)
        return self.cv_grad_sum(order, theta_star, eta_star, theta, idx, m, grad, total)

    cdef _set_weight(self, weight):
        """Store per-datum weights (``None``: unweighted): a float64 array of
        shape (n_data,), finite and >= 0."""
        if weight is None:
            self.has_weight = False
            return
        weight = np.ascontiguousarray(weight, dtype=np.float64)
        if weight.shape != (self.n_data,):
            raise ValueError(f"weight must have shape ({self.n_data},), got {weight.shape}")
        if not np.isfinite(weight).all() or (weight < 0).any():
            raise ValueError("weights must be finite and >= 0")
        self.weight = weight
        self.has_weight = True

    @property
    def weights(self):
        """The per-datum weights (a read-only view), or None if unweighted."""
        if not self.has_weight:
            return None
        w = np.asarray(self.weight)
        w.flags.writeable = False
        return w

    cdef int _fail(self) noexcept:
        """Keep the exception being handled for this thread; returns -1."""
        import sys
        self._errors[threading.get_ident()] = sys.exc_info()[1]
        return -1

    cdef int _nomem(self, const char* where) noexcept with gil:
        try:
            raise MemoryError(f"{type(self).__name__}.{where.decode()}: cannot allocate "
                              "scratch buffers")
        except MemoryError:
            return self._fail()

    def cv_cache(self, theta_star):
        """Per-datum values at an expansion point that speed up the residual methods
        when passed back as ``eta_star`` (GLMs: the linear predictors at theta_star,
        one pass over the data); ``None`` when the model has none."""
        return None

    def raise_error(self):
        """Re-raise the exception a callback stored for this thread (if any)."""
        err = self._errors.pop(threading.get_ident(), None)
        if err is not None:
            raise err
        raise RuntimeError(f"{type(self).__name__}: a kernel method failed")

    @property
    def n_full_passes(self):
        """Full-data passes (``full_sums`` calls) this object has made."""
        return self._n_passes

    def note_passes(self, int64_t k):
        """Count ``k`` full passes made outside ``full_sums`` (e.g. residuals of
        every row at a few points)."""
        _atomic_add(&self._n_passes, k)

    # ---- Python-callable forms ---------------------------------------------------------
    def full_pass(self, theta, bint want_ll=True, bint gradient=True, bint hessian=False,
                  int n_threads=1):
        """One read of the data: ``(sum l_k, sum grad l_k, sum Hessian l_k)``.

        Entries not asked for are ``None``; the result does not depend on
        ``n_threads``.
        """
        cdef double[::1] th = check_theta(self, theta)
        cdef Py_ssize_t p = self.n_params
        cdef double ll = 0.0
        cdef double[::1] grad = np.zeros(p) if gradient else None
        cdef double[:, ::1] hess = np.zeros((p, p)) if hessian else None
        cdef int rc
        with nogil:
            rc = self.full_sums(&th[0], &ll if want_ll else NULL,
                                &grad[0] if gradient else NULL,
                                &hess[0, 0] if hessian else NULL, n_threads)
        if rc:
            self.raise_error()
        return ((ll if want_ll else None), (np.asarray(grad) if gradient else None),
                (np.asarray(hess) if hessian else None))

    def loglik_terms(self, theta, idx=None):
        """``l_k(theta)`` for ``k`` in ``idx`` (all data if None)."""
        return self._evaluate(LOGLIK, None, theta, None, idx, None)

    def loglik_diff_terms(self, theta, theta_new, idx=None):
        """``l_k(theta_new) - l_k(theta)`` for ``k`` in ``idx``."""
        return self._evaluate(LOGLIK, None, theta, theta_new, idx, None)

    def grad_sum_terms(self, theta, idx=None):
        """``(sum_k grad l_k(theta), sum_k l_k(theta))`` over ``idx``."""
        return self._evaluate_grad_sum(LOGLIK, None, theta, idx, None)

    def cv_residual_terms(self, int order, theta_star, theta, idx=None, eta_star=None):
        """Control-variate residuals ``d_k(theta)`` (Taylor order 0/1/2 at theta_star)."""
        return self._evaluate(order, theta_star, theta, None, idx, eta_star)

    def cv_residual_diff_terms(self, int order, theta_star, theta, theta_new, idx=None,
                               eta_star=None):
        """``d_k(theta_new) - d_k(theta)`` for ``k`` in ``idx``."""
        return self._evaluate(order, theta_star, theta, theta_new, idx, eta_star)

    def cv_grad_sum_terms(self, int order, theta_star, theta, idx=None, eta_star=None):
        """``(sum_k grad d_k(theta), sum_k d_k(theta))`` over ``idx``."""
        return self._evaluate_grad_sum(order, theta_star, theta, idx, eta_star)

    def _evaluate(self, int order, theta_star, theta, theta_new, idx, eta_star):
        """``t_k(theta)``, or ``t_k(theta_new) - t_k(theta)`` if ``theta_new`` is given,
        for ``k`` in ``idx`` (``t`` by ``order``, see ``term_values``)."""
        cdef double[::1] ts = None if order < 0 else check_theta(self, theta_star, "theta_star")
        cdef double[::1] th = check_theta(self, theta)
        cdef double[::1] th2 = (None if theta_new is None
                                else check_theta(self, theta_new, "theta_new"))
        cdef int64_t[::1] ix = check_indices(self, idx)
        cdef const double[::1] ec = check_cache(self, eta_star)
        cdef const double* es = NULL if ec is None else &ec[0]
        cdef const double* tsp = NULL if ts is None else &ts[0]
        cdef double[::1] out = np.empty(ix.shape[0])
        cdef int rc = 0
        if ix.shape[0] and th2 is None:
            with nogil:
                rc = self.term_values(order, tsp, es, &th[0], &ix[0], ix.shape[0], &out[0])
        elif ix.shape[0]:
            with nogil:
                rc = self.term_diffs(order, tsp, es, &th[0], &th2[0], &ix[0], ix.shape[0],
                                     &out[0])
        if rc:
            self.raise_error()
        return np.asarray(out)

    def _evaluate_grad_sum(self, int order, theta_star, theta, idx, eta_star):
        """``(sum_k grad t_k(theta), sum_k t_k(theta))`` over ``idx`` (``t`` by
        ``order``, see ``term_values``)."""
        cdef double[::1] ts = None if order < 0 else check_theta(self, theta_star, "theta_star")
        cdef double[::1] th = check_theta(self, theta)
        cdef int64_t[::1] ix = check_indices(self, idx)
        cdef const double[::1] ec = check_cache(self, eta_star)
        cdef const double* es = NULL if ec is None else &ec[0]
        cdef const double* tsp = NULL if ts is None else &ts[0]
        cdef double[::1] g = np.zeros(self.n_params)
        cdef double total = 0.0
        cdef int rc = 0
        if ix.shape[0]:
            with nogil:
                rc = self.term_grad_sum(order, tsp, es, &th[0], &ix[0], ix.shape[0], &g[0],
                                        &total)
        if rc:
            self.raise_error()
        return np.asarray(g), total


cdef class CyTermModel(CyModel):
    """A compiled model whose ``term_values`` / ``term_diffs`` /
    ``term_grad_sum`` loops take the Taylor order (``LOGLIK`` for the
    log-likelihood): the kernel methods are those loops at a fixed order
    (abstract: the GLMs, the multinomial and the Gaussian-scale model). Each
    writes ``_values`` (the terms and their derivatives), ``term_diffs``,
    ``term_grad_sum`` and ``copy_targets``; ``term_values`` is ``_values``
    without the derivatives, and ``gather_rows`` copies a subsample's rows
    (from ``rows``, which every one has) and targets."""

    cdef int _values(self, int order, const double* theta_star, const double* eta_star,
                     const double* theta, const int64_t* idx, Py_ssize_t m, double* t,
                     double* dt) noexcept nogil:
        return -1

    cdef int term_values(self, int order, const double* theta_star, const double* eta_star,
                         const double* theta, const int64_t* idx, Py_ssize_t m,
                         double* out) noexcept nogil:
        return self._values(order, theta_star, eta_star, theta, idx, m, out, NULL)

    cdef void _term_pair(self, int order, const double* theta_star, const double* eta_star,
                         const double* theta, const double* theta_new, const int64_t* idx,
                         Py_ssize_t c, double* t, double* t_new) noexcept nogil:
        pass

    cdef int term_diffs(self, int order, const double* theta_star, const double* eta_star,
                        const double* theta, const double* theta_new, const int64_t* idx,
                        Py_ssize_t m, double* out) noexcept nogil:
        cdef double t[MODEL_CHUNK]
        cdef Py_ssize_t s = 0, c
        while s < m:
            c = MODEL_CHUNK if m - s > MODEL_CHUNK else m - s
            self._term_pair(order, theta_star, eta_star, theta, theta_new, idx + s, c, t,
                            out + s)
            self.weigh_diffs(idx + s, c, out + s, t)
            s += c
        return 0

    cdef int loglik(self, const double* theta, const int64_t* idx, Py_ssize_t m,
                    double* out) noexcept nogil:
        return self.term_values(LOGLIK, NULL, NULL, theta, idx, m, out)

    cdef int cv_residuals(self, int order, const double* theta_star, const double* eta_star,
                          const double* theta, const int64_t* idx, Py_ssize_t m,
                          double* d) noexcept nogil:
        return self.term_values(order, theta_star, eta_star, theta, idx, m, d)

    cdef int loglik_diff(self, const double* theta, const double* theta_new,
                         const int64_t* idx, Py_ssize_t m, double* out) noexcept nogil:
        return self.term_diffs(LOGLIK, NULL, NULL, theta, theta_new, idx, m, out)

    cdef int cv_residual_diff(self, int order, const double* theta_star,
                              const double* eta_star, const double* theta,
                              const double* theta_new, const int64_t* idx, Py_ssize_t m,
                              double* out) noexcept nogil:
        return self.term_diffs(order, theta_star, eta_star, theta, theta_new, idx, m, out)

    cdef int grad_sum(self, const double* theta, const int64_t* idx, Py_ssize_t m,
                      double* grad, double* ll) noexcept nogil:
        return self.term_grad_sum(LOGLIK, NULL, NULL, theta, idx, m, grad, ll)

    cdef int cv_grad_sum(self, int order, const double* theta_star, const double* eta_star,
                         const double* theta, const int64_t* idx, Py_ssize_t m,
                         double* grad, double* dsum) noexcept nogil:
        return self.term_grad_sum(order, theta_star, eta_star, theta, idx, m, grad, dsum)

    cdef void copy_targets(self, const int64_t* idx, Py_ssize_t m, double* y) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(m):
            y[i] = self.y[idx[i]]

    cdef void gather_rows(self, const int64_t* idx, Py_ssize_t m, double* X,
                          double* y) noexcept nogil:
        self.rows.gather(idx, m, X)
        self.copy_targets(idx, m, y)

    def gather(self, idx):
        """Rows ``x_k`` for ``k`` in ``idx`` as float64 (intercept column included)."""
        return gather_rows(self.rows, self, idx, self.rows.n_cols)

    def _term_derivatives(self, int order, theta_star, theta, idx, eta_star,
                          Py_ssize_t width):
        """``(t, dt)`` of ``_values`` for the subclasses' ``term_derivatives``: ``dt``
        of shape (m, width), the derivatives of each datum's term."""
        cdef double[::1] ts = None if order < 0 else check_theta(self, theta_star, "theta_star")
        cdef double[::1] th = check_theta(self, theta)
        cdef int64_t[::1] ix = check_indices(self, idx)
        cdef double[::1] es = check_cache(self, eta_star) if order >= 0 else None
        cdef Py_ssize_t m = ix.shape[0]
        cdef double[::1] t = np.empty(m)
        cdef double[:, ::1] dt = np.empty((m, width))
        cdef int rc = 0
        if m:
            with nogil:
                rc = self._values(order, NULL if ts is None else &ts[0],
                                  NULL if es is None else &es[0], &th[0], &ix[0], m,
                                  &t[0], &dt[0, 0])
        if rc:
            self.raise_error()
        return np.asarray(t), np.asarray(dt)
