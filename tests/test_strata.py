"""Tests of the confidence sampler's strata of rows (doc/algorithms/confidence.rst,
"Strata of rows").

* the strata: every row in one stratum, within its radius of its center and equal
  to it outside the varying columns (dense/CSR, float32/float64, with/without
  intercept); rows grouped by their 0/1 columns, at most ``max_groups`` groups;
* the per-stratum range bounds against every datum, the compiled bounds against
  their NumPy reference, ``max |b'''|`` over intervals against a fine grid;
* the stratified rule against a NumPy transcription, the compiled decision the same
  for any number of threads and exact with a tiny delta;
* statistical: wrong decisions below delta on data with one-hot columns, where the
  strata let a decision read a small fraction of the data.
"""
import math

import numpy as np
import pytest
from scipy import sparse, stats

from bayes_subsample import _seqtest
from bayes_subsample._driver import sample
from bayes_subsample.models import (LogisticRegressionModel, RowStrata,
                                    logistic_stratum_range_bounds, row_strata)
from bayes_subsample.models._strata import LOGISTIC_B3_MAX, logistic_b3_sup
from bayes_subsample.samplers import _approx_mh_fast as fast
from bayes_subsample.samplers._base import prepare_laplace
from bayes_subsample.samplers.confidence import ConfidenceMH


def _onehot_data(n, seed=0, dtype=np.float64, n_levels=(4, 12)):
    """Logistic data with three continuous columns and one-hot groups, some levels
    rare (the structure of covtype's indicators)."""
    rng = np.random.default_rng(seed)
    cont = rng.normal(size=(n, 3))
    blocks = []
    for k in n_levels:
        w = 0.6 ** np.arange(k)
        lev = rng.choice(k, size=n, p=w / w.sum())
        blocks.append(np.eye(k)[lev])
    X = np.column_stack([cont] + blocks).astype(dtype)
    beta = np.concatenate([[1.0, -0.5, 0.3], rng.normal(size=X.shape[1] - 3)])
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ beta - 0.2)))).astype(np.float64)
    return X, y


def _terms(model, th, th_new, th_star, order):
    idx = np.arange(model.n_data)
    if order is None:
        return model.loglik_terms(th_new, idx) - model.loglik_terms(th, idx)
    return (model.cv_residual_terms(th_new, th_star, idx, order)
            - model.cv_residual_terms(th, th_star, idx, order))


# ---------------------------------------------------------------------------
# the strata
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("metric", ["dense", "diag"])
def test_row_strata_describe_every_row(dtype, fmt, fit_intercept, metric):
    X, y = _onehot_data(3000, seed=1, dtype=dtype)
    Xin = sparse.csr_matrix(X) if fmt == "csr" else X
    model = LogisticRegressionModel(Xin, y, fit_intercept=fit_intercept)
    prep = prepare_laplace(model)
    precision = prep.precision if metric == "dense" else np.diag(prep.precision)
    st = row_strata(model, precision, max_groups=100)
    assert st.chol.ndim == (2 if metric == "dense" else 1)
    assert isinstance(st, RowStrata)
    assert np.array_equal(np.sort(st.members), np.arange(model.n_data))
    assert st.offsets[0] == 0 and st.offsets[-1] == model.n_data
    lab = st.labels()
    for s in range(st.n_strata):
        rows = st.members[st.offsets[s]:st.offsets[s + 1]]
        assert np.all(np.diff(rows) > 0) and np.all(lab[rows] == s)
    Xt = X.astype(np.float64)
    if fit_intercept:
        Xt = np.column_stack([Xt, np.ones(len(X))])
    E = Xt - st.centers[lab]
    fixed = np.setdiff1d(np.arange(model.n_params), st.varying)
    np.testing.assert_array_equal(E[:, fixed], 0.0)
    M = st.chol if st.chol.ndim == 2 else np.diag(st.chol)
    rho = np.linalg.norm(np.linalg.solve(M, E[:, st.varying].T), axis=0)
    assert np.all(rho <= st.radius[lab])
    # and tight: each stratum's radius is its largest row's (up to rounding margins)
    worst = np.zeros(st.n_strata)
    np.maximum.at(worst, lab, rho)
    np.testing.assert_allclose(st.radius, worst, rtol=1e-6, atol=1e-7)
    if fmt == "dense":
        # grouped by the 16 one-hot columns: the continuous ones vary
        np.testing.assert_array_equal(st.varying, [0, 1, 2])
        assert st.n_strata > len(np.unique(X[:, 3:], axis=0))
    else:
        assert len(st.varying) == X.shape[1]


def test_row_strata_group_by_the_rarest_columns_within_max_groups():
    X, y = _onehot_data(4000, seed=2, n_levels=(5, 9, 7))
    model = LogisticRegressionModel(X, y)
    prep = prepare_laplace(model)
    full = row_strata(model, prep.precision, max_groups=1000, n_bins=1)
    assert full.n_strata == len(np.unique(X[:, 3:], axis=0))
    capped = row_strata(model, prep.precision, max_groups=20, n_bins=1)
    assert capped.n_strata <= 20
    pattern = np.setdiff1d(np.arange(X.shape[1]), capped.varying)
    counts = X[:, pattern].sum(0)
    others = np.setdiff1d(np.arange(3, X.shape[1]), pattern)
    # the grouped columns are rarer than the 0/1 columns left to vary
    assert counts.max() <= np.minimum(X[:, others].sum(0), len(X) - X[:, others].sum(0)).min()


def test_row_strata_validation():
    with pytest.raises(ValueError, match="offsets"):
        RowStrata([0, 1], [0, 1], np.zeros((2, 2)), [0.0, 0.0], [0], [1.0])
    with pytest.raises(ValueError, match="radius"):
        RowStrata([0, 1], [0, 2], np.zeros((1, 2)), [-1.0], [0], [1.0])
    with pytest.raises(ValueError, match="chol"):
        RowStrata([0, 1], [0, 2], np.zeros((1, 2)), [1.0], [0], np.eye(2))
    with pytest.raises(ValueError, match="eta_star_range"):
        RowStrata([0, 1], [0, 2], np.zeros((1, 2)), [1.0], [0], [1.0], np.zeros((2, 2)))


# ---------------------------------------------------------------------------
# the bounds
# ---------------------------------------------------------------------------
def test_b3_sup_matches_a_grid():
    grid = np.linspace(-30, 30, 600001)
    e = np.exp(-grid)
    sig = 1.0 / (1.0 + e)
    b3 = np.abs(sig * (1 - sig) * (1 - 2 * sig))
    rng = np.random.default_rng(0)
    for _ in range(200):
        lo, hi = np.sort(rng.uniform(-25, 25, size=2) * rng.choice([0.1, 1.0]))
        ref = b3[(grid >= lo) & (grid <= hi)].max(initial=0.0)
        got = float(logistic_b3_sup(lo, hi))
        assert ref <= got * (1 + 1e-9) and got <= max(ref, 1e-300) * (1 + 1e-3) + 1e-12
    assert float(logistic_b3_sup(-1.0, 2.0)) == LOGISTIC_B3_MAX


@pytest.mark.parametrize("seed", [0, 1])
def test_stratum_bounds_hold_on_every_datum(seed):
    """max_{k in s} |t_k| <= C_s for the log-likelihood differences and the Taylor
    residual differences (with and without the strata's eta* ranges), for moves and
    distances from theta* at several scales; the compiled bounds equal their NumPy
    reference and are far below the one-metric bound of a single stratum."""
    rng = np.random.default_rng(seed)
    X, y = _onehot_data(6000, seed=10 + seed)
    model = LogisticRegressionModel(X, y)
    prep = ConfidenceMH().prepare(model, np.random.default_rng(0))
    st, cv = prep.strata, prep.cv
    assert st.eta_star_range is not None
    plain = RowStrata(st.members, st.offsets, st.centers, st.radius, st.varying, st.chol)
    L = np.linalg.cholesky(prep.precision)
    p = model.n_params
    lab = st.labels()
    tighter = 0
    for _ in range(25):
        th = cv.theta_star + np.linalg.solve(L.T, rng.normal(size=p)) * rng.choice([0.3, 1, 4])
        th_new = th + np.linalg.solve(L.T, rng.normal(size=p)) * rng.choice([0.01, 0.3, 2])
        for order, strata in ((None, plain), (2, plain), (2, st)):
            C = model.stratum_range_bounds(th, th_new, cv.theta_star, order, strata)
            ref = logistic_stratum_range_bounds(th, th_new, cv.theta_star, strata, order)
            np.testing.assert_allclose(C, ref, rtol=1e-10)
            worst = np.zeros(st.n_strata)
            np.maximum.at(worst, lab, np.abs(_terms(model, th, th_new, cv.theta_star, order)))
            assert np.all(worst <= C * (1 + 1e-9) + 1e-300)
        C_ranged = model.stratum_range_bounds(th, th_new, cv.theta_star, 2, st)
        C_plain = model.stratum_range_bounds(th, th_new, cv.theta_star, 2, plain)
        assert np.all(C_ranged <= C_plain * (1 + 1e-12))
        sizes = st.sizes
        tighter += (sizes @ C_ranged) < 0.1 * model.n_data * model.cv_range_bound(
            th, th_new, cv.theta_star, 2)
    assert tighter > 20


def test_stratum_bounds_are_zero_without_a_move():
    X, y = _onehot_data(2000, seed=3)
    model = LogisticRegressionModel(X, y)
    prep = ConfidenceMH().prepare(model, np.random.default_rng(0))
    th = prep.theta_init + 0.1
    for order in (None, 2):
        C = model.stratum_range_bounds(th, th, prep.cv.theta_star, order, prep.strata)
        assert np.all(C == 0.0)


# ---------------------------------------------------------------------------
# the stratified rule
# ---------------------------------------------------------------------------
def python_strat_test(terms, offsets, C, positions, target, delta, gamma=2.0, p=2.0,
                      first=1):
    """A NumPy transcription of the stratified rule (_seqtest.pxd)."""
    S = len(offsets) - 1
    N = np.diff(offsets)
    order = [s for s in np.argsort(-np.asarray(C), kind="stable")
             if np.isfinite(C[s]) and C[s] > 0 and N[s] >= 4]
    state = ["zero" if C[s] == 0 else "pending" for s in range(S)]
    for s in order:
        state[s] = "sampled"
    draws = [[] for _ in range(S)]
    known, n_read, k, j = 0.0, 0, 0, 0
    T = float(max(2 * len(order), first))
    while True:
        n_exact = sum(N[s] for s in range(S) if state[s] in ("exact", "pending"))
        W = sum(N[s] * C[s] for s in order[j:])
        lam = 0.0
        while j < len(order):
            if T - n_exact <= 0 or not W > 0 or 2 * T >= N.sum():
                lam = 0.0
                break
            lam = W / (T - n_exact)
            if C[order[j]] < 0.5 * lam:
                break
            state[order[j]] = "pending"
            n_exact += N[order[j]]
            W -= N[order[j]] * C[order[j]]
            j += 1
        want = {}
        if not lam > 0:
            for s in order[j:]:
                state[s] = "pending"
            j = len(order)
        else:
            for s in order[j:]:
                want[s] = max(len(draws[s]), math.ceil(N[s] * C[s] / lam), 2)
        for s in range(S):
            if state[s] == "pending":
                known += terms[offsets[s]:offsets[s + 1]].sum()
                n_read += N[s]
                state[s] = "exact"
            elif state[s] == "sampled" and want[s] > len(draws[s]):
                t0, m = len(draws[s]), want[s] - len(draws[s])
                draws[s] += list(terms[offsets[s] + positions[offsets[s] + t0:offsets[s] + t0 + m]])
                n_read += m
        k += 1
        if j == len(order):
            return known > target, n_read, k, known, math.nan
        est, V, b, parts = known, 0.0, 0.0, []
        for s in order[j:]:
            x = np.array(draws[s])
            est += N[s] * x.mean()
            V += N[s] ** 2 * x.var(ddof=1) / len(x)
            parts.append((2 * C[s] * N[s] / len(x), len(x)))
            b = max(b, parts[-1][0])
        kt = max((r / b) ** 2 * t / (t - 1) for r, t in parts)
        dk = (p - 1) / (p * k ** p) * delta
        lg1, lg2 = math.log(4 / dk), math.log(2 / dk)
        eps = math.sqrt(2 * lg1) * (math.sqrt(V) + b * math.sqrt(2 * kt * lg2)) + 2 / 3 * b * lg1
        if abs(est - target) > eps:
            return est > target, n_read, k, est, eps
        T = math.ceil(gamma * T)


def test_stratified_rule_matches_reference():
    rng = np.random.default_rng(0)
    for _ in range(150):
        S = int(rng.integers(1, 25))
        N = rng.integers(1, 300, size=S)
        offsets = np.concatenate([[0], np.cumsum(N)]).astype(np.int64)
        scale = np.exp(rng.normal(size=S) * 2) * rng.choice([0, 1], size=S, p=[0.1, 0.9])
        terms = np.concatenate([(rng.uniform(-1, 1, N[s]) + 0.3) * scale[s]
                                for s in range(S)])
        C = scale * 1.3 * (1 + rng.random(S))
        positions = np.concatenate([rng.integers(0, k, k) for k in N]).astype(np.int64)
        target = terms.sum() + rng.normal() * np.sqrt(offsets[-1]) * 0.3
        args = (terms, offsets, C, positions, target, float(rng.choice([1e-3, 0.05, 0.3])),
                float(rng.uniform(1.1, 3)), float(rng.uniform(1.1, 3)),
                int(rng.integers(1, 50)))
        got = _seqtest.strat_test(*args)
        ref = python_strat_test(*args)
        assert got[:3] == ref[:3]
        assert got[3] == pytest.approx(ref[3], rel=1e-9, abs=1e-9)
        assert (math.isnan(got[4]) and math.isnan(ref[4])) or \
            got[4] == pytest.approx(ref[4], rel=1e-9)
        if math.isnan(got[4]):           # every stratum summed: the exact decision
            assert got[0] == (terms.sum() > target)


def test_stratified_rule_validation():
    t = np.ones(10)
    with pytest.raises(ValueError, match="offsets"):
        _seqtest.strat_test(t, np.array([0, 5, 9]), np.ones(2), np.zeros(10, np.int64), 0.0,
                            0.1)
    with pytest.raises(ValueError, match="positions"):
        _seqtest.strat_test(t, np.array([0, 5, 10]), np.ones(2),
                            np.full(10, 7, dtype=np.int64), 0.0, 0.1)


def _strata_setup(n=40000, seed=6):
    X, y = _onehot_data(n, seed=seed)
    model = LogisticRegressionModel(X, y)
    prep = ConfidenceMH().prepare(model, np.random.default_rng(0))
    cv = prep.cv
    kw = {"cv_order": 2, "theta_star": cv.theta_star, "eta_star": cv.cache}
    index = fast.StrataIndex(prep.strata.members, prep.strata.offsets, model.n_data)
    return model, prep, kw, index


def test_stratified_decisions_do_not_depend_on_threads():
    model, prep, kw, index = _strata_setup()
    L = np.linalg.cholesky(prep.precision)
    p = model.n_params
    moves = []
    g = np.random.default_rng(3)
    for _ in range(12):
        th = prep.cv.theta_star + np.linalg.solve(L.T, g.normal(size=p))
        th_new = th + np.linalg.solve(L.T, g.normal(size=p)) * 0.3
        moves.append((th, th_new, model.stratum_range_bounds(th, th_new, prep.cv.theta_star, 2,
                                                             prep.strata)))
    results = {}
    for n_threads in (1, 2):
        g = np.random.default_rng(7)
        rec = [fast.stratified_decide(g, model.compiled, th, th_new, index, C, 0.0, 1e-12, 2.0,
                                      2.0, 1, n_threads=n_threads, **kw)
               for th, th_new, C in moves]
        results[n_threads] = (rec, g.random())
    np.testing.assert_equal(results[1], results[2])      # (nan == nan: exact decisions)
    assert max(r[1] for r in results[1][0]) >= 8192      # the parallel path ran


def test_stratified_decide_validation():
    model, prep, kw, index = _strata_setup(n=3000)
    th = prep.theta_init
    C = np.ones(index.n_strata)
    g = np.random.default_rng(0)
    with pytest.raises(ValueError, match="one range bound per stratum"):
        fast.stratified_decide(g, model.compiled, th, th, index, C[1:], 0.0, 0.1, 2.0, 2.0, 1)
    with pytest.raises(ValueError, match=">= 0"):
        fast.stratified_decide(g, model.compiled, th, th, index, -C, 0.0, 0.1, 2.0, 2.0, 1)
    with pytest.raises(ValueError, match="distinct"):
        fast.StrataIndex(np.array([0, 0, 1]), np.array([0, 3]), 10)
    with pytest.raises(ValueError, match="offsets"):
        fast.StrataIndex(np.array([0, 1, 2]), np.array([0, 2]), 10)
    other = fast.StrataIndex(np.arange(5), np.array([0, 5]), 5)
    with pytest.raises(ValueError, match="the model has"):
        fast.stratified_decide(g, model.compiled, th, th, other, np.ones(1), 0.0, 0.1, 2.0,
                               2.0, 1)


@pytest.mark.parametrize("seed", [0, 1])
def test_stratified_confidence_errs_below_delta_and_reads_little(seed):
    """On 40,000 rows with one-hot columns the stratified decisions differ from the
    exact ones (same u) at most at the rate delta (binomial bound) while reading a
    small fraction of the data."""
    X, y = _onehot_data(40000, seed=20 + seed)
    model = LogisticRegressionModel(X, y)
    delta = 0.05
    tr = sample(model, ConfidenceMH(delta=delta, check_exact=True, n_steps=1),
                n_samples=1200, n_warmup=300, n_chains=1, random_state=seed,
                check_convergence=False)
    wrong = tr.stats["wrong_decision"]
    assert wrong.sum() <= stats.binom.ppf(1.0 - 1e-4, wrong.size, delta)
    assert tr.stats["data_fraction"].mean() < 0.2
    assert 0.1 < tr.stats["accepted"].mean() < 0.6
