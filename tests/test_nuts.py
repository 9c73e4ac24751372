"""NUTS (doc/algorithms/full_data.rst): the transition on the full-data and the
subsampled potentials. The exact-posterior checks are in test_exact_posterior.py
(full data) and test_hmc_ecs.py (HMC-ECS with the NUTS inner kernel)."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from bayes_subsample import diagnostics as diag
from bayes_subsample import sample
from bayes_subsample.control_variates import TaylorControlVariate
from bayes_subsample.models import GaussianRegressionModel, LogisticRegressionModel
from bayes_subsample.samplers import NUTS
from bayes_subsample.samplers._hamiltonian import FullPotential
from bayes_subsample.samplers._hmc_ecs_fast import ECSCore
from bayes_subsample.samplers._nuts import NUTSCore, nuts_step
from bayes_subsample.samplers.hmc import metric_from_precision


def _gaussian(n=2000, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ np.linspace(1, -1, d) + 0.3 + rng.normal(size=n)
    return GaussianRegressionModel(X, y, noise_scale=1.0)


def test_tree_depth_follows_the_step_size():
    """In the whitened metric a Gaussian's orbit has period 2 pi: trajectories
    turn back after about pi / eps leapfrog steps, so the tree depth is about
    log2(pi / eps)."""
    model = _gaussian()
    mean, cov = model.exact_posterior()
    metric, _ = metric_from_precision(np.linalg.inv(cov))
    pot = FullPotential(model.compiled, model.prior.precision)
    pot.set_position(mean)
    rng = np.random.default_rng(1)
    for eps in (0.5, 0.1, 0.02):
        core = NUTSCore(model.n_params, 12)
        depths = [nuts_step(core, pot, metric, rng, eps)[4] for _ in range(200)]
        expected = np.log2(np.pi / eps)
        assert expected - 1.5 <= np.mean(depths) <= expected + 1.5, (eps, np.mean(depths))


def test_huge_step_size_diverges_and_stays():
    model = _gaussian()
    mean, cov = model.exact_posterior()
    metric, _ = metric_from_precision(np.linalg.inv(cov))
    pot = FullPotential(model.compiled, model.prior.precision)
    pot.set_position(mean)
    core, rng = NUTSCore(model.n_params, 10), np.random.default_rng(2)
    moved, acc, dE, n_eval, depth, divergent = nuts_step(core, pot, metric, rng, 50.0)
    assert divergent and depth == 0 and n_eval == 1 and not moved
    np.testing.assert_array_equal(pot.position, mean)


def test_subsampled_potential_is_at_the_draw():
    """After NUTS moves the HMC-ECS potential, its residual banks belong to the new
    position: the position's U and gradient equal a fresh evaluation there."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 4))
    y = (rng.random(3000) < 1 / (1 + np.exp(-(X @ [1.0, -0.5, 0.3, 0.0])))) * 1.0
    model = LogisticRegressionModel(X, y)
    theta_star = np.array([1.0, -0.5, 0.3, 0.0, 0.0])
    cv = TaylorControlVariate(model, theta_star, order=2)
    pot = ECSCore(model.compiled, 2, model.prior.precision, "perturbed")
    pot.set_reference(theta_star, cv.L_star, cv.A, cv.B)
    pot.set_rows(rng.integers(0, 3000, size=200), 20)
    pot.set_position(theta_star)
    metric, _ = metric_from_precision(model.neg_hessian_log_posterior(theta_star))
    core = NUTSCore(model.n_params, 8)
    n_moved = 0
    for _ in range(30):
        pot.u_step(rng)
        moved, *_ = nuts_step(core, pot, metric, rng, 0.4)
        n_moved += moved
        U, g = pot.value_and_grad(pot.position)
        np.testing.assert_allclose(pot.U, U, rtol=1e-10)
        np.testing.assert_allclose(pot.gradient, g, rtol=1e-9, atol=1e-9)
    assert n_moved > 20


@pytest.mark.parametrize("seed", [0, 1])
def test_nuts_on_a_user_model_matches_exact_posterior(seed, as_user_model):
    """NUTS through the callback object of a user model."""
    model = _gaussian(seed=seed)
    mean, cov = model.exact_posterior()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        tr = sample(as_user_model(model), NUTS(), n_samples=800, n_warmup=300, n_chains=2,
                    random_state=seed)
    flat = tr.draws.reshape(-1, model.n_params)
    mcse = np.atleast_1d(diag.mcse_mean(tr.draws))
    assert np.all(np.abs(flat.mean(0) - mean) < 4 * mcse)
    assert np.all(np.abs(flat.std(0) / np.sqrt(np.diag(cov)) - 1) < 0.1)
    assert {"tree_depth", "n_leapfrog", "step_size"} <= set(tr.stats)
