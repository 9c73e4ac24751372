"""Row weights (``sample_weight``): the compiled terms against NumPy, integer
weights against duplicated rows (the model's sums to rounding; the exact
samplers' draws to rounding; the subsampling samplers' posteriors within Monte
Carlo error), HMC-ECS's buffered rows against the estimator written out in
NumPy, the "auto" priors' weighted statistics, and clear errors."""
import warnings

import numpy as np
import pytest
from _posterior import assert_means_match
from bayes_subsample.samplers._hmc_ecs_fast import ECSCore
from scipy import sparse
from scipy.special import gammaln, log_expit

from bayes_subsample import (
    BayesianLinearRegression,
    BayesianLogisticRegression,
    BayesianPoissonRegression,
)
from bayes_subsample.linear_model._priors import column_stats, data_priors, target_stats
from bayes_subsample.models import GLM
from bayes_subsample.models._glm import normal_equations
from bayes_subsample.samplers import HMCECS


def _quiet(call, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(*args, **kw)


def _design(n=400, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, -1] = rng.random(n) < 0.2          # an indicator column
    return X, rng


def _targets(family, X, rng):
    eta = X @ np.linspace(0.6, -0.4, X.shape[1]) + 0.2
    if family == "logistic":
        return (rng.random(len(eta)) < 1 / (1 + np.exp(-eta))).astype(np.float64)
    if family == "poisson":
        return rng.poisson(np.exp(eta)).astype(np.float64)
    if family == "multinomial":
        return np.digitize(eta + rng.logistic(size=len(eta)), [-0.5, 0.8])
    return eta + rng.normal(size=len(eta))


def _numpy_terms(family, Xi, y, theta):
    """Unweighted per-row log-likelihood terms and their derivative in eta."""
    eta = Xi @ theta
    if family == "logistic":
        return y * eta + log_expit(-eta), y - 1 / (1 + np.exp(-eta))
    if family == "poisson":
        return y * eta - np.exp(eta) - gammaln(y + 1), y - np.exp(eta)
    return -0.5 * (y - eta) ** 2 - 0.5 * np.log(2 * np.pi), y - eta


# ---- the compiled GLM terms ----------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["dense", "csr"])
@pytest.mark.parametrize("family", ["logistic", "poisson", "gaussian"])
def test_weighted_glm_terms_match_numpy(family, kind, dtype):
    X, rng = _design()
    y = _targets(family, X, rng)
    w = rng.uniform(0.0, 3.0, len(y))
    w[::7] = 0.0
    Xs = X.astype(dtype)
    model = GLM(sparse.csr_matrix(Xs) if kind == "csr" else Xs, y, family, weights=w)
    Xi = np.column_stack([Xs.astype(np.float64), np.ones(len(y))])
    theta, theta_new, theta_star = (rng.normal(scale=0.3, size=4) for _ in range(3))
    ll, r = _numpy_terms(family, Xi, y, theta)
    ll_new, _ = _numpy_terms(family, Xi, y, theta_new)
    cy = model.compiled
    tol = dict(rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(cy.loglik_terms(theta), w * ll, **tol)
    np.testing.assert_allclose(cy.loglik_diff_terms(theta, theta_new), w * (ll_new - ll), **tol)
    g, t = cy.grad_sum_terms(theta)
    np.testing.assert_allclose(g, Xi.T @ (w * r), rtol=1e-10, atol=1e-9)
    assert t == pytest.approx(np.sum(w * ll), rel=1e-11)
    np.testing.assert_allclose(model.grad_loglik_terms(theta, np.arange(20))
                               if hasattr(model, "grad_loglik_terms")
                               else cy.grad_terms(theta, np.arange(20)),
                               (w * r)[:20, None] * Xi[:20], rtol=1e-10, atol=1e-12)
    total, grad, hess = model.full_pass(theta, hessian=True)
    assert total == pytest.approx(np.sum(w * ll), rel=1e-11)
    np.testing.assert_allclose(grad, Xi.T @ (w * r), rtol=1e-10, atol=1e-9)
    # the per-row curvature -d r / d eta, by differences of the derivative
    h = 1e-6
    _, r_h = _numpy_terms(family, Xi, y, theta + h * np.eye(4)[-1])
    curv = -(r_h - r) / h
    np.testing.assert_allclose(hess, -(Xi.T * (w * curv)) @ Xi, rtol=1e-4, atol=1e-4)
    # the Hessian operator of wide models sees the weights too
    v = rng.normal(size=4)
    prec = model.neg_hessian_operator(theta) @ v
    # (a float32 design's Hessian is summed in float32 products: to its precision)
    htol = 1e-9 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(prec, -hess @ v + model.prior.precision * v, rtol=htol,
                               atol=htol)
    # Taylor residuals of order 2 are the weighted unweighted residuals
    plain = GLM(Xs, y, family)
    np.testing.assert_allclose(cy.cv_residual_terms(2, theta_star, theta),
                               w * plain.compiled.cv_residual_terms(2, theta_star, theta),
                               rtol=1e-10, atol=1e-12)
    # a subset keeps its rows' weights
    sub = model.subset(np.arange(0, len(y), 5))
    np.testing.assert_allclose(sub.compiled.loglik_terms(theta), (w * ll)[::5], **tol)


@pytest.mark.parametrize("family", ["logistic", "poisson", "gaussian"])
def test_integer_weights_are_duplicated_rows_in_every_sum(family):
    X, rng = _design(n=300)
    y = _targets(family, X, rng)
    w = rng.integers(0, 4, len(y))
    rep = np.repeat(np.arange(len(y)), w)
    a, b = GLM(X, y, family, weights=w), GLM(X[rep], y[rep], family)
    theta, theta_star = rng.normal(scale=0.3, size=4), rng.normal(scale=0.3, size=4)
    for x, z in zip(a.full_pass(theta, hessian=True), b.full_pass(theta, hessian=True)):
        np.testing.assert_allclose(x, z, rtol=1e-12, atol=1e-10)
    for order in (1, 2):
        (ga, ta), (gb, tb) = (m.compiled.cv_grad_sum_terms(order, theta_star, theta)
                              for m in (a, b))
        np.testing.assert_allclose(ga, gb, rtol=1e-12, atol=1e-10)
        assert ta == pytest.approx(tb, rel=1e-12, abs=1e-10)
    assert a.fingerprint() != GLM(X, y, family).fingerprint()


def test_unit_weights_change_nothing():
    X, rng = _design()
    y = _targets("logistic", X, rng)
    a, b = GLM(X, y, "logistic", weights=np.ones(len(y))), GLM(X, y, "logistic")
    theta = rng.normal(size=4)
    for x, z in zip(a.full_pass(theta, hessian=True), b.full_pass(theta, hessian=True)):
        np.testing.assert_array_equal(x, z)


def test_range_bounds_scale_with_the_largest_weight():
    X, rng = _design()
    y = _targets("logistic", X, rng)
    w = np.full(len(y), 0.5)
    w[3] = 4.0
    a, b = GLM(X, y, "logistic", weights=w), GLM(X, y, "logistic")
    t0, t1 = rng.normal(size=4), rng.normal(size=4)
    assert a.range_bound(t0, t1) == pytest.approx(4.0 * b.range_bound(t0, t1))
    diffs = np.abs(a.compiled.loglik_diff_terms(t0, t1))
    assert diffs.max() <= a.range_bound(t0, t1)


# ---- HMC-ECS's buffered rows -------------------------------------------------------------
def _perturbed_reference(model, order, theta_star, theta, idx, n_scale, exact=None):
    """U = -(Q + sum_exact d + n_scale mean_u d - sigma2 / 2 + log prior): the
    perturbed estimator written out with the model's (weighted) residuals."""
    ll, A, B = model.full_pass(theta_star, hessian=True)
    delta = theta - theta_star
    Q = ll + A @ delta + (0.5 * delta @ B @ delta if order == 2 else 0.0)
    d = model.compiled.cv_residual_terms(order, theta_star, theta, idx)
    m = len(idx)
    sigma2 = (n_scale / m) ** 2 * np.sum((d - d.mean()) ** 2)
    est = Q + n_scale * d.mean() - 0.5 * sigma2
    if exact is not None and len(exact):
        est += model.compiled.cv_residual_terms(order, theta_star, theta, exact).sum()
    return -(est + model.prior.log_prob(theta))


@pytest.mark.parametrize("strata", [False, True])
@pytest.mark.parametrize("family", ["logistic", "poisson"])
def test_ecs_core_weights_its_buffered_rows(family, strata):
    X, rng = _design(n=3000)
    y = _targets(family, X, rng)
    w = rng.uniform(0.2, 3.0, len(y))
    model = GLM(X, y, family, weights=w, prior_scale=3.0, intercept_prior_scale=3.0)
    theta_star = rng.normal(scale=0.2, size=4)
    ll, A, B = model.full_pass(theta_star, hessian=True)
    core = ECSCore(model.compiled, 2, model.prior.precision, "perturbed")
    assert core.weighted
    exact, sampled, n_scale = None, np.arange(len(y)), len(y)
    if strata:
        exact, sampled = np.arange(0, 3000, 10), np.setdiff1d(np.arange(3000),
                                                              np.arange(0, 3000, 10))
        core.set_strata(exact, sampled)
        n_scale = len(sampled)
    idx = rng.choice(sampled, size=200)
    core.set_rows(idx, 20)
    core.set_reference(theta_star, ll, A, B)
    for _ in range(3):
        theta = theta_star + 0.05 * rng.normal(size=4)
        U, g = core.value_and_grad(theta)
        ref = _perturbed_reference(model, 2, theta_star, theta, idx, n_scale, exact)
        assert U == pytest.approx(ref, rel=1e-10)
        h = 1e-6
        for j in range(4):
            e = np.eye(4)[j] * h
            fd = (_perturbed_reference(model, 2, theta_star, theta + e, idx, n_scale, exact)
                  - _perturbed_reference(model, 2, theta_star, theta - e, idx, n_scale, exact))
            assert g[j] == pytest.approx(fd / (2 * h), rel=1e-5, abs=1e-5)
    # the block update copies the proposed rows' weights with the rows
    core.set_position(theta_star + 0.01)
    gen = np.random.default_rng(3)
    moved = 0
    for _ in range(40):
        moved += core.u_step(gen)[0]
    assert moved > 0
    theta = theta_star + 0.02
    ref = _perturbed_reference(model, 2, theta_star, theta, core.indices, n_scale, exact)
    assert core.value_and_grad(theta)[0] == pytest.approx(ref, rel=1e-10)


# ---- the "auto" priors' statistics -----------------------------------------------------
@pytest.mark.parametrize("kind", ["dense", "csr"])
def test_weighted_column_statistics_are_those_of_repeated_rows(kind):
    X, rng = _design(n=500)
    X[:, 0] *= 7.0
    w = rng.integers(1, 5, len(X))
    rep = np.repeat(np.arange(len(X)), w)
    conv = sparse.csr_matrix if kind == "csr" else np.asarray
    mean_w, spread_w = column_stats(conv(X), w.astype(np.float64))
    mean_r, spread_r = column_stats(conv(X[rep]))
    np.testing.assert_allclose(mean_w, mean_r, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(spread_w, spread_r, rtol=1e-12)
    y = rng.normal(size=len(X)) * 3 + 1
    np.testing.assert_allclose(target_stats(y, w.astype(np.float64)), target_stats(y[rep]),
                               rtol=1e-12)
    pw = data_priors(conv(X), prior_scale="auto", intercept_prior_scale="auto",
                     fit_intercept=True, weights=w.astype(np.float64))
    pr = data_priors(conv(X[rep]), prior_scale="auto", intercept_prior_scale="auto",
                     fit_intercept=True)
    np.testing.assert_allclose(pw.coef_scale, pr.coef_scale, rtol=1e-12)
    assert pw.intercept_scale == pytest.approx(pr.intercept_scale, rel=1e-12)
    G_w, b_w = normal_equations(conv(X), y, True, w.astype(np.float64))
    G_r, b_r = normal_equations(conv(X[rep]), y[rep], True)
    np.testing.assert_allclose(G_w, G_r, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(b_w, b_r, rtol=1e-12, atol=1e-9)


# ---- estimators ------------------------------------------------------------------------
def _fit_pair(cls, sampler, X, y, w, **kw):
    rep = np.repeat(np.arange(len(y)), w)
    kw = dict(sampler=sampler, n_samples=200, n_warmup=200, n_chains=2, random_state=0, **kw)
    a = _quiet(cls(**kw).fit, X, y, sample_weight=w)
    b = _quiet(cls(**kw).fit, X[rep], y[rep])
    return a, b


@pytest.mark.parametrize("cls, family, extra", [
    (BayesianLogisticRegression, "logistic", {}),
    (BayesianLogisticRegression, "multinomial", {}),
    (BayesianPoissonRegression, "poisson", {}),
    (BayesianLinearRegression, "gaussian", {"noise_scale": "plugin"}),
    (BayesianLinearRegression, "gaussian", {}),             # the noise scale sampled
])
@pytest.mark.parametrize("sampler", ["nuts", "mh"])
def test_exact_samplers_weighted_equal_duplicated_draw_for_draw(cls, family, extra, sampler):
    """Full-data samplers see the same log posterior (to rounding), so the same
    seed gives the same draws: the auto priors, the noise estimate and the
    likelihood all count a row of weight k as k rows. Random-walk MH keeps the
    draws equal to rounding; NUTS's trajectories can amplify a rounding
    difference at a U-turn or a tree's choice, so there almost every draw is
    equal and the posterior means agree to a hundredth of a posterior sd."""
    X, rng = _design(n=250)
    y = _targets(family, X, rng)
    w = rng.integers(0, 4, len(y))
    a, b = _fit_pair(cls, sampler, X, y, w, **extra)
    if sampler == "mh":
        np.testing.assert_allclose(a.posterior_draws_, b.posterior_draws_, rtol=1e-9,
                                   atol=1e-9)
    else:
        close = np.isclose(a.posterior_draws_, b.posterior_draws_, rtol=1e-6, atol=1e-6)
        assert close.mean() > 0.95
        sd = b.posterior_draws_.reshape(-1, b.posterior_draws_.shape[-1]).std(0)
        gap = np.abs(a.posterior_draws_.mean((0, 1)) - b.posterior_draws_.mean((0, 1)))
        np.testing.assert_array_less(gap, 0.01 * sd)
    np.testing.assert_allclose(a.prior_scale_, b.prior_scale_, rtol=1e-12)
    assert a.intercept_prior_scale_ == pytest.approx(b.intercept_prior_scale_, rel=1e-12)
    if family == "gaussian":
        assert a.noise_scale_ == pytest.approx(b.noise_scale_, rel=1e-12)
        assert a.intercept_prior_mean_ == pytest.approx(b.intercept_prior_mean_, rel=1e-12)


@pytest.mark.parametrize("sampler", ["hmc_ecs", "hmc_ecs_strata", "austerity", "confidence",
                                     "sgld"])
def test_subsampling_samplers_weighted_match_the_duplicated_posterior(sampler):
    """Subsampling samplers draw rows from the n weighted rows, not from the
    sum(w) repeated ones, so their draws differ from the duplicated data's;
    their posterior is the same within Monte Carlo error (against long NUTS on
    the duplicated rows)."""
    X, rng = _design(n=4000, seed=3)
    y = _targets("logistic", X, rng)
    w = rng.integers(1, 4, len(y))
    rep = np.repeat(np.arange(len(y)), w)
    kw = dict(n_chains=2, random_state=0)
    ref = _quiet(BayesianLogisticRegression(sampler="nuts", n_samples=2000, n_warmup=500,
                                            **kw).fit, X[rep], y[rep])
    obj = HMCECS(stratify=True) if sampler == "hmc_ecs_strata" else sampler
    est = _quiet(BayesianLogisticRegression(sampler=obj, n_samples=1500, n_warmup=500,
                                            **kw).fit, X, y, sample_weight=w)
    if sampler.startswith("hmc_ecs"):      # the compiled subsampling kernel ran
        assert est.diagnostics_["choice"]["engine"] in ("subsampled", "stratified warmup")
    r, e = assert_means_match(ref, est, sampler)
    sd = r.std(0)
    if sampler != "sgld":
        np.testing.assert_array_less(np.abs(e.std(0) / sd - 1), 0.15)
    # the unweighted posterior is narrower by about sqrt(mean w): the check can fail
    plain = _quiet(BayesianLogisticRegression(sampler="nuts", n_samples=500, n_warmup=300,
                                              **kw).fit, X, y)
    assert np.all(plain.posterior_draws_.reshape(-1, 4).std(0) > 1.2 * sd)


def test_zero_weights_drop_rows_and_unit_weights_are_unweighted():
    X, rng = _design(n=300)
    y = _targets("logistic", X, rng)
    kw = dict(n_samples=100, n_warmup=100, n_chains=2, random_state=0)
    base = _quiet(BayesianLogisticRegression(**kw).fit, X, y)
    ones = _quiet(BayesianLogisticRegression(**kw).fit, X, y, sample_weight=np.ones(len(y)))
    np.testing.assert_array_equal(ones.posterior_draws_, base.posterior_draws_)
    w = np.ones(len(y))
    w[::3] = 0.0
    zero = _quiet(BayesianLogisticRegression(**kw).fit, X, y, sample_weight=w)
    keep = w > 0
    sub = _quiet(BayesianLogisticRegression(**kw).fit, X[keep], y[keep])
    np.testing.assert_array_equal(zero.posterior_draws_, sub.posterior_draws_)
    # the caller's weights are neither changed nor kept
    w_copy = w.copy()
    est = BayesianLogisticRegression(warm_start=True, **kw)
    _quiet(est.fit, X, y, sample_weight=w)
    np.testing.assert_array_equal(w, w_copy)


def test_poisson_weights_combine_with_exposure():
    X, rng = _design(n=300)
    exposure = rng.uniform(0.5, 3.0, len(X))
    y = rng.poisson(exposure * np.exp(0.3 * X[:, 0])).astype(np.float64)
    w = rng.integers(0, 3, len(y))
    rep = np.repeat(np.arange(len(y)), w)
    kw = dict(sampler="nuts", n_samples=100, n_warmup=100, n_chains=2, random_state=0)
    a = _quiet(BayesianPoissonRegression(**kw).fit, X, y, sample_weight=w, exposure=exposure)
    b = _quiet(BayesianPoissonRegression(**kw).fit, X[rep], y[rep], exposure=exposure[rep])
    np.testing.assert_allclose(a.posterior_draws_, b.posterior_draws_, rtol=1e-6, atol=1e-6)


def test_warm_start_refuses_other_weights():
    X, rng = _design(n=300)
    y = _targets("logistic", X, rng)
    w = rng.uniform(0.5, 2.0, len(y))
    est = BayesianLogisticRegression(n_samples=50, n_warmup=50, n_chains=2, random_state=0,
                                     warm_start=True)
    _quiet(est.fit, X, y, sample_weight=w)
    _quiet(est.fit, X, y, sample_weight=w)
    assert est.posterior_draws_.shape[1] == 100
    with pytest.raises(ValueError, match="weights"):
        _quiet(est.fit, X, y, sample_weight=2 * w)


@pytest.mark.parametrize("w, match", [
    (-np.ones(60), "(?i)negative"),
    (np.full(60, np.nan), "NaN"),
    (np.ones(59), "inconsistent|shape"),
    (np.zeros(60), "zero"),
])
def test_bad_sample_weight(w, match):
    X, rng = _design(n=60)
    y = _targets("logistic", X, rng)
    for cls, yy in ((BayesianLogisticRegression, y), (BayesianPoissonRegression, y),
                    (BayesianLinearRegression, y)):
        with pytest.raises(ValueError, match=match):
            cls(n_samples=20, n_warmup=20).fit(X, yy, sample_weight=w)


def test_sample_weight_with_dask_is_refused():
    da = pytest.importorskip("dask.array")
    X, rng = _design(n=100)
    y = _targets("logistic", X, rng)
    with pytest.raises(ValueError, match="sample_weight needs X in memory"):
        BayesianLogisticRegression(n_samples=20, n_warmup=20).fit(
            da.from_array(X, chunks=50), y, sample_weight=np.ones(100) * 2)


def test_sampler_scorer_refuses_a_weighted_fit_without_its_reference():
    from bayes_subsample.model_selection import SamplerScorer
    X, rng = _design(n=200)
    y = _targets("logistic", X, rng)
    w = rng.uniform(0.5, 2.0, len(y))
    est = _quiet(BayesianLogisticRegression(n_samples=50, n_warmup=50, n_chains=2,
                                            random_state=0).fit, X, y, sample_weight=w)
    with pytest.raises(ValueError, match="without sample_weight"):
        SamplerScorer()(est, X, y)
