"""Tests for bayes_subsample.mrf: BinaryMRF, exact / approximate Gibbs, error measures."""

import itertools
import os
import signal
import threading
import time

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, stdtr

from bayes_subsample import _rng
from bayes_subsample.mrf import (
    BinaryMRF,
    GibbsSampler,
    calibration_curve,
    l1_error_trace,
    random_subsets,
    state_codes,
    subset_l1_error,
    subset_marginals,
)


# ----------------------------------------------------------------------------- helpers
def naive_log_prob(x, factors):
    """Plain-Python log-probability from the factor list as the user gave it."""
    total = 0.0
    for variables, table in factors:
        table = np.asarray(table, dtype=float).reshape((2,) * len(variables))
        total += table[tuple(int(x[v]) for v in variables)]
    return total


def random_factor_list(rng, D, n_pairs, n_triples, scale):
    """Factors with variables in random (unsorted) order and nested-shape tables."""
    factors = []
    pairs = rng.permutation(list(itertools.combinations(range(D), 2)))[:n_pairs]
    for p in pairs:
        factors.append((tuple(rng.permutation(p)), scale * rng.standard_normal((2, 2))))
    triples = rng.permutation(list(itertools.combinations(range(D), 3)))[:n_triples]
    for t in triples:
        factors.append((tuple(rng.permutation(t)), scale * rng.standard_normal((2, 2, 2))))
    return factors


def propagate(pi, p0, n_sweeps, scan):
    """Exact law of the Gibbs chain state after n_sweeps (NumPy reference kernel).

    pi: target over the 2**D codes (variable 0 = most significant bit); p0: law of x0.
    """
    D = int(np.log2(pi.size))
    p = p0.copy()

    def site(p, i):
        shape = (1 << i, 2, 1 << (D - 1 - i))
        P, Q = p.reshape(shape), pi.reshape(shape)
        c1 = Q[:, 1, :] / (Q[:, 0, :] + Q[:, 1, :])
        tot = P.sum(axis=1)
        return np.stack([tot * (1 - c1), tot * c1], axis=1).reshape(-1)

    for _ in range(n_sweeps):
        if scan == "systematic":
            for i in range(D):
                p = site(p, i)
        else:
            for _ in range(D):
                p = np.mean([site(p, i) for i in range(D)], axis=0)
    return p


def chi_square_pvalue(counts, probs, min_expected=5.0):
    """Pearson chi-square goodness of fit; cells with expected count < min_expected are
    pooled into one cell (the usual validity rule); dof = number of cells - 1."""
    n = counts.sum()
    expected = n * probs
    small = expected < min_expected
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    stat = ((obs - exp) ** 2 / exp).sum()
    return stats.chi2.sf(stat, obs.size - 1), obs.size - 1


def final_state_counts(model, sampler, n_chains, n_sweeps, n_jobs=None):
    """Independent draws: the last state of n_chains independent chains."""
    res = sampler.sample(model, n_sweeps, n_chains=n_chains, n_jobs=n_jobs)
    codes = state_codes(res.states[:, -1, :])
    return np.bincount(codes, minlength=1 << model.n_vars), res


@pytest.fixture(scope="module")
def paper_model():
    # The paper's model (D = 100, all 161,700 triples) with the default scale sqrt(0.02).
    return BinaryMRF.random(n_vars=100, order=3, random_state=0)


@pytest.fixture(scope="module")
def paper_model_sd002():
    # Same model with log-potential standard deviation 0.02 (see the accuracy tests).
    return BinaryMRF.random(n_vars=100, order=3, log_potential_scale=0.02, random_state=0)


# ----------------------------------------------------------------------------- model
def test_random_model_structure(paper_model):
    m = paper_model
    assert m.n_vars == 100
    assert m.n_factors == 161_700
    assert m.triple_log_potentials.shape == (161_700, 8)
    assert np.all(m.n_factors_per_var == 4851)
    assert m.incidence_log_ratio.shape == (3 * 161_700, 4)
    assert np.all(np.diff(m.triple_index, axis=1) > 0)
    # default scale sqrt(0.02): the entries' sample sd is within 1% of it
    assert abs(m.triple_log_potentials.std() - np.sqrt(0.02)) < 0.01 * np.sqrt(0.02)
    both = BinaryMRF.random(n_vars=7, order="both", random_state=1)
    assert both.pair_index.shape == (21, 2) and both.triple_index.shape == (35, 3)
    assert np.all(both.n_factors_per_var == 6 + 15)
    assert BinaryMRF.random(5, order=2, random_state=0).n_factors == 10


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_log_prob_and_conditional_match_naive(dtype):
    rng = np.random.default_rng(3)
    D = 9
    factors = random_factor_list(rng, D, n_pairs=12, n_triples=30, scale=0.7)
    m = BinaryMRF.from_factors(D, factors, dtype=dtype)
    assert m.incidence_log_ratio.dtype == dtype
    X = rng.integers(0, 2, size=(50, D))
    ref = np.array([naive_log_prob(x, factors) for x in X])
    tol = 1e-10 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(m.log_prob_unnormalized(X), ref, atol=tol * 10, rtol=tol)
    for x in X[:10]:
        for i in range(D):
            x1, x0 = x.copy(), x.copy()
            x1[i], x0[i] = 1, 0
            expected = expit(naive_log_prob(x1, factors) - naive_log_prob(x0, factors))
            assert m.conditional_prob(x, i) == pytest.approx(expected, abs=10 * tol)
        np.testing.assert_allclose(
            m.conditional_prob(x), [m.conditional_prob(x, i) for i in range(D)])


def test_enumerate_joint_matches_brute_force():
    rng = np.random.default_rng(4)
    factors = random_factor_list(rng, 6, n_pairs=5, n_triples=8, scale=1.0)
    m = BinaryMRF.from_factors(6, factors)
    p = m.enumerate_joint()
    states = np.array(list(itertools.product([0, 1], repeat=6)))  # x_0 most significant
    lp = np.array([naive_log_prob(x, factors) for x in states])
    ref = np.exp(lp - lp.max())
    np.testing.assert_allclose(p, ref / ref.sum(), rtol=1e-10)
    np.testing.assert_array_equal(state_codes(states), np.arange(64))
    np.testing.assert_array_equal(m.all_states(), states)
    with pytest.raises(ValueError, match="n_vars <= 16"):
        BinaryMRF(17).enumerate_joint()


def test_duplicates_merge_and_raise():
    t1 = np.arange(8.0).reshape(2, 2, 2) / 10
    t2 = np.ones((2, 2, 2)) * 0.3
    # (2, 0, 1) is the same variable set as (0, 1, 2); its table is transposed on merge
    factors = [((0, 1, 2), t1), ((2, 0, 1), t2), ((1, 3), [[0.0, 0.5], [0.2, 0.1]])]
    m = BinaryMRF.from_factors(4, factors, duplicates="merge")
    assert m.triple_index.shape == (1, 3)
    X = np.array(list(itertools.product([0, 1], repeat=4)))
    np.testing.assert_allclose(
        m.log_prob_unnormalized(X), [naive_log_prob(x, factors) for x in X])
    with pytest.raises(ValueError, match="duplicate triple factors"):
        BinaryMRF.from_factors(4, factors, duplicates="raise")


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"triple_index": [[0, 1, 2]]}, ValueError, "given together"),
        ({"triple_index": [[0, 1, 2]], "triple_log_potentials": np.zeros((1, 4))},
         ValueError, "shape"),
        ({"triple_index": [[0, 1]], "triple_log_potentials": np.zeros((1, 8))},
         ValueError, "shape"),
        ({"triple_index": [[0, 1, 9]], "triple_log_potentials": np.zeros((1, 8))},
         ValueError, "outside"),
        ({"triple_index": [[0, -1, 2]], "triple_log_potentials": np.zeros((1, 8))},
         ValueError, "outside"),
        ({"triple_index": [[0, 1, 1]], "triple_log_potentials": np.zeros((1, 8))},
         ValueError, "repeats a variable"),
        ({"pair_index": [[0, 1]], "pair_log_potentials": [[0.0, np.inf, 0.0, 0.0]]},
         ValueError, "finite"),
        ({"pair_index": [[0, 1]], "pair_log_potentials": [[0.0, np.nan, 0.0, 0.0]]},
         ValueError, "finite"),
        ({"pair_index": [[0.0, 1.0]], "pair_log_potentials": np.zeros((1, 4))},
         TypeError, "integer"),
        ({"pair_index": [[0, 1]], "pair_log_potentials": [["a", "b", "c", "d"]]},
         TypeError, "real"),
        ({"duplicates": "ignore"}, ValueError, "duplicates"),
        ({"dtype": np.int32}, ValueError, "dtype"),
    ],
)
def test_invalid_factor_tables(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        BinaryMRF(5, **kwargs)


def test_invalid_model_inputs():
    with pytest.raises(ValueError, match="n_vars"):
        BinaryMRF(0)
    with pytest.raises(TypeError, match="n_vars"):
        BinaryMRF(2.5)
    with pytest.raises(ValueError, match="only pair and triple"):
        BinaryMRF.from_factors(5, [((0, 1, 2, 3), np.zeros(16))])
    with pytest.raises(ValueError, match="table entries"):
        BinaryMRF.from_factors(5, [((0, 1), np.zeros(8))])
    with pytest.raises(TypeError, match="pair"):
        BinaryMRF.from_factors(5, [(0, 1, 2)])
    with pytest.raises(ValueError, match="order"):
        BinaryMRF.random(5, order=4)
    with pytest.raises(ValueError, match="log_potential_scale"):
        BinaryMRF.random(5, log_potential_scale=-1.0)
    m = BinaryMRF.random(5, random_state=0)
    with pytest.raises(ValueError, match="0 and 1"):
        m.log_prob_unnormalized([[0, 1, 2, 0, 0]])
    with pytest.raises(ValueError, match="shape"):
        m.log_prob_unnormalized(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="out of range"):
        m.conditional_prob(np.zeros(5), 5)


# ----------------------------------------------------------------------------- sampler
def test_sampler_chains_in_threads_under_a_process_backend():
    """Under a joblib process backend set by the user the chains still run in
    threads writing into this process's arrays (in processes they would be lost)."""
    from joblib import parallel_config
    m = BinaryMRF.random(n_vars=20, order=2, log_potential_scale=0.1, random_state=1)
    s = GibbsSampler(random_state=4)
    ref = s.sample(m, 15, n_chains=2, n_jobs=1)
    with parallel_config(backend="loky"):
        r = s.sample(m, 15, n_chains=2, n_jobs=2)
    np.testing.assert_array_equal(r.states, ref.states)
    np.testing.assert_array_equal(r.time_per_sweep > 0, True)


def test_sampler_reproducible_for_any_n_jobs():
    m = BinaryMRF.random(n_vars=30, order=3, log_potential_scale=0.1, random_state=1)
    for eps, scan in [(0.0, "systematic"), (0.05, "random")]:
        s = GibbsSampler(epsilon=eps, batch_size=40, scan=scan, random_state=42)
        r1 = s.sample(m, 25, n_chains=3, n_jobs=1)
        r2 = s.sample(m, 25, n_chains=3, n_jobs=2)
        r3 = s.sample(m, 25, n_chains=3, n_jobs=1, progress=True)  # chunked kernel calls
        np.testing.assert_array_equal(r1.states, r2.states)
        np.testing.assert_array_equal(r1.states, r3.states)
        np.testing.assert_array_equal(r1.fraction_examined, r2.fraction_examined)
        assert r1.states.dtype == np.uint8 and r1.states.shape == (3, 25, 30)
        assert np.all(r1.time_per_sweep > 0)
        # chains differ from each other, and a different seed gives different states
        assert not np.array_equal(r1.states[0], r1.states[1])
        r4 = GibbsSampler(epsilon=eps, batch_size=40, scan=scan, random_state=43).sample(
            m, 25, n_chains=3)
        assert not np.array_equal(r1.states, r4.states)


@pytest.mark.parametrize("record", [False, True])
def test_sweeps_in_short_calls_equal_one_call(record, monkeypatch):
    """The chains run in compiled calls of bounded time (so that a stop is
    seen between them); one sweep per call gives the same chains, records
    included."""
    from bayes_subsample.mrf import _gibbs
    m = BinaryMRF.random(n_vars=30, order=3, log_potential_scale=0.1, random_state=1)
    s = GibbsSampler(epsilon=0.05, batch_size=40, random_state=42)
    one = s.sample(m, 25, n_chains=2, record_conditionals=record)
    monkeypatch.setattr(_gibbs, "_CHUNK_SECONDS", 0.0)
    short = s.sample(m, 25, n_chains=2, record_conditionals=record)
    for name in ("states", "fraction_examined", "exact_conditionals", "decisions"):
        np.testing.assert_array_equal(getattr(short, name), getattr(one, name), err_msg=name)
    assert not short.interrupted and short.chain_lengths.tolist() == [25, 25]


@pytest.mark.parametrize("n_chains, n_jobs", [(2, 1), (2, 2)])
def test_ctrl_c_stops_gibbs_within_a_second_keeping_its_sweeps(n_chains, n_jobs,
                                                                sigint_handler):
    """A real Ctrl-C (SIGINT) stops the chains at a sweep boundary within a
    second; the sweeps made are returned (interrupted, chain_lengths) and
    are the start of the uninterrupted chains."""
    m = BinaryMRF.random(n_vars=100, random_state=0)     # ~0.3 ms per sweep: minutes
    sent = []

    def press_ctrl_c():
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(0.5, press_ctrl_c)
    timer.start()
    try:
        with pytest.warns(RuntimeWarning, match="Gibbs sampling interrupted: kept"):
            res = GibbsSampler(random_state=3).sample(m, 500_000, n_chains=n_chains,
                                                      n_jobs=n_jobs)
        stopped = time.perf_counter()
    finally:
        timer.cancel()
    assert stopped - sent[0] < 1.0
    assert res.interrupted and "interrupted" in repr(res)
    lengths = res.chain_lengths
    assert lengths[0] > 0 and lengths.max() < 500_000 and res.n_sweeps == lengths.max()
    if n_jobs == 1:
        assert lengths[1] == 0        # the chains run one after the other
    else:
        assert np.all(lengths > 0)
    full = GibbsSampler(random_state=3).sample(m, int(lengths.max()), n_chains=n_chains)
    for c, k in enumerate(lengths):
        np.testing.assert_array_equal(res.states[c, :k], full.states[c, :k])
        assert np.all(res.states[c, k:] == 255) and np.isnan(res.time_per_sweep[c, k:]).all()
        assert np.isfinite(res.fraction_examined[c, :k]).all()
        if k:
            np.testing.assert_array_equal(res.final_state[c], res.states[c, k - 1])


def test_exact_examines_everything_approx_examines_less(paper_model):
    x0 = np.zeros(100, dtype=np.uint8)
    r0 = GibbsSampler(epsilon=0.0, random_state=0).sample(paper_model, 3, x0=x0)
    np.testing.assert_array_equal(r0.fraction_examined, 1.0)
    r1 = GibbsSampler(epsilon=0.2, random_state=0).sample(paper_model, 3, x0=x0)
    assert np.all(r1.fraction_examined < 0.9)


def test_record_conditionals_are_exact():
    m = BinaryMRF.random(n_vars=12, order="both", log_potential_scale=0.4, random_state=5)
    for scan in ("systematic", "random"):
        res = GibbsSampler(epsilon=0.1, batch_size=5, block_size=1, scan=scan,
                           random_state=1).sample(
            m, 6, n_chains=2, record_conditionals=True)
        D = m.n_vars
        for c in range(2):
            # replay the chain from the state after sweep 0: the state before each
            # update is known from the recorded decisions
            state = res.states[c, 0].copy()
            for u in range(D, 6 * D):
                i = res.updated_variables[c, u]
                assert res.exact_conditionals[c, u] == pytest.approx(
                    m.conditional_prob(state, i), abs=1e-12)
                state[i] = res.decisions[c, u]
                if (u + 1) % D == 0:
                    np.testing.assert_array_equal(state, res.states[c, (u + 1) // D - 1])
        if scan == "systematic":
            np.testing.assert_array_equal(
                res.updated_variables[0, :D], np.arange(D, dtype=np.int32))


def test_sampler_validation():
    m = BinaryMRF.random(6, random_state=0)
    bad = [
        ({"epsilon": -0.1}, ValueError, "epsilon"),
        ({"epsilon": 1.0}, ValueError, "epsilon"),
        ({"epsilon": "0.1"}, ValueError, "epsilon"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"batch_size": 2.5}, TypeError, "batch_size"),
        ({"epsilon": 0.1, "first_batch_size": 1}, ValueError, "first_batch_size"),
        ({"scan": "sideways"}, ValueError, "scan"),
        ({"random_state": "seed"}, TypeError, "random_state"),
    ]
    for kwargs, exc, match in bad:
        with pytest.raises(exc, match=match):
            GibbsSampler(**kwargs).sample(m, 2)
    s = GibbsSampler(random_state=0)
    with pytest.raises(TypeError, match="BinaryMRF"):
        s.sample(np.zeros((3, 3)), 2)
    with pytest.raises(ValueError, match="n_sweeps"):
        s.sample(m, 0)
    with pytest.raises(ValueError, match="x0"):
        s.sample(m, 2, x0=np.zeros(5))
    with pytest.raises(ValueError, match="x0"):
        s.sample(m, 2, x0=np.zeros((3, 6)), n_chains=2)
    with pytest.raises(ValueError, match="0 and 1"):
        s.sample(m, 2, x0=np.full(6, 2))
    with pytest.raises(ValueError, match="i must be"):
        s.decide_repeated(m, np.zeros(6), 6, 10)
    # x0 is respected and the default x0 is random
    r = s.sample(m, 1, x0=np.ones(6), n_chains=2)
    assert r.states.shape == (2, 1, 6)
    assert GibbsSampler().set_params(epsilon=0.1).epsilon == 0.1


# ------------------------------------------------------- statistical tests by enumeration
# Each chain's state after n_sweeps is an exact draw from p_T = p_0 K^T (p_0 uniform,
# K the Gibbs kernel), and chains are independent, so the final states of n_chains
# chains are iid from p_T: no autocorrelation correction is needed.  p_T is computed
# exactly by `propagate`, and we check that it is within 1e-3 (TV) of the enumerated
# joint, so agreement with p_T is agreement with the MRF up to that.  The Pearson
# chi-square test (cells with expected count < 5 pooled, dof = cells - 1) then has its
# nominal level; we fail at p < 1e-3.
ENUM_CASES = [
    # (name, D, order, scale, n_sweeps)
    ("triples_D10", 10, 3, 0.2, 15),
    ("pairs_D12", 12, 2, 0.3, 12),
    ("mixed_D8", 8, "both", 0.3, 12),
]


@pytest.mark.parametrize("name, D, order, scale, n_sweeps", ENUM_CASES)
@pytest.mark.parametrize("epsilon, scan, block", [(0.0, "systematic", 1), (0.0, "random", 1),
                                                  (0.005, "systematic", 1),
                                                  (0.005, "systematic", 3)])
def test_gibbs_matches_enumerated_joint(name, D, order, scale, n_sweeps, epsilon, scan, block):
    m = BinaryMRF.random(n_vars=D, order=order, log_potential_scale=scale,
                         random_state=1)
    pi = m.enumerate_joint()
    if scan == "random":
        n_sweeps *= 2
    pT = propagate(pi, np.full(pi.size, 1.0 / pi.size), n_sweeps, scan)
    assert 0.5 * np.abs(pT - pi).sum() < 1e-3
    # the model is not close to uniform, so the test has something to detect
    assert 0.5 * np.abs(pi - 1.0 / pi.size).sum() > 0.2
    # small batches so the sequential test really stops early (N_i is 36-66 here);
    # block = 3: units of 3 consecutive terms, two units per batch
    sampler = GibbsSampler(epsilon=epsilon, batch_size=6 if block > 1 else 5,
                           first_batch_size=5, block_size=block, scan=scan, random_state=7)
    counts, res = final_state_counts(m, sampler, n_chains=4000, n_sweeps=n_sweeps)
    if epsilon > 0:
        # (with 4-22 units of 3 terms per variable the test stops early less often)
        assert res.fraction_examined.mean() < (0.98 if block == 1 else 0.999)
    pval, dof = chi_square_pvalue(counts, pT)
    assert dof > 20
    print(name, epsilon, scan, "p-value", pval, "dof", dof)
    assert pval > 1e-3, (name, epsilon, scan, pval)


def test_enumeration_test_has_power():
    """The same chi-square check rejects samples from a slightly different model."""
    m = BinaryMRF.random(n_vars=10, order=3, log_potential_scale=0.2, random_state=1)
    tables = m.triple_log_potentials.copy()
    tables[:5] += 0.3 * np.random.default_rng(0).standard_normal((5, 8))
    wrong = BinaryMRF(10, triple_index=m.triple_index, triple_log_potentials=tables)
    counts, _ = final_state_counts(wrong, GibbsSampler(random_state=3), 4000, 15)
    pval, _ = chi_square_pvalue(counts, m.enumerate_joint())
    assert pval < 1e-6


def test_large_epsilon_is_biased_on_small_model():
    """With a loose test (eps = 0.3, batches of 2) the joint visibly departs from the
    target: the chi-square must reject (shows the approximate path is really taken)."""
    m = BinaryMRF.random(n_vars=10, order=3, log_potential_scale=0.2, random_state=1)
    pi = m.enumerate_joint()
    s = GibbsSampler(epsilon=0.3, batch_size=2, first_batch_size=2, block_size=1,
                     random_state=3)
    counts, res = final_state_counts(m, s, 4000, 15)
    assert res.fraction_examined.mean() < 0.6
    pval, _ = chi_square_pvalue(counts, pi)
    assert pval < 1e-6


# ------------------------------------------------------------ conditional accuracy (Fig 7)
def reference_decision_rate(l, eps, batch, rng, n_rep, block=1):
    """Plain NumPy simulation of the sequential-test decisions
    (doc/algorithms/austerity.rst, doc/algorithms/mrf.rst) for fixed terms l: the
    units are the sums of blocks of ``block`` consecutive terms, ``batch`` of them per
    look (two in the first when ``block > 1``)."""
    if block > 1:
        starts = np.arange(0, l.size, block)
        l = np.add.reduceat(l, starts)
    N = l.size
    ones = 0
    for _ in range(n_rep):
        u = rng.random()
        while u == 0.0:
            u = rng.random()
        mu0 = (np.log(u) - np.log1p(-u)) / N
        perm = rng.permutation(N)
        n = 0
        while True:
            n = min(N, n + batch)
            ll = l[perm[:n]]
            if n == N:
                break
            sd = ll.std(ddof=1) / np.sqrt(n) * np.sqrt(1 - (n - 1) / (N - 1))
            if sd > 0 and stdtr(n - 1, -abs((ll.mean() - mu0) / sd)) < eps:
                break
        ones += ll.mean() > mu0
    return ones / n_rep


def pick_states(model, targets, seed):
    """(state, variable, exact conditional) whose conditional is closest to each target,
    among the variables of 20 uniform random states."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 2, size=(20, model.n_vars), dtype=np.uint8)
    P = np.stack([model.conditional_prob(x) for x in X])
    out = []
    for t in targets:
        r, i = np.unravel_index(np.argmin(np.abs(P - t)), P.shape)
        out.append((X[r], int(i), P[r, i]))
    return out


def test_exact_decisions_follow_exact_conditional(paper_model):
    # epsilon = 0: the decision rate is Binomial(n, p) with the exact p
    (x, i, p), = pick_states(paper_model, [0.5], seed=1)
    n = 20000
    n1, frac = GibbsSampler(epsilon=0.0, random_state=2).decide_repeated(paper_model, x, i, n)
    assert frac == 1.0
    assert abs(n1 / n - p) < 4 * np.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("target", [0.1, 0.5, 0.9])
def test_conditional_within_001_at_eps_001(paper_model_sd002, target):
    """Korattikara et al. §6.3: at eps = 0.01 the probability of assigning x_i = 1 is
    within 0.01 of the exact conditional.  Estimated from n repeated decisions at a
    fixed state; we allow 3 binomial standard errors on top of 0.01.

    This holds for log-potential sd 0.02; with variance 0.02 (the default scale,
    sqrt(0.02)) the error reaches ~0.03 (see the next test), so the paper's claim
    points to the sd reading of its N(0, 0.02).
    """
    (x, i, p), = pick_states(paper_model_sd002, [target], seed=0)
    assert abs(p - target) < 0.05
    n = 20000
    n1, frac = GibbsSampler(epsilon=0.01, random_state=3).decide_repeated(
        paper_model_sd002, x, i, n)
    se = np.sqrt(p * (1 - p) / n)
    assert abs(n1 / n - p) < 0.01 + 3 * se, (p, n1 / n)
    assert frac < 1.0


@pytest.mark.slow
def test_conditional_within_001_at_eps_001_grid(paper_model_sd002):
    for x, i, p in pick_states(paper_model_sd002, np.linspace(0.02, 0.98, 13), seed=4):
        n = 40000
        n1, _ = GibbsSampler(epsilon=0.01, random_state=i).decide_repeated(
            paper_model_sd002, x, i, n)
        assert abs(n1 / n - p) < 0.01 + 3 * np.sqrt(p * (1 - p) / n), (p, n1 / n)


def test_decision_rate_matches_numpy_reference(paper_model):
    """The compiled decision agrees with a plain NumPy simulation of the test, here on
    the variance-0.02 model at p ~ 0.9, where the sequential test's error is large
    (the t statistic is dominated by the term noise), so a bug would not hide."""
    (x, i, p), = pick_states(paper_model, [0.9], seed=0)
    a, b = paper_model.factor_ptr[i], paper_model.factor_ptr[i + 1]
    o = paper_model.incidence_other[a:b]
    l = paper_model.incidence_log_ratio[a:b][np.arange(b - a), 2 * x[o[:, 0]] + x[o[:, 1]]]
    assert l.sum() == pytest.approx(np.log(p / (1 - p)), abs=1e-9)
    n_c, n_r = 20000, 3000
    n1, _ = GibbsSampler(epsilon=0.01, block_size=1, random_state=5).decide_repeated(
        paper_model, x, i, n_c)
    rate_c = n1 / n_c
    rate_r = reference_decision_rate(l, 0.01, 500, np.random.default_rng(6), n_r)
    se = np.sqrt(rate_r * (1 - rate_r) * (1 / n_c + 1 / n_r))
    assert abs(rate_c - rate_r) < 4 * se, (rate_c, rate_r)
    # and the error of the approximate conditional really exceeds 0.01 here
    assert p - rate_c > 0.01 + 3 * np.sqrt(p * (1 - p) / n_c)


@pytest.mark.parametrize("block, batch", [(64, 500), (32, 128)])
def test_block_decision_rate_matches_numpy_reference(paper_model, block, batch):
    """The block-unit decision (the default) agrees with a NumPy simulation of the
    t-test on block sums (batches rounded up to whole blocks, two blocks first)."""
    (x, i, p), = pick_states(paper_model, [0.85], seed=2)
    a, b = paper_model.factor_ptr[i], paper_model.factor_ptr[i + 1]
    o = paper_model.incidence_other[a:b]
    l = paper_model.incidence_log_ratio[a:b][np.arange(b - a), 2 * x[o[:, 0]] + x[o[:, 1]]]
    n_c, n_r = 20000, 3000
    s = GibbsSampler(epsilon=0.1, batch_size=batch, block_size=block, random_state=8)
    n1, frac = s.decide_repeated(paper_model, x, i, n_c)
    assert frac < 0.9
    units = -(-batch // block)
    rate_c = n1 / n_c
    rate_r = reference_decision_rate(l, 0.1, units, np.random.default_rng(9), n_r,
                                     block=block)
    se = np.sqrt(rate_r * (1 - rate_r) * (1 / n_c + 1 / n_r))
    assert abs(rate_c - rate_r) < 4 * se, (rate_c, rate_r)


def test_block_permutation_layout():
    ptr = np.array([0, 5, 5, 12], dtype=np.int64)
    from bayes_subsample.mrf import _gibbs_fast
    np.testing.assert_array_equal(_gibbs_fast.block_permutation(ptr, 1), np.arange(12))
    # variable 0: blocks at 0, 3; variable 1: none; variable 2: blocks at 5, 8, 11
    np.testing.assert_array_equal(_gibbs_fast.block_permutation(ptr, 3),
                                  [0, 3, 2, 3, 4, 5, 8, 11, 8, 9, 10, 11])
    with pytest.raises(ValueError, match="block must be >= 1"):
        _gibbs_fast.block_permutation(ptr, 0)


# ----------------------------------------------------------------------------- utilities
def test_subset_marginals_and_errors():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, size=(500, 9)).astype(np.uint8)
    S = random_subsets(9, n_subsets=30, subset_size=3, random_state=1)
    assert S.shape == (30, 3)
    assert np.all(np.diff(S, axis=1) > 0) and S.max() < 9
    P = subset_marginals(X, S, chunk_size=64)
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    for m in range(5):
        codes = 4 * X[:, S[m, 0]] + 2 * X[:, S[m, 1]] + X[:, S[m, 2]]
        np.testing.assert_allclose(P[m], np.bincount(codes, minlength=8) / 500)
    assert subset_l1_error(X, P, S) == pytest.approx(0.0, abs=1e-14)
    trace = l1_error_trace(X, P, S, [10, 100, 500])
    assert trace[-1] == pytest.approx(0.0, abs=1e-14)
    assert trace[0] == pytest.approx(subset_l1_error(X[:10], P, S))
    # (n_chains, n, D) input is pooled
    assert subset_l1_error(X.reshape(2, 250, 9), P, S) == pytest.approx(0.0, abs=1e-14)
    with pytest.raises(ValueError, match="shape"):
        subset_l1_error(X, P[:, :4], S)
    with pytest.raises(ValueError, match="checkpoints"):
        l1_error_trace(X, P, S, [100, 10])
    with pytest.raises(ValueError, match="subsets"):
        subset_marginals(X, S + 9)


def test_subset_marginals_match_enumeration():
    """Marginals from exact samples converge to the exact subset marginals."""
    m = BinaryMRF.random(n_vars=8, order=3, log_potential_scale=0.5, random_state=2)
    pi = m.enumerate_joint()
    S = random_subsets(8, n_subsets=20, subset_size=3, random_state=0)
    exact = np.stack([np.bincount(state_codes(m.all_states(), s), weights=pi, minlength=8)
                      for s in S])
    res = GibbsSampler(random_state=0).sample(m, 30, n_chains=2000)
    err = subset_l1_error(res.states[:, -1, :], exact, S)
    # E||P_hat - P||_1 <= sum_c sqrt(P_c (1 - P_c) / n) <= sqrt(7 / n) for 8 cells
    assert err < np.sqrt(7 / 2000)


def test_calibration_curve():
    p = np.array([0.05, 0.07, 0.5, 0.55, 0.95])
    d = np.array([0, 1, 1, 0, 1])
    mean_exact, observed, counts = calibration_curve(p, d, n_bins=10)
    np.testing.assert_allclose(mean_exact, [0.06, 0.525, 0.95])
    np.testing.assert_allclose(observed, [0.5, 0.5, 1.0])
    np.testing.assert_array_equal(counts, [2, 2, 1])
    _, _, counts = calibration_curve(p, d, n_bins=10, min_count=2)
    np.testing.assert_array_equal(counts, [2, 2])


# ------------------------------------------------- the kernel's draws (Lemire indices)
def test_kernel_draws_without_replacement_uniformly():
    """``_rng.draw_without_replacement`` (the index draws of the approximate
    decisions) gives uniform permutations: all 24 orders of 4 items equally likely,
    and each item of 40 equally likely to be among the first 12 (as in test_rng)."""

    g = np.random.default_rng(10)
    codes = np.zeros(256)
    for _ in range(24_000):
        s = _rng.draw_without_replacement(g, np.arange(4, dtype=np.int64), 0, 4)
        codes[s[0] * 64 + s[1] * 16 + s[2] * 4 + s[3]] += 1
    observed = codes[codes > 0]
    assert observed.size == 24
    assert stats.chisquare(observed)[1] > 1e-4
    n, k, R = 40, 12, 20_000
    counts = np.zeros(n)
    perm = np.arange(n, dtype=np.int64)   # persistent, as in the sampler
    for _ in range(R):
        s = _rng.draw_without_replacement(g, perm, 0, k)
        assert len(np.unique(s)) == k
        counts[s] += 1
    p = k / n
    pearson = np.sum((counts - R * p) ** 2 / (R * p)) / ((1 - p) * n / (n - 1))
    assert stats.chi2.sf(pearson, n - 1) > 1e-4
    with pytest.raises(ValueError, match="cannot draw"):
        _rng.draw_without_replacement(g, perm, 30, 11)


def test_kernel_decision_matches_numpy_replay():
    """One approximate decision = u from the generator, then the indices of
    ``draw_without_replacement``, then the §2 test in NumPy: the kernel gives the
    same decision, the same number examined and the same permutation."""
    from bayes_subsample.mrf import _gibbs_fast

    m = BinaryMRF.random(n_vars=30, order=3, log_potential_scale=0.3, random_state=3)
    eps, batch = 0.1, 40
    rng = np.random.default_rng(0)
    perm = np.arange(m.incidence_other.shape[0], dtype=np.int64)
    early = 0
    for rep in range(200):
        x = rng.integers(0, 2, size=m.n_vars, dtype=np.uint8)
        i = int(rng.integers(m.n_vars))
        a, b = m.factor_ptr[i], m.factor_ptr[i + 1]
        N = b - a
        seed = int(rng.integers(2**32))
        # NumPy replay on a copy of the state
        g = np.random.default_rng(seed)
        u = g.random()
        while u == 0.0:
            u = g.random()
        mu0 = (np.log(u) - np.log1p(-u)) / N
        ref_perm = perm.copy()
        order = _rng.draw_without_replacement(g, ref_perm[a:b], 0, N)
        o = m.incidence_other[order]
        l = m.incidence_log_ratio[order, 2 * x[o[:, 0]] + x[o[:, 1]]]
        n = 0
        while True:
            n = min(N, n + batch)
            ll = l[:n]
            if n == N:
                break
            sd = ll.std(ddof=1) / np.sqrt(n) * np.sqrt(1 - (n - 1) / (N - 1))
            if sd > 0 and stdtr(n - 1, -abs((ll.mean() - mu0) / sd)) < eps:
                break
        # the kernel
        n1, n_ex = _gibbs_fast.decide_repeated(
            m.incidence_log_ratio, m.incidence_other, m.factor_ptr, x, i, perm,
            np.random.default_rng(seed), 1, eps, batch, batch)
        assert (n1, n_ex) == (int(ll.mean() > mu0), n)
        np.testing.assert_array_equal(perm[a:a + n], order[:n])
        early += n < N
    assert early > 50


def test_gibbs_sampler_is_an_estimator_and_first_batch_renamed():
    """GibbsSampler follows scikit-learn's parameter API; the old name of
    first_batch_size works with a FutureWarning and gives the same chain."""
    from sklearn.base import clone
    s = GibbsSampler(epsilon=0.2, batch_size=20, first_batch_size=10, random_state=1)
    assert clone(s).get_params() == s.get_params()
    m = BinaryMRF.random(8, random_state=0)
    ref = s.sample(m, 20).states
    with pytest.warns(FutureWarning, match="first_batch=.*deprecated"):
        old = GibbsSampler(epsilon=0.2, batch_size=20, first_batch=10, random_state=1)
        np.testing.assert_array_equal(old.sample(m, 20).states, ref)
