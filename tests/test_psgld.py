"""pSGLD (RMSprop-preconditioned SGLD; doc/algorithms/sgmcmc.rst, ``algo-psgld``).

* The compiled steps against a plain NumPy transcription of the paper's
  Algorithm 1 (without its Gamma term), drawing the same random numbers.
* The default step on a GLM is SGLD's rule in the preconditioner's
  coordinates, and ``suggest_step_size`` returns it.
* Statistical: on a conjugate Gaussian regression the draws at the default
  step match the exact posterior, means within Monte Carlo error (the
  stationary mean is exact on a Gaussian posterior up to the omitted Gamma
  term, negligible where the preconditioner barely varies) and standard
  deviations within the 10% allowance for the step's documented bias that
  tests/test_sgmcmc.py gives SGLD, plus Monte Carlo error.
* On a GLM whose default step would be too small to mix it refuses before any
  draw, as plain SGLD does; an explicit step runs.

Its runs on a neural network are in tests/test_sg_mlp.py; the sampler contract
(cloning, parameters, n_jobs, user models) in tests/test_samplers_common.py.
"""
import numpy as np
import pytest

from bayes_subsample import _rng, sample
from bayes_subsample.diagnostics import ess_bulk, mcse_mean
from bayes_subsample.exceptions import SamplingError
from bayes_subsample.models import GaussianRegressionModel, LogisticRegressionModel
from bayes_subsample.samplers import PSGLD, suggest_step_size


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(7)
    n = 2000
    X = rng.normal(size=(n, 2))
    y = X @ np.array([0.7, -0.4]) + 0.3 + rng.normal(size=n)
    model = GaussianRegressionModel(X, y, prior_scale=5.0, intercept_prior_scale=5.0)
    mean, cov = model.exact_posterior()
    return model, mean, np.sqrt(np.diag(cov))


def _reference_steps(model, theta, v, eps, b, n_steps, rng, alpha=0.99, damping=1e-5):
    """Li et al. (2016), Algorithm 1, without Gamma, in NumPy."""
    n = model.n_data
    theta, v = theta.copy(), v.copy()
    for _ in range(n_steps):
        idx = _rng.uniform_indices(rng, n, b)
        g = model.prior.grad_log_prob(theta) + n / b * model.grad_sum(theta, idx)
        v = alpha * v + (1 - alpha) * (g / n) ** 2
        G = 1.0 / (damping + np.sqrt(v))
        theta = theta + 0.5 * eps * G * g + np.sqrt(eps * G) * _rng.standard_normals(rng, len(g))
    return theta, v


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_steps_match_numpy_reference(dtype):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)).astype(dtype)
    y = (rng.random(300) < 1 / (1 + np.exp(-X.astype(float) @ [1.0, -0.5, 0.2]))) * 1.0
    model = LogisticRegressionModel(X, y)
    sampler = PSGLD(step_size=2e-4, batch_size=20, n_steps=4, check_spread=False)
    prepared = sampler.prepare(model, np.random.default_rng(1))
    kernel = sampler.build(model, prepared, 0)
    theta0 = prepared.theta_init + 0.05
    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    state = kernel.init(rng_a, theta0)
    theta_ref, v_ref = theta0, prepared.second_moment
    for _ in range(3):
        state, info = kernel.step(rng_a, state)
        theta_ref, v_ref = _reference_steps(model, theta_ref, v_ref, 2e-4, 20, 4, rng_b)
        np.testing.assert_allclose(state.theta, theta_ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(state.second_moment, v_ref, rtol=1e-10, atol=1e-300)
    assert info.n_evals == 80
    assert rng_a.random() == rng_b.random()          # the same random numbers were drawn


def test_default_step_is_sgld_rule_in_preconditioned_coordinates(regression):
    model = regression[0]
    sampler = PSGLD(batch_size=200)
    prepared = sampler.prepare(model, np.random.default_rng(0))
    # the preconditioner at its estimated stationary value (the chains' start)
    G = 1.0 / (1e-5 + np.sqrt(prepared.second_moment))
    s = np.sqrt(G)
    lam = np.max(np.linalg.eigvalsh(s[:, None] * prepared.precision * s[None, :]))
    assert prepared.step_size == pytest.approx(0.3 * (200 / model.n_data) / lam, rel=1e-10)
    assert suggest_step_size(model, sampler) == pytest.approx(prepared.step_size, rel=1e-10)
    assert prepared.cv is None and prepared.precondition is False


@pytest.mark.parametrize("seed", [0, 1])
def test_linear_regression_close_to_exact(regression, seed):
    model, mean, sd = regression
    # batch 200 of 2,000 rows: the default step is 10 times below the exact-gradient
    # one (q = b / n), 50 steps a draw; the spread check at the end of warmup runs
    trace = sample(model, PSGLD(batch_size=200, n_steps=50), n_samples=2000, n_warmup=400,
                   n_chains=2, random_state=seed, check_convergence=False)
    assert trace.tuning[0]["spread_check"]["checked"]
    d = trace.draws
    flat = d.reshape(-1, d.shape[-1])
    ess = np.atleast_1d(ess_bulk(d))
    assert ess.min() >= 400, ess
    assert np.all(np.abs(flat.mean(0) - mean) < 4.5 * mcse_mean(d) + 0.02 * sd)
    rel = np.abs(flat.std(0) / sd - 1)
    assert np.all(rel < 0.1 + 4.5 / np.sqrt(2 * ess)), (rel, ess)
    assert trace.sampler.exact is False


def test_refuses_a_default_step_too_small_to_mix(regression):
    model = regression[0]
    # 32 of 2,000 rows: the minibatch noise makes the default step 62.5 times smaller
    with pytest.raises(SamplingError, match="PSGLD refuses.*minibatch gradient noise"):
        PSGLD().prepare(model, np.random.default_rng(0))
    trace = sample(model, PSGLD(step_size=1e-6, check_spread=False), n_samples=20,
                   n_warmup=5, n_chains=1, random_state=0, check_convergence=False)
    assert np.all(np.isfinite(trace.draws))


def test_divergence_raises(regression):
    with pytest.raises(SamplingError, match="step_size"):
        sample(regression[0], PSGLD(step_size=10.0, check_spread=False), n_samples=20,
               n_warmup=5, n_chains=1, random_state=0, check_convergence=False)
