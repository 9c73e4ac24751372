"""The confidence sampler MHSubLhd (Bardenet, Doucet & Holmes 2014;
:ref:`algo-confidence`): approximate MH whose subsampled decision is
stopped by a concentration inequality valid for sampling without
replacement, so each decision agrees with the exact MH decision with
probability at least ``1 - delta``.

By default, where the model supports it (``proxy="auto"``, Bardenet, Doucet &
Holmes 2017), the bound is applied to the differences of second-order Taylor
control-variate residuals ``d_k = l_k - q_k`` while the proxies' full sum
``Q(theta') - Q(theta)`` is computed exactly in O(d^2); near the mode these
differences are tiny, so far fewer data are needed. The range of those
differences comes from the model
(:meth:`~bayes_subsample.models.GLM.cv_range_bound`); on the logistic GLM it is
taken per stratum of rows (``stratify``: rows grouped by their 0/1 columns and
split by radius, each stratum with its own bound), and the decision samples the
strata separately (:ref:`algo-confidence-strata`).
"""
from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from .._deprecation import DEPRECATED, deprecated_constraint, renamed
from .._params import store_params
from .._seqtest import BOUNDS
from ..models import row_strata
from . import _approx_mh_fast as _fast
from ._approx_mh import (ApproxMHKernel, DecisionRule, ProxyPrepared, SubsampleMHSampler,
                         build_proposal, model_has_proxy, prepare_proxy, resolve_first_batch)
from ._base import (diagonal_metric, prepare_laplace, refuse_without_hessian,
                    shared_constraints)
from .mh import resolve_n_steps

__all__ = ["ConfidenceMH"]

#: warmup decisions checked against exact MH (and the range bound against the data)
#: whatever they read, where the rule tests with the model's own range bound
FIRST_CHECKS = 5


class ConfidenceRule(DecisionRule):
    """The concentration-bound decision (``delta = 0``: every datum, in storage
    order, one check), optionally on control-variate residual differences, and
    on strata of rows with a range bound each (``strata``, a
    :class:`~bayes_subsample.models.RowStrata`)."""

    knob_name = "delta"

    def __init__(self, model, sampler, first_batch_size, cv=None, strata=None):
        super().__init__(model, cv=cv)
        self.strata = strata
        self.index = None if strata is None else _fast.StrataIndex(strata.members,
                                                                   strata.offsets, model.n_data)
        self.delta = float(sampler.delta)
        self.bound_code = BOUNDS[sampler.bound]
        self.batch_growth = float(renamed(sampler, "gamma", "batch_growth", warn=False))
        self.p = float(sampler.p)
        self.first_batch_size = int(first_batch_size)

    def initial_perm(self):
        # the stratified rule draws with replacement: no permutation to keep
        if self.strata is not None:
            return np.zeros(0, dtype=np.int64)
        return super().initial_perm()

    @property
    def first_checks(self):
        """Warmup decisions checked whatever they read: a few where the rule
        tests with the model's own range bound (a user's), none otherwise."""
        return FIRST_CHECKS if self.cv is None and self.strata is None else 0

    def check_range(self, theta, theta_new, abs_max):
        # the model's own range bound on the log-likelihood differences (the
        # proxies' and the strata's bounds are derived for the compiled GLMs)
        if self.cv is not None or self.strata is not None:
            return
        if not np.isfinite(abs_max):
            # a term overflowed (a Poisson mean beyond exp(709)): the move goes
            # where the likelihood is 0 and is rejected; no finite bound holds
            # there and none is asked of it
            return
        C = self._range(theta, theta_new)
        if abs_max > C * (1.0 + 1e-9) + 1e-300:
            raise ValueError(
                f"{type(self.model).__name__}.range_bound is not a bound: at a move checked "
                f"in warmup it returned C = {C:.6g}, but a datum's |l_k(theta') - l_k(theta)| "
                f"is {abs_max:.6g}. The confidence sampler's guarantee needs C(theta, theta') "
                ">= max_k |l_k(theta') - l_k(theta)| for every move: fix the range bound, or "
                "use AusterityMH or exact MH (sampler='mh').")

    def _range(self, theta, theta_new):
        if self.cv is None:
            C = self.model.range_bound(theta, theta_new)
        else:
            C = self.model.cv_range_bound(theta, theta_new, self.cv.theta_star, self.cv.order)
        C = float(C)
        if not C >= 0.0:
            raise ValueError(f"the model's range bound returned {C!r}; it must be a float >= 0")
        return C

    def decide(self, state, theta_new, threshold):
        theta, n = state.theta, self.model.n_data
        if self.delta == 0.0:
            return self.exact_sum(theta, theta_new) > threshold, n, 1
        exact = self.decide_from_proxy(theta, theta_new, threshold)
        if exact is not None:
            return exact
        # sum_k l_k = [Q(theta') - Q(theta)] + sum_k t_k
        target = self.sampled_target(theta, theta_new, threshold)
        if self.strata is not None:
            st = self.strata
            C = self.model.stratum_range_bounds(
                theta, theta_new, None if self.cv is None else self.cv.theta_star,
                None if self.cv is None else self.cv.order, st)
            acc, t, k, _, _ = _fast.stratified_decide(
                state.sub_rng, self.cy, theta, theta_new, self.index, C, target,
                self.delta, self.batch_growth, self.p, self.first_batch_size,
                n_threads=self.model.pass_threads(), **self.cv_args)
            return acc, t, k
        acc, t, k, _, _ = _fast.confidence_decide(
            state.sub_rng, self.cy, theta, theta_new, state.perm, target / n,
            self._range(theta, theta_new), self.delta, self.bound_code, self.batch_growth,
            self.p, self.first_batch_size, n_threads=self.model.pass_threads(), **self.cv_args)
        return acc, t, k


class ConfidenceMH(SubsampleMHSampler):
    """The confidence sampler (MHSubLhd): approximate MH with a
    concentration-bound stopping rule.

    Each MH decision compares ``Lambda_t``, the mean of ``t`` terms
    ``l_k = l_k(theta') - l_k(theta)`` drawn without replacement, with
    ``psi = log[u p(theta) q(theta'|theta) / (p(theta') q(theta|theta'))] / n``.
    Batches grow geometrically (``b_{k+1} = ceil(batch_growth t)``) and check ``k``
    stops when ``|Lambda_t - psi| > c_t(delta_k)`` with
    ``delta_k = (p - 1) / (p k^p) delta``, so that the decision equals the
    full-data one with probability at least ``1 - delta``. ``c_t`` is a
    concentration bound for sampling without replacement using the range
    ``C(theta, theta') >= max_k |l_k(theta') - l_k(theta)|`` from
    ``model.range_bound`` (the GLMs implement it; user models must provide
    one). See :ref:`algo-confidence` and Bardenet, Doucet & Holmes (2014).

    Parameters
    ----------
    delta : float in [0, 1), default=0.01
        Bound on the probability that a decision differs from exact MH
        (0: every datum is examined; exact MH, draw for draw
        :class:`~bayes_subsample.samplers.MH` with the same ``random_state``).
    bound : {"bernstein_serfling", "empirical_bernstein", "hoeffding_serfling"}, \
default="bernstein_serfling"
        Concentration inequality.
    batch_growth : float > 1, default=2.0
        ``gamma``: geometric growth of the number of data examined between checks.
    p : float > 1, default=2.0
        Exponent of the error schedule ``delta_k``.
    first_batch_size : int, default=1
        Data examined before the first check (must not exceed the data size).
    proxy : {"auto", "taylor", None}, default="auto"
        ``"taylor"``: test the differences of second-order Taylor
        control-variate residuals around the posterior mode (Bardenet,
        Doucet & Holmes 2017), with the proxies' sum exact. Needs a model
        with a range bound for those differences (``cv_range_bound``: the
        logistic GLM, the multinomial model, and the Gaussian GLM, whose
        residuals vanish). ``"auto"`` (default): the proxy where the model has
        one, the plain bound otherwise. ``None``: the plain rule of the 2014
        paper, on ``l_k(theta') - l_k(theta)``.
    stratify : bool, default=True
        Split the rows into strata, each with its own range bound (rows grouped
        by their values in the 0/1 columns, each group split by the rows'
        distance to its center in the Laplace metric), and decide on draws from
        every stratum with a stratified Bernstein bound; strata that would be
        read half or more are summed exactly (:ref:`algo-confidence-strata`).
        Costs three passes over the data in ``prepare``; used where the model's
        range bound takes the data's geometry (the logistic GLM). ``bound``,
        ``p`` and ``batch_growth`` keep their meaning, except that the
        stratified rule has one bound of its own (``bound`` is then unused).
    step_size : float, optional
        Initial random-walk scale (default ``2.38/sqrt(d)``).
    adapt : bool, default=True
        Adapt the random-walk proposal during warmup (as :class:`MH`).
    target_accept : float, optional
        Adaptation target (0.25 for d > 2, else 0.5, as in the paper).
    n_steps : int, optional
        Transitions per retained draw (thinning), as for
        :class:`~bayes_subsample.samplers.MH`; ``None`` (default) makes one per
        parameter with the random-walk proposal.
    check_exact : bool, default=False
        Also compute the full-data decision with the same ``u`` each step and
        record ``wrong_decision`` and ``exact_accept`` in the trace stats (not
        counted in ``n_evals``).
    metric : {"auto", "dense", "diag"}, default="auto"
        The Laplace approximation the proposal and the strata start
        from: dense, or diagonal (wide models, compiled GLMs: no ``p x p``
        matrix anywhere -- the mode by L-BFGS, the precision's diagonal from
        one pass, a random walk whose variances adapt to the chain's marginal
        variances, strata in the diagonal metric, and the plain bound,
        since the second-order proxies' total needs the ``p x p`` Hessian sum).
        ``"auto"``: dense up to 2,000 parameters, diagonal beyond. See
        :ref:`scaling-wide`.

    Notes
    -----
    Per-iteration statistics: ``data_fraction`` (``t/n``), ``n_batches``
    (checks), and with ``check_exact`` ``wrong_decision``, ``exact_accept``.
    ``n_evals`` counts 2 per examined datum (break-even with exact MH, which
    caches ``l(theta)``, at a data fraction of 0.5); with strata, a decision
    that ends by summing every stratum has also read its earlier draws, so
    ``data_fraction`` can exceed 1.

    Warmup decisions are checked against exact MH as for
    :class:`~bayes_subsample.samplers.AusterityMH` (``delta`` lowered when they
    err too often; :ref:`algo-decision-checks`); where the rule tests with the
    model's own range bound (a user model's) the first five are checked
    whatever they read, and a bound below the data's differences at a checked
    move is a ``ValueError`` before any draw is kept.

    Examples
    --------
    The error of each decision, measured against the full-data decision with
    the same uniform draw, stays below ``delta``:

    >>> from bayes_subsample import sample
    >>> from bayes_subsample.datasets import make_logistic_data
    >>> from bayes_subsample.models import LogisticRegressionModel
    >>> from bayes_subsample.samplers import ConfidenceMH
    >>> X, y = make_logistic_data(5000, 2, random_state=0)
    >>> trace = sample(LogisticRegressionModel(X, y), ConfidenceMH(delta=0.05, check_exact=True),
    ...                n_samples=200, n_warmup=100, n_chains=2, random_state=0,
    ...                check_convergence=False)
    >>> bool(trace.stats["wrong_decision"].mean() < 0.05)
    True
    """

    name = "confidence"
    _advice = ("try proxy='taylor' or 'auto' (control-variate differences need far fewer data "
               "near the mode) or a larger delta, or use exact MH (sampler='mh')",
               "raise delta, or use exact MH (sampler='mh'); proxy='auto' uses the plain bound "
               "for models without a residual range bound (Poisson GLMs, user models), which "
               "reads nearly everything at equilibrium")

    _parameter_constraints = {
        **shared_constraints("step_size", "adapt", "check_exact", "target_accept", "n_steps",
                             "metric", optional=("target_accept", "n_steps")),
        "delta": [Interval(Real, 0, 1, closed="left")],
        "bound": [StrOptions({"bernstein_serfling", "empirical_bernstein",
                              "hoeffding_serfling"})],
        "batch_growth": [Interval(Real, 1, None, closed="neither")],
        "p": [Interval(Real, 1, None, closed="neither")],
        "first_batch_size": [Interval(Integral, 1, None, closed="left")],
        "proxy": [StrOptions({"auto", "taylor"}), None],
        "stratify": ["boolean"],
        "gamma": deprecated_constraint(Interval(Real, 1, None, closed="neither")),
        "first_batch": deprecated_constraint(Interval(Integral, 1, None, closed="left")),
    }

    def __init__(self, delta=0.01, bound="bernstein_serfling", batch_growth=2.0, p=2.0,
                 first_batch_size=1, proxy="auto", stratify=True, step_size=None, adapt=True,
                 target_accept=None, n_steps=None, check_exact=False, gamma=DEPRECATED,
                 first_batch=DEPRECATED, metric="auto"):
        store_params(self, locals())

    def _first_batch_size(self, model, warn=False):
        return resolve_first_batch(renamed(self, "first_batch", "first_batch_size", warn), 1,
                                   model.n_data, type(self).__name__)

    def _resolve_proxy(self, model, diagonal=False):
        """``"taylor"`` or None: the proxy this run tests with."""
        if self.proxy is None:
            return None
        if diagonal:
            if self.proxy == "auto":
                return None
            raise ValueError(
                f"{type(self).__name__}(proxy='taylor') tests second-order residuals, whose "
                "proxies' total needs the p x p Hessian sum that the diagonal metric avoids; "
                "use proxy=None or proxy='auto' (the plain bound on wide models), or "
                "metric='dense'")
        z = np.zeros(model.n_params)
        try:
            if not model_has_proxy(model):
                raise NotImplementedError(
                    "the model has no second-order Taylor control variates.")
            model.cv_range_bound(z, z, z, 2)
        except NotImplementedError as e:
            if self.proxy == "auto":
                return None
            raise ValueError(
                f"{type(self).__name__}(proxy='taylor') needs a range bound for the "
                f"differences of second-order Taylor residuals, which {model!r} does not "
                f"provide: {e} Use proxy=None.") from e
        return "taylor"

    def _strata(self, model, prepared, proxy):
        """The strata of rows with a range bound each (None: sample every datum
        alike)."""
        order = 2 if proxy == "taylor" else None
        if not self.stratify or self.delta == 0.0 or model.range_bound_degree(order) is None:
            return None
        cv = getattr(prepared, "cv", None)
        return row_strata(model, prepared.precision,
                          eta_star=None if cv is None or order is None else cv.cache)

    def prepare(self, model, rng):
        self._validate_params()
        refuse_without_hessian(model, "needs the posterior's mode and its Laplace approximation")
        name = type(self).__name__
        self._first_batch_size(model, warn=True)
        renamed(self, "gamma", "batch_growth")
        diagonal = diagonal_metric(self.metric, model)
        proxy = self._resolve_proxy(model, diagonal)
        z = np.zeros(model.n_params)
        # surface a missing range bound now, not at the first step
        try:
            C = (model.cv_range_bound(z, z, z, 2) if proxy == "taylor"
                 else model.range_bound(z, z))
        except NotImplementedError as e:
            raise NotImplementedError(
                f"{name} needs the range constant C(theta, theta') >= max_k "
                f"|l_k(theta') - l_k(theta)| of the model: implement "
                f"{type(model).__name__}.range_bound(theta, theta_new) (for FunctionModel "
                "pass range_bound=callable). Original message: " + str(e)
            ) from e
        if np.isscalar(C) and not np.isfinite(C) and model.scale_problem() is not None:
            raise model.overflow_error("in the range bound C(theta, theta')")
        if not (np.isscalar(C) and float(C) >= 0.0):
            raise ValueError(f"model.range_bound must return a float >= 0, got {C!r}")
        prepared = prepare_laplace(model, diagonal=diagonal)
        if proxy == "taylor":
            prepared = prepare_proxy(model, prepared)
        strata = self._strata(model, prepared, proxy)
        if strata is None:
            return prepared
        if not isinstance(prepared, ProxyPrepared):
            prepared = ProxyPrepared(**vars(prepared))
        prepared.strata = strata
        prepared.n_evals += 3 * model.n_data    # the strata's passes over X
        return prepared

    def build(self, model, prepared, n_warmup):
        first = self._first_batch_size(model)
        proxied = isinstance(prepared, ProxyPrepared)
        rule = ConfidenceRule(model, self, first, cv=prepared.cv if proxied else None,
                              strata=prepared.strata if proxied else None)
        return ApproxMHKernel(model, build_proposal(self, prepared, model), rule,
                              self.check_exact, resolve_n_steps(self.n_steps, model))
