"""Linear regression with the noise scale sampled (``GaussianScaleRegressionModel``,
its compiled ``CyGaussianScale``, the HMC-ECS core on it, and
``BayesianLinearRegression(noise_scale="sample")``, the default).

The compiled terms are checked against plain NumPy definitions (float32 and
float64 rows, dense and CSR), the control-variate residuals against the Taylor
expansion by definition, the full-data sums from the sufficient statistics
against a pass over the rows, and the range bounds against the largest
differences over the data. The exact posterior (quadrature over ``t = log(sigma
/ s)``) is checked against a brute-force 2-D integration and, in the limit of
flat priors, against the closed-form normal-inverse-gamma posterior of least
squares. Samplers are then checked against it with tolerances from the Monte
Carlo standard error of each run (means within 4 MCSE and within 0.1 sd, sds
within 5% where the run's own MCSE of the sd allows it).
"""
import math
import pickle
import warnings

import numpy as np
import pytest
from scipy import sparse, special, stats
from sklearn.exceptions import ConvergenceWarning

from bayes_subsample import BayesianLinearRegression, sample
from bayes_subsample import diagnostics as diag
from bayes_subsample.control_variates import TaylorControlVariate
from bayes_subsample.models import GaussianScaleRegressionModel
from bayes_subsample.exceptions import SamplingError
from bayes_subsample.samplers import SAMPLERS
from bayes_subsample.samplers._hmc_ecs_fast import ECSCore

FAST = {"n_samples": 200, "n_warmup": 200, "n_chains": 2, "random_state": 0}


def _data(n=400, d=3, seed=0, noise=0.7, dtype=np.float64, mean=3.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 1] += 0.5 * X[:, 0]
    y = X @ np.linspace(1.0, -1.0, d) + mean + noise * rng.normal(size=n)
    return X.astype(dtype), y


def _model(n=400, d=3, seed=0, dtype=np.float64, fmt="dense", intercept=True, **kw):
    X, y = _data(n, d, seed, dtype=dtype)
    if fmt == "csr":
        X[np.abs(X) < 0.5] = 0.0
        X = sparse.csr_matrix(X)
    return GaussianScaleRegressionModel(X, y, fit_intercept=intercept, **kw)


# ---- plain NumPy definitions -----------------------------------------------------------------
def _design(model, idx):
    X = model.X[idx]
    X = np.asarray(X.toarray() if sparse.issparse(X) else X, dtype=np.float64)
    return np.column_stack([X, np.ones(len(idx))]) if model.fit_intercept else X


def ref_loglik(model, theta, idx):
    tau = math.log(model.noise_reference) + theta[-1]
    r = model.y[idx] - _design(model, idx) @ theta[:-1]
    return -tau - 0.5 * math.log(2 * math.pi) - 0.5 * math.exp(-2 * tau) * r * r


def ref_grad(model, theta, idx):
    tau = math.log(model.noise_reference) + theta[-1]
    Xi = _design(model, idx)
    r = model.y[idx] - Xi @ theta[:-1]
    w = math.exp(-2 * tau)
    return np.column_stack([Xi * (w * r)[:, None], w * r * r - 1.0])


def ref_hessians(model, theta, idx):
    tau = math.log(model.noise_reference) + theta[-1]
    Xi = _design(model, idx)
    r = model.y[idx] - Xi @ theta[:-1]
    w = math.exp(-2 * tau)
    p1 = Xi.shape[1]
    H = np.zeros((len(idx), p1 + 1, p1 + 1))
    H[:, :p1, :p1] = -w * Xi[:, :, None] * Xi[:, None, :]
    H[:, :p1, p1] = H[:, p1, :p1] = (-2 * w * r)[:, None] * Xi
    H[:, p1, p1] = -2 * w * r * r
    return H


def ref_residual(model, theta, theta_star, idx, order):
    """``l_k(theta) - q_k(theta)``, ``q_k`` the order-``order`` Taylor expansion at
    ``theta_star`` (per-datum gradients and Hessians by their definitions)."""
    dlt = theta - theta_star
    d = ref_loglik(model, theta, idx) - ref_loglik(model, theta_star, idx)
    if order >= 1:
        d -= ref_grad(model, theta_star, idx) @ dlt
    if order == 2:
        d -= 0.5 * np.einsum("i,kij,j->k", dlt, ref_hessians(model, theta_star, idx), dlt)
    return d


def _points(model, seed=0, spread=0.05):
    rng = np.random.default_rng(seed)
    post = model.exact_posterior()
    theta_star = post["mean"] + 0.3 * post["sd"] * rng.standard_normal(model.n_params)
    theta = theta_star + spread * rng.standard_normal(model.n_params)
    return theta_star, theta


# ---- the compiled terms -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("intercept", [True, False])
def test_terms_match_numpy_reference(dtype, fmt, intercept):
    model = _model(dtype=dtype, fmt=fmt, intercept=intercept)
    theta_star, theta = _points(model)
    idx = np.random.default_rng(1).integers(0, model.n_data, size=300)
    np.testing.assert_allclose(model.loglik_terms(theta, idx), ref_loglik(model, theta, idx),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.grad_terms(theta, idx), ref_grad(model, theta, idx),
                               rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(model.grad_sum(theta, idx), ref_grad(model, theta, idx).sum(0),
                               rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(model.loglik_diff_terms(theta_star, theta, idx),
                               ref_loglik(model, theta, idx) - ref_loglik(model, theta_star, idx),
                               rtol=1e-10, atol=1e-11)
    g_sum, ll_sum = model.compiled.grad_sum_terms(theta, idx)
    assert ll_sum == pytest.approx(ref_loglik(model, theta, idx).sum(), rel=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("statistics", [True, False])
def test_full_pass_matches_numpy_reference(dtype, fmt, statistics):
    model = _model(dtype=dtype, fmt=fmt, sufficient_statistics=statistics)
    assert model.compiled.has_statistics == statistics
    all_idx = np.arange(model.n_data)
    passes = model.n_full_passes
    for seed in range(3):
        _, theta = _points(model, seed, spread=0.5)
        ll, g, H = model.full_pass(theta, hessian=True)
        assert ll == pytest.approx(ref_loglik(model, theta, all_idx).sum(), rel=1e-11)
        np.testing.assert_allclose(g, ref_grad(model, theta, all_idx).sum(0), rtol=1e-9,
                                   atol=1e-8 * np.abs(g).max())
        Href = ref_hessians(model, theta, all_idx).sum(0)
        # dense float32 rows: the Hessian sum without statistics is summed in float32
        # blocks (Rows.hessian_rtol); with them, X^T X is float64 products
        tol = model.compiled.rows.hessian_rtol if not statistics else 0.0
        np.testing.assert_allclose(H, Href, rtol=1e-9 + 10 * tol, atol=1e-8 * np.abs(Href).max())
        _, _, hd = model.full_pass(theta, hessian="diag")
        np.testing.assert_allclose(hd, np.diag(H))
    # the statistics read no data: no pass counted
    assert (model.n_full_passes == passes) == statistics


def test_statistics_keep_their_digits_on_a_large_mean():
    """y around 1e6 with noise 1: expanded from y^T y the residual sum of squares
    would lose ~12 of its 16 digits; the statistics are residual sums at the
    least-squares fit, so the full-data log-likelihood keeps them."""
    rng = np.random.default_rng(3)
    n = 20000
    X = rng.normal(size=(n, 2))
    y = 1e6 + X @ [1.0, -1.0] + rng.normal(size=n)
    a = GaussianScaleRegressionModel(X, y, sufficient_statistics=True)
    b = GaussianScaleRegressionModel(X, y, sufficient_statistics=False)
    theta = np.array([1.01, -0.99, 1e6 + 0.02, math.log(1.0 / a.noise_reference)])
    ll_a, g_a, _ = a.full_pass(theta)
    ll_b, g_b, _ = b.full_pass(theta)
    assert abs(ll_a - ll_b) < 1e-6
    np.testing.assert_allclose(g_a, g_b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("order", [0, 1, 2])
def test_residuals_match_the_taylor_expansion(dtype, fmt, order):
    model = _model(dtype=dtype, fmt=fmt)
    theta_star, theta = _points(model)
    idx = np.random.default_rng(2).integers(0, model.n_data, size=200)
    ref = ref_residual(model, theta, theta_star, idx, order)
    scale = np.abs(ref).max()
    cache = model.compiled.cv_cache(theta_star)
    for eta_star in (None, cache):
        d = model.compiled.cv_residual_terms(order, theta_star, theta, idx, eta_star)
        np.testing.assert_allclose(d, ref, rtol=1e-8, atol=1e-10 * scale)
    d, grads = model.cv_residuals_and_grads(theta, theta_star, idx, order)
    # gradients by central differences of the reference
    h = 1e-6
    fd = np.empty_like(grads)
    for j in range(model.n_params):
        e = np.zeros(model.n_params)
        e[j] = h
        fd[:, j] = (ref_residual(model, theta + e, theta_star, idx, order)
                    - ref_residual(model, theta - e, theta_star, idx, order)) / (2 * h)
    np.testing.assert_allclose(grads, fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max())
    g, dsum = model.compiled.cv_grad_sum_terms(order, theta_star, theta, idx, cache)
    np.testing.assert_allclose(g, grads.sum(0), rtol=1e-10, atol=1e-12)
    assert dsum == pytest.approx(d.sum(), rel=1e-10, abs=1e-12)
    theta2 = theta + 0.01
    np.testing.assert_allclose(
        model.compiled.cv_residual_diff_terms(order, theta_star, theta, theta2, idx, cache),
        ref_residual(model, theta2, theta_star, idx, order) - ref, rtol=1e-7,
        atol=1e-10 * scale)


def test_second_order_residuals_are_accurate_near_theta_star():
    """Near theta* the order-2 residual is a cubic in (delta eta, delta tau): the
    series of the exponential's remainders gives it to relative precision, where
    the direct formula would lose all its digits."""
    model = _model()
    theta_star, _ = _points(model)
    idx = np.arange(50)
    r_star = model.y[idx] - model.compiled.eta(theta_star, idx)
    ws = math.exp(-2 * (math.log(model.noise_reference) + theta_star[-1]))
    for eps in (1e-3, 1e-5):
        step = np.full(model.n_params, eps)
        delta = model.compiled.eta(step, idx)        # x_k . (beta - beta*)
        d = model.cv_residual_terms(theta_star + step, theta_star, idx, 2)
        # -w*/2 (E0 r*^2 - 2 E1 r* delta + E2 delta^2), the exponential's remainders
        # in v = -2u by their series in long double
        v = np.longdouble(-2 * eps)
        E0 = sum(v**k / math.factorial(k) for k in range(3, 25))
        E1 = E0 + v * v / 2
        E2 = E1 + v
        terms = [E0 * r_star**2, -2 * E1 * r_star * delta, E2 * delta**2]
        ref = np.asarray(-0.5 * ws * sum(terms), dtype=np.float64)
        scale = np.asarray(0.5 * ws * sum(abs(t) for t in terms), dtype=np.float64)
        assert np.all(np.abs(d - ref) <= 1e-9 * scale)


@pytest.mark.parametrize("statistics", [True, False])
def test_neg_hessian_operator_is_the_posterior_precision(statistics):
    model = _model(sufficient_statistics=statistics)
    _, theta = _points(model, spread=0.3)
    op = model.neg_hessian_operator(theta)
    P = -model.full_pass(theta, hessian=True)[2] + np.diag(model.prior.precision)
    np.testing.assert_allclose(op.matmat(np.eye(model.n_params)), P, rtol=1e-10,
                               atol=1e-10 * np.abs(P).max())


def test_range_bounds_hold_over_the_data():
    model = _model(n=2000)
    rng = np.random.default_rng(4)
    post = model.exact_posterior()
    idx = np.arange(model.n_data)
    for _ in range(20):
        theta = post["mean"] + post["sd"] * rng.standard_normal(model.n_params)
        theta_new = theta + 0.5 * post["sd"] * rng.standard_normal(model.n_params)
        actual = np.max(np.abs(ref_loglik(model, theta_new, idx) - ref_loglik(model, theta, idx)))
        assert actual <= model.range_bound(theta, theta_new) * (1 + 1e-12)
        ts = post["mean"] + 0.5 * post["sd"] * rng.standard_normal(model.n_params)
        dd = (ref_residual(model, theta_new, ts, idx, 2) - ref_residual(model, theta, ts, idx, 2))
        bound = model.cv_range_bound(theta, theta_new, ts, 2)
        assert np.max(np.abs(dd)) <= bound * (1 + 1e-12) + 1e-12
    assert model.cv_range_bound(theta, theta, ts, 2) == 0.0
    with pytest.raises(NotImplementedError):
        model.cv_range_bound(theta, theta_new, ts, 1)


# ---- the exact posterior ------------------------------------------------------------------------
@pytest.mark.parametrize("prior", ["lognormal", "halfnormal"])
def test_exact_posterior_matches_brute_force_integration(prior):
    """One coefficient, no intercept: the posterior on a 2-D grid over (beta, t),
    with the model's prior on t or (``noise_log_prior``) a half-normal on sigma."""
    rng = np.random.default_rng(5)
    n = 12                                     # small n: a skewed posterior of sigma
    x = rng.normal(size=(n, 1))
    y = 0.8 * x[:, 0] + 0.5 * rng.normal(size=n)
    model = GaussianScaleRegressionModel(x, y, fit_intercept=False, prior_scale=2.0,
                                         noise_prior_scale=1.5)
    s = model.noise_reference

    def log_prior_t(t):
        if prior == "lognormal":
            return -0.5 * t**2 / 1.5**2
        return t - 0.5 * (s * np.exp(t)) ** 2          # half-normal(1) on sigma, Jacobian
    post = model.exact_posterior(noise_log_prior=None if prior == "lognormal" else log_prior_t)
    # 16 sds either side: the joint density's tails (beta spreads with sigma) reach
    # beyond 10 of the marginal sds by 1e-5 of the sds
    b = np.linspace(post["mean"][0] - 16 * post["sd"][0], post["mean"][0] + 16 * post["sd"][0],
                    1601)
    t = np.linspace(post["mean"][1] - 16 * post["sd"][1], post["mean"][1] + 16 * post["sd"][1],
                    1601)
    B, T = np.meshgrid(b, t, indexing="ij")
    tau = np.log(s) + T
    xv = x[:, 0]
    rss = y @ y - 2 * B * (xv @ y) + B**2 * (xv @ xv)
    logp = -n * tau - 0.5 * np.exp(-2 * tau) * rss - 0.5 * B**2 / 4.0 + log_prior_t(T)
    p = np.exp(logp - logp.max())
    p /= p.sum()
    mean = np.array([(p * B).sum(), (p * T).sum()])
    sd = np.sqrt([(p * (B - mean[0]) ** 2).sum(), (p * (T - mean[1]) ** 2).sum()])
    np.testing.assert_allclose(post["mean"], mean, atol=1e-6 * sd.max())
    np.testing.assert_allclose(post["sd"], sd, rtol=1e-6)
    sig = s * np.exp(T)
    assert post["sigma_mean"] == pytest.approx((p * sig).sum(), rel=1e-7)


def normal_inverse_gamma(X, y):
    """The normal-inverse-gamma posterior of least squares with flat priors (``X``
    with its column of ones), from NumPy's least squares: the means and sds of
    (beta, log sigma) and the mean of sigma (see
    ``GaussianScaleRegressionModel.normal_inverse_gamma_posterior``)."""
    n, p = X.shape
    beta, rss = np.linalg.lstsq(X, y, rcond=None)[:2]
    rss = float(rss[0])
    a = (n - p) / 2
    cov = rss / (n - p - 2) * np.linalg.inv(X.T @ X)          # Student-t, n - p dof
    mean_logs = 0.5 * (math.log(rss / 2) - special.digamma(a))
    sd_logs = 0.5 * math.sqrt(special.polygamma(1, a))
    sigma_mean = math.sqrt(rss / 2) * math.exp(special.gammaln(a - 0.5) - special.gammaln(a))
    return (np.append(beta, mean_logs), np.append(np.sqrt(np.diag(cov)), sd_logs), sigma_mean)


@pytest.mark.parametrize("n", [15, 400])
def test_exact_posterior_is_normal_inverse_gamma_with_flat_priors(n):
    X, y = _data(n=n, d=2, seed=6)
    model = GaussianScaleRegressionModel(X, y, prior_scale=1e5, intercept_prior_scale=1e5,
                                         noise_prior_scale=1e5)
    post = model.exact_posterior()
    mean, sd, sigma_mean = normal_inverse_gamma(np.column_stack([X, np.ones(n)]), y)
    mean[-1] -= math.log(model.noise_reference)
    np.testing.assert_allclose(post["mean"], mean, atol=1e-6 * sd.max(), rtol=1e-6)
    np.testing.assert_allclose(post["sd"], sd, rtol=1e-5)
    assert post["sigma_mean"] == pytest.approx(sigma_mean, rel=1e-6)
    nig = model.normal_inverse_gamma_posterior()
    np.testing.assert_allclose(nig["mean"], mean, atol=1e-9 * sd.max(), rtol=1e-9)
    np.testing.assert_allclose(nig["sd"], sd, rtol=1e-9)
    assert nig["sigma_mean"] == pytest.approx(sigma_mean, rel=1e-12)
    assert post["sigma_sd"] == pytest.approx(nig["sigma_sd"], rel=1e-5)


# ---- the HMC-ECS core on the model -----------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("order", [0, 1, 2])
def test_ecs_core_matches_the_estimator_definition(dtype, fmt, order):
    """The compiled potential (rows copied, or read in place for CSR) against the
    perturbed estimator computed from the model's residuals; with an exact stratum
    too."""
    model = _model(n=3000, dtype=dtype, fmt=fmt, sufficient_statistics=False)
    rng = np.random.default_rng(7)
    theta_star, _ = _points(model)
    cv = TaylorControlVariate(model, theta_star, order=order)
    direct = fmt == "csr"
    idx = rng.integers(0, model.n_data, size=300)
    exact = np.sort(rng.choice(model.n_data, size=40, replace=False))
    for strata in (False, True):
        core = ECSCore(model.compiled, order, model.prior.precision, "perturbed", direct)
        sampled = np.setdiff1d(np.arange(model.n_data), exact)
        if strata:
            core.set_strata(exact, sampled)
        rows = sampled[idx % len(sampled)] if strata else idx
        core.set_rows(rows, 30)
        core.set_reference(*cv.reference())
        for _ in range(3):
            theta = theta_star + 0.02 * rng.standard_normal(model.n_params)
            U, g = core.value_and_grad(theta)
            lam, glam = cv.perturbed_loglik_and_grad(theta, rows, exact if strata else None)
            np.testing.assert_allclose(U, -(lam + model.prior.log_prob(theta)), rtol=1e-10,
                                       atol=1e-8)
            np.testing.assert_allclose(g, -(glam + model.prior.grad_log_prob(theta)),
                                       rtol=1e-9, atol=1e-8)
        core.set_position(theta_star)
        acc = [core.u_step(rng)[0] for _ in range(50)]
        assert 0 < sum(acc)


def test_signed_ecs_core_matches_the_block_poisson_formula():
    model = _model(n=2000, sufficient_statistics=False)
    rng = np.random.default_rng(8)
    theta_star, theta = _points(model)
    cv = TaylorControlVariate(model, theta_star, order=2)
    core = ECSCore(model.compiled, 2, model.prior.precision, "signed")
    m, lam, B = 25, 4.0, 6
    idx = rng.integers(0, model.n_data, size=m * B)
    core.set_rows(idx, m)
    core.set_reference(*cv.reference())
    core.set_signed(-lam, lam)
    U, g = core.value_and_grad(theta)
    d, gd = cv.residuals(theta, idx)
    dhat = model.n_data / m * d.reshape(B, m).sum(axis=1)
    a = -lam
    logabs = cv.Q(theta) + a + lam + np.sum(np.log(np.abs(dhat - a)) - np.log(lam))
    grad = cv.grad_Q(theta) + sum(model.n_data / m * gd[b * m:(b + 1) * m].sum(axis=0)
                                  / (dhat[b] - a) for b in range(B))
    np.testing.assert_allclose(U, -(logabs + model.prior.log_prob(theta)), rtol=1e-10)
    np.testing.assert_allclose(g, -(grad + model.prior.grad_log_prob(theta)), rtol=1e-8,
                               atol=1e-8)
    # the signed u-update's batch sums, at the position
    core.set_position(theta)
    S, dd = core.batch_stats(idx, m)
    np.testing.assert_allclose(dd, d, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(S, d.reshape(B, m).sum(axis=1), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(core.block_sums(), S, rtol=1e-10, atol=1e-12)


# ---- samplers ---------------------------------------------------------------------------------
def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fn(*args, **kw)


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_every_sampler_runs_on_the_model(name):
    """Short runs of every registered sampler, rows read (no statistics: the
    subsampling paths) on tall-ish data: finite draws near the exact posterior."""
    model = _model(n=5000, sufficient_statistics=False)
    post = model.exact_posterior()
    if name == "psgld":
        # no control variates: its minibatch noise on 5,000 rows is far beyond what
        # the curvature allows, and it says so before any draw (SGLD's rule)
        with pytest.raises(SamplingError, match="pass step_size explicitly"):
            _quiet(sample, model, name, n_samples=300, n_warmup=300, n_chains=2,
                   random_state=0)
        return
    tr = _quiet(sample, model, name, n_samples=300, n_warmup=300, n_chains=2, random_state=0)
    draws = tr.draws.reshape(-1, model.n_params)
    assert np.isfinite(draws).all()
    w = np.ones(len(draws)) if tr.signs is None else tr.signs.reshape(-1).astype(float)
    mean = w @ draws / w.sum()
    assert np.max(np.abs(mean - post["mean"]) / post["sd"]) < 0.5
    if name.startswith("hmc_ecs"):
        assert not tr.tuning[0].get("full_data", False)


@pytest.mark.parametrize("name", ["nuts", "hmc_ecs", "sgld"])
def test_diagonal_metric(name):
    """The diagonal-metric path of wide models (the Hessian's diagonal, no p x p
    matrix; order-1 control variates for HMC-ECS), rows read."""
    model = _model(n=20000, sufficient_statistics=False)
    post = model.exact_posterior()
    sampler = SAMPLERS[name](metric="diag")
    tr = _quiet(sample, model, sampler, n_samples=300, n_warmup=300, n_chains=2,
                random_state=0)
    if name != "sgld":
        assert np.shape(tr.tuning[0]["mass_matrix"]) == (model.n_params,)
    if name == "hmc_ecs":
        assert tr.tuning[0]["cv_order"] == 1 and not tr.tuning[0].get("full_data", False)
    mean = tr.draws.reshape(-1, model.n_params).mean(0)
    assert np.max(np.abs(mean - post["mean"]) / post["sd"]) < 0.5


def test_hmc_ecs_runs_on_the_full_data_when_passes_are_cheap():
    """With the sufficient statistics a full-data gradient costs O(p^2): HMC-ECS
    takes full-data HMC at any n (its cost figures count p + 1 per gradient)."""
    model = _model(n=20000)
    assert model.full_pass_cost == model.n_params
    tr = _quiet(sample, model, "hmc_ecs", n_samples=100, n_warmup=100, n_chains=1,
                random_state=0)
    assert tr.tuning[0]["full_data"]
    assert np.all(tr.stats["n_evals"] <= 1000 * model.n_params)


def _check(draws, post, weights=None):
    """Means within 4 MCSE and 0.1 sd; sds within 5% and 4 of their own MCSE."""
    flat = draws.reshape(-1, draws.shape[-1])
    mean, sd = flat.mean(0), flat.std(0, ddof=1)
    mcse = np.atleast_1d(diag.mcse_mean(draws))
    mcse_sd = np.atleast_1d(diag.mcse_mean((draws - mean) ** 2)) / (2 * sd)
    z = np.abs(mean - post["mean"]) / mcse
    err = np.abs(mean - post["mean"]) / post["sd"]
    rel = np.abs(sd / post["sd"] - 1)
    assert np.all(4 * mcse_sd / post["sd"] <= 0.05), "run too short for a 5% sd check"
    assert np.all(z <= 4), z
    assert np.all(err <= 0.1), err
    assert np.all(rel <= 0.05), rel


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", ["hmc", "nuts", "hmc_ecs"])
def test_exact_samplers_match_the_exact_posterior(name, seed):
    """n = 40 rows: the posterior of sigma is skewed (the log-normal prior and
    n - p = 36 degrees of freedom), the plug-in's coefficient sds too narrow."""
    X, y = _data(n=40, d=3, seed=10 + seed)
    model = GaussianScaleRegressionModel(X, y)
    post = model.exact_posterior()
    tr = _quiet(sample, model, name, n_samples=2500, n_warmup=500, n_chains=4, random_state=seed)
    _check(tr.draws, post)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hmc_ecs_subsampling_matches_the_exact_posterior(seed):
    """HMC-ECS subsampling 50,000 rows (read, no statistics) with its order-2
    control variates in (eta, log sigma)."""
    X, y = _data(n=50000, d=3, seed=10 + seed)
    model = GaussianScaleRegressionModel(X, y, sufficient_statistics=False)
    post = model.exact_posterior()
    tr = _quiet(sample, model, "hmc_ecs", n_samples=3000, n_warmup=1000, n_chains=4,
                random_state=seed)
    assert not tr.tuning[0].get("full_data", False) and tr.tuning[0]["m"] < 1000
    _check(tr.draws, post)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", ["mh", "hmc_ecs_signed", "hmc_ecs_nuts"])
def test_exact_samplers_match_the_exact_posterior_long(name, seed):
    """MH on 40 rows; the other HMC-ECS variants subsampling 50,000 rows (rows
    read: no sufficient statistics, so that the full data would cost n per
    gradient); long runs against the quadrature."""
    ecs = name.startswith("hmc_ecs")
    X, y = _data(n=50000 if ecs else 40, d=3, seed=10 + seed)
    model = GaussianScaleRegressionModel(X, y, sufficient_statistics=not ecs)
    post = model.exact_posterior()
    tr = _quiet(sample, model, name, n_samples=20000 if name == "mh" else 3000,
                n_warmup=1000, n_chains=4, random_state=seed)
    if ecs:
        assert not tr.tuning[0].get("full_data", False)
        assert tr.tuning[0]["m"] < 1000
    if tr.signs is not None:
        assert np.mean(tr.signs > 0) > 0.99
    _check(tr.draws, post)


# ---- the estimator -----------------------------------------------------------------------------
def test_estimator_samples_the_noise_by_default():
    X, y = _data(n=60, d=2, seed=11)
    est = _quiet(BayesianLinearRegression(n_samples=1500, n_warmup=500, n_chains=4,
                                          random_state=0).fit, X, y)
    model = GaussianScaleRegressionModel(X, y)
    post = model.exact_posterior()
    assert est.posterior_draws_.shape == (4, 1500, 4)
    assert est.trace_.param_names[-1] == "log_noise_ratio"
    assert est.noise_reference_ == pytest.approx(np.std(y))
    _check(est.posterior_draws_, post)
    sigma = est.noise_reference_ * np.exp(est.posterior_draws_[..., -1])
    assert est.noise_scale_ == pytest.approx(sigma.mean(), rel=1e-12)
    assert est.noise_scale_std_ == pytest.approx(sigma.std(), rel=1e-9)
    assert est.noise_scale_ == pytest.approx(post["sigma_mean"], abs=4 * diag.mcse_mean(sigma))
    np.testing.assert_allclose(np.r_[est.coef_, est.intercept_],
                               est.posterior_draws_.reshape(-1, 4)[:, :3].mean(0))
    # the plug-in's coefficient sds are narrower than the posterior's at this n
    plug = _quiet(BayesianLinearRegression(noise_scale="plugin", sampler="nuts", **FAST).fit,
                  X, y)
    assert plug.posterior_draws_.shape[-1] == 3
    assert plug.noise_reference_ is None and plug.noise_scale_std_ == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_estimator_matches_normal_inverse_gamma_with_flat_priors(seed):
    """The default fit (noise sampled, HMC-ECS) with flat priors against the
    closed-form posterior of least squares: 30 rows, 3 coefficients and the
    intercept, so the coefficients are Student-t with 26 degrees of freedom
    (sds 4% above the plug-in's) and sigma's posterior skewed."""
    X, y = _data(n=30, d=3, seed=20 + seed)
    est = _quiet(BayesianLinearRegression(prior_scale=1e4, intercept_prior_scale=1e4,
                                          noise_prior_scale=1e4, n_samples=2500, n_chains=4,
                                          random_state=seed).fit, X, y)
    mean, sd, sigma_mean = normal_inverse_gamma(np.column_stack([X, np.ones(len(y))]), y)
    mean[-1] -= math.log(est.noise_reference_)
    _check(est.posterior_draws_, {"mean": mean, "sd": sd})
    sigma = est.noise_reference_ * np.exp(est.posterior_draws_[..., -1])
    assert abs(est.noise_scale_ - sigma_mean) <= 4 * diag.mcse_mean(sigma)


def test_predictive_uses_the_noise_draws():
    X, y = _data(n=80, d=2, seed=12)
    est = _quiet(BayesianLinearRegression(**FAST).fit, X, y)
    Xt = X[:7]
    mean, std = est.predict(Xt, return_std=True)
    flat = est.posterior_draws_.reshape(-1, 4)
    eta = Xt @ flat[:, :2].T + flat[:, 2]
    sigma = est.noise_reference_ * np.exp(flat[:, 3])
    np.testing.assert_allclose(mean, eta.mean(1), rtol=1e-10)
    np.testing.assert_allclose(std, np.sqrt(eta.var(1) + np.mean(sigma**2)), rtol=1e-10)
    draws = est.sample_y(Xt, n_samples=20000, random_state=0)
    assert draws.shape == (7, 20000)
    # a mixture over the draws of (eta, sigma): its mean and sd
    se = std / math.sqrt(20000)
    assert np.all(np.abs(draws.mean(1) - mean) < 5 * se)
    assert np.all(np.abs(draws.std(1) / std - 1) < 0.03)
    # the noise varies with the draw: the predictive is not Gaussian with sd std
    k = stats.kurtosis(draws[0])
    assert np.isfinite(k)


def test_noise_scale_options_and_the_deprecated_none():
    X, y = _data(n=100, d=2, seed=13)
    fixed = _quiet(BayesianLinearRegression(noise_scale=0.5, **FAST).fit, X, y)
    assert fixed.noise_scale_ == 0.5 and fixed.posterior_draws_.shape[-1] == 3
    plug = _quiet(BayesianLinearRegression(noise_scale="plugin", **FAST).fit, X, y)
    with pytest.warns(FutureWarning, match="noise_scale=None.*deprecated.*'plugin'"):
        old = _quiet(BayesianLinearRegression(noise_scale=None, **FAST).fit, X, y)
    assert old.noise_scale_ == plug.noise_scale_
    np.testing.assert_array_equal(old.posterior_draws_, plug.posterior_draws_)
    with pytest.raises(ValueError, match="noise_scale"):
        BayesianLinearRegression(noise_scale="estimate").fit(X, y)
    with pytest.raises(ValueError, match="noise_prior_scale"):
        BayesianLinearRegression(noise_prior_scale=0.0).fit(X, y)


@pytest.mark.parametrize("X, y", [([[0.25]] * 3, [1.0] * 3),
                                  ([[1.0], [2.0], [3.0]], [2.0, 4.0, 6.0]),
                                  ([[1.0, 2.0]], [3.0])])
def test_exact_fit_holds_the_noise_fixed_with_a_warning(X, y):
    with pytest.warns(UserWarning, match="fitted .*almost.* exactly.*held fixed"):
        est = _quiet(BayesianLinearRegression(**FAST).fit, X, y)
    assert est.noise_reference_ is None and est.posterior_draws_.shape[-1] == len(X[0]) + 1
    assert np.isfinite(est.posterior_draws_).all()


def test_sparse_and_float32_give_the_dense_posterior():
    X, y = _data(n=3000, d=4, seed=14)
    X[np.abs(X) < 0.7] = 0.0
    kw = dict(sampler="nuts", n_samples=1000, n_warmup=300, n_chains=2, random_state=0)
    fd = _quiet(BayesianLinearRegression(**kw).fit, X, y)
    post = GaussianScaleRegressionModel(X, y).exact_posterior()
    for Xv in (sparse.csr_matrix(X), X.astype(np.float32)):
        f = _quiet(BayesianLinearRegression(**kw).fit, Xv, y)
        post_v = GaussianScaleRegressionModel(Xv, y).exact_posterior()
        np.testing.assert_allclose(post_v["mean"], post["mean"], atol=1e-3 * post["sd"].min())
        flat = f.posterior_draws_.reshape(-1, 6)
        mcse = diag.mcse_mean(f.posterior_draws_)
        assert np.all(np.abs(flat.mean(0) - post["mean"]) < 4 * mcse + 1e-3 * post["sd"])
        for a, b in zip(f.predict(Xv[:20], return_std=True), f.predict(X[:20], return_std=True)):
            np.testing.assert_allclose(a, b, rtol=1e-5)
    assert fd.noise_scale_ == pytest.approx(post["sigma_mean"], rel=0.01)


def test_warm_start_and_pickling():
    X, y = _data(n=200, d=2, seed=15)
    kw = dict(n_samples=100, n_warmup=100, n_chains=2, random_state=3)
    once = _quiet(BayesianLinearRegression(**{**kw, "n_samples": 200}).fit, X, y)
    est = BayesianLinearRegression(warm_start=True, **kw)
    _quiet(est.fit, X, y)
    _quiet(est.fit, X, y)
    np.testing.assert_array_equal(est.posterior_draws_, once.posterior_draws_)
    assert est.noise_scale_ == once.noise_scale_
    clone = pickle.loads(pickle.dumps(once))
    np.testing.assert_array_equal(clone.predict(X[:5], return_std=True)[1],
                                  once.predict(X[:5], return_std=True)[1])
    # the model pickles with its statistics (chains on a Dask cluster ship it)
    model = GaussianScaleRegressionModel(X, y)
    copy = pickle.loads(pickle.dumps(model))
    assert copy.compiled.has_statistics
    theta = model.exact_posterior()["mean"]
    assert copy.full_pass(theta)[0] == model.full_pass(theta)[0]


def test_dask_needs_a_fixed_noise():
    da = pytest.importorskip("dask.array")
    X, y = _data(n=600, d=2, seed=16)
    Xd = da.from_array(X, chunks=200)
    with pytest.raises(ValueError, match="noise_scale='sample' needs X in memory.*'plugin'"):
        BayesianLinearRegression(**FAST).fit(Xd, y)
    est = _quiet(BayesianLinearRegression(noise_scale="plugin", **FAST).fit, Xd, y)
    ref = _quiet(BayesianLinearRegression(noise_scale="plugin", **FAST).fit, X, y)
    assert est.noise_scale_ == pytest.approx(ref.noise_scale_, rel=1e-9)
