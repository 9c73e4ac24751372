"""The stochastic-gradient samplers' safety (doc/algorithms/sgmcmc.rst, "Where
the SG samplers refuse"): the curvature at draws of the Laplace approximation
behind the default step, the refusal before any draw, and the check of a
chain's spread against the posterior's gradient (Stein's identity) at the end
of warmup.

Statistical checks use posteriors known exactly (conjugate Gaussian
regression, where the order-2 control variates are exact and the whitened
dynamics have closed-form stationary laws) or a long NUTS run, with
tolerances from Monte Carlo standard errors; the compiled Stein sums are
checked against NumPy.
"""
import sys
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.base import clone

from bayes_subsample import sample
from bayes_subsample.diagnostics import mcse_mean
from bayes_subsample.exceptions import SamplingError
from bayes_subsample.models import (FunctionModel, GaussianRegressionModel,
                                    LogisticRegressionModel)
from bayes_subsample.samplers import EWSG, SGHMC, SGLD
from bayes_subsample.samplers import _sg_tuning
from bayes_subsample.samplers._sg_check import MEAN_BOUND, MIN_ESS, RATIO_BOUNDS, SteinCheck
from bayes_subsample.samplers._sg_tuning import (CURVATURE_SLACK, MAX_SLOWDOWN, curvature_at,
                                                 laplace_points, noise_rows,
                                                 step_from_curvature, step_rule)
from bayes_subsample.samplers import _sgmcmc_fast
from bayes_subsample.samplers._sgmcmc_fast import STEIN_FIELDS


def _regression(n=2000, seed=7):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = X @ np.array([0.7, -0.4]) + 0.3 + rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def regression():
    X, y = _regression()
    model = GaussianRegressionModel(X, y, prior_scale=5.0, intercept_prior_scale=5.0)
    mean, cov = model.exact_posterior()
    return model, mean, cov


def _iris_setosa():
    from sklearn.datasets import load_iris
    X, y = load_iris(return_X_y=True)
    return (X - X.mean(0)) / X.std(0), (y == 0).astype(float)


def _warm_kernel(sampler, model, n_warmup, seed=0):
    """One chain's kernel after its warmup, without the verdict (so the
    statistics can be compared with predictions even where it would raise)."""
    prepared = sampler.prepare(model, np.random.default_rng(1))
    kernel = sampler.build(model, prepared, n_warmup)
    rng = np.random.default_rng(seed)
    state = kernel.init(rng, prepared.theta_init.copy())
    draws = []
    for i in range(n_warmup):
        state, _ = kernel.warmup_step(rng, state, i)
        draws.append(state.position.copy())
    return kernel, prepared, np.array(draws)


# --------------------------------------------------------------------------------------
# the compiled Stein sums against NumPy
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sampler", [
    SGLD(batch_size=7, n_steps=1), SGHMC(batch_size=7, n_steps=1),
    EWSG(batch_size=7, n_steps=1, index_chain_length=0),
    EWSG(batch_size=7, n_steps=1, index_chain_length=1, index_chain="persistent"),
], ids=["sgld", "sghmc", "ewsg-restart", "ewsg-persistent"])
def test_stein_sums_match_numpy(sampler, dtype, monkeypatch):
    """Each step adds (position, unbiased gradient estimate there) to the sums:
    SGLD's gradient at the position before the move, SGHMC's after the
    position update, EWSG's of the uniformly drawn block (the index chain's
    start; with "persistent", its first proposal)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)).astype(dtype)
    y = (rng.random(300) < 1 / (1 + np.exp(-X.astype(float) @ [1.0, -0.5, 0.2]))) * 1.0
    model = LogisticRegressionModel(X, y)
    prepared = sampler.prepare(model, np.random.default_rng(1))
    kernel = sampler.build(model, prepared, 0)
    p = model.n_params
    acc = np.zeros(STEIN_FIELDS * p + 1)
    ref = np.zeros_like(acc)
    gen = np.random.default_rng(3)
    state = kernel.init(gen, prepared.theta_init.copy())
    state, _ = kernel.step(gen, state)             # EWSG persistent: J set
    # the compiled loops, wrapped: they add to ``acc`` and show their gradient buffers
    buffers = {}

    def wrapped(name, *slots):
        def call(*args):
            args = args[:-1] + (acc,)                # (..., stein)
            done = getattr(_sgmcmc_fast, name)(*args)
            buffers.update(g=args[slots[0]].copy(),
                           g_prop=args[slots[-1]].copy())
            return done
        return call

    # the gradient buffers' places: sgld_steps(..., rng, idx, g, stein),
    # sghmc_steps(..., rng, idx, g, v, z, xi, stein), ewsg_steps(..., rng, g_cur, g_prop, stein)
    monkeypatch.setattr(sys.modules[type(kernel).__module__], "_fast", SimpleNamespace(
        sgld_steps=wrapped("sgld_steps", 7), sghmc_steps=wrapped("sghmc_steps", 11),
        ewsg_steps=wrapped("ewsg_steps", 12, 13)))
    for _ in range(6):
        z0 = state.position.copy()
        state, _ = kernel.step(gen, state)
        if isinstance(sampler, SGLD):
            z, g = z0, buffers["g"]
        elif isinstance(sampler, SGHMC):
            z, g = state.position, buffers["g"]
        elif sampler.index_chain == "restart":
            z, g = z0, -buffers["g"]
        else:
            z, g = z0, -buffers["g_prop"]
        ref += np.concatenate([g * z, g, z, z * z, [1.0]])
    assert acc[-1] == 6
    np.testing.assert_allclose(acc, ref, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------
# the check's statistics on chains whose laws are known
# --------------------------------------------------------------------------------------
def _ar1_check(scale=1.0, shift=0.0, phi=0.5, noise=0.0, n_warmup=1000, n_steps=10, p=3,
               seed=0):
    """A SteinCheck fed with an AR(1) chain z ~ N(shift, scale^2) (stationary,
    ``n_steps`` steps an iteration) whose 'posterior' is N(0, I): the pairs
    (z, g = -z + N(0, noise^2)) of the second half of warmup, summed per
    iteration as the compiled loops do."""
    from scipy.signal import lfilter

    rng = np.random.default_rng(seed)
    check = SteinCheck(p, n_warmup)
    n = n_warmup * n_steps
    e = scale * np.sqrt(1 - phi ** 2) * rng.standard_normal((n, p))
    e[0] = scale * rng.standard_normal(p)
    z = shift + lfilter([1.0], [1.0, -phi], e, axis=0)
    g = -z + noise * rng.standard_normal((n, p))
    per_step = np.concatenate([g * z, g, z, z * z, np.ones((n, 1))], axis=1)
    per_iter = per_step.reshape(n_warmup, n_steps, -1).sum(axis=1)
    for i in range(n_warmup):
        acc = check.accumulator(i)
        if acc is not None:
            acc += per_iter[i]
    return check


def test_stein_statistics_estimate_the_variance_ratio_and_mean_error():
    st = _ar1_check(scale=np.sqrt(1.3), shift=0.2, phi=0.9, noise=3.0).statistics()
    # ratio = chain variance / posterior variance, mean gradient = -(mean error)
    assert np.all(np.abs(st["ratio"] - 1.3) < 4 * st["ratio_se"])
    assert np.all(np.abs(st["mean"] + 0.2) < 4 * st["mean_se"])
    assert np.all(np.abs(st["spread"] - 1.3) < 0.2)
    # AR(1) with phi = 0.9: about 5000 / 19 effective draws (an estimate from 100
    # batch means: within a factor 3)
    assert np.all((st["ess"] > 5000 / 19 / 3) & (st["ess"] < 5000 / 19 * 3))


def test_stein_standard_errors_are_calibrated():
    """Over replicate chains, (statistic - truth) / se has sd about 1: the
    batch means' autocorrelation is counted (phi = 0.98: 100 steps per
    effective draw, ten iterations)."""
    zr, zm = [], []
    for seed in range(150):
        st = _ar1_check(phi=0.98, noise=1.0, seed=seed, p=2).statistics()
        zr.append((st["ratio"] - 1) / st["ratio_se"])
        zm.append(st["mean"] / st["mean_se"])
    for z in (np.ravel(zr), np.ravel(zm)):
        # 300 z-scores: the sd's own sampling error is about 0.04, the mean's 0.06;
        # the ratio, a variance from about 50 effective draws, is biased low (measured:
        # mean z -0.3, sd 1.1)
        assert 0.75 < np.std(z) < 1.35, np.std(z)
        assert abs(np.mean(z)) < 0.45


@pytest.mark.parametrize("kwargs, match", [
    ({"scale": np.sqrt(2.0)}, "variance in 3 of the 3 whitened coordinates is up to [12]\\."),
    ({"scale": np.sqrt(0.4)}, "down to 0\\.[34].*has not explored"),
    ({"shift": 0.6}, "mean is 0\\.[56]"),
    ({"phi": 0.9995}, "mixes too slowly"),
])
def test_stein_verdict_raises_with_the_cause(kwargs, match):
    with pytest.raises(SamplingError, match=match):
        _ar1_check(**kwargs).verdict("SGLD", 0.3)


def test_stein_verdict_passes_within_bounds_and_needs_a_warmup():
    check = _ar1_check(scale=np.sqrt(1.2), shift=0.1)
    summary = check.verdict("SGLD", 0.3)
    assert summary["checked"] and 1.0 < summary["ratio_min"] <= summary["ratio_max"] < 1.4
    assert summary["ess_min"] > MIN_ESS
    assert RATIO_BOUNDS[0] < 1 < RATIO_BOUNDS[1] and MEAN_BOUND > 0.1
    # under 200 warmup iterations there is no check
    short = SteinCheck(3, 150)
    assert short.accumulator(100) is None and not short.verdict("SGLD", 0.3)["checked"]


# --------------------------------------------------------------------------------------
# against the exact posterior: the whitened dynamics' closed-form laws
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps, passes", [(0.3, True), (2.0, False)])
def test_sgld_stein_ratio_is_the_exact_stationary_variance(regression, eps, passes):
    """Gaussian regression with order-2 control variates: exact gradients in
    the exactly whitened coordinates, where SGLD's stationary variance is
    1 / (1 - eps / 4) in every coordinate (1.08 at the default 0.3; 2 at 2.0,
    which the check refuses). The Stein ratio estimates it within 4 se, and
    agrees with the variance of the chain's own draws."""
    model, mean, cov = regression
    sampler = SGLD(step_size=eps)
    kernel, prepared, z = _warm_kernel(sampler, model, 2000)
    st = kernel.check.statistics()
    pred = 1 / (1 - eps / 4)
    assert np.all(np.abs(st["ratio"] - pred) < 4 * st["ratio_se"]), (st["ratio"], pred)
    half = z[1000:]
    var_se = np.array([mcse_mean((half[:, j] - half[:, j].mean()) ** 2) for j in range(3)])
    assert np.all(np.abs(half.var(0) - pred) < 4 * var_se + 4 * st["ratio_se"])
    if passes:
        assert kernel.check.verdict("SGLD", eps)["checked"]
    else:
        with pytest.raises(SamplingError, match="variance in 3 of the 3 whitened coordinates"):
            kernel.check.verdict("SGLD", eps)


@pytest.mark.parametrize("sampler", [SGLD(), SGHMC(), EWSG()], ids=lambda s: s.name)
def test_defaults_pass_the_check_and_match_the_exact_posterior(regression, sampler):
    """At the default step (Laplace draws' curvature 1: the Gaussian step) the
    check passes and the draws are within the documented bias of the exact
    posterior: means within Monte Carlo error, sds within 10%."""
    model, mean, cov = regression
    trace = sample(model, sampler, n_samples=1000, n_warmup=400, n_chains=2, random_state=0)
    tun = trace.tuning[0]
    assert tun["curvature"] == pytest.approx(1.0, rel=1e-6) and tun["noise_factor"] == 1.0
    assert all(t["spread_check"]["checked"] for t in trace.tuning)
    d = trace.draws
    flat = d.reshape(-1, 3)
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(flat.mean(0) - mean) < 4.5 * mcse_mean(d) + 0.02 * sd)
    assert np.all(np.abs(flat.std(0) / sd - 1) < 0.1 + 4.5 / np.sqrt(2 * 500))


def test_user_model_defaults_pass_the_check_and_match_the_exact_posterior():
    """The same regression as a user model: first-order control variates (their
    gradient noise enters the step) and the curvature at the Laplace draws from
    the numerical Hessian; the check passes and the draws match the exact
    posterior within the documented bias."""
    X, y = _regression(n=1000, seed=3)
    Xa = np.column_stack([X, np.ones(len(X))])

    def loglik(t, idx):
        return -0.5 * (y[idx] - Xa[idx] @ t) ** 2

    def grad(t, idx):
        return (y[idx] - Xa[idx] @ t)[:, None] * Xa[idx]

    model = FunctionModel(loglik, grad, n_data=len(y), n_params=3, prior_scale=5.0)
    prec = Xa.T @ Xa + np.eye(3) / 25.0
    cov = np.linalg.inv(prec)
    mean = cov @ (Xa.T @ y)
    sd = np.sqrt(np.diag(cov))
    for sampler in (SGLD(), SGHMC(), EWSG()):
        trace = sample(model, sampler, n_samples=600, n_warmup=400, n_chains=2,
                       random_state=1)
        assert all(t["spread_check"]["checked"] for t in trace.tuning)
        d = trace.draws
        flat = d.reshape(-1, 3)
        assert np.all(np.abs(flat.mean(0) - mean) < 4.5 * mcse_mean(d) + 0.05 * sd)
        assert np.all(np.abs(flat.std(0) / sd - 1) < 0.15 + 4.5 / np.sqrt(2 * 300))


def test_too_slow_a_chain_is_refused_at_the_end_of_warmup(regression):
    model = regression[0]
    with pytest.raises(SamplingError, match="mixes too slowly.*n_warmup of about"):
        sample(model, SGLD(step_size=1e-3), n_samples=10, n_warmup=200, n_chains=1,
               random_state=0)
    # the check can be switched off (to measure a slow or biased step's draws)
    trace = sample(model, SGLD(step_size=1e-3, check_spread=False), n_samples=10,
                   n_warmup=200, n_chains=1, random_state=0, check_convergence=False)
    assert trace.tuning[0]["spread_check"] == {"checked": False}


# --------------------------------------------------------------------------------------
# the curvature behind the default step
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_curvature_at_is_the_whitened_hessians_largest_eigenvalue(dtype, monkeypatch):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 4)).astype(dtype)
    y = (rng.random(400) < 1 / (1 + np.exp(-X.astype(float) @ [2.0, -1.0, 0.5, 0.0]))) * 1.0
    model = LogisticRegressionModel(X, y)
    theta = rng.normal(0, 0.5, size=5)
    L = np.linalg.cholesky(np.linalg.inv(model.neg_hessian_log_posterior(np.zeros(5))))
    P = model.neg_hessian_log_posterior(theta)
    rtol = 1e-9 if dtype == np.float64 else 1e-4
    expect = np.max(np.linalg.eigvalsh(L.T @ P @ L))
    assert curvature_at(model, theta, L, True, False) == pytest.approx(expect, rel=rtol)
    assert curvature_at(model, theta, L, False, False) == pytest.approx(
        np.max(np.linalg.eigvalsh(P)), rel=rtol)
    # the diagonal metric: Lanczos on the operator (tolerance 1e-2)
    d = 1 / np.sqrt(np.diag(P))
    expect = np.max(np.linalg.eigvalsh(d[:, None] * P * d[None, :]))
    assert curvature_at(model, theta, d, True, True) == pytest.approx(expect, rel=2e-2)
    # a user model: the numerical Hessian, or Lanczos on finite differences beyond
    # DENSE_CURVATURE_MAX parameters
    Xf = X.astype(float)
    Xa = np.column_stack([Xf, np.ones(400)])

    def loglik(t, idx):
        e = Xa[idx] @ t
        return y[idx] * e - np.logaddexp(0, e)

    def grad(t, idx):
        e = Xa[idx] @ t
        return (y[idx] - 1 / (1 + np.exp(-e)))[:, None] * Xa[idx]

    user = FunctionModel(loglik, grad, n_data=400, n_params=5)
    P = user.neg_hessian_log_posterior(theta)
    expect = np.max(np.linalg.eigvalsh(L.T @ P @ L))
    assert curvature_at(user, theta, L, True, False) == pytest.approx(expect, rel=1e-4)
    monkeypatch.setattr(_sg_tuning, "DENSE_CURVATURE_MAX", 0)
    assert curvature_at(user, theta, L, True, False) == pytest.approx(expect, rel=2e-2)


def test_step_rule_takes_the_largest_curvature_at_the_laplace_draws():
    X, y = _iris_setosa()
    model = LogisticRegressionModel(X, y)
    prepared = SGLD(step_size=0.1).prepare(model, np.random.default_rng(0))
    rule = step_rule(model, prepared.theta_init, prepared.init_chol, prepared.precision,
                     False, True, prepared.cv, 32)
    lams = [curvature_at(model, t, prepared.init_chol, True, False)
            for t in laplace_points(prepared.theta_init, prepared.init_chol)]
    assert rule.lam_mode == 1.0 and rule.lam_draws == pytest.approx(max(lams))
    assert rule.lam == pytest.approx(max(1.0, max(lams) / CURVATURE_SLACK))
    # separable data: the posterior's curvature where its Laplace approximation
    # puts mass is many times the mode's
    assert rule.lam > 10


def test_curvature_on_the_noise_rows_estimates_the_full_data_one():
    """On tall data the curvature at the Laplace draws comes from 2,048 rows
    (their Hessian sum scaled by n / m, plus the prior's precision), as a ratio
    to the same rows' curvature at the mode: the largest eigenvalue of the
    rows' estimate is biased upward (about 1.3 at the mode here), the ratio is
    not. It matches the full data's within a few percent, for a fraction of a
    pass."""
    from bayes_subsample.datasets import make_logistic_data
    X, y = make_logistic_data(20_000, 28, random_state=0)
    model = LogisticRegressionModel(X, y)
    prepared = SGLD(step_size=0.1).prepare(model, np.random.default_rng(0))
    L = prepared.init_chol
    rule = step_rule(model, prepared.theta_init, L, prepared.precision, False, True,
                     prepared.cv, 32)
    full = max(curvature_at(model, t, L, True, False)
               for t in laplace_points(prepared.theta_init, L))
    assert len(noise_rows(model.n_data)) == 2048
    sub = _sg_tuning._RowsModel(model, noise_rows(model.n_data))
    assert curvature_at(sub, prepared.theta_init, L, True, False) > 1.2     # the bias
    assert rule.lam_draws == pytest.approx(full, rel=0.05)
    assert rule.lam == 1.0                   # within CURVATURE_SLACK of the mode's
    assert rule.n_evals < model.n_data


# --------------------------------------------------------------------------------------
# refusals before any draw
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [SGLD, SGHMC, EWSG])
def test_separable_data_is_refused_before_any_draw(cls):
    """Iris setosa against the rest: the curvature at the Laplace draws is 50
    times the mode's, a SamplingError in the preparation, before any draw
    (SGLD, SGHMC: their step would be 40 times the Gaussian one's; EWSG,
    whose step its friction bounds, for the curvature ratio alone: its chains
    ran away at that step)."""
    X, y = _iris_setosa()
    model = LogisticRegressionModel(X, y, prior_scale=10.0, intercept_prior_scale=10.0)
    sampler = cls()
    effect = "would need about" if cls is not EWSG else "would not hold where the chains go"
    with pytest.raises(SamplingError, match=f"{cls.__name__} refuses this posterior.*far from "
                                            f"Gaussian.*{effect}"):
        sampler.prepare(model, np.random.default_rng(0))
    with pytest.raises(SamplingError, match="refuses"):
        sample(model, sampler, n_samples=100, n_warmup=1000, n_chains=2, random_state=0)
    # an explicit step is the user's: no refusal before any draw; at this one EWSG's
    # chains run away in the likelihood's wall (iris: the curvature reaches 340 at
    # other draws), which is also a SamplingError
    prepared = clone(sampler).set_params(step_size=1e-3).prepare(model, np.random.default_rng(0))
    assert prepared.step_rule is None
    if cls is EWSG:
        with pytest.raises(SamplingError, match="EWSG ran away"):
            sample(model, clone(sampler).set_params(step_size=0.015), n_samples=100,
                   n_warmup=1000, n_chains=2, random_state=0)


def test_refusal_threshold_is_the_slowdown_against_the_gaussian_step():
    rule = _sg_tuning.StepRule(lam=30.0, q=1.0, lam_mode=1.0, noise=1.0, n_evals=0,
                               lam_draws=30.0)
    X, y = _regression(n=200)
    model = GaussianRegressionModel(X, y)
    for name, cls in (("sgld", SGLD), ("sghmc", SGHMC)):
        step = step_from_curvature(name, rule.lam, rule.q)
        with pytest.raises(SamplingError, match="30 times that at the mode.*30 times smaller"):
            _sg_tuning.refuse_if_too_slow(cls(), model, rule, 32, step, True)
        ok = rule._replace(lam=MAX_SLOWDOWN * 0.9, lam_draws=MAX_SLOWDOWN * 0.9)
        step = step_from_curvature(name, ok.lam, ok.q)
        assert _sg_tuning.refuse_if_too_slow(cls(), model, ok, 32, step, True) < MAX_SLOWDOWN
    # EWSG: its Gaussian step is bounded by its friction (0.3 / 2), so at a curvature ratio
    # of 30 its step (0.3 * 2 / 30) is only 7.5 times smaller: refused for the ratio
    step = step_from_curvature("ewsg", rule.lam, rule.q)
    assert 0.15 / step < MAX_SLOWDOWN
    with pytest.raises(SamplingError, match="30 times that at the mode.*would not hold"):
        _sg_tuning.refuse_if_too_slow(EWSG(), model, rule, 32, step, True)



@pytest.mark.parametrize("cls", [SGLD, SGHMC, EWSG])
def test_overflowing_curvature_is_refused_not_a_division_by_zero(cls):
    """One Poisson row with y = 0 and a prior of scale 1e5: the mode runs off to
    where only the prior holds it, the curvature overflows at a Laplace draw and
    the default step is zero; that is a refusal (a SamplingError, a ValueError),
    not a ZeroDivisionError (found by hypothesis in test_properties)."""
    from bayes_subsample.linear_model import BayesianPoissonRegression
    est = BayesianPoissonRegression(sampler=cls.name, prior_scale=1e5, fit_intercept=False,
                                    random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(SamplingError, match="refuses this posterior"):
            est.fit(np.array([[0.12573022]]), np.array([0.0]))

# --------------------------------------------------------------------------------------
# the hard problems against NUTS
# --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_small_user_regression_within_bounds_of_nuts_three_seeds():
    """A 434-row regression with the noise's log sd sampled, as a user model:
    every SG sampler at its defaults within 0.3 NUTS sds of NUTS's means (plus
    4 MCSE) and its sds within 30%, three seeds."""
    rng = np.random.default_rng(0)
    n = 434
    hs = (rng.random(n) < 0.79) * 1.0
    iq = rng.normal(100.0, 15.0, n)
    yv = 26.0 + 6.0 * hs + 0.56 * iq + rng.normal(0.0, 18.0, n)
    Xa = np.column_stack([hs, (iq - 100.0) / 15.0, np.ones(n)])
    log_sy = float(np.log(np.std(yv)))

    def loglik(t, idx):
        s = t[3] + log_sy
        z = (yv[idx] - Xa[idx] @ t[:3]) * np.exp(-s)
        return -0.5 * z * z - s

    def grad(t, idx):
        s = t[3] + log_sy
        z = (yv[idx] - Xa[idx] @ t[:3]) * np.exp(-s)
        return np.column_stack([Xa[idx] * (z * np.exp(-s))[:, None], z * z - 1.0])

    model = FunctionModel(loglik, grad, n_data=n, n_params=4, prior_scale=10.0)
    ref = sample(model, "nuts", n_samples=4000, n_warmup=1000, n_chains=4, random_state=5)
    rflat = ref.draws.reshape(-1, 4)
    rmean, rsd = rflat.mean(0), rflat.std(0)
    for name in ("sgld", "sghmc", "ewsg"):
        for seed in range(3):
            tr = sample(model, name, n_samples=1000, n_warmup=1000, n_chains=4,
                        random_state=seed)
            flat = tr.draws.reshape(-1, 4)
            err = np.abs(flat.mean(0) - rmean)
            assert np.all(err < 0.3 * rsd + 4 * mcse_mean(tr.draws)), (name, seed, err / rsd)
            assert np.all(np.abs(flat.std(0) / rsd - 1) < 0.3), (name, seed)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sgld", "sghmc", "ewsg"])
def test_separable_synthetic_is_refused_before_any_draw(name):
    """2e4 x 20 standard-normal rows labelled by a hyperplane with a margin
    (separable): refused in the preparation, three seeds (the preparation is
    deterministic)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal(20)
    w /= np.linalg.norm(w)
    Z = rng.standard_normal((60_000, 20))
    Z = Z[np.abs(Z @ w) > 0.5][:20_000]
    model = LogisticRegressionModel(Z, (Z @ w > 0) * 1.0, prior_scale=10.0,
                                    intercept_prior_scale=10.0)
    for seed in range(3):
        with pytest.raises(SamplingError, match="refuses this posterior"):
            sample(model, name, n_samples=100, n_warmup=100, random_state=seed)
