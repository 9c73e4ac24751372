"""Full-data Hamiltonian Monte Carlo with a dense mass matrix and dual
averaging (:ref:`algo-hmc`). The potential is one fused full pass per
gradient (``FullPotential`` on the compiled model object); the leapfrog
transition is the compiled one HMC-ECS shares."""
from __future__ import annotations

import math
from numbers import Real
from typing import NamedTuple

import numpy as np
from sklearn.utils._param_validation import Interval

from .._linalg import factor_precision
from .._params import store_params
from ._adapt import TrajectoryTuner
from ._base import BaseSampler, Kernel, prepare_laplace, shared_constraints
from ._hamiltonian import FullPotential, Metric

__all__ = ["HMC", "metric_from_precision", "is_divergent", "DIVERGENCE_THRESHOLD"]

#: |energy error| above which a transition is flagged as divergent
DIVERGENCE_THRESHOLD = 1000.0


def metric_from_precision(precision, regulariser=None):
    """The Euclidean :class:`Metric` whose mass matrix is a posterior precision
    (dynamics in the whitened posterior), and its factors."""
    f = factor_precision(precision, regulariser)
    return Metric(f.chol, f.cov), f


class HMCState(NamedTuple):
    theta: np.ndarray
    potential_energy: float
    #: the potential holding the position (theta, U, grad U)
    potential: FullPotential


class HMCInfo(NamedTuple):
    accept_prob: float
    accepted: bool
    n_evals: int
    diverging: bool
    energy_error: float
    step_size: float
    n_leapfrog: int


def is_divergent(energy_error):
    """A transition whose energy error is non-finite or above the threshold."""
    return bool(not math.isfinite(energy_error) or abs(energy_error) > DIVERGENCE_THRESHOLD)


class HMCKernel(Kernel):
    def __init__(self, model, sampler, precision, n_warmup):
        self.model = model
        self.n = model.n_data
        self.metric, self.factors = metric_from_precision(precision)
        self.tuner = TrajectoryTuner(sampler.step_size, sampler.trajectory_length,
                                     sampler.target_accept, sampler.n_leapfrog,
                                     sampler.max_leapfrog)
        self.adapt_mass = sampler.adapt_mass
        self.n_warmup = n_warmup
        self.window = (n_warmup // 4, n_warmup // 2)
        self._window_sum = None
        self._window_n = 0

    def init(self, rng, theta0):
        pot = FullPotential(self.model.compiled, self.model.prior.precision,
                            self.model.pass_threads())
        U = pot.set_position(theta0)
        self.n_evals_setup += self.n
        if not np.isfinite(U):
            raise ValueError("the log posterior is not finite at the initial point")
        return HMCState(pot.position, U, pot)

    def step(self, rng, state):
        pot = state.potential
        accepted, alpha, dE, n_grad = pot.hmc_step(self.metric, rng, self.tuner.step_size,
                                                   self.tuner.n_steps)
        info = HMCInfo(alpha, accepted, int(n_grad * self.n), is_divergent(dE), dE,
                       self.tuner.step_size, self.tuner.n_steps)
        return HMCState(pot.position, pot.U, pot), info

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
                    self.metric, self.factors = metric_from_precision(
                        self.model.neg_hessian_log_posterior(centre))
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
                "mass_matrix": self.factors.precision.copy()}


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
        **shared_constraints("step_size", "trajectory_length", "n_leapfrog", "max_leapfrog"),
        "target_accept": [Interval(Real, 0, 1, closed="neither")],
        "adapt_mass": ["boolean"],
    }

    def __init__(self, step_size=None, trajectory_length=1.2, target_accept=0.8,
                 n_leapfrog=None, max_leapfrog=1000, adapt_mass=True):
        store_params(self, locals())

    def prepare(self, model, rng):
        self._validate_params()
        return prepare_laplace(model)

    def build(self, model, prepared, n_warmup):
        return HMCKernel(model, self, prepared.precision, n_warmup)
