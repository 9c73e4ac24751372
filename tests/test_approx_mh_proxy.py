"""Tests of the proxy (control-variate) decisions of the approximate MH samplers
(doc/algorithms/austerity.rst, doc/algorithms/confidence.rst; the confidence
sampler's strata of rows are tested in test_strata.py).

* the data's geometry: whitened row norms against NumPy (float32/float64, dense/CSR,
  with/without intercept); the range bounds in that geometry against every datum;
* the compiled pieces: the exactly summed stratum against NumPy; a decision is the
  same for any number of threads;
* exactness: a proxied, stratified decision that examines every datum is MH's;
* statistical: wrong-decision rates against the exact decision (same u, binomial
  bounds) for the proxied t-test and the proxied, stratified confidence rule; the
  examined fraction falls as n grows.
"""
import numpy as np
import pytest
from scipy import sparse, stats

from bayes_subsample._driver import sample
from bayes_subsample.control_variates import TaylorControlVariate
from bayes_subsample.models import (GaussianRegressionModel, LogisticRegressionModel,
                                    PoissonRegressionModel, RowGeometry, RowStrata)
from bayes_subsample.samplers import MH
from bayes_subsample.samplers import _approx_mh_fast as fast
from bayes_subsample.samplers._base import prepare_laplace
from bayes_subsample.samplers.austerity import AusterityMH
from bayes_subsample.samplers.confidence import ConfidenceMH


def _heavy_data(n, d, seed=0, dtype=np.float64):
    """Logistic data with Student-t(3) rows: a few rows of very high leverage."""
    rng = np.random.default_rng(seed)
    X = (rng.standard_t(3, size=(n, d)) * 0.7).astype(dtype)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ np.linspace(1.0, -0.5, d) + 0.2))))
    return X, y.astype(np.float64)


def _binomial_upper(n_trials, p, level=1e-4):
    """Largest count compatible with a rate p (one-sided level)."""
    return stats.binom.ppf(1.0 - level, n_trials, p)


# ---------------------------------------------------------------------------
# the data's geometry
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_whitened_row_norms_match_numpy(dtype, fmt, fit_intercept):
    X, y = _heavy_data(3000, 4, seed=1, dtype=dtype)
    X[np.abs(X) < 0.3] = 0.0                     # some structure for the sparse case
    Xin = sparse.csr_matrix(X) if fmt == "csr" else X
    model = LogisticRegressionModel(Xin, y, fit_intercept=fit_intercept)
    p = model.n_params
    A = np.random.default_rng(2).normal(size=(p, p))
    L = np.linalg.cholesky(A @ A.T + p * np.eye(p))
    Xt = X.astype(np.float64)
    if fit_intercept:
        Xt = np.column_stack([Xt, np.ones(len(X))])
    ref = np.linalg.norm(np.linalg.solve(L, Xt.T), axis=0)
    np.testing.assert_allclose(model.whitened_row_norms(L), ref, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="chol must have shape"):
        model.whitened_row_norms(L[:-1, :-1])


def test_row_geometry_rejects_bad_input():
    with pytest.raises(ValueError, match="square"):
        RowGeometry(np.ones((2, 3)), 1.0)
    for r in (-1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="radius"):
            RowGeometry(np.eye(2), r)


@pytest.mark.parametrize("seed", [0, 1])
def test_range_bounds_in_the_geometry_hold_on_every_datum(seed):
    """max_k |l_k(theta') - l_k(theta)| and max_k |d_k(theta') - d_k(theta)| over the
    rows a RowGeometry describes (every datum, and those of lower leverage) stay below
    the bounds, for steps and distances from theta* at several scales; and the
    geometry's bound is the tighter one on tall data."""
    rng = np.random.default_rng(seed)
    X, y = _heavy_data(20000, 3, seed=10 + seed)
    model = LogisticRegressionModel(X, y)
    prep = prepare_laplace(model)
    L = np.linalg.cholesky(prep.precision)
    r = model.whitened_row_norms(L)
    low = np.flatnonzero(r <= np.quantile(r, 0.99))
    cases = [(np.arange(model.n_data), RowGeometry(L, r.max() * (1 + 1e-9))),
             (low, RowGeometry(L, r[low].max() * (1 + 1e-9)))]
    tighter = 0
    for _ in range(40):
        th_star = prep.theta_init + rng.normal(scale=rng.choice([0.0, 0.01, 0.1]), size=4)
        z = rng.normal(size=4) * rng.choice([0.3, 1.0, 5.0, 50.0])
        th = th_star + np.linalg.solve(L.T, z)
        th_new = th + np.linalg.solve(L.T, rng.normal(size=4) * rng.choice([0.01, 0.5, 3.0]))
        for idx, geom in cases:
            diff = np.abs(model.loglik_terms(th_new, idx) - model.loglik_terms(th, idx)).max()
            C = model.range_bound(th, th_new, geometry=geom)
            assert diff <= C * (1 + 1e-9)
            assert C <= model.range_bound(th, th_new)
            rdiff = np.abs(model.cv_residual_terms(th_new, th_star, idx, 2)
                           - model.cv_residual_terms(th, th_star, idx, 2)).max()
            Cr = model.cv_range_bound(th, th_new, th_star, 2, geometry=geom)
            assert rdiff <= Cr * (1 + 1e-9) + 1e-12
            if geom is cases[1][1]:
                tighter += Cr < 0.1 * model.cv_range_bound(th, th_new, th_star, 2)
    assert tighter > 30   # over the lower-leverage rows it is far below the Euclidean bound


def test_strata_only_where_the_bound_uses_the_geometry(rng):
    X = rng.normal(size=(500, 2))
    pois = PoissonRegressionModel(X, rng.poisson(1.0, size=500).astype(float))
    gauss = GaussianRegressionModel(X, X @ [1.0, -1.0] + rng.normal(size=500))
    logi = LogisticRegressionModel(*_heavy_data(20000, 3, seed=4))
    assert pois.range_bound_degree() is None and gauss.range_bound_degree(2) is None
    assert logi.range_bound_degree() == 1 and logi.range_bound_degree(2) == 3
    for model in (pois, gauss):
        assert getattr(ConfidenceMH().prepare(model, rng), "strata", None) is None
    prep = ConfidenceMH().prepare(logi, rng)
    assert isinstance(prep.strata, RowStrata) and prep.strata.n_strata > 1
    assert ConfidenceMH(stratify=False).prepare(logi, rng).strata is None


# ---------------------------------------------------------------------------
# compiled pieces
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cv_order", [-1, 2])
def test_term_sum_at_matches_numpy(dtype, cv_order):
    X, y = _heavy_data(2000, 3, seed=5, dtype=dtype)
    model = LogisticRegressionModel(X, y)
    rng = np.random.default_rng(0)
    th_star, th, th_new = (rng.normal(scale=0.3, size=4) for _ in range(3))
    idx = rng.choice(model.n_data, 700, replace=False).astype(np.int64)
    if cv_order < 0:
        kw = {}
        ref = np.sum(model.loglik_terms(th_new, idx) - model.loglik_terms(th, idx))
    else:
        cv = TaylorControlVariate(model, th_star, 2).build_cache()
        kw = {"cv_order": 2, "theta_star": cv.theta_star, "eta_star": cv.cache}
        ref = np.sum(model.cv_residual_terms(th_new, th_star, idx, 2)
                     - model.cv_residual_terms(th, th_star, idx, 2))
    got = fast.term_sum_at(model.compiled, th, th_new, idx, **kw)
    assert got == pytest.approx(ref, rel=1e-10, abs=1e-10)
    assert fast.term_sum_at(model.compiled, th, th_new, idx[:0], **kw) == 0.0
    with pytest.raises(ValueError, match="indices must lie"):
        fast.term_sum_at(model.compiled, th, th_new, np.array([0, model.n_data]), **kw)


@pytest.mark.parametrize("rule", ["austerity", "confidence"])
@pytest.mark.parametrize("kind", ["logistic", "multinomial"])
def test_decisions_do_not_depend_on_threads(rule, kind):
    """Large batches are evaluated in parallel; the decision, the data examined, the
    running mean and the permutation left behind are bit-identical."""
    X, y = _heavy_data(60000, 3, seed=6)
    if kind == "logistic":
        model = LogisticRegressionModel(X, y)
    else:
        from bayes_subsample.models import MultinomialLogisticModel
        labels = (y + (X[:, 0] > 0.5)).astype(np.int64)          # 3 classes
        model = MultinomialLogisticModel(X, labels)
    p = model.n_params
    thetas = [np.random.default_rng(100 + i).normal(scale=0.05, size=(2, p)) for i in range(15)]
    results = {}
    for n_threads in (1, 2):
        g = np.random.default_rng(7)
        perm = np.arange(model.n_data, dtype=np.int64)
        rec = []
        for th, th_new in thetas:
            if rule == "austerity":
                r = fast.austerity_decide(g, model.compiled, th, th_new, perm, 0.0, 1e-6,
                                          10000, 10000, n_threads=n_threads)
            else:
                r = fast.confidence_decide(g, model.compiled, th, th_new, perm, 0.0,
                                           model.range_bound(th, th_new), 0.01, 0, 2.0, 2.0,
                                           100, n_threads=n_threads)
            rec.append(r)
        results[n_threads] = (rec, perm.copy(), g.random())
    assert results[1][0] == results[2][0]
    assert np.array_equal(results[1][1], results[2][1])
    assert results[1][2] == results[2][2]
    # large batches were drawn (the parallel path ran)
    assert max(r[1] for r in results[1][0]) >= 2 * 8192


# ---------------------------------------------------------------------------
# exactness
# ---------------------------------------------------------------------------
def test_stratified_proxy_decisions_are_exact_decisions():
    """With a tiny delta a decision is wrong with probability ~1e-300, so every one
    must equal the full-data decision with the same u (check_exact), most of them
    after summing every stratum: the exact strata, the proxies' total and the
    sampled sums add up to the log-likelihood ratio."""
    X, y = _heavy_data(4000, 3, seed=7)
    model = LogisticRegressionModel(X, y)
    prepared = ConfidenceMH(delta=0.05).prepare(model, np.random.default_rng(0))
    assert prepared.cv is not None and prepared.strata.n_strata > 1
    kernel = ConfidenceMH(delta=1e-300, bound="hoeffding_serfling", check_exact=True,
                          n_steps=1).build(model, prepared, 0)
    rng = np.random.default_rng(3)
    state = kernel.init(rng, prepared.theta_init.copy())
    infos = []
    for _ in range(300):
        state, info = kernel.step(rng, state)
        infos.append(info)
    assert not any(i.wrong_decision for i in infos)
    # an exact decision read every datum, and the draws made before it
    assert np.mean([i.data_fraction >= 1.0 for i in infos]) > 0.5
    assert 0.1 < np.mean([i.accepted for i in infos]) < 0.9


def test_proxy_epsilon_zero_is_still_mh():
    X, y = _heavy_data(3000, 3, seed=8)
    model = LogisticRegressionModel(X, y)
    run = {"n_samples": 100, "n_warmup": 100, "n_chains": 2, "random_state": 4,
           "check_convergence": False}
    ref = sample(model, MH(), **run)
    for s in (AusterityMH(epsilon=0.0, proxy="taylor"), ConfidenceMH(delta=0.0)):
        tr = sample(model, s, **run)
        np.testing.assert_allclose(tr.draws, ref.draws, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------
# statistical
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1])
def test_proxied_ttest_errs_rarely_and_reads_little(seed):
    """On 50,000 heavy-tailed rows the proxied t-test at epsilon = 0.05 decides from
    its first batch of 500 nearly always (the residual differences are tiny next to
    the decision's margin): measured wrong-decision rates 0-0.3% (held to epsilon,
    binomial bound) at a data fraction of ~1%; the plain test errs at 1-3 epsilon."""
    X, y = _heavy_data(50000, 4, seed=20 + seed)
    model = LogisticRegressionModel(X, y)
    tr = sample(model, AusterityMH(epsilon=0.05, check_exact=True, n_steps=1),
                n_samples=1500, n_warmup=300, n_chains=1, random_state=seed,
                check_convergence=False)
    wrong = tr.stats["wrong_decision"]
    assert wrong.sum() <= _binomial_upper(wrong.size, 0.05)
    assert tr.stats["data_fraction"].mean() < 0.05
    assert 0.1 < tr.stats["accepted"].mean() < 0.6


@pytest.mark.parametrize("seed", [0, 1])
def test_proxied_stratified_confidence_errs_below_delta(seed):
    X, y = _heavy_data(50000, 3, seed=30 + seed)
    model = LogisticRegressionModel(X, y)
    delta = 0.05
    tr = sample(model, ConfidenceMH(delta=delta, check_exact=True, n_steps=1),
                n_samples=1500, n_warmup=300, n_chains=1, random_state=seed,
                check_convergence=False)
    wrong = tr.stats["wrong_decision"]
    assert wrong.sum() <= _binomial_upper(wrong.size, delta)
    # it subsampled (the plain rule reads everything here: see the next test)
    assert tr.stats["data_fraction"].mean() < 0.5


def test_examined_fraction_falls_as_n_grows():
    """The property the proxies are for: at the posterior's scale the residual
    differences shrink faster than the decision's margin, so the fraction examined
    falls with n (the plain confidence rule reads nearly everything at any n)."""
    fractions = {}
    for n in (10000, 80000):
        X, y = _heavy_data(n, 3, seed=40)
        model = LogisticRegressionModel(X, y)
        for name, s in {"austerity": AusterityMH(n_steps=1),
                        "confidence": ConfidenceMH(n_steps=1),
                        "plain": ConfidenceMH(n_steps=1, proxy=None, stratify=False)}.items():
            tr = sample(model, s, n_samples=300, n_warmup=200, n_chains=1, random_state=0,
                        check_convergence=False)
            fractions[name, n] = tr.stats["data_fraction"].mean()
    for name in ("austerity", "confidence"):
        assert fractions[name, 80000] < 0.7 * fractions[name, 10000], fractions
    assert fractions["plain", 80000] > 0.8, fractions
    assert fractions["confidence", 80000] < 0.25, fractions
