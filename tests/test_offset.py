"""Poisson exposure and offsets: the compiled terms against NumPy, the posterior
mode against scikit-learn's PoissonRegressor, every sampler against the exact
(long NUTS) posterior, predictions, and clear errors."""
import warnings

import numpy as np
import pytest
from _posterior import assert_means_match
from scipy import sparse
from scipy.special import gammaln

from bayes_subsample import BayesianPoissonRegression
from bayes_subsample._optimize import find_map
from bayes_subsample.models import GLM, LogisticRegressionModel, PoissonRegressionModel
from bayes_subsample.samplers import HMCECS


def _data(n=3000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    exposure = rng.uniform(0.2, 5.0, n)
    coef, icpt = rng.normal(scale=0.4, size=d), 0.3
    y = rng.poisson(exposure * np.exp(X @ coef + icpt)).astype(np.float64)
    return X, y, exposure


def _quiet(call, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(*args, **kw)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["dense", "csr"])
def test_compiled_terms_with_offset_match_numpy(dtype, kind):
    X, y, exposure = _data(n=700)
    off = np.log(exposure)
    Xs = X.astype(dtype)
    Xm = sparse.csr_matrix(Xs) if kind == "csr" else Xs
    model = PoissonRegressionModel(Xm, y, offset=off)
    rng = np.random.default_rng(1)
    theta, theta_new, theta_star = (rng.normal(scale=0.3, size=4) for _ in range(3))
    Xi = np.column_stack([Xs.astype(np.float64), np.ones(len(y))])
    eta = Xi @ theta + off
    ll = y * eta - np.exp(eta) - gammaln(y + 1)
    tol = dict(rtol=1e-12, atol=1e-10)
    cy = model.compiled
    np.testing.assert_allclose(cy.loglik_terms(theta), ll, **tol)
    eta_new = Xi @ theta_new + off
    np.testing.assert_allclose(cy.loglik_diff_terms(theta, theta_new),
                               y * (eta_new - eta) - np.exp(eta_new) + np.exp(eta), **tol)
    g, t = cy.grad_sum_terms(theta)
    np.testing.assert_allclose(g, Xi.T @ (y - np.exp(eta)), rtol=1e-10, atol=1e-8)
    assert t == pytest.approx(ll.sum(), rel=1e-12)
    np.testing.assert_allclose(cy.eta(theta), eta, **tol)
    total, grad, hess = model.full_pass(theta, hessian=True)
    assert total == pytest.approx(ll.sum(), rel=1e-12)
    np.testing.assert_allclose(grad, Xi.T @ (y - np.exp(eta)), rtol=1e-10, atol=1e-8)
    # (a float32 design's Hessian is summed in float32 products: to its precision)
    htol = 1e-10 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(hess, -(Xi.T * np.exp(eta)) @ Xi, rtol=htol, atol=1e-8)
    # second-order Taylor residuals around theta_star: l - (l* + g* d + d H* d / 2)
    es = Xi @ theta_star + off
    d_eta = eta - es
    proxy = y * eta - np.exp(es) * (1 + d_eta + d_eta**2 / 2) - gammaln(y + 1)
    np.testing.assert_allclose(cy.cv_residual_terms(2, theta_star, theta), ll - proxy,
                               rtol=1e-9, atol=1e-9)
    # the cache of eta* holds the offset too
    np.testing.assert_allclose(cy.cv_cache(theta_star), es, **tol)
    # a subset keeps its rows' offsets
    sub = model.subset(np.arange(0, 700, 7))
    np.testing.assert_allclose(sub.compiled.loglik_terms(theta), ll[::7], **tol)


def test_constant_offset_is_an_intercept_shift():
    """With a flat intercept prior, an offset c shifts the intercept's posterior by -c."""
    X, y, _ = _data(n=2000)
    c = 1.7
    kw = dict(prior_scale=5.0, intercept_prior_scale=1e4)
    a = find_map(PoissonRegressionModel(X, y, **kw))[0]
    b = find_map(PoissonRegressionModel(X, y, offset=np.full(len(y), c), **kw))[0]
    np.testing.assert_allclose(b[:-1], a[:-1], atol=1e-8)
    assert b[-1] == pytest.approx(a[-1] - c, abs=1e-8)


def test_posterior_mode_matches_poisson_regressor_with_exposure():
    """scikit-learn fits exposure as the rate y / exposure with sample_weight=exposure:
    the same likelihood. Its objective sum_k w_k dev_k / (2 sum w) + alpha |coef|^2 / 2
    is the negative log posterior over sum(exposure) with the prior N(0, 1 / (alpha
    sum(exposure))) on each coefficient and a flat intercept."""
    from sklearn.linear_model import PoissonRegressor
    X, y, exposure = _data(n=4000)
    alpha = 0.01
    sk = PoissonRegressor(alpha=alpha, tol=1e-12, max_iter=10_000).fit(
        X, y / exposure, sample_weight=exposure)
    scale = 1.0 / np.sqrt(alpha * exposure.sum())
    model = PoissonRegressionModel(X, y, prior_scale=scale, intercept_prior_scale=1e8,
                                   offset=np.log(exposure))
    mode = find_map(model, tol=1e-12)[0]
    np.testing.assert_allclose(mode[:-1], sk.coef_, atol=1e-4)
    assert mode[-1] == pytest.approx(sk.intercept_, abs=1e-4)
    # without the exposure the mode is elsewhere (the check can fail)
    plain = find_map(PoissonRegressionModel(X, y, prior_scale=scale,
                                            intercept_prior_scale=1e8))[0]
    assert abs(plain[-1] - sk.intercept_) > 0.05


@pytest.mark.parametrize("sampler", ["hmc_ecs", "hmc_ecs_signed", "hmc_ecs_strata", "nuts",
                                     "mh", "austerity", "sgld"])
def test_every_sampler_sees_the_exposure(sampler):
    """Draws with exposure against long NUTS on the same posterior (within Monte
    Carlo error), and away from the posterior without exposure."""
    X, y, exposure = _data(n=4000, seed=2)
    kw = dict(n_chains=2, random_state=0)
    ref = _quiet(BayesianPoissonRegression(sampler="nuts", n_samples=2000, n_warmup=500, **kw)
                 .fit, X, y, exposure=exposure)
    # the stratified warmup's pilot and block paths too
    obj = HMCECS(stratify=True) if sampler == "hmc_ecs_strata" else sampler
    est = _quiet(BayesianPoissonRegression(sampler=obj, n_samples=1000, n_warmup=500,
                                           **kw).fit, X, y, exposure=exposure)
    if sampler.startswith("hmc_ecs"):      # the compiled subsampling kernel ran
        assert est.diagnostics_["choice"]["engine"] in ("subsampled", "stratified warmup")
    r, e = assert_means_match(ref, est, sampler)
    # the intercept without the exposure: E[log exposure] ~ 0.76 away
    assert abs(e[:, -1].mean() - r[:, -1].mean()) < 0.3 * abs(np.log(exposure).mean())


def test_predictions_and_draws_scale_with_the_exposure():
    X, y, exposure = _data(n=1500)
    est = _quiet(BayesianPoissonRegression(n_samples=300, n_warmup=300, n_chains=2,
                                           random_state=0).fit, X, y, exposure=exposure)
    rate = est.predict(X[:10])
    np.testing.assert_allclose(est.predict(X[:10], exposure=exposure[:10]), rate * exposure[:10],
                               rtol=1e-10)
    np.testing.assert_allclose(est.predict(X[:10], offset=np.log(exposure[:10])),
                               rate * exposure[:10], rtol=1e-10)
    mean, std = est.predict(X[:10], return_std=True, exposure=np.full(10, 4.0))
    assert np.all(std > np.sqrt(mean) * 0.99)
    draws = est.sample_y(X[:3], n_samples=4000, random_state=1, exposure=np.full(3, 50.0))
    np.testing.assert_allclose(draws.mean(1), 50 * rate[:3], rtol=0.1)
    # the fitted counts: y ~ exposure x rate
    assert abs(np.sum(est.predict(X, exposure=exposure)) / np.sum(y) - 1) < 0.02


def test_warm_start_with_exposure_continues_and_refuses_another():
    X, y, exposure = _data(n=800)
    kw = dict(n_samples=100, n_warmup=100, n_chains=2, random_state=3)
    once = _quiet(BayesianPoissonRegression(**{**kw, "n_samples": 200}).fit, X, y,
                  exposure=exposure)
    est = BayesianPoissonRegression(warm_start=True, **kw)
    _quiet(est.fit, X, y, exposure=exposure)
    _quiet(est.fit, X, y, exposure=exposure)
    np.testing.assert_array_equal(est.posterior_draws_, once.posterior_draws_)
    with pytest.raises(ValueError, match="differs in: offset"):
        _quiet(est.fit, X, y, exposure=2 * exposure)


@pytest.mark.parametrize("kw, match", [
    ({"exposure": np.zeros(50)}, "exposure must be > 0"),
    ({"exposure": -np.ones(50)}, "exposure must be > 0"),
    ({"exposure": np.ones(49)}, r"exposure must have shape \(50,\)"),
    ({"offset": np.full(50, np.nan)}, "offset contains NaN"),
    ({"offset": np.array(["a"] * 50)}, "offset must be numeric"),
])
def test_bad_exposure_and_offset(kw, match):
    X, y, _ = _data(n=50)
    with pytest.raises(ValueError, match=match):
        BayesianPoissonRegression(n_samples=20, n_warmup=20).fit(X, y, **kw)


def test_model_level_offset_checks():
    X, y, _ = _data(n=30)
    with pytest.raises(ValueError, match="subtract the offset from y"):
        GLM(X, y, "gaussian", offset=np.zeros(30))
    with pytest.raises(ValueError, match=r"offset must have shape \(30,\)"):
        PoissonRegressionModel(X, y, offset=np.zeros(3))
    # the logistic family takes one (GLM(..., "logistic", offset=...))
    yb = (y > 1).astype(float)
    m = GLM(X, yb, "logistic", offset=np.full(30, 0.5))
    theta = np.zeros(4)
    np.testing.assert_allclose(m.compiled.eta(theta), 0.5)
    base = LogisticRegressionModel(X, yb)
    assert m.full_pass(theta)[0] != base.full_pass(theta)[0]


def test_dask_refuses_an_exposure():
    da = pytest.importorskip("dask.array")
    X, y, exposure = _data(n=400)
    with pytest.raises(ValueError, match="exposure and offset need X in memory"):
        BayesianPoissonRegression(n_samples=20, n_warmup=20).fit(
            da.from_array(X, chunks=100), y, exposure=exposure)


def test_all_zero_counts_warn():
    X, _, _ = _data(n=200)
    with pytest.warns(UserWarning, match="every count in y is 0.*intercept_prior_scale"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=RuntimeWarning)
            BayesianPoissonRegression(n_samples=50, n_warmup=50, n_chains=2,
                                      random_state=0).fit(X, np.zeros(200))


def test_poisson_estimator_pickles_of_the_old_module_path_load():
    """Pickles made before the class moved to _poisson.py name it in _estimators:
    unpickling looks it up there (``find_class``) and finds the class."""
    import io
    import pickle

    unpickler = pickle.Unpickler(io.BytesIO(b""))
    cls = unpickler.find_class("bayes_subsample.linear_model._estimators",
                               "BayesianPoissonRegression")
    assert cls is BayesianPoissonRegression
    est = pickle.loads(pickle.dumps(BayesianPoissonRegression(n_samples=5)))
    assert type(est) is BayesianPoissonRegression and est.n_samples == 5
