"""EWSG (doc/algorithms/sgmcmc.rst): exactness of the uniform special case against
the closed-form stationary law, accuracy gain over uniform stochastic gradients
(paired over seeds), compiled GLM vs the same posterior as a user model, API."""
import dataclasses

import numpy as np
import pytest
from scipy import linalg, stats

from bayes_subsample import sample
from bayes_subsample.control_variates import TaylorControlVariate
from bayes_subsample.diagnostics import mcse_mean
from bayes_subsample.models import (FunctionModel, GaussianRegressionModel,
                                    LogisticRegressionModel)
from bayes_subsample.samplers.ewsg import EWSG
from bayes_subsample.samplers.sghmc import SGHMC
from bayes_subsample.samplers import iterations_for_passes

N = 20
H, GAMMA = 0.05, 10.0          # the EWSG paper's Gaussian example


def gaussian_2d(seed=42):
    c = np.random.default_rng(seed).normal(size=(N, 2))

    def loglik(t, idx):
        return -0.5 * np.sum((t - c[idx]) ** 2, axis=1)

    def grad(t, idx):
        return c[idx] - t

    model = FunctionModel(loglik, grad, n_data=N, n_params=2, prior_scale=1e4)
    lam = N + 1e-8
    return model, N * c.mean(0) / lam, np.eye(2) / lam, lam, np.cov(c.T, bias=True)


def uniform_em_stationary_cov(h, gamma, lam, Vg):
    """Euler-Maruyama underdamped Langevin with additive gradient noise Vg."""
    eye, zero = np.eye(2), np.zeros((2, 2))
    A = np.block([[eye, h * eye], [-h * lam * eye, (1 - h * gamma) * eye]])
    Q = np.block([[zero, zero], [zero, 2 * gamma * h * eye + h * h * Vg]])
    return linalg.solve_discrete_lyapunov(A, Q)[:2, :2]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_uniform_index_chain_matches_em_stationary_law(seed):
    """M = 0, b = 1 is uniform-SG underdamped Langevin: check its moments
    against the Lyapunov prediction (the partition sampler included)."""
    model, mean, exact_cov, lam, S = gaussian_2d()
    pred = uniform_em_stationary_cov(H, GAMMA, lam, N ** 2 * S)
    # one step an iteration mixes too slowly for the end-of-warmup check (and the law's
    # bias is what is measured)
    tr = sample(model, EWSG(step_size=H, batch_size=1, friction=GAMMA, index_chain_length=0,
                            precondition=False, control_variates=False, n_steps=1,
                            check_spread=False),
                n_samples=10000, n_warmup=200, n_chains=2, random_state=seed,
                check_convergence=False)
    d = tr.draws
    flat = d.reshape(-1, 2)
    assert np.all(np.abs(flat.mean(0) - mean) < 4.5 * mcse_mean(d))
    for i in range(2):
        for j in range(i, 2):
            prod = (d[..., i] - mean[i]) * (d[..., j] - mean[j])
            assert abs(prod.mean() - pred[i, j]) < 4.5 * mcse_mean(prod)
    assert np.all(np.isnan(tr.stats["index_accept"]))
    assert np.max(np.abs(pred - exact_cov)) > 0.5 * exact_cov[0, 0]   # power


@pytest.mark.parametrize("seed", [0, 1])
def test_control_variates_remove_the_minibatch_noise(seed):
    """On a Gaussian regression the second-order Taylor control variates are
    exact, so EWSG with them is full-gradient Euler-Maruyama underdamped
    Langevin (whitened: unit curvature) whatever the minibatch: its stationary
    covariance is the Lyapunov prediction with no gradient noise."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 2))
    model = GaussianRegressionModel(X, X @ [0.5, -1.0] + rng.normal(size=400))
    mean, cov = model.exact_posterior()
    h, gamma = 0.3, 2.0
    # two steps an iteration mix too slowly for the end-of-warmup check (and the law's bias
    # is what is measured)
    tr = sample(model, EWSG(step_size=h, batch_size=3, friction=gamma, n_steps=2,
                            check_spread=False),
                n_samples=8000, n_warmup=200, n_chains=2, random_state=seed,
                check_convergence=False)
    d = tr.draws
    # in whitened coordinates z = L^-1 (theta - mean): unit curvature, no noise
    L = np.linalg.cholesky(cov)
    z = np.linalg.solve(L, (d.reshape(-1, 3) - mean).T).T.reshape(d.shape)
    pred = uniform_em_stationary_cov(h, gamma, 1.0, np.zeros((2, 2)))[0, 0]
    assert pred > 1.1                                  # power: EM's bias is visible
    for j in range(3):
        sq = z[..., j] ** 2
        assert abs(sq.mean() - pred) < 4.5 * mcse_mean(sq)
    assert np.all(np.abs(z.reshape(-1, 3).mean(0)) < 4.5 * mcse_mean(z))


def _cov_error(sampler, seed, n_iter, model, mean, exact_cov):
    tr = sample(model, sampler, n_samples=n_iter, n_warmup=100, n_chains=1,
                random_state=seed, check_convergence=False)
    d = tr.draws.reshape(-1, 2)
    return np.linalg.norm(np.cov(d.T) - exact_cov), tr


def _paired_comparison(seeds, budget_passes):
    model, mean, exact_cov, lam, S = gaussian_2d()
    ewsg = EWSG(step_size=H, batch_size=1, friction=GAMMA, index_chain_length=1,
                precondition=False, control_variates=False, n_steps=1)
    sghmc = SGHMC(step_size=H, batch_size=1, friction=GAMMA, n_steps=10, precondition=False,
                  control_variates=False, refresh_momentum=False)
    n_e = iterations_for_passes(budget_passes, N, 1, 1)
    n_s = iterations_for_passes(budget_passes, N, 1, 0, n_steps=10)
    diffs = []
    for seed in seeds:
        e_err, tr_e = _cov_error(ewsg, seed, n_e, model, mean, exact_cov)
        s_err, tr_s = _cov_error(sghmc, seed, n_s, model, mean, exact_cov)
        # same budget of gradient evaluations
        assert tr_e.stats["n_evals"].sum() == pytest.approx(tr_s.stats["n_evals"].sum(), rel=0.01)
        diffs.append(s_err - e_err)
    return np.array(diffs)


def test_ewsg_covariance_error_below_sghmc():
    """Paired over seeds, same step size and gradient budget: a one-sided
    t-test that SGHMC's covariance error exceeds EWSG's."""
    diffs = _paired_comparison(range(8), budget_passes=600)
    t = diffs.mean() / (diffs.std(ddof=1) / np.sqrt(len(diffs)))
    assert stats.t.sf(t, len(diffs) - 1) < 0.01, diffs


@pytest.mark.slow
def test_ewsg_covariance_error_below_sghmc_many_seeds():
    diffs = _paired_comparison(range(40), budget_passes=3000)
    t = diffs.mean() / (diffs.std(ddof=1) / np.sqrt(len(diffs)))
    assert stats.t.sf(t, len(diffs) - 1) < 1e-4
    assert np.mean(diffs > 0) > 0.8


def test_small_step_regression_close_to_exact():
    rng = np.random.default_rng(3)
    n = 2000
    X = rng.normal(size=(n, 2))
    y = X @ np.array([0.7, -0.4]) + 0.3 + rng.normal(size=n)
    model = GaussianRegressionModel(X, y, prior_scale=5.0, intercept_prior_scale=5.0)
    mean, cov = model.exact_posterior()
    sd = np.sqrt(np.diag(cov))
    for seed in (0, 1):
        # a step this small mixes too slowly for the end-of-warmup check (about 5 effective
        # draws in its 100 iterations): the dynamics, not the check, are tested here
        tr = sample(model, EWSG(step_size=1e-4, batch_size=100, friction=50.0, n_steps=20,
                                precondition=False, control_variates=False, check_spread=False),
                    n_samples=1500, n_warmup=200, n_chains=2, random_state=seed,
                    check_convergence=False)
        d = tr.draws
        flat = d.reshape(-1, 3)
        mcse = mcse_mean(d)
        assert np.all(np.abs(flat.mean(0) - mean) < 4.5 * mcse + 0.02 * sd)
        rel = np.abs(flat.std(0) / sd - 1)
        assert np.all(rel < 0.1 + 4.5 * mcse / sd), rel
        acc = tr.stats["index_accept"]
        assert np.all((acc >= 0) & (acc <= 1))


# --------------------------------------------------------------------------------------
# compiled loop vs NumPy path, partitions, counting
# --------------------------------------------------------------------------------------
def _run(model, sampler, prepared, n_iter=40):
    kernel = sampler.build(model, prepared, 0)
    rng = np.random.default_rng(9)
    state = kernel.init(rng, prepared.theta_init.copy())
    thetas, infos = [], []
    for _ in range(n_iter):
        state, info = kernel.step(rng, state)
        thetas.append(state.theta.copy())
        infos.append(info)
    return np.array(thetas), infos, state, rng.random()


@pytest.mark.parametrize("cv", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("index_chain", ["restart", "persistent"])
@pytest.mark.parametrize("M", [0, 1, 3])
def test_glm_matches_user_model(dtype, index_chain, M, cv, as_user_model):
    """The compiled GLM and the same posterior as a user model (terms called
    back from the compiled loop) make the same chain."""
    rng = np.random.default_rng(0)
    n = 103                                   # 103 = 10 blocks of 10 + one of 3
    X = rng.normal(size=(n, 3)).astype(dtype)
    y = (rng.random(n) < 1 / (1 + np.exp(-X.astype(float) @ [1.0, -1.0, 0.5]))) * 1.0
    model = LogisticRegressionModel(X, y)
    s = EWSG(step_size=2e-3, batch_size=10, friction=5.0, index_chain_length=M,
             index_chain=index_chain, n_steps=3, control_variates=cv)
    prepared = s.prepare(model, np.random.default_rng(1))
    assert (prepared.cv is not None) == cv
    if cv:
        # first-order control variates: what a user model supports
        prepared = dataclasses.replace(
            prepared, cv=TaylorControlVariate(model, prepared.theta_init, order=1))
    a, ia, sa, ua = _run(model, s, prepared)
    b, ib, sb, ub = _run(as_user_model(model), s, prepared)
    assert np.allclose(a, b, rtol=1e-9, atol=1e-9)
    assert ua == ub
    per_datum = 2 if cv else 1            # the user model evaluates theta and theta*
    assert [per_datum * i.n_evals for i in ia] == [i.n_evals for i in ib]
    assert np.array_equal(sa.partition, sb.partition)
    acc_a = np.array([i.index_accept for i in ia])
    acc_b = np.array([i.index_accept for i in ib])
    assert np.array_equal(acc_a, acc_b, equal_nan=True)
    # cost: (M + 1) minibatches per step, exact block sizes (the short block is 3)
    total = sum(i.n_evals for i in ia)
    assert 3 * 40 * (M + 1) * 3 <= total <= 3 * 40 * (M + 1) * 10
    assert ia[-1].data_passes == pytest.approx(total / n)
    assert sorted(sa.partition) == list(range(n))


def test_partition_reshuffled_each_epoch():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    model = LogisticRegressionModel(X, (rng.random(50) < 0.5) * 1.0)
    s = EWSG(step_size=1e-3, batch_size=5, index_chain_length=1, n_steps=1)   # n_b = 10
    prepared = s.prepare(model, np.random.default_rng(0))
    k = s.build(model, prepared, 0)
    g = np.random.default_rng(1)
    st = k.init(g, prepared.theta_init)
    first = st.partition.copy()
    for _ in range(5):                        # 5 steps x 2 blocks = one epoch
        st, _ = k.step(g, st)
    assert np.array_equal(st.partition, first)
    st, _ = k.step(g, st)                     # starts by reshuffling
    assert not np.array_equal(st.partition, first)
    assert sorted(st.partition) == list(range(50))


def test_index_acceptance_responds_to_weights():
    """Large h sharpens the exponential weights: fewer index proposals accepted."""
    model = gaussian_2d()[0]
    rates = []
    for h in (1e-3, 0.1):
        tr = sample(model, EWSG(step_size=h, batch_size=1, friction=GAMMA, precondition=False,
                                control_variates=False, n_steps=1),
                    n_samples=2000, n_warmup=50, n_chains=1, random_state=0,
                    check_convergence=False)
        rates.append(np.mean(tr.stats["index_accept"]))
    assert rates[0] > 0.9 and rates[1] < rates[0] - 0.1


@pytest.mark.parametrize("which", ["glm", "user"])
def test_reproducible_across_n_jobs(which):
    if which == "glm":
        rng = np.random.default_rng(0)
        X = rng.normal(size=(300, 2))
        model = LogisticRegressionModel(X, (rng.random(300) < 0.5) * 1.0)
    else:
        model = gaussian_2d()[0]
    s = EWSG(batch_size=7, index_chain="persistent", index_chain_length=2)
    kw = dict(n_samples=60, n_warmup=20, n_chains=2, random_state=4, check_convergence=False)
    a, b = sample(model, s, n_jobs=1, **kw), sample(model, s, n_jobs=2, **kw)
    assert np.array_equal(a.draws, b.draws)
    assert np.array_equal(a.stats["index_accept"], b.stats["index_accept"], equal_nan=True)


@pytest.mark.parametrize("kwargs, match", [
    ({"batch_size": 0}, "batch_size"),
    ({"friction": -1.0}, "friction"),
    ({"index_chain_length": -1}, "index_chain_length"),
    ({"index_chain": "sticky"}, "index_chain"),
    ({"step_size": 0.0}, "step_size"),
])
def test_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sample(gaussian_2d()[0], EWSG(**kwargs), n_samples=5, n_warmup=0, n_chains=1)


@pytest.mark.filterwarnings("ignore:EWSG visits points")
def test_divergence_and_flags():
    assert EWSG.exact is False and EWSG().name == "ewsg"
    with pytest.raises(FloatingPointError, match="EWSG"), np.errstate(over="ignore",
                                                                    invalid="ignore"):
        sample(gaussian_2d()[0], EWSG(step_size=1.0, batch_size=1, precondition=False,
                                      control_variates=False), n_samples=500,
               n_warmup=0, n_chains=1, random_state=0)
