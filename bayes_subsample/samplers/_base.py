"""The sampler kernel shape shared by every algorithm.

A *sampler object* (subclass of :class:`BaseSampler`) is what users pass to
estimators: it only stores hyperparameters (scikit-learn ``get_params`` /
``set_params``, so ``GridSearchCV(clf, {"sampler__step_size": [...]})`` and
``clone`` work). The driver (:func:`bayes_subsample.sample`) uses it as::

    shared = sampler.prepare(model, seed)          # once for all chains (e.g. MAP, theta*)
    kernel = sampler.build(model, shared, n_warmup) # one per chain
    state = kernel.init(rng, theta0)
    for i in range(n_warmup):  state, info = kernel.warmup_step(rng, state, i)
    state = kernel.end_warmup(state)
    for i in range(n_samples): state, info = kernel.step(rng, state)

``State`` holds only what the next step needs (``state.theta`` is the draw);
:class:`Info` holds the step's diagnostics. Per-datum evaluations are counted
in ``Info.n_evals`` (steps) and ``Kernel.n_evals_setup`` / ``shared["n_evals"]``
(tuning and full-data passes), as ALGORITHMS.md §6 defines cost.
"""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

__all__ = ["BaseSampler", "Kernel", "Info", "State"]


class State:
    """Minimal kernel state: the current parameter vector (subclasses add fields)."""

    __slots__ = ("theta",)

    def __init__(self, theta):
        self.theta = theta


class Info:
    """Diagnostics of one step.

    Attributes
    ----------
    accept_prob : float
        MH acceptance probability ``min(1, ratio)`` (1.0 for samplers without
        a correction; for decision-based samplers the 0/1 decision).
    accepted : bool
    diverging : bool
        Energy error above the divergence threshold (HMC family).
    energy_error : float
        ``H(end) - H(start)`` (nan where not applicable).
    n_evals : int
        Per-datum likelihood (+gradient) evaluations spent by this step.
    extra : dict or None
        Sampler-specific scalars (e.g. ``sigma2``, ``alpha_u``, ``sign``,
        ``data_fraction``); the driver stores each as a per-iteration array.
    """

    __slots__ = ("accept_prob", "accepted", "diverging", "energy_error", "n_evals", "extra")

    def __init__(self, accept_prob=1.0, accepted=True, diverging=False,
                 energy_error=np.nan, n_evals=0, extra=None):
        self.accept_prob = accept_prob
        self.accepted = accepted
        self.diverging = diverging
        self.energy_error = energy_error
        self.n_evals = n_evals
        self.extra = extra


class Kernel:
    """One chain's transition kernel. Subclasses implement ``init`` and ``step``;
    ``warmup_step`` defaults to ``step`` (no adaptation)."""

    #: per-datum evaluations spent outside steps (tuning passes) by this chain
    n_evals_setup = 0
    #: True when draws carry a sign (signed HMC-ECS): Info.extra["sign"]
    signed = False

    def init(self, rng, theta0):
        raise NotImplementedError

    def step(self, rng, state):
        raise NotImplementedError

    def warmup_step(self, rng, state, iteration):
        return self.step(rng, state)

    def end_warmup(self, state):
        return state

    def tuning(self):
        """Tuned quantities to report (step size, L, theta*, m, ...)."""
        return {}


class BaseSampler(BaseEstimator):
    """Base class of sampler objects (hyperparameters only).

    Subclasses define ``name`` (the registered string), ``exact`` (True when
    the stationary distribution is the exact posterior), ``prepare`` and
    ``build``.
    """

    name = None
    exact = True
    #: needs a GLM (compiled kernels) rather than any Model
    requires_glm = False

    def prepare(self, model, random_state):
        """Work shared by all chains (deterministic given ``random_state``).

        Returns a dict; key ``"n_evals"`` counts its per-datum evaluations and
        ``"theta_init"`` / ``"init_cov"`` give the default chain starts.
        """
        raise NotImplementedError

    def build(self, model, shared, n_warmup):
        """A fresh :class:`Kernel` for one chain."""
        raise NotImplementedError

    def _check_model(self, model):
        from ..models._glm import GLM
        if self.requires_glm and not isinstance(model, GLM):
            raise TypeError(
                f"{type(self).__name__} needs a compiled GLM model (logistic, Poisson, Gaussian); "
                f"got {type(model).__name__}"
            )
