"""Full-data Hamiltonian Monte Carlo with a dense mass matrix and dual averaging."""
from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval

from ._adapt import DenseMetric, TrajectoryTuner
from ._base import BaseSampler, Info, Kernel, State
from ._common import (DIVERGENCE_THRESHOLD, accept_prob_from_log_ratio, laplace_shared,
                      leapfrog, log_uniform_open)

__all__ = ["HMC"]


class HMCState(State):
    __slots__ = ("logp", "grad")

    def __init__(self, theta, logp, grad):
        self.theta = theta
        self.logp = logp
        self.grad = grad


class HMCKernel(Kernel):
    def __init__(self, model, sampler, precision, n_warmup):
        self.model = model
        self.n = model.n_data
        self.metric = DenseMetric(precision)
        self.tuner = TrajectoryTuner(sampler.step_size, sampler.trajectory_length,
                                     sampler.target_accept, sampler.n_leapfrog,
                                     sampler.max_leapfrog)
        self.adapt_mass = sampler.adapt_mass
        self.n_warmup = n_warmup
        self.window = (n_warmup // 4, n_warmup // 2)
        self._window_sum = None
        self._window_n = 0

    def init(self, rng, theta0):
        self.n_evals_setup += self.n
        logp, grad = self.model.log_posterior_and_grad(theta0)
        if not np.isfinite(logp):
            raise ValueError("the log posterior is not finite at the initial point")
        return HMCState(theta0, logp, grad)

    def step(self, rng, state):
        metric = self.metric
        p0 = metric.sample_momentum(rng)
        h0 = -state.logp + metric.kinetic(p0)
        theta, p, logp, grad, n_grad = leapfrog(
            state.theta, p0, state.grad, self.tuner.step_size, self.tuner.n_steps, metric.velocity,
            self.model.log_posterior_and_grad)
        h1 = -logp + metric.kinetic(p) if np.isfinite(logp) else np.inf
        energy_error = h1 - h0
        log_u = log_uniform_open(rng)
        accept_prob = accept_prob_from_log_ratio(-energy_error)
        diverging = not np.isfinite(energy_error) or abs(energy_error) > DIVERGENCE_THRESHOLD
        accepted = bool(np.isfinite(energy_error) and log_u < -energy_error)
        info = Info(accept_prob=accept_prob, accepted=accepted, diverging=diverging,
                    energy_error=energy_error, n_evals=n_grad * self.n,
                    extra={"step_size": self.tuner.step_size, "n_leapfrog": self.tuner.n_steps})
        if accepted:
            return HMCState(theta, logp, grad), info
        return state, info

    def warmup_step(self, rng, state, iteration):
        state, info = self.step(rng, state)
        self.tuner.update(info.accept_prob)
        if self.adapt_mass and self.n_warmup >= 100:
            lo, hi = self.window
            if lo <= iteration < hi:
                self._window_sum = state.theta.copy() if self._window_sum is None else \
                    self._window_sum + state.theta
                self._window_n += 1
            if iteration == hi - 1 and self._window_n > 0:
                # mass matrix = posterior precision at the mean of the window's draws
                centre = self._window_sum / self._window_n
                try:
                    self.metric = DenseMetric(self.model.neg_hessian_log_posterior(centre))
                    self.n_evals_setup += self.n
                except np.linalg.LinAlgError:
                    pass
                self.tuner.restart()
        return state, info

    def end_warmup(self, state):
        self.tuner.finalize()
        return state

    def tuning(self):
        return {"step_size": self.tuner.step_size, "n_leapfrog": self.tuner.n_steps,
                "mass_matrix": self.metric.mass.copy()}


class HMC(BaseSampler):
    """Hamiltonian Monte Carlo on the full data.

    Leapfrog dynamics with a dense mass matrix equal to the posterior
    precision (``-Hessian`` of the log posterior) at the mode, recomputed at
    the mean of the draws in the middle of warmup; the step size is tuned by
    dual averaging to ``target_accept`` with a fixed trajectory length
    ``step_size * n_leapfrog ~= trajectory_length``. Divergences
    (``|energy error| > 1000`` or non-finite) are flagged and rejected.

    Parameters
    ----------
    step_size : float, optional
        Leapfrog step size; ``None`` tunes it during warmup.
    trajectory_length : float, default=1.2
        ``step_size * n_leapfrog`` (in the whitened scale of the mass matrix).
    target_accept : float, default=0.8
        Dual-averaging target acceptance probability.
    n_leapfrog : int, optional
        Fix the number of leapfrog steps instead of deriving it.
    max_leapfrog : int, default=1000
        Upper bound on leapfrog steps per iteration.
    adapt_mass : bool, default=True
        Recompute the mass matrix mid-warmup.
    """

    name = "hmc"
    exact = True
    _parameter_constraints = {
        "step_size": [Interval(Real, 0, None, closed="neither"), None],
        "trajectory_length": [Interval(Real, 0, None, closed="neither")],
        "target_accept": [Interval(Real, 0, 1, closed="neither")],
        "n_leapfrog": [Interval(Integral, 1, None, closed="left"), None],
        "max_leapfrog": [Interval(Integral, 1, None, closed="left")],
        "adapt_mass": ["boolean"],
    }

    def __init__(self, step_size=None, trajectory_length=1.2, target_accept=0.8,
                 n_leapfrog=None, max_leapfrog=1000, adapt_mass=True):
        self.step_size = step_size
        self.trajectory_length = trajectory_length
        self.target_accept = target_accept
        self.n_leapfrog = n_leapfrog
        self.max_leapfrog = max_leapfrog
        self.adapt_mass = adapt_mass

    def prepare(self, model, random_state):
        self._validate_params()
        return laplace_shared(model)

    def build(self, model, shared, n_warmup):
        return HMCKernel(model, self, shared["precision"], n_warmup)
