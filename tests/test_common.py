"""scikit-learn API checks (``parametrize_with_checks``) on every estimator.

Test-only configuration
-----------------------
The checks fit each estimator dozens of times on tiny data sets, so they run
on *fast settings*: ``n_samples=30, n_warmup=30, n_chains=2, random_state=0``
with ``sampler="mh"``, ``sampler="hmc"`` (the two full-data samplers) and the
default ``sampler="hmc_ecs"`` (which runs on the full data of these tiny data
sets), i.e. 3 estimators x 3 samplers. These runs are far too short for a converged
posterior, so ``ConvergenceWarning`` is silenced here, and only here; every
other test module sees it. ``random_state`` is fixed because the checks
compare repeated fits (idempotence, pickling, ``n_jobs``), and a fixed seed
must give identical draws.

Checks expected to fail are listed in ``EXPECTED_FAILED`` with a reason each
(they run as non-strict xfails):

* ``BayesianPoissonRegression`` accepts only non-negative *integer* counts
  (a Poisson likelihood; non-integer targets are rejected with a clear
  ``ValueError``), while these checks generate continuous targets. The API
  points they would cover (``n_features_in_``, fit idempotence, ``fit``
  returning a fitted estimator, list input, float32 / read-only input) are
  tested on count data in ``test_estimators.py``.
"""
import warnings

import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

from bayes_subsample import (
    BayesianLinearRegression,
    BayesianLogisticRegression,
    BayesianPoissonRegression,
)

#: the fast settings (see the module docstring)
FAST = {"n_samples": 30, "n_warmup": 30, "n_chains": 2, "random_state": 0}

ESTIMATORS = [
    cls(sampler=sampler, **FAST)
    for cls in (BayesianLogisticRegression, BayesianLinearRegression, BayesianPoissonRegression)
    for sampler in ("mh", "hmc", "hmc_ecs")
]

_POISSON_COUNTS = ("BayesianPoissonRegression needs non-negative integer counts; the check "
                   "generates continuous targets (covered on counts in test_estimators.py)")

#: estimator class name -> {check name: reason}
EXPECTED_FAILED = {
    "BayesianPoissonRegression": {
        name: _POISSON_COUNTS for name in (
            "check_n_features_in_after_fitting", "check_regressors_train",
            "check_regressor_data_not_an_array", "check_regressors_no_decision_function",
            "check_fit_idempotent", "check_fit_check_is_fitted", "check_n_features_in",
        )
    },
}


def _expected_failed_checks(estimator):
    return EXPECTED_FAILED.get(type(estimator).__name__, {})


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)
