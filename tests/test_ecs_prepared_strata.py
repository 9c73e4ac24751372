"""HMC-ECS's exact stratum chosen at preparation: the one-read residual scan
(``term_scan``) against the per-point residuals, the stratum chooser against a
full-sort reference, the pilot's prediction of the stratum's gain, and the
sampler on data with rare 0/1 indicators (some separating) against full-data
NUTS, with tolerances from the Monte Carlo standard errors."""
import math
import warnings

import numpy as np
import pytest

from bayes_subsample import diagnostics, sample
from bayes_subsample.control_variates import TaylorControlVariate
from bayes_subsample.models import (FunctionModel, LogisticRegressionModel,
                                    MultinomialLogisticModel, PoissonRegressionModel)
from bayes_subsample.models._scan import term_scan
from bayes_subsample.samplers import HMCECS
from bayes_subsample.samplers._ecs_tuning import (STRATA_GAIN, _ascent, choose_strata,
                                                   pilot_strata_gain, residual_scan)


def _design(n, d, rng, dtype):
    return rng.normal(size=(n, d)).astype(dtype)


def _models(dtype):
    rng = np.random.default_rng(3)
    n = 1300                                  # not a multiple of the chunk
    X = _design(n, 4, rng, dtype)
    eta = X.astype(np.float64) @ np.array([0.5, -0.3, 0.2, 0.1])
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(np.float64)
    yield LogisticRegressionModel(X, y)
    yield PoissonRegressionModel(X, rng.poisson(np.exp(0.3 * eta)).astype(np.float64))
    yield MultinomialLogisticModel(X, rng.integers(0, 3, n).astype(np.float64), n_classes=3)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("order", [-1, 0, 1, 2])
def test_term_scan_is_every_rows_terms_at_every_point(dtype, order):
    rng = np.random.default_rng(4)
    for model in _models(dtype):
        cy = model.compiled
        p = model.n_params
        ts = 0.1 * rng.normal(size=p)
        thetas = ts + 0.3 * rng.normal(size=(5, p))
        idx = np.arange(model.n_data)
        for eta_star in (None, cy.cv_cache(ts)):
            if order < 0 and eta_star is not None:
                continue
            before = model.n_full_passes
            out1 = term_scan(cy, order, None if order < 0 else ts, thetas, eta_star)
            assert model.n_full_passes - before == 5
            out2 = term_scan(cy, order, None if order < 0 else ts, thetas, eta_star,
                             n_threads=2)
            np.testing.assert_array_equal(out1, out2)      # threads change nothing
            for j in range(5):
                want = (cy.loglik_terms(thetas[j], idx) if order < 0 else
                        cy.cv_residual_terms(order, ts, thetas[j], idx, eta_star))
                np.testing.assert_array_equal(out1[j], want)


def test_term_scan_runs_user_models_and_reraises_their_errors():
    x = np.random.default_rng(0).normal(size=700)

    def loglik(theta, idx):
        if theta[0] > 50:
            raise ArithmeticError("boom")
        return -0.5 * (x[idx] - theta[0]) ** 2

    def grad(theta, idx):
        return (x[idx] - theta[0])[:, None]

    model = FunctionModel(loglik, grad, n_data=700, n_params=1)
    cv = TaylorControlVariate(model, np.zeros(1), order=1)
    thetas = np.array([[0.3], [-0.2]])
    R = residual_scan(cv, thetas)
    for j in range(2):
        np.testing.assert_allclose(R[j], cv.residual_terms(thetas[j], np.arange(700)),
                                   rtol=1e-13, atol=1e-13)
    with pytest.raises(ArithmeticError, match="boom"):
        term_scan(model.compiled, 1, np.zeros(1), np.array([[60.0]]))


def test_term_scan_validates():
    model = next(_models(np.float64))
    cy, p = model.compiled, model.n_params
    with pytest.raises(ValueError, match=r"shape \(J, 5\)"):
        term_scan(cy, 2, np.zeros(p), np.zeros((2, p + 1)))
    with pytest.raises(ValueError, match="NaN"):
        term_scan(cy, 2, np.zeros(p), np.full((1, p), np.nan))
    with pytest.raises(ValueError, match="theta_star"):
        term_scan(cy, 2, np.zeros(p + 1), np.zeros((1, p)))
    with pytest.raises(ValueError, match="eta_star"):
        term_scan(cy, 2, np.zeros(p), np.zeros((1, p)), eta_star=np.zeros(3))
    assert term_scan(cy, 2, np.zeros(p), np.zeros((0, p))).shape == (0, model.n_data)


# ---- the stratum chooser ---------------------------------------------------------------------
def _choose_strata_reference(R, exact, n_blocks, target_variance=1.0, max_fraction=0.5):
    """Every candidate sorted by score, the rest's statistics as suffix sums."""
    J, n = R.shape
    cand = np.flatnonzero(~exact)
    Rc = R[:, cand] - R[:, cand].mean(axis=1, keepdims=True)
    order = np.argsort(-np.mean(Rc * Rc, axis=0), kind="stable")
    Rs = Rc[:, order]
    c = cand.shape[0]
    kmax = int(min(c - 1, max(0, max_fraction * n - exact.sum())))
    s1 = np.cumsum(Rs[:, ::-1], axis=1)[:, ::-1]
    s2 = np.cumsum((Rs * Rs)[:, ::-1], axis=1)[:, ::-1]
    k = np.arange(kmax + 1)
    left = (c - k).astype(np.float64)
    var = np.maximum(s2[:, k] / left - (s1[:, k] / left) ** 2, 0.0).mean(axis=0)
    m = np.maximum(np.ceil(left * left * var / target_variance / n_blocks), 1.0) * n_blocks
    cost = exact.sum() + k + m
    best = int(np.argmin(cost))
    new = exact.copy()
    new[cand[order[:best]]] = True
    return new, int(m[best]), int(cost[best])


@pytest.mark.parametrize("n_heavy", [0, 40, 3000])
def test_choose_strata_matches_a_full_sort(n_heavy):
    rng = np.random.default_rng(n_heavy)
    n, J = 20000, 4
    R = 1e-3 * rng.normal(size=(J, n))
    heavy = rng.choice(n, n_heavy, replace=False)
    R[:, heavy] += rng.standard_t(3, size=(J, n_heavy)) * rng.uniform(0.01, 3, n_heavy)
    for exact in (np.zeros(n, dtype=bool), rng.random(n) < 0.01):
        got = choose_strata(R, exact, n_blocks=50)
        want = _choose_strata_reference(R, exact, 50)
        assert got[1:] == want[1:]
        np.testing.assert_array_equal(got[0], want[0])


def test_the_pilot_predicts_a_gain_only_where_few_rows_carry_the_variance():
    rng = np.random.default_rng(1)
    R = 3e-5 * rng.normal(size=(50, 2000))     # m = n^2 var ~ 900
    c0, best = pilot_strata_gain(R, 10**6, n_blocks=100)
    assert best == c0 and 500 < c0 < 2000      # alike residuals: no stratum
    R[:, :20] += 3.0 * rng.normal(size=(50, 20))
    c0, best = pilot_strata_gain(R, 10**6, n_blocks=100)
    assert best < 0.01 * c0 and best < STRATA_GAIN * c0


def test_backtracking_tries_short_steps_without_the_hessian():
    model = next(_models(np.float64))
    theta = np.zeros(model.n_params)
    lp = model.full_pass(theta, gradient=False)[0] + model.prior.log_prob(theta)
    step = np.full(model.n_params, 40.0)       # far too long: rejected, then halved
    calls = []
    orig = type(model).full_pass

    def spy(self, th, **kw):
        calls.append(kw.get("hessian", False))
        return orig(self, th, **kw)

    type(model).full_pass = spy
    try:
        accepted, n_evals = _ascent(model, theta, step, lp)
    finally:
        type(model).full_pass = orig
    cand, (ll, g, h), lp_c = accepted
    assert lp_c >= lp and n_evals == len(calls) * model.n_data
    assert calls[0] and calls[-1] and not any(calls[1:-1]) and len(calls) > 3
    ll2, g2, h2 = model.full_pass(cand, gradient=True, hessian=True)
    assert ll == ll2 and np.array_equal(g, g2) and np.array_equal(h, h2)


# ---- the sampler -----------------------------------------------------------------------------
def _rare_indicator_data(n=40000, seed=0):
    """Four standard-normal columns and three 0/1 indicators set on 60, 150 and
    400 rows; the first indicator's rows are all negative (it separates: only the
    prior bounds its coefficient)."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, 7))
    X[:, :4] = rng.normal(size=(n, 4))
    rows = rng.permutation(n)
    for j, (a, b) in enumerate(((0, 60), (60, 210), (210, 610))):
        X[rows[a:b], 4 + j] = 1.0
    eta = X[:, :4] @ np.array([0.8, -0.5, 0.3, 0.2]) + X[:, 5] * 1.5 - X[:, 6] - 0.2
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(np.float64)
    y[rows[:60]] = 0.0
    return X, y, rows[:60]


def test_prepare_sums_rare_indicator_rows_exactly_and_leaves_easy_data_alone():
    X, y, separated = _rare_indicator_data()
    model = LogisticRegressionModel(X, y)
    prep = HMCECS().prepare(model, np.random.default_rng(0))
    assert prep.exact_mask is not None and not prep.full_data
    # the rows of the separating indicator whose residuals move (measured over
    # seeds 0-2: 62-93% of them, nothing else)
    exact = np.flatnonzero(prep.exact_mask)
    assert np.isin(exact, separated).all() and len(exact) > 0.5 * len(separated)
    assert prep.exact_mask.sum() + prep.m < model.n_data / 100
    # light-tailed residuals: no scan, the same preparation as without strata
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(40000, 4))
    easy = LogisticRegressionModel(Z, (rng.random(40000) < 1 / (1 + np.exp(-Z[:, 0]))) * 1.0)
    a = HMCECS().prepare(easy, np.random.default_rng(2))
    b = HMCECS(stratify=False).prepare(easy, np.random.default_rng(2))
    assert a.exact_mask is None and a.m == b.m and a.n_evals == b.n_evals
    assert not a.stratify and a.choice["engine"] == "subsampled"


def test_auto_runs_a_stratified_warmup_where_the_mode_has_an_exact_stratum():
    """A few rows carrying the residuals at the mode (rare indicators) bias a
    chain whose theta* stays at the mode: ``stratify="auto"`` runs the stratified
    warmup there, even though the mode's layout reads under 1% of the rows, and
    says why; ``stratify=False`` runs neither strata nor stages."""
    X, y, _ = _rare_indicator_data()
    model = LogisticRegressionModel(X, y)
    auto = HMCECS().prepare(model, np.random.default_rng(0))
    assert auto.stratify and not auto.full_data and auto.pilot is not None
    n_exact = int(auto.exact_mask.sum())
    assert 0 < n_exact and n_exact + auto.m < model.n_data / 100
    c = auto.choice
    assert c["engine"] == "stratified warmup" and c["n_exact"] == n_exact
    assert c["rows_per_evaluation"] == n_exact + auto.m
    assert f"{n_exact:,} of them summed exactly: a few rows carry the residuals" in c["reason"]
    # what build runs where the warmup is too short for the stages: the mode's layout
    f = auto.fallback_choice
    assert f["engine"] == "subsampled" and (f["n_exact"], f["m"]) == (n_exact, auto.m)
    assert f"{n_exact:,} summed exactly" in f["reason"]
    off = HMCECS(stratify=False).prepare(model, np.random.default_rng(0))
    assert not off.stratify and off.exact_mask is None and off.fallback_choice is None
    assert off.choice["engine"] == "subsampled"


def test_heavy_rows_adds_the_rows_of_large_scaled_leverage():
    """``heavy_rows`` against NumPy: the rows whose linear predictor's Laplace
    sd reaches ``ETA_SD``, and with the mode and the subsample weight ``n / G``
    the rows with ``(n / G) w_k x_k^T Sigma x_k >= LEVERAGE`` too (here an
    indicator on 30 rows of both classes: not far-moving, but one of its rows
    drawn into a subsample of 100 outweighs the posterior's curvature along
    it); two passes counted."""
    from bayes_subsample._optimize import find_map
    from bayes_subsample.samplers._ecs_tuning import ETA_SD, LEVERAGE, heavy_rows
    rng = np.random.default_rng(5)
    n = 40000
    X = np.zeros((n, 4))
    X[:, :3] = rng.normal(size=(n, 3))
    rare = rng.choice(n, 30, replace=False)
    X[rare, 3] = 1.0
    eta = X[:, :3] @ np.array([0.8, -0.5, 0.3]) + 0.3
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(np.float64)
    model = LogisticRegressionModel(X, y)
    mode = find_map(model)[0]
    _, _, H = model.full_pass(mode, hessian=True)
    cov = np.linalg.inv(-H + np.diag(model.prior.precision))
    Xa = np.hstack([X, np.ones((n, 1))])
    sd = np.sqrt(np.einsum("ij,jk,ik->i", Xa, cov, Xa))
    s = 1 / (1 + np.exp(-(Xa @ mode)))
    lev = n / 100 * s * (1 - s) * sd ** 2
    far = sd >= ETA_SD
    expected = far | (lev >= LEVERAGE)
    assert not far.any() and expected[rare].sum() >= 20 and expected.sum() < 100
    before = model.n_full_passes
    mask, passes = heavy_rows(model, cov, mode, n / 100)
    assert passes == 2 and model.n_full_passes == before + 2
    np.testing.assert_array_equal(mask, expected)
    # without the mode: the far-moving rows only (none here), one pass
    assert heavy_rows(model, cov) == (None, 1)


@pytest.mark.slow
def test_rare_indicator_posterior_matches_nuts():
    """The default HMC-ECS on rare 0/1 indicators (one separating) against
    full-data NUTS: means within 0.1 sd + 4 combined MCSE, sds within 10%, min
    bulk ESS above 400 (measured: at most 0.05 sd, sds within 4%, ESS > 1000)."""
    X, y, _ = _rare_indicator_data()
    model = LogisticRegressionModel(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ecs = sample(model, HMCECS(), random_state=3)
        ref = sample(model, "nuts", n_samples=2000, random_state=4)
    assert ecs.tuning[0]["n_exact"] > 0
    d, r = ecs.draws, ref.draws
    sd = r.reshape(-1, r.shape[-1]).std(0, ddof=1)
    mcse = np.hypot(diagnostics.mcse_mean(d), diagnostics.mcse_mean(r))
    err = np.abs(d.reshape(-1, d.shape[-1]).mean(0) - r.reshape(-1, r.shape[-1]).mean(0))
    assert np.all(err <= 0.1 * sd + 4 * mcse)
    ratio = d.reshape(-1, d.shape[-1]).std(0, ddof=1) / sd
    assert np.all(np.abs(ratio - 1) < 0.1)
    assert np.min(diagnostics.ess_bulk(d)) > 400
    assert math.isfinite(float(np.max(diagnostics.rhat(d))))


def test_the_choice_and_its_reason_are_reported():
    from bayes_subsample import BayesianLogisticRegression
    X, y, _ = _rare_indicator_data()
    kw = dict(n_samples=50, n_warmup=100, n_chains=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tall = BayesianLogisticRegression(**kw).fit(X, y)
        small = BayesianLogisticRegression(**kw).fit(X[:150], y[:150])
        nuts = BayesianLogisticRegression(sampler="nuts", **kw).fit(X[:150], y[:150])
    c = tall.diagnostics_["choice"]
    # a stratified warmup was chosen (an exact stratum at the mode), but 100
    # warmup iterations are too few for its stages: the mode's layout ran, and
    # the choice reports that
    assert c["engine"] == "subsampled" and c["n_exact"] == 60
    assert c["rows_per_evaluation"] == c["n_exact"] + c["m"] < X.shape[0] / 100
    assert "60 summed exactly" in c["reason"] and c["reason"] in str(tall.trace_.summary())
    assert c["reason"].endswith("(a stratified warmup was chosen, but needs n_warmup >= 200, "
                                "got 100)")
    assert all(t["choice"] == c for t in tall.diagnostics_["tuning"])
    s = small.diagnostics_["choice"]
    assert s["engine"] == "full data" and small.diagnostics_["tuning"][0]["full_data"]
    assert "more than half of the 150 rows" in s["reason"]
    assert s["reason"] in str(small.trace_.summary())
    assert nuts.diagnostics_["choice"] is None and nuts.trace_.summary().notes == []


def test_rescaled_precision_takes_the_draws_variances_where_they_differ():
    from bayes_subsample._linalg import factor_precision
    from bayes_subsample.samplers._adapt import MIN_VARIANCE_DRAWS, rescaled_precision
    rng = np.random.default_rng(2)
    A = rng.normal(size=(4, 4))
    f = factor_precision(A @ A.T + 4 * np.eye(4))
    var = np.diag(f.cov).copy()
    assert rescaled_precision(f, var, 400) is None                 # nothing differs
    assert rescaled_precision(f, 1.05 * var, 400) is None          # within 3 SE
    assert rescaled_precision(f, 4 * var, MIN_VARIANCE_DRAWS - 1) is None
    var[2] *= 4.0
    var[0] /= 3.0
    P = rescaled_precision(f, var, 400)
    cov = np.linalg.inv(P)
    np.testing.assert_allclose(np.diag(cov), var, rtol=1e-10)
    corr = lambda c: c / np.sqrt(np.outer(np.diag(c), np.diag(c)))   # noqa: E731
    np.testing.assert_allclose(corr(cov), corr(f.cov), rtol=1e-10, atol=1e-12)
