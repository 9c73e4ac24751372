"""Multinomial logistic regression through every sampler: the compiled HMC-ECS
potential against its NumPy definition, the confidence sampler's range bounds
by brute force, and each sampler's posterior against full-data NUTS."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from bayes_subsample import diagnostics, sample
from bayes_subsample.control_variates import TaylorControlVariate
from bayes_subsample.models import MultinomialLogisticModel
from bayes_subsample.samplers import HMCECS, ConfidenceMH
from bayes_subsample.samplers._hmc_ecs_fast import ECSCore


def _softmax_data(n, d, K, seed=0, dtype=np.float64, scale=0.7):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    B = rng.normal(size=(K, d + 1)) * scale
    eta = X.astype(np.float64) @ B[:, :d].T + B[:, d]
    P = np.exp(eta - eta.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    y = (P.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return X, y, B


def _model(n=2000, d=3, K=4, seed=0, dtype=np.float64, **kw):
    X, y, B = _softmax_data(n, d, K, seed, dtype)
    return MultinomialLogisticModel(X, y, n_classes=K, prior_scale=5.0, **kw), B


def _quiet_sample(*args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return sample(*args, check_convergence=False, **kw)


def _centred(draws, model):
    """Draws with the across-class mean of each coordinate removed: the
    identified part of the one-vector-per-class parameterisation."""
    K, p1 = model.n_classes, model.n_cols
    t = draws.reshape(draws.shape[:-1] + (K, p1))
    return (t - t.mean(axis=-2, keepdims=True)).reshape(draws.shape)


# ---- the compiled HMC-ECS potential against its definition ---------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("order", [0, 1, 2])
@pytest.mark.parametrize("intercept", [True, False])
def test_core_perturbed_matches_reference(dtype, order, intercept):
    model, B = _model(dtype=dtype, fit_intercept=intercept)
    rng = np.random.default_rng(1)
    ts = (B if intercept else B[:, :-1]).ravel() + 0.05 * rng.normal(size=model.n_params)
    cv = TaylorControlVariate(model, ts, order=order)
    core = ECSCore(model.compiled, order, model.prior.precision, "perturbed")
    idx = rng.integers(0, model.n_data, size=120)
    core.set_rows(idx, 30)
    core.set_reference(ts, cv.L_star, cv.A, cv.B)
    for _ in range(3):
        theta = ts + 0.05 * rng.normal(size=model.n_params)
        U, g = core.value_and_grad(theta)
        lam, glam = cv.perturbed_loglik_and_grad(theta, idx)
        np.testing.assert_allclose(U, -(lam + model.prior.log_prob(theta)), rtol=1e-10,
                                   atol=1e-8)
        np.testing.assert_allclose(g, -(glam + model.prior.grad_log_prob(theta)), rtol=1e-9,
                                   atol=1e-8)


@pytest.mark.parametrize("order", [0, 2])
def test_core_signed_matches_block_poisson_formula(order):
    model, B = _model()
    rng = np.random.default_rng(3)
    ts = B.ravel() + 0.05 * rng.normal(size=model.n_params)
    cv = TaylorControlVariate(model, ts, order=order)
    core = ECSCore(model.compiled, order, model.prior.precision, "signed")
    m, lam, nb = 25, 4.0, 6
    idx = rng.integers(0, model.n_data, size=m * nb)
    core.set_rows(idx, m)
    core.set_reference(ts, cv.L_star, cv.A, cv.B)
    core.set_signed(-lam, lam)
    theta = ts + 0.05 * rng.normal(size=model.n_params)
    U, g = core.value_and_grad(theta)
    d, gd = cv.residuals(theta, idx)
    n = model.n_data
    dhat = n / m * d.reshape(nb, m).sum(axis=1)
    logabs = cv.Q(theta) + np.sum(np.log(np.abs(dhat + lam)) - np.log(lam))
    grad = cv.grad_Q(theta) + sum(n / m * gd[b * m:(b + 1) * m].sum(axis=0) / (dhat[b] + lam)
                                  for b in range(nb))
    np.testing.assert_allclose(U, -(logabs + model.prior.log_prob(theta)), rtol=1e-10)
    np.testing.assert_allclose(g, -(grad + model.prior.grad_log_prob(theta)), rtol=1e-8,
                               atol=1e-8)


def test_core_gradient_matches_finite_differences():
    model, B = _model(n=500, K=3)
    rng = np.random.default_rng(2)
    ts = B.ravel()
    cv = TaylorControlVariate(model, ts, order=2)
    core = ECSCore(model.compiled, 2, model.prior.precision, "perturbed")
    core.set_rows(rng.integers(0, model.n_data, size=60), 20)
    core.set_reference(ts, cv.L_star, cv.A, cv.B)
    theta = ts + 0.2 * rng.normal(size=model.n_params)
    _, g = core.value_and_grad(theta)
    h = 1e-6
    for j in range(model.n_params):
        e = np.zeros(model.n_params)
        e[j] = h
        fd = (core.value_and_grad(theta + e)[0] - core.value_and_grad(theta - e)[0]) / (2 * h)
        assert abs(fd - g[j]) <= 1e-5 * max(1.0, abs(g[j]))


def test_core_block_update_keeps_the_state_consistent():
    """After accepted and rejected block updates, U at the position equals a
    fresh evaluation on the current rows, and batch statistics are the residuals."""
    model, B = _model()
    rng = np.random.default_rng(4)
    ts = B.ravel()
    cv = TaylorControlVariate(model, ts, order=2)
    core = ECSCore(model.compiled, 2, model.prior.precision, "perturbed")
    core.set_rows(rng.integers(0, model.n_data, size=120), 30)
    core.set_reference(ts, cv.L_star, cv.A, cv.B)
    theta = ts + 0.1 * rng.normal(size=model.n_params)
    core.set_position(theta)
    accepted = [core.u_step(rng)[0] for _ in range(30)]
    assert 0 < sum(accepted) < 30
    lam, _ = cv.perturbed_loglik_and_grad(theta, core.indices)
    np.testing.assert_allclose(core.U, -(lam + model.prior.log_prob(theta)), rtol=1e-10)
    idx = rng.integers(0, model.n_data, size=60)
    S, d = core.batch_stats(idx, 30)
    np.testing.assert_allclose(d, cv.residual_terms(theta, idx), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(S, d.reshape(2, 30).sum(axis=1), rtol=1e-12)


# ---- the confidence sampler's range bounds, by brute force ---------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_range_bounds_hold_on_every_datum(seed):
    rng = np.random.default_rng(seed)
    K, d = int(rng.integers(2, 6)), int(rng.integers(1, 4))
    X = rng.normal(size=(400, d)) * rng.uniform(0.3, 3.0)
    model = MultinomialLogisticModel(X, rng.integers(0, K, 400), n_classes=K,
                                     fit_intercept=bool(seed % 2))
    idx = np.arange(400)
    for scale in (0.01, 0.3, 2.0):
        ts = rng.normal(size=model.n_params)
        th = ts + scale * rng.normal(size=model.n_params)
        tn = th + scale * rng.normal(size=model.n_params)
        actual = np.abs(model.loglik_diff_terms(th, tn, idx)).max()
        assert actual <= model.range_bound(th, tn) * (1 + 1e-12)
        actual = np.abs(model.cv_residual_terms(tn, ts, idx, 2)
                        - model.cv_residual_terms(th, ts, idx, 2)).max()
        assert actual <= model.cv_range_bound(th, tn, ts, 2) * (1 + 1e-12)
    # a shift common to every class changes no term, and neither bound
    shift = np.tile(rng.normal(size=model.n_cols), K)
    assert model.range_bound(th, th + shift) == pytest.approx(0.0, abs=1e-12)
    assert model.range_bound(th, tn + shift) == pytest.approx(model.range_bound(th, tn))


def test_plain_range_bound_is_attained():
    """One row, two classes, a move of the class difference along the row: the
    bound R max ||h_a - h_b|| is approached as the row's p_y -> 0."""
    X = np.array([[3.0, 4.0]])
    model = MultinomialLogisticModel(X, np.array([0]), n_classes=2, fit_intercept=False)
    th = np.array([-10.0, -10.0, 10.0, 10.0]) / 5
    tn = th + np.array([-0.6, -0.8, 0.0, 0.0]) * 1e-3
    actual = abs(model.loglik_diff_terms(th, tn, [0])[0])
    assert actual == pytest.approx(model.range_bound(th, tn), rel=1e-3)


# ---- every sampler against full-data NUTS --------------------------------------------------------
@pytest.fixture(scope="module")
def multinomial_problem():
    """n = 4000, d = 2, K = 3 (9 parameters), with a full-data NUTS reference."""
    X, y, _ = _softmax_data(4000, 2, 3, seed=7)
    model = MultinomialLogisticModel(X, y, prior_scale=5.0)
    ref = _quiet_sample(model, "nuts", n_samples=1500, n_warmup=500, n_chains=2,
                        random_state=0)
    return model, ref


SAMPLERS = ["mh", "hmc", "hmc_ecs", "hmc_ecs_nuts", "hmc_ecs_signed", "austerity",
            "confidence", ConfidenceMH(proxy="taylor"), "sgld", "sghmc", "ewsg"]


@pytest.mark.parametrize("sampler", SAMPLERS, ids=lambda s: s if isinstance(s, str)
                         else "confidence_taylor")
def test_every_sampler_matches_nuts(multinomial_problem, sampler):
    """Centred coefficients (the identified part): means within 0.25 posterior
    sd beyond 4 Monte Carlo standard errors, sds within 25%, for each sampler
    at its defaults on data it subsamples."""
    model, ref = multinomial_problem
    tr = _quiet_sample(model, sampler, n_samples=1000, n_warmup=500, n_chains=2,
                       random_state=1)
    assert not tr.tuning[0].get("full_data", False), "the sampler must subsample here"
    a, b = _centred(tr.draws, model), _centred(ref.draws, model)
    fa, fb = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    sd = fb.std(axis=0)
    mcse = np.hypot(diagnostics.mcse_mean(a), diagnostics.mcse_mean(b))
    err = np.clip(np.abs(fa.mean(axis=0) - fb.mean(axis=0)) - 4 * mcse, 0, None) / sd
    assert err.max() < 0.25, err
    ratio = fa.std(axis=0) / sd
    assert np.all((ratio > 0.75) & (ratio < 1.25)), ratio


def test_hmc_ecs_subsamples_and_matches_full_hmc_closely(multinomial_problem):
    """The default HMC-ECS (perturbed, order 2) within 0.1 sd + 3 MCSE of
    full-data NUTS (the paper's criterion), reading a fraction of the data."""
    model, ref = multinomial_problem
    tr = _quiet_sample(model, HMCECS(), n_samples=1500, n_warmup=500, n_chains=2,
                       random_state=3)
    a, b = _centred(tr.draws, model), _centred(ref.draws, model)
    fa, fb = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    mcse = np.hypot(diagnostics.mcse_mean(a), diagnostics.mcse_mean(b))
    err = np.abs(fa.mean(axis=0) - fb.mean(axis=0))
    assert np.all(err < 0.1 * fb.std(axis=0) + 3 * mcse), err / fb.std(axis=0)
    n_leapfrog = tr.tuning[0]["n_leapfrog"]
    assert np.mean(tr.stats["n_evals"]) < 0.5 * model.n_data * n_leapfrog


@pytest.mark.parametrize("order", [0, 1, 2])
def test_residuals_ignore_a_shift_common_to_every_class(order):
    """The residuals do not change when the same vector is added to every
    class's coefficients (the direction only the prior sees, where chains roam
    by several units): compiled model and HMC-ECS core agree to rounding with
    and without a large shift (a regression test: the uncentred computation
    lost ~1e-4 of residuals of size ~1e-3 to cancellation at shifts of ~10)."""
    model, B = _model(n=500, K=5)
    rng = np.random.default_rng(5)
    ts = B.ravel()
    theta = ts + 0.05 * rng.normal(size=model.n_params)
    idx = np.arange(model.n_data)
    base = model.cv_residual_terms(theta, ts, idx, order)
    core = ECSCore(model.compiled, order, model.prior.precision, "perturbed")
    cv = TaylorControlVariate(model, ts, order=order)
    core.set_rows(idx[:100], 10)
    core.set_reference(ts, cv.L_star, cv.A, cv.B)
    for size in (1.0, 10.0, 40.0):
        shift = np.tile(size * rng.normal(size=model.n_cols), model.n_classes)
        shifted = model.cv_residual_terms(theta + shift, ts, idx, order)
        np.testing.assert_allclose(shifted, base, rtol=1e-9, atol=1e-13 * (1 + size))
        core.set_position(theta + shift)
        _, d = core.batch_stats(idx[:100], 10)
        np.testing.assert_allclose(d, base[:100], rtol=1e-9, atol=1e-13 * (1 + size))


# ---- real data: the covtype sample shipped with the package, 7 classes ---------------------------
def _covtype_sample(attributes):
    from bayes_subsample import datasets
    X, y = datasets.load_covtype_sample(binary=False, return_X_y=True)
    X = np.asarray(X[:, :attributes], dtype=np.float64)
    X[:, :10] = (X[:, :10] - X[:, :10].mean(axis=0)) / X[:, :10].std(axis=0)
    return MultinomialLogisticModel(np.ascontiguousarray(X), np.asarray(y) - 1, n_classes=7)


@pytest.mark.slow
def test_covtype_sample_matches_nuts():
    """covtype's shipped 20,000-row sample, 7 classes, the 10 quantitative
    attributes (77 parameters): HMC-ECS at its defaults subsamples and agrees
    with full-data NUTS on the centred coefficients within 0.25 posterior sd
    + 3 MCSE, sds within 25% (the criterion of the estimator-level tests of
    every sampler). At its defaults (control variates at the mode, m = 1200)
    the paper's 0.1 sd is not met here: the largest difference measured was
    0.16-0.18 sd, sds down to 0.79 of NUTS's. With ``stratify=True`` it is."""
    model = _covtype_sample(10)
    ref = _quiet_sample(model, "nuts", n_samples=1000, n_warmup=500, n_chains=2,
                        random_state=0)
    tr = _quiet_sample(model, HMCECS(), n_samples=1000, n_warmup=500, n_chains=2,
                       random_state=1)
    assert not tr.tuning[0].get("full_data", False)
    a, b = _centred(tr.draws, model), _centred(ref.draws, model)
    fa, fb = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    sd = fb.std(axis=0)
    mcse = np.hypot(diagnostics.mcse_mean(a), diagnostics.mcse_mean(b))
    err = np.abs(fa.mean(axis=0) - fb.mean(axis=0))
    assert np.all(err < 0.25 * sd + 3 * mcse), np.max(err / sd)
    ratio = fa.std(axis=0) / sd
    assert np.all((ratio > 0.75) & (ratio < 1.25)), (ratio.min(), ratio.max())
    # the stratified warmup (theta* at the mean of the chain's draws, an exact
    # stratum; measured: 0.112 sd, sds 0.90-1.08, m = 100 + ~25 exact rows
    # against m = 1200) meets the paper's 0.1 sd + 3 MCSE, and sds within 10%
    # + 4 standard errors of the ratio (from each run's bulk ESS)
    tr = _quiet_sample(model, HMCECS(stratify=True), n_samples=1000, n_warmup=500,
                       n_chains=2, random_state=1)
    a = _centred(tr.draws, model)
    fa = a.reshape(-1, a.shape[-1])
    mcse = np.hypot(diagnostics.mcse_mean(a), diagnostics.mcse_mean(b))
    err = np.abs(fa.mean(axis=0) - fb.mean(axis=0))
    assert np.all(err < 0.1 * sd + 3 * mcse), np.max(err / sd)
    ratio = fa.std(axis=0) / sd
    se = np.sqrt(0.5 / diagnostics.ess_bulk(a) + 0.5 / diagnostics.ess_bulk(b))
    assert np.all(np.abs(ratio - 1) < 0.1 + 4 * se), (ratio.min(), ratio.max())
