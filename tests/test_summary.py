"""The estimators' ``summary()`` and the names of their parameters: feature names
from a DataFrame, class labels, the noise scale, the priors, the ArviZ export."""
import warnings

import numpy as np
import pytest

from bayes_subsample import (BayesianLinearRegression, BayesianLogisticRegression,
                             BayesianPoissonRegression)
from bayes_subsample import diagnostics as diag

pd = pytest.importorskip("pandas")

FAST = {"n_samples": 100, "n_warmup": 100, "n_chains": 2, "random_state": 0}
COLUMNS = ["age", "income", "height"]


def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # short chains: convergence warnings
        return est.fit(X, y)


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(300, 3)), columns=COLUMNS)
    eta = X["age"].to_numpy() - X["income"].to_numpy()
    y = (eta + rng.logistic(size=300) > 0).astype(int)
    labels = np.array(["lo", "mid", "hi"])[np.digitize(eta + rng.normal(size=300), [-1, 1])]
    return X, y, labels


@pytest.fixture(scope="module")
def clf(frame):
    X, y, _ = frame
    return _fit(BayesianLogisticRegression(prior_scale=2.5, intercept_prior_scale=5.0, **FAST),
                X, y)


def test_dataframe_columns_name_the_rows_with_their_priors(clf):
    s = clf.summary()
    assert isinstance(s, diag.Summary)
    names = ["coef[age]", "coef[income]", "coef[height]", "intercept"]
    assert s.names == names and clf.trace_.param_names == names
    assert s.priors == ["normal(0, 2.5)"] * 3 + ["normal(0, 5)"]
    text = str(s)
    assert text.splitlines()[0].split()[:2] == ["name", "prior"]
    assert "coef[income]  normal(0, 2.5)" in text
    df = s.to_pandas()
    assert df.index.name == "name" and list(df.index) == names
    assert list(df.columns) == ["prior", *diag.Summary.columns]


def test_summary_reuses_the_fits_diagnostics(clf):
    s = clf.summary()
    for c in ("r_hat", "ess_bulk", "ess_tail", "mcse_mean"):
        np.testing.assert_array_equal(s[c], clf.diagnostics_[c])
        np.testing.assert_array_equal(s[c], clf.diagnostics_["summary"][c])
    fresh = diag.summary(clf.trace_.reported_draws())
    for c in diag.Summary.columns:
        np.testing.assert_array_equal(s[c], fresh[c])
    np.testing.assert_allclose(s["mean"], np.r_[clf.coef_, clf.intercept_], rtol=1e-12)


def test_a_fit_computes_the_rank_diagnostics_once(frame, monkeypatch):
    X, y, _ = frame
    calls = []
    for name in ("summary", "rhat", "ess_bulk", "ess_tail", "mcse_mean"):
        f = getattr(diag, name)
        monkeypatch.setattr(diag, name, lambda *a, _f=f, _n=name, **k: calls.append(_n) or
                            _f(*a, **k))
    est = _fit(BayesianLogisticRegression(sampler="hmc", **FAST), X, y)
    est.summary(), est.summary(), est.trace_.diagnostics()
    assert calls == ["summary"]


def test_numpy_fit_names_by_index(frame):
    X, y, _ = frame
    est = _fit(BayesianPoissonRegression(sampler="hmc", fit_intercept=False, **FAST),
               X.to_numpy(), (y + 1))
    assert not hasattr(est, "feature_names_in_")
    assert est.summary().names == ["coef[0]", "coef[1]", "coef[2]"]


def test_multinomial_names_classes_and_features(frame):
    X, _, labels = frame
    est = _fit(BayesianLogisticRegression(sampler="hmc", **FAST), X, labels)
    s = est.summary()
    assert list(est.classes_) == ["hi", "lo", "mid"]
    expect = [n for c in est.classes_
              for n in [f"coef[{c}, {f}]" for f in COLUMNS] + [f"intercept[{c}]"]]
    assert s.names == expect
    # the rows are the centred coefficients: their means are coef_ and intercept_
    means = s["mean"].reshape(3, 4)
    np.testing.assert_allclose(means[:, :3], est.coef_, atol=1e-12)
    np.testing.assert_allclose(means[:, 3], est.intercept_, atol=1e-12)


def test_linear_regression_summarises_sigma(frame):
    X, _, _ = frame
    rng = np.random.default_rng(1)
    y = 3.0 * X["age"].to_numpy() + 2.0 * rng.normal(size=300)
    est = _fit(BayesianLinearRegression(noise_prior_scale=1.5, **FAST), X, y)
    s = est.summary()
    assert s.names[-3:] == ["intercept", "log_noise_ratio", "sigma"]
    assert s.priors[-2:] == ["normal(0, 1.5)", f"lognormal(log({est.noise_reference_:.4g}), 1.5)"]
    assert s["mean"][-1] == pytest.approx(est.noise_scale_, rel=1e-12)
    assert s["sd"][-1] == pytest.approx(est.noise_scale_std_, rel=0.01)
    # sigma is monotone in log_noise_ratio: same ranks, same bulk ESS
    assert s["ess_bulk"][-1] == pytest.approx(s["ess_bulk"][-2], rel=1e-9)
    fixed = _fit(BayesianLinearRegression(noise_scale="plugin", **FAST), X, y)
    assert fixed.summary().names[-1] == "intercept"


def test_arviz_export_uses_the_same_names(clf, frame):
    az = pytest.importorskip("arviz")
    idata = clf.to_inference_data()
    post = idata.posterior
    assert list(post["coef"].coords["feature"].values) == COLUMNS
    np.testing.assert_array_equal(post["coef"].sel(feature="income").values,
                                  clf.posterior_draws_[:, :, 1])
    assert list(az.summary(idata, kind="stats").index) == clf.summary().names
    X, _, labels = frame
    multi = _fit(BayesianLogisticRegression(sampler="hmc", **FAST), X, labels)
    post = multi.to_inference_data().posterior
    assert post["coef"].dims == ("chain", "draw", "class", "feature")
    assert list(post["intercept"].coords["class"].values) == ["hi", "lo", "mid"]
    np.testing.assert_array_equal(post["coef"].sel({"class": "lo", "feature": "age"}).values,
                                  multi.posterior_draws_[:, :, 4])


def test_renamed_parameters_export_one_variable_each(clf):
    pytest.importorskip("arviz")
    trace = clf.trace_
    saved = trace.param_names
    try:
        trace.param_names = ["a", "b", "c", "d"]          # as the command line renames them
        assert set(trace.to_inference_data().posterior.data_vars) == {"a", "b", "c", "d"}
        assert trace.summary().names == ["a", "b", "c", "d"]
    finally:
        trace.param_names = saved


def test_summary_priors_and_append():
    draws = np.random.default_rng(0).normal(size=(2, 50, 2))
    with pytest.raises(ValueError, match="priors has 1 entries for 2"):
        diag.summary(draws, priors=["normal(0, 1)"])
    a = diag.summary(draws, names=["a", "b"], priors=["p", "q"], notes=["note"])
    both = a.append(diag.summary(draws[..., :1], names=["c"], priors=["r"]))
    assert both.names == ["a", "b", "c"] and both.priors == ["p", "q", "r"]
    assert both.notes == ["note"]
    np.testing.assert_allclose(both["mean"][[0, 2]], a["mean"][[0, 0]], rtol=1e-12)
    assert a.append(diag.summary(draws[..., :1])).priors is None
    assert "prior" not in diag.summary(draws).to_dict()
