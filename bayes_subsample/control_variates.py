"""Taylor-expansion control variates around a reference point theta*
(ALGORITHMS.md §1.2-1.3).

``q_k(theta)`` is the order-0/1/2 Taylor expansion of ``l_k`` at ``theta*``.
One full pass at ``theta*`` precomputes ``L* = sum l_k(theta*)``,
``A = sum grad l_k(theta*)`` and ``B = sum Hessian l_k(theta*)`` so that
``Q(theta) = sum_k q_k(theta)`` costs O(d^2); a subsample then only needs the
residuals ``d_k = l_k - q_k``. For GLMs ``d_k`` depends on the scalar
``eta_k`` alone and is computed directly as a Taylor remainder (accurate for
``theta -> theta*``); user models use a generic path (orders 0 and 1).
"""
from __future__ import annotations

import numpy as np

from .models._glm import GLM
from .models import _glm_fast

__all__ = ["TaylorControlVariate"]


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
        Taylor order. Order 2 needs a GLM (per-datum Hessians are scalars there).
    sums : tuple ``(loglik, gradient, hessian)``, optional
        Full-data sums at ``theta_star`` already computed by the caller (one
        ``model.full_pass(theta_star, hessian=True)``); skips the pass here.

    Attributes
    ----------
    L_star, A, B : float, ndarray (p,), ndarray (p, p)
        Full-data sums at ``theta_star`` (``B`` is zero below order 2).
    n_evals : int
        Per-datum evaluations spent building it (``n`` for its full pass; 0
        when ``sums`` were given).

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
        self.is_glm = isinstance(model, GLM)
        if order == 2 and not self.is_glm:
            raise ValueError(
                "second-order control variates need per-datum Hessians, available for the "
                "compiled GLMs only; use order=1 for a user-defined model"
            )
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
        self.A = grad if order >= 1 else np.zeros(p)
        self.B = hess if order == 2 else np.zeros((p, p))
        if not (np.isfinite(self.L_star) and np.isfinite(self.A).all() and np.isfinite(self.B).all()):
            raise FloatingPointError("non-finite log-likelihood sums at theta_star")

    # ---- the full-data part -------------------------------------------------------
    def Q(self, theta):
        """``sum_k q_k(theta)`` in O(d^2)."""
        delta = np.asarray(theta, dtype=np.float64) - self.theta_star
        return self.L_star + self.A @ delta + 0.5 * delta @ (self.B @ delta)

    def grad_Q(self, theta):
        delta = np.asarray(theta, dtype=np.float64) - self.theta_star
        return self.A + self.B @ delta

    # ---- subsample residuals --------------------------------------------------------
    def residuals(self, theta, idx):
        """Residuals ``d_k`` and their gradients ``grad d_k`` for ``k in idx``.

        Returns ``(d, grad_d)`` with shapes ``(m,)`` and ``(m, n_params)``.
        """
        m = self.model
        theta, idx = m.check_theta(theta), m.check_indices(idx)
        if self.is_glm:
            d, dp = self._glm_scalar_residuals(theta, idx)
            Xu = np.asarray(m.X[idx], dtype=np.float64)
            if m.fit_intercept:
                Xu = np.column_stack([Xu, np.ones(len(idx))])
            return d, dp[:, None] * Xu
        l = m.loglik_terms(theta, idx)
        g = m.grad_terms(theta, idx)
        if self.order == 0:
            return l - m.loglik_terms(self.theta_star, idx), g
        g_star = m.grad_terms(self.theta_star, idx)
        d = l - m.loglik_terms(self.theta_star, idx) - g_star @ (theta - self.theta_star)
        return d, g - g_star

    def _glm_scalar_residuals(self, theta, idx):
        m = self.model
        d = np.empty(idx.shape[0])
        dp = np.empty(idx.shape[0])
        _glm_fast.cv_terms(m._fam, self.order, m.X, m.y, theta, self.theta_star,
                           m.fit_intercept, m.phi, idx, d, dp)
        return d, dp

    def residual_derivatives(self, theta, idx):
        """GLMs only: ``(d_k, d'_k = dd_k/deta_k)``, the per-datum scalar form."""
        if not self.is_glm:
            raise TypeError("the scalar residual form exists for GLMs only")
        m = self.model
        return self._glm_scalar_residuals(m.check_theta(theta), m.check_indices(idx))

    # ---- estimators (§1.3) ----------------------------------------------------------
    def estimate(self, theta, idx):
        """Difference estimator ``ell_hat = Q + n mean(d)`` and its variance
        estimate ``sigma2_hat = n^2/m^2 sum (d_i - mean d)^2``."""
        d, _ = self._d_only(theta, idx)
        n, mm = self.n_data, d.shape[0]
        dbar = d.mean()
        sigma2 = (n / mm) ** 2 * float(np.sum((d - dbar) ** 2))
        return self.Q(theta) + n * dbar, sigma2

    def _d_only(self, theta, idx):
        if self.is_glm:
            m = self.model
            return self._glm_scalar_residuals(m.check_theta(theta), m.check_indices(idx))
        return self.residuals(theta, idx)

    def perturbed_loglik_and_grad(self, theta, idx):
        """``lambda_hat = ell_hat - sigma2_hat / 2`` and its gradient.

        ``grad = A + B delta + sum_i c_i grad d_i`` with
        ``c_i = n/m - n^2/m^2 (d_i - mean d)``.
        """
        d, grad_d = self.residuals(theta, idx)
        n, mm = self.n_data, d.shape[0]
        dbar = d.mean()
        sigma2 = (n / mm) ** 2 * float(np.sum((d - dbar) ** 2))
        c = n / mm - (n / mm) ** 2 * (d - dbar)
        lam = self.Q(theta) + n * dbar - 0.5 * sigma2
        return lam, self.grad_Q(theta) + c @ grad_d

    def grad_estimate(self, theta, idx):
        """Unbiased log-likelihood gradient estimate ``grad Q + n/m sum grad d_k``
        (the stochastic gradient of SGLD/SGHMC with control variates)."""
        m = self.model
        theta, idx = m.check_theta(theta), m.check_indices(idx)
        mm = idx.shape[0]
        if self.is_glm:
            g = np.empty(m.n_params)
            _glm_fast.cv_grad_sum(m._fam, self.order, m.X, m.y, theta, self.theta_star,
                                  m.fit_intercept, m.phi, idx, g)
        else:
            g = self.residuals(theta, idx)[1].sum(axis=0)
        return self.grad_Q(theta) + (self.n_data / mm) * g
