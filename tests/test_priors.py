"""Priors on the data's scale (``prior_scale="auto"``, ``intercept_prior_scale="auto"``):
the column statistics they read, the scales they give, the centred intercept of
linear regression (checked against the exact conjugate posterior), and what the
fitted estimator reports."""
import pickle
import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.datasets import load_diabetes
from sklearn.preprocessing import StandardScaler

from bayes_subsample import (BayesianLinearRegression, BayesianLogisticRegression,
                             BayesianPoissonRegression)
from bayes_subsample import diagnostics as diag
from bayes_subsample.linear_model._priors import AUTO_SCALE, column_stats, data_priors

FAST = {"n_samples": 200, "n_warmup": 200, "n_chains": 2}
AUTO = {"prior_scale": "auto", "intercept_prior_scale": "auto"}


def _quiet(fit, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(*args)


def _columns(n=500, seed=0):
    """A measured column, a 0/1 indicator, a rare indicator, a {0, 3} column, a
    three-valued column with zeros, a constant column."""
    rng = np.random.default_rng(seed)
    return np.column_stack([
        rng.normal(5.0, 2.0, n),
        (rng.random(n) < 0.5).astype(float),
        (rng.random(n) < 0.01).astype(float),
        3.0 * (rng.random(n) < 0.3),
        rng.integers(0, 3, n).astype(float),
        np.full(n, 7.0),
    ])


def _expected_spread(X):
    out = []
    for col in X.T:
        values = np.unique(col)
        if values.size == 1:
            out.append(1.0)
        elif values.size == 2:
            out.append(values[1] - values[0])
        else:
            out.append(col.std())
    return np.array(out)


@pytest.mark.parametrize("kind", ["dense", "float32", "memmap", "csr", "dask"])
def test_column_stats_agree_across_storage(kind, tmp_path):
    X = _columns()
    X[:, 2][:3] = 1.0    # the rare indicator has a few ones
    if kind == "float32":
        X = X.astype(np.float32)
    elif kind == "memmap":
        m = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=X.dtype,
                                      shape=X.shape)
        m[:] = X
        X = m
    elif kind == "csr":
        X = sparse.csr_matrix(X)
    elif kind == "dask":
        da = pytest.importorskip("dask.array")
        X = da.from_array(X, chunks=(128, 6))
    dense = np.asarray(X.toarray() if sparse.issparse(X) else
                       (X.compute() if hasattr(X, "compute") else X), dtype=np.float64)
    mean, spread = column_stats(X)
    np.testing.assert_allclose(mean, dense.mean(0), rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(spread, _expected_spread(dense), rtol=1e-6)


def test_sparse_two_valued_needs_zero_among_its_values():
    # stored values {2, 3} with implicit zeros: three values, so the sd
    col = np.array([0.0, 2.0, 3.0, 0.0, 2.0, 0.0])
    X = sparse.csr_matrix(col[:, None])
    np.testing.assert_allclose(column_stats(X)[1], [col.std()])
    # stored values {3} and zeros: two values, spread 3
    col = np.array([0.0, 3.0, 3.0, 0.0])
    np.testing.assert_allclose(column_stats(sparse.csr_matrix(col[:, None]))[1], [3.0])
    # an all-zero column is constant
    np.testing.assert_allclose(column_stats(sparse.csr_matrix((4, 1)))[1], [1.0])


def test_indicator_prior_does_not_change_under_standard_scaler():
    X = _columns()
    Z = StandardScaler().fit_transform(X)
    a = data_priors(X, prior_scale="auto", intercept_prior_scale=10.0, fit_intercept=True)
    b = data_priors(Z, prior_scale="auto", intercept_prior_scale=10.0, fit_intercept=True)
    # the prior of the change of the linear predictor along a spread of each column
    np.testing.assert_allclose(a.coef_scale * _expected_spread(X), AUTO_SCALE)
    np.testing.assert_allclose(b.coef_scale * _expected_spread(Z), AUTO_SCALE)
    # so the prior on the effect of a one-unit change of X is the same
    sd = X.std(0)
    keep = sd > 0
    np.testing.assert_allclose(b.coef_scale[keep] / sd[keep], a.coef_scale[keep], rtol=1e-9)
    # a rare indicator keeps the prior of a change 0 -> 1, not 1 / sd
    assert a.coef_scale[2] == pytest.approx(AUTO_SCALE)


def test_intercept_prior_is_the_marginal_of_the_centred_one():
    X = _columns()[:, :4]
    y_scale, y_mean = 3.0, 40.0
    p = data_priors(X, prior_scale="auto", intercept_prior_scale="auto", fit_intercept=True,
                    y_scale=y_scale, y_mean=y_mean)
    var = (AUTO_SCALE * y_scale) ** 2 + np.sum((X.mean(0) * p.coef_scale) ** 2)
    assert p.intercept_loc == y_mean
    assert p.intercept_scale == pytest.approx(np.sqrt(var), rel=1e-12)
    # on centred X it is rstanarm's N(mean(y), (2.5 sd(y))^2)
    q = data_priors(X - X.mean(0), prior_scale="auto", intercept_prior_scale="auto",
                    fit_intercept=True, y_scale=y_scale, y_mean=y_mean)
    assert q.intercept_scale == pytest.approx(AUTO_SCALE * y_scale, rel=1e-9)
    # a fixed coefficient scale enters the same formula
    r = data_priors(X, prior_scale=2.0, intercept_prior_scale="auto", fit_intercept=True)
    assert r.intercept_scale == pytest.approx(
        np.sqrt(AUTO_SCALE ** 2 + 4.0 * np.sum(X.mean(0) ** 2)), rel=1e-12)


def test_diabetes_intercept_is_centred_on_the_data():
    """The README recipe: with StandardScaler and the default priors the
    intercept is the mean of y (the fixed N(0, 10^2) prior put it 3.7
    posterior sds below)."""
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    est = _quiet(BayesianLinearRegression(random_state=0, n_chains=2).fit, X, y)
    draws = est.posterior_draws_[..., X.shape[1]]
    mean, sd = draws.mean(), draws.std()
    mcse = float(diag.mcse_mean(draws[..., None])[0])
    assert abs(mean - y.mean()) < 0.1 * sd
    assert abs(mean - y.mean()) < 5 * mcse + 1e-9
    assert est.intercept_prior_mean_ == pytest.approx(y.mean())
    assert est.intercept_prior_scale_ == pytest.approx(AUTO_SCALE * y.std(), rel=1e-9)
    assert est.intercept_ == pytest.approx(mean)
    s = est.summary()
    row = s.names.index("intercept")
    assert s.priors[row] == f"normal({y.mean():.4g}, {AUTO_SCALE * y.std():.4g})"
    assert s.to_dict()["mean"][row] == pytest.approx(mean)


def test_centred_intercept_matches_the_exact_posterior():
    """Fixed noise: the posterior is Gaussian with the prior mean m = mean(y) on the
    intercept, on uncentred X (the prior is the marginal, not rstanarm's joint)."""
    rng = np.random.default_rng(3)
    n, d, sigma = 8, 3, 3.0
    X = rng.normal(2.0, 1.5, (n, d))
    y = 30.0 + X @ [1.0, -0.5, 0.2] + sigma * rng.normal(size=n)
    est = _quiet(BayesianLinearRegression(noise_scale=sigma, sampler="nuts", n_samples=2000,
                                          n_warmup=500, n_chains=4, random_state=1).fit, X, y)
    Xi = np.column_stack([X, np.ones(n)])
    scales = np.append(est.prior_scale_, est.intercept_prior_scale_)
    prec = Xi.T @ Xi / sigma**2 + np.diag(1 / scales**2)
    cov = np.linalg.inv(prec)
    sd = np.sqrt(np.diag(cov))
    mean = cov @ (Xi.T @ y / sigma**2 + np.append(np.zeros(d), y.mean()) / scales**2)
    # with 8 rows the prior is informative: centred on 0 instead of mean(y) the
    # exact means would move by up to 0.56 sd, so the check sees which is used
    mean0 = cov @ (Xi.T @ y / sigma**2)
    assert np.max(np.abs(mean - mean0) / sd) > 0.3
    flat = est.posterior_draws_.reshape(-1, d + 1)
    mcse = diag.mcse_mean(est.posterior_draws_)
    assert np.all(np.abs(flat.mean(0) - mean) < 5 * mcse)
    np.testing.assert_allclose(flat.std(0), sd, rtol=0.1)


def test_warm_start_and_pickle_with_a_centred_intercept():
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)[:200]
    y = y[:200]
    kw = dict(FAST, n_samples=100, random_state=2)
    once = _quiet(BayesianLinearRegression(**{**kw, "n_samples": 200}).fit, X, y)
    est = BayesianLinearRegression(warm_start=True, **kw)
    _quiet(est.fit, X, y)
    _quiet(est.fit, X, y)
    np.testing.assert_array_equal(est.posterior_draws_, once.posterior_draws_)
    assert est.trace_.n_samples == 200
    copy = pickle.loads(pickle.dumps(est))
    assert "_sampled_trace" not in vars(copy)
    np.testing.assert_array_equal(copy.predict(X[:5]), est.predict(X[:5]))
    # a fresh fit (warm_start=False) drops the trace kept for continuing
    est.set_params(warm_start=False)
    _quiet(est.fit, X, y)
    assert "_sampled_trace" not in vars(est)


def test_predictions_use_the_shifted_intercept():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 2))
    y = 1000.0 + X @ [2.0, -1.0] + rng.normal(size=300)
    est = _quiet(BayesianLinearRegression(random_state=0, **FAST).fit, X, y)
    assert abs(est.intercept_ - 1000.0) < 0.5
    assert np.sqrt(np.mean((est.predict(X) - y) ** 2)) < 1.2
    draws = est.sample_posterior()
    assert abs(draws[:, 2].mean() - 1000.0) < 0.5
    pytest.importorskip("arviz")
    idata = est.to_inference_data()
    assert float(idata.posterior["intercept"].mean()) == pytest.approx(est.intercept_)


@pytest.mark.parametrize("cls, y", [
    (BayesianLogisticRegression, "binary"), (BayesianLogisticRegression, "three"),
    (BayesianPoissonRegression, "counts"), (BayesianLinearRegression, "real")])
def test_auto_priors_on_every_estimator(cls, y):
    X = _columns(n=300)[:, :5]
    rng = np.random.default_rng(5)
    target = {"binary": rng.integers(0, 2, 300), "three": rng.integers(0, 3, 300),
              "counts": rng.poisson(2.0, 300), "real": rng.normal(3.0, 4.0, 300)}[y]
    est = _quiet(cls(random_state=0, **FAST, **AUTO).fit, X, target)
    s = np.std(target) if y == "real" else 1.0
    np.testing.assert_allclose(est.prior_scale_, AUTO_SCALE * s / _expected_spread(X))
    m = np.mean(target) if y == "real" else 0.0
    assert est.intercept_prior_mean_ == pytest.approx(m)
    # the model's prior, one block per class for multinomial fits
    K = 3 if y == "three" else 1
    scales = est.trace_.layout.prior_scales
    blocks = scales.reshape(K, -1) if K > 1 else scales[None, :]
    np.testing.assert_allclose(blocks[:, :5], np.tile(est.prior_scale_, (K, 1)))


def test_prior_scale_array_and_errors():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(100, 3))
    y = (X[:, 0] > 0).astype(int)
    est = _quiet(BayesianLogisticRegression(prior_scale=[1.0, 2.0, 3.0], random_state=0,
                                            **FAST).fit, X, y)
    np.testing.assert_array_equal(est.prior_scale_, [1.0, 2.0, 3.0])
    assert est.summary().priors[:3] == ["normal(0, 1)", "normal(0, 2)", "normal(0, 3)"]
    with pytest.raises(ValueError, match=r"prior_scale must be a float or an array of shape "
                                         r"\(3,\) \(one per column of X\), got shape \(2,\)"):
        BayesianLogisticRegression(prior_scale=[1.0, 2.0], **FAST).fit(X, y)
    with pytest.raises(ValueError, match="prior_scale must be finite and > 0"):
        BayesianLogisticRegression(prior_scale=[1.0, 0.0, 2.0], **FAST).fit(X, y)
    with pytest.raises(ValueError, match="intercept_prior_scale"):
        BayesianLogisticRegression(intercept_prior_scale="wide", **FAST).fit(X, y)


def test_no_intercept_with_auto_priors():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(200, 2))
    y = X @ [1.0, 2.0] + rng.normal(size=200)
    est = _quiet(BayesianLinearRegression(fit_intercept=False, random_state=0, **FAST).fit,
                 X, y)
    assert est.intercept_ == 0.0 and est.intercept_prior_scale_ is None
    assert est.posterior_draws_.shape[-1] == 3    # two coefficients, log(sigma / s)
    np.testing.assert_allclose(est.coef_, [1.0, 2.0], atol=0.3)


def test_command_line_prior_scale():
    from bayes_subsample.cli._args import build_parser
    p = build_parser()
    base = ["fit", "higgs-sample"]
    assert p.parse_args(base).prior_scale == "auto"
    assert p.parse_args(base + ["--prior-scale", "AUTO"]).prior_scale == "auto"
    assert p.parse_args(base + ["--prior-scale", "2.5"]).prior_scale == 2.5
    with pytest.raises(SystemExit):
        p.parse_args(base + ["--prior-scale", "-1"])
