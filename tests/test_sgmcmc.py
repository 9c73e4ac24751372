"""SGLD and SGHMC (doc/algorithms/sgmcmc.rst), the step-size helper and budgets.

Statistical checks use targets where the stationary law of the *discretised*
stochastic dynamics is known in closed form: on a Gaussian target with
uniform minibatches the gradient noise is additive and the recursions are
linear, so the stationary covariance solves a discrete Lyapunov equation.
Empirical moments are compared with those predictions (and with the exact
posterior) within a few Monte Carlo standard errors, over several seeds.
"""
import dataclasses

import numpy as np
import pytest
from scipy import linalg
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from bayes_subsample import BayesianLinearRegression, sample
from bayes_subsample.control_variates import TaylorControlVariate
from bayes_subsample.diagnostics import ess_bulk, mcse_mean
from bayes_subsample.models import (FunctionModel, GaussianRegressionModel,
                                    LogisticRegressionModel)
from bayes_subsample.samplers._sgmcmc_fast import GradientEstimator
from bayes_subsample.samplers.sghmc import SGHMC
from bayes_subsample.samplers import iterations_for_passes
from bayes_subsample.samplers.sgmcmc import SGLD, suggest_step_size

N_GAUSS = 20
PRIOR_SCALE = 1e4


# --------------------------------------------------------------------------------------
# the EWSG paper's 2-D Gaussian: V_i = ||theta - c_i||^2 / 2, n = 20
# --------------------------------------------------------------------------------------
def gaussian_2d(seed=42):
    c = np.random.default_rng(seed).normal(size=(N_GAUSS, 2))

    def loglik(t, idx):
        return -0.5 * np.sum((t - c[idx]) ** 2, axis=1)

    def grad(t, idx):
        return c[idx] - t

    model = FunctionModel(loglik, grad, n_data=N_GAUSS, n_params=2, prior_scale=PRIOR_SCALE)
    lam = N_GAUSS + PRIOR_SCALE ** -2
    mean = N_GAUSS * c.mean(axis=0) / lam
    S = np.cov(c.T, bias=True)                     # population covariance of the c_i
    return model, c, mean, np.eye(2) / lam, lam, S


def sgld_stationary_cov(eps, lam, Vg):
    """theta' = (1 - eps lam / 2) theta + eps/2 xi_g + N(0, eps): scalar contraction."""
    a = 1.0 - 0.5 * eps * lam
    return (eps * np.eye(2) + 0.25 * eps ** 2 * Vg) / (1.0 - a * a)


def sghmc_stationary_cov(eps, lam, Vg, C, L, refresh):
    """SGHMC (identity mass) on the Gaussian: state (theta, p) in R^4."""
    d = 2
    eye, zero = np.eye(d), np.zeros((d, d))
    A = np.block([[eye, eps * eye], [-eps * lam * eye, (1 - eps ** 2 * lam - eps * C) * eye]])
    Q = np.block([[zero, zero], [zero, 2 * C * eps * eye + eps ** 2 * Vg]])
    if not refresh:
        return linalg.solve_discrete_lyapunov(A, Q)[:d, :d]
    AL = np.linalg.matrix_power(A, L)
    W = AL @ np.block([[zero, zero], [zero, eye]]) @ AL.T
    for k in range(L):
        Ak = np.linalg.matrix_power(A, k)
        W = W + Ak @ Q @ Ak.T
    return linalg.solve_discrete_lyapunov(AL[:d, :d], W[:d, :d])


def check_moments(draws, mean, cov, z=4.5):
    """Empirical mean and covariance entries within z MCSE of (mean, cov)."""
    flat = draws.reshape(-1, draws.shape[-1])
    emp_mean = flat.mean(axis=0)
    assert np.all(np.abs(emp_mean - mean) < z * mcse_mean(draws)), (emp_mean, mean)
    centred = draws - mean
    for i in range(2):
        for j in range(i, 2):
            prod = centred[..., i] * centred[..., j]
            err = abs(prod.mean() - cov[i, j])
            assert err < z * mcse_mean(prod), (i, j, prod.mean(), cov[i, j], mcse_mean(prod))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("cv", [False, True])
def test_sgld_2d_gaussian_stationary_law(seed, cv):
    model, c, mean, exact_cov, lam, S = gaussian_2d()
    eps = 0.02
    Vg = np.zeros((2, 2)) if cv else N_GAUSS ** 2 * S   # first-order CVs are exact here
    pred = sgld_stationary_cov(eps, lam, Vg)
    # the step is deliberately large (the law's bias is what is checked): no spread check
    trace = sample(model, SGLD(step_size=eps, batch_size=1, control_variates=cv, precondition=False,
                               check_spread=False),
                   n_samples=10000, n_warmup=200, n_chains=2, random_state=seed,
                   check_convergence=False)
    check_moments(trace.draws, mean, pred)
    # the prediction is far from the exact covariance (11% / >50%), so the check has power
    assert np.max(np.abs(pred - exact_cov)) > 0.1 * exact_cov[0, 0]


def test_sgld_bias_shrinks_with_step_size():
    model, c, mean, exact_cov, lam, S = gaussian_2d()
    errs = []
    for eps in (0.04, 0.005):
        tr = sample(model, SGLD(step_size=eps, batch_size=1, control_variates=True, n_steps=2,
                                   precondition=False),
                    n_samples=5000, n_warmup=100, n_chains=2, random_state=3,
                    check_convergence=False)
        d = tr.draws.reshape(-1, 2)
        errs.append(np.linalg.norm(np.cov(d.T) - exact_cov))
    # predicted relative variance inflation: 25% at eps = 0.04, 2.6% at 0.005
    assert errs[1] < 0.5 * errs[0]
    assert errs[0] > 0.1 * exact_cov[0, 0]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("refresh", [True, False])
def test_sghmc_2d_gaussian_stationary_law(seed, refresh):
    model, c, mean, exact_cov, lam, S = gaussian_2d()
    eps, C, L = 0.05, 10.0, 5
    pred = sghmc_stationary_cov(eps, lam, N_GAUSS ** 2 * S, C, L, refresh)
    sampler = SGHMC(step_size=eps, batch_size=1, n_steps=L, friction=C, precondition=False,
                    control_variates=False, refresh_momentum=refresh)
    trace = sample(model, sampler, n_samples=3000, n_warmup=100, n_chains=2,
                   random_state=seed, check_convergence=False)
    check_moments(trace.draws, mean, pred)
    assert np.max(np.abs(pred - exact_cov)) > 0.2 * exact_cov[0, 0]


def test_sghmc_refresh_bias_is_order_one_over_L():
    """The documented refresh artefact: a bias that does not vanish with eps
    at fixed n_steps but does as n_steps grows (checked on the recursion)."""
    lam = 20.0
    zero = np.zeros((2, 2))
    b10 = [sghmc_stationary_cov(e, lam, zero, 1.0, 10, True)[0, 0] * lam - 1 for e in (1e-3, 1e-4)]
    b1000 = sghmc_stationary_cov(1e-4, lam, zero, 1.0, 1000, True)[0, 0] * lam - 1
    assert 0.05 < b10[0] < 0.2 and 0.05 < b10[1] < 0.2
    assert abs(b1000) < 0.01
    assert abs(sghmc_stationary_cov(1e-3, lam, zero, 1.0, 10, False)[0, 0] * lam - 1) < 0.01


# --------------------------------------------------------------------------------------
# Gaussian linear regression (compiled path) against the exact posterior
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(7)
    n = 2000
    X = rng.normal(size=(n, 2))
    y = X @ np.array([0.7, -0.4]) + 0.3 + rng.normal(size=n)
    model = GaussianRegressionModel(X, y, prior_scale=5.0, intercept_prior_scale=5.0)
    mean, cov = model.exact_posterior()
    return model, mean, np.sqrt(np.diag(cov))


@pytest.mark.parametrize("sampler", [
    SGLD(step_size=2e-5, batch_size=50, control_variates=True, n_steps=20, precondition=False),
    SGLD(step_size=2e-6, batch_size=200, control_variates=False, n_steps=100,
         precondition=False),
    SGHMC(step_size=2e-3, batch_size=50, n_steps=20, friction=20.0, control_variates=True,
          precondition=False, refresh_momentum=False),
    SGHMC(step_size=0.2, batch_size=50, n_steps=10, friction=1.0, control_variates=True,
          precondition=True, refresh_momentum=False),
], ids=["sgld-cv", "sgld-plain", "sghmc-cv", "sghmc-preconditioned"])
@pytest.mark.parametrize("seed", [0, 1])
def test_linear_regression_close_to_exact(regression, sampler, seed):
    model, mean, sd = regression
    # the SGLD steps here mix too slowly (about 12 effective draws in 100 iterations) for
    # the end-of-warmup check: the dynamics, not the check, are tested
    trace = sample(model, clone(sampler).set_params(check_spread=False), n_samples=3000,
                   n_warmup=200, n_chains=2, random_state=seed, check_convergence=False)
    d = trace.draws
    flat = d.reshape(-1, d.shape[-1])
    mcse = mcse_mean(d)
    # an ESS floor, so Monte Carlo error cannot hide a wrong answer
    ess = np.atleast_1d(ess_bulk(d))
    assert ess.min() >= 400, ess
    # means: Monte Carlo error only (the stationary mean is exact on a Gaussian)
    assert np.all(np.abs(flat.mean(0) - mean) < 4.5 * mcse + 0.02 * sd)
    # sds: a 10% allowance for discretisation bias + 4.5 standard errors of a
    # standard deviation, sd / sqrt(2 ESS) (relative: 1 / sqrt(2 ESS))
    rel = np.abs(flat.std(0) / sd - 1)
    assert np.all(rel < 0.1 + 4.5 / np.sqrt(2 * ess)), (rel, ess)
    assert trace.sampler.exact is False


# --------------------------------------------------------------------------------------
# the compiled GLM against the same posterior as a user model (NumPy terms called back)
# --------------------------------------------------------------------------------------
def _run_kernel(sampler, model, prepared, n_iter=30, seed=5):
    kernel = sampler.build(model, prepared, 0)
    rng = np.random.default_rng(seed)
    state = kernel.init(rng, prepared.theta_init.copy())
    out = []
    for _ in range(n_iter):
        state, info = kernel.step(rng, state)
        out.append(state.theta.copy())
    return np.array(out), info, rng.random()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("family", ["logistic", "poisson"])
@pytest.mark.parametrize("sampler", [
    SGLD(batch_size=17, n_steps=3), SGLD(step_size=1e-3, batch_size=17, control_variates=False),
    SGHMC(batch_size=17, n_steps=4), SGHMC(step_size=1e-3, batch_size=9, n_steps=3,
                                          control_variates=False, precondition=False,
                                          refresh_momentum=False),
], ids=["sgld-cv", "sgld", "sghmc-cv", "sghmc-identity"])
def test_glm_matches_user_model(dtype, family, sampler, as_user_model):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3)).astype(dtype)
    eta = X.astype(float) @ [0.5, -0.5, 0.25]
    if family == "logistic":
        model = LogisticRegressionModel(X, (rng.random(500) < 1 / (1 + np.exp(-eta))) * 1.0)
    else:
        from bayes_subsample.models import PoissonRegressionModel
        model = PoissonRegressionModel(X, rng.poisson(np.exp(eta)).astype(float))
    prepared = sampler.prepare(model, np.random.default_rng(1))
    if prepared.cv is not None:
        # first-order control variates: what a user model supports
        prepared = dataclasses.replace(
            prepared, cv=TaylorControlVariate(model, prepared.theta_init, order=1))
    a, info_a, u_a = _run_kernel(sampler, model, prepared)
    b, info_b, u_b = _run_kernel(sampler, as_user_model(model), prepared)
    assert np.allclose(a, b, rtol=1e-9, atol=1e-9)
    assert u_a == u_b                      # same number of draws from the generator
    per_datum = 1 if prepared.cv is None else 2   # the user model evaluates theta and theta*
    assert info_a.n_evals == sampler.batch_size * sampler.n_steps
    assert info_b.n_evals == per_datum * sampler.batch_size * sampler.n_steps


def test_user_model_cv_gradient_matches_control_variate():
    model, *_ = gaussian_2d()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    y = (rng.random(50) < 0.5) * 1.0

    def loglik(t, idx):
        e = X[idx] @ t
        return y[idx] * e - np.logaddexp(0, e)

    def grad(t, idx):
        e = X[idx] @ t
        return (y[idx] - 1 / (1 + np.exp(-e)))[:, None] * X[idx]

    user = FunctionModel(loglik, grad, n_data=50, n_params=2)
    theta_star = np.array([0.1, -0.2])
    cv = TaylorControlVariate(user, theta_star, order=1)
    g = GradientEstimator(user.compiled, user.prior.precision, cv)
    theta, idx = np.array([0.3, 0.1]), rng.integers(0, 50, 7)
    expected = user.prior.grad_log_prob(theta) + cv.grad_estimate(theta, idx)
    assert np.allclose(g(theta, idx), expected)
    assert g.evals_per_datum == 2


# --------------------------------------------------------------------------------------
# API: reproducibility, counting, helper functions, errors
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("sampler", [SGLD(batch_size=10, n_steps=2),
                                     SGHMC(step_size=1e-3, batch_size=10, n_steps=3,
                                           control_variates=False)])
@pytest.mark.parametrize("which", ["glm", "user"])
def test_reproducible_across_n_jobs(sampler, which, regression):
    model = regression[0] if which == "glm" else gaussian_2d()[0]
    kw = dict(n_samples=50, n_warmup=20, n_chains=2, random_state=11, check_convergence=False)
    a = sample(model, sampler, n_jobs=1, **kw)
    b = sample(model, sampler, n_jobs=2, **kw)
    c = sample(model, sampler, n_jobs=1, **kw)
    assert np.array_equal(a.draws, b.draws) and np.array_equal(a.draws, c.draws)
    d = sample(model, sampler, n_jobs=1, **{**kw, "random_state": 12})
    assert not np.array_equal(a.draws, d.draws)


def test_evaluation_counts_and_data_passes(regression):
    model = regression[0]
    sampler = SGHMC(batch_size=25, n_steps=4)
    tr = sample(model, sampler, n_samples=30, n_warmup=10, n_chains=1, random_state=0,
                check_convergence=False)
    assert np.all(tr.stats["n_evals"] == 100)
    per_pass = 100 / model.n_data
    assert np.allclose(tr.warmup_stats["data_passes"][0], per_pass * np.arange(1, 11))
    assert np.allclose(tr.stats["data_passes"][0], per_pass * np.arange(11, 41))
    # prepare: MAP + Laplace passes, the control-variate pass and the eta* pass
    assert tr.n_evals_prepare >= 3 * model.n_data
    assert tr.n_evals_prepare % model.n_data == 0


def test_iterations_for_passes():
    assert iterations_for_passes(30, 20, 1, 1) == 300          # the EWSG paper's Gaussian
    assert iterations_for_passes(1, 464809, 50) == 9297
    assert iterations_for_passes(1, 100, 10, 0, n_steps=5) == 2
    assert iterations_for_passes(0.5, 100, 10) == 5
    with pytest.raises(ValueError, match="n_passes"):
        iterations_for_passes(0, 100, 10)
    with pytest.raises(ValueError, match="batch_size"):
        iterations_for_passes(1, 100, 0)


def test_suggest_step_size_rule(regression):
    model = regression[0]
    from bayes_subsample._optimize import laplace
    P = laplace(model)["precision"]
    lam = np.linalg.eigvalsh(P).max()
    n = model.n_data
    assert np.isclose(suggest_step_size(model, "sgld", precision=P), 0.3 / lam)
    assert np.isclose(suggest_step_size(model, "sgld", precision=P, c=0.1), 0.1 / lam)
    assert np.isclose(suggest_step_size(model, "sgld", precision=P, batch_size=50,
                                        control_variates=False), 0.3 * (50 / n) / lam)
    assert np.isclose(suggest_step_size(model, "sghmc", precision=P, friction=2.0),
                      0.3 * min(lam ** -0.5, 0.5, 2.0 / lam))
    # EWSG: friction 2 by default; q = b / n only without control variates
    assert np.isclose(suggest_step_size(model, "ewsg", precision=P, batch_size=10, c=0.5),
                      0.5 * min(lam ** -0.5, 0.5, 2.0 / lam))
    assert np.isclose(suggest_step_size(model, "ewsg", precision=P, batch_size=10, c=0.5,
                                        friction=10.0, control_variates=False),
                      0.5 * min(lam ** -0.5, 0.1, (10 / n) * 10 / lam))
    assert np.isclose(suggest_step_size(model, "sghmc", precision=P, precondition=True), 0.3)
    assert np.isclose(suggest_step_size(model, "ewsg", precision=P, precondition=True), 0.15)
    # a sampler object supplies its own parameters (preconditioned by default: the
    # whitened curvature is 1); without precision it computes it
    assert np.isclose(suggest_step_size(model, SGLD(batch_size=50, control_variates=False)),
                      0.3 * (50 / n), rtol=1e-6)
    assert np.isclose(suggest_step_size(model, SGLD(batch_size=50, control_variates=False,
                                                    precondition=False)),
                      0.3 * (50 / n) / lam, rtol=1e-6)
    # the SGLD rule keeps the Gaussian-approximation variance within c/4
    for c in (0.1, 0.3):
        eps = suggest_step_size(model, "sgld", precision=P, c=c)
        assert 1 / (1 - eps * lam / 4) - 1 < c / 4 + 1e-2


def test_default_step_size_is_the_suggestion(regression):
    model = regression[0]
    prepared = SGLD(batch_size=40).prepare(model, np.random.default_rng(0))
    assert np.isclose(prepared.step_size,
                      suggest_step_size(model, SGLD(batch_size=40), precision=prepared.precision))


def test_estimator_accepts_sampler_objects(regression):
    model = regression[0]
    X, y = np.asarray(model.X), model.y
    est = BayesianLinearRegression(noise_scale=1.0, prior_scale=5.0, intercept_prior_scale=5.0,
                                   sampler=SGLD(step_size=2e-5, batch_size=50, n_steps=10,
                                                precondition=False),
                                   n_samples=200, n_warmup=50, n_chains=2, random_state=0)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    assert est.posterior_draws_.shape == (2, 200, 3)
    assert est.diagnostics_["sampler"] == "sgld"
    mean, _ = model.exact_posterior()
    assert np.allclose(est.coef_, mean[:2], atol=0.05)
    s = clone(SGHMC(step_size=0.1, precondition=False))
    assert s.get_params()["precondition"] is False


def test_sghmc_mass_is_deprecated(regression):
    """SGHMC(mass=...) still works, with a FutureWarning: 'laplace' is the
    preconditioned dynamics, 'identity' the identity metric."""
    model = regression[0]
    run = dict(n_samples=20, n_warmup=0, n_chains=1, random_state=3, check_convergence=False)
    for mass, precondition in (("laplace", True), ("identity", False)):
        with pytest.warns(FutureWarning, match="mass=.*deprecated"):
            old = sample(model, SGHMC(mass=mass, batch_size=20, n_steps=3), **run)
        new = sample(model, SGHMC(precondition=precondition, batch_size=20, n_steps=3), **run)
        np.testing.assert_array_equal(old.draws, new.draws)


@pytest.mark.parametrize("sampler, match", [
    (SGLD(batch_size=0), "batch_size"),
    (SGLD(step_size=-1.0), "step_size"),
    (SGLD(control_variates="yes"), "control_variates"),
    (SGHMC(mass="diagonal"), "mass"),
    (SGHMC(friction=0.0), "friction"),
    (SGHMC(n_steps=0), "n_steps"),
])
def test_bad_parameters(regression, sampler, match):
    with pytest.raises(ValueError, match=match):
        sample(regression[0], sampler, n_samples=5, n_warmup=0, n_chains=1)


def test_bad_helper_input(regression):
    model = regression[0]
    with pytest.raises(ValueError, match="sampler"):
        suggest_step_size(model, "nuts")
    with pytest.raises(ValueError, match="c must"):
        suggest_step_size(model, "sgld", c=2.0, precision=np.eye(3))
    with pytest.raises(ValueError, match="shape"):
        suggest_step_size(model, "sgld", precision=np.eye(2))


def test_divergence_raises_clear_error(regression):
    with pytest.raises(FloatingPointError, match="step_size"):
        sample(regression[0], SGLD(step_size=5.0, batch_size=10, control_variates=False,
                                           precondition=False),
               n_samples=500, n_warmup=0, n_chains=1, random_state=0)
    with pytest.raises(FloatingPointError, match="SGHMC"), np.errstate(over="ignore",
                                                                     invalid="ignore"):
        sample(gaussian_2d()[0], SGHMC(step_size=3.0, batch_size=1, n_steps=5, precondition=False),
               n_samples=50, n_warmup=0, n_chains=1, random_state=0)


def _collinear_logistic(n=2000, seed=0):
    """An intercept plus a full one-hot block: a posterior whose ridge (the
    intercept and the group effects trade off) is held only by the prior, so
    its curvature spans orders of magnitude."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), np.eye(3)[rng.integers(0, 3, n)]])
    y = (rng.random(n) < 0.5).astype(float)
    return LogisticRegressionModel(X, y)


def test_runaway_chain_raises_with_advice():
    # finite throughout, but the identity metric at this step size is unstable
    # along the ridge: the chain drifts thousands of posterior sds away
    with pytest.raises(FloatingPointError, match="ran away.*standard deviations"):
        sample(_collinear_logistic(), SGHMC(step_size=0.1, precondition=False),
               n_samples=300, n_warmup=0, n_chains=1, random_state=0)


def test_far_from_mode_warns_once():
    with pytest.warns(ConvergenceWarning, match="posterior standard deviations") as rec:
        sample(_collinear_logistic(), SGLD(step_size=1e-2, precondition=False),
               n_samples=300, n_warmup=0, n_chains=1, random_state=0, check_convergence=False)
    assert sum("visits points" in str(w.message) for w in rec) == 1


@pytest.mark.parametrize("sampler", [SGLD(), SGHMC()])
def test_preconditioned_defaults_stay_near_the_mode(sampler):
    # the same posterior at the defaults: whitened dynamics, no warning of distance
    import warnings
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*visits points.*")
        trace = sample(_collinear_logistic(), sampler, n_samples=300, n_warmup=100,
                       n_chains=1, random_state=0)
    draws = trace.draws.reshape(-1, 4)
    assert np.all(np.isfinite(draws)) and np.all(draws.std(axis=0) > 0)


@pytest.mark.parametrize("dense", [True, False])
def test_whitened_draw_against_numpy(dense):
    """The compiled draw of an SG position, ``shift + L z`` and ``max |z|``,
    against NumPy (``scale_draws``), with a NaN coordinate reported as NaN."""
    from bayes_subsample._linalg import scale_draws
    from bayes_subsample.samplers._sgmcmc_fast import whitened_draw
    rng = np.random.default_rng(3)
    p = 7
    A = rng.normal(size=(p, p))
    chol = (np.linalg.cholesky(A @ A.T + p * np.eye(p)) if dense
            else rng.uniform(0.1, 2.0, p))
    shift, z = rng.normal(size=p), rng.normal(size=p) * 3
    out = np.empty(p)
    dist = whitened_draw(z, shift, chol, out)
    np.testing.assert_allclose(out, shift + scale_draws(chol, z), rtol=1e-14, atol=1e-14)
    assert dist == np.max(np.abs(z))
    z[4] = np.nan
    assert np.isnan(whitened_draw(z, shift, chol, out))
    with pytest.raises(ValueError):
        whitened_draw(z, shift[:-1], chol, out)
