"""Stochastic-gradient Hamiltonian Monte Carlo (SGHMC; Chen, Fox and Guestrin,
2014) with optional Taylor control variates (:ref:`algo-sgmcmc`): underdamped
Langevin dynamics on minibatch gradients, with the friction, the step size and
the preparation shared with SGLD (``sgmcmc.py``). No Metropolis-Hastings
correction: its stationary distribution is near, not at, the posterior."""
from __future__ import annotations

import warnings

import numpy as np
from sklearn.utils._param_validation import StrOptions

from .._deprecation import DEPRECATED, deprecated_constraint
from .._params import store_params
from . import _sgmcmc_fast as _fast
from ._base import shared_constraints
from ._hamiltonian import Metric
from .sgmcmc import SGSampler, SGState, _SGKernelBase, prepare_sg

__all__ = ["SGHMC"]


class SGHMCKernel(_SGKernelBase):
    def __init__(self, model, prepared, sampler, n_warmup):
        super().__init__(model, prepared, sampler, prepared.batch_size, sampler.n_steps,
                         n_warmup)
        self.friction = float(prepared.friction)
        self.refresh = bool(prepared.refresh_momentum)
        # the identity mass in the coordinates the dynamics move
        self.metric = Metric(dim=self.p)

    def init(self, rng, theta0):
        z = self._position(theta0)
        theta, warned = self._theta(z, False)
        return SGState(theta, z, rng.standard_normal(self.p), warned=warned)

    def _advance(self, rng, state, stein):
        z, mom = state.position.copy(), state.momentum.copy()
        v, z_buf, xi = np.empty(self.p), np.empty(self.p), np.empty(self.p)
        done = _fast.sghmc_steps(self.gradient, z, mom, self.refresh, self.metric,
                                 self.step_size, self.friction, self.batch_size, self.n_steps,
                                 rng, *self._scratch(), v, z_buf, xi, stein)
        return self._iteration(state, done, z, momentum=mom)

    def tuning(self):
        return {**super().tuning(), "friction": self.friction}


class SGHMC(SGSampler):
    """Stochastic-gradient Hamiltonian Monte Carlo (Chen et al. 2014) with friction
    ``C = friction * M`` and ``B_hat = 0`` (:ref:`algo-sgmcmc`). The mass ``M`` is
    the posterior precision at the mode when ``precondition`` (the dynamics run
    with the identity mass in the whitened coordinates of the Laplace
    approximation), the identity otherwise.

    Each iteration refreshes ``p ~ N(0, M)`` (``refresh_momentum=True``, as
    assumed for the HMC-ECS comparisons) and runs ``n_steps`` steps

    ``theta_l = theta_{l-1} + eps M^-1 p_{l-1}``,
    ``p_l = p_{l-1} + eps g_hat(theta_l) - eps C M^-1 p_{l-1} + N(0, 2 C eps)``

    with a fresh minibatch of ``batch_size`` iid indices per gradient and the
    same gradient estimate ``g_hat`` as :class:`SGLD` (control variates or
    plain). Warmup iterations run the same dynamics; nothing is adapted.
    ``n_steps`` is the thinning (see :class:`SGLD`). On a model without a
    Hessian the chains start as :class:`SGLD`'s, with ``M = n I``, friction
    0.1, no refresh and ``eps = 0.3 min(lam_z^-1/2, 1 / friction)`` in ``z``
    (:ref:`algo-sg-no-hessian`).
    {bias}
    Parameters
    ----------
    step_size : float, optional
        ``eps`` (in the whitened coordinates when ``precondition``; in ``z =
        sqrt(n) theta`` on a model without a Hessian); ``None`` uses
        :func:`suggest_step_size`.
    batch_size : int, optional
        Minibatch size ``m`` per gradient; ``None``: 32, or 100 on a model
        without a Hessian. At most the number of data (values up to 32 are
        taken on fewer rows too).
    n_steps : int, default=10
        Steps per iteration (``L``; the HMC-ECS paper's SGHMC uses 20 on
        HIGGS). At the default step size (``0.3`` in whitened units with
        control variates) ten steps span a trajectory of about 3, which gives
        nearly independent draws on a near-Gaussian posterior.
    friction : float, optional
        The damping rate (``None``: 1, or 0.1 on a model without a Hessian,
        the EWSG paper's value for its MLP): ``C = friction * M``, so
        ``C M^-1 p = friction * p`` and the injected noise is
        ``N(0, 2 friction eps M)``. With the identity
        mass this is ``C = friction * I`` as in the paper; preconditioned, it
        keeps the damping rate the same in whitened coordinates (a literal
        ``C = I`` next to ``M ~ n`` would barely damp, leaving the momentum-kept
        dynamics non-ergodic).
    control_variates : bool, optional
        Taylor control variates around the MAP; ``None``: True, or False on a
        model without a Hessian (True is refused there).
    precondition : bool, optional
        Mass matrix ``M``: the posterior precision at the MAP (True) or the
        identity (False). Replaces ``mass="laplace"`` / ``mass="identity"``
        (``mass`` is deprecated). ``None``: True, or, on a model without a
        Hessian, ``M = n I`` (the dynamics in ``z = sqrt(n) theta`` with unit
        mass; :ref:`algo-sg-no-hessian`; True is refused there).
    {metric}
    refresh_momentum : bool, optional
        Redraw ``p ~ N(0, M)`` at the start of every iteration (``None``: True,
        or False on a model without a Hessian, as the EWSG paper's SGHMC). Note that
        with this first-order (``theta`` first) integrator a refresh discards
        the last gradient and the ``O(eps)`` correlation between ``theta`` and
        ``p`` that the discretised dynamics builds up, which adds a bias of
        order ``1 / n_steps`` that does not vanish as ``eps -> 0`` at fixed
        ``n_steps`` (about 10% of the variance at ``n_steps=10`` on a Gaussian).
        ``False`` keeps the momentum across iterations (an uninterrupted
        underdamped Langevin discretisation whose bias is ``O(eps)``).
    {check}

    Notes
    -----
    ``Info.n_evals = n_steps * batch_size`` per-datum gradients (twice that for
    a user model with control variates); ``trace.stats["data_passes"]`` is
    cumulative as for :class:`SGLD`.

    Examples
    --------
    {example: SGHMC(batch_size=20, n_steps=10)}
    """

    name = "sghmc"
    _parameter_constraints = {
        **shared_constraints("step_size", "batch_size", "n_steps", "friction", "control_variates",
                             "precondition", "metric",
                             optional=("batch_size", "friction", "control_variates",
                                       "precondition")),
        "refresh_momentum": ["boolean", None],
        "mass": deprecated_constraint(StrOptions({"identity", "laplace"})),
        "check_spread": ["boolean"],
    }

    def __init__(self, step_size=None, batch_size=None, n_steps=10, friction=None,
                 control_variates=None, precondition=None, refresh_momentum=None,
                 mass=DEPRECATED, metric="auto", check_spread=True):
        store_params(self, locals())

    def prepare(self, model, rng):
        self._validate_params()
        precondition = None
        if self.mass != DEPRECATED:
            warnings.warn("SGHMC(mass=...) is deprecated and will be removed in 0.3; use "
                          "SGHMC(precondition=True) for mass='laplace' and "
                          "precondition=False for mass='identity'", FutureWarning,
                          stacklevel=2)
            precondition = self.mass == "laplace"
        return prepare_sg(self, model, precondition=precondition)

    def build(self, model, prepared, n_warmup):
        return SGHMCKernel(model, prepared, self, n_warmup)

