"""Exponentially weighted stochastic gradients (EWSG) for stochastic-gradient
underdamped Langevin dynamics (:ref:`algo-ewsg`).

The minibatch used at each Euler-Maruyama step is chosen non-uniformly, by a
short Metropolis chain over minibatch indices whose target weights
``p_J ~ exp(h / (2 sigma^2) ||gamma r + n_b grad V_J(theta)||^2)`` make the
stochastic step's transition kernel match the full-gradient one. The whole
step (block gradients by the shared ``GradientEstimator``, index chain,
integrator) runs in the ``nogil`` loop of ``_sgmcmc_fast.pyx`` on the model's
compiled object.
"""
from __future__ import annotations

from numbers import Integral
from typing import NamedTuple

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from .. import _rng
from .._params import store_params
from . import _sgmcmc_fast as _fast
from ._base import shared_constraints
from .sgmcmc import SG_INFO_FIELDS, SGSampler, _SGKernelBase, prepare_sg

__all__ = ["EWSG"]


class EWSGState(NamedTuple):
    theta: np.ndarray
    #: the coordinates the dynamics move (whitened: theta = theta_map + L position)
    position: np.ndarray
    momentum: np.ndarray
    #: the current minibatch J (persistent index chain; -1: none)
    index: int
    #: the random partition of the data into minibatches (reshuffled in place)
    partition: np.ndarray
    #: minibatches evaluated since the last reshuffle
    blocks_since_shuffle: int
    #: per-datum evaluations of the chain's steps so far (warmup included)
    n_evals: int = 0
    #: whether the chain has warned that it visits suspect points (it warns once)
    warned: bool = False


#: SG_INFO_FIELDS and ``index_accept``, the fraction of index proposals
#: accepted (nan when M = 0)
EWSGInfo = NamedTuple("EWSGInfo", SG_INFO_FIELDS + [("index_accept", float)])


class EWSGKernel(_SGKernelBase):
    def __init__(self, model, prepared, sampler, n_warmup):
        batch_size = int(min(prepared.batch_size, model.n_data))
        super().__init__(model, prepared, sampler, batch_size, sampler.n_steps, n_warmup)
        self.friction = float(prepared.friction)
        self.n_blocks = -(-self.n // self.batch_size)
        self.index_chain_length = int(sampler.index_chain_length)
        self.persistent = sampler.index_chain == "persistent"

    def init(self, rng, theta0):
        z = self._position(theta0)
        r = rng.standard_normal(self.p)               # r ~ N(0, I): its stationary law
        perm = np.arange(self.n, dtype=np.int64)
        _rng.shuffle(rng, perm)                       # the first random partition
        theta, warned = self._theta(z, False)
        return EWSGState(theta, z, r, -1, perm, 0, warned=warned)

    def _advance(self, rng, state, stein):
        z, r = state.position.copy(), state.momentum.copy()
        chain = np.array([state.index, state.blocks_since_shuffle], dtype=np.int64)
        done, n_acc, n_data = _fast.ewsg_steps(
            self.gradient, z, r, state.partition, chain, self.batch_size,
            self.index_chain_length, self.persistent, self.step_size, self.friction,
            self.n_steps, rng, np.empty(self.p), np.empty(self.p), stein)
        n_data *= self.gradient.evals_per_datum
        J = int(chain[0]) if self.persistent else -1
        state = self._moved(state, done, z, n_data, momentum=r, index=J,
                            blocks_since_shuffle=int(chain[1]))
        n_prop = self.index_chain_length * self.n_steps
        return state, EWSGInfo(1.0, True, int(n_data), state.n_evals / self.n,
                               n_acc / n_prop if n_prop else np.nan)

    def tuning(self):
        return {**super().tuning(), "friction": self.friction, "n_blocks": self.n_blocks,
                "index_chain_length": self.index_chain_length}


class EWSG(SGSampler):
    """Exponentially weighted stochastic gradients for underdamped Langevin
    dynamics (the EWSG paper's Algorithm 1; :ref:`algo-ewsg`).

    Euler-Maruyama steps of ``d theta = r dt``,
    ``dr = -(grad V(theta) + gamma r) dt + sigma dW`` with ``sigma = sqrt(2 gamma)``
    (unit mass, temperature 1)::

        theta_{k+1} = theta_k + h r_k
        r_{k+1}     = r_k - h (g_J + gamma r_k) + sigma sqrt(h) xi

    where ``V = sum_i V_i``, ``V_i = -l_i - log p(theta) / n``, the data are
    split into a random partition of ``n_b = ceil(n / b)`` minibatches ``B_J``
    (reshuffled after every ``n_b`` minibatch gradients, i.e. once per data
    pass) and ``g_J = n_b grad V_J(theta_k)``. The minibatch ``J`` is picked by
    an index Metropolis chain of ``index_chain_length`` uniform proposals with
    weights ``exp(h / (2 sigma^2) ||gamma r_k + g_J||^2)`` (the kernel-matching
    weights with ``x = sqrt(h) gamma r_k / sigma``); the chosen gradient is not
    reweighted. With ``index_chain_length=0`` this is plain uniform-minibatch
    underdamped Langevin (the EWSG paper's "SGHMC" baseline).
    Warmup iterations run the same dynamics; nothing is adapted. ``prepare``
    computes the MAP (chain starts) and, if ``step_size=None``, the suggested
    step size; its passes are counted in ``Trace.n_evals_prepare``. On a
    model without a Hessian the chains start from ``model.init_params``
    (drawn from each chain's generator) in ``z = sqrt(n) theta``, with
    ``b = 100``, ``gamma = 0.1`` and ``h = 0.2 min(lam_z^-1/2, 1 / gamma)``
    (``lam_z`` the curvature at such a start in ``z``;
    :ref:`algo-sg-no-hessian`).
    {bias}
    Parameters
    ----------
    step_size : float, optional
        ``h`` (in the whitened coordinates when ``precondition``; in ``z =
        sqrt(n) theta`` on a model without a Hessian, the paper's unit for its
        MLP); ``None`` uses :func:`suggest_step_size` (``sampler="ewsg"``).
    batch_size : int, optional
        Minibatch size ``b``; ``None``: 32, or 100 on a model without a
        Hessian. At most ``n`` (values up to 32 are capped at ``n``; larger
        ones are refused before any work).
    friction : float, optional
        ``gamma`` (the paper uses 10 on its Gaussian example, 50 on covtype,
        both in unwhitened units, and 0.1 on its MLP). ``None``: 2, or 0.1 on
        a model without a Hessian. Preconditioned, the posterior is close to
        ``N(0, I)`` and ``gamma = 2`` is critical damping, the fastest mixing
        for unit curvature; a larger ``gamma`` is overdamped and slower.
    index_chain_length : int, default=1
        ``M``, Metropolis steps of the index chain per iteration (0: uniform).
    index_chain : {"restart", "persistent"}, default="restart"
        ``"restart"`` starts each step's index chain from a uniform draw (as
        Algorithm 1 is written); ``"persistent"`` starts it from the previous
        step's minibatch, re-evaluated at the new ``theta`` (as the paper's
        text argues). Same cost either way.
    n_steps : int, default=10
        Euler-Maruyama steps per retained iteration (the thinning: a run keeps
        ``n_samples`` draws of ``n_steps * (n_warmup + n_samples)`` steps).
    control_variates : bool, optional
        Taylor control variates around the MAP, as for :class:`SGLD`: the
        block gradients ``g_J`` are then ``grad log p + grad Q + n_b sum_{i in
        B_J} grad (l_i - q_i)``, still summing to the full gradient over the
        partition, and the index chain weighs the residual terms. This is the
        paper's suggested combination of EWSG with variance reduction (its
        SVRG variant, with the anchor fixed at the MAP). ``False``: Algorithm 1
        as published, whose minibatch noise (``~ n / b`` in whitened units)
        needs a step size ``~ b / n`` times smaller. ``None``: True, or False
        on a model without a Hessian (True is refused there).
    precondition : bool, optional
        Run the dynamics (unit mass, as the paper writes them) in the whitened
        coordinates of the Laplace approximation, i.e. with the posterior
        precision at the mode as the mass matrix in ``theta``; ``h`` is then in
        whitened units. ``False``: unit mass in ``theta``. ``None``: True, or,
        on a model without a Hessian, unit mass in ``z = sqrt(n) theta``
        (where the potential is the average of the per-datum terms, as the
        paper's MLP experiment writes it; :ref:`algo-sg-no-hessian`; True is
        refused there).
    {metric}
    {check}

    Notes
    -----
    Cost: ``(M + 1) b`` per-datum gradients per step (``Info.n_evals``, exact
    block sizes); ``K`` data passes are ``iterations_for_passes(K, n, b, M,
    n_steps)`` iterations. ``trace.stats["index_accept"]`` is the fraction of
    index proposals accepted in the iteration (nan when ``M = 0``) and
    ``trace.stats["data_passes"]`` the cumulative data passes of the chain's
    steps (warmup included).

    Examples
    --------
    {example: EWSG(batch_size=20)}
    >>> bool(0 <= np.nanmean(trace.stats["index_accept"]) <= 1)
    True
    """

    name = "ewsg"
    _parameter_constraints = {
        **shared_constraints("step_size", "batch_size", "friction", "n_steps",
                             "control_variates", "precondition", "metric",
                             optional=("batch_size", "friction", "control_variates",
                                       "precondition")),
        "index_chain_length": [Interval(Integral, 0, None, closed="left")],
        "index_chain": [StrOptions({"restart", "persistent"})],
        "check_spread": ["boolean"],
    }

    def __init__(self, step_size=None, batch_size=None, friction=None, index_chain_length=1,
                 index_chain="restart", n_steps=10, control_variates=None, precondition=None,
                 metric="auto", check_spread=True):
        store_params(self, locals())

    def prepare(self, model, rng):
        self._validate_params()
        return prepare_sg(self, model, cap_batch=True)

    def build(self, model, prepared, n_warmup):
        return EWSGKernel(model, prepared, self, n_warmup)

