"""Wide models: the diagonal metric and everything that avoids ``p x p`` matrices.

* the compiled pieces against NumPy: the rows' weighted squares
  (``add_xwx_diag_range``), the full pass of the Hessian's diagonal, the
  diagonal ``Metric`` against the dense metric of the same diagonal matrix,
  ``ECSCore`` reading sparse rows in place (``direct``) against its gathered
  copy, and without the Hessian sum below order 2;
* the mode without a Hessian (``diagonal_mode``, preconditioned L-BFGS);
* samplers with ``metric="diag"`` against known posteriors (the conjugate
  Gaussian regression: the Hamiltonian samplers, MH, austerity, the
  confidence sampler, SGLD, SGHMC, EWSG) and against dense NUTS (HMC-ECS,
  subsampling with order-1 control variates);
* the matrix-free pieces: the posterior precision as an operator, its largest
  eigenvalue by Lanczos (the SG samplers' step size), the SG gradient whitened
  by a diagonal factor, leverages in a diagonal metric, the diagonal random
  walk's adaptation;
* ``metric="auto"`` on a wide sparse design: no ``p x p`` array is allocated
  (the traced NumPy memory stays below one such matrix);
* the refusals.
"""
import tracemalloc
import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from bayes_subsample import BayesianLinearRegression, BayesianLogisticRegression, sample
from bayes_subsample import diagnostics as diag
from bayes_subsample._linalg import factor_diagonal, scale_draws
from bayes_subsample._optimize import diagonal_mode, find_map
from bayes_subsample.control_variates import TaylorControlVariate
from bayes_subsample.exceptions import SamplingError
from bayes_subsample.models import (GaussianRegressionModel, LogisticRegressionModel,
                                    PoissonRegressionModel)
from bayes_subsample.models._rows import make_rows
from bayes_subsample.samplers import (EWSG, HMC, HMCECS, MH, NUTS, SGHMC, SGLD, AusterityMH,
                                      ConfidenceMH)
from bayes_subsample.samplers._proposals import RandomWalkProposal
from bayes_subsample.samplers._sgmcmc_fast import GradientEstimator
from bayes_subsample.samplers.sgmcmc import max_curvature
from bayes_subsample.samplers._base import DENSE_METRIC_MAX, diagonal_metric
from bayes_subsample.samplers._hamiltonian import FullPotential, Metric
from bayes_subsample.samplers._hmc_ecs_fast import ECSCore

FAMILIES = {"logistic": LogisticRegressionModel, "poisson": PoissonRegressionModel,
            "gaussian": GaussianRegressionModel}


def _sparse_data(n, p, nnz_row, seed=0, dtype=np.float64, index=np.int32):
    rng = np.random.default_rng(seed)
    X = sparse.random(n, p, density=nnz_row / p, random_state=seed, format="csr",
                      dtype=dtype)
    X.indices = X.indices.astype(index)
    X.indptr = X.indptr.astype(index)
    beta = rng.normal(0, 0.3, size=p)
    eta = X @ beta - 0.3
    return X, rng, eta


def _targets(family, eta, rng):
    if family == "logistic":
        return (rng.random(eta.shape[0]) < 1 / (1 + np.exp(-eta))).astype(float)
    if family == "poisson":
        return rng.poisson(np.exp(np.clip(eta, -5, 2))).astype(float)
    return eta + rng.normal(size=eta.shape[0])


# ---- compiled pieces against NumPy ----------------------------------------------------
@pytest.mark.parametrize("fmt", ["dense", "csr32", "csr64"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("intercept", [True, False])
def test_add_xwx_diag_range_matches_numpy(fmt, dtype, intercept):
    X, rng, _ = _sparse_data(300, 17, 5, dtype=dtype,
                             index=np.int64 if fmt == "csr64" else np.int32)
    data = X.toarray() if fmt == "dense" else X
    rows = make_rows(data, intercept)
    w = rng.normal(size=120)
    out = np.full(rows.n_cols, 0.5)
    rows.py_add_xwx_diag_range(100, 220, w, out)
    Xd = X.toarray().astype(np.float64)[100:220]
    if intercept:
        Xd = np.hstack([Xd, np.ones((120, 1))])
    expect = 0.5 + (w[:, None] * Xd * Xd).sum(axis=0)
    np.testing.assert_allclose(out, expect, rtol=1e-12, atol=1e-12)
    # the diagonal of the full weighted product (dense float32 rows: in float32 blocks)
    H = rows.py_add_xwx_range(100, 220, w)
    bound = (1e-12 * np.abs(expect - 0.5) + 1e-12
             + rows.hessian_rtol * (np.abs(w)[:, None] * Xd * Xd).sum(axis=0))
    assert np.all(np.abs(np.diag(H) - (expect - 0.5)) <= bound)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_diag_hessian_pass_is_the_hessian_diagonal(family, fmt, dtype):
    X, rng, eta = _sparse_data(3000, 23, 6, dtype=dtype)
    y = _targets(family, eta, rng)
    model = FAMILIES[family](X.toarray() if fmt == "dense" else X, y)
    theta = rng.normal(0, 0.1, size=model.n_params)
    ll, g, h = model.full_pass(theta, gradient=True, hessian=True)
    before = model.n_full_passes
    ll_d, g_d, hd = model.full_pass(theta, gradient=True, hessian="diag")
    assert model.n_full_passes == before + 1
    assert hd.shape == (model.n_params,)
    # the full Hessian of dense float32 rows: in float32 blocks (w >= 0)
    rtol = 1e-10 + model.compiled.rows.hessian_rtol
    np.testing.assert_allclose(hd, np.diag(h), rtol=rtol)
    np.testing.assert_allclose(g_d, g, rtol=1e-10, atol=1e-8)
    assert ll_d == pytest.approx(ll, rel=1e-12)
    np.testing.assert_allclose(model.neg_hessian_log_posterior(theta, diagonal=True),
                               np.diag(model.neg_hessian_log_posterior(theta)), rtol=rtol)
    with pytest.raises(ValueError, match="hessian must be"):
        model.full_pass(theta, hessian="full")


def test_diag_hessian_pass_bit_identical_across_threads():
    X, rng, eta = _sparse_data(40_000, 50, 8)
    y = _targets("logistic", eta, rng)
    model = LogisticRegressionModel(X, y)
    theta = rng.normal(0, 0.1, size=model.n_params)
    one = model.compiled.diag_hessian_pass(theta, 1)
    two = model.compiled.diag_hessian_pass(theta, 2)
    assert one[0] == two[0]
    np.testing.assert_array_equal(one[1], two[1])
    np.testing.assert_array_equal(one[2], two[2])


def test_diagonal_metric_equals_dense_metric_of_the_same_matrix():
    X, rng, eta = _sparse_data(2000, 8, 4)
    y = _targets("logistic", eta, rng)
    model = LogisticRegressionModel(X, y)
    d = rng.uniform(50, 400, size=model.n_params)
    dense = Metric(np.diag(np.sqrt(d)), np.diag(1.0 / d))
    diagonal = Metric(diag_mass=d)
    assert diagonal.diagonal and not dense.diagonal and not diagonal.identity
    np.testing.assert_allclose(diagonal.mass, d)
    np.testing.assert_allclose(diagonal.inv_mass, 1.0 / d)
    theta0 = find_map(model)[0]
    ends = []
    for metric in (dense, diagonal):
        pot = FullPotential(model.compiled, model.prior.precision)
        pot.set_position(theta0)
        gen = np.random.default_rng(5)
        for _ in range(20):
            pot.hmc_step(metric, gen, 0.1, 7)
        ends.append(pot.position)
    np.testing.assert_allclose(ends[0], ends[1], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("bad", [[1.0, -1.0], [1.0, np.nan], [[1.0]]])
def test_diagonal_metric_rejects_bad_masses(bad):
    with pytest.raises(ValueError, match="diag_mass"):
        Metric(diag_mass=bad)
    with pytest.raises(ValueError, match="not both"):
        Metric(np.eye(2), np.eye(2), diag_mass=[1.0, 1.0])


def test_factor_diagonal_and_scale_draws():
    f = factor_diagonal([4.0, 0.25])
    np.testing.assert_allclose(f.chol, [2.0, 0.5])
    np.testing.assert_allclose(f.cov, [0.25, 4.0])
    np.testing.assert_allclose(f.chol_cov, [0.5, 2.0])
    z = np.array([[1.0, 1.0], [2.0, -1.0]])
    np.testing.assert_allclose(scale_draws(f.chol_cov, z), [[0.5, 2.0], [1.0, -2.0]])
    L = np.array([[1.0, 0.0], [0.5, 2.0]])
    np.testing.assert_allclose(scale_draws(L, z), z @ L.T)
    np.testing.assert_allclose(scale_draws(L, z[0]), L @ z[0])
    # not positive: regularised by the prior, or refused
    np.testing.assert_allclose(factor_diagonal([-1.0, 1.0], [2.0, 0.0]).precision,
                               [1.0 + 1e-8, 1.0 + 1e-8])
    with pytest.raises(np.linalg.LinAlgError):
        factor_diagonal([0.0, 1.0])


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("order", [0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ecs_core_direct_rows_equal_gathered_rows(family, order, dtype):
    X, rng, eta = _sparse_data(2000, 40, 6, dtype=dtype)
    y = _targets(family, eta, rng)
    model = FAMILIES[family](X, y)
    theta = model.check_theta(find_map(model)[0])
    cv = TaylorControlVariate(model, theta + 0.01, order)
    out = []
    for direct in (False, True):
        pot = ECSCore(model.compiled, order, model.prior.precision, "perturbed", direct)
        assert pot.direct == direct
        pot.set_reference(*cv.reference())
        pot.set_strata(np.arange(30), np.arange(30, 2000))
        pot.set_rows(np.arange(100, 500), 20)
        U = pot.set_position(theta)
        U2, g2 = pot.value_and_grad(theta * 1.05)
        gen = np.random.default_rng(3)
        acc = [pot.u_step(gen)[0] for _ in range(10)]
        S, d = pot.batch_stats(np.arange(600, 700), 20)
        out.append((U, U2, g2, pot.U, pot.indices, acc, S, d, pot.sigma2))
    a, b = out
    for x, z in zip(a, b):
        np.testing.assert_allclose(np.asarray(x, dtype=float), np.asarray(z, dtype=float),
                                   rtol=1e-10, atol=1e-9)


def test_ecs_core_order_1_keeps_no_hessian_sum():
    X, rng, eta = _sparse_data(1500, 30, 5)
    y = _targets("logistic", eta, rng)
    model = LogisticRegressionModel(X, y)
    theta = find_map(model)[0]
    cv1 = TaylorControlVariate(model, theta, 1)
    assert cv1.reference()[3] is None
    # the order-1 estimate is the same with or without an (all-zero) B
    pots = []
    for B in (None, np.zeros((model.n_params, model.n_params))):
        pot = ECSCore(model.compiled, 1, model.prior.precision)
        pot.set_reference(cv1.theta_star, cv1.L_star, cv1.A, B)
        pot.set_rows(np.arange(200), 10)
        pots.append(pot.value_and_grad(theta + 0.02))
    assert pots[0][0] == pots[1][0]
    np.testing.assert_array_equal(pots[0][1], pots[1][1])
    cv2 = TaylorControlVariate(model, theta, 2)
    pot = ECSCore(model.compiled, 2, model.prior.precision)
    with pytest.raises(ValueError, match="Hessian sum B"):
        pot.set_reference(cv2.theta_star, cv2.L_star, cv2.A, None)
    with pytest.raises(ValueError, match="direct row access"):
        from bayes_subsample.models import MultinomialLogisticModel
        mm = MultinomialLogisticModel(X, (y + (X[:, 0].toarray().ravel() > 0)).astype(int))
        ECSCore(mm.compiled, 1, mm.prior.precision, "perturbed", True)


# ---- the mode without a Hessian --------------------------------------------------------
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_diagonal_mode_finds_the_mode(family):
    X, rng, eta = _sparse_data(5000, 60, 8)
    y = _targets(family, eta, rng)
    model = FAMILIES[family](X, y)
    exact = find_map(model, method="newton")[0]
    theta, (ll, g, hd), n_evals, converged = diagonal_mode(model, tol=1e-6)
    assert converged
    P = model.neg_hessian_log_posterior(exact)
    gap = theta - exact
    assert float(gap @ P @ gap) < 1e-4        # squared Mahalanobis distance to the mode
    np.testing.assert_allclose(hd, np.diag(model.full_pass(theta, hessian=True)[2]))
    assert n_evals % model.n_data == 0 and n_evals >= 2 * model.n_data
    # the default tolerance: within 0.05 p in the diagonal decrement
    theta_d, *_ , conv_d = diagonal_mode(model)
    gap = theta_d - exact
    assert conv_d and float(gap @ P @ gap) < 0.05 * model.n_params


def test_find_map_scale_validation():
    X, rng, eta = _sparse_data(500, 5, 3)
    model = LogisticRegressionModel(X, _targets("logistic", eta, rng))
    with pytest.raises(ValueError, match="scale is for"):
        find_map(model, method="newton", scale=np.ones(model.n_params))
    with pytest.raises(ValueError, match="positive finite"):
        find_map(model, method="lbfgs", scale=-np.ones(model.n_params))


# ---- samplers -----------------------------------------------------------------------------
def _check_moments(draws, mean, sd, *, ref_mcse=None, sd_rtol=0.1, slack=0.0):
    flat = draws.reshape(-1, draws.shape[-1])
    mcse = np.atleast_1d(diag.mcse_mean(draws))
    if ref_mcse is not None:
        mcse = np.sqrt(mcse ** 2 + np.asarray(ref_mcse) ** 2)
    z = np.abs(flat.mean(axis=0) - mean)
    assert np.all(z <= slack * sd + 4 * mcse), (z / sd).max()
    rel = flat.std(axis=0, ddof=1) / sd - 1.0
    assert np.all(np.abs(rel) <= sd_rtol), np.abs(rel).max()


@pytest.mark.parametrize("sampler", [HMC(metric="diag"), NUTS(metric="diag")])
def test_diagonal_metric_samples_the_exact_gaussian_posterior(sampler):
    X, rng, eta = _sparse_data(3000, 12, 4)
    y = _targets("gaussian", eta, rng)
    model = GaussianRegressionModel(X, y, noise_scale=1.0)
    mean, cov = model.exact_posterior()
    trace = sample(model, sampler, n_samples=1000, n_warmup=500, n_chains=4, n_jobs=1,
                   random_state=0)
    tuning = trace.tuning[0]
    assert np.shape(tuning["mass_matrix"]) == (model.n_params,)
    assert diag.ess_bulk(trace.draws).min() >= 400
    _check_moments(trace.draws, mean, np.sqrt(np.diag(cov)))


@pytest.mark.parametrize("sampler", [HMC(metric="diag"), NUTS(metric="diag"),
                                     HMCECS(metric="diag")])
def test_diagonal_metric_adapts_to_the_marginal_variances(sampler):
    """Mid-warmup the diagonal mass matrix becomes the inverse of the window's
    marginal variances (as Stan's diag_e), not the Hessian's diagonal: on a
    posterior with correlated coordinates the Hessian's diagonal is the
    conditional precision, several times the marginal one. HMC-ECS adapts the
    same way while it subsamples."""
    rng = np.random.default_rng(7)
    n = 40_000 if isinstance(sampler, HMCECS) else 4000
    z = rng.normal(size=(n, 1))
    # HMC-ECS: the same correlation (the posterior's spread shrinks with n)
    X = np.hstack([z + 0.15 * rng.normal(size=(n, 1)) for _ in range(4)])
    y = X @ np.array([1.0, -0.5, 0.2, 0.0]) + rng.normal(size=n)
    model = GaussianRegressionModel(X, y, noise_scale=1.0)
    mean, cov = model.exact_posterior()
    marginal = np.diag(cov)
    conditional = 1.0 / np.diag(np.linalg.inv(cov))
    assert np.all(marginal[:4] > 5 * conditional[:4])     # strongly correlated
    trace = sample(model, sampler, n_samples=100, n_warmup=1000, n_chains=2, n_jobs=1,
                   random_state=0, check_convergence=False)
    for tuning in trace.tuning:
        if isinstance(sampler, HMCECS):
            assert not tuning.get("full_data", False) and tuning["m"] < n / 10
        # a variance from a window of 250 autocorrelated draws: within a factor 2
        # (the Hessian's diagonal would give less than a fifth)
        ratio = (1.0 / np.asarray(tuning["mass_matrix"])) / marginal
        assert np.all((0.5 < ratio) & (ratio < 2.0)), ratio


def test_hmc_ecs_diagonal_metric_subsamples_and_matches_dense_nuts():
    # tall logistic regression, sparse rows: order-1 control variates suffice
    X, rng, eta = _sparse_data(30_000, 8, 4)
    y = _targets("logistic", eta, rng)
    model = LogisticRegressionModel(X, y)
    ecs = sample(model, HMCECS(metric="diag"), n_samples=1000, n_warmup=500, n_chains=2,
                 n_jobs=1, random_state=1)
    tuning = ecs.tuning[0]
    assert not tuning.get("full_data", False)
    assert tuning["cv_order"] == 1 and tuning["m"] < model.n_data / 10
    assert np.shape(tuning["mass_matrix"]) == (model.n_params,)
    ref = sample(model, NUTS(metric="dense"), n_samples=1000, n_warmup=500, n_chains=2,
                 n_jobs=1, random_state=2)
    flat = ref.draws.reshape(-1, model.n_params)
    _check_moments(ecs.draws, flat.mean(axis=0), flat.std(axis=0, ddof=1),
                   ref_mcse=diag.mcse_mean(ref.draws), sd_rtol=0.15, slack=0.1)


def test_hmc_ecs_diagonal_same_draws_for_any_n_jobs_and_resume():
    X, rng, eta = _sparse_data(20_000, 6, 3)
    model = LogisticRegressionModel(X, _targets("logistic", eta, rng))
    kw = dict(n_warmup=200, n_chains=2, random_state=4, check_convergence=False)
    a = sample(model, HMCECS(metric="diag"), n_samples=100, n_jobs=1, **kw)
    b = sample(model, HMCECS(metric="diag"), n_samples=100, n_jobs=2, **kw)
    np.testing.assert_array_equal(a.draws, b.draws)
    c = sample(model, HMCECS(metric="diag"), n_samples=60, n_jobs=1, **kw)
    c = sample(model, resume=c, n_samples=40, check_convergence=False)
    np.testing.assert_array_equal(a.draws, c.draws)


def test_metric_auto_goes_diagonal_beyond_the_dense_limit_without_p_by_p_arrays():
    p = DENSE_METRIC_MAX + 500
    X, rng, eta = _sparse_data(4000, p, 5)
    y = _targets("logistic", eta, rng)
    model = LogisticRegressionModel(X, y)
    assert diagonal_metric("auto", model) and not diagonal_metric("dense", model)
    small = LogisticRegressionModel(X[:, :50], y)
    assert not diagonal_metric("auto", small) and diagonal_metric("diag", small)
    one_matrix = 8 * (p + 1) ** 2            # 50 MB
    for sampler in ("hmc_ecs", "nuts", MH(n_steps=2), AusterityMH(n_steps=2),
                    AusterityMH(n_steps=2, proposal="sgld"), ConfidenceMH(n_steps=2), "sgld",
                    SGLD(step_size=1e-3), SGHMC(step_size=1e-3), EWSG(step_size=1e-3)):
        clf = BayesianLogisticRegression(sampler=sampler, n_samples=30, n_warmup=30,
                                         n_chains=2, random_state=0)
        tracemalloc.start()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                if sampler == "sgld":
                    # 2,500 parameters on 4,000 rows: the SG samplers refuse the default
                    # step (the gradient noise), also without p x p arrays
                    with pytest.raises(SamplingError, match="refuses"):
                        clf.fit(X, y)
                else:
                    clf.fit(X, y)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < one_matrix / 2, (sampler, peak / one_matrix)
        if sampler == "sgld":
            continue
        tuning = clf.diagnostics_["tuning"][0]
        if "proposal_chol" in tuning:
            assert np.shape(tuning["proposal_chol"]) == (p + 1,)
        elif sampler in ("hmc_ecs", "nuts"):
            assert np.shape(tuning["mass_matrix"]) == (p + 1,)
        if sampler == "hmc_ecs":
            # order-1 control variates need ~0.7 p^2 rows: full-data HMC, and says so
            assert tuning["full_data"] and tuning["cv_order"] == 1
            assert tuning["m_needed"] > X.shape[0] / 2
        proba = clf.predict_proba(X[:10])
        assert proba.shape == (10, 2) and np.all(np.isfinite(proba))


@pytest.mark.parametrize("sampler", [MH(metric="diag"), AusterityMH(metric="diag"),
                                     ConfidenceMH(metric="diag"), SGLD(metric="diag"),
                                     SGHMC(metric="diag"), EWSG(metric="diag")],
                         ids=lambda s: type(s).__name__)
def test_diagonal_metric_mh_family_and_sg_samplers_sample_the_exact_gaussian_posterior(
        sampler):
    X, rng, eta = _sparse_data(3000, 12, 4)
    y = _targets("gaussian", eta, rng)
    model = GaussianRegressionModel(X, y, noise_scale=1.0)
    mean, cov = model.exact_posterior()
    prepared = sampler.prepare(model, np.random.default_rng(0))
    p = model.n_params
    assert np.shape(prepared.precision) == (p,) and np.shape(prepared.init_chol) == (p,)
    if not sampler.exact and not isinstance(sampler, (AusterityMH, ConfidenceMH)):
        # correlated columns under a diagonal metric: the SG chains mix too slowly (7 to 18
        # effective draws in the 250 iterations of the second half of warmup) for the
        # end-of-warmup check, which refuses them; the draws are tested here
        sampler = clone(sampler).set_params(check_spread=False)
    trace = sample(model, sampler, n_samples=1000, n_warmup=500, n_chains=4, n_jobs=1,
                   random_state=0, check_convergence=False)
    tuning = trace.tuning[0]
    if "proposal_chol" in tuning:
        assert np.shape(tuning["proposal_chol"]) == (p,)
    assert diag.ess_bulk(trace.draws).min() >= 50
    if sampler.exact or isinstance(sampler, (AusterityMH, ConfidenceMH)):
        _check_moments(trace.draws, mean, np.sqrt(np.diag(cov)))
    else:
        # SG samplers: biased at their step size (measured: sds within 7%)
        _check_moments(trace.draws, mean, np.sqrt(np.diag(cov)), sd_rtol=0.15, slack=0.1)


@pytest.mark.parametrize("fmt", ["dense32", "dense64", "csr"])
def test_neg_hessian_operator_is_the_posterior_precision(fmt, hessian_atol):
    X, rng, eta = _sparse_data(500, 7, 3)
    y = _targets("logistic", eta, rng)
    X = X if fmt == "csr" else X.toarray().astype(np.float32 if fmt == "dense32" else float)
    model = LogisticRegressionModel(X, y)
    theta = rng.normal(0, 0.2, size=model.n_params)
    P = model.neg_hessian_log_posterior(theta)
    before = model.n_full_passes
    op = model.neg_hessian_operator(theta)
    V = rng.normal(size=(model.n_params, 3))
    # P of dense float32 rows: summed in float32 blocks (the operator is in double)
    dP = hessian_atol(P, model.compiled.rows.hessian_rtol)
    PV = P @ V
    assert np.all(np.abs(op.matmat(V) - PV) <= 1e-10 * np.abs(PV) + 1e-10 + dP @ np.abs(V))
    assert model.n_full_passes == before + 1 + 3       # the curvatures, one per product


@pytest.mark.parametrize("precondition", [True, False])
def test_max_curvature_by_lanczos_matches_the_dense_eigenvalue(precondition):
    X, rng, eta = _sparse_data(2000, 30, 6)
    model = LogisticRegressionModel(X, _targets("logistic", eta, rng))
    theta = find_map(model)[0]
    P = model.neg_hessian_log_posterior(theta)
    chol = 1.0 / np.sqrt(np.diag(P))
    A = chol[:, None] * P * chol[None, :] if precondition else P
    exact = np.linalg.eigvalsh(A)[-1]
    lam = max_curvature(model, theta, chol, precondition, np.diag(P))
    assert abs(lam / exact - 1.0) < 1e-3
    if precondition:
        assert lam > 1.0                # correlated features: above the dense metric's 1
    assert max_curvature(model, None, None, precondition, P) == pytest.approx(
        1.0 if precondition else exact)


def test_gradient_estimator_diagonal_whitening_equals_the_dense_diagonal_factor():
    X, rng, eta = _sparse_data(1000, 9, 4)
    model = LogisticRegressionModel(X, _targets("logistic", eta, rng))
    p = model.n_params
    cv = TaylorControlVariate(model, rng.normal(0, 0.1, size=p), order=1).build_cache()
    shift, d = rng.normal(size=p), rng.uniform(0.5, 2.0, size=p)
    a = GradientEstimator(model.compiled, model.prior.precision, cv).whiten(shift, d)
    b = GradientEstimator(model.compiled, model.prior.precision, cv).whiten(shift, np.diag(d))
    z, idx = rng.normal(size=p), rng.integers(0, model.n_data, size=40)
    np.testing.assert_allclose(a(z, idx), b(z, idx), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="shapes"):
        a.whiten(shift, d[:-1])


def test_leverages_and_row_geometry_in_a_diagonal_metric():
    from bayes_subsample.models import RowGeometry
    X, rng, eta = _sparse_data(700, 9, 4)
    for design in (X, X.toarray().astype(np.float32)):
        model = LogisticRegressionModel(design, _targets("logistic", eta, rng))
        d = rng.uniform(0.5, 3.0, size=model.n_params)
        np.testing.assert_allclose(model.whitened_row_norms(d),
                                   model.whitened_row_norms(np.diag(d)), rtol=1e-12)
    u = rng.normal(size=model.n_params)
    assert RowGeometry(d, 1.0).norm(u) == pytest.approx(RowGeometry(np.diag(d), 1.0).norm(u))


def test_diagonal_random_walk_adapts_to_the_marginal_variances():
    rng = np.random.default_rng(3)
    var = np.array([0.01, 1.0, 25.0])
    prop = RandomWalkProposal(np.ones(3))
    for i in range(3000):
        prop.adapt(rng.normal(size=3) * np.sqrt(var), accepted=i % 4 == 0, iteration=i)
    # 3,000 iid draws: each variance within 10% (its standard error is 2.6%) of
    # the variance shrunk towards the initial one by 10 pseudo-draws
    w = 3000 / (3000 + 10.0)
    target = w * var + (1 - w) * 1.0
    assert np.all(np.abs(prop.chol ** 2 / target - 1.0) < 0.1), prop.chol ** 2 / target
    theta, log_q, _ = prop.propose(rng, np.zeros(3))
    assert theta.shape == (3,) and log_q == 0.0


def test_diagonal_metric_refusals():
    X, rng, eta = _sparse_data(3000, 6, 3)
    model = LogisticRegressionModel(X, _targets("logistic", eta, rng))
    for sampler, match in [(HMCECS(metric="diag", variant="signed"), "signed"),
                           (HMCECS(metric="diag", cv_order=2), "cv_order=2"),
                           (HMCECS(metric="diag", stratify=True), "stratify=True")]:
        with pytest.raises(ValueError, match=match):
            sample(model, sampler, n_samples=10, n_warmup=10, n_chains=1)
    from bayes_subsample.models import FunctionModel
    user = FunctionModel(lambda th, idx: -0.5 * np.sum(th ** 2) * np.ones(len(idx)),
                         lambda th, idx: -np.tile(th, (len(idx), 1)), n_data=100, n_params=3)
    with pytest.raises(ValueError, match="metric='diag' needs"):
        sample(user, NUTS(metric="diag"), n_samples=10, n_warmup=10, n_chains=1)
    with pytest.raises(ValueError, match="metric"):
        sample(model, HMC(metric="sparse"), n_samples=10, n_warmup=10, n_chains=1)
    with pytest.raises(ValueError, match="proxy='taylor'"):
        sample(model, ConfidenceMH(metric="diag", proxy="taylor"), n_samples=10, n_warmup=10,
               n_chains=1)
    for cls in (MH, AusterityMH, ConfidenceMH, SGLD, SGHMC, EWSG):
        with pytest.raises(ValueError, match="metric='diag' needs"):
            sample(user, cls(metric="diag"), n_samples=10, n_warmup=10, n_chains=1)
        with pytest.raises(ValueError, match="metric"):
            sample(model, cls(metric="sparse"), n_samples=10, n_warmup=10, n_chains=1)
    # the estimators pass the metric through
    est = BayesianLinearRegression(sampler=NUTS(metric="diag"), n_samples=50, n_warmup=50,
                                   n_chains=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, _targets("gaussian", eta, rng))
    # coefficients, intercept and the noise's log scale
    assert np.shape(est.diagnostics_["tuning"][0]["mass_matrix"]) == (X.shape[1] + 2,)


@pytest.mark.parametrize("cls", [SGLD, SGHMC, EWSG])
def test_sg_default_step_counts_the_gradient_noise_and_agrees_with_suggest_step_size(cls):
    """Order-1 control variates on a wide model: the minibatch noise, not the
    curvature, sets the default step (q = lam / v < 1, with a warning naming
    the batch size that restores it); suggest_step_size gives the same step;
    a larger batch gives a proportionally larger one (v ~ 1 / b). A batch so
    small that the step would be more than 20 times the Gaussian one's is
    refused before any draw, with the batch size that restores it."""
    from sklearn.exceptions import EfficiencyWarning

    from bayes_subsample.exceptions import SamplingError
    from bayes_subsample.samplers import suggest_step_size
    from bayes_subsample.samplers.sgmcmc import curvature_and_noise, step_from_curvature
    X, rng, _ = _sparse_data(6000, 400, 8)
    X.data = rng.normal(size=X.nnz)         # centred entries: lam near 1, q about 0.03 at b = 32
    model = LogisticRegressionModel(X, _targets("logistic", X @ rng.normal(0, 0.3, 400), rng))
    with pytest.raises(SamplingError, match="refuses.*batch_size of about"):
        cls(metric="diag", batch_size=16).prepare(model, np.random.default_rng(0))
    sampler = cls(metric="diag", batch_size=64)
    with pytest.warns(EfficiencyWarning, match="batch_size of about"):
        prepared = sampler.prepare(model, np.random.default_rng(0))
    assert prepared.cv.order == 1
    lam, q, _ = curvature_and_noise(model, prepared.theta_init, prepared.init_chol,
                                    prepared.precision, True, True, prepared.cv, 64)
    assert q < 0.1
    assert prepared.step_size == pytest.approx(
        step_from_curvature(sampler.name, lam, q, friction=getattr(sampler, "friction", None)))
    assert suggest_step_size(model, sampler) == pytest.approx(prepared.step_size)
    # v ~ 1 / b: eight times the batch, eight times q (while q < 1)
    _, q8, _ = curvature_and_noise(model, prepared.theta_init, prepared.init_chol,
                                   prepared.precision, True, True, prepared.cv, 512)
    assert q8 == pytest.approx(8 * q, rel=1e-9)
