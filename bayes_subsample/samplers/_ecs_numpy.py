"""The HMC-ECS potential of any :class:`~bayes_subsample.models.Model` in NumPy
(control variates of order 0 to 2, the perturbed and the signed estimator):
the path of user models, and the reference the compiled ``ECSCore`` of the
GLMs is tested against. It has the same interface as ``ECSCore``, draws the
same random numbers in the same order, and runs through the same compiled
Hamiltonian transition."""
from __future__ import annotations

import math

import numpy as np

from .. import _rng
from ..control_variates import perturbed_estimate
from ..models._base import taylor_residuals
from ._hamiltonian import PythonPotential

__all__ = ["NumpyECSPotential"]

_MODES = ("perturbed", "signed")


class NumpyECSPotential(PythonPotential):
    """``U(theta) = -(log L_hat(theta) + log p(theta))`` on a block-structured
    subsample (see ``ECSCore``): the perturbed estimator ``lambda_hat =
    ell_hat - sigma2_hat / 2`` on G blocks, or the block-Poisson one's
    ``log |L_hat|`` on batches of ``block_size`` rows (``mode="signed"``,
    after :meth:`set_signed`).

    The rows' Taylor constants at theta* (``l_k(theta*)``, at order 1 their
    gradients, at order 2 their Hessians: ``Model.taylor_terms``) are kept
    with the rows, computed when rows join the subsample or read from
    ``rows`` (a :class:`~bayes_subsample.control_variates.TaylorRows` table at
    the same theta*), so an evaluation at theta costs one log-likelihood and
    one gradient call on the subsample rows.
    """

    #: rows summed exactly at every evaluation: none (the exact stratum of the
    #: stratified warmup is the compiled core's)
    n_exact = 0

    def __init__(self, model, order, prior_precision, mode="perturbed", rows=None):
        if order not in (0, 1, 2):
            raise ValueError(f"control variates have order 0, 1 or 2, got {order}")
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
        super().__init__(model.n_params, 0)
        self.model = model
        self.order = int(order)
        self.mode = mode
        self.rows = rows
        self.n_data = float(model.n_data)
        self.prec = np.asarray(prior_precision, dtype=np.float64)
        self.sign = 1.0
        self.a_const, self.n_products = 0.0, 1.0
        self.m = 0
        self.idx = np.zeros(0, dtype=np.int64)
        self._pos = self._last = None      # (d, grad_d, estimate, sigma2, sign)

    # ---- configuration --------------------------------------------------------------
    def set_reference(self, theta_star, L_star, A, B=None):
        """As ``ECSCore.set_reference``: ``B`` (the Hessian sum) only at order 2."""
        self.theta_star = np.asarray(theta_star, dtype=np.float64).copy()
        self.L_star, self.A = float(L_star), np.asarray(A)
        self.B = None if B is None else np.asarray(B)
        if self.order == 2 and self.B is None:
            raise ValueError("order-2 control variates need the Hessian sum B")
        if self.m:
            self._cache()

    def set_signed(self, a_const, n_products):
        """The block-Poisson estimator's constant ``a`` and number of products lambda."""
        if self.mode != "signed":
            raise RuntimeError("set_signed is for the signed estimator")
        self.a_const, self.n_products = float(a_const), float(n_products)

    def set_rows(self, idx, block_size):
        self.idx = np.asarray(idx, dtype=np.int64).copy()
        self.m = len(self.idx)
        self.block_size = int(block_size)
        self.n_blocks = self.m // self.block_size
        self._set_cost(self.m)
        if hasattr(self, "theta_star"):
            self._cache()

    def _terms(self, idx):
        """The Taylor constants at theta* of the rows ``idx``."""
        rows = self.rows
        if rows is not None and np.array_equal(rows.theta_star, self.theta_star):
            return rows(idx)
        return self.model.taylor_terms(self.theta_star, idx, self.order)

    def _cache(self):
        self.l_star, self.g_star, self.H_star = self._terms(self.idx)

    @property
    def indices(self):
        return self.idx.copy()

    @property
    def loglik_hat(self):
        """The estimate at the position: ``lambda_hat = ell_hat - sigma2_hat / 2``
        (perturbed), ``log |L_hat|`` (signed)."""
        if self.mode == "signed":
            return self._pos[2]
        return self._pos[2] - 0.5 * self._pos[3]

    @property
    def sigma2(self):
        return self._pos[3]

    # ---- the estimator --------------------------------------------------------------
    def _residuals(self, theta, rows=slice(None), terms=None):
        """Residuals and their gradients at theta of the subsample's rows ``rows``
        (or of other rows, given their indices and constants ``terms``)."""
        m = self.model
        if terms is None:
            idx, terms = self.idx[rows], (self.l_star[rows],
                                          None if self.g_star is None else self.g_star[rows],
                                          None if self.H_star is None else self.H_star[rows])
        else:
            idx, terms = terms
        if len(idx) == 0:
            return np.zeros(0), np.zeros((0, len(theta)))
        return taylor_residuals(theta - self.theta_star, m.loglik_terms(theta, idx),
                                m.grad_terms(theta, idx), *terms)

    def _proxy(self, theta):
        """``Q(theta)`` and its gradient."""
        delta = theta - self.theta_star
        Q, grad_Q = self.L_star + self.A @ delta, self.A
        if self.B is not None:
            Bd = self.B @ delta
            Q, grad_Q = Q + 0.5 * float(delta @ Bd), grad_Q + Bd
        return Q, grad_Q

    def _combine(self, theta, d, gd):
        Q, grad_Q = self._proxy(theta)
        if self.mode == "signed":
            lam, grad, est, sigma2, sign = self._block_poisson(Q, grad_Q, d, gd)
        else:
            lam, grad, est, sigma2 = perturbed_estimate(Q, grad_Q, self.n_data, d, gd)
            sign = 1.0
        U = -(lam - 0.5 * float(self.prec @ (theta * theta)))
        return U, -(grad - self.prec * theta), (d, gd, est, sigma2, sign)

    def _block_poisson(self, Q, grad_Q, d, gd):
        """``log |L_hat|``, its gradient and sign (:ref:`algo-hmc-ecs-signed`):
        ``Q + a + lambda + sum_b [log |n/m S_b - a| - log lambda]`` over the
        batches' residual sums ``S_b``."""
        a, lam, bs = self.a_const, self.n_products, self.block_size
        est = Q + a + lam
        if len(d) == 0:
            return est, grad_Q, est, 0.0, 1.0
        cn = self.n_data / bs
        dh = cn * d.reshape(-1, bs).sum(axis=1) - a
        est += float(np.sum(np.log(np.abs(dh)) - math.log(lam)))
        sign = -1.0 if np.count_nonzero(dh < 0) % 2 else 1.0
        grad = grad_Q + (cn / np.repeat(dh, bs)) @ gd
        sigma2 = (self.n_data ** 2 / bs) * (float(np.var(d, ddof=1)) if len(d) > 1
                                             else 0.0) / lam
        return est, grad, est, sigma2, sign

    # ---- the Potential interface ------------------------------------------------------
    def _value_and_grad(self, theta):
        U, g, self._last = self._combine(theta, *self._residuals(theta))
        return U, g

    def _accept_last(self):
        self._pos = self._last
        self.sign = self._pos[4]

    # ---- the block update of the subsample (perturbed) --------------------------------
    def u_step(self, generator):
        """Refresh one block of the subsample with a pseudo-marginal MH step at the
        position. Returns ``(accepted, alpha_u, n_evals)``."""
        if self.mode != "perturbed":
            raise RuntimeError("u_step is for the perturbed estimator")
        bs = self.block_size
        g = int(_rng.uniform_indices(generator, self.n_blocks, 1)[0])
        new = _rng.uniform_indices(generator, int(self.n_data), bs)
        log_u = _rng.log_uniform(generator)
        theta = self.position
        sl = slice(g * bs, (g + 1) * bs)
        new_terms = self._terms(new)
        d_new, gd_new = self._residuals(theta, terms=(new, new_terms))
        d, gd = self._pos[0].copy(), self._pos[1].copy()
        d[sl], gd[sl] = d_new, gd_new
        U, grad, cand = self._combine(theta, d, gd)
        log_ratio = cand[2] - cand[3] / 2 - (self._pos[2] - self._pos[3] / 2)
        alpha = 1.0 if log_ratio >= 0 else (float(np.exp(log_ratio))
                                            if np.isfinite(log_ratio) else 0.0)
        if np.isfinite(log_ratio) and log_u < log_ratio:
            self.idx[sl] = new
            for bank, value in zip((self.l_star, self.g_star, self.H_star), new_terms):
                if bank is not None:
                    bank[sl] = value
            self._pos = cand
            self._set_state(U, grad)
            return True, alpha, bs
        return False, alpha, bs

    # ---- signed estimator: batch statistics for the u-update ---------------------------
    def batch_stats(self, idx, batch_size):
        """Residual sums ``S_b`` of candidate batches of rows ``idx`` at the
        position (signed u-update); returns ``(S (n_batches,), d (len(idx),))``."""
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        nb = len(idx) // int(batch_size)
        if len(idx) == 0:
            return np.zeros(0), np.zeros(0)
        theta = self.position
        d = taylor_residuals(theta - self.theta_star, self.model.loglik_terms(theta, idx),
                             None, *self._terms(idx))[0]
        return d[:nb * batch_size].reshape(nb, batch_size).sum(axis=1), d

    def block_sums(self):
        """The residual sums of the subsample's batches at the position."""
        if self.m == 0:
            return np.zeros(0)
        return self._pos[0].reshape(-1, self.block_size).sum(axis=1)
