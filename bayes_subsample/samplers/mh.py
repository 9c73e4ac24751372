"""Full-data random-walk Metropolis-Hastings with an adaptive proposal."""
from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval

from ._adapt import AdaptiveRWProposal
from ._base import BaseSampler, Info, Kernel, State
from ._common import accept_prob_from_log_ratio, laplace_shared, log_uniform_open

__all__ = ["MH"]


class MHState(State):
    __slots__ = ("logp",)

    def __init__(self, theta, logp):
        self.theta = theta
        self.logp = logp


class ProposalKernel(Kernel):
    """A kernel with an adaptive proposal ``self.proposal``: adapted on each
    warmup decision, frozen at the end of warmup (MH, austerity, confidence)."""

    def warmup_step(self, rng, state, iteration):
        state, info = self.step(rng, state)
        self.proposal.adapt(state.theta, info.accepted, iteration)
        return state, info

    def end_warmup(self, state):
        self.proposal.freeze()
        return state


class MHKernel(ProposalKernel):
    def __init__(self, model, proposal):
        self.model = model
        self.proposal = proposal
        self.n = model.n_data

    def init(self, rng, theta0):
        self.n_evals_setup += self.n
        return MHState(theta0, self.model.log_posterior(theta0))

    def step(self, rng, state):
        theta_new = self.proposal.propose(rng, state.theta)
        log_u = log_uniform_open(rng)
        logp_new = self.model.log_posterior(theta_new)
        log_ratio = logp_new - state.logp + self.proposal.log_ratio(state.theta, theta_new)
        accepted = bool(np.isfinite(logp_new) and log_u < log_ratio)
        info = Info(accept_prob=accept_prob_from_log_ratio(log_ratio), accepted=accepted,
                    n_evals=self.n)
        if accepted:
            return MHState(theta_new, logp_new), info
        return state, info

    def tuning(self):
        return {"proposal_scale": self.proposal.scale,
                "proposal_chol": self.proposal.chol.copy()}


class MH(BaseSampler):
    """Random-walk Metropolis-Hastings on the full data.

    The proposal is ``theta' = theta + s L xi`` with ``L L^T`` the Laplace
    covariance at the posterior mode, adapted during warmup to the chain's
    empirical covariance (Haario et al.), and the scale ``s`` adapted by
    Robbins-Monro to acceptance 0.25 (d > 2; 0.5 otherwise). Proposal frozen
    after warmup. Every step evaluates the log-likelihood on all ``n`` data.

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
        "step_size": [Interval(Real, 0, None, closed="neither"), None],
        "adapt": ["boolean"],
        "target_accept": [Interval(Real, 0, 1, closed="neither"), None],
    }

    def __init__(self, step_size=None, adapt=True, target_accept=None):
        self.step_size = step_size
        self.adapt = adapt
        self.target_accept = target_accept

    def prepare(self, model, random_state):
        self._validate_params()
        return laplace_shared(model)

    def build(self, model, shared, n_warmup):
        prop = AdaptiveRWProposal(shared["init_cov"], scale0=self.step_size,
                                  target=self.target_accept)
        if not self.adapt:
            prop.freeze()
        return MHKernel(model, prop)
