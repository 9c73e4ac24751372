"""Building blocks for adaptation: dual averaging of the step size, a dense
Euclidean metric (mass matrix), and the adaptive random-walk proposal."""
from __future__ import annotations

import math

import numpy as np
from scipy import linalg

from .._linalg import inv_lower
__all__ = ["DualAveraging", "TrajectoryTuner", "DenseMetric", "AdaptiveRWProposal",
           "n_leapfrog_for"]


class DualAveraging:
    """Hoffman & Gelman (2014) dual averaging of ``log(step_size)``
    (ALGORITHMS.md §4.3: gamma=0.05, t0=10, kappa=0.75, mu=log(10 eps0))."""

    def __init__(self, step_size0, target=0.8, gamma=0.05, t0=10.0, kappa=0.75):
        self.target, self.gamma, self.t0, self.kappa = target, gamma, t0, kappa
        self.restart(step_size0)

    def restart(self, step_size0):
        self.mu = math.log(10.0 * step_size0)
        self.h_bar = 0.0
        self.log_eps = math.log(step_size0)
        self.log_eps_bar = math.log(step_size0)
        self.t = 0

    def update(self, accept_prob):
        """Feed one acceptance probability; returns the next step size."""
        if not np.isfinite(accept_prob):
            accept_prob = 0.0
        self.t += 1
        t = self.t
        w = 1.0 / (t + self.t0)
        self.h_bar = (1.0 - w) * self.h_bar + w * (self.target - accept_prob)
        self.log_eps = self.mu - math.sqrt(t) / self.gamma * self.h_bar
        eta = t ** (-self.kappa)
        self.log_eps_bar = eta * self.log_eps + (1.0 - eta) * self.log_eps_bar
        return math.exp(self.log_eps)

    @property
    def step_size(self):
        return math.exp(self.log_eps)

    @property
    def final_step_size(self):
        return math.exp(self.log_eps_bar)


def n_leapfrog_for(step_size, trajectory_length, max_leapfrog):
    """``round(trajectory_length / step_size)`` clipped to ``[1, max_leapfrog]``."""
    return int(min(max_leapfrog, max(1, round(trajectory_length / step_size))))


class TrajectoryTuner:
    """Step size and number of leapfrog steps of an HMC-type kernel.

    During warmup ``update`` feeds acceptance probabilities to dual averaging
    (unless a step size was given) and keeps the trajectory length fixed:
    ``n_steps = round(trajectory_length / step_size)`` (ALGORITHMS.md §4.3);
    ``finalize`` freezes the averaged step size at the end of warmup.
    """

    def __init__(self, step_size, trajectory_length, target_accept, n_leapfrog=None,
                 max_leapfrog=1000, initial_step_size=0.5):
        self.adapt = step_size is None
        self.step_size = float(step_size) if step_size is not None else initial_step_size
        self.trajectory_length = trajectory_length
        self.fixed_steps = n_leapfrog
        self.max_leapfrog = max_leapfrog
        self.da = DualAveraging(self.step_size, target=target_accept)
        self._update_steps()

    def _update_steps(self):
        self.n_steps = (int(self.fixed_steps) if self.fixed_steps is not None else
                        n_leapfrog_for(self.step_size, self.trajectory_length, self.max_leapfrog))

    def update(self, accept_prob):
        if self.adapt:
            self.step_size = self.da.update(accept_prob)
            self._update_steps()

    def restart(self):
        """Restart dual averaging from the current step size (after the metric changed)."""
        if self.adapt:
            self.da.restart(self.step_size)

    def finalize(self):
        if self.adapt and self.da.t > 0:
            self.step_size = self.da.final_step_size
            self._update_steps()


class DenseMetric:
    """Kinetic energy ``K(p) = p^T M^{-1} p / 2`` with a dense mass matrix ``M``
    (set to the posterior precision, so the dynamics see a whitened target)."""

    def __init__(self, mass):
        mass = np.asarray(mass, dtype=np.float64)
        mass = 0.5 * (mass + mass.T)
        self.mass = mass
        self.chol = linalg.cholesky(mass, lower=True)          # M = L L^T
        inv_chol = inv_lower(self.chol)
        self.inv_mass = inv_chol.T @ inv_chol

    def sample_momentum(self, rng):
        return self.chol @ rng.standard_normal(self.chol.shape[0])

    def kinetic(self, p):
        return 0.5 * float(p @ (self.inv_mass @ p))

    def velocity(self, p):
        return self.inv_mass @ p


class AdaptiveRWProposal:
    """Random-walk proposal ``theta' = theta + scale * L xi`` whose covariance
    ``L L^T`` adapts during warmup to the empirical covariance of the chain
    (Haario et al. 2001) and whose scale adapts by Robbins-Monro to a target
    acceptance rate (0.25 for d > 2, 0.5 otherwise; Roberts & Rosenthal).

    Adaptation uses only the accept/reject *decisions*, so an exact and an
    approximate MH chain driven by the same random numbers adapt identically.
    After warmup (``freeze``) the proposal is fixed and the chain is a valid
    Markov chain.
    """

    def __init__(self, cov0, scale0=None, target=None, start_cov_adapt=100):
        cov0 = np.asarray(cov0, dtype=np.float64)
        d = cov0.shape[0]
        self.d = d
        self.target = target if target is not None else (0.25 if d > 2 else 0.5)
        self.log_scale = math.log(scale0 if scale0 is not None else 2.38 / math.sqrt(d))
        self.cov0 = cov0
        self.chol = linalg.cholesky(0.5 * (cov0 + cov0.T), lower=True)
        self.start_cov_adapt = start_cov_adapt
        self.n = 0
        self.mean = np.zeros(d)
        self.m2 = np.zeros((d, d))
        self.frozen = False

    @property
    def scale(self):
        return math.exp(self.log_scale)

    def propose(self, rng, theta):
        return theta + self.scale * (self.chol @ rng.standard_normal(self.d))

    def adapt(self, theta, accepted, iteration):
        if self.frozen:
            return
        self.log_scale += (float(accepted) - self.target) / (iteration + 1.0) ** 0.6
        self.n += 1
        delta = theta - self.mean
        self.mean += delta / self.n
        self.m2 += np.outer(delta, theta - self.mean)
        if self.n >= self.start_cov_adapt and self.n % 50 == 0:
            emp = self.m2 / (self.n - 1)
            # shrink towards the initial covariance while few draws are in
            w = self.n / (self.n + 10.0 * self.d)
            cov = w * emp + (1 - w) * self.cov0 + 1e-10 * np.eye(self.d)
            try:
                self.chol = linalg.cholesky(0.5 * (cov + cov.T), lower=True)
            except linalg.LinAlgError:
                pass

    def freeze(self):
        self.frozen = True

    def log_ratio(self, theta, theta_new):
        """``log q(theta | theta') - log q(theta' | theta)`` (0: symmetric)."""
        return 0.0
