"""Approximate MH with a sequential t-test on mini-batches ("austerity",
Korattikara, Chen & Welling; ALGORITHMS.md §2, §2.1).

The MH decision ``log u < log pi(theta') - log pi(theta) + log q-ratio`` is
rewritten as ``mean_k l_k > mu0`` over the ``N`` data, with
``l_k = l_k(theta') - l_k(theta)`` and
``mu0 = [log u + log p(theta) - log p(theta') + log q(theta'|theta) - log q(theta|theta')] / N``,
and decided by a sequential Student-t test on batches drawn without
replacement (finite-population correction), stopping once the p-value of
``mean != mu0`` falls below ``epsilon``. ``epsilon = 0`` examines all data and
is exact MH.

This module also holds the kernel machinery shared with
:mod:`~bayes_subsample.samplers.confidence` (the two samplers differ only in
the stopping rule).
"""
from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from scipy import linalg
from sklearn.utils._param_validation import Interval, StrOptions

from ..models._glm import GLM
from . import _approx_mh_fast as _fast
from ._adapt import AdaptiveRWProposal
from ._base import BaseSampler, Info, State
from ._common import laplace_shared, log_uniform_open
from .mh import ProposalKernel

__all__ = ["AusterityMH"]


# ---------------------------------------------------------------------------
# proposals
# ---------------------------------------------------------------------------
class SGLDProposal:
    """Stochastic-gradient Langevin proposal, MH-corrected (ALGORITHMS.md §2.1).

    ``theta' = theta + (alpha/2) M g(theta) + sqrt(alpha) L xi`` with
    ``g(theta) = grad log p(theta) + (N/b) sum_{i in X_b} grad l_i(theta)`` on a
    proposal batch ``X_b`` (``b`` indices drawn uniformly with replacement
    from the kernel's subsample generator, independently of the test
    batches), ``M = L L^T`` (the Laplace covariance if preconditioned, else
    the identity) and ``xi ~ N(0, I)`` from the chain's main generator. The
    reverse density uses **the same** ``X_b``, so each batch defines a
    reversible kernel and so does the mixture over batches.

    The step size ``alpha`` is adapted during warmup by Robbins-Monro on the
    accept decisions towards ``target`` (0.574, the MALA optimum) unless
    fixed.
    """

    def __init__(self, model, chol, step_size0, batch_size, target=None, adapt=True):
        self.model = model
        self.chol = np.asarray(chol, dtype=np.float64)
        self.d = self.chol.shape[0]
        self.batch_size = int(batch_size)
        self.target = 0.574 if target is None else float(target)
        self.log_alpha = math.log(step_size0)
        self.frozen = not adapt

    @property
    def step_size(self):
        return math.exp(self.log_alpha)

    def _drift(self, theta, idx):
        m = self.model
        g = m.prior.grad_log_prob(theta) + (m.n_data / idx.shape[0]) * m.grad_sum(theta, idx)
        # M g = L (L^T g)
        return self.chol @ (self.chol.T @ g)

    def propose(self, rng, sub_rng, theta):
        """Returns ``(theta', log q(theta|theta') - log q(theta'|theta), n_grad_evals)``."""
        alpha = self.step_size
        idx = sub_rng.integers(0, self.model.n_data, size=self.batch_size, dtype=np.int64)
        drift = self._drift(theta, idx)
        xi = rng.standard_normal(self.d)
        theta_new = theta + 0.5 * alpha * drift + math.sqrt(alpha) * (self.chol @ xi)
        if not np.all(np.isfinite(theta_new)):
            return theta_new, -np.inf, self.batch_size
        drift_new = self._drift(theta_new, idx)
        back = theta - theta_new - 0.5 * alpha * drift_new
        z = linalg.solve_triangular(self.chol, back, lower=True)
        # forward residual is sqrt(alpha) L xi exactly: its whitened norm is |xi|
        log_q_ratio = -float(z @ z) / (2.0 * alpha) + 0.5 * float(xi @ xi)
        return theta_new, log_q_ratio, 2 * self.batch_size

    def adapt(self, theta, accepted, iteration):
        if self.frozen:
            return
        self.log_alpha += (float(accepted) - self.target) / (iteration + 1.0) ** 0.6

    def freeze(self):
        self.frozen = True


# ---------------------------------------------------------------------------
# the kernel shared by AusterityMH and ConfidenceMH
# ---------------------------------------------------------------------------
class ApproxMHState(State):
    __slots__ = ("log_prior",)

    def __init__(self, theta, log_prior):
        self.theta = theta
        self.log_prior = log_prior


class ApproxMHKernel(ProposalKernel):
    """MH with a subsampled accept/reject decision.

    Random numbers: the proposal noise and ``u`` come from the chain's main
    generator in the same order as :class:`~bayes_subsample.samplers.MH`
    (proposal normals, then ``log u``); subsample indices come from a
    separate generator spawned from it in :meth:`init` (spawning does not
    advance the main stream). With an exact decision rule the chain is
    therefore draw-for-draw the full-data MH chain of the same seed.

    Cost convention (``Info.n_evals``): 2 per examined datum (``l_k`` is
    evaluated at ``theta`` and ``theta'``; nothing is cached across steps),
    plus 2 gradients per proposal-batch datum for SGLD. Exact MH caches
    ``l(theta)`` and counts ``n`` per step, so the break-even data fraction
    is 0.5. ``check_exact`` evaluations are diagnostics and are not counted.
    """

    def __init__(self, model, proposal, check_exact):
        self.model = model
        self.proposal = proposal
        self.check_exact = bool(check_exact)
        self.n = model.n_data
        self.is_glm = isinstance(model, GLM)
        self.perm = None
        self.sub_rng = None

    # -- the decision rule (subclasses) ----------------------------------------------
    def decide(self, theta, theta_new, threshold_sum):
        """Decide ``sum_k l_k > threshold_sum``; returns ``(accept, n_examined, n_batches)``."""
        raise NotImplementedError

    # -- kernel API --------------------------------------------------------------------
    def init(self, rng, theta0):
        self.sub_rng = rng.spawn(1)[0]
        self.perm = np.arange(self.n, dtype=np.int64)
        theta0 = np.asarray(theta0, dtype=np.float64)
        return ApproxMHState(theta0, self.model.prior.log_prob(theta0))

    def _propose(self, rng, theta):
        prop = self.proposal
        if isinstance(prop, SGLDProposal):
            return prop.propose(rng, self.sub_rng, theta)
        return prop.propose(rng, theta), prop.log_ratio(theta, None), 0

    def exact_sum(self, theta, theta_new):
        """``sum_k l_k(theta') - l_k(theta)`` over all data (check_exact)."""
        m = self.model
        if self.is_glm:
            return _fast.loglik_diff_sum(m._fam, m.X, m.y, theta, theta_new, m.fit_intercept,
                                         m.phi)
        return m.log_likelihood(theta_new) - m.log_likelihood(theta)

    def step(self, rng, state):
        theta = state.theta
        theta_new, log_q_ratio, n_prop_evals = self._propose(rng, theta)
        log_u = log_uniform_open(rng)
        lp_new = self.model.prior.log_prob(theta_new) if np.all(np.isfinite(theta_new)) \
            else -np.inf
        # accept iff sum_k l_k > log u + log p(theta) - log p(theta') - log q-ratio
        threshold_sum = log_u + state.log_prior - lp_new - log_q_ratio
        if np.isfinite(threshold_sum):
            theta_new = np.ascontiguousarray(theta_new, dtype=np.float64)
            accepted, n_used, n_batches = self.decide(theta, theta_new, threshold_sum)
        else:
            # non-finite proposal, prior or proposal density: reject without data
            accepted, n_used, n_batches = False, 0, 0
        accepted = bool(accepted)
        extra = {"data_fraction": n_used / self.n, "n_batches": n_batches}
        if self.check_exact:
            if np.isfinite(threshold_sum):
                exact = bool(self.exact_sum(theta, theta_new) > threshold_sum)
            else:
                exact = False
            extra["wrong_decision"] = float(exact != accepted)
            extra["exact_accept"] = float(exact)
        info = Info(accept_prob=float(accepted), accepted=accepted,
                    n_evals=2 * n_used + n_prop_evals, extra=extra)
        if accepted:
            return ApproxMHState(theta_new, lp_new), info
        return state, info

    def tuning(self):
        prop = self.proposal
        if isinstance(prop, SGLDProposal):
            return {"step_size": prop.step_size}
        return {"proposal_scale": prop.scale, "proposal_chol": prop.chol.copy()}


class AusterityKernel(ApproxMHKernel):
    def __init__(self, model, proposal, check_exact, epsilon, batch_size, first_batch):
        super().__init__(model, proposal, check_exact)
        self.epsilon = float(epsilon)
        self.batch_size = int(batch_size)
        self.first_batch = int(first_batch)

    def decide(self, theta, theta_new, threshold_sum):
        m, n = self.model, self.n
        if self.epsilon == 0.0:
            # exact MH: every datum, in storage order (one check)
            return self.exact_sum(theta, theta_new) > threshold_sum, n, 1
        mu0 = threshold_sum / n
        if self.is_glm:
            acc, n_used, n_batches, _ = _fast.austerity_glm(
                self.sub_rng, m._fam, m.X, m.y, theta, theta_new, m.fit_intercept, m.phi,
                self.perm, mu0, self.epsilon, self.first_batch, self.batch_size)
            return acc, n_used, n_batches
        # user models: the same test (struct wrapper) and the same index draws
        test = _fast.SequentialTest(n, mu0, self.epsilon)
        pos = 0
        while not test.done:
            b = test.next_batch(self.first_batch, self.batch_size)
            idx = _fast.draw_without_replacement(self.sub_rng, self.perm, pos, b)
            pos += b
            terms = m.loglik_terms(theta_new, idx) - m.loglik_terms(theta, idx)
            test.push(np.ascontiguousarray(terms, dtype=np.float64))
            test.check()
        return test.accept, test.n_examined, test.n_batches


# ---------------------------------------------------------------------------
# shared helpers of the sampler objects
# ---------------------------------------------------------------------------
def resolve_first_batch(first_batch, default, n, owner):
    """The first batch size for a model of ``n`` data: an explicit value must not
    exceed ``n``; the default is clipped to ``n``."""
    if first_batch is None:
        return int(min(default, n))
    if first_batch > n:
        raise ValueError(
            f"{owner}: first_batch={first_batch} is larger than the number of data "
            f"n_data={n}; use first_batch <= {n}"
        )
    return int(first_batch)


def build_proposal(sampler, shared, model):
    """The adaptive RW proposal exactly as :class:`MH` builds it, or SGLD."""
    if getattr(sampler, "proposal", "rw") == "sgld":
        d = model.n_params
        if sampler.precondition:
            chol = shared["chol_cov"]
            alpha0 = d ** (-1.0 / 3.0)
        else:
            chol = np.eye(d)
            alpha0 = float(np.min(np.linalg.eigvalsh(shared["init_cov"]))) * d ** (-1.0 / 3.0)
        step = sampler.step_size if sampler.step_size is not None else alpha0
        b = sampler.proposal_batch_size
        b = sampler.batch_size if b is None else b
        return SGLDProposal(model, chol, step, min(b, model.n_data),
                            target=sampler.target_accept,
                            adapt=sampler.adapt and sampler.step_size is None)
    prop = AdaptiveRWProposal(shared["init_cov"], scale0=sampler.step_size,
                              target=sampler.target_accept)
    if not sampler.adapt:
        prop.freeze()
    return prop


class AusterityMH(BaseSampler):
    """Approximate Metropolis-Hastings with a sequential t-test (austerity MH).

    Each MH decision compares the mean of ``l_k = l_k(theta') - l_k(theta)``
    with a threshold ``mu0`` (which carries ``u``, the prior and proposal
    ratios) using a sequential Student-t test on mini-batches drawn without
    replacement (lazy Fisher-Yates, compiled loop for GLMs), with the
    finite-population correction; it stops once the p-value falls below
    ``epsilon`` or all ``N`` data are used. See ALGORITHMS.md §2 and
    Korattikara, Chen & Welling (2014).

    The chain targets the posterior only approximately for ``epsilon > 0``
    (the error of each decision is controlled by ``epsilon``); with
    ``epsilon=0`` every datum is examined and the chain is exact MH, draw for
    draw the :class:`~bayes_subsample.samplers.MH` chain of the same
    ``random_state``.

    Parameters
    ----------
    epsilon : float in [0, 1), default=0.05
        p-value tolerance of the test (0: exact MH). The paper uses 0.01-0.25.
    batch_size : int, default=500
        Data added per test after the first batch.
    first_batch : int, optional
        Size ``m0 >= 2`` of the first batch (default ``batch_size``, clipped to
        the number of data). An explicit value larger than the number of data
        is an error.
    proposal : {"rw", "sgld"}, default="rw"
        ``"rw"``: random walk ``theta + s L xi`` from the Laplace covariance,
        adapted during warmup exactly as :class:`MH` does (on the accept
        decisions). ``"sgld"``: the MH-corrected stochastic-gradient Langevin
        proposal of §2.1.
    step_size : float, optional
        ``"rw"``: initial scale ``s`` (default ``2.38/sqrt(d)``). ``"sgld"``:
        the Langevin step ``alpha`` (fixed if given; default
        ``d^(-1/3)`` in the preconditioned metric, adapted during warmup).
    adapt : bool, default=True
        Adapt the proposal during warmup.
    target_accept : float, optional
        Adaptation target (RW: 0.25 for d > 2, else 0.5; SGLD: 0.574).
    proposal_batch_size : int, optional
        SGLD only: size ``b`` of the gradient batch (default ``batch_size``).
    precondition : bool, default=True
        SGLD only: precondition drift and noise with the Laplace covariance
        (``False``: identity metric, as written in §2.1).
    check_exact : bool, default=False
        Also compute the full-data decision with the same ``u`` each step and
        record ``wrong_decision`` (0/1) and ``exact_accept`` in the trace stats
        (diagnostic; costs a full pass per step, not counted in ``n_evals``).

    Notes
    -----
    Per-iteration statistics (``trace.stats``): ``data_fraction`` (data
    examined / N), ``n_batches`` (tests made), and with ``check_exact``
    ``wrong_decision``, ``exact_accept``. ``n_evals`` counts 2 per examined
    datum (``l`` at ``theta`` and ``theta'``) plus the SGLD gradients. With
    ``epsilon=0`` the decision is one sequential full pass (``n_batches`` 1).

    ``epsilon`` bounds the error of each *look* of the test (under the t
    approximation), not of the whole sequential decision: with many looks
    (``N / batch_size`` large) and proposals tuned to acceptance 0.25 the
    observed rate of decisions differing from exact MH is typically 1-3
    ``epsilon`` (e.g. 0.09-0.11 at ``epsilon=0.05`` on MNIST 7-vs-9 with
    batches of 500); fewer, larger batches bring it below ``epsilon``. Use
    ``check_exact=True`` to measure it, or :class:`ConfidenceMH` for a
    guaranteed per-step error bound (heavy-tailed ``l_k`` break the t
    approximation, most with a tiny ``first_batch``).

    Examples
    --------
    >>> from bayes_subsample import BayesianLogisticRegression
    >>> from bayes_subsample.samplers.austerity import AusterityMH
    >>> clf = BayesianLogisticRegression(sampler=AusterityMH(epsilon=0.05),
    ...                                  n_samples=200, n_warmup=200)
    """

    name = "austerity"
    exact = False
    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, 1, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "first_batch": [Interval(Integral, 2, None, closed="left"), None],
        "proposal": [StrOptions({"rw", "sgld"})],
        "step_size": [Interval(Real, 0, None, closed="neither"), None],
        "adapt": ["boolean"],
        "target_accept": [Interval(Real, 0, 1, closed="neither"), None],
        "proposal_batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "precondition": ["boolean"],
        "check_exact": ["boolean"],
    }

    def __init__(self, epsilon=0.05, batch_size=500, first_batch=None, proposal="rw",
                 step_size=None, adapt=True, target_accept=None, proposal_batch_size=None,
                 precondition=True, check_exact=False):
        self.epsilon = epsilon
        self.batch_size = batch_size
        self.first_batch = first_batch
        self.proposal = proposal
        self.step_size = step_size
        self.adapt = adapt
        self.target_accept = target_accept
        self.proposal_batch_size = proposal_batch_size
        self.precondition = precondition
        self.check_exact = check_exact

    def prepare(self, model, random_state):
        self._validate_params()
        first = resolve_first_batch(self.first_batch, self.batch_size, model.n_data,
                                    type(self).__name__)
        shared = laplace_shared(model)
        shared["first_batch"] = first
        return shared

    def build(self, model, shared, n_warmup):
        return AusterityKernel(model, build_proposal(self, shared, model), self.check_exact,
                               self.epsilon, self.batch_size, shared["first_batch"])
