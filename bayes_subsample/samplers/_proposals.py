"""Proposals of the Metropolis-Hastings family (exact, austerity, confidence).

One protocol, as emcee's moves: ``propose(rng, theta) -> (theta', log_q_ratio,
n_evals)`` with ``log_q_ratio = log q(theta | theta') - log q(theta' | theta)``
and ``n_evals`` the per-datum evaluations the proposal spent;
``adapt(theta, accepted, iteration)`` during warmup (on accept/reject
*decisions* only, so exact and approximate chains driven by the same random
numbers adapt identically); ``freeze()`` at the end of warmup, after which
the chain is a valid Markov chain; ``tuning()`` reports the tuned values.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import linalg

from .. import _rng
from .._linalg import scale_draws, solve_chol

__all__ = ["RandomWalkProposal", "SGLDProposal"]


class RandomWalkProposal:
    """Random walk ``theta' = theta + scale * L xi`` whose covariance ``L L^T``
    adapts during warmup to the empirical covariance of the chain (Haario et
    al. 2001) and whose scale adapts by Robbins-Monro to a target acceptance
    rate (0.25 for d > 2, 0.5 otherwise; Roberts & Rosenthal).

    A ``(p,)`` ``cov0`` makes the proposal diagonal (wide models): its
    variances adapt to the chain's marginal variances, ``O(p)`` memory and
    work a step where the dense proposal takes ``O(p^2)``.

    Parameters
    ----------
    cov0 : ndarray (p, p) or (p,)
        Initial covariance (the Laplace covariance), or its diagonal.
    scale0 : float, optional
        Initial scale (default ``2.38 / sqrt(p)``).
    target : float, optional
        Target acceptance rate.
    adapt : bool, default=True
        Adapt during warmup (False: frozen from the start).
    start_cov_adapt : int, default=100
        Warmup iterations before the covariance adapts.
    """

    def __init__(self, cov0, scale0=None, target=None, adapt=True, start_cov_adapt=100):
        cov0 = np.asarray(cov0, dtype=np.float64)
        d = cov0.shape[0]
        self.d = d
        self.diagonal = cov0.ndim == 1
        self.target = target if target is not None else (0.25 if d > 2 else 0.5)
        self.log_scale = math.log(scale0 if scale0 is not None else 2.38 / math.sqrt(d))
        self.cov0 = cov0
        self.chol = self._factor(cov0)
        self.start_cov_adapt = start_cov_adapt
        self.n = 0
        self.mean = np.zeros(d)
        self.m2 = np.zeros(d) if self.diagonal else np.zeros((d, d))
        self.frozen = not adapt

    def _factor(self, cov):
        if self.diagonal:
            return np.sqrt(cov)
        return linalg.cholesky(0.5 * (cov + cov.T), lower=True)

    @property
    def scale(self):
        return math.exp(self.log_scale)

    def propose(self, rng, theta):
        return theta + self.scale * scale_draws(self.chol, rng.standard_normal(self.d)), 0.0, 0

    def adapt(self, theta, accepted, iteration):
        if self.frozen:
            return
        self.log_scale += (float(accepted) - self.target) / (iteration + 1.0) ** 0.6
        self.n += 1
        delta = theta - self.mean
        self.mean += delta / self.n
        if self.diagonal:
            self.m2 += delta * (theta - self.mean)
        else:
            self.m2 += np.outer(delta, theta - self.mean)
        if self.n >= self.start_cov_adapt and self.n % 50 == 0:
            emp = self.m2 / (self.n - 1)
            # shrink towards the initial covariance while few draws are in (a
            # diagonal proposal estimates d variances, not d^2 / 2 covariances)
            w = self.n / (self.n + (10.0 if self.diagonal else 10.0 * self.d))
            cov = w * emp + (1 - w) * self.cov0
            cov = cov + 1e-10 if self.diagonal else cov + 1e-10 * np.eye(self.d)
            try:
                self.chol = self._factor(cov)
            except linalg.LinAlgError:
                pass

    def freeze(self):
        self.frozen = True

    def tuning(self):
        return {"proposal_scale": self.scale, "proposal_chol": self.chol.copy()}


class SGLDProposal:
    """Stochastic-gradient Langevin proposal, MH-corrected
    (:ref:`algo-austerity-sgld`).

    ``theta' = theta + (alpha/2) M g(theta) + sqrt(alpha) L xi`` with ``g`` the
    minibatch gradient estimate of the log posterior (the samplers'
    :class:`~bayes_subsample.samplers._sgmcmc_fast.GradientEstimator`) on a
    batch ``X_b`` of ``b`` indices drawn uniformly with replacement, ``M = L
    L^T`` (the Laplace covariance if preconditioned, else the identity) and
    ``xi ~ N(0, I)``. The reverse density uses **the same** ``X_b``, so each
    batch defines a reversible kernel and so does the mixture over batches.

    The step size ``alpha`` is adapted during warmup by Robbins-Monro on the
    accept decisions towards ``target`` (0.574, the MALA optimum) unless fixed.
    """

    def __init__(self, gradient, chol, step_size0, batch_size, target=None, adapt=True):
        self.gradient = gradient
        self.n_data = gradient.n_data
        self.chol = np.asarray(chol, dtype=np.float64)   # (p, p), or (p,): diagonal
        self.d = self.chol.shape[0]
        self.batch_size = int(batch_size)
        self.target = 0.574 if target is None else float(target)
        self.log_alpha = math.log(step_size0)
        self.frozen = not adapt

    @property
    def step_size(self):
        return math.exp(self.log_alpha)

    def _drift(self, theta, idx):
        g = self.gradient(theta, idx)
        if self.chol.ndim == 1:
            return self.chol * (self.chol * g)
        return self.chol @ (self.chol.T @ g)        # M g = L (L^T g)

    def propose(self, rng, theta):
        alpha = self.step_size
        idx = _rng.uniform_indices(rng, self.n_data, self.batch_size)
        evals = self.gradient.evals_per_datum * self.batch_size
        drift = self._drift(theta, idx)
        xi = rng.standard_normal(self.d)
        theta_new = theta + 0.5 * alpha * drift + math.sqrt(alpha) * scale_draws(self.chol, xi)
        if not np.all(np.isfinite(theta_new)):
            return theta_new, -np.inf, evals
        drift_new = self._drift(theta_new, idx)
        back = theta - theta_new - 0.5 * alpha * drift_new
        z = solve_chol(self.chol, back)
        # forward residual is sqrt(alpha) L xi exactly: its whitened norm is |xi|
        log_q_ratio = -float(z @ z) / (2.0 * alpha) + 0.5 * float(xi @ xi)
        return theta_new, log_q_ratio, 2 * evals

    def adapt(self, theta, accepted, iteration):
        if self.frozen:
            return
        self.log_alpha += (float(accepted) - self.target) / (iteration + 1.0) ** 0.6

    def freeze(self):
        self.frozen = True

    def tuning(self):
        return {"step_size": self.step_size}
