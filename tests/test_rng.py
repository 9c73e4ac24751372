"""Tests for the compiled random-number helpers (bayes_subsample._rng) and the
shared sequential t-test (bayes_subsample._seqtest), the two small compiled
building blocks every subsampling sampler uses.

Statistical checks use chi-square tests with a fixed seed and a rejection
threshold of p < 1e-4: the seeds are fixed, so the outcome is deterministic; the
threshold says that a correct sampler would fail with probability 1e-4 over seeds
(no tuning to a lucky seed). The sample sizes (>= 200 expected counts per cell)
detect gross errors with certainty (an index never drawn, an off-by-one range,
a position-dependent Fisher-Yates mistake) and a ~15% bias in a single cell with
high probability; exact equality with numpy's own streams covers the rest.
"""

import numpy as np
import pytest
from scipy import stats

from bayes_subsample import _normal32, _rng, _seqtest

seq_ttest = _seqtest.seq_ttest

P_MIN = 1e-4


def gen(seed=0):
    return np.random.Generator(np.random.PCG64(seed))


# ---------------------------------------------------------------------------
# standard normals
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1, 7, 1000])
def test_standard_normals_equal_generator(k):
    g1, g2 = gen(42), gen(42)
    np.testing.assert_array_equal(_rng.standard_normals(g1, k), g2.standard_normal(k))
    # both generators are left in the same state
    assert g1.bit_generator.state == g2.bit_generator.state
    assert g1.random() == g2.random()


def test_standard_normals_interleaved_with_numpy():
    g1, g2 = gen(3), gen(3)
    a = np.concatenate([_rng.standard_normals(g1, 5), g1.standard_normal(4),
                        _rng.standard_normals(g1, 6)])
    np.testing.assert_array_equal(a, g2.standard_normal(15))


def test_state_advances():
    g = gen(1)
    a, b = _rng.standard_normals(g, 10), _rng.standard_normals(g, 10)
    assert not np.array_equal(a, b)
    s0 = g.bit_generator.state["state"]["state"]
    i1 = _rng.uniform_indices(g, 1000, 50)
    s1 = g.bit_generator.state["state"]["state"]
    i2 = _rng.uniform_indices(g, 1000, 50)
    assert s1 != s0 and not np.array_equal(i1, i2)
    p1 = _rng.sample_without_replacement(g, 1000, 50)
    p2 = _rng.sample_without_replacement(g, 1000, 50)
    assert g.bit_generator.state["state"]["state"] != s1 and not np.array_equal(p1, p2)
    # same seed, same draws
    np.testing.assert_array_equal(_rng.uniform_indices(gen(9), 77, 20),
                                  _rng.uniform_indices(gen(9), 77, 20))
    np.testing.assert_array_equal(_rng.sample_without_replacement(gen(9), 77, 20),
                                  _rng.sample_without_replacement(gen(9), 77, 20))


def test_not_a_generator():
    for bad in (np.random.RandomState(0), 0, None, np.random.PCG64(0)):
        with pytest.raises(TypeError, match="Generator"):
            _rng.standard_normals(bad, 3)
        with pytest.raises(TypeError, match="Generator"):
            _rng.uniform_indices(bad, 3, 3)
        with pytest.raises(TypeError, match="Generator"):
            _rng.sample_without_replacement(bad, 3, 3)


def test_other_bit_generators():
    for bg in (np.random.Philox, np.random.SFC64, np.random.MT19937):
        g1, g2 = np.random.Generator(bg(5)), np.random.Generator(bg(5))
        np.testing.assert_array_equal(_rng.standard_normals(g1, 50), g2.standard_normal(50))


# ---------------------------------------------------------------------------
# uniform indices (with replacement)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 2**31 + 11, 2**62 + 3])
def test_uniform_indices_range(n):
    idx = _rng.uniform_indices(gen(4), n, 5000)
    assert idx.dtype == np.int64 and idx.shape == (5000,)
    assert idx.min() >= 0 and idx.max() < n
    if n == 1:
        assert np.all(idx == 0)
    if n > 2**31:   # the high bits are used too
        assert idx.max() > n // 2


@pytest.mark.parametrize("n", [3, 100, 1000])
def test_uniform_indices_uniform(n):
    k = 200 * n
    counts = np.bincount(_rng.uniform_indices(gen(5), n, k), minlength=n)
    _, p = stats.chisquare(counts)
    assert p > P_MIN


def test_uniform_indices_pairs_independent():
    # consecutive draws: 10 x 10 contingency table of (idx[2i], idx[2i+1])
    n = 10
    idx = _rng.uniform_indices(gen(6), n, 200_000)
    table = np.zeros((n, n))
    np.add.at(table, (idx[0::2], idx[1::2]), 1)
    _, p = stats.chisquare(table.ravel())
    assert p > P_MIN


def test_uniform_indices_validation():
    with pytest.raises(ValueError):
        _rng.uniform_indices(gen(), 0, 3)
    with pytest.raises(ValueError):
        _rng.uniform_indices(gen(), -5, 3)
    assert _rng.uniform_indices(gen(), 5, 0).shape == (0,)


# ---------------------------------------------------------------------------
# sampling without replacement (lazy Fisher-Yates)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("n,k", [(1, 1), (10, 0), (10, 3), (10, 10), (5000, 4999), (100_000, 50)])
def test_without_replacement_distinct(n, k):
    s = _rng.sample_without_replacement(gen(7), n, k)
    assert s.dtype == np.int64 and s.shape == (k,)
    assert len(np.unique(s)) == k
    if k:
        assert s.min() >= 0 and s.max() < n
    if k == n:
        np.testing.assert_array_equal(np.sort(s), np.arange(n))
    # the result owns its memory (not a view on the n-sized work array)
    assert s.base is None or s.base.size == k


def test_without_replacement_inclusion_uniform():
    """Each index is included with probability k/n.

    For a uniformly random k-subset the inclusion indicators have variance
    p(1 - p), p = k/n, and covariance -p(1 - p)/(n - 1), so over R independent
    draws the Pearson statistic sum (c_i - Rp)^2 / (Rp) is distributed as
    (1 - p) n/(n - 1) chi2(n - 1); we rescale by that factor.
    """
    n, k, R = 40, 12, 20_000
    g = gen(8)
    counts = np.zeros(n)
    first = np.zeros(n)
    for _ in range(R):
        s = _rng.sample_without_replacement(g, n, k)
        counts[s] += 1
        first[s[0]] += 1
    p = k / n
    pearson = np.sum((counts - R * p) ** 2 / (R * p)) / ((1 - p) * n / (n - 1))
    assert stats.chi2.sf(pearson, n - 1) > P_MIN
    assert stats.chi2.cdf(pearson, n - 1) > P_MIN   # not suspiciously regular either
    # the first position is an iid uniform draw: plain chi-square
    assert stats.chisquare(first)[1] > P_MIN


def test_without_replacement_all_orders_equally_likely():
    # n = 4, k = 4: all 24 permutations equally likely
    g = gen(10)
    codes = np.zeros(256)
    R = 24_000
    for _ in range(R):
        s = _rng.sample_without_replacement(g, 4, 4)
        codes[s[0] * 64 + s[1] * 16 + s[2] * 4 + s[3]] += 1
    observed = codes[codes > 0]
    assert observed.size == 24
    assert stats.chisquare(observed)[1] > P_MIN


def test_without_replacement_validation():
    for n, k in [(5, 6), (5, -1), (0, 1)]:
        with pytest.raises(ValueError, match="distinct"):
            _rng.sample_without_replacement(gen(), n, k)


# ---------------------------------------------------------------------------
# sequential t-test (doc/algorithms/austerity.rst)
# ---------------------------------------------------------------------------
def _expected_n(N, first_batch, batch_size, n_batches):
    return min(N, first_batch + (n_batches - 1) * batch_size)


@pytest.mark.parametrize("seed", range(5))
def test_seq_ttest_eps0_is_exact(seed):
    rng = np.random.default_rng(seed)
    N = 1000
    x = rng.normal(0.0, 1.0, N)
    for mu0 in (x.mean() - 0.05, x.mean() + 0.05, -3.0, 3.0):
        accept, n, nb = seq_ttest(x, mu0, 0.0, 10, 7)
        assert n == N
        assert accept == (x.mean() > mu0)
        assert n == _expected_n(N, 10, 7, nb)


def test_seq_ttest_decision_matches_examined_mean():
    """When the test stops early, it decides by the sign of (mean of the examined
    terms - mu0), and the number examined follows the batch schedule."""
    rng = np.random.default_rng(11)
    stopped_early = 0
    for rep in range(300):
        N = 2000
        x = rng.normal(rng.normal(0, 0.3), 1.0, N)
        mu0 = rng.normal(0, 0.3)
        eps = rng.choice([0.01, 0.05, 0.2])
        fb, bs = int(rng.integers(2, 60)), int(rng.integers(1, 80))
        accept, n, nb = seq_ttest(x, mu0, eps, fb, bs)
        assert 2 <= n <= N and nb >= 1
        assert n == _expected_n(N, fb, bs, nb)
        m = x[:n].mean()
        if abs(m - mu0) > 1e-12:
            assert accept == (m > mu0)
        stopped_early += n < N
    assert stopped_early > 100   # the test does stop early on most of these problems


def test_seq_ttest_stops_early_and_is_right_on_clear_cases():
    rng = np.random.default_rng(12)
    x = rng.normal(1.0, 1.0, 100_000)
    accept, n, _ = seq_ttest(x, 0.0, 0.05, 50, 50)
    assert accept and n == 50
    accept, n, _ = seq_ttest(x, 2.0, 0.05, 50, 50)
    assert not accept and n == 50


def test_seq_ttest_error_rate():
    """Decision error rate vs the exact (all-data) decision is small and grows with eps."""
    rng = np.random.default_rng(13)
    N = 500
    errors = {0.01: 0, 0.2: 0}
    reps = 400
    for _ in range(reps):
        x = rng.normal(0, 1, N)
        mu0 = x.mean() + rng.normal(0, 0.05)
        exact = x.mean() > mu0
        for eps in errors:
            errors[eps] += seq_ttest(x, mu0, eps, 20, 20)[0] != exact
    assert errors[0.01] <= errors[0.2]
    assert errors[0.01] / reps < 0.05


def test_seq_ttest_constant_terms_examine_everything():
    x = np.full(100, 2.0)
    accept, n, _ = seq_ttest(x, 1.0, 0.5, 5, 5)
    assert accept and n == 100   # zero spread: never decides early


def test_seq_ttest_small_population():
    assert seq_ttest(np.array([1.0]), 0.0, 0.1, 2, 1) == (True, 1, 1)
    accept, n, nb = seq_ttest(np.array([1.0, -3.0]), 0.0, 0.1, 2, 1)
    assert (accept, n, nb) == (False, 2, 1)


def test_seq_ttest_validation():
    x = np.ones(10)
    for fb, bs in [(1, 5), (0, 5), (2, 0), (5, -1)]:
        with pytest.raises(ValueError, match="first_batch"):
            seq_ttest(x, 0.0, 0.1, fb, bs)
    for eps in (-0.1, 1.0, 2.0):
        with pytest.raises(ValueError, match="eps"):
            seq_ttest(x, 0.0, eps, 2, 2)
    with pytest.raises(ValueError, match="at least one"):
        seq_ttest(np.empty(0), 0.0, 0.1, 2, 2)
    with pytest.raises(ValueError):   # not contiguous
        seq_ttest(np.ones(20)[::2], 0.0, 0.1, 2, 2)


# ---------------------------------------------------------------------------
# batch update (seqtest_push_batch, Chan et al. merge) vs per-term Welford
# ---------------------------------------------------------------------------
def _exact_check(x, n, mu0, eps):
    """The §2 rule on the first n terms in exact rational arithmetic (one rounding
    at the end): returns (decide now, accept, distance of the deciding statistic
    from its threshold, relative)."""
    from fractions import Fraction

    N = x.size
    xs = [Fraction(float(v)) for v in x[:n]]
    m = sum(xs) / n
    diff = float(m - Fraction(float(mu0)))
    accept = diff > 0
    if n >= N:
        return True, accept, abs(diff) / max(1.0, float(np.abs(x).max()))
    if n < 2 or eps <= 0:
        return False, accept, np.inf
    var = float(sum((q - m) ** 2 for q in xs) / (n - 1))
    s = np.sqrt(var / n * (1.0 - (n - 1.0) / (N - 1.0)))
    if s == 0:
        return False, accept, np.inf
    p = stats.t.sf(abs(diff) / s, n - 1)
    return bool(p < eps), accept, abs(p - eps) / eps


def test_seq_ttest_batch_update_matches_per_term_welford():
    """The batch update changes only rounding: the same decision, number examined
    and number of checks as the per-term Welford update; where the two differ, a
    statistic is within rounding of its threshold and the batch update is the one
    that agrees with exact arithmetic (on data with a large common offset, per-term
    Welford loses ~1e-4 of the p-value; this happens in ~1 case in 10^4)."""
    rng = np.random.default_rng(21)
    n_cases = differ = stopped_early = 0
    for rep in range(3000):
        N = int(rng.integers(2, 3000))
        kind = rep % 4
        if kind == 0:
            x = rng.normal(rng.normal(0, 0.3), 1.0, N)
        elif kind == 1:
            x = rng.standard_t(2, N) * 10.0 ** rng.uniform(-6, 6)      # heavy tails, any scale
        elif kind == 2:
            x = 1e6 + rng.normal(0, 1e-3, N)                            # large offset
        else:
            x = np.repeat(rng.normal(size=int(rng.integers(1, 5))), N)[:N]  # few distinct values
            rng.shuffle(x)
        mu0 = x.mean() + rng.normal(0, 1) * x.std() / np.sqrt(N)
        eps = float(rng.choice([0.0, 0.01, 0.05, 0.2]))
        fb, bs = int(rng.integers(2, 600)), int(rng.integers(1, 700))
        a = seq_ttest(x, mu0, eps, fb, bs)
        b = seq_ttest(x, mu0, eps, fb, bs, per_term=True)
        n_cases += 1
        stopped_early += b[1] < N
        if a != b:
            differ += 1
            n = min(a[1], b[1])
            stop, accept, dist = _exact_check(x, n, mu0, eps)
            assert dist < 1e-3, (rep, a, b, dist)     # a near tie, not a real difference
            if dist > 1e-9:                           # batch update agrees with exact
                assert (a[1] == n) == stop, (rep, a, b)
                if a[1] == n:
                    assert a[0] == accept, (rep, a, b)
    assert differ <= 0.01 * n_cases
    assert stopped_early > 500


def test_exact_check_replays_seq_ttest():
    """_exact_check (used above) is the same rule as seq_ttest."""
    rng = np.random.default_rng(3)
    for _ in range(30):
        N = int(rng.integers(10, 400))
        x = rng.normal(0.1, 1.0, N)
        eps, fb = 0.1, int(rng.integers(2, 30))
        accept, n, nb = seq_ttest(x, 0.0, eps, fb, fb)
        for k in range(1, nb):
            assert not _exact_check(x, k * fb, 0.0, eps)[0]
        stop, acc, _ = _exact_check(x, n, 0.0, eps)
        assert stop and acc == accept


@pytest.mark.parametrize("c", [2.0, 0.1, 1 / 3, -2.7, 1e-300, 1e300])
@pytest.mark.parametrize("batch", [2, 7, 255, 256, 257, 600])
def test_seq_ttest_constant_terms_any_value_examine_everything(c, batch):
    """M2 stays exactly 0 for equal terms (a plain batch sum / b can round away
    from c and leave a spurious spread that would stop the test at once)."""
    x = np.full(2000, c)
    mu0 = 0.0
    for per_term in (False, True):
        accept, n, _ = seq_ttest(x, mu0, 0.5, batch, batch, per_term=per_term)
        assert n == 2000 and accept == (c > mu0)


# ---------------------------------------------------------------------------
# float32 standard normals (_normal32: the ziggurat of the float32 models' noise)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1, 2, 7, 20_000])
def test_normal32_fill_equals_its_python_definition(k):
    """The compiled fill and ``reference_normals`` (plain Python, the same
    ziggurat): the same float32 numbers and the same generator state after;
    20,000 draws pass every path (about 140 slow-path draws, a few from the
    tail beyond r)."""
    g1, g2 = gen(11), gen(11)
    a = _normal32.standard_normals_f32(g1, k)
    b = _normal32.reference_normals(g2, k)
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    assert g1.bit_generator.state == g2.bit_generator.state
    if k == 20_000:
        assert np.any(np.abs(a) > _normal32.R)


def test_normal32_paths_are_all_taken():
    """Over 100,000 draws the slow path (wedges and tail) is taken: draws
    beyond the base layer's edge r come from the tail."""
    x = _normal32.standard_normals_f32(gen(5), 100_000)
    assert np.sum(np.abs(x) > _normal32.R) > 0


def test_normal32_law():
    """Two million draws against N(0, 1): the Kolmogorov-Smirnov test, a
    chi-square over 60 equal-probability cells (the layers' edges fall inside
    them), the tails beyond r = 3.654 and beyond 4.5 (Poisson counts), and the
    first four moments (z-scores). p < 1e-4 fails."""
    x = _normal32.standard_normals_f32(gen(2024), 2_000_000).astype(np.float64)
    n = x.size
    assert stats.kstest(x, "norm").pvalue > P_MIN
    edges = stats.norm.ppf(np.linspace(0, 1, 61)[1:-1])
    counts = np.bincount(np.searchsorted(edges, x), minlength=60)
    assert stats.chisquare(counts).pvalue > P_MIN
    for t in (_normal32.R, 4.5):
        k, lam = np.sum(np.abs(x) > t), n * 2 * stats.norm.sf(t)
        assert stats.poisson.cdf(k, lam) > P_MIN / 2 and stats.poisson.sf(k - 1, lam) > P_MIN / 2
    # moments: E x = 0, E x^2 = 1, E x^3 = 0, E x^4 = 3 (sds 1, sqrt 2, sqrt 15, sqrt 96)
    for power, mean, sd in ((1, 0.0, 1.0), (2, 1.0, 2 ** 0.5), (3, 0.0, 15 ** 0.5),
                            (4, 3.0, 96 ** 0.5)):
        z = (np.mean(x ** power) - mean) / (sd / np.sqrt(n))
        assert abs(z) < 4.0, (power, z)
