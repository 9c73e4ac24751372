"""The contract between sampler objects, kernels and the driver.

A *sampler object* (subclass of :class:`BaseSampler`) is what users pass to
estimators: it only stores hyperparameters (scikit-learn ``get_params`` /
``set_params``, so ``GridSearchCV(clf, {"sampler__step_size": [...]})`` and
``clone`` work). The driver (:func:`bayes_subsample.sample`) uses it as::

    prepared = sampler.prepare(model, rng)         # once for all chains: a Prepared
    kernel = sampler.build(model, prepared, n_warmup)   # one per chain
    state = kernel.init(rng, theta0)
    for i in range(n_warmup):  state, info = kernel.warmup_step(rng, state, i)
    state = kernel.end_warmup(state)
    for i in range(n):  state, info = kernel.step(rng, state)    # draw: state.theta

Kernels follow BlackJAX's shape: ``State`` is a ``NamedTuple`` holding the
whole state of a chain (``state.theta`` is the draw; subsampling kernels keep
their subsample in it), ``Info`` a ``NamedTuple`` of the step's diagnostics,
recorded by the driver field by field. ``step`` changes nothing on the kernel
(tested on every registered sampler): what a chain carries from step to step
is in its State, so one kernel serves any state. Warmup is the exception, by
design: ``warmup_step`` adapts the kernel's step size, metric and (HMC-ECS) its
reference point and strata, and ``end_warmup`` fixes them. A State may own
mutable buffers (a subsample's rows, a permutation) that the next step
updates in place: a step consumes the State it is given. Every ``Info`` has
the fields

* ``accept_prob`` (float): MH acceptance probability ``min(1, ratio)`` (1.0
  without a correction; the 0/1 decision for decision-based samplers);
* ``accepted`` (bool);
* ``n_evals`` (int): per-datum likelihood (+ gradient) evaluations of the
  step, the cost measure of :ref:`algo-cost`;

and may have ``diverging`` (bool), ``energy_error`` (float) and, for
samplers whose draws carry a sign, ``sign`` (+1/-1). Evaluations outside
steps are counted in ``Prepared.n_evals`` (shared preparation) and
``Kernel.n_evals_setup`` (per-chain tuning passes).
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real
from typing import Optional

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions

from .._linalg import scale_draws

__all__ = ["BaseSampler", "Kernel", "Prepared", "LaplacePrepared", "prepare_laplace",
           "shared_constraints", "DENSE_METRIC_MAX", "MAX_STEPS", "diagonal_metric",
           "refuse_without_hessian"]


#: the most steps a sampler's ``n_steps`` (transitions per retained iteration),
#: ``n_leapfrog`` and ``max_leapfrog`` (leapfrog steps per trajectory) may ask
#: for: a larger value is a typo or an overflow, and would make one iteration
#: run for hours
MAX_STEPS = 100_000

#: the hyperparameters several samplers have, with their constraints: the same
#: name means the same thing, and takes the same values, in every sampler
SHARED_CONSTRAINTS = {
    "step_size": [Interval(Real, 0, None, closed="neither"), None],
    "adapt": ["boolean"],
    "batch_size": [Interval(Integral, 1, None, closed="left")],
    "n_steps": [Interval(Integral, 1, MAX_STEPS, closed="both")],
    "friction": [Interval(Real, 0, None, closed="neither")],
    "control_variates": ["boolean"],
    "precondition": ["boolean"],
    "check_exact": ["boolean"],
    "trajectory_length": [Interval(Real, 0, None, closed="neither")],
    "n_leapfrog": [Interval(Integral, 1, MAX_STEPS, closed="both"), None],
    "max_leapfrog": [Interval(Integral, 1, MAX_STEPS, closed="both")],
    "jitter": [Interval(Real, 0, 1, closed="left")],
    "max_tree_depth": [Interval(Integral, 1, 30, closed="both")],
    "target_accept": [Interval(Real, 0, 1, closed="neither")],
    "metric": [StrOptions({"auto", "dense", "diag"})],
}

#: the most parameters a dense (p x p) mass matrix serves with ``metric="auto"``:
#: 32 MB per matrix; beyond it the Hamiltonian samplers use a diagonal one
DENSE_METRIC_MAX = 2000


def diagonal_metric(metric, model):
    """Whether a Hamiltonian sampler with ``metric`` ("auto", "dense" or "diag")
    uses a diagonal mass matrix on ``model``: "diag", or "auto" beyond
    ``DENSE_METRIC_MAX`` parameters. The diagonal path (no ``p x p`` matrix
    anywhere: the mode by preconditioned L-BFGS, the Hessian's diagonal from
    one pass) needs a compiled GLM (or linear regression with the noise
    sampled) with its rows in memory; "auto" keeps the dense metric on other
    models, "diag" raises."""
    if metric == "dense" or (metric == "auto" and model.n_params <= DENSE_METRIC_MAX):
        return False
    able = model.diagonal_passes and not model.distributed
    if not able and metric == "diag":
        raise ValueError(
            "metric='diag' needs one of the compiled GLMs (logistic, Poisson, linear "
            f"regression) with its rows in memory, got {type(model).__name__}")
    return able


def cv_order(model, diagonal):
    """The default Taylor control-variate order on ``model``: 2 where the model
    has per-datum Hessians, 1 with a diagonal metric (order 2 needs the ``p x
    p`` Hessian sum, which the diagonal metric avoids) and for other models."""
    return min(1 if diagonal else 2, model.max_cv_order)


def shared_constraints(*names, optional=()):
    """The ``_parameter_constraints`` entries of the shared hyperparameters ``names``;
    those also in ``optional`` accept ``None`` too."""
    return {name: SHARED_CONSTRAINTS[name] + ([None] if name in optional else [])
            for name in names}


@dataclass
class Prepared:
    """What ``BaseSampler.prepare`` computes once for all chains.

    Attributes
    ----------
    theta_init : ndarray (p,)
        Centre of the default chain starts.
    init_chol : ndarray (p, p) or None
        Chains start at ``theta_init + init_chol @ z``, ``z ~ N(0, I)`` (None:
        at ``theta_init``).
    n_evals : int
        Per-datum evaluations spent preparing.
    """

    theta_init: np.ndarray
    init_chol: Optional[np.ndarray]
    n_evals: int

    def initial_point(self, model, rng):
        """A chain's default start (when ``sample`` is not given ``init``):
        ``theta_init + init_chol @ z`` with ``z`` drawn from the chain's
        generator ``rng`` (``theta_init`` itself without ``init_chol``)."""
        theta0 = np.asarray(self.theta_init, dtype=np.float64).copy()
        if self.init_chol is not None:
            theta0 = theta0 + scale_draws(self.init_chol, rng.standard_normal(len(theta0)))
        return theta0


@dataclass
class LaplacePrepared(Prepared):
    """A :class:`Prepared` with the Laplace approximation ``N(theta_map, cov)``
    (``precision = cov^-1``; ``init_chol`` is the Cholesky factor of ``cov``)."""

    precision: np.ndarray = None
    cov: np.ndarray = None


def prepare_laplace(model, diagonal=False):
    """MAP and Laplace approximation (one Newton / L-BFGS run plus one Hessian
    pass): the preparation of most samplers. ``diagonal``: the precision's
    diagonal only, every matrix a (p,) vector (wide models)."""
    from .._optimize import laplace

    refuse_without_hessian(model, "needs the posterior's mode and its Laplace approximation")
    lap = laplace(model, diagonal=diagonal)
    return LaplacePrepared(theta_init=lap["theta_map"], init_chol=lap["chol_cov"],
                           n_evals=lap["n_evals"], precision=lap["precision"],
                           cov=lap["cov"])


def refuse_without_hessian(model, what):
    """Raise a ValueError naming the samplers that run on ``model`` when it has
    no Hessian (``model.has_hessian`` False) and the caller ``what`` needs one."""
    if not model.has_hessian:
        raise ValueError(
            f"this sampler {what}, which {type(model).__name__} does not provide (it has no "
            "Hessian: has_hessian is False); the stochastic-gradient samplers 'sgld', 'sghmc', "
            "'ewsg' and 'psgld' run on it without one")


class Kernel:
    """One chain's transition kernel. Subclasses implement ``init`` and ``step``;
    ``warmup_step`` defaults to ``step`` (no adaptation)."""

    #: per-datum evaluations spent outside steps (tuning passes) by this chain
    n_evals_setup = 0

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
    the stationary distribution is the exact posterior), ``signed`` (True when
    draws carry a sign), ``prepare`` and ``build``.
    """

    name = None
    exact = True
    signed = False
    #: the sampler runs on a model whose rows live with Dask (``model.distributed``)
    serves_distributed = False
    #: what divergent transitions of a chain that subsampled mean and what to do
    #: (``Trace.check_convergence``); None: the full-data reading (a step size
    #: too large for the posterior's curvature)
    subsampled_divergences = None

    def prepare(self, model, rng) -> Prepared:
        """Work shared by all chains (deterministic given ``rng``)."""
        raise NotImplementedError

    def build(self, model, prepared, n_warmup) -> Kernel:
        """A fresh :class:`Kernel` for one chain."""
        raise NotImplementedError
