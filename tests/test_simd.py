"""The SIMD kernels of ``models/_simd.h`` against NumPy.

``bs_exp`` and ``bs_log1p01`` replace libm's exp and log1p in the GLM terms,
``bs_expm1`` and ``bs_log1p`` its expm1 and log1p in the softmax residuals; the
dense row loops of a full pass (dot products, gradient sums) are compiled for
several instruction sets. Each is checked against a plain NumPy reference, in
float32 and float64, and for the properties the package relies on: a datum's
terms and a row's dot product do not depend on where they fall in a block (SIMD
lane or scalar tail), nor on which method computes them.
"""
import numpy as np
import pytest

from bayes_subsample.models import (
    GaussianRegressionModel,
    LogisticRegressionModel,
    PoissonRegressionModel,
)
from bayes_subsample.models._cyglm import _simd_exp, _simd_expm1, _simd_log1p, _simd_log1p01
from bayes_subsample.models._cymultinomial import (
    _softmax_residual_blocks,
    _softmax_terms_blocks,
)
from bayes_subsample.models._rows import _dot_classes, all_finite, make_rows


def ulps(a, ref):
    """|a - ref| in units in the last place of ref."""
    return np.abs(a - ref) / np.spacing(np.abs(ref))


# ---- the math -----------------------------------------------------------------------------
def test_exp_within_one_ulp_of_numpy():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        rng.uniform(-708.0, 709.78, 400_000),
        rng.uniform(-1.0, 1.0, 100_000),
        rng.uniform(-1e-8, 1e-8, 10_000),
        [0.0, -0.0, 1e-300, -1e-300, 0.5 * np.log(2), -0.5 * np.log(2), 709.78, -708.0],
    ])
    assert ulps(_simd_exp(x), np.exp(x)).max() <= 1.0


def test_exp_limits():
    out = _simd_exp([-708.01, -745.2, -1e10, -np.inf, 709.79, 1e10, np.inf, np.nan])
    np.testing.assert_array_equal(out[:4], 0.0)      # below -708: 0 (libm: < 3.3e-308)
    np.testing.assert_array_equal(out[4:7], np.inf)
    assert np.isnan(out[7])
    assert _simd_exp([0.0])[0] == 1.0


def test_log1p01_within_one_ulp_of_numpy():
    rng = np.random.default_rng(1)
    x = np.concatenate([
        rng.uniform(0.0, 1.0, 400_000),
        np.exp(rng.uniform(-745.0, 0.0, 200_000)),   # down to subnormals
        [1.0, np.sqrt(2) - 1, np.nextafter(np.sqrt(2) - 1, 0), np.nextafter(np.sqrt(2) - 1, 1),
         1e-17, 5e-324],
    ])
    ref = np.log1p(x)
    assert ulps(_simd_log1p01(x), ref).max() <= 1.0
    assert _simd_log1p01([0.0])[0] == 0.0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        _simd_log1p01([1.5])


def test_expm1_within_two_ulp_of_numpy():
    rng = np.random.default_rng(2)
    x = np.concatenate([
        rng.uniform(-708.0, 709.78, 200_000),
        rng.uniform(-40.0, 40.0, 200_000),            # the softmax residuals' range
        rng.uniform(-1.0, 1.0, 200_000),              # k = -1, 0, 1: the cancellations
        rng.uniform(-1e-8, 1e-8, 10_000),
        [1e-300, -1e-300, 5e-324, 0.5 * np.log(2), -0.5 * np.log(2), np.log(2), -np.log(2),
         709.5, 709.78, -708.0, -37.0, -38.0],
    ])
    assert ulps(_simd_expm1(x), np.expm1(x)).max() <= 2.0


def test_expm1_limits():
    out = _simd_expm1([-708.01, -1e10, -np.inf, 709.79, 1e10, np.inf, np.nan, 0.0])
    np.testing.assert_array_equal(out[:3], -1.0)
    np.testing.assert_array_equal(out[3:6], np.inf)
    assert np.isnan(out[6]) and out[7] == 0.0


def test_log1p_within_two_ulp_of_numpy():
    rng = np.random.default_rng(3)
    x = np.concatenate([
        rng.uniform(-0.5, 1.0, 300_000),
        np.exp(rng.uniform(-745.0, 0.0, 100_000)),     # down to subnormals
        -np.exp(rng.uniform(-745.0, np.log(0.5), 100_000)),
        np.exp(rng.uniform(0.0, 709.78, 200_000)),     # up to DBL_MAX
        [-0.5, 1.0, np.sqrt(2) - 1, 1e-17, 5e-324, 1e300, np.finfo(float).max],
    ])
    assert ulps(_simd_log1p(x), np.log1p(x)).max() <= 2.0
    out = _simd_log1p([0.0, np.inf, np.nan])
    assert out[0] == 0.0 and out[1] == np.inf and np.isnan(out[2])
    with pytest.raises(ValueError, match=r"\[-0.5, inf\]"):
        _simd_log1p([-0.75])


# ---- the softmax residuals ----------------------------------------------------------------
def _softmax_data(rng, n, K):
    """Classes, predictors and caches at eta* (eta*, p*, lse*) with deviations from
    eta* at several scales: tiny, moderate, beyond 30 (the direct branch), and some
    non-finite predictors."""
    from scipy.special import logsumexp, softmax

    es = rng.normal(0.0, 3.0, (n, K))
    scale = rng.choice([1e-6, 0.05, 1.0, 5.0, 60.0], size=(n, 1))
    eta = es + scale * rng.normal(size=(n, K)) + rng.normal(0.0, 50.0, (n, 1))  # + a shift
    eta[rng.random(n) < 0.01, 0] = np.nan
    eta[rng.random(n) < 0.01, 1] = np.inf
    eta[rng.random(n) < 0.01, 0] = -np.inf
    cache = np.hstack([es, softmax(es, axis=1), logsumexp(es, axis=1)[:, None]])
    return rng.integers(0, K, n).astype(float), eta, cache


@pytest.mark.parametrize("K", [2, 3, 7, 300, 2500])     # 2500: beyond the block's scratch
@pytest.mark.parametrize("order", [0, 1, 2])
def test_softmax_residuals_do_not_depend_on_place_in_block(K, order):
    """A datum's residual and derivatives have the same bits alone, in any block and
    without the derivatives; and they match the direct NumPy definition."""
    from scipy.special import logsumexp, softmax

    rng = np.random.default_rng(K * 10 + order)
    n = 40 if K > 1000 else 613
    y, eta, cache = _softmax_data(rng, n, K)
    D1, DP1 = _softmax_residual_blocks(order, y, eta, cache, 0)
    for block in (1, 3, 7, 64, n):
        D, DP = _softmax_residual_blocks(order, y, eta, cache, block)
        np.testing.assert_array_equal(D, D1)
        np.testing.assert_array_equal(DP, DP1)
    D0, DP0 = _softmax_residual_blocks(order, y, eta, cache, 64, want_dp=False)
    assert DP0 is None
    np.testing.assert_array_equal(D0, D1)
    # against the definition (finite rows; the direct differences cancel |lse|-sized
    # numbers, so the tolerance is relative to those)
    ok = np.isfinite(eta).all(axis=1)
    es, ps = cache[ok, :K], cache[ok, K:2 * K]
    e, yi = eta[ok], y[ok].astype(int)
    delta = e - es
    pd = (ps * delta).sum(1)
    D = logsumexp(e, axis=1) - cache[ok, 2 * K]
    rows = np.arange(ok.sum())
    if order == 0:
        ref = delta[rows, yi] - D
        dref = -softmax(e, axis=1)
        dref[rows, yi] += 1.0
    elif order == 1:
        ref = -(D - pd)
        dref = -(softmax(e, axis=1) - ps)
    else:
        ref = -(D - pd - 0.5 * ((ps * delta ** 2).sum(1) - pd ** 2))
        dref = -(softmax(e, axis=1) - ps - ps * (delta - pd[:, None]))
    mag = np.abs(e).max(1) + np.abs(es).max(1) + (delta ** 2).sum(1) + 1.0
    assert np.all(np.abs(D1[ok] - ref) <= 1e-12 * mag)
    np.testing.assert_allclose(DP1[ok], dref, rtol=0, atol=1e-12 * (1 + np.abs(delta).max()))
    # non-finite predictors stay non-finite (never a finite number made up)
    assert not np.isfinite(D1[~ok]).any()


@pytest.mark.parametrize("K", [2, 3, 7, 300, 2500])     # 2500: beyond the block's scratch
def test_softmax_terms_do_not_depend_on_place_in_block(K):
    """A datum's term, derivatives and probabilities have the same bits alone and
    in any block, and match SciPy's log-sum-exp and softmax."""
    from scipy.special import logsumexp, softmax

    rng = np.random.default_rng(K)
    n = 40 if K > 1000 else 613
    y, eta, _ = _softmax_data(rng, n, K)
    eta[::7] *= 20.0                                 # some far beyond exp's range
    L1, R1, P1 = _softmax_terms_blocks(y, eta, 0)
    for block in (1, 3, 7, 64, n):
        L, R, P = _softmax_terms_blocks(y, eta, block)
        np.testing.assert_array_equal(L, L1)
        np.testing.assert_array_equal(R, R1)
        np.testing.assert_array_equal(P, P1)
    ok = np.isfinite(eta).all(axis=1)
    e, yi, rows = eta[ok], y[ok].astype(int), np.arange(ok.sum())
    ref = e[rows, yi] - logsumexp(e, axis=1)
    assert np.all(np.abs(L1[ok] - ref) <= 4e-16 * (np.abs(e).max(1) + 1.0))
    np.testing.assert_allclose(P1[ok], softmax(e, axis=1), rtol=1e-14, atol=1e-300)
    r = -softmax(e, axis=1)
    r[rows, yi] += 1.0
    np.testing.assert_allclose(R1[ok], r, rtol=1e-14, atol=1e-15)
    assert not np.isfinite(L1[np.isnan(eta).any(axis=1)]).any()


# ---- the GLM terms ------------------------------------------------------------------------
def numpy_terms(family, y, eta, phi=1.0):
    """(ll, r, w) in plain NumPy."""
    from scipy.special import expit, gammaln

    if family == "logistic":
        p = expit(eta)
        return y * eta - np.logaddexp(0.0, eta), y - p, p * expit(-eta)
    if family == "poisson":
        mu = np.exp(eta)
        return y * eta - mu - gammaln(y + 1.0), y - mu, mu
    return (-0.5 * (y - eta) ** 2 / phi - 0.5 * np.log(2 * np.pi * phi), (y - eta) / phi,
            np.full_like(eta, 1.0 / phi))


def model_of(family, n=7, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    if family == "logistic":
        return LogisticRegressionModel(X, (rng.random(n) < 0.5).astype(float))
    if family == "poisson":
        return PoissonRegressionModel(X, rng.poisson(2.0, n).astype(float))
    return GaussianRegressionModel(X, rng.normal(size=n), noise_scale=0.7)


@pytest.mark.parametrize("family", ["logistic", "poisson", "gaussian"])
def test_link_terms_against_numpy(family):
    rng = np.random.default_rng(2)
    m = 1037                                   # not a multiple of any SIMD width
    scale = 30.0 if family != "poisson" else 5.0
    eta = np.concatenate([rng.normal(scale=scale, size=m - 6),
                          [0.0, -0.0, 1e-12, -1e-12, 36.0, -36.0]])
    if family == "logistic":
        y = (rng.random(m) < 0.5).astype(float)
    elif family == "poisson":
        y = rng.poisson(3.0, m).astype(float)
    else:
        y = rng.normal(size=m)
    cy = model_of(family)._cy
    phi = 0.49 if family == "gaussian" else 1.0
    ll, r, w = cy.link_terms_array(y, eta)
    rll, rr, rw = numpy_terms(family, y, eta, phi)
    for a, b in ((ll, rll), (r, rr), (w, rw)):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-300)
    # without the log-likelihood: the same r and w, bit for bit
    _, r2, w2 = cy.link_terms_array(y, eta, want_ll=False)
    np.testing.assert_array_equal(r2, r)
    np.testing.assert_array_equal(w2, w)


@pytest.mark.parametrize("family", ["logistic", "poisson"])
def test_terms_do_not_depend_on_place_in_block(family):
    """A datum in a SIMD lane and in the scalar tail gives the same bits."""
    rng = np.random.default_rng(3)
    m = 203
    eta = rng.normal(scale=4.0, size=m)
    y = rng.poisson(1.0, m).astype(float) if family == "poisson" else \
        (rng.random(m) < 0.5).astype(float)
    cy = model_of(family)._cy
    whole = cy.link_terms_array(y, eta)
    perm = rng.permutation(m)
    permuted = cy.link_terms_array(y[perm], eta[perm])
    singles = [cy.link_terms_array(y[i:i + 1], eta[i:i + 1]) for i in range(m)]
    for k in range(3):
        np.testing.assert_array_equal(permuted[k], whole[k][perm])
        np.testing.assert_array_equal(np.concatenate([s[k] for s in singles]), whole[k])


@pytest.mark.parametrize("order", [0, 1, 2])
def test_logistic_cv_residuals_do_not_depend_on_place_in_block(order):
    """The logistic control-variate residuals (a SIMD block function that
    computes the series and the direct form for every datum and selects one):
    a datum in a lane, in the scalar tail, alone or past a block of 256 gives
    the same bits; on both sides of |eta - eta*| = 0.1 they match a NumPy
    reference of the form used there; non-finite predictors stay non-finite."""
    rng = np.random.default_rng(4)
    m = 613      # two blocks of 256 and a tail
    eta_star = rng.normal(scale=4.0, size=m)
    delta = rng.choice([1e-3, 0.05, 0.0999, 0.1, 0.5, 3.0], m) * rng.choice([-1, 1], m)
    eta = eta_star + delta
    y = (rng.random(m) < 0.5).astype(float)
    cy = model_of("logistic")._cy
    whole = cy.cv_terms_array(order, y, eta, eta_star)
    perm = rng.permutation(m)
    permuted = cy.cv_terms_array(order, y[perm], eta[perm], eta_star[perm])
    singles = [cy.cv_terms_array(order, y[i:i + 1], eta[i:i + 1], eta_star[i:i + 1])
               for i in range(m)]
    for k in range(2):
        np.testing.assert_array_equal(permuted[k], whole[k][perm])
        np.testing.assert_array_equal(np.concatenate([s[k] for s in singles]), whole[k])
    # the NumPy reference (direct form; the series' accuracy near eta* is checked
    # against mpmath in test_control_variates.py)
    e = eta - eta_star
    b = np.logaddexp(0.0, eta) - np.logaddexp(0.0, eta_star)
    s1, s = 1.0 / (1.0 + np.exp(-eta_star)), 1.0 / (1.0 + np.exp(-eta))
    c2 = s1 * (1.0 - s1)
    if order == 0:
        d_ref, dp_ref = y * e - b, y - s
    else:
        d_ref = -(b - s1 * e - (0.5 * c2 * e * e if order == 2 else 0.0))
        dp_ref = -(s - s1 - (c2 * e if order == 2 else 0.0))
    far = np.abs(e) >= 0.5
    np.testing.assert_allclose(whole[0][far], d_ref[far], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(whole[1][far], dp_ref[far], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(whole[0], d_ref, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(whole[1], dp_ref, rtol=1e-6, atol=1e-9)
    bad = cy.cv_terms_array(order, [1.0, 0.0, 1.0], [np.nan, np.inf, -np.inf], [0.0, 0.0, 0.0])
    assert np.isnan(bad[0][0]) and np.isnan(bad[1][0])
    assert not np.isfinite(bad[0][1:]).any()


# ---- the dense row loops ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [1, 2, 3, 6, 7, 8, 9, 16, 28, 30, 31])
@pytest.mark.parametrize("intercept", [True, False])
def test_dense_row_loops_against_numpy(dtype, d, intercept):
    rng = np.random.default_rng(d)
    n = 67
    X = rng.normal(size=(n, d)).astype(dtype)
    rows = make_rows(X, intercept)
    X1 = np.hstack([X.astype(np.float64), np.ones((n, 1))]) if intercept else X.astype(float)
    theta = rng.normal(size=X1.shape[1])
    eps = 64 * np.finfo(np.float64).eps
    scale = np.abs(X1) @ np.abs(theta)
    rng_dot = rows.py_dot_range(0, n, theta)
    assert np.all(np.abs(rng_dot - X1 @ theta) <= eps * scale)
    # the range and the index methods are the same dot product, bit for bit (on x86-64
    # with AVX2 the range runs the four-row AVX2 kernel, the index method the
    # portable loop: every residue of d modulo 4, and row counts not a multiple of 4)
    idx = rng.permutation(n)
    np.testing.assert_array_equal(rows.py_dot(idx, theta), rng_dot[idx])
    np.testing.assert_array_equal(rows.py_dot_range(5, 12, theta), rng_dot[5:12])
    # gradient sums over ranges of every length modulo 4 (the 4-row blocks and the tail)
    c = rng.normal(size=n)
    for start, stop in ((0, n), (3, 3), (2, 3), (1, 6), (10, 17), (4, 64)):
        got = rows.py_add_xt_range(start, stop, c[start:stop])
        ref = c[start:stop] @ X1[start:stop]
        bound = eps * (np.abs(c[start:stop]) @ np.abs(X1[start:stop])) + 1e-300
        assert np.all(np.abs(got - ref) <= bound), (start, stop)
        np.testing.assert_allclose(rows.py_add_xt(np.arange(start, stop), c[start:stop]), ref,
                                   rtol=1e-12, atol=1e-12 * (1 + np.abs(ref).max(initial=0)))


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 8, 55])
@pytest.mark.parametrize("K", [1, 2, 3, 4, 5, 7, 8, 9])
def test_dot_classes_is_row_dot(d, K):
    """The K predictors of a row, four classes at a time, have row_dot's bits (and
    match NumPy), for every remainder of d and K modulo 4."""
    rng = np.random.default_rng(10 * d + K)
    X = rng.normal(size=(37, d)) * rng.choice([0.0, 1.0, 1e3], size=(37, d))
    theta = rng.normal(size=(K, d))
    got = _dot_classes(X, theta)
    np.testing.assert_array_equal(got, _dot_classes(X, theta, by_row_dot=True))
    np.testing.assert_allclose(got, X @ theta.T, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [1, 3, 4, 7, 16, 19, 28, 33])
def test_gradient_sum_in_its_documented_order(dtype, d):
    """``add_xt_range`` adds, per column, the groups of four rows
    ``(c0 x0 + c1 x1) + (c2 x2 + c3 x3)`` in order, then the rows left one by one:
    the same bits whatever kernel runs (on x86-64 with AVX2, columns in registers,
    16 and 4 at a time and the d mod 4 left by masked loads), replayed here in NumPy."""
    rng = np.random.default_rng(40 + d)
    n = 43
    X = rng.normal(size=(n, d)).astype(dtype)
    rows = make_rows(X, True)
    X1 = np.hstack([X.astype(np.float64), np.ones((n, 1))])
    c = rng.normal(size=n)
    c[5] = 1e300           # a large product in a group: no reassociation hides it
    for start, stop in ((0, n), (1, 6), (7, 40), (2, 3)):
        out = np.zeros(d + 1)
        i = start
        while i + 4 <= stop:
            x, ci = X1[i:i + 4], c[i:i + 4]
            out = out + ((ci[0] * x[0] + ci[1] * x[1]) + (ci[2] * x[2] + ci[3] * x[3]))
            i += 4
        for k in range(i, stop):
            out = out + c[k] * X1[k]
        np.testing.assert_array_equal(rows.py_add_xt_range(start, stop, c[start:stop]), out)


@pytest.mark.parametrize("family", ["logistic", "poisson", "gaussian"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_full_pass_against_numpy(family, dtype):
    """The fused pass (dot products, terms, gradient) equals NumPy on the same
    float32 or float64 data, and is bit-identical for any number of threads."""
    rng = np.random.default_rng(5)
    n, d = 20_011, 13
    X = rng.normal(size=(n, d)).astype(dtype)
    theta = rng.normal(scale=0.3, size=d + 1)
    eta = X.astype(np.float64) @ theta[:d] + theta[d]
    if family == "logistic":
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
        model = LogisticRegressionModel(X, y)
    elif family == "poisson":
        y = rng.poisson(np.exp(eta)).astype(float)
        model = PoissonRegressionModel(X, y)
    else:
        y = eta + rng.normal(size=n)
        model = GaussianRegressionModel(X, y, noise_scale=1.0)
    phi = 1.0
    ll_ref, r_ref, _ = numpy_terms(family, y, eta, phi)
    X1 = np.hstack([X.astype(np.float64), np.ones((n, 1))])
    cy = model._cy
    ll1, g1, _ = cy.full_pass(theta, True, True, False, 1)
    ll2, g2, _ = cy.full_pass(theta, True, True, False, 2)
    assert ll1 == ll2
    np.testing.assert_array_equal(g1, g2)
    np.testing.assert_allclose(ll1, ll_ref.sum(), rtol=1e-12)
    g_ref = r_ref @ X1
    np.testing.assert_allclose(g1, g_ref, rtol=1e-10, atol=1e-10 * np.abs(g_ref).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [1, 5, 28, 600])     # 600: the scratch beyond the stack's
@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("one_hot", [False, True])
def test_dense_hessian_sum_against_numpy(dtype, d, intercept, one_hot):
    """The lower triangle of sum_i w_i x_i x_i^T over row ranges of every length
    modulo 8 (eight-row blocks, a padded tail) and across the float32 kernel's
    32-row blocks, weights of both signs; the strict upper triangle is not
    touched. float32 rows may be summed in float32 blocks of 32 rows (AVX2 and
    FMA), each block within FLOAT32_HESSIAN_RTOL of its sum of absolute
    products. ``one_hot``: most columns 0/1 indicators, mostly zero, and some zero
    weights (the rows of the triangle an eight-row block adds only zeros to are
    skipped)."""
    rng = np.random.default_rng(d + 1)
    n = 100
    X = rng.normal(size=(n, d)).astype(dtype)
    if one_hot:
        X[:, d // 3:] = rng.random((n, d - d // 3)) < 0.05
    w = rng.normal(size=n)
    if one_hot:
        w[rng.random(n) < 0.3] = 0.0
    rows = make_rows(X, intercept)
    X1 = np.hstack([X.astype(np.float64), np.ones((n, 1))]) if intercept else X.astype(float)
    p = X1.shape[1]
    eps = 64 * np.finfo(np.float64).eps + rows.hessian_rtol
    for start, stop in ((0, n), (4, 4), (3, 4), (2, 17), (8, 16), (5, 44), (31, 97)):
        H0 = np.full((p, p), 7.0)
        got = rows.py_add_xwx_range(start, stop, w[start:stop], out=H0.copy())
        ww, Xs = w[start:stop], X1[start:stop]
        ref = 7.0 + (Xs * ww[:, None]).T @ Xs
        bound = eps * ((np.abs(Xs) * np.abs(ww)[:, None]).T @ np.abs(Xs) + 7.0)
        low = np.tril_indices(p)
        assert np.all(np.abs(got[low] - ref[low]) <= bound[low]), (start, stop)
        up = np.triu_indices(p, 1)
        np.testing.assert_array_equal(got[up], 7.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_all_finite_against_numpy(dtype):
    """The threaded finiteness check of check_design: NaN and +-inf found at
    every place (the first and last value, the edges of its slices and of its
    4096-value blocks), the largest finite values are finite, any threads."""
    n, d = (3 << 20) // 7 + 5, 7      # m = n d just above 3 * 2^20: three slices
    X = np.random.default_rng(0).normal(size=(n, d)).astype(dtype)
    m = X.size
    assert all_finite(X) and all_finite(X, 2) and all_finite(X, 3)
    X.reshape(-1)[[0, -1]] = np.finfo(dtype).max
    assert all_finite(X, 2)
    S = 3
    places = [0, m - 1, 4095, 4096, m // S - 1, m // S, 2 * m // S, m - 4097]
    for bad in (np.nan, np.inf, -np.inf):
        for k in places:
            Y = X.copy()
            Y.reshape(-1)[k] = bad
            assert not np.isfinite(Y).all()
            assert not all_finite(Y) and not all_finite(Y, 2), (bad, k)
    assert all_finite(np.zeros((0, 3), dtype=dtype))
    with pytest.raises(TypeError, match="C-contiguous"):
        all_finite(np.asfortranarray(X[:10]))
    with pytest.raises(TypeError, match="float32 or float64"):
        all_finite(np.zeros((2, 2), dtype=np.int64))
