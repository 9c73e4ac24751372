"""Tests for bayes_subsample._optimize (find_map, laplace).

The conjugate Gaussian regression posterior is known in closed form
(``GaussianRegressionModel.exact_posterior``): its mode is the posterior mean and
the Laplace precision is the inverse posterior covariance, exactly. For logistic
and Poisson regression the mode is checked by its defining property (gradient of
the log posterior ~ 0) and by agreement of the two optimisers.

Tolerances: find_map stops at max |grad| <= tol * n = 1e-8 n; with posterior
precision ~ n / (noise variance) the mode is then within ~1e-8 (relative), so
1e-6 leaves a wide margin without hiding a wrong answer.
"""

import numpy as np
import pytest
from scipy.special import expit

from bayes_subsample._optimize import find_map, laplace
from bayes_subsample.models import (
    GaussianRegressionModel,
    LogisticRegressionModel,
    PoissonRegressionModel,
)

DTYPES = [np.float64, np.float32]


def gaussian_model(dtype=np.float64, fit_intercept=True, n=2000, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    beta = rng.normal(size=d)
    y = X.astype(np.float64) @ beta + 1.5 + 0.8 * rng.normal(size=n)
    return GaussianRegressionModel(X, y, noise_scale=0.8, fit_intercept=fit_intercept,
                                   prior_scale=3.0, intercept_prior_scale=5.0)


def glm_model(family, dtype=np.float64, n=3000, d=4, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=0.8, size=(n, d)).astype(dtype)
    beta = rng.normal(scale=0.6, size=d)
    eta = X.astype(np.float64) @ beta - 0.3
    if family == "logistic":
        return LogisticRegressionModel(X, (rng.random(n) < expit(eta)).astype(float))
    return PoissonRegressionModel(X, rng.poisson(np.exp(eta)).astype(float))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("method", ["newton", "lbfgs"])
def test_gaussian_map_is_posterior_mean(dtype, fit_intercept, method):
    model = gaussian_model(dtype, fit_intercept)
    mean, _ = model.exact_posterior()
    theta, info = find_map(model, method=method)
    assert info["success"]
    assert info["n_evals"] > 0 and info["n_evals"] % model.n_data == 0
    np.testing.assert_allclose(theta, mean, rtol=1e-6, atol=1e-6)
    if method == "newton":
        assert info["n_iter"] <= 3   # a quadratic: Newton lands in one step


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_gaussian_laplace_is_exact(dtype, fit_intercept, hessian_atol):
    model = gaussian_model(dtype, fit_intercept)
    mean, cov = model.exact_posterior()
    lap = laplace(model)
    np.testing.assert_allclose(lap["theta_map"], mean, rtol=1e-6, atol=1e-6)
    P = np.linalg.inv(cov)
    # float32 rows: the Hessian sum in float32 blocks, each entry off by at most dP,
    # so the covariance by at most ||C|| ||dP|| ||C|| (to first order, twice that here)
    dP = hessian_atol(P, model.compiled.rows.hessian_rtol)
    dC = 2 * np.linalg.norm(cov, 2) ** 2 * np.linalg.norm(dP, 2)
    assert np.all(np.abs(lap["precision"] - P) <= 1e-10 * np.abs(P) + dP)
    np.testing.assert_allclose(lap["cov"], cov, rtol=1e-9, atol=1e-14 + dC)
    L = lap["chol_cov"]
    np.testing.assert_array_equal(L, np.tril(L))
    np.testing.assert_allclose(L @ L.T, cov, rtol=1e-9, atol=1e-14 + dC)
    np.testing.assert_array_equal(lap["precision"], lap["precision"].T)
    assert lap["n_evals"] == lap["map_info"]["n_evals"] + model.n_data


@pytest.mark.parametrize("family", ["logistic", "poisson"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_glm_map_gradient_zero_and_methods_agree(family, dtype):
    model = glm_model(family, dtype)
    t_newton, info_n = find_map(model)          # default for GLMs: newton
    t_lbfgs, info_l = find_map(model, method="lbfgs")
    assert info_n["success"] and info_l["success"]
    for t in (t_newton, t_lbfgs):
        _, g = model.log_posterior_and_grad(t)
        assert np.max(np.abs(g)) <= 1e-8 * model.n_data * 10
    # both stop within ~1e-8 relative gradient of a posterior with precision ~ n
    np.testing.assert_allclose(t_newton, t_lbfgs, rtol=1e-5, atol=1e-6)
    # it is a maximum: the log posterior decreases in random directions
    lp = model.log_posterior(t_newton)
    rng = np.random.default_rng(0)
    for _ in range(5):
        v = rng.normal(size=model.n_params)
        assert model.log_posterior(t_newton + 1e-3 * v) < lp
    lap = laplace(model)
    np.testing.assert_allclose(lap["theta_map"], t_newton, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(lap["precision"], model.neg_hessian_log_posterior(t_newton),
                               rtol=1e-6)
    assert np.all(np.linalg.eigvalsh(lap["precision"]) > 0)


def test_find_map_theta0_and_validation():
    model = glm_model("logistic", n=500)
    theta, _ = find_map(model)
    theta2, info = find_map(model, theta0=theta)
    np.testing.assert_allclose(theta2, theta, rtol=1e-8, atol=1e-10)
    assert info["n_iter"] <= 1
    with pytest.raises(ValueError, match="method"):
        find_map(model, method="bfgs")
    with pytest.raises(ValueError, match="theta must have shape"):
        find_map(model, theta0=np.zeros(model.n_params + 1))


@pytest.mark.parametrize("method", ["newton", "lbfgs"])
def test_find_map_warns_when_not_converged(method):
    model = glm_model("logistic", n=500)
    with pytest.warns(RuntimeWarning, match="did not converge"):
        _, info = find_map(model, theta0=np.full(model.n_params, 5.0), method=method,
                           max_iter=1 if method == "newton" else 0)
    assert not info["success"]


@pytest.mark.parametrize("family", ["logistic", "poisson"])
def test_newton_makes_one_pass_per_point(family):
    """scipy's trust-exact asks for a point's Hessian and its value/gradient
    separately (in either order): each point costs one full pass, which gives
    all three, and every pass is counted."""
    model = glm_model(family)
    seen = []
    real = model.full_pass

    def full_pass(theta, **kw):
        seen.append(np.array(theta, copy=True))
        return real(theta, **kw)

    model.full_pass = full_pass
    theta, info = find_map(model, method="newton")
    assert info["success"] and len(seen) >= 2
    assert info["n_evals"] == len(seen) * model.n_data
    for a, b in zip(seen, seen[1:]):
        assert not np.array_equal(a, b)
