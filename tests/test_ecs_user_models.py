"""HMC-ECS on user models: per-datum Hessians (given, or central differences of
the gradients), second-order control variates against their definition, the
NumPy potential (perturbed and signed) against the compiled core, the choice
between subsample and full data, and the posteriors against the exact one."""
import warnings

import numpy as np
import pytest

from bayes_subsample import diagnostics, sample
from bayes_subsample.control_variates import TaylorControlVariate, TaylorRows, row_table_fits
from bayes_subsample.models import (FunctionModel, GaussianScaleRegressionModel,
                                    LogisticRegressionModel)
from bayes_subsample.samplers import HMCECS
from bayes_subsample._linalg import factor_precision
from bayes_subsample.samplers._adapt import rescale_gain, rescaled_precision
from bayes_subsample.samplers._ecs_numpy import NumpyECSPotential
from bayes_subsample.samplers._ecs_updates import ECSState, SignedUpdate
from bayes_subsample.samplers._ecs_user import subsample_pays, user_model_order
from bayes_subsample.samplers._hmc_ecs_fast import ECSCore
from bayes_subsample.samplers.hmc import metric_from_precision


# ---- problems ------------------------------------------------------------------------
def _regression(n=3000, p=6, seed=0, rho=0.9):
    """Correlated predictors (a shared factor), an intercept column last, noise sd 1."""
    rng = np.random.default_rng(seed)
    f = rng.standard_normal((n, 1))
    X = np.sqrt(rho) * f + np.sqrt(1 - rho) * rng.standard_normal((n, p))
    y = X @ rng.standard_normal(p) + 0.5 + rng.standard_normal(n)
    return np.column_stack([X, np.ones(n)]), y


def _regression_model(X, y, hess=True):
    """Linear regression with ``theta = (beta, log(sigma / sd(y)))`` as a user
    model (the posterior of ``GaussianScaleRegressionModel`` with the same
    priors), with its analytic per-datum Hessians or without."""
    n, p = X.shape
    log_sy = float(np.log(np.std(y)))

    def parts(theta, idx):
        s = theta[p] + log_sy
        return (y[idx] - X[idx] @ theta[:p]) * np.exp(-s), np.exp(-s), s

    def loglik(theta, idx):
        z, _, s = parts(theta, idx)
        return -0.5 * z * z - s - 0.5 * np.log(2 * np.pi)

    def grad(theta, idx):
        z, e, _ = parts(theta, idx)
        return np.column_stack([X[idx] * (z * e)[:, None], z * z - 1.0])

    def hessian(theta, idx):
        z, e, _ = parts(theta, idx)
        Xi = X[idx]
        H = np.empty((len(idx), p + 1, p + 1))
        H[:, :p, :p] = -(e * e) * Xi[:, :, None] * Xi[:, None, :]
        H[:, :p, p] = H[:, p, :p] = -2.0 * (z * e)[:, None] * Xi
        H[:, p, p] = -2.0 * z * z
        return H

    return FunctionModel(loglik, grad, n_data=n, n_params=p + 1, prior_scale=10.0,
                         hess=hessian if hess else None), hessian


def _exact(X, y):
    """The exact posterior of ``_regression_model(X, y)`` (quadrature)."""
    model = GaussianScaleRegressionModel(X[:, :-1], y, noise_prior_scale=10.0,
                                         noise_reference=float(np.std(y)))
    return model.exact_posterior()


def _logistic(n=3000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ np.linspace(1, -0.5, d) + 0.2)))).astype(float)
    return LogisticRegressionModel(X, y)


def _glm_hessians(glm):
    """The logistic GLM's per-datum Hessians ``-w_k x_k x_k^T`` (intercept last)."""
    Xi = np.column_stack([glm.X, np.ones(glm.n_data)])

    def hess(theta, idx):
        mu = 1 / (1 + np.exp(-(Xi[idx] @ theta)))
        w = mu * (1 - mu)
        return -w[:, None, None] * Xi[idx][:, :, None] * Xi[idx][:, None, :]
    return hess


def _as_user(glm, hess=None):
    return FunctionModel(glm.loglik_terms, glm.grad_terms, glm.n_data, glm.n_params,
                         prior_scale=glm.prior.scale, hess=hess)


# ---- per-datum Hessians -----------------------------------------------------------------
def test_finite_difference_hessians_match_analytic_ones():
    X, y = _regression(n=200)
    fd, hessian = _regression_model(X, y, hess=False)
    rng = np.random.default_rng(1)
    theta = rng.normal(size=fd.n_params) * 0.3
    idx = rng.integers(0, 200, 50)
    H_fd, H = fd.hess_terms(theta, idx), hessian(theta, idx)
    scale = np.abs(H).max(axis=(1, 2))[:, None, None]
    np.testing.assert_allclose(H_fd, H, atol=1e-6 * scale.max(), rtol=1e-6)
    np.testing.assert_array_equal(H_fd, H_fd.transpose(0, 2, 1))
    glm = _logistic(n=500)
    user = _as_user(glm)
    theta = np.array([0.3, -0.2, 0.1, 0.05])
    np.testing.assert_allclose(user.hess_terms(theta, np.arange(500)),
                               _glm_hessians(glm)(theta, np.arange(500)), atol=1e-8)


def test_row_hessians_sum_to_the_full_data_hessian():
    """The estimator is unbiased only if ``B`` (the full-data Hessian of
    ``full_pass``) is the sum of the rows' Hessians: central differences with
    the same steps, and the user's Hessians summed where given."""
    X, y = _regression(n=400)
    fd, _ = _regression_model(X, y, hess=False)
    given, hessian = _regression_model(X, y, hess=True)
    theta = np.full(fd.n_params, 0.1)
    rows = np.arange(400)
    before = fd.n_full_passes
    B = fd.full_pass(theta, hessian=True)[2]
    assert fd.n_full_passes - before == 1 + 2 * fd.n_params
    np.testing.assert_allclose(fd.hess_terms(theta, rows).sum(axis=0), B,
                               rtol=1e-9, atol=1e-9 * np.abs(B).max())
    before = given.n_full_passes
    B_given = given.full_pass(theta, hessian=True)[2]
    assert given.n_full_passes - before == 2 and given.analytic_hessian
    np.testing.assert_allclose(B_given, hessian(theta, rows).sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(B, B_given, rtol=1e-6, atol=1e-6 * np.abs(B).max())


def test_function_model_checks_its_hessians():
    X, y = _regression(n=50)
    model, _ = _regression_model(X, y)
    bad = FunctionModel(model._loglik, model._grad, 50, model.n_params,
                        hess=lambda t, i: np.zeros((len(i), 2, 2)))
    with pytest.raises(ValueError, match="hess returned shape"):
        bad.hess_terms(np.zeros(model.n_params), np.arange(3))
    with pytest.raises(TypeError, match="hess must be a callable"):
        FunctionModel(model._loglik, model._grad, 50, model.n_params, hess=3)


# ---- second-order control variates --------------------------------------------------------
def _reference_residuals(model, hessian, theta, theta_star, idx):
    """``d_k = l_k - l_k* - g_k*.delta - delta^T H_k* delta / 2`` and ``grad d_k =
    g_k - g_k* - H_k* delta`` from the model's functions, in NumPy."""
    delta = theta - theta_star
    H = hessian(theta_star, idx)
    d = (model.loglik_terms(theta, idx) - model.loglik_terms(theta_star, idx)
         - model.grad_terms(theta_star, idx) @ delta
         - 0.5 * np.einsum("kij,i,j->k", H, delta, delta))
    g = (model.grad_terms(theta, idx) - model.grad_terms(theta_star, idx)
         - np.einsum("kij,j->ki", H, delta))
    return d, g


@pytest.mark.parametrize("given", [True, False])
def test_order2_residuals_match_their_definition(given):
    X, y = _regression(n=500)
    model, hessian = _regression_model(X, y, hess=given)
    rng = np.random.default_rng(2)
    theta_star = rng.normal(size=model.n_params) * 0.2
    theta = theta_star + 0.05 * rng.normal(size=model.n_params)
    idx = rng.integers(0, 500, 80)
    d_ref, g_ref = _reference_residuals(model, hessian, theta, theta_star, idx)
    tol = dict(rtol=1e-10, atol=1e-10) if given else dict(rtol=1e-5, atol=1e-6)
    d, g = model.cv_residuals_and_grads(theta, theta_star, idx, 2)
    np.testing.assert_allclose(d, d_ref, **tol)
    np.testing.assert_allclose(g, g_ref, **tol)
    np.testing.assert_allclose(model.cv_residual_terms(theta, theta_star, idx, 2), d, rtol=1e-12)
    gs, ds = model.cv_grad_sum(theta, theta_star, idx, 2, want_sum=True)
    np.testing.assert_allclose(gs, g_ref.sum(axis=0), **tol)
    np.testing.assert_allclose(ds, d_ref.sum(), **tol)
    cv = TaylorControlVariate(model, theta_star, order=2)
    thetas = theta_star + 0.05 * rng.normal(size=(4, model.n_params))
    np.testing.assert_allclose(cv.residuals_at(thetas, idx),
                               [model.cv_residual_terms(t, theta_star, idx, 2) for t in thetas],
                               rtol=1e-9, atol=1e-12)


def test_order2_proxy_plus_residuals_is_the_log_likelihood():
    """``Q(theta) + sum_k d_k(theta) = ell(theta)``: the difference estimator is
    unbiased with finite-difference Hessians (B and the rows' Hessians agree)."""
    X, y = _regression(n=800)
    model, _ = _regression_model(X, y, hess=False)
    rng = np.random.default_rng(3)
    theta_star = rng.normal(size=model.n_params) * 0.2
    cv = TaylorControlVariate(model, theta_star, order=2)
    for _ in range(3):
        theta = theta_star + 0.1 * rng.normal(size=model.n_params)
        total = cv.Q(theta) + cv.residual_terms(theta, np.arange(800)).sum()
        ll = model.log_likelihood(theta)
        assert abs(total - ll) < 1e-7 * abs(ll)


def test_taylor_rows_table_matches_rows_on_demand():
    X, y = _regression(n=300)
    model, _ = _regression_model(X, y, hess=False)
    theta_star = np.full(model.n_params, 0.05)
    before = model.n_full_passes
    table = TaylorRows(model, theta_star, 2, table=True)
    assert model.n_full_passes - before == 2 + 2 * model.n_params
    assert table.n_evals == 300 * (2 + 2 * model.n_params)
    rows = TaylorRows(model, theta_star, 2)
    idx = np.array([5, 0, 299, 5])
    for a, b in zip(table(idx), rows(idx)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert row_table_fits(model, 2)


# ---- the NumPy potential against the compiled core ----------------------------------------
def _hmc_run(core, rows, block_size, theta0, metric, signed=None, step=0.3):
    g = np.random.default_rng(8)
    core.set_rows(rows, block_size)
    core.set_position(theta0)
    state = ECSState(core.position, core.U, core,
                     None if signed is None else np.repeat(np.arange(signed.lam), 1))
    rec = []
    for _ in range(25):
        if signed is None:
            acc_u = core.u_step(g)[0]
        else:
            state, acc_u, _ = signed(g, state)
        acc, alpha, _, n_grad = core.hmc_step(metric, g, step, 4)
        state = state._replace(theta=core.position, potential_energy=core.U)
        rec.append((acc_u, acc, n_grad, alpha, core.U, core.sign, core.sigma2, *core.position))
    return np.array(rec, dtype=float), core.indices


#: leapfrog steps (whitened) at which both potentials' HMC moves are accepted
#: and rejected in the comparison below (the comparison covers both branches)
STEPS = {"perturbed": (0.3, 1.2, 1.2), "signed": (1.0, 0.6, 0.6)}


@pytest.mark.parametrize("variant", ["perturbed", "signed"])
@pytest.mark.parametrize("order", [0, 1, 2])
def test_numpy_potential_matches_compiled_core(variant, order):
    """The compiled GLM potential and the NumPy one on the same posterior as a
    user model (analytic per-datum Hessians) make the same subsample updates
    and HMC moves from the same generator, perturbed and signed (block-Poisson
    batches, sign-correcting updates), at every order."""
    glm = _logistic(n=2000)
    user = _as_user(glm, hess=_glm_hessians(glm))
    rng = np.random.default_rng(6)
    theta_star = rng.normal(size=glm.n_params) * 0.3
    cv = TaylorControlVariate(glm, theta_star, order=order)
    metric, _ = metric_from_precision(glm.neg_hessian_log_posterior(theta_star))
    signed = variant == "signed"
    rows = rng.integers(0, 2000, 90 if signed else 200)
    runs = []
    for core in (ECSCore(glm.compiled, order, glm.prior.precision, variant),
                 NumpyECSPotential(user, order, glm.prior.precision, variant)):
        core.set_reference(*cv.reference())
        if signed:
            core.set_signed(-3.0, 3.0)
        runs.append(_hmc_run(core, rows, 30 if signed else 20, theta_star + 0.02, metric,
                             SignedUpdate(2000, 30, 3, 0.5) if signed else None,
                             step=STEPS[variant][order]))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-8, atol=1e-8)
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    assert 0 < runs[0][0][:, 1].mean() < 1


def test_numpy_potential_reads_the_table_at_its_theta_star():
    X, y = _regression(n=400)
    model, _ = _regression_model(X, y, hess=False)
    theta_star = np.full(model.n_params, 0.05)
    cv = TaylorControlVariate(model, theta_star, order=2)
    table = TaylorRows(model, theta_star, 2, table=True)
    rows = np.random.default_rng(0).integers(0, 400, 100)
    out = []
    for pot in (NumpyECSPotential(model, 2, model.prior.precision, rows=table),
                NumpyECSPotential(model, 2, model.prior.precision)):
        pot.set_reference(*cv.reference())
        pot.set_rows(rows, 10)
        out.append(pot.value_and_grad(theta_star + 0.03))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-12)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-9, atol=1e-9)


# ---- the choice: order, subsample or full data ----------------------------------------
def test_default_order_of_user_models():
    X, y = _regression(n=500)
    fd, _ = _regression_model(X, y, hess=False)
    given, _ = _regression_model(X, y, hess=True)
    assert user_model_order(fd, False) == 2 and user_model_order(given, False) == 2
    tall = FunctionModel(fd._loglik, fd._grad, n_data=10**6, n_params=fd.n_params)
    assert not row_table_fits(tall, 2) and user_model_order(tall, False) == 1
    tall_given = FunctionModel(fd._loglik, fd._grad, n_data=10**6, n_params=fd.n_params,
                               hess=given._hess)
    assert user_model_order(tall_given, False) == 2
    assert user_model_order(given, True) == 1


def test_small_user_model_runs_on_the_full_data():
    """A 434-row user model: the call's overhead makes a subsample of 100 rows
    cost more than half a full-data gradient; the choice says so. The same
    rule counts no overhead for the compiled models."""
    assert not subsample_pays(100, 434, 1000) and subsample_pays(100, 434, 0)
    assert subsample_pays(100, 5000, 1000)
    X, y = _regression(n=434, p=3)
    model, _ = _regression_model(X, y, hess=False)
    for sampler in (HMCECS(), HMCECS(variant="signed")):
        prep = sampler.prepare(model, np.random.default_rng(0))
        c = prep.choice
        assert prep.full_data and c["engine"] == "full data"
        assert c["evaluation_overhead"] == 1000 and "Python functions" in c["reason"]
    glm = _logistic(n=434)
    c = HMCECS().prepare(glm, np.random.default_rng(0)).choice
    assert c["evaluation_overhead"] == 0 and c["engine"] == "subsampled"


def test_larger_user_models_are_subsampled_at_the_order_that_needs_fewer_rows():
    """Order 2 where order 1 needs a larger subsample (24 predictors sharing one
    factor: 300 rows at order 1, measured), order 1 where both need the floor
    of 100 rows; the rows' Taylor constants in a table."""
    X, y = _regression(n=5000, p=24, seed=0, rho=0.99999)
    model, _ = _regression_model(X, y, hess=False)
    prep = HMCECS().prepare(model, np.random.default_rng(0))
    assert not prep.full_data and prep.choice["engine"] == "subsampled"
    assert prep.cv.order == 2 and prep.m == 100
    assert HMCECS(cv_order=1).prepare(model, np.random.default_rng(0)).m > 100
    assert prep.cv.taylor_rows.table is not None and prep.cv.taylor_rows.order == 2
    assert prep.n_evals >= prep.cv.taylor_rows.n_evals > 0
    X, y = _regression(n=5000, p=4)
    model, _ = _regression_model(X, y, hess=False)
    prep = HMCECS().prepare(model, np.random.default_rng(0))
    assert prep.cv.order == 1 and prep.m == 100 and prep.cv.taylor_rows.table[2] is None


# ---- the metric's rescaling on strongly correlated posteriors ------------------------------
def test_rescale_gain_refuses_spurious_rescaling_of_correlated_metric():
    """Two coordinates correlated 0.99999: draws that follow the metric, and a
    rescaling of one marginal variance by 30% (a sampling error) widens their
    difference's variance by orders of magnitude: the draws' likelihood falls
    (the rescaling is refused: None, the current metric kept). A marginal
    variance truly 4x larger (draws of a wider posterior) is taken."""
    rng = np.random.default_rng(0)
    C = np.array([[1.0, 0.99999, 0.0], [0.99999, 1.0, 0.0], [0.0, 0.0, 1.0]])
    P = np.linalg.inv(C)
    factors = factor_precision(P)
    P = factors.precision
    draws = rng.multivariate_normal(np.zeros(3), C, size=250)
    cov = np.cov(draws.T)
    var = np.diag(cov) * np.array([1.3, 1.0, 1.0])
    assert rescale_gain(P, np.exp(-0.5 * np.log([1.3, 1.0, 1.0])), cov) < 0
    assert rescaled_precision(factors, var, 250, cov=cov) is None
    wide = draws * np.array([1.0, 1.0, 2.0])
    cov = np.cov(wide.T)
    new = rescaled_precision(factors, np.diag(cov), 250, cov=cov)
    assert rescale_gain(P, np.exp(-0.5 * np.log(np.diag(cov) / np.diag(C))), cov) > 0
    assert 3.0 < 1 / new[2, 2] < 5.0


# ---- posteriors ----------------------------------------------------------------------------
def _quiet(model, sampler, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sample(model, sampler, **kw)


def _check(trace, exact, mean_sd=0.1, sd_rtol=0.05, min_ess=400):
    """Means within ``mean_sd`` posterior sd beyond 3 MCSE, sds within ``sd_rtol``
    beyond 3 standard errors of an sd (sign-corrected for signed draws)."""
    d = trace.draws
    ess = np.atleast_1d(diagnostics.ess_bulk(d))
    assert ess.min() >= min_ess
    flat = d.reshape(-1, d.shape[-1])
    signs = trace.stats.get("sign")
    w = np.ones(len(flat)) if signs is None else signs.reshape(-1).astype(float)
    mean = w @ flat / w.sum()
    sd = np.sqrt(w @ (flat - mean) ** 2 / w.sum())
    mc = np.atleast_1d(diagnostics.mcse_mean(d))
    err = np.abs(mean - exact["mean"])
    assert np.all(err < mean_sd * exact["sd"] + 3 * mc), err / exact["sd"]
    ratio = sd / exact["sd"]
    assert np.all(np.abs(ratio - 1) < sd_rtol + 3 / np.sqrt(2 * ess)), ratio


@pytest.mark.parametrize("variant", ["perturbed", "signed"])
def test_subsampled_user_model_matches_exact_posterior(variant):
    """Order-2 control variates from finite differences: the subsampled chain
    on a 5,000-row regression with the noise's log sd sampled (the default takes
    order 1 here: both need the floor of 100 rows)."""
    X, y = _regression(n=5000, p=4, seed=1, rho=0.99)
    model, _ = _regression_model(X, y, hess=False)
    tr = _quiet(model, HMCECS(variant=variant, cv_order=2), n_samples=800, n_warmup=400,
                n_chains=2, random_state=0)
    assert not tr.tuning[0].get("full_data", False) and tr.tuning[0]["cv_order"] == 2
    _check(tr, _exact(X, y))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("sampler", ["hmc_ecs", "hmc_ecs_nuts", "hmc_ecs_signed"])
def test_ill_conditioned_user_model_matches_exact_posterior(sampler, seed):
    """The benchmark's 5,000 x 24 regression (condition number of X^T X above
    1e6), defaults: means within 0.1 sd and sds within 5% of the exact
    posterior beyond Monte Carlo error."""
    X, y = _regression(n=5000, p=24, seed=0, rho=0.99999)
    model, _ = _regression_model(X, y, hess=False)
    tr = _quiet(model, sampler, random_state=seed)
    assert not tr.tuning[0].get("full_data", False)
    _check(tr, _exact(X, y), min_ess=1000)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("given", [True, False])
def test_small_user_model_subsampled_matches_exact_posterior(given, seed):
    """434 rows subsampled at m = 100 (forced; the default runs on the full data)
    with order-2 control variates, given or from finite differences: sds within
    5% (order-1 control variates gave 10-19% too wide on such data)."""
    X, y = _regression(n=434, p=3, seed=seed)
    model, _ = _regression_model(X, y, hess=given)
    tr = _quiet(model, HMCECS(subsample_size=100), random_state=seed)
    assert tr.tuning[0]["cv_order"] == 2 and tr.tuning[0]["m"] == 100
    _check(tr, _exact(X, y), min_ess=1000)
