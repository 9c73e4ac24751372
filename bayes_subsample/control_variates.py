"""Taylor-expansion control variates around a reference point theta*
(:ref:`algo-building-blocks`).

``q_k(theta)`` is the order-0/1/2 Taylor expansion of ``l_k`` at ``theta*``.
One full pass at ``theta*`` precomputes ``L* = sum l_k(theta*)``,
``A = sum grad l_k(theta*)`` and ``B = sum Hessian l_k(theta*)`` so that
``Q(theta) = sum_k q_k(theta)`` costs O(d^2); a subsample then only needs the
residuals ``d_k = l_k - q_k``, which the model computes
(:meth:`~bayes_subsample.models.Model.cv_residual_terms`; the compiled GLMs
directly as a Taylor remainder, accurate for ``theta -> theta*``).
"""
from __future__ import annotations

import numpy as np

from .models._base import python_terms, taylor_residuals

__all__ = ["TaylorControlVariate", "TaylorRows", "difference_estimate", "perturbed_estimate",
           "row_table_fits"]

#: the most memory a table of every row's Taylor constants at theta* takes
#: (``TaylorRows``; beyond it, the constants of the rows asked are computed)
ROW_TABLE_BYTES = 1 << 26
#: rows per call of the model's functions while the table is built
TABLE_CHUNK = 8192


def row_table_fits(model, order):
    """Whether the Taylor constants of order ``order`` of every row of ``model``
    fit in ``ROW_TABLE_BYTES``: ``1 + p + p^2`` floats per row at order 2."""
    p = model.n_params
    per_row = 1 + (p if order >= 1 else 0) + (p * p if order == 2 else 0)
    return 8 * per_row * model.n_data <= ROW_TABLE_BYTES


class TaylorRows:
    """The Taylor constants of a Python model's rows at ``theta_star``
    (:meth:`~bayes_subsample.models.Model.taylor_terms`: ``l_k(theta*)``, their
    gradients at order 1 and Hessians at order 2), for the subsampled
    potential of HMC-ECS on user models.

    With ``table=True`` every row's constants are computed once, in chunks, and
    kept (shared by the chains, read only): a pass of ``loglik`` and one of
    ``grad`` and, at order 2, one of ``hess`` or ``2 p`` of ``grad`` (central
    differences), counted in :attr:`n_evals` and the model's passes. Else
    each call computes the constants of the rows asked for.

    Parameters
    ----------
    model : Model
    theta_star : ndarray (p,)
    order : {0, 1, 2}
    table : bool, default=False
    """

    def __init__(self, model, theta_star, order, table=False):
        self.model = model
        self.theta_star = np.asarray(theta_star, dtype=np.float64).copy()
        self.order = int(order)
        self.table = None
        self.n_evals = 0
        if table:
            n, p = model.n_data, model.n_params
            l = np.empty(n)
            g = np.empty((n, p)) if order >= 1 else None
            H = np.empty((n, p, p)) if order == 2 else None
            for start in range(0, n, TABLE_CHUNK):
                idx = np.arange(start, min(start + TABLE_CHUNK, n), dtype=np.int64)
                tl, tg, tH = model.taylor_terms(self.theta_star, idx, order)
                l[idx] = tl
                if g is not None:
                    g[idx] = tg
                if H is not None:
                    H[idx] = tH
            passes = 1 + (order >= 1) + (
                (2 * p if model.numerical_hess_terms else 1) if order == 2 else 0)
            model.count_passes(passes)
            self.n_evals = passes * n
            self.table = (l, g, H)

    def __call__(self, idx):
        """``(l0 (m,), g0 (m, p) or None, H0 (m, p, p) or None)`` of the rows ``idx``."""
        if self.table is None:
            return self.model.taylor_terms(self.theta_star, idx, self.order)
        return tuple(None if a is None else a[idx] for a in self.table)


def difference_estimate(n, d):
    """Subsample part of the difference estimator from residuals ``d`` (m,):
    ``(n mean(d), sigma2_hat = n^2/m^2 sum (d_i - mean d)^2, mean d)``."""
    mm = d.shape[0]
    dbar = float(d.mean())
    sigma2 = (n / mm) ** 2 * float(np.sum((d - dbar) ** 2))
    return n * dbar, sigma2, dbar


def perturbed_estimate(Q, grad_Q, n, d, grad_d):
    """The perturbed log-likelihood estimate ``lambda_hat = ell_hat - sigma2_hat/2``
    and its gradient from ``Q(theta)``, ``grad Q(theta)`` and the residuals of a
    subsample (``d`` (m,), ``grad_d`` (m, p)).

    Returns ``(lambda_hat, grad lambda_hat, ell_hat, sigma2_hat)`` with
    ``grad = grad Q + sum_i c_i grad d_i``, ``c_i = n/m - n^2/m^2 (d_i - mean d)``.
    """
    mm = d.shape[0]
    nd, sigma2, dbar = difference_estimate(n, d)
    c = n / mm - (n / mm) ** 2 * (d - dbar)
    est = Q + nd
    return est - 0.5 * sigma2, grad_Q + c @ grad_d, est, sigma2


class TaylorControlVariate:
    """Control variates ``q_k`` of a model around ``theta_star``.

    Parameters
    ----------
    model : Model
        The model (a compiled :class:`~bayes_subsample.models.GLM` or any
        :class:`~bayes_subsample.models.Model`).
    theta_star : array-like of shape (n_params,)
        Expansion point (ideally near the posterior mode).
    order : {0, 1, 2}, default=2
        Taylor order. Order 2 needs per-datum Hessians: the GLMs' are
        scalars times ``x_k x_k^T``; other models give them
        (:class:`~bayes_subsample.models.FunctionModel`'s ``hess``) or take
        central differences of their per-datum gradients
        (:meth:`~bayes_subsample.models.Model.hess_terms`).
    sums : tuple ``(loglik, gradient, hessian)``, optional
        Full-data sums at ``theta_star`` already computed by the caller (one
        ``model.full_pass(theta_star, hessian=True)``); skips the pass here.

    Attributes
    ----------
    L_star, A, B : float, ndarray (p,), ndarray (p, p)
        Full-data sums at ``theta_star`` (``B`` is zero below order 2).
    cache : ndarray (n,) or None
        Per-datum values at ``theta_star`` that speed up residuals (the GLMs'
        linear predictors), after :meth:`build_cache`.
    n_evals : int
        Per-datum evaluations spent building it (``n`` for its full pass, 0
        when ``sums`` were given, plus ``n`` for the cache).

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample.models import LogisticRegressionModel
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(1000, 3)); y = (rng.random(1000) < 0.5).astype(float)
    >>> model = LogisticRegressionModel(X, y)
    >>> cv = TaylorControlVariate(model, np.zeros(4), order=2)
    >>> ell_hat, sigma2_hat = cv.estimate(np.full(4, 0.01), rng.integers(0, 1000, 100))
    """

    def __init__(self, model, theta_star, order=2, *, sums=None):
        if order not in (0, 1, 2):
            raise ValueError(f"order must be 0, 1 or 2, got {order!r}")
        self.model = model
        self.order = int(order)
        self.theta_star = model.check_theta(theta_star).copy()
        self.n_data = model.n_data
        p = model.n_params
        if sums is None:
            ll, grad, hess = model.full_pass(self.theta_star, gradient=order >= 1,
                                             hessian=order == 2)
            self.n_evals = self.n_data
        else:
            ll, grad, hess = sums
            self.n_evals = 0
        self.L_star = float(ll)
        self.A = np.asarray(grad, dtype=np.float64) if order >= 1 else np.zeros(p)
        # the p x p Hessian sum only at order 2 (wide models never hold one)
        self._B = np.ascontiguousarray(hess, dtype=np.float64) if order == 2 else None
        if not (np.isfinite(self.L_star) and np.isfinite(self.A).all()
                and (self._B is None or np.isfinite(self._B).all())):
            raise model.overflow_error("at the control variates' centre theta*", self.theta_star)
        self.cache = None
        #: Python models: the rows' Taylor constants at theta* (a ``TaylorRows``,
        #: set by the sampler that keeps them; None: computed when asked)
        self.taylor_rows = None

    @property
    def B(self):
        """The full-data Hessian sum at ``theta*`` (order 2; zeros below, made
        on first use)."""
        if self._B is None:
            p = self.theta_star.shape[0]
            self._B = np.zeros((p, p))
        return self._B

    def reference(self):
        """``(theta_star, L_star, A, B)`` for a compiled potential's
        ``set_reference`` (``B`` None below order 2: no ``p x p`` matrix)."""
        return (self.theta_star, self.L_star, self.A,
                self._B if self.order == 2 else None)

    def build_cache(self):
        """Compute :attr:`cache` (one pass for the GLMs; nothing for other models)."""
        if self.cache is None:
            self.cache = self.model.compiled.cv_cache(self.theta_star)
            if self.cache is not None:
                self.n_evals += self.n_data
        return self

    # ---- the full-data part -------------------------------------------------------
    def Q(self, theta):
        """``sum_k q_k(theta)`` in O(d^2)."""
        delta = np.asarray(theta, dtype=np.float64) - self.theta_star
        if self.order < 2:
            return self.L_star + self.A @ delta
        return self.L_star + self.A @ delta + 0.5 * delta @ (self.B @ delta)

    def grad_Q(self, theta):
        delta = np.asarray(theta, dtype=np.float64) - self.theta_star
        if self.order < 2:
            return self.A.copy()
        return self.A + self.B @ delta

    def delta_Q(self, theta, theta_new):
        """``Q(theta_new) - Q(theta)`` without cancellation."""
        h = np.asarray(theta_new, dtype=np.float64) - theta
        if self.order < 2:
            return float(self.A @ h)
        mid = np.asarray(theta_new, dtype=np.float64) + theta - 2.0 * self.theta_star
        return float(self.A @ h + 0.5 * h @ (self.B @ mid))

    # ---- subsample residuals --------------------------------------------------------
    def residuals(self, theta, idx):
        """Residuals ``d_k`` and their gradients ``grad d_k`` for ``k in idx``.

        Returns ``(d, grad_d)`` with shapes ``(m,)`` and ``(m, n_params)``.
        """
        return self.model.cv_residuals_and_grads(theta, self.theta_star, idx, self.order)

    def residual_terms(self, theta, idx):
        """Residuals ``d_k(theta)`` for ``k in idx`` (no gradients)."""
        return self.model.cv_residual_terms(theta, self.theta_star, idx, self.order)

    def row_terms(self, idx):
        """The Taylor constants at theta* of the rows ``idx`` (``taylor_terms``;
        from :attr:`taylor_rows` when set)."""
        if self.taylor_rows is not None:
            return self.taylor_rows(idx)
        return self.model.taylor_terms(self.theta_star, idx, self.order)

    def residuals_at(self, thetas, idx):
        """Residuals ``d_k`` of the rows ``idx`` at each of ``thetas``: an array
        (len(thetas), len(idx)). Python models compute their rows' constants
        at theta* once (``row_terms``), then one ``loglik`` call per point."""
        if not python_terms(self.model):
            return np.array([self.residual_terms(th, idx) for th in thetas])
        l0, g0, H0 = self.row_terms(idx)
        return np.array([taylor_residuals(np.asarray(th) - self.theta_star,
                                          self.model.loglik_terms(th, idx), None,
                                          l0, g0, H0)[0] for th in thetas])

    def residual_derivatives(self, theta, idx):
        """GLMs only: ``(d_k, d'_k = dd_k/deta_k)``, the per-datum scalar form."""
        cy = self.model.compiled
        if not hasattr(cy, "cv_derivatives"):
            raise TypeError("the scalar residual form exists for GLMs only")
        m = self.model
        return cy.cv_derivatives(self.order, self.theta_star, m.check_theta(theta),
                                 m.check_indices(idx), self.cache)

    # ---- estimators ------------------------------------------------------------------
    def estimate(self, theta, idx, exact=None):
        """Difference estimator ``ell_hat = Q + n mean(d)`` and its variance
        estimate ``sigma2_hat = n^2/m^2 sum (d_i - mean d)^2``.

        ``exact`` (row indices, optional): a stratum summed exactly; ``idx``
        then samples the other ``n_s = n - len(exact)`` rows: ``ell_hat = Q +
        sum_{exact} d_k + n_s mean(d)``, ``sigma2_hat = n_s^2/m^2 sum (d_i -
        mean d)^2``."""
        theta = self.model.check_theta(theta)
        Q, n_s = self.Q(theta), self.n_data
        if exact is not None and len(exact):
            Q += float(np.sum(self.residual_terms(theta, exact)))
            n_s -= len(exact)
        nd, sigma2, _ = difference_estimate(n_s, self.residual_terms(theta, idx))
        return Q + nd, sigma2

    def perturbed_loglik_and_grad(self, theta, idx, exact=None):
        """``lambda_hat = ell_hat - sigma2_hat / 2`` and its gradient (see
        :func:`perturbed_estimate`; ``exact`` as in :meth:`estimate`)."""
        d, grad_d = self.residuals(theta, idx)
        Q, gQ, n_s = self.Q(theta), self.grad_Q(theta), self.n_data
        if exact is not None and len(exact):
            de, gde = self.residuals(theta, exact)
            Q, gQ, n_s = Q + float(de.sum()), gQ + gde.sum(axis=0), n_s - len(exact)
        lam, grad, _, _ = perturbed_estimate(Q, gQ, n_s, d, grad_d)
        return lam, grad

    def grad_estimate(self, theta, idx):
        """Unbiased log-likelihood gradient estimate ``grad Q + n/m sum grad d_k``
        (the stochastic gradient of SGLD/SGHMC with control variates)."""
        m = self.model
        theta, idx = m.check_theta(theta), m.check_indices(idx)
        g, _ = m.cv_grad_sum(theta, self.theta_star, idx, self.order)
        return self.grad_Q(theta) + (self.n_data / idx.shape[0]) * g
