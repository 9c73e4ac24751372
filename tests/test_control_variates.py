"""Tests for bayes_subsample.control_variates (doc/algorithms/building_blocks.rst).

* Q(theta) and grad Q against brute-force sums of the per-datum expansions q_k.
* The residual d_k = l_k - q_k: equal to the direct difference for moderate delta,
  and accurate to < 1e-8 relative at delta = 1e-6 against a 60-digit mpmath
  reference (logistic and Poisson, d and d', orders 1 and 2), where l_k - q_k
  itself has lost every digit.
* The difference estimator: unbiased (Monte Carlo mean within 4 standard errors,
  the standard error computed exactly from the population of d_k), sigma2_hat
  formula, the perturbed estimator's gradient against central finite
  differences with the subsample held fixed, gradient estimate unbiased.
* The generic (FunctionModel) path agrees with the compiled GLM path at orders 0
  and 1; the Gaussian model at order 2 has d == 0 exactly.
"""

import numpy as np
import pytest
from scipy.special import expit, gammaln

from bayes_subsample.control_variates import TaylorControlVariate
from bayes_subsample.models import GLM

FAMILIES = ["logistic", "poisson", "gaussian"]
DTYPES = [np.float64, np.float32]
ORDERS = [0, 1, 2]
NOISE_SCALE = 1.3


def make_model(family, dtype=np.float64, n=2000, d=3, seed=0, fit_intercept=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=0.7, size=(n, d)).astype(dtype)
    p = d + int(fit_intercept)
    theta_true = rng.normal(scale=0.5, size=p)
    X1 = design(X, fit_intercept)
    eta = X1 @ theta_true
    if family == "logistic":
        y = (rng.random(n) < expit(eta)).astype(float)
    elif family == "poisson":
        y = rng.poisson(np.exp(eta)).astype(float)
    else:
        y = eta + NOISE_SCALE * rng.normal(size=n)
    kw = {"noise_scale": NOISE_SCALE} if family == "gaussian" else {}
    model = GLM(X, y, family, fit_intercept=fit_intercept, **kw)
    # expansion point near (not at) the truth, and a nearby evaluation point
    theta_star = theta_true + rng.normal(scale=0.05, size=p)
    theta = theta_star + rng.normal(scale=0.1, size=p)
    return model, theta_star, theta


def design(X, fit_intercept=True):
    X64 = np.asarray(X, dtype=np.float64)
    return np.column_stack([X64, np.ones(X64.shape[0])]) if fit_intercept else X64


def ref_terms(model, theta):
    """(eta, l, r = dl/deta, w = -d2l/deta2) in NumPy for all data."""
    X1 = design(model.X, model.fit_intercept)
    eta = X1 @ theta
    y, phi = model.y, model.phi
    if model.family == "logistic":
        return eta, y * eta - np.logaddexp(0, eta), y - expit(eta), expit(eta) * expit(-eta)
    if model.family == "poisson":
        mu = np.exp(eta)
        return eta, y * eta - mu - gammaln(y + 1), y - mu, mu
    return (eta, -0.5 * (y - eta) ** 2 / phi - 0.5 * np.log(2 * np.pi * phi), (y - eta) / phi,
            np.full_like(eta, 1 / phi))


def ref_q(model, theta_star, theta, order):
    """Per-datum q_k, grad q_k and a magnitude scale of the pieces, brute force."""
    X1 = design(model.X, model.fit_intercept)
    _, ls, rs, ws = ref_terms(model, theta_star)
    delta = X1 @ (theta - theta_star)
    q, dq = ls.copy(), np.zeros(len(ls))
    scale = 1 + np.abs(ls)
    if order >= 1:
        q += rs * delta
        dq += rs
        scale += np.abs(rs * delta)
    if order == 2:
        q -= 0.5 * ws * delta**2
        dq -= ws * delta
        scale += np.abs(ws * delta**2)
    return q, dq[:, None] * X1, scale


def exact_residuals(model, cv, theta):
    """d_k for every datum (population for exact standard errors)."""
    return cv.residual_derivatives(theta, np.arange(model.n_data))[0]


# ---------------------------------------------------------------------------
# Q(theta) and its gradient
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ORDERS)
def test_Q_and_grad_Q_vs_bruteforce(family, dtype, order):
    model, theta_star, theta = make_model(family, dtype)
    cv = TaylorControlVariate(model, theta_star, order=order)
    assert cv.n_evals == model.n_data
    q, gq, scale = ref_q(model, theta_star, theta, order)
    atol_q, atol_g = 1e-12 * scale.sum(), 1e-12 * np.abs(gq).sum()
    rtol = model.compiled.rows.hessian_rtol
    if order == 2 and rtol:
        # the Hessian sum B of dense float32 rows, summed in float32 blocks: each
        # entry within rtol of sum_k |w_k x_kj x_kl|
        X1 = np.abs(design(model.X, model.fit_intercept))
        w = np.abs(ref_terms(model, theta_star)[3])
        a = X1 @ np.abs(theta - theta_star)
        atol_q += 0.5 * rtol * np.sum(w * a * a)
        atol_g += rtol * np.max((w * a) @ X1)
    np.testing.assert_allclose(cv.Q(theta), q.sum(), rtol=1e-11, atol=atol_q)
    np.testing.assert_allclose(cv.grad_Q(theta), gq.sum(axis=0), rtol=1e-11, atol=atol_g)
    # at the centre Q is the full log-likelihood and grad Q its gradient (order >= 1)
    ll, g, _ = model.full_pass(theta_star)
    np.testing.assert_allclose(cv.Q(theta_star), ll, rtol=1e-14)
    if order == 0:
        np.testing.assert_array_equal(cv.A, 0.0)
    else:
        np.testing.assert_allclose(cv.grad_Q(theta_star), g, rtol=1e-14)
    if order < 2:
        np.testing.assert_array_equal(cv.B, 0.0)


# ---------------------------------------------------------------------------
# residuals d_k
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ORDERS)
def test_residual_equals_l_minus_q(family, dtype, order, rng):
    model, theta_star, theta = make_model(family, dtype)
    cv = TaylorControlVariate(model, theta_star, order=order)
    theta_far = theta_star + 3 * (theta - theta_star)  # delta of order 0.3-1
    idx = rng.integers(0, model.n_data, 300)
    for th in (theta, theta_far):
        q, gq, scale = ref_q(model, theta_star, th, order)
        _, l, r, _ = ref_terms(model, th)
        d, grad_d = cv.residuals(th, idx)
        np.testing.assert_allclose(d, (l - q)[idx], rtol=0, atol=1e-12 * scale[idx].max())
        X1 = design(model.X, model.fit_intercept)
        gl = r[:, None] * X1
        np.testing.assert_allclose(grad_d, (gl - gq)[idx], rtol=1e-11,
                                   atol=1e-12 * np.abs(gl[idx]).max())
        # the scalar form: grad d_k = d'_k x_k, and the kernel's own sum
        d2, dp = cv.residual_derivatives(th, idx)
        np.testing.assert_array_equal(d2, d)
        np.testing.assert_allclose(dp[:, None] * X1[idx], grad_d, rtol=1e-15, atol=1e-300)
        g, dsum = model.compiled.cv_grad_sum_terms(order, theta_star, th, idx)
        np.testing.assert_allclose(dsum, d.sum(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(g, grad_d.sum(axis=0), rtol=1e-12, atol=1e-12)


def test_residual_derivatives_match_scalar_kernel(rng):
    model, theta_star, theta = make_model("logistic")
    cv = TaylorControlVariate(model, theta_star, order=2)
    idx = rng.integers(0, model.n_data, 50)
    eta, eta_s = model.compiled.eta(theta, idx), model.compiled.eta(theta_star, idx)
    d, dp = cv.residual_derivatives(theta, idx)
    for i in range(50):
        ds, dps = scalar_residual("logistic", 2, model.y[idx[i]], eta[i], eta_s[i])
        assert (ds, dps) == (d[i], dp[i])


def scalar_residual(family, order, y, eta, eta_star):
    """``(d, d')`` of one datum from its linear predictors: the family's compiled
    residual (unit dispersion)."""
    cy = GLM(np.zeros((1, 1)), np.zeros(1), family).compiled
    d, dp = cy.cv_terms_array(order, [y], [eta], [eta_star])
    return d[0], dp[0]


def _mp_reference(family, order, eta, eta_star):
    """(d, d') with 60 significant digits (orders 1, 2; y-free: the y terms cancel)."""
    mp = pytest.importorskip("mpmath")
    with mp.workdps(60):
        e, es = mp.mpf(float(eta)), mp.mpf(float(eta_star))
        de = e - es   # the exact difference of the two doubles
        if family == "logistic":
            def b(t):
                return mp.log1p(mp.exp(t))

            def b1(t):
                return 1 / (1 + mp.exp(-t))

            def b2(t):
                return b1(t) * b1(-t)
        else:
            b = b1 = b2 = mp.exp
        c2 = b2(es) if order == 2 else 0
        d = -(b(e) - b(es) - b1(es) * de - c2 * de**2 / 2)
        dp = -(b1(e) - b1(es) - c2 * de)   # order 1: no quadratic term subtracted
        return float(d), float(dp)


def _series_reference(family, order, eta, eta_star):
    """Fallback without mpmath: Taylor series of the remainder in long double."""
    ld = np.longdouble
    es = ld(eta_star)
    de = ld(eta) - es
    if family == "logistic":
        p = 1 / (1 + np.exp(-es))
        w = p * (1 - p)
        b3, b4, b5 = w * (1 - 2 * p), w * (1 - 6 * w), w * (1 - 2 * p) * (1 - 12 * w)
    else:
        w = b3 = b4 = b5 = np.exp(es)
    d = -(b3 * de**3 / 6 + b4 * de**4 / 24 + b5 * de**5 / 120)
    dp = -(b3 * de**2 / 2 + b4 * de**3 / 6 + b5 * de**4 / 24)
    if order == 1:
        d -= w * de**2 / 2
        dp -= w * de
    return float(d), float(dp)


def _reference(family, order, eta, eta_star):
    try:
        import mpmath  # noqa: F401
    except ImportError:
        return _series_reference(family, order, eta, eta_star)
    return _mp_reference(family, order, eta, eta_star)


@pytest.mark.parametrize("family", ["logistic", "poisson"])
@pytest.mark.parametrize("order", [1, 2])
def test_residual_accurate_for_small_delta(family, order):
    worst = 0.0
    for eta_star in (-6.0, -2.3, -0.4, 0.0, 0.37, 1.5, 4.0):
        for delta in (1e-6, -1e-6, 3e-7, -7.7e-6):
            eta = eta_star + delta
            for y in (0.0, 1.0):  # orders 1-2 do not depend on y
                d, dp = scalar_residual(family, order, y, eta, eta_star)
                rd, rdp = _reference(family, order, eta, eta_star)
                worst = max(worst, abs(d - rd) / abs(rd), abs(dp - rdp) / abs(rdp))
    assert worst < 1e-8, worst
    # the naive l - q loses everything there: make sure the test would notice
    es, de = 0.37, 1e-6
    naive = -(np.logaddexp(0, es + de) - np.logaddexp(0, es) - expit(es) * de
              - 0.5 * expit(es) * expit(-es) * de**2)
    rd, _ = _reference("logistic", 2, es + de, es)
    assert abs(naive - rd) / abs(rd) > 1e-3


@pytest.mark.parametrize("family", ["logistic", "poisson"])
def test_residual_accuracy_over_delta_range(family):
    """Across |delta| in [1e-8, 1]: relative error small where the series is used,
    and absolute error at rounding level (relative to the log-likelihood terms)
    everywhere, including just past the series/direct switch points."""
    pytest.importorskip("mpmath")
    for eta_star in (-2.0, 0.0, 0.8):
        for delta in np.concatenate([np.geomspace(1e-8, 1.0, 25), [1.9e-3, 2.1e-3, 9e-3, 1.1e-2]]):
            for sgn in (1, -1):
                eta = eta_star + sgn * delta
                for order in (1, 2):
                    d, dp = scalar_residual(family, order, 0.0, eta, eta_star)
                    rd, rdp = _mp_reference(family, order, eta, eta_star)
                    b_scale = 1.0 + abs(eta) + np.exp(min(eta, 30.0))
                    assert abs(d - rd) <= 1e-15 * b_scale + 1e-6 * abs(rd)
                    assert abs(dp - rdp) <= 1e-15 * b_scale + 1e-6 * abs(rdp)
                    if delta <= 1e-3:
                        assert abs(d - rd) <= 1e-6 * abs(rd)


# ---------------------------------------------------------------------------
# the estimators
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("order", ORDERS)
def test_estimate_formula(family, order, rng):
    model, theta_star, theta = make_model(family)
    cv = TaylorControlVariate(model, theta_star, order=order)
    idx = rng.integers(0, model.n_data, 64)
    q, _, _ = ref_q(model, theta_star, theta, order)
    _, l, _, _ = ref_terms(model, theta)
    D = (l - q)[idx]
    n, m = model.n_data, len(idx)
    ell, sigma2 = cv.estimate(theta, idx)
    np.testing.assert_allclose(ell, q.sum() + n * D.mean(), rtol=1e-11)
    np.testing.assert_allclose(sigma2, n**2 / m**2 * np.sum((D - D.mean()) ** 2), rtol=1e-7,
                               atol=1e-9)
    lam, _ = cv.perturbed_loglik_and_grad(theta, idx)
    np.testing.assert_allclose(lam, ell - 0.5 * sigma2, rtol=1e-13)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("order", ORDERS)
def test_estimator_unbiased(family, order):
    model, theta_star, theta = make_model(family, n=1000)
    cv = TaylorControlVariate(model, theta_star, order=order)
    ll = model.log_likelihood(theta)
    n, m, R = model.n_data, 25, 1500
    d_pop = exact_residuals(model, cv, theta)
    var_ell = n**2 * d_pop.var() / m            # exact variance of ell_hat (iid indices)
    sub = np.random.default_rng(1).integers(0, n, size=(R, m))
    est = np.array([cv.estimate(theta, u) for u in sub])
    if family == "gaussian" and order == 2:
        assert var_ell == 0.0
        np.testing.assert_allclose(est[:, 0], ll, rtol=1e-12)
        np.testing.assert_array_equal(est[:, 1], 0.0)
        return
    # 4 exact standard errors: a false alarm has probability 6e-5 (CLT, R = 1500)
    assert abs(est[:, 0].mean() - ll) < 4 * np.sqrt(var_ell / R)
    # E[sigma2_hat] = (m - 1) / m * Var(ell_hat) (divisor m, not m - 1); sd of the
    # Monte Carlo mean from the sample (sigma2_hat is skewed: use 5 sd)
    s2 = est[:, 1]
    assert abs(s2.mean() - (m - 1) / m * var_ell) < 5 * s2.std() / np.sqrt(R)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ORDERS)
def test_perturbed_gradient_finite_differences(family, dtype, order, rng):
    model, theta_star, theta = make_model(family, dtype)
    cv = TaylorControlVariate(model, theta_star, order=order)
    idx = rng.integers(0, model.n_data, 50)
    _, g = cv.perturbed_loglik_and_grad(theta, idx)
    h = 1e-5
    fd = np.empty_like(g)
    for j in range(len(theta)):
        e = np.zeros_like(theta)
        e[j] = h
        fd[j] = (cv.perturbed_loglik_and_grad(theta + e, idx)[0]
                 - cv.perturbed_loglik_and_grad(theta - e, idx)[0]) / (2 * h)
    # FD error: rounding eps |lam| / h ~ 1e-8 plus truncation h^2 |lam'''| ~ 1e-7
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * (1 + np.abs(g).max()))


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("order", ORDERS)
def test_grad_estimate_unbiased(family, order):
    model, theta_star, theta = make_model(family, n=1000)
    cv = TaylorControlVariate(model, theta_star, order=order)
    n = model.n_data
    _, g_full, _ = model.full_pass(theta)
    # every datum once (m = n): the estimate is the full gradient, an exact identity
    np.testing.assert_allclose(cv.grad_estimate(theta, np.arange(n)), g_full, rtol=1e-10,
                               atol=1e-10 * np.abs(g_full).max())
    # iid subsamples: Monte Carlo mean within 4 exact standard errors per component
    m, R = 20, 1500
    _, grad_d_pop = cv.residuals(theta, np.arange(n))
    se = np.sqrt(n**2 * grad_d_pop.var(axis=0) / m / R)
    sub = np.random.default_rng(2).integers(0, n, size=(R, m))
    G = np.array([cv.grad_estimate(theta, u) for u in sub])
    if family == "gaussian" and order == 2:
        np.testing.assert_allclose(G, np.broadcast_to(g_full, G.shape), rtol=1e-10, atol=1e-9)
        return
    assert np.all(np.abs(G.mean(axis=0) - g_full) < 4 * se + 1e-9)
    # it is grad Q + n/m sum grad d over the subsample
    u = sub[0]
    _, gd = cv.residuals(theta, u)
    np.testing.assert_allclose(G[0], cv.grad_Q(theta) + n / m * gd.sum(axis=0), rtol=1e-12,
                               atol=1e-10)


# ---------------------------------------------------------------------------
# generic path, Gaussian exactness, validation
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("order", [0, 1])
def test_generic_path_matches_glm(family, order, rng, as_user_model):
    glm, theta_star, theta = make_model(family, n=3000)
    user = as_user_model(glm)
    cv_g = TaylorControlVariate(glm, theta_star, order=order)
    cv_u = TaylorControlVariate(user, theta_star, order=order)
    assert glm.max_cv_order == 2 and user.max_cv_order == 1
    np.testing.assert_allclose(cv_u.L_star, cv_g.L_star, rtol=1e-12)
    np.testing.assert_allclose(cv_u.A, cv_g.A, rtol=1e-10, atol=1e-10)
    idx = rng.integers(0, glm.n_data, 80)
    # the generic path forms l - q directly: agreement to rounding of |l_k|
    atol = 1e-12 * (1 + np.abs(glm.loglik_terms(theta, idx)).max())
    d_g, gd_g = cv_g.residuals(theta, idx)
    d_u, gd_u = cv_u.residuals(theta, idx)
    np.testing.assert_allclose(d_u, d_g, rtol=1e-9, atol=atol)
    np.testing.assert_allclose(gd_u, gd_g, rtol=1e-9, atol=1e-12)
    n = glm.n_data
    e_g, e_u = cv_g.estimate(theta, idx), cv_u.estimate(theta, idx)
    np.testing.assert_allclose(e_u[0], e_g[0], rtol=1e-10)
    np.testing.assert_allclose(e_u[1], e_g[1], rtol=1e-7, atol=n**2 * atol**2)
    l_g, g_g = cv_g.perturbed_loglik_and_grad(theta, idx)
    l_u, g_u = cv_u.perturbed_loglik_and_grad(theta, idx)
    np.testing.assert_allclose(l_u, l_g, rtol=1e-10)
    np.testing.assert_allclose(g_u, g_g, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(cv_u.grad_estimate(theta, idx), cv_g.grad_estimate(theta, idx),
                               rtol=1e-9, atol=1e-9)


def test_gaussian_order2_is_exact(rng):
    model, theta_star, theta = make_model("gaussian")
    cv = TaylorControlVariate(model, theta_star, order=2)
    for th in (theta, theta_star + 10.0):
        idx = rng.integers(0, model.n_data, 40)
        d, dp = cv.residual_derivatives(th, idx)
        assert np.all(d == 0.0) and np.all(dp == 0.0)
        ll, g, _ = model.full_pass(th)
        ell, s2 = cv.estimate(th, idx)
        assert s2 == 0.0
        np.testing.assert_allclose(ell, ll, rtol=1e-12)
        _, glam = cv.perturbed_loglik_and_grad(th, idx)
        np.testing.assert_allclose(glam, g, rtol=1e-10, atol=1e-9)
    # order 1 is not exact (it is what exercises subsampling)
    cv1 = TaylorControlVariate(model, theta_star, order=1)
    assert np.any(cv1.residual_derivatives(theta, np.arange(10))[0] != 0.0)


def test_order0_residual_derivative_is_full_score(rng):
    model, theta_star, theta = make_model("poisson")
    cv = TaylorControlVariate(model, theta_star, order=0)
    idx = rng.integers(0, model.n_data, 30)
    _, dp = cv.residual_derivatives(theta, idx)
    _, _, r, _ = ref_terms(model, theta)
    np.testing.assert_allclose(dp, r[idx], rtol=1e-12, atol=1e-12)


def test_logistic_order0_score_has_the_full_pass_bits(rng):
    """The scalar sigmoid of the residuals and the SIMD block terms of the passes
    compute y - sigmoid(eta) with the same arithmetic: the same bits."""
    model, theta_star, theta = make_model("logistic")
    cy = model._cy
    idx = np.arange(model.n_data)
    g_cv, _ = cy.cv_grad_sum_terms(0, theta_star, theta, idx)
    g, _ = cy.grad_sum_terms(theta, idx)
    np.testing.assert_array_equal(g_cv, g)


def test_validation():
    model, theta_star, theta = make_model("poisson", n=100)
    for bad in (3, -1, 1.5, "2"):
        with pytest.raises(ValueError, match="order"):
            TaylorControlVariate(model, theta_star, order=bad)
    with pytest.raises(ValueError, match="theta must have shape"):
        TaylorControlVariate(model, theta_star[:-1])
    # exp overflow in the full pass at theta_star is reported, not propagated
    with pytest.raises(ValueError, match="not finite at the control variates' centre"):
        TaylorControlVariate(model, np.full(model.n_params, 400.0))
    cv = TaylorControlVariate(model, theta_star)
    with pytest.raises(ValueError, match="theta must have shape"):
        cv.estimate(theta[:-1], [0, 1])
    # theta_star is copied: later changes by the caller do not leak in
    ts = theta_star.copy()
    cv2 = TaylorControlVariate(model, ts)
    ts[:] = 0
    np.testing.assert_array_equal(cv2.theta_star, theta_star)
