"""The approximate-MH kernel shared by austerity MH and the confidence sampler:
MH whose accept/reject decision is made by a *decision rule* on a subsample
(:ref:`algo-austerity`, :ref:`algo-confidence`).

The MH decision ``log u < log pi(theta') - log pi(theta) + log q-ratio`` is
rewritten as ``sum_k t_k > threshold`` over the ``n`` data, with
``t_k = l_k(theta') - l_k(theta)`` and
``threshold = log u + log p(theta) - log p(theta') - log q-ratio``; a rule
(``SequentialTestRule``, ``ConfidenceRule``) decides it from data drawn
without replacement by the compiled loops of ``_approx_mh_fast``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .. import _rng
from ..exceptions import SamplingError
from ..control_variates import TaylorControlVariate
from ..models import RowStrata
from . import _approx_mh_fast as _fast
from ._base import BaseSampler, LaplacePrepared
from ._proposals import RandomWalkProposal, SGLDProposal
from ._sgmcmc_fast import GradientEstimator
from .mh import ProposalKernel

__all__ = ["ApproxMHKernel", "ProxyPrepared", "build_proposal", "model_has_proxy",
           "prepare_proxy", "resolve_first_batch"]


class ApproxMHState(NamedTuple):
    theta: np.ndarray
    log_prior: float
    #: generator of the subsample draws (spawned from the chain's generator)
    sub_rng: np.random.Generator
    #: the persistent permutation of the lazy Fisher-Yates draws (updated in
    #: place) of the indices the rule samples from (all data, or a stratum)
    perm: np.ndarray


class ApproxMHInfo(NamedTuple):
    accept_prob: float
    accepted: bool
    n_evals: int
    data_fraction: float      # data examined / n
    n_batches: int            # checks made


class CheckedApproxMHInfo(NamedTuple):
    accept_prob: float
    accepted: bool
    n_evals: int
    data_fraction: float
    n_batches: int
    wrong_decision: bool      # the decision differs from exact MH's with the same u
    exact_accept: bool


class ApproxMHKernel(ProposalKernel):
    """MH with a subsampled accept/reject decision.

    Random numbers: the proposal noise and ``u`` come from the chain's main
    generator in the same order as :class:`~bayes_subsample.samplers.MH`
    (proposal normals, then ``log u``); subsample indices come from a
    separate generator spawned from it in :meth:`init` (spawning does not
    advance the main stream). With an exact decision rule the chain is
    therefore draw-for-draw the full-data MH chain of the same seed.

    Cost convention (``n_evals``): 2 per examined datum (``l_k`` is evaluated
    at ``theta`` and ``theta'``; nothing is cached across steps), plus the
    proposal's gradient evaluations (SGLD). Exact MH caches ``l(theta)`` and
    counts ``n`` per step, so the break-even data fraction is 0.5. The warmup
    decisions checked against exact MH (:class:`DecisionChecks`) count ``2 n``
    each; ``check_exact`` evaluations are diagnostics and are not counted.
    """

    def __init__(self, model, proposal, rule, check_exact=False, n_steps=1):
        self.n_steps = int(n_steps)
        self.model = model
        self.proposal = proposal
        self.rule = rule
        self.check_exact = bool(check_exact)
        self.n = model.n_data
        self.checks = DecisionChecks(rule)
        self._in_warmup = False

    def warmup_step(self, rng, state, iteration):
        self._in_warmup = True
        return super().warmup_step(rng, state, iteration)

    def end_warmup(self, state):
        self._in_warmup = False
        return super().end_warmup(state)

    def tuning(self):
        return {**super().tuning(), **self.checks.report()}

    def init(self, rng, theta0):
        theta0 = np.asarray(theta0, dtype=np.float64)
        return ApproxMHState(theta0, self.model.prior.log_prob(theta0), rng.spawn(1)[0],
                             self.rule.initial_perm())

    def transition(self, rng, state):
        theta = state.theta
        theta_new, log_q_ratio, n_prop = self.proposal.propose(rng, theta)
        log_u = _rng.log_uniform(rng)
        finite = bool(np.all(np.isfinite(theta_new)))
        lp_new = self.model.prior.log_prob(theta_new) if finite else -np.inf
        # accept iff sum_k t_k > log u + log p(theta) - log p(theta') - log q-ratio
        threshold = log_u + state.log_prior - lp_new - log_q_ratio
        if np.isfinite(threshold):
            theta_new = np.ascontiguousarray(theta_new, dtype=np.float64)
            accepted, n_used, n_batches = self.rule.decide(state, theta_new, threshold)
        else:
            # non-finite proposal, prior or proposal density: reject without data
            accepted, n_used, n_batches = False, 0, 0
        accepted = bool(accepted)
        checking = self._in_warmup and self.checks.due(2 * n_used, np.isfinite(threshold))
        n_evals = 2 * n_used + n_prop + (2 * self.n if checking else 0)
        fields = (float(accepted), accepted, n_evals, n_used / self.n, n_batches)
        if self.check_exact or checking:
            margin = (self.checks.exact_sum(state.theta, theta_new) - threshold
                      if np.isfinite(threshold) else -np.inf)
            exact = bool(margin > 0)
            # only the budgeted checks steer the run: check_exact is a diagnostic
            # and leaves the chain as it is without it
            if checking:
                self.checks.record(accepted, exact, margin)
        if self.check_exact:
            info = CheckedApproxMHInfo(*fields, exact != accepted, exact)
        else:
            info = ApproxMHInfo(*fields)
        if accepted:
            return state._replace(theta=theta_new, log_prior=lp_new), info
        return state, info


#: the decisions checked against exact MH in warmup read at most this share of the
#: data the warmup's decisions read (a full pass per check)
CHECK_SHARE = 0.1
#: a knob is lowered when the wrong decisions among those checked are this unlikely
#: at a rate equal to it (binomial upper tail)
CHECK_LEVEL = 1e-3
#: a wrong decision by more than this many nats of log-ratio is a gross one: two in a
#: window lower the knob (a test whose estimate is near-normal errs only near 0)
GROSS_NATS = 3.0
#: the knob is lowered by this factor, at most this many times
KNOB_FACTOR = 4.0
MAX_LOWERINGS = 4


class DecisionChecks:
    """Warmup decisions of an approximate rule checked against exact MH's (the
    same ``u``), within a budget of ``CHECK_SHARE`` of the warmup's data reads:
    when the wrong decisions are too many for the rule's error knob (``epsilon``,
    ``delta``: a binomial test at level ``CHECK_LEVEL`` against a rate equal to
    the knob) or fall mostly one way (wrong accepts against wrong rejects, a sign
    test at the same level: skewed terms err systematically) or by more than
    ``GROSS_NATS`` of log-ratio twice (heavy-tailed terms make gross errors, which
    bias the draws even at a small rate), the knob is lowered ``KNOB_FACTOR``-fold (at most
    ``MAX_LOWERINGS`` times) for the rest of the run, and the run says so
    (:meth:`report`, whose ``decision_check_message`` the trace warns with).
    When even the lowest knob leaves far too many wrong decisions (level
    ``CHECK_LEVEL ** 2``, or three gross ones) the run stops with a
    :class:`SamplingError` before any draw is kept. A rule that tests with a
    range bound also has the bound checked against the data at each checked
    move (:meth:`DecisionRule.check_range`)."""

    def __init__(self, rule):
        self.rule = rule
        self.knob_name = rule.knob_name
        self.knob0 = rule.knob
        self.read = 0           # data evaluations of the warmup's decisions
        self.spent = 0          # of the checks
        self.n_checked = 0
        self.n_wrong = 0
        self.n_wrong_accept = 0
        # checked, wrong, wrongly accepted, wrong by > GROSS_NATS since the last change
        self.window = [0, 0, 0, 0]
        self.n_gross = 0
        self.lowered = 0

    def due(self, n_evals, finite):
        """Whether to check this warmup decision (``n_evals`` it read)."""
        self.read += n_evals
        if not finite or self.knob_name is None or not self.rule.knob > 0:
            return False
        cost = 2 * self.rule.model.n_data
        # a user's range bound is checked on the first decisions whatever they read
        # (a bound far too small stops every decision at once)
        first = self.n_checked < getattr(self.rule, "first_checks", 0)
        if not first and self.spent + cost > CHECK_SHARE * self.read:
            return False
        self.spent += cost
        return True

    def exact_sum(self, theta, theta_new):
        total, abs_max = self.rule.exact_sum_abs_max(theta, theta_new)
        self.rule.check_range(theta, theta_new, abs_max)
        return total

    def record(self, accepted, exact, margin):
        """Record a checked decision: the rule's ``accepted``, exact MH's ``exact``,
        ``margin`` the exact log-ratio minus ``log u`` (its sign is ``exact``'s)."""
        from scipy.stats import binom

        wrong = accepted != exact
        gross = wrong and abs(margin) > GROSS_NATS
        self.n_checked += 1
        self.n_wrong += int(wrong)
        self.n_wrong_accept += int(wrong and accepted)
        self.n_gross += int(gross)
        win = self.window
        win[0] += 1
        win[1] += int(wrong)
        win[2] += int(wrong and accepted)
        win[3] += int(gross)
        k, w, fa, g = win
        if not w:
            return
        # too many wrong decisions for the knob; wrong mostly one way (wrong accepts
        # against wrong rejects); or wrong by several nats: errors that are
        # systematic or gross bias the draws even at a small rate
        tail = min(binom.sf(w - 1, k, self.rule.knob),
                   2.0 * binom.sf(max(fa, w - fa) - 1, w, 0.5))
        if (tail < CHECK_LEVEL or g >= 2) and self.lowered < MAX_LOWERINGS:
            self.rule.knob = self.rule.knob / KNOB_FACTOR
            self.lowered += 1
            self.window = [0, 0, 0, 0]
        elif tail < CHECK_LEVEL ** 2 or g >= 3:
            raise SamplingError(
                f"{self.knob_name}={self.knob0:g} lowered to {self.rule.knob:g} is still too "
                f"loose for this posterior: {w} of the last {k} decisions checked against "
                f"exact MH in warmup differed from them ({fa} wrongly accepted, {g} by more "
                f"than {GROSS_NATS:g} nats of log-ratio), so the draws would be off. The terms "
                "this rule decides on are too heavy-tailed or skewed for it; use exact MH "
                "(sampler='mh') or, with a range bound, ConfidenceMH.")

    def report(self):
        if self.knob_name is None:
            return {}
        out = {"decision_checks": self.n_checked, "wrong_decisions": self.n_wrong,
               "wrong_accepts": self.n_wrong_accept, "gross_wrong_decisions": self.n_gross,
               self.knob_name: self.rule.knob}
        name, k0, k1 = self.knob_name, self.knob0, self.rule.knob
        if self.lowered:
            out["decision_check_message"] = (
                f"{name}={k0:g} was too loose for this posterior: of the decisions checked "
                f"against exact MH in warmup, more than a share {name} differed, or they "
                f"differed mostly one way or by several nats ({self.n_wrong} of "
                f"{self.n_checked} in all, {self.n_gross} by more than {GROSS_NATS:g}), so "
                f"{name} was lowered to {k1:g} for sampling. "
                f"Pass {name}={k1:g} to start there, or use exact MH (sampler='mh').")
        return out


class DecisionRule:
    """Base of the decision rules: ``decide(state, theta_new, threshold) ->
    (accept, n_examined, n_checks)`` for ``sum_k t_k > threshold``.

    With control variates ``cv`` (a Taylor proxy) the rules test the residual
    differences ``d_k(theta') - d_k(theta)`` against
    ``threshold - [Q(theta') - Q(theta)]``, the proxies' total being exact.
    """

    def __init__(self, model, cv=None):
        self.model = model
        self.cy = model.compiled
        self.cv = cv
        self.cv_args = ({} if cv is None else
                        {"cv_order": cv.order, "theta_star": cv.theta_star, "eta_star": cv.cache})
        #: the proxy is the log-likelihood itself (the Gaussian GLM's second-order
        #: residuals vanish): every decision is exact from the proxies' total alone
        self.proxy_exact = cv is not None and _residuals_vanish(model, cv)

    def initial_perm(self):
        """The population the rule samples from, as the start of its permutation."""
        return np.arange(self.model.n_data, dtype=np.int64)

    #: the name of the rule's error knob (``epsilon``, ``delta``: the attribute
    #: holding its value), None for a rule without one
    knob_name = None

    @property
    def knob(self):
        """The value of the error knob (0 for a rule without one)."""
        return 0.0 if self.knob_name is None else getattr(self, self.knob_name)

    @knob.setter
    def knob(self, value):
        setattr(self, self.knob_name, float(value))

    def exact_sum(self, theta, theta_new):
        """``sum_k l_k(theta') - l_k(theta)`` over all data, in storage order."""
        return _fast.term_sum(self.cy, theta, theta_new)

    def exact_sum_abs_max(self, theta, theta_new):
        """``(sum_k t_k, max_k |t_k|)`` over all data, ``t_k`` the log-likelihood
        differences (one sweep)."""
        return _fast.term_sum_abs_max(self.cy, theta, theta_new)

    def check_range(self, theta, theta_new, abs_max):
        """Raise when the range bound the rule tested this move with is below the
        data's ``abs_max`` (rules that use none: nothing to check)."""

    def decide_from_proxy(self, theta, theta_new, threshold):
        """The decision without data when the residuals vanish, else None."""
        if not self.proxy_exact:
            return None
        return self.cv.delta_Q(theta, theta_new) > threshold, 0, 0

    def sampled_target(self, theta, theta_new, threshold):
        """What the sum of the terms the rule reads must exceed for
        ``sum_k l_k > threshold``, after the proxies' exact total is taken out."""
        if self.cv is not None:
            threshold = threshold - self.cv.delta_Q(theta, theta_new)
        return threshold

    def decide(self, state, theta_new, threshold):
        raise NotImplementedError


def _residuals_vanish(model, cv):
    """Whether the model's range bound for the residual differences is 0."""
    step = cv.theta_star + 1.0
    try:
        return float(model.cv_range_bound(cv.theta_star, step, cv.theta_star, cv.order)) == 0.0
    except NotImplementedError:
        return False


def resolve_first_batch(first_batch_size, default, n, owner):
    """The first batch size for a model of ``n`` data: an explicit value must not
    exceed ``n``; the default is clipped to ``n``."""
    if first_batch_size is None:
        return int(min(default, n))
    if first_batch_size > n:
        raise ValueError(
            f"{owner}: first_batch_size={first_batch_size} is larger than the number of "
            f"data n_data={n}; use first_batch_size <= {n}"
        )
    return int(first_batch_size)


def build_proposal(sampler, prepared, model):
    """The adaptive random walk exactly as :class:`MH` builds it, or the
    MH-corrected SGLD proposal (``sampler.proposal == "sgld"``)."""
    if getattr(sampler, "proposal", "rw") == "sgld":
        d = model.n_params
        if sampler.precondition:
            chol = prepared.init_chol
            alpha0 = d ** (-1.0 / 3.0)
        else:
            chol = np.ones(d)                   # the identity, as its diagonal
            cov = np.asarray(prepared.cov)
            # a diagonal Laplace covariance (wide models): its smallest variance
            smallest = np.min(cov) if cov.ndim == 1 else np.min(np.linalg.eigvalsh(cov))
            alpha0 = float(smallest) * d ** (-1.0 / 3.0)
        step = sampler.step_size if sampler.step_size is not None else alpha0
        b = sampler.proposal_batch_size
        b = sampler.batch_size if b is None else b
        return SGLDProposal(GradientEstimator(model.compiled, model.prior.precision), chol,
                            step, min(b, model.n_data), target=sampler.target_accept,
                            adapt=sampler.adapt and sampler.step_size is None)
    return RandomWalkProposal(prepared.cov, scale0=sampler.step_size,
                              target=sampler.target_accept, adapt=sampler.adapt)


class SubsampleMHSampler(BaseSampler):
    """Base of the approximate MH samplers that decide each move on a growing
    subsample (:class:`AusterityMH`, :class:`ConfidenceMH`): not exact."""

    exact = False
    #: decides MH moves on growing subsamples (a run reading most of the data
    #: is slower than exact MH: ``Trace.check_convergence`` says so)
    decides_on_subsamples = True
    #: what to change when a run reads most of the data: without a proxy, with one
    _advice = ("", "")

    @property
    def advice_when_reading_everything(self):
        """What to change when a run reads most of the data."""
        return self._advice[self.proxy is not None]


@dataclass
class ProxyPrepared(LaplacePrepared):
    """The Laplace preparation plus what the decision rules test with: the
    Taylor control variates at the mode (``cv``, None without a proxy) and the
    strata of rows of a stratified decision (``strata``, a
    :class:`~bayes_subsample.models.RowStrata`; None: every datum is sampled
    alike)."""

    cv: TaylorControlVariate = None
    strata: RowStrata = None


def model_has_proxy(model):
    """Whether the model provides second-order Taylor control variates (the
    compiled GLMs and the multinomial model)."""
    return getattr(model, "max_cv_order", 1) >= 2


def prepare_proxy(model, prepared, order=2):
    """Add the control variates at the Laplace mode to ``prepared``: order 2 (one
    pass with the Hessian and one for the per-datum cache), or order 1 (wide
    models, whose diagonal metric avoids the ``p x p`` Hessian sum)."""
    cv = TaylorControlVariate(model, prepared.theta_init, order=order).build_cache()
    return ProxyPrepared(**{**vars(prepared), "n_evals": prepared.n_evals + cv.n_evals}, cv=cv)
