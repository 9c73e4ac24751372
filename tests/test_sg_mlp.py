"""The stochastic-gradient samplers on a neural network (``MLPModel``: a model
without a Hessian; doc/algorithms/sgmcmc.rst, ``algo-sg-no-hessian``).

* SGLD, SGHMC, EWSG and pSGLD run on a small MLP (load_digits, 64-16-10) at
  their defaults: no mode search, chains from ``init_params``, batch 100,
  friction 0.1, and keep the requested number of thinned draws
  (``n_steps`` steps per kept draw, warmup included).
* The same ``random_state`` gives the same draws for ``n_jobs`` 1 and 2; each
  chain starts from ``init_params`` drawn from its own generator.
* The posterior predictive mean beats an accuracy threshold on held-out
  digits (see ``ACCURACY`` for how it was measured).
* With no hidden layer the MLP is multinomial logistic regression: the
  gradient estimate the kernels use agrees with the GLM's after mapping the
  layouts, one SGLD step from mapped starts with the same seed uses the same
  minibatch and the same normal draws, and long SGLD runs agree in law (the
  draws themselves cannot match: the layouts order the parameters
  differently, and the Gaussian noise is drawn coordinate by coordinate in
  the layout's order).
* The other samplers refuse the model with a clear error; control variates
  and Laplace preconditioning, which need a mode, are refused too.
"""
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from bayes_subsample import _normal32, _rng, sample
from bayes_subsample.diagnostics import mcse_mean
from bayes_subsample.models import MLPModel, MultinomialLogisticModel
from bayes_subsample.models._mlp import mlp_grad_reference
from bayes_subsample.samplers import EWSG, PSGLD, SAMPLERS, SGHMC, SGLD, suggest_step_size
from bayes_subsample.samplers._sg_tuning import START_STEP
from bayes_subsample.samplers import _sgmcmc_fast, sgmcmc
from bayes_subsample.samplers._hamiltonian import Metric
from bayes_subsample.samplers._sgmcmc_fast import GradientEstimator

SG = ["sgld", "sghmc", "ewsg", "psgld"]
#: the posterior predictive's test accuracy must exceed this. Measured with the
#: settings of test_posterior_predictive_accuracy (64-16-10 relu, inputs / 16,
#: 100 data passes, 2 chains x 30 kept draws) over random_state 0-9: the
#: smallest accuracy per sampler was 0.953 (SGLD), 0.964 (SGHMC), 0.947 (EWSG)
#: and 0.953 (pSGLD), means 0.961, 0.966, 0.956, 0.963; scikit-learn's
#: MLPClassifier(hidden_layer_sizes=(16,)) gets 0.960 to 0.971 over 5 seeds. A
#: wrong gradient, a diverging step or chains stuck at their start give 0.1 to
#: 0.85.
ACCURACY = 0.93
PASSES = 100


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split((X / 16).astype(np.float32), y, test_size=0.25,
                                          random_state=0)
    return MLPModel(Xtr, ytr, hidden_layer_sizes=(16,)), Xte, yte


def thinning(name, model, passes=PASSES, kept=60):
    """``n_steps`` such that ``kept`` iterations (warmup and draws) spend about
    ``passes`` data passes (EWSG evaluates two blocks a step)."""
    per_step = (2 if name == "ewsg" else 1) * 100
    return max(1, int(passes * model.n_data / per_step) // kept)


@pytest.mark.parametrize("name", SG)
def test_runs_at_defaults_and_keeps_thinned_draws(name, digits):
    model = digits[0]
    sampler = SAMPLERS[name](n_steps=7)
    trace = sample(model, sampler, n_samples=12, n_warmup=5, n_chains=2, random_state=0,
                   check_convergence=False)
    p = model.n_params
    assert trace.draws.shape == (2, 12, p) and trace.warmup_draws.shape == (2, 5, p)
    assert np.all(np.isfinite(trace.draws))
    tuning = trace.tuning[0]
    assert tuning["laplace"] is False and tuning["precondition"] is False
    assert tuning["batch_size"] == 100 and tuning["n_steps"] == 7
    assert tuning.get("friction", 0.1) == 0.1
    assert tuning["spread_check"] == {"checked": False}
    # the thinning: 7 steps of 100 rows per kept iteration (EWSG: its M + 1 = 2
    # blocks a step, the last block of a pass shorter), warmup included
    evals = trace.stats["n_evals"]
    if name == "ewsg":
        assert np.all((evals >= 7 * 2 * (model.n_data % 100)) & (evals <= 7 * 200))
    else:
        assert np.all(evals == 7 * 100)
    total = trace.warmup_stats["n_evals"].sum(1) + evals.sum(1)
    np.testing.assert_allclose(trace.stats["data_passes"][:, -1], total / model.n_data)
    # no mode search: the preparation reads only the curvature's rows (or nothing)
    assert trace.n_evals_prepare <= 200 * model.n_data


@pytest.mark.parametrize("name", SG)
def test_same_seed_same_draws_any_n_jobs(name, digits):
    model = digits[0]
    kw = dict(n_samples=6, n_warmup=3, n_chains=2, random_state=5, check_convergence=False)
    sampler = SAMPLERS[name](n_steps=4)
    a = sample(model, sampler, n_jobs=1, **kw)
    b = sample(model, sampler, n_jobs=2, **kw)
    np.testing.assert_array_equal(a.draws, b.draws)
    np.testing.assert_array_equal(a.warmup_draws, b.warmup_draws)
    c = sample(model, sampler, n_jobs=1, **{**kw, "random_state": 6})
    assert not np.array_equal(a.draws, c.draws)
    # the chains start apart (each from init_params on its own generator)
    assert not np.allclose(a.warmup_draws[0, 0], a.warmup_draws[1, 0], atol=0.05)


def test_chain_starts_are_init_params_of_the_chain_generator(digits):
    model = digits[0]
    sampler = SGLD(n_steps=1)
    prepared = sampler.prepare(model, np.random.default_rng(0))
    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    np.testing.assert_array_equal(prepared.initial_point(model, rng_a),
                                  model.init_params(rng_b))
    # the default step: 2 / lam, lam the largest curvature at the start (lam / n in
    # z = sqrt(n) theta, where the step is stated)
    lam = prepared.step_rule.lam
    assert prepared.step_size == pytest.approx(START_STEP["sgld"] * model.n_data / lam)
    assert suggest_step_size(model, sampler) == pytest.approx(prepared.step_size)
    assert suggest_step_size(model, "psgld") == pytest.approx(0.01 / model.n_data)


@pytest.mark.parametrize("name", SG)
def test_posterior_predictive_accuracy(name, digits):
    model, Xte, yte = digits
    sampler = SAMPLERS[name](n_steps=thinning(name, model))
    trace = sample(model, sampler, n_samples=30, n_warmup=30, n_chains=2, random_state=1,
                   check_convergence=False)
    proba = np.mean([model.predict_proba(t, Xte) for t in trace.draws.reshape(-1, model.n_params)],
                    axis=0)
    passes = trace.stats["data_passes"][:, -1]
    assert np.all((0.9 * PASSES < passes) & (passes < 1.1 * PASSES))
    accuracy = np.mean(proba.argmax(1) == yte)
    assert accuracy > ACCURACY, accuracy


# ---- no hidden layer: multinomial logistic regression -------------------------------------
@pytest.fixture(scope="module")
def softmax_regression():
    rng = np.random.default_rng(3)
    n, d, K = 300, 3, 3
    X = rng.normal(size=(n, d))
    coef = rng.normal(size=(K, d))
    y = np.array([rng.choice(K, p=np.exp(e) / np.exp(e).sum()) for e in X @ coef.T])
    mlp = MLPModel(X, y, hidden_layer_sizes=(), n_classes=K)
    glm = MultinomialLogisticModel(X, y, n_classes=K, prior_scale=1.0,
                                   intercept_prior_scale=1.0)

    def to_mlp(t):
        """The multinomial layout (K, d + 1) -> the MLP's (W = coef^T, then b)."""
        t = np.asarray(t).reshape(K, d + 1)
        return np.concatenate([t[:, :d].T.ravel(), t[:, d]])

    return mlp, glm, to_mlp


def test_no_hidden_layer_gradient_estimates_match(softmax_regression):
    mlp, glm, to_mlp = softmax_regression
    rng = np.random.default_rng(0)
    theta = rng.normal(size=glm.n_params)
    idx = rng.integers(0, glm.n_data, 100)
    g_glm = GradientEstimator(glm.compiled, glm.prior.precision)(theta, idx)
    g_mlp = GradientEstimator(mlp.compiled, mlp.prior.precision)(to_mlp(theta), idx)
    np.testing.assert_allclose(g_mlp, to_mlp(g_glm), rtol=0, atol=1e-10 * np.abs(g_glm).max())


def _one_step(model, sampler, theta0, seed, monkeypatch):
    """One SGLD step from ``theta0``: the new theta, the minibatch (seen by
    wrapping the compiled loop the kernel calls) and the generator after it."""
    seen = {}

    def sgld_steps(*args):
        done = _sgmcmc_fast.sgld_steps(*args)
        seen["idx"] = args[6].copy()          # (gradient, z, eps, b, n_steps, rng, idx, ...)
        return done

    monkeypatch.setattr(sgmcmc, "_fast", SimpleNamespace(sgld_steps=sgld_steps))
    prepared = sampler.prepare(model, np.random.default_rng(0))
    kernel = sampler.build(model, prepared, 0)
    rng = np.random.default_rng(seed)
    state = kernel.init(rng, theta0)
    new, _ = kernel.step(rng, state)
    return new.theta, seen["idx"], rng


def test_no_hidden_layer_sgld_step_uses_the_same_random_numbers(softmax_regression,
                                                                 monkeypatch):
    """One SGLD step from mapped starts, same seed: the same minibatch, and the
    same vector of standard normals, recovered from each step as
    ``(theta' - theta - eps/2 g) / sqrt(eps)``. So the MLP's draw is the GLM's
    with the noise's entries assigned in the MLP's layout."""
    mlp, glm, to_mlp = softmax_regression
    eps = 1e-3                                   # in theta
    theta0 = np.random.default_rng(1).normal(size=glm.n_params) * 0.3
    # the MLP moves z = sqrt(n) theta, where the same step is n eps
    t_mlp, idx_mlp, rng_mlp = _one_step(mlp, SGLD(step_size=eps * mlp.n_data, batch_size=50,
                                                  n_steps=1), to_mlp(theta0), seed=7,
                                         monkeypatch=monkeypatch)
    t_glm, idx_glm, rng_glm = _one_step(glm, SGLD(step_size=eps, batch_size=50, n_steps=1,
                                                  control_variates=False, precondition=False,
                                                  check_spread=False), theta0, seed=7,
                                         monkeypatch=monkeypatch)
    np.testing.assert_array_equal(idx_mlp, idx_glm)
    assert rng_mlp.random() == rng_glm.random()          # as many draws from the stream

    def noise(model, start, end, idx):
        g = GradientEstimator(model.compiled, model.prior.precision)(start, idx)
        return (end - start - 0.5 * eps * g) / np.sqrt(eps)

    xi_mlp = noise(mlp, to_mlp(theta0), t_mlp, idx_mlp)
    xi_glm = noise(glm, theta0, t_glm, idx_glm)
    np.testing.assert_allclose(xi_mlp, xi_glm, rtol=0, atol=1e-9)
    # ... assigned to different parameters: the draws differ by the noise's permutation
    perm = to_mlp(np.arange(glm.n_params)).astype(int)
    np.testing.assert_allclose(t_mlp, to_mlp(t_glm) + np.sqrt(eps) * (xi_glm - xi_glm[perm]),
                               rtol=0, atol=1e-9)


def test_no_hidden_layer_sgld_agrees_in_law(softmax_regression):
    """Long SGLD runs on both layouts (same step in theta, same start): the
    posterior means of the identified parameters (each class's coefficients
    minus their mean over classes; the common part keeps its prior and mixes
    at the prior's slow rate) agree within Monte Carlo error."""
    mlp, glm, to_mlp = softmax_regression
    eps, n, K = 2e-4, glm.n_data, glm.n_classes
    theta0 = np.zeros(glm.n_params)
    kw = dict(n_samples=3000, n_warmup=100, n_chains=2, random_state=0,
              check_convergence=False)
    a = sample(mlp, SGLD(step_size=eps * n, batch_size=100, n_steps=5), init=theta0, **kw)
    b = sample(glm, SGLD(step_size=eps, batch_size=100, n_steps=5, control_variates=False,
                         precondition=False, check_spread=False), init=theta0, **kw)
    perm = to_mlp(np.arange(glm.n_params)).astype(int)     # MLP position -> GLM index

    def identified(draws_glm_layout):
        t = draws_glm_layout.reshape(draws_glm_layout.shape[:2] + (K, -1))
        return (t - t.mean(axis=2, keepdims=True)).reshape(draws_glm_layout.shape)

    a_glm = np.empty_like(a.draws)
    a_glm[..., perm] = a.draws
    ga, gb = identified(a_glm), identified(b.draws)
    se = np.sqrt(mcse_mean(ga) ** 2 + mcse_mean(gb) ** 2)
    diff = np.abs(ga.mean((0, 1)) - gb.mean((0, 1)))
    assert np.all(diff < 4.5 * se), diff / se
    assert not np.allclose(a_glm, b.draws)


# ---- what does not apply to a model without a Hessian ------------------------------------
@pytest.mark.parametrize("name", ["nuts", "hmc", "mh", "hmc_ecs", "austerity", "confidence"])
def test_other_samplers_refuse_with_a_clear_error(name, digits):
    with pytest.raises(ValueError, match="has no Hessian.*'sgld', 'sghmc', 'ewsg' and 'psgld'"):
        sample(digits[0], name, n_samples=2, n_warmup=2, n_chains=1)


@pytest.mark.parametrize("sampler", [SGLD(control_variates=True), SGHMC(precondition=True),
                                     EWSG(control_variates=True)])
def test_mode_based_options_are_refused(sampler, digits):
    with pytest.raises(ValueError, match="needs the posterior's mode.*has no Hessian"):
        sample(digits[0], sampler, n_samples=2, n_warmup=2, n_chains=1)


def test_runaway_step_raises(digits):
    from bayes_subsample.exceptions import SamplingError
    with pytest.raises(SamplingError, match="step_size"):
        sample(digits[0], PSGLD(step_size=1.0), n_samples=5, n_warmup=5, n_chains=1,
               random_state=0)


# ---- the compiled SGHMC loop against a NumPy replay ---------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["sghmc", "sgld"])
def test_sg_steps_against_numpy_reference(name, dtype):
    """``sghmc_steps`` (identity metric, no refresh: the network's defaults) and
    ``sgld_steps`` in ``z = sqrt(n) theta``, replayed in NumPy from the same
    seed: minibatches from ``_rng.uniform_indices``, gradients from
    ``mlp_grad_reference``, noise from ``standard_normal`` (float64 rows) or
    the float32 normals' Python definition (float32 rows, whose kernels set
    ``noise32``): the same draws and generator state, the positions within
    float32 (or float64) rounding."""
    rng0 = np.random.default_rng(4)
    n, d, sizes = 120, 6, (6, 5, 3)
    X = rng0.normal(size=(n, d)).astype(dtype)
    y = rng0.integers(0, 3, n)
    model = MLPModel(X, y, hidden_layer_sizes=sizes[1:-1], n_classes=3)
    p, b, steps, eps, friction = model.n_params, 10, 6, 0.05, 0.3
    est = GradientEstimator(model.compiled, model.prior.precision)
    est.whiten(np.zeros(p), np.full(p, n ** -0.5))
    est.noise32 = dtype == np.float32
    z0, mom0 = rng0.normal(size=p), rng0.normal(size=p)
    z, mom = z0.copy(), mom0.copy()
    gen = np.random.default_rng(9)
    idx, g = np.empty(b, dtype=np.int64), np.empty(p)
    if name == "sghmc":
        done = _sgmcmc_fast.sghmc_steps(est, z, mom, False, Metric(dim=p), eps, friction, b,
                                        steps, gen, idx, g, np.empty(p), np.empty(p),
                                        np.empty(p))
    else:
        done = _sgmcmc_fast.sgld_steps(est, z, eps, b, steps, gen, idx, g)
    assert done == steps
    # the replay
    ref = np.random.default_rng(9)
    L, Xr, prec = n ** -0.5, X.astype(np.float64), np.asarray(model.prior.precision)
    zr, mr = z0.copy(), mom0.copy()
    for _ in range(steps):
        if name == "sghmc":
            zr = zr + eps * mr
        ix = _rng.uniform_indices(ref, n, b)
        theta = L * zr
        grad = mlp_grad_reference(Xr[ix], y[ix], theta, sizes).sum(axis=0)
        gz = L * (-prec * theta + n / b * grad)
        xi = (_normal32.reference_normals(ref, p).astype(np.float64) if dtype == np.float32
              else ref.standard_normal(p))
        if name == "sghmc":
            mr = mr + (eps * (gz - friction * mr) + np.sqrt(2 * friction * eps) * xi)
        else:
            zr = zr + (0.5 * eps * gz + np.sqrt(eps) * xi)
    assert gen.bit_generator.state == ref.bit_generator.state
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(z, zr, rtol=0, atol=tol * np.abs(zr).max())
    if name == "sghmc":
        np.testing.assert_allclose(mom, mr, rtol=0, atol=tol * np.abs(mr).max())


@pytest.mark.parametrize("name", ["sgld", "sghmc", "psgld", "ewsg"])
def test_float32_noise_is_a_declared_model_property(name):
    """The SG kernels draw float32 normals exactly where the model declares
    ``float32_noise``: a network on float32 inputs, not one on float64 inputs
    nor a GLM on float32 rows (whose draws are made in float64)."""
    rng0 = np.random.default_rng(0)
    X = rng0.normal(size=(400, 4))
    y = rng0.integers(0, 3, 400)
    cases = [(MLPModel(X.astype(np.float32), y, hidden_layer_sizes=(5,)), True),
             (MLPModel(X, y, hidden_layer_sizes=(5,)), False),
             (MultinomialLogisticModel(X.astype(np.float32), y), False)]
    for model, expected in cases:
        assert model.float32_noise is expected
        sampler = SAMPLERS[name]()
        prepared = sampler.prepare(model, np.random.default_rng(1))
        assert sampler.build(model, prepared, 0).gradient.noise32 is expected
