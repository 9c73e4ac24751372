"""The long-fit warning: the cost estimate and its decision (with given
timings, never this machine's speed), the detection of what makes fits slow,
and a fit that warns."""
import threading
import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from bayes_subsample import _cost
from bayes_subsample._cost import (CostWatch, design_report, estimate_total_seconds,
                                   likely_causes, long_fit_message)
from bayes_subsample.exceptions import LongFitWarning
from bayes_subsample.linear_model import BayesianLogisticRegression

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


class Clock:
    """A clock the test moves by hand."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def one_hot_scaled(rare=0.005, n=2000, seed=0):
    """A continuous column, then a one-hot block of 3 categories (one of them
    rare), standardised as a whole as StandardScaler on every column does."""
    rng = np.random.default_rng(seed)
    cat = rng.choice(3, size=n, p=[0.6, 0.4 - rare, rare])
    onehot = OneHotEncoder(sparse_output=False).fit_transform(cat[:, None])
    X = np.column_stack([rng.normal(size=n), onehot])
    return X, StandardScaler().fit_transform(X)


# ---- the estimate and the decision -----------------------------------------------------
def test_estimate_scales_elapsed_time_to_the_whole_run():
    assert estimate_total_seconds(10.0, 50, 8000) == pytest.approx(1600.0)
    assert estimate_total_seconds(10.0, 8000, 8000) == pytest.approx(10.0)
    assert estimate_total_seconds(3.0, 0, 100) == float("inf")


def watch(total=8000, progress=False, causes=("CAUSE-TEXT",), stop=None):
    clock, done = Clock(), [0]
    w = CostWatch(progress, total, lambda: done[0], lambda: list(causes), stop, clock=clock)
    return w, clock, done


def test_warns_once_with_estimate_and_cause_after_the_first_check():
    w, clock, done = watch()
    # before the first check, however slow, nothing is said
    clock.now, done[0] = _cost.CHECK_AFTER_SECONDS - 1, 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", LongFitWarning)
        w.tick()
    # 2 s per iteration for 8000 iterations: about 4.4 h
    clock.now, done[0] = _cost.CHECK_AFTER_SECONDS, 5
    with pytest.warns(LongFitWarning) as record:
        w.tick()
        for k in range(20):          # later checks say nothing more
            clock.now *= 2
            done[0] += 3
            w.tick()
    assert len(record) == 1
    text = str(record[0].message)
    assert "estimated to take about 4.4 h" in text
    assert "5 of its 8000 iterations" in text and "rough estimate" in text
    assert "Likely cause: CAUSE-TEXT" in text
    assert w.warned


def test_fast_run_is_not_warned_but_a_later_slowdown_is():
    w, clock, done = watch(total=1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LongFitWarning)
        clock.now, done[0] = _cost.CHECK_AFTER_SECONDS, 500     # 20 s in all
        w.tick()
        clock.now, done[0] = 1.5 * _cost.CHECK_AFTER_SECONDS, 501
        w.tick()                      # not due: the next check is at twice 10 s
    assert not w.warned
    clock.now, done[0] = 2 * _cost.CHECK_AFTER_SECONDS, 502    # 20 s for 502: 40 s
    w.tick()
    assert not w.warned
    clock.now, done[0] = 400.0, 510                             # 784 s
    with pytest.warns(LongFitWarning, match="about 13 min"):
        w.tick()


def test_threshold_is_the_module_constant(monkeypatch):
    w, clock, done = watch(total=100)
    monkeypatch.setattr(_cost, "LONG_FIT_SECONDS", 1e9)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LongFitWarning)
        assert w.check(100.0, 1) == pytest.approx(1e4)
    monkeypatch.setattr(_cost, "LONG_FIT_SECONDS", 1e3)
    with pytest.warns(LongFitWarning):
        w.check(100.0, 1)


def test_no_cause_found_says_so():
    text = long_fit_message(900.0, 10.0, 11, 1000, [])
    assert "about 15 min" in text and "No cause was found" in text


def test_progress_appears_with_the_warning_unless_disabled():
    pytest.importorskip("tqdm")
    w, clock, done = watch(progress=None)
    assert w.bar is None
    w.update(20)
    clock.now, done[0] = 60.0, 20
    with pytest.warns(LongFitWarning, match="Progress is shown from here on"):
        w.tick()
    assert w.bar is not None and w.bar.n == 20
    w.update(20)
    assert w.bar.n == 40
    w.close()
    off, clock, done = watch(progress=False)
    clock.now, done[0] = 60.0, 20
    with pytest.warns(LongFitWarning) as record:
        off.tick()
    assert off.bar is None and "Progress is shown" not in str(record[0].message)


def test_warning_as_error_stops_the_chains():
    stop = threading.Event()
    w, clock, done = watch(stop=stop)
    clock.now, done[0] = 60.0, 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", LongFitWarning)
        with pytest.raises(LongFitWarning):
            w.tick()
    assert stop.is_set()


# ---- what makes fits slow --------------------------------------------------------------
def test_standardised_rare_indicator_is_found_dense_and_sparse():
    raw, X = one_hot_scaled()
    rep = design_report(X)
    assert list(rep.indicator_columns) == [3]        # the rare category only
    assert rep.indicator_max_abs[0] > 10
    # the same columns scaled on sparse data (no centring: zeros stay implicit)
    Xs = StandardScaler(with_mean=False).fit_transform(sparse.csr_matrix(raw[:, 1:]))
    assert list(design_report(Xs).indicator_columns) == [2]
    assert list(design_report(Xs.toarray()).indicator_columns) == [2]
    # plain 0/1 indicators and continuous columns are not flagged
    assert design_report(raw).indicator_columns.size == 0
    assert design_report(sparse.csr_matrix(raw[:, 1:])).indicator_columns.size == 0
    rng = np.random.default_rng(0)
    heavy = rng.standard_t(1, size=(500, 3)) * 50        # extreme but continuous
    assert design_report(heavy).indicator_columns.size == 0


def test_dominant_rows_are_found():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 5))
    assert design_report(X).dominant_rows.size == 0
    X[17] *= 100
    rep = design_report(X)
    assert rep.row_norm_ratio > _cost.ROW_NORM_RATIO and list(rep.dominant_rows) == [17]
    rep_s = design_report(sparse.csr_matrix(X))
    assert rep_s.row_norm_ratio == pytest.approx(rep.row_norm_ratio)


def test_causes_name_the_columns_and_the_fix():
    _, X = one_hot_scaled()
    (text,) = likely_causes(X, feature_names=["age", "red", "green", "blue"])
    assert "columns blue" in text
    assert "StandardScaler on the continuous columns only" in text
    assert "load_covtype(standardize=True)" in text
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(1000, 5))
    Z[17] *= 100
    (rows,) = likely_causes(Z)
    assert "some rows dominate" in rows and "rows 17" in rows
    # a sampler reading every row per step, on large data
    (full,) = likely_causes(sampler_name="nuts", n_data=50_000, evals_per_iteration=7 * 50_000)
    assert "'nuts' reads all 50000 rows" in full and "hmc_ecs" in full
    assert likely_causes(sampler_name="hmc_ecs", n_data=50_000, evals_per_iteration=900) == []
    (warm,) = likely_causes(sampler_name="hmc_ecs", n_data=50_000,
                            evals_per_iteration=2 * 50_000)
    assert "read all 50000 rows at every iteration so far" in warm
    assert "costs less than estimated" in warm
    assert likely_causes(sampler_name="mh", n_data=500, evals_per_iteration=500) == []
    # SG samplers: an iteration is n_steps minibatch steps (the thinning), not a full read
    (sg,) = likely_causes(sampler_name="sghmc", n_data=60_000, evals_per_iteration=60_000)
    assert "many minibatch steps" in sg and "about 1 full passes" in sg
    assert "read all" not in sg


def test_classes_separated_along_indicator_columns_are_found():
    """Classes with no row where a 0/1 column is set (covtype: 139 of its 308
    (class, indicator) pairs) leave those coefficients bounded by the prior
    alone on one side; found per class, named with the fix, dense and sparse."""
    rng = np.random.default_rng(0)
    n = 3000
    labels = rng.integers(0, 3, size=n)
    X = np.column_stack([rng.normal(size=n), rng.random(n) < 0.3, rng.random(n) < 0.3])
    X[labels == 2, 1] = 0.0          # class 2 never has column 1 set
    X[:, 2] = 1.0 - X[:, 2]          # column 2: the rarer value is 0, present in every class
    for Xs in (X, sparse.csr_matrix(X)):
        rep = design_report(Xs, labels, 3)
        assert rep.separated_pairs == 1 and rep.separated_columns.tolist() == [1]
    assert design_report(X).separated_pairs == 0              # no labels: not looked at
    X[labels == 0, 2] = 1.0          # class 0 never has column 2's rarer value (0)
    rep = design_report(X, labels, 3)
    assert rep.separated_pairs == 2 and sorted(rep.separated_columns.tolist()) == [1, 2]
    (text,) = likely_causes(X, labels=labels, n_classes=3, feature_names=["a", "b", "c"])
    assert "in 2 (class, column) pair(s)" in text and "columns b, c" in text
    assert "smaller prior_scale" in text and "The fit is right, only slow" in text


# ---- a fit that warns --------------------------------------------------------------------
def test_fit_warns_once_and_keeps_its_draws(monkeypatch, capsys):
    _, X = one_hot_scaled(n=400, rare=0.01, seed=1)
    y = (X[:, 0] + np.random.default_rng(2).normal(size=len(X)) > 0).astype(int)
    kw = dict(sampler="mh", n_samples=60, n_warmup=60, n_chains=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LongFitWarning)
        ref = BayesianLogisticRegression(**kw).fit(X, y)
    monkeypatch.setattr(_cost, "CHECK_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(_cost, "LONG_FIT_SECONDS", 1e-9)
    for n_jobs in (None, 2):
        with pytest.warns(LongFitWarning) as record:
            clf = BayesianLogisticRegression(n_jobs=n_jobs, **kw).fit(X, y)
        longs = [r for r in record if issubclass(r.category, LongFitWarning)]
        assert len(longs) == 1
        assert "columns 3" in str(longs[0].message)
        np.testing.assert_array_equal(clf.posterior_draws_, ref.posterior_draws_)
    if _cost._tqdm_available():
        assert "sampling" in capsys.readouterr().err


def test_fit_checks_cost_without_warmup_and_can_fail_on_the_warning(monkeypatch):
    _, X = one_hot_scaled(n=300, rare=0.01, seed=3)
    y = (X[:, 0] > 0).astype(int)
    monkeypatch.setattr(_cost, "CHECK_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(_cost, "LONG_FIT_SECONDS", 1e-9)
    # no warmup: the sampling iterations are checked too
    clf = BayesianLogisticRegression(sampler="mh", n_samples=300, n_warmup=0, n_chains=1,
                                     progress=False, random_state=0)
    with pytest.warns(LongFitWarning):
        clf.fit(X, y)
    # warnings as errors: the fit stops with the warning, the estimator stays unfitted
    clf = BayesianLogisticRegression(sampler="mh", n_samples=50, n_warmup=50, n_chains=2,
                                     n_jobs=2, progress=False, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LongFitWarning)
        with pytest.raises(LongFitWarning):
            clf.fit(X, y)
    assert not hasattr(clf, "trace_")
