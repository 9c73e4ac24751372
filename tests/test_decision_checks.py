"""Tests of the approximate MH samplers' warmup checks against exact MH and of
austerity's first-order proxies on user models (doc/algorithms/austerity.rst,
"Checking decisions in warmup").

* the checks' rules on scripted outcomes: the budget, a knob lowered for too many,
  one-sided or gross wrong decisions, the error when the lowest knob still errs;
* the run: the trace warns with the checks' message; an invalid user range bound
  is an error before any draw;
* austerity on a user model tests first-order Taylor residuals: fewer data read and
  wrong decisions below epsilon (binomial bound) where the plain test errs more.
"""
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.exceptions import ConvergenceWarning

from bayes_subsample._driver import sample
from bayes_subsample.exceptions import SamplingError
from bayes_subsample.models import FunctionModel, LogisticRegressionModel
from bayes_subsample.samplers import _approx_mh as amh
from bayes_subsample.samplers.austerity import AusterityMH
from bayes_subsample.samplers.confidence import ConfidenceMH


class _Rule:
    """The parts of a decision rule the checks use."""

    knob_name = "epsilon"

    def __init__(self, knob=0.05, n=1000):
        self.knob = knob

        class _M:
            n_data = n
        self.model = _M()


def _feed(checks, outcomes):
    """Record ``(accepted, exact, margin)`` outcomes."""
    for acc, ex, margin in outcomes:
        checks.record(acc, ex, margin)


def test_checks_keep_a_sound_knob():
    rule = _Rule()
    checks = amh.DecisionChecks(rule)
    rng = np.random.default_rng(0)
    # 2% wrong, both ways, near the threshold
    out = []
    for _ in range(2000):
        margin = rng.normal()
        exact = margin > 0
        out.append((exact != (rng.random() < 0.02), exact, margin))
    _feed(checks, out)
    assert rule.knob == 0.05
    rep = checks.report()
    assert rep["decision_checks"] == 2000 and "decision_check_message" not in rep


@pytest.mark.parametrize("kind", ["rate", "one_way", "gross"])
def test_checks_lower_a_loose_knob(kind):
    rule = _Rule(knob=0.05)
    checks = amh.DecisionChecks(rule)
    rng = np.random.default_rng(1)
    out = []
    for i in range(400):
        margin = rng.normal() * 0.5
        exact = margin > 0
        if kind == "rate":          # 30% wrong, both ways, then none
            acc = exact != (i < 40 and rng.random() < 0.3)
        elif kind == "one_way":     # 4% wrong, all of them accepts
            acc = exact or rng.random() < 0.08
        else:                       # rare, but by many nats
            margin, exact, acc = (-8.0, False, True) if i % 150 == 10 else (margin, exact,
                                                                          exact)
        out.append((acc, exact, margin))
    _feed(checks, out)
    assert rule.knob < 0.05 and checks.lowered >= 1
    rep = checks.report()
    assert "epsilon=0.05 was too loose" in rep["decision_check_message"]
    assert f"lowered to {rule.knob:g}" in rep["decision_check_message"]


def test_checks_stop_the_run_when_the_lowest_knob_still_errs():
    rule = _Rule(knob=0.05)
    checks = amh.DecisionChecks(rule)
    with pytest.raises(SamplingError, match="still too loose"):
        _feed(checks, [(True, False, -10.0)] * 100)
    assert checks.lowered == amh.MAX_LOWERINGS
    assert rule.knob == pytest.approx(0.05 / amh.KNOB_FACTOR ** amh.MAX_LOWERINGS)


def test_checks_stay_within_their_budget():
    rule = _Rule(n=1000)
    checks = amh.DecisionChecks(rule)
    due = [checks.due(40, True) for _ in range(1000)]     # decisions reading 20 data
    # a check costs 2 n = 2000 evaluations, a tenth of the 40,000 read
    assert sum(due) == 2
    assert checks.spent <= amh.CHECK_SHARE * checks.read
    assert not checks.due(10**9, False)                   # no check without a finite u
    rule.knob = 0.0
    assert not checks.due(10**9, True)                    # exact rules are not checked


def test_trace_warns_with_the_checks_message():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 2))
    y = (rng.random(3000) < 1 / (1 + np.exp(-X @ [1.0, -1.0]))).astype(float)
    tr = sample(LogisticRegressionModel(X, y), AusterityMH(n_steps=1), n_samples=100,
                n_warmup=100, n_chains=2, random_state=0, check_convergence=False)
    assert {"decision_checks", "wrong_decisions", "epsilon"} <= set(tr.tuning[0])
    tr.tuning[0]["decision_check_message"] = "epsilon=0.05 was too loose for this posterior"
    with pytest.warns(ConvergenceWarning, match="austerity: epsilon=0.05 was too loose"):
        tr.check_convergence()


def _user_regression(n=3000, p=4, seed=0, range_bound=None):
    """Linear regression with the noise's log sd sampled, as a user model."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(size=(n, p - 1)), np.ones(n)])
    y = X @ rng.normal(size=p) + rng.normal(size=n)

    def loglik(theta, idx):
        z = (y[idx] - X[idx] @ theta[:p]) * np.exp(-theta[p])
        return -0.5 * z * z - theta[p]

    def grad(theta, idx):
        z = (y[idx] - X[idx] @ theta[:p]) * np.exp(-theta[p])
        return np.column_stack([X[idx] * (z * np.exp(-theta[p]))[:, None], z * z - 1.0])

    return FunctionModel(loglik, grad, n_data=n, n_params=p + 1, range_bound=range_bound)


def test_austerity_tests_first_order_residuals_on_user_models():
    model = _user_regression()
    rng = np.random.default_rng(0)
    assert AusterityMH().prepare(model, rng).cv.order == 1
    assert not hasattr(AusterityMH(proxy=None).prepare(model, rng), "cv")
    kw = dict(n_samples=1500, n_warmup=300, n_chains=1, random_state=2,
              check_convergence=False)
    proxied = sample(model, AusterityMH(check_exact=True, n_steps=1), **kw)
    plain = sample(model, AusterityMH(proxy=None, check_exact=True, n_steps=1), **kw)
    wrong = proxied.stats["wrong_decision"]
    assert wrong.sum() <= stats.binom.ppf(1 - 1e-4, wrong.size, 0.05)
    assert proxied.stats["data_fraction"].mean() < 0.5 * plain.stats["data_fraction"].mean()


@pytest.mark.parametrize("scale", [1e-6, 0.3])
def test_an_invalid_user_range_bound_is_an_error_before_any_draw(scale):
    """A bound far too small (every decision stops at once) or a little too small:
    the first warmup decisions are checked whatever the budget."""
    model = _user_regression(n=2000)
    idx = np.arange(model.n_data)
    model._range_bound = lambda th, th_new: scale * float(
        np.max(np.abs(model.loglik_terms(th_new, idx) - model.loglik_terms(th, idx))))
    with pytest.raises(ValueError, match="range_bound is not a bound"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sample(model, ConfidenceMH(n_steps=1), n_samples=10, n_warmup=300, n_chains=1,
                   random_state=0)
