"""Approximate MH with a sequential t-test on mini-batches ("austerity",
Korattikara, Chen & Welling; :ref:`algo-austerity`).

The MH decision ``log u < log pi(theta') - log pi(theta) + log q-ratio`` is
rewritten as ``mean_k l_k > mu0`` over the ``N`` data, with
``l_k = l_k(theta') - l_k(theta)`` and
``mu0 = [log u + log p(theta) - log p(theta') + log q(theta'|theta) - log q(theta|theta')] / N``,
and decided by a sequential Student-t test on batches drawn without
replacement (finite-population correction), stopping once the p-value of
``mean != mu0`` falls below ``epsilon``. ``epsilon = 0`` examines all data and
is exact MH. By default (``proxy="auto"``) the test runs on differences of
second-order control-variate residuals, with the Taylor proxies' total exact
(Bardenet, Doucet & Holmes 2017).
"""
from __future__ import annotations

from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions

from . import _approx_mh_fast as _fast
from ._approx_mh import (ApproxMHKernel, DecisionRule, ProxyPrepared, SubsampleMHSampler,
                         build_proposal, prepare_proxy, resolve_first_batch)
from .._deprecation import DEPRECATED, deprecated_constraint, renamed
from .._params import store_params
from ._base import cv_order, diagonal_metric, prepare_laplace, shared_constraints
from .mh import resolve_n_steps

__all__ = ["AusterityMH"]


class SequentialTestRule(DecisionRule):
    """The sequential t-test decision (``epsilon = 0``: every datum, in storage
    order, one check), optionally on control-variate residual differences."""

    knob_name = "epsilon"

    def __init__(self, model, epsilon, batch_size, first_batch_size, cv=None):
        super().__init__(model, cv=cv)
        self.epsilon = float(epsilon)
        self.batch_size = int(batch_size)
        self.first_batch_size = int(first_batch_size)

    def decide(self, state, theta_new, threshold):
        n = self.model.n_data
        if self.epsilon == 0.0:
            return self.exact_sum(state.theta, theta_new) > threshold, n, 1
        exact = self.decide_from_proxy(state.theta, theta_new, threshold)
        if exact is not None:
            return exact
        target = self.sampled_target(state.theta, theta_new, threshold)
        acc, n_used, n_batches, _ = _fast.austerity_decide(
            state.sub_rng, self.cy, state.theta, theta_new, state.perm,
            target / len(state.perm), self.epsilon, self.first_batch_size, self.batch_size,
            n_threads=self.model.pass_threads(), **self.cv_args)
        return acc, n_used, n_batches


class AusterityMH(SubsampleMHSampler):
    """Approximate Metropolis-Hastings with a sequential t-test (austerity MH).

    Each MH decision compares the mean of ``l_k = l_k(theta') - l_k(theta)``
    with a threshold ``mu0`` (which carries ``u``, the prior and proposal
    ratios) using a sequential Student-t test on mini-batches drawn without
    replacement (lazy Fisher-Yates, compiled loop for GLMs), with the
    finite-population correction; it stops once the p-value falls below
    ``epsilon`` or all ``N`` data are used. See :ref:`algo-austerity` and
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
    first_batch_size : int, optional
        Size ``m0 >= 2`` of the first batch (default ``batch_size``, clipped to
        the number of data). An explicit value larger than the number of data
        is an error.
    proxy : {"auto", "taylor", None}, default="auto"
        ``"taylor"`` or ``"auto"`` (default, the same): test the differences of
        Taylor control-variate residuals around the posterior mode,
        ``d_k(theta') - d_k(theta)``, with the proxies' total ``Q(theta') -
        Q(theta)`` computed exactly (Bardenet, Doucet & Holmes 2017): second-order
        proxies where the model has per-datum Hessians (the GLMs, the multinomial
        model), first-order ones from the gradients on other models (user models:
        each examined datum then costs the log-likelihood at ``theta``, ``theta'``
        and ``theta*`` and the gradient at ``theta*``). Near the mode these
        differences are far smaller than the log-likelihood differences, so a
        batch of fixed size decides, the fraction of the data examined falls as
        ``n`` grows, and the t-test's normal approximation errs less
        (:ref:`algo-austerity`). ``None``: the plain test of the paper, on
        ``l_k(theta') - l_k(theta)``.
    proposal : {"rw", "sgld"}, default="rw"
        ``"rw"``: random walk ``theta + s L xi`` from the Laplace covariance,
        adapted during warmup exactly as :class:`MH` does (on the accept
        decisions). ``"sgld"``: the MH-corrected stochastic-gradient Langevin
        proposal (:ref:`algo-austerity-sgld`).
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
        (``False``: identity metric, as the paper writes it).
    n_steps : int, optional
        Transitions per retained draw (thinning), as for
        :class:`~bayes_subsample.samplers.MH`; ``None`` (default) makes one per
        parameter with the random-walk proposal (one with the SGLD proposal,
        whose drift moves it further).
    check_exact : bool, default=False
        Also compute the full-data decision with the same ``u`` each step and
        record ``wrong_decision`` (0/1) and ``exact_accept`` in the trace stats
        (diagnostic; costs a full pass per step, not counted in ``n_evals``).
    metric : {"auto", "dense", "diag"}, default="auto"
        The Laplace approximation the proposal starts from: dense, or diagonal
        (wide models, compiled GLMs: no ``p x p`` matrix anywhere -- the mode by
        L-BFGS, the precision's diagonal from one pass, a random walk whose
        variances adapt to the chain's marginal variances or a diagonally
        preconditioned SGLD proposal, and first-order Taylor proxies, since the
        second-order proxies' total needs the ``p x p`` Hessian sum).
        ``"auto"``: dense up to 2,000 parameters, diagonal beyond. See
        :ref:`scaling-wide`.

    Notes
    -----
    Per-iteration statistics (``trace.stats``): ``data_fraction`` (data
    examined / N), ``n_batches`` (tests made), and with ``check_exact``
    ``wrong_decision``, ``exact_accept``. ``n_evals`` counts 2 per examined
    datum (``l`` at ``theta`` and ``theta'``) plus the SGLD gradients. With
    ``epsilon=0`` the decision is one sequential full pass (``n_batches`` 1).

    ``epsilon`` bounds the error of each *look* of the test (under the t
    approximation), not of the whole sequential decision. With the default
    proxy the first batch decides nearly every step on tall data, and the
    measured rate of decisions differing from exact MH stays below
    ``epsilon`` (see :ref:`algo-austerity-proxy`). For the plain test
    (``proxy=None``), with many looks
    (``N / batch_size`` large) and proposals tuned to acceptance 0.25 the
    observed rate of decisions differing from exact MH is typically 1-3
    ``epsilon`` (e.g. 0.09-0.11 at ``epsilon=0.05`` on MNIST 7-vs-9 with
    batches of 500); fewer, larger batches bring it below ``epsilon``. Use
    ``check_exact=True`` to measure it, or :class:`ConfidenceMH` for a
    guaranteed per-step error bound (heavy-tailed ``l_k`` break the t
    approximation, most with a tiny ``first_batch_size``).

    Warmup decisions are checked against exact MH (the same ``u``, one full pass
    each, within a tenth of the data the warmup reads): when too many are wrong
    for ``epsilon``, or wrong mostly one way, or wrong by several nats of
    log-ratio, ``epsilon`` is lowered 4-fold (at most 4 times) for the rest of
    the run and a ``ConvergenceWarning`` says so; when even the lowest value
    errs far too often the run stops with a
    :class:`~bayes_subsample.exceptions.SamplingError` before any draw is kept
    (:ref:`algo-decision-checks`). The tuned value and the checks' counts are in
    ``trace.tuning``.

    Examples
    --------
    On 20,000 rows most decisions read a fraction of the data:

    >>> from bayes_subsample import sample
    >>> from bayes_subsample.datasets import make_logistic_data
    >>> from bayes_subsample.models import LogisticRegressionModel
    >>> from bayes_subsample.samplers import AusterityMH
    >>> X, y = make_logistic_data(20000, 2, random_state=0)
    >>> trace = sample(LogisticRegressionModel(X, y), AusterityMH(epsilon=0.05), n_samples=300,
    ...                n_warmup=100, n_chains=1, random_state=0, check_convergence=False)
    >>> bool(trace.stats["data_fraction"].mean() < 0.5)
    True
    """

    name = "austerity"
    _advice = ("use proxy='auto' (control-variate differences need far fewer data near the "
               "mode), raise epsilon (a larger per-test error), or use exact MH (sampler='mh')",
               "raise epsilon (a larger per-test error), or use exact MH (sampler='mh')")

    _parameter_constraints = {
        **shared_constraints("batch_size", "step_size", "adapt", "check_exact", "target_accept",
                             "n_steps", "metric", optional=("target_accept", "n_steps")),
        "epsilon": [Interval(Real, 0, 1, closed="left")],
        "first_batch_size": [Interval(Integral, 2, None, closed="left"), None],
        "proxy": [StrOptions({"auto", "taylor"}), None],
        "proposal": [StrOptions({"rw", "sgld"})],
        "proposal_batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "precondition": ["boolean"],
        "first_batch": deprecated_constraint(Interval(Integral, 2, None, closed="left"), None),
    }

    def __init__(self, epsilon=0.05, batch_size=500, first_batch_size=None, proxy="auto",
                 proposal="rw", step_size=None, adapt=True, target_accept=None,
                 proposal_batch_size=None, precondition=True, n_steps=None, check_exact=False,
                 first_batch=DEPRECATED, metric="auto"):
        store_params(self, locals())

    def _first_batch_size(self, model, warn=False):
        return resolve_first_batch(renamed(self, "first_batch", "first_batch_size", warn),
                                   self.batch_size, model.n_data, type(self).__name__)

    def prepare(self, model, rng):
        self._validate_params()
        self._first_batch_size(model, warn=True)
        diagonal = diagonal_metric(self.metric, model)
        prepared = prepare_laplace(model, diagonal=diagonal)
        if self.epsilon == 0 or self.proxy is None:
            return prepared
        # second order where the model has per-datum Hessians (GLMs, multinomial);
        # first order from the gradients on other models and with a diagonal metric
        # (order 2's total needs the p x p Hessian sum)
        return prepare_proxy(model, prepared, order=cv_order(model, diagonal))

    def build(self, model, prepared, n_warmup):
        first = self._first_batch_size(model)
        cv = prepared.cv if isinstance(prepared, ProxyPrepared) else None
        rule = SequentialTestRule(model, self.epsilon, self.batch_size, first, cv=cv)
        n_steps = 1 if (self.n_steps is None and self.proposal == "sgld") else \
            resolve_n_steps(self.n_steps, model)
        return ApproxMHKernel(model, build_proposal(self, prepared, model), rule,
                              self.check_exact, n_steps)
