"""Full-data random-walk Metropolis-Hastings with an adaptive proposal
(:ref:`algo-mh`), and the kernel base of the MH family."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _rng
from .._params import store_params
from ._base import BaseSampler, Kernel, prepare_laplace, shared_constraints
from ._proposals import RandomWalkProposal

__all__ = ["MH"]


def accept_prob_from_log_ratio(log_ratio):
    """``min(1, exp(log_ratio))`` (0 for NaN, limits for infinities)."""
    if not np.isfinite(log_ratio):
        return 0.0 if (np.isnan(log_ratio) or log_ratio < 0) else 1.0
    return 1.0 if log_ratio >= 0 else float(np.exp(log_ratio))


class MHState(NamedTuple):
    theta: np.ndarray
    logp: float            # log posterior at theta (up to a constant)


class MHInfo(NamedTuple):
    accept_prob: float
    accepted: bool
    n_evals: int


class ProposalKernel(Kernel):
    """A kernel with a proposal ``self.proposal`` (the protocol of
    ``_proposals``): adapted on each warmup decision, frozen at the end of warmup
    (MH, austerity, confidence)."""

    def warmup_step(self, rng, state, iteration):
        state, info = self.step(rng, state)
        self.proposal.adapt(state.theta, info.accepted, iteration)
        return state, info

    def end_warmup(self, state):
        self.proposal.freeze()
        return state

    def tuning(self):
        return self.proposal.tuning()


class MHKernel(ProposalKernel):
    def __init__(self, model, proposal):
        self.model = model
        self.proposal = proposal
        self.n = model.n_data

    def init(self, rng, theta0):
        self.n_evals_setup += self.n
        return MHState(theta0, self.model.log_posterior(theta0))

    def step(self, rng, state):
        theta_new, log_q_ratio, n_prop = self.proposal.propose(rng, state.theta)
        log_u = _rng.log_uniform(rng)
        logp_new = self.model.log_posterior(theta_new)
        log_ratio = logp_new - state.logp + log_q_ratio
        accepted = bool(np.isfinite(logp_new) and log_u < log_ratio)
        info = MHInfo(accept_prob_from_log_ratio(log_ratio), accepted, self.n + n_prop)
        if accepted:
            return MHState(theta_new, logp_new), info
        return state, info


class MH(BaseSampler):
    """Random-walk Metropolis-Hastings on the full data.

    The proposal is ``theta' = theta + s L xi`` with ``L L^T`` the Laplace
    covariance at the posterior mode, adapted during warmup to the chain's
    empirical covariance (Haario et al.), and the scale ``s`` adapted by
    Robbins-Monro to acceptance 0.25 (d > 2; 0.5 otherwise). Proposal frozen
    after warmup. Every step evaluates the log-likelihood on all ``n`` data.
    See :ref:`algo-mh`.

    Parameters
    ----------
    step_size : float, optional
        Initial proposal scale ``s`` (default ``2.38 / sqrt(d)``).
    adapt : bool, default=True
        Adapt covariance and scale during warmup.
    target_accept : float, optional
        Target acceptance rate (default 0.25 for d > 2, else 0.5).

    Examples
    --------
    >>> from bayes_subsample import BayesianLogisticRegression
    >>> from bayes_subsample.samplers import MH
    >>> clf = BayesianLogisticRegression(sampler=MH(), n_samples=200, n_warmup=200)
    """

    name = "mh"
    exact = True
    _parameter_constraints = {
        **shared_constraints("step_size", "adapt", "target_accept",
                             optional=("target_accept",)),
    }

    def __init__(self, step_size=None, adapt=True, target_accept=None):
        store_params(self, locals())

    def prepare(self, model, rng):
        self._validate_params()
        return prepare_laplace(model)

    def build(self, model, prepared, n_warmup):
        return MHKernel(model, RandomWalkProposal(prepared.cov, scale0=self.step_size,
                                                  target=self.target_accept,
                                                  adapt=self.adapt))
