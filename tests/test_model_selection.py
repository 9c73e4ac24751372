"""SamplerScorer and WholeData: a search over a sampler's accuracy knob returns
the cheapest setting within the stated accuracy."""
import warnings

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV

from bayes_subsample import BayesianLogisticRegression
from bayes_subsample.model_selection import FAIL_SCORE, SamplerScorer, WholeData
from bayes_subsample.samplers import AusterityMH

KW = dict(n_samples=400, n_warmup=300, n_chains=2, random_state=0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8000, 3))
    y = (X @ [1.0, -1.0, 0.5] + rng.logistic(size=8000) > 0).astype(int)
    return X, y


@pytest.fixture(scope="module")
def reference(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BayesianLogisticRegression(sampler="nuts", **KW).fit(*data)


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, y)


def test_whole_data_is_one_split_of_all_rows():
    splits = list(WholeData().split(np.zeros((5, 2))))
    assert len(splits) == 1 and WholeData().get_n_splits() == 1
    np.testing.assert_array_equal(splits[0][0], np.arange(5))
    np.testing.assert_array_equal(splits[0][1], np.arange(5))


def test_search_returns_the_cheapest_setting_within_the_accuracy(data, reference):
    """Exact MH (epsilon = 0) reads every row per step; austerity at 0.05 reads a
    subsample and is within 0.1 sd: the search picks 0.05."""
    X, y = data
    scorer = SamplerScorer(tolerance=0.1, reference_fit=reference)
    est = BayesianLogisticRegression(sampler=AusterityMH(), **KW)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search = GridSearchCV(est, {"sampler__epsilon": [0.0, 0.05]}, scoring=scorer,
                              cv=WholeData(), refit=False).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert search.best_params_ == {"sampler__epsilon": 0.05}
    assert -FAIL_SCORE < scores[0] < scores[1] < 0
    # the score is minus the cost: full data passes per effective draw
    exact = _fit(BayesianLogisticRegression(sampler=AusterityMH(epsilon=0.0), **KW), X, y)
    r = scorer.evaluate(exact, X, y)
    assert r["within"] and r["score"] == pytest.approx(scores[0]) and r["cost"] == -r["score"]
    evals = np.sum(exact.trace_.n_evals_per_chain())
    ess = np.min(exact.trace_.summary()["ess_bulk"])
    assert r["cost"] == pytest.approx(evals / X.shape[0] / ess)
    # exact MH reads every row at each of its 1400 iterations per chain
    assert evals >= 2 * 700 * X.shape[0]


def test_a_biased_fit_scores_below_every_accurate_one(data, reference):
    """Against a reference on another posterior (a much tighter prior) the bias is
    many sds: the score falls below -FAIL_SCORE, ordered by the bias."""
    X, y = data
    tight = _fit(BayesianLogisticRegression(sampler="nuts", prior_scale=0.01, **KW), X, y)
    est = _fit(BayesianLogisticRegression(sampler=AusterityMH(epsilon=0.05), **KW), X, y)
    r = SamplerScorer(reference_fit=tight).evaluate(est, X, y)
    assert not r["within"] and r["bias"] > 5
    assert r["score"] == pytest.approx(-(FAIL_SCORE + r["bias"]))
    assert r["max_mean_error_sd"] >= r["bias"]
    # against the right reference the same fit is within 0.1 sd
    assert SamplerScorer(reference_fit=reference).evaluate(est, X, y)["within"]


def test_the_reference_is_fitted_once_per_data_set(data):
    X, y = data
    X, y = X[:1500], y[:1500]
    scorer = SamplerScorer(reference_samples=200)
    kw = dict(KW, n_samples=200, n_warmup=200)
    for eps in (0.0, 0.1):
        est = _fit(BayesianLogisticRegression(sampler=AusterityMH(epsilon=eps), **kw), X, y)
        assert np.isfinite(scorer(est, X, y))
    assert len(scorer.reference_fits_) == 1
    ref = next(iter(scorer.reference_fits_.values()))
    assert ref.sampler == "nuts" and ref.n_samples == 200 and ref.n_chains == 2
    # other data: another reference
    est = _fit(BayesianLogisticRegression(sampler=AusterityMH(epsilon=0.1), **kw), X[:1000],
               y[:1000])
    scorer(est, X[:1000], y[:1000])
    assert len(scorer.reference_fits_) == 2
    # seconds per effective draw
    assert SamplerScorer(cost="time", reference_fit=ref).evaluate(est, X[:1000], y[:1000])[
        "cost"] > 0


def test_scoring_other_rows_is_refused(data, reference):
    X, y = data
    with pytest.raises(ValueError, match=r"fitted on 8000 rows and is scored on 2000 rows.*"
                                         r"cv=WholeData\(\)"):
        SamplerScorer(reference_fit=reference)(reference, X[:2000], y[:2000])
    # as many rows, other ones (two folds of equal size)
    with pytest.raises(ValueError, match=r"scored on 8000 other rows"):
        SamplerScorer(reference_fit=reference)(reference, X[::-1], y[::-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="cv=WholeData"):
            GridSearchCV(BayesianLogisticRegression(sampler=AusterityMH(), **KW),
                         {"sampler__epsilon": [0.1]}, cv=2, error_score="raise",
                         scoring=SamplerScorer(reference_fit=reference)).fit(X, y)


@pytest.mark.parametrize("kw, match", [
    ({"tolerance": 0}, "tolerance must be a float > 0"),
    ({"tolerance": float("nan")}, "tolerance must be a float > 0"),
    ({"reference_samples": 5}, "reference_samples must be an integer >= 10"),
    ({"cost": "seconds"}, "cost must be 'evaluations' or 'time'"),
])
def test_bad_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        SamplerScorer(**kw)
