"""Full-data random-walk Metropolis-Hastings with an adaptive proposal
(:ref:`algo-mh`), and the kernel base of the MH family."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _rng
from .._params import store_params
from ._base import BaseSampler, Kernel, diagonal_metric, prepare_laplace, shared_constraints
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


#: Info fields that add up over the transitions of an iteration
_SUMMED = ("n_evals", "n_batches")


def combine_infos(infos):
    """One Info for ``n_steps`` transitions made as one retained iteration:
    evaluation and batch counts add up, ``accepted`` says whether the retained
    draw moved, every other field (acceptance probabilities, data fractions,
    decision-error indicators) is averaged over the transitions."""
    if len(infos) == 1:
        return infos[0]
    values = []
    for name in infos[0]._fields:
        column = [getattr(i, name) for i in infos]
        if name in _SUMMED:
            values.append(int(sum(column)))
        elif name == "accepted":
            values.append(any(column))
        else:
            values.append(float(np.mean(column)))
    return type(infos[0])(*values)


def resolve_n_steps(n_steps, model):
    """Transitions per retained iteration: ``None`` is the number of parameters."""
    return int(model.n_params) if n_steps is None else int(n_steps)


class ProposalKernel(Kernel):
    """A kernel with a proposal ``self.proposal`` (the protocol of
    ``_proposals``): adapted on each warmup decision, frozen at the end of warmup
    (MH, austerity, confidence). A retained iteration makes ``n_steps``
    transitions (:meth:`transition`), the Infos combined by :func:`combine_infos`."""

    n_steps = 1

    def transition(self, rng, state):
        raise NotImplementedError

    def _transitions(self, rng, state, iteration=None):
        """``n_steps`` transitions; in warmup (``iteration`` given) the proposal
        adapts after each, indexed by transition."""
        infos = []
        for k in range(self.n_steps):
            state, info = self.transition(rng, state)
            if iteration is not None:
                self.proposal.adapt(state.theta, info.accepted, iteration * self.n_steps + k)
            infos.append(info)
        return state, combine_infos(infos)

    def step(self, rng, state):
        return self._transitions(rng, state)

    def warmup_step(self, rng, state, iteration):
        return self._transitions(rng, state, iteration)

    def end_warmup(self, state):
        self.proposal.freeze()
        return state

    def tuning(self):
        return {**self.proposal.tuning(), "n_steps": self.n_steps}


class MHKernel(ProposalKernel):
    def __init__(self, model, proposal, n_steps=1):
        self.model = model
        self.proposal = proposal
        self.n = model.full_pass_cost     # per-datum evaluations of a full pass
        self.n_steps = int(n_steps)

    def init(self, rng, theta0):
        self.n_evals_setup += self.n
        logp = self.model.log_posterior(theta0)
        if np.isnan(logp) or logp == np.inf:
            # every ratio from here would be NaN or inf - inf: the chain could never move
            # (a start at -inf moves: any proposal with a finite log-posterior is accepted)
            raise self.model.overflow_error(
                f"at a chain's initial point (max |theta| = {np.max(np.abs(theta0)):.3g}; "
                "pass init= where the log-posterior is finite)", theta0)
        return MHState(theta0, logp)

    def transition(self, rng, state):
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
    n_steps : int, optional
        Transitions per retained draw (thinning); ``None`` (default) makes one
        per parameter (``d``). A random walk moves about ``1/sqrt(d)`` posterior
        standard deviations per step, so consecutive transitions have an
        inefficiency factor of several times ``d`` (90-210 measured at
        ``d = 29`` on the HIGGS sample); ``d`` transitions per draw keep the
        draws' inefficiency near 5 for ``d`` times the cost per draw. Warmup
        iterations make as many, and the proposal adapts at each.
    metric : {"auto", "dense", "diag"}, default="auto"
        The Laplace approximation the proposal starts from: dense, or diagonal
        (wide models, compiled GLMs: no ``p x p`` matrix anywhere -- the mode by
        L-BFGS, the precision's diagonal from one pass, a random walk whose
        variances adapt to the chain's marginal variances; ``O(p)`` work a
        proposal). ``"auto"``: dense up to 2,000 parameters, diagonal beyond.
        See :ref:`scaling-wide`.

    Examples
    --------
    >>> from bayes_subsample import sample
    >>> from bayes_subsample.datasets import make_logistic_data
    >>> from bayes_subsample.models import LogisticRegressionModel
    >>> from bayes_subsample.samplers import MH
    >>> X, y = make_logistic_data(500, 2, random_state=0)
    >>> trace = sample(LogisticRegressionModel(X, y), MH(), n_samples=1000, n_warmup=500,
    ...                random_state=0)
    >>> trace.tuning[0]["n_steps"]             # one transition per parameter
    3
    """

    name = "mh"
    exact = True
    _parameter_constraints = {
        **shared_constraints("step_size", "adapt", "target_accept", "n_steps", "metric",
                             optional=("target_accept", "n_steps")),
    }

    def __init__(self, step_size=None, adapt=True, target_accept=None, n_steps=None,
                 metric="auto"):
        store_params(self, locals())

    def prepare(self, model, rng):
        self._validate_params()
        return prepare_laplace(model, diagonal=diagonal_metric(self.metric, model))

    def build(self, model, prepared, n_warmup):
        return MHKernel(model, RandomWalkProposal(prepared.cov, scale0=self.step_size,
                                                  target=self.target_accept,
                                                  adapt=self.adapt),
                        resolve_n_steps(self.n_steps, model))
