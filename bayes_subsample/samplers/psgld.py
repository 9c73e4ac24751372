"""Preconditioned stochastic-gradient Langevin dynamics (pSGLD: Li, Chen,
Carlson and Carin, AAAI 2016; :ref:`algo-psgld`).

SGLD with RMSprop's diagonal preconditioner: each coordinate's step is divided
by the root mean square of its recent minibatch gradients, so coordinates with
small gradients (a network's flat directions) move as fast as steep ones. The
steps run in the ``nogil`` loop ``psgld_steps`` of ``_sgmcmc_fast.pyx`` with
the shared ``GradientEstimator`` on the model's compiled object.
"""
from __future__ import annotations

from numbers import Real
from typing import NamedTuple

import numpy as np
from sklearn.utils._param_validation import Interval

from .._params import store_params
from . import _sgmcmc_fast as _fast
from ._base import shared_constraints
from .sgmcmc import SGSampler, _SGKernelBase, prepare_sg

__all__ = ["PSGLD"]


class PSGLDState(NamedTuple):
    theta: np.ndarray
    #: the coordinates the dynamics move (``theta`` itself: the preconditioner is
    #: pSGLD's own metric)
    position: np.ndarray
    #: ``V``, the running mean of the squared per-datum average gradients
    second_moment: np.ndarray
    #: per-datum evaluations of the chain's steps so far (warmup included)
    n_evals: int = 0
    #: whether the chain has warned that it visits suspect points (it warns once)
    warned: bool = False


class PSGLDKernel(_SGKernelBase):
    # the preconditioner is the metric: the dynamics move theta on every model
    scale_without_laplace = False

    def __init__(self, model, prepared, sampler, n_warmup):
        super().__init__(model, prepared, sampler, prepared.batch_size, sampler.n_steps,
                         n_warmup)
        self.alpha = float(sampler.alpha)
        self.damping = float(sampler.damping)
        self.v0 = np.asarray(prepared.second_moment, dtype=np.float64)

    def init(self, rng, theta0):
        z = self._position(theta0)
        theta, warned = self._theta(z, False)
        return PSGLDState(theta, z, self.v0.copy(), warned=warned)

    def _advance(self, rng, state, stein):
        z, v = state.position.copy(), state.second_moment.copy()
        done = _fast.psgld_steps(self.gradient, z, v, self.alpha, self.damping,
                                 self.step_size, self.batch_size, self.n_steps, rng,
                                 *self._scratch(), stein)
        return self._iteration(state, done, z, second_moment=v)

    def tuning(self):
        return {**super().tuning(), "alpha": self.alpha, "damping": self.damping}


class PSGLD(SGSampler):
    """Preconditioned SGLD (Li, Chen, Carlson and Carin 2016; :ref:`algo-psgld`):
    SGLD with RMSprop's diagonal preconditioner, in the paper's practical form
    (its ``Gamma`` correction term omitted).

    Each step draws ``batch_size`` indices iid uniformly (with replacement),
    forms the unbiased gradient estimate of the log posterior
    ``g = grad log p(theta) + n/m sum_i grad l_{u_i}(theta)`` (no control
    variates: the preconditioner would follow their small noise), and with
    ``gbar = g / n`` (the minibatch's per-datum average) moves every
    coordinate ``j``::

        V_j     <- alpha V_j + (1 - alpha) gbar_j^2
        G_j     =  1 / (damping + sqrt(V_j))
        theta_j <- theta_j + eps/2 G_j g_j + sqrt(eps G_j) xi_j

    (the Welling-Teh convention of :class:`~bayes_subsample.samplers.SGLD`; the
    paper's ``epsilon_t``). ``V`` is part of the chain's state. Warmup
    iterations run the same dynamics; nothing else is adapted.

    On a model with a Hessian the chains start from draws of the Laplace
    approximation (``prepare`` finds the MAP), with ``V`` at its stationary
    value estimated there, and the default step is SGLD's rule
    (:func:`~bayes_subsample.samplers.suggest_step_size`) in the coordinates of
    that preconditioner, ``eps = 0.3 q / lambda_max(G^1/2 P G^1/2)`` with ``P``
    the posterior precision at the mode and ``q = min(1, b / n)``. On a model
    without a Hessian (``model.has_hessian`` False:
    :class:`~bayes_subsample.models.MLPModel`) each chain starts from
    ``model.init_params`` drawn from its own generator with ``V = 0`` (as the
    paper), and the default step is ``eps = 0.01 / n`` (an RMSprop learning
    rate of 0.005 on the average per-datum gradient; :ref:`algo-sg-no-hessian`).
    {bias}
    The omitted ``Gamma`` term, the divergence of ``G`` as a function of
    ``theta``, adds a bias of the order of ``(1 - alpha)`` times the variation
    of ``G`` over the posterior's width (Li et al. 2016, section 4); on a
    Gaussian posterior ``G`` barely varies and the stationary mean is exact.

    Parameters
    ----------
    step_size : float, optional
        ``eps`` above (in ``theta``); ``None`` uses the default step of the
        model's case (above).
    batch_size : int, optional
        Minibatch size ``m`` (iid indices, fresh at every step); ``None``: 32,
        or 100 on a model without a Hessian. At most the number of data
        (values up to 32 are taken on fewer rows too).
    n_steps : int, default=10
        Steps per retained iteration: the thinning (a run keeps ``n_samples``
        draws of ``n_steps * (n_warmup + n_samples)`` steps).
    alpha : float, default=0.99
        Decay of the running mean of squared gradients (RMSprop's ``rho``).
    damping : float, default=1e-5
        ``lambda``, added to ``sqrt(V)`` (the paper's value): bounds ``G`` by
        ``1 / damping`` where the gradients vanish.
    metric : {"auto", "dense", "diag"}, default="auto"
        The Laplace approximation that starts the chains and measures the
        default step on a model with a Hessian: dense, or diagonal beyond
        2,000 parameters (``"auto"``; see :class:`SGLD`).
    {check}

    Notes
    -----
    ``Info.n_evals = n_steps * batch_size`` per-datum gradients;
    ``trace.stats["data_passes"]`` is cumulative as for
    :class:`~bayes_subsample.samplers.SGLD`.

    Examples
    --------
    >>> from bayes_subsample.samplers import PSGLD
    {example: PSGLD(batch_size=50)}
    """

    name = "psgld"
    _parameter_constraints = {
        **shared_constraints("step_size", "batch_size", "n_steps", "metric",
                             optional=("batch_size",)),
        "alpha": [Interval(Real, 0, 1, closed="left")],
        "damping": [Interval(Real, 0, None, closed="neither")],
        "check_spread": ["boolean"],
    }

    def __init__(self, step_size=None, batch_size=None, n_steps=10, alpha=0.99, damping=1e-5,
                 metric="auto", check_spread=True):
        store_params(self, locals())

    def prepare(self, model, rng):
        self._validate_params()
        return prepare_sg(self, model)

    def build(self, model, prepared, n_warmup):
        return PSGLDKernel(model, prepared, self, n_warmup)

