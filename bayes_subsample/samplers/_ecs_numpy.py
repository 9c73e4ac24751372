"""The perturbed HMC-ECS potential of any :class:`~bayes_subsample.models.Model`
in NumPy (control variates of order 0 or 1): the path of user models, and the
reference the compiled ``ECSCore`` of the GLMs is tested against. It has the
same interface as ``ECSCore`` and draws the same random numbers in the same
order, and runs through the same compiled Hamiltonian transition."""
from __future__ import annotations

import numpy as np

from .. import _rng
from ..control_variates import perturbed_estimate
from ._hamiltonian import PythonPotential

__all__ = ["NumpyECSPotential"]


class NumpyECSPotential(PythonPotential):
    """``U(theta) = -(lambda_hat(theta) + log p(theta))`` with the perturbed
    estimator on a block-structured subsample (see ``ECSCore``).

    The per-row terms at theta* (``l_k(theta*)`` and, at order 1, their
    gradients) are cached when rows are loaded, so an evaluation at theta
    costs one log-likelihood and one gradient per subsample row.
    """

    #: rows summed exactly at every evaluation: none (the exact stratum of the
    #: stratified warmup is the compiled core's)
    n_exact = 0

    def __init__(self, model, order, prior_precision):
        if order not in (0, 1):
            raise ValueError("the NumPy HMC-ECS potential supports control variates of "
                             f"order 0 or 1, got {order}")
        super().__init__(model.n_params, 0)
        self.model = model
        self.order = int(order)
        self.n_data = float(model.n_data)
        self.prec = np.asarray(prior_precision, dtype=np.float64)
        self.sign = 1.0
        self.m = 0
        self.idx = np.zeros(0, dtype=np.int64)
        self._pos = self._last = None      # (d, grad_d, loglik_hat, sigma2)

    # ---- configuration --------------------------------------------------------------
    def set_reference(self, theta_star, L_star, A, B=None):
        """As ``ECSCore.set_reference``: ``B`` (the Hessian sum) only at order 2."""
        self.theta_star = np.asarray(theta_star, dtype=np.float64).copy()
        self.L_star, self.A = float(L_star), np.asarray(A)
        self.B = None if B is None else np.asarray(B)
        if self.m:
            self._cache()

    def set_rows(self, idx, block_size):
        self.idx = np.asarray(idx, dtype=np.int64).copy()
        self.m = len(self.idx)
        self.block_size = int(block_size)
        self.n_blocks = self.m // self.block_size
        self._set_cost(self.m)
        if hasattr(self, "theta_star"):
            self._cache()

    def _cache(self):
        m = self.model
        self.l_star = m.loglik_terms(self.theta_star, self.idx)
        self.g_star = m.grad_terms(self.theta_star, self.idx) if self.order >= 1 else None

    @property
    def indices(self):
        return self.idx.copy()

    @property
    def loglik_hat(self):
        """The perturbed estimate ``lambda_hat = ell_hat - sigma2_hat / 2`` at the position."""
        return self._pos[2] - 0.5 * self._pos[3]

    @property
    def sigma2(self):
        return self._pos[3]

    # ---- the estimator --------------------------------------------------------------
    def _residuals(self, theta, rows=slice(None)):
        m = self.model
        idx = self.idx[rows]
        d = m.loglik_terms(theta, idx) - self.l_star[rows]
        g = m.grad_terms(theta, idx)
        if self.order == 0:
            return d, g
        g_star = self.g_star[rows]
        return d - g_star @ (theta - self.theta_star), g - g_star

    def _combine(self, theta, d, gd):
        delta = theta - self.theta_star
        Q, grad_Q = self.L_star + self.A @ delta, self.A
        if self.B is not None:
            Bd = self.B @ delta
            Q, grad_Q = Q + 0.5 * float(delta @ Bd), grad_Q + Bd
        lam, grad, est, sigma2 = perturbed_estimate(Q, grad_Q, self.n_data, d, gd)
        U = -(lam - 0.5 * float(self.prec @ (theta * theta)))
        return U, -(grad - self.prec * theta), (d, gd, est, sigma2)

    # ---- the Potential interface ------------------------------------------------------
    def _value_and_grad(self, theta):
        U, g, self._last = self._combine(theta, *self._residuals(theta))
        return U, g

    def _accept_last(self):
        self._pos = self._last

    # ---- the block update of the subsample --------------------------------------------
    def u_step(self, generator):
        """Refresh one block of the subsample with a pseudo-marginal MH step at the
        position. Returns ``(accepted, alpha_u, n_evals)``."""
        bs = self.block_size
        g = int(_rng.uniform_indices(generator, self.n_blocks, 1)[0])
        new = _rng.uniform_indices(generator, int(self.n_data), bs)
        log_u = _rng.log_uniform(generator)
        theta = self.position
        sl = slice(g * bs, (g + 1) * bs)
        old = (self.idx[sl].copy(), self.l_star[sl].copy(),
               None if self.g_star is None else self.g_star[sl].copy())
        self.idx[sl] = new
        self.l_star[sl] = self.model.loglik_terms(self.theta_star, new)
        if self.order >= 1:
            self.g_star[sl] = self.model.grad_terms(self.theta_star, new)
        d_new, gd_new = self._residuals(theta, sl)
        d, gd = self._pos[0].copy(), self._pos[1].copy()
        d[sl], gd[sl] = d_new, gd_new
        U, grad, cand = self._combine(theta, d, gd)
        log_ratio = cand[2] - cand[3] / 2 - (self._pos[2] - self._pos[3] / 2)
        alpha = 1.0 if log_ratio >= 0 else (float(np.exp(log_ratio))
                                            if np.isfinite(log_ratio) else 0.0)
        if np.isfinite(log_ratio) and log_u < log_ratio:
            self._pos = cand
            self._set_state(U, grad)
            return True, alpha, bs
        self.idx[sl], self.l_star[sl] = old[0], old[1]
        if old[2] is not None:
            self.g_star[sl] = old[2]
        return False, alpha, bs
