"""Tests for the compiled multinomial (softmax) logistic regression model
(``CyMultinomial`` behind ``MultinomialLogisticModel``).

* Every compiled method against the plain NumPy definitions of
  ``bayes_subsample.models._multinomial`` (``multinomial_*_reference``), for
  float32 and float64 X, with and without intercept, K = 2, 3, 7, on data with
  rows whose linear predictors are extreme (|eta| up to 1000, where exp
  overflows) and, for the control-variate residuals, differences ``eta -
  eta*`` beyond 30 (the residual's direct branch) as well as small ones.
* Residuals: cached (``cv_cache``) and on-the-fly caches give the same bits;
  the analytic residual gradients match their definition and finite
  differences; small-delta residuals match an extended-precision reference
  (the NumPy definition, a difference of nearly equal log-likelihoods, loses
  most digits there).
* ``loglik_diff`` / residual differences are the differences of the values,
  bit for bit; the full pass (log-likelihood, gradient, Hessian) matches the
  reference and is bit-identical for any number of threads.
* Bad input gives clear errors; samplers run on the model, and a chain on the
  compiled model follows the chain on the NumPy reference model.

Tolerances: per-datum values are compared with a bound relative to the
magnitudes involved (1e-12 of |eta| + |l| + 1: a few thousand ulps of the
largest term, far above the rounding of K dot products of length <= 6);
residuals against the NumPy definition with 1e-12 of the magnitudes the
definition subtracts (its own cancellation error); sums with 1e-12 of the sum
of absolute terms (the summation error is at most n eps of it).
"""
import warnings

import numpy as np
import pytest
from scipy.special import logsumexp, softmax

from bayes_subsample import sample
from bayes_subsample.models import FunctionModel, MultinomialLogisticModel
from bayes_subsample.models._cymultinomial import CyMultinomial
from bayes_subsample.models._multinomial import (multinomial_eta_reference,
                                                 multinomial_grad_reference,
                                                 multinomial_hessian_reference,
                                                 multinomial_loglik_reference,
                                                 multinomial_residual_reference)
from bayes_subsample.models._rows import DenseRows
from bayes_subsample.samplers import SAMPLERS

DTYPES = [np.float64, np.float32]
KS = [2, 3, 7]
# first-coordinate values of the extreme rows: with theta[:, 0] in [-1, 1], their
# linear predictors reach |eta| ~ 1000 (exp overflows beyond 709)
EXTREME_X0 = [-1000.0, -700.0, -50.0, 50.0, 700.0, 1000.0]

all_cases = pytest.mark.parametrize(
    "K,dtype,fit_intercept",
    [(K, dt, fi) for K in KS for dt in DTYPES for fi in (True, False)],
    ids=lambda v: v.__name__ if isinstance(v, type) else str(v),
)


def make_data(K, dtype, fit_intercept, n=240, d=4, seed=0, extreme=True):
    """Design, class labels and a parameter vector ``theta`` (K x p1 flattened).

    Extreme rows are ``(x0, 0, ..., 0)`` with ``x0`` in ``EXTREME_X0``, each
    once per class label; ``theta[:, 0]`` spans [-1, 1], so their predictors
    range over about [-1000, 1000] and some classes are certain (p = 1) while
    others have log-probabilities near -2000.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    p1 = d + int(fit_intercept)
    theta = rng.normal(scale=0.4, size=(K, p1))
    theta[:, 0] = np.linspace(-1.0, 1.0, K)
    eta = X @ theta[:, :d].T + (theta[:, -1] if fit_intercept else 0.0)
    y = np.array([rng.choice(K, p=pr) for pr in softmax(eta, axis=1)])
    if extreme:
        rows = [np.r_[x0, np.zeros(d - 1)] for x0 in EXTREME_X0 for _ in range(K)]
        X = np.vstack([X, rows])
        y = np.r_[y, np.tile(np.arange(K), len(EXTREME_X0))]
    X = X.astype(dtype)
    return X, y.astype(np.float64), theta.ravel()


def make_model(K, dtype, fit_intercept, **kw):
    X, y, theta = make_data(K, dtype, fit_intercept, **kw)
    return MultinomialLogisticModel(X, y, n_classes=K, fit_intercept=fit_intercept), theta


def assert_close(actual, desired, scale, rtol=1e-12):
    """|actual - desired| <= rtol * (|desired| + scale), elementwise."""
    actual, desired = np.asarray(actual), np.asarray(desired)
    assert actual.shape == desired.shape
    assert np.all(np.isfinite(actual))
    bound = rtol * (np.abs(desired) + scale)
    bad = np.abs(actual - desired) > bound
    assert not bad.any(), (f"{bad.sum()} of {bad.size} entries differ; worst excess "
                           f"{np.max(np.abs(actual - desired) - bound):.3g}")


def _ref(fn, model, theta, idx, *args):
    return fn(model.X, model.y, theta, model.n_classes, model.fit_intercept, idx, *args)


def _eta_scale(model, theta, idx):
    """Per-datum magnitude of the predictors: 1 + sum_k |x . theta_k| (in |x| |theta|)."""
    Xs = np.asarray(model.X[idx], dtype=np.float64)
    if model.fit_intercept:
        Xs = np.column_stack([Xs, np.ones(len(idx))])
    T = np.abs(theta.reshape(model.n_classes, -1))
    return 1.0 + (np.abs(Xs) @ T.T).sum(axis=1)


def _perturb(theta, rng, scale):
    return theta + scale * rng.normal(size=theta.shape)


# ---------------------------------------------------------------------------
# per-datum terms
# ---------------------------------------------------------------------------
@all_cases
def test_eta_and_linear_predictor(K, dtype, fit_intercept, rng):
    model, theta = make_model(K, dtype, fit_intercept)
    idx = rng.integers(0, model.n_data, 50)
    ref = multinomial_eta_reference(model.X, theta, K, fit_intercept, idx)
    got = model.compiled.eta(theta, idx)
    assert got.shape == (50, K)
    assert_close(got, ref, _eta_scale(model, theta, idx)[:, None])
    all_idx = np.arange(model.n_data)
    np.testing.assert_array_equal(model.linear_predictor(theta), model.compiled.eta(theta))
    assert_close(model.linear_predictor(theta, model.X),
                 multinomial_eta_reference(model.X, theta, K, fit_intercept, all_idx),
                 _eta_scale(model, theta, all_idx)[:, None])


@all_cases
def test_loglik_terms(K, dtype, fit_intercept, rng):
    model, theta = make_model(K, dtype, fit_intercept)
    idx = np.r_[rng.integers(0, model.n_data, 300), np.arange(model.n_data)]
    ref = _ref(multinomial_loglik_reference, model, theta, idx)
    got = model.loglik_terms(theta, idx)
    assert np.all(got <= 0.0) and np.min(got) < -1000.0        # the extreme rows are there
    assert_close(got, ref, _eta_scale(model, theta, idx))
    np.testing.assert_array_equal(model.compiled.loglik_terms(theta, idx), got)


@all_cases
def test_loglik_diff_is_the_difference(K, dtype, fit_intercept, rng):
    model, theta = make_model(K, dtype, fit_intercept)
    theta_new = _perturb(theta, rng, 0.1)
    idx = rng.integers(0, model.n_data, 700)       # more than one chunk of 256
    got = model.loglik_diff_terms(theta, theta_new, idx)
    np.testing.assert_array_equal(
        got, model.loglik_terms(theta_new, idx) - model.loglik_terms(theta, idx))
    ref = (_ref(multinomial_loglik_reference, model, theta_new, idx)
           - _ref(multinomial_loglik_reference, model, theta, idx))
    assert_close(got, ref, _eta_scale(model, theta, idx) + _eta_scale(model, theta_new, idx))


@all_cases
def test_grad_terms_and_grad_sum(K, dtype, fit_intercept, rng):
    model, theta = make_model(K, dtype, fit_intercept)
    idx = rng.integers(0, model.n_data, 600)
    ref = _ref(multinomial_grad_reference, model, theta, idx)
    got = model.grad_terms(theta, idx)
    assert got.shape == (600, model.n_params)
    # gradient entries are (e_y - p)_k x_j: |.| <= |x_j|
    xabs = np.abs(model.compiled.gather(idx))
    assert_close(got, ref, np.tile(xabs, K) + 1.0)
    g, ll = model.compiled.grad_sum_terms(theta, idx)
    assert_close(g, ref.sum(axis=0), np.abs(ref).sum(axis=0) + 1.0)
    np.testing.assert_array_equal(model.grad_sum(theta, idx), g)
    lref = _ref(multinomial_loglik_reference, model, theta, idx)
    assert_close(ll, lref.sum(), np.abs(lref).sum() + _eta_scale(model, theta, idx).sum())


def test_terms_finite_at_extreme_eta():
    """|eta| ~ 700-1000: every value finite, certain classes give l = 0 exactly and
    impossible ones l = eta_y - max eta (no overflow, no NaN)."""
    K = 3
    X = np.array([[700.0], [-700.0], [1000.0], [1000.0], [1000.0]])
    y = np.array([2, 0, 2, 1, 0])
    model = MultinomialLogisticModel(X, y, n_classes=K, fit_intercept=False)
    theta = np.array([-1.0, 0.0, 1.0])
    with np.errstate(all="raise"):
        ll = model.loglik_terms(theta, np.arange(5))
        g = model.grad_terms(theta, np.arange(5))
        tot, grad, H = model.full_pass(theta, hessian=True)
    np.testing.assert_array_equal(ll, [0.0, 0.0, 0.0, -1000.0, -2000.0])
    assert np.all(np.isfinite(g)) and np.all(np.isfinite(H)) and np.isfinite(tot)
    # the curvature of the rows x = +-700 is ~e^-700 x^2 ~ 5e-299: kept (the diagonal
    # p_a (1 - p_a) as p_a sum_{b != a} p_b, not 1 - 1 = 0 as the NumPy definition)
    P = softmax(X @ theta[None, :], axis=1)
    W = -(P[:, :, None] * P[:, None, :])
    W[:, np.arange(K), np.arange(K)] = 0.0
    W[:, np.arange(K), np.arange(K)] = -W.sum(axis=2)
    np.testing.assert_allclose(H, -np.einsum("i,iab->ab", X[:, 0] ** 2, W), rtol=1e-12, atol=0)
    assert np.abs(H).max() > 0.0


# ---------------------------------------------------------------------------
# control-variate residuals
# ---------------------------------------------------------------------------
def _residual_scale(model, theta, theta_star, idx, order):
    """The magnitudes the NumPy definition of the residual subtracts."""
    s = (_eta_scale(model, theta, idx) + _eta_scale(model, theta_star, idx)
         + np.abs(_ref(multinomial_loglik_reference, model, theta, idx))
         + np.abs(_ref(multinomial_loglik_reference, model, theta_star, idx)))
    if order >= 1:
        de = np.abs(model.compiled.eta(theta, idx) - model.compiled.eta(theta_star, idx))
        s = s + de.sum(axis=1) * (1.0 + (de.sum(axis=1) if order == 2 else 0.0))
    return s


@all_cases
@pytest.mark.parametrize("order", [0, 1, 2])
def test_cv_residuals_against_definition(K, dtype, fit_intercept, order, rng):
    model, theta_star = make_model(K, dtype, fit_intercept)
    theta = _perturb(theta_star, rng, 0.05).reshape(K, -1)
    theta[:, 0] = theta_star.reshape(K, -1)[:, 0] + np.linspace(-0.05, 0.05, K)
    theta = theta.ravel()
    idx = rng.integers(0, model.n_data, 400)
    idx = np.r_[idx, np.arange(model.n_data - 6 * K, model.n_data)]   # the extreme rows
    de = np.abs(model.compiled.eta(theta, idx) - model.compiled.eta(theta_star, idx))
    assert de.max() > 30.0 and np.median(de) < 1.0        # both branches of the residual
    ref = multinomial_residual_reference(model.X, model.y, theta, theta_star, K,
                                         fit_intercept, idx, order)
    got = model.cv_residual_terms(theta, theta_star, idx, order)
    assert_close(got, ref, _residual_scale(model, theta, theta_star, idx, order))


@all_cases
@pytest.mark.parametrize("order", [0, 1, 2])
def test_cv_cached_equals_uncached(K, dtype, fit_intercept, order, rng):
    model, theta_star = make_model(K, dtype, fit_intercept)
    cy = model.compiled
    theta, theta_new = _perturb(theta_star, rng, 0.05), _perturb(theta_star, rng, 0.05)
    idx = rng.integers(0, model.n_data, 600)
    cache = cy.cv_cache(theta_star)
    assert cache.shape == (model.n_data * (2 * K + 1),)
    assert cy.cache_width == 2 * K + 1 and cy.cv_cost == 1
    for es in (None, cache):
        d = cy.cv_residual_terms(order, theta_star, theta, idx, es)
        dd = cy.cv_residual_diff_terms(order, theta_star, theta, theta_new, idx, es)
        g, tot = cy.cv_grad_sum_terms(order, theta_star, theta, idx, es)
        t, dt = cy.term_derivatives(order, theta_star, theta, idx, es)
        if es is None:
            first = (d, dd, g, tot, t, dt)
            # the difference is the difference of the values, bit for bit
            np.testing.assert_array_equal(
                dd, cy.cv_residual_terms(order, theta_star, theta_new, idx) - d)
            np.testing.assert_array_equal(t, d)
        else:
            for a, b in zip(first, (d, dd, g, tot, t, dt)):
                np.testing.assert_array_equal(a, b)
    # the cache itself: eta*, softmax(eta*), lse(eta*) per datum
    C = cache.reshape(model.n_data, 2 * K + 1)
    all_idx = np.arange(model.n_data)
    eta_star = multinomial_eta_reference(model.X, theta_star, K, fit_intercept, all_idx)
    scale = _eta_scale(model, theta_star, all_idx)[:, None]
    assert_close(C[:, :K], eta_star, scale)
    assert_close(C[:, K:2 * K], softmax(eta_star, axis=1), scale)
    assert_close(C[:, 2 * K], logsumexp(eta_star, axis=1), scale[:, 0])
    np.testing.assert_array_equal(cy.cv_cache(theta_star, n_threads=2), cache)


@all_cases
@pytest.mark.parametrize("order", [0, 1, 2])
def test_cv_residual_gradients(K, dtype, fit_intercept, order, rng):
    """The gradients of the residuals: their definition (grad l(theta) - grad l(theta*)
    - H*(theta - theta*)) and their sum with the total; residual sums."""
    model, theta_star = make_model(K, dtype, fit_intercept)
    theta = _perturb(theta_star, rng, 0.05)
    idx = rng.integers(0, model.n_data, 300)
    d, G = model.cv_residuals_and_grads(theta, theta_star, idx, order)
    np.testing.assert_array_equal(d, model.cv_residual_terms(theta, theta_star, idx, order))
    ref = _ref(multinomial_grad_reference, model, theta, idx)
    scale = np.abs(ref) + 1.0
    if order >= 1:
        gs = _ref(multinomial_grad_reference, model, theta_star, idx)
        ref = ref - gs
        scale = scale + np.abs(gs)
    if order == 2:
        delta = theta - theta_star
        for i, k in enumerate(idx):
            h = multinomial_hessian_reference(model.X, model.y, theta_star, K, fit_intercept, [k])
            ref[i] -= h @ delta
            scale[i] += np.abs(h) @ np.abs(delta)
    xs = np.tile(np.abs(model.compiled.gather(idx)), K)
    assert_close(G, ref, scale * (1.0 + xs) * _eta_scale(model, theta, idx)[:, None])
    g, tot = model.cv_grad_sum(theta, theta_star, idx, order)
    assert_close(g, G.sum(axis=0), np.abs(G).sum(axis=0) + 1.0)
    assert_close(tot, d.sum(), np.abs(d).sum() + 1.0)


@pytest.mark.parametrize("order", [0, 1, 2])
@pytest.mark.parametrize("K", KS)
def test_cv_residual_gradients_finite_differences(K, order, rng):
    model, theta_star = make_model(K, np.float64, True, extreme=False)
    theta = _perturb(theta_star, rng, 0.3)
    idx = rng.integers(0, model.n_data, 20)
    _, G = model.cv_residuals_and_grads(theta, theta_star, idx, order)
    h = 1e-5
    for j in range(model.n_params):
        e = np.zeros(model.n_params)
        e[j] = h
        fd = (model.cv_residual_terms(theta + e, theta_star, idx, order)
              - model.cv_residual_terms(theta - e, theta_star, idx, order)) / (2 * h)
        # central differences: O(h^2) truncation, O(eps / h) rounding
        np.testing.assert_allclose(G[:, j], fd, rtol=1e-6, atol=1e-8)


def _residual_longdouble(model, theta, theta_star, idx, order):
    """The residual by its definition in extended precision (x87 long double)."""
    ld = np.longdouble
    X = np.asarray(model.X[idx], dtype=ld)
    if model.fit_intercept:
        X = np.column_stack([X, np.ones(len(idx), dtype=ld)])
    K = model.n_classes
    E = X @ np.asarray(theta, dtype=ld).reshape(K, -1).T
    Es = X @ np.asarray(theta_star, dtype=ld).reshape(K, -1).T
    y = model.y[idx].astype(int)
    rows = np.arange(len(idx))

    def lse(A):
        m = A.max(axis=1, keepdims=True)
        return (m + np.log(np.exp(A - m).sum(axis=1, keepdims=True)))[:, 0]

    ps = np.exp(Es - lse(Es)[:, None])
    D = E - Es
    d = (E[rows, y] - lse(E)) - (Es[rows, y] - lse(Es))
    if order >= 1:
        r = -ps
        r[rows, y] += 1
        d = d - (r * D).sum(axis=1)
    if order == 2:
        pd = (ps * D).sum(axis=1)
        d = d + 0.5 * ((ps * D * D).sum(axis=1) - pd * pd)
    return d


@pytest.mark.skipif(np.finfo(np.longdouble).eps > 1e-18, reason="needs 80-bit long double")
@pytest.mark.parametrize("order", [0, 1, 2])
def test_cv_residuals_small_delta_accuracy(order, rng):
    """Near theta* (|eta - eta*| ~ 1e-4), the residuals of order 1 and 2 (O(delta^2),
    O(delta^3)) are computed without the cancellation of their definition: they match
    an extended-precision reference to 1e-17 (the reference's own error is ~1e-19
    |l|), where the float64 definition is off by ~eps |l| > 1e-16. Order 0 carries
    the rounding of eta_y - eta*_y (eps |eta|)."""
    model, theta_star = make_model(3, np.float64, True, extreme=False)
    theta = _perturb(theta_star, rng, 1e-4)
    idx = np.arange(200)
    got = model.cv_residual_terms(theta, theta_star, idx, order)
    ref = np.asarray(_residual_longdouble(model, theta, theta_star, idx, order), dtype=np.float64)
    if order == 0:
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-14)
        return
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-17)
    naive = multinomial_residual_reference(model.X, model.y, theta, theta_star, 3, True,
                                           idx, order)
    assert np.max(np.abs(naive - ref)) > 1e-16        # the test can tell them apart


# ---------------------------------------------------------------------------
# the full pass
# ---------------------------------------------------------------------------
@all_cases
def test_full_pass(K, dtype, fit_intercept):
    model, theta = make_model(K, dtype, fit_intercept)
    all_idx = np.arange(model.n_data)
    ll, g, H = model.full_pass(theta, hessian=True)
    lref = _ref(multinomial_loglik_reference, model, theta, all_idx)
    gref = _ref(multinomial_grad_reference, model, theta, all_idx)
    Href = _ref(multinomial_hessian_reference, model, theta, all_idx)
    assert_close(ll, lref.sum(), np.abs(lref).sum() + _eta_scale(model, theta, all_idx).sum())
    assert_close(g, gref.sum(axis=0), np.abs(gref).sum(axis=0) + 1.0)
    np.testing.assert_array_equal(H, H.T)
    Xs = np.abs(model.compiled.gather(all_idx))
    # float32 rows: each class pair's sum of p_a p_b x x^T in float32 blocks, within
    # hessian_rtol of its sum of absolute terms (at most Xs^T Xs / 4 in every block)
    assert_close(H, Href, np.tile(Xs.T @ Xs, (K, K)) + 1.0,
                 rtol=1e-12 + model.compiled.rows.hessian_rtol)
    # the Hessian is negative semi-definite, with the constant shift of all classes
    # in its null space
    assert np.linalg.eigvalsh(H).max() <= 1e-9 * np.abs(H).max()
    shift = np.tile(np.random.default_rng(0).normal(size=model.n_cols), K)
    assert np.abs(H @ shift).max() <= 1e-10 * np.abs(H).max() * np.abs(shift).sum()
    # partial passes give the same numbers
    ll2, g2, H2 = model.full_pass(theta, gradient=False, loglik=True)
    assert ll2 == ll and g2 is None and H2 is None
    np.testing.assert_array_equal(model.full_pass(theta, loglik=False)[1], g)
    lp, gp = model.log_posterior_and_grad(theta)
    assert lp == ll + model.prior.log_prob(theta)
    np.testing.assert_array_equal(gp, g + model.prior.grad_log_prob(theta))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("K", [3, 7])
def test_full_pass_bit_identical_across_threads(K, dtype):
    """Over several slots of rows (n > 4096 rows each): 1, 2, 3 threads give the
    same bits, with and without the Hessian."""
    rng = np.random.default_rng(5)
    n, d = 30_000, 5
    X = rng.normal(size=(n, d)).astype(dtype)
    y = rng.integers(0, K, n)
    cy = CyMultinomial(DenseRows(X, True), y, K)
    theta = rng.normal(scale=0.3, size=K * (d + 1))
    base = cy.full_pass(theta, True, True, True, 1)
    for nt in (2, 3):
        for hess in (True, False):
            ll, g, H = cy.full_pass(theta, True, True, hess, nt)
            assert ll == base[0]
            np.testing.assert_array_equal(g, base[1])
            if hess:
                np.testing.assert_array_equal(H, base[2])
    ref = multinomial_hessian_reference(X, y, theta, K, True, np.arange(n))
    Xs = np.abs(cy.gather(None))
    assert_close(base[2], ref, np.tile(Xs.T @ Xs, (K, K)) + 1.0,
                 rtol=1e-12 + cy.rows.hessian_rtol)


def test_model_full_pass_threads_bit_identical():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40_000, 6))
    y = rng.integers(0, 4, 40_000)
    theta = rng.normal(scale=0.2, size=4 * 7)
    a = MultinomialLogisticModel(X, y, n_threads=1)
    b = MultinomialLogisticModel(X, y, n_threads=2)
    assert a.pass_threads() == 1 and b.pass_threads() == 2
    for u, v in zip(a.full_pass(theta, hessian=True), b.full_pass(theta, hessian=True)):
        np.testing.assert_array_equal(u, v)


def test_pass_threads_of_a_partial_pass_scale_with_its_rows():
    """``pass_threads(rows=k)``: a pass over k of the rows (an exact stratum) is
    threaded where k rows' values reach the threaded-pass threshold, a GLM's
    rows counted once, the multinomial model's once per class."""
    from bayes_subsample._threads import THREADED_PASS_MIN_VALUES, limit_threads
    from bayes_subsample.models import LogisticRegressionModel
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40_000, 24))
    K = 7
    multi = MultinomialLogisticModel(X, rng.integers(0, K, 40_000), n_threads=2)
    glm = LogisticRegressionModel(X, rng.integers(0, 2, 40_000).astype(float), n_threads=2)
    assert multi.pass_values() == (X.size + 40_000) * K and glm.pass_values() == X.size
    # the rows whose values reach the threshold: (d + 1) K values a row, d for the GLM
    k_multi = -(-THREADED_PASS_MIN_VALUES // (25 * K))
    k_glm = -(-THREADED_PASS_MIN_VALUES // 24)
    assert multi.pass_threads(rows=k_multi - 1) == 1 and multi.pass_threads(rows=k_multi) == 2
    assert glm.pass_threads(rows=k_glm - 1) == 1 and glm.pass_threads(rows=k_glm) == 2
    with limit_threads(1):
        assert multi.pass_threads(rows=k_multi) == 1
    assert multi.pass_threads() == multi.pass_threads(rows=40_000) == 2


def test_gather_targets_and_gather_rows(rng):
    model, theta = make_model(3, np.float32, True)
    idx = rng.integers(0, model.n_data, 30)
    np.testing.assert_array_equal(model.compiled.gather(idx),
                                  np.column_stack([model.X[idx].astype(np.float64),
                                                   np.ones(30)]))
    np.testing.assert_array_equal(model.compiled.targets(idx), model.y[idx])
    np.testing.assert_array_equal(model.compiled.targets(), model.y)


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------
def test_bad_input_errors():
    model, theta = make_model(3, np.float64, True, n=20, extreme=False)
    cy = model.compiled
    idx = np.arange(5)
    with pytest.raises(ValueError, match="theta must have shape"):
        model.loglik_terms(theta[:-1], idx)
    with pytest.raises(ValueError, match="theta must have shape"):
        cy.loglik_terms(theta[:-1], idx)
    with pytest.raises(ValueError, match="theta_new must have shape"):
        cy.loglik_diff_terms(theta, np.zeros(3), idx)
    with pytest.raises(ValueError, match="theta_star must have shape"):
        cy.cv_residual_terms(1, theta[:4], theta, idx)
    with pytest.raises(ValueError, match="theta must have shape"):
        cy.full_pass(theta.reshape(3, -1))
    with pytest.raises(ValueError, match="theta must have shape"):
        cy.eta(theta[1:])
    for bad_idx in ([0, 20], [-1]):
        with pytest.raises(IndexError, match="out of range"):
            model.loglik_terms(theta, bad_idx)
        with pytest.raises(IndexError, match="out of range"):
            cy.loglik_terms(theta, bad_idx)
        with pytest.raises(IndexError, match="out of range"):
            cy.grad_terms(theta, bad_idx)
        with pytest.raises(IndexError, match="out of range"):
            cy.gather(bad_idx)
    with pytest.raises(ValueError, match="1-D"):
        cy.loglik_terms(theta, np.zeros((2, 2), dtype=int))
    cache = cy.cv_cache(theta)
    for bad in (cache[:-1], np.r_[cache, 0.0], cy.eta(theta).ravel()):
        with pytest.raises(ValueError, match="7 value"):
            cy.cv_residual_terms(2, theta, theta, idx, bad)
        with pytest.raises(ValueError, match="7 value"):
            cy.term_derivatives(2, theta, theta, idx, bad)
    with pytest.raises(ValueError, match="float64"):
        cy.term_derivatives(2, theta, theta, idx, cache.astype(np.float32))
    with pytest.raises(ValueError, match="order"):
        model.cv_residual_terms(theta, theta, idx, 3)
    # empty index arrays are fine
    assert model.loglik_terms(theta, np.arange(0)).shape == (0,)
    np.testing.assert_array_equal(model.grad_sum(theta, np.arange(0)), np.zeros(model.n_params))


def test_constructor_errors():
    X = np.zeros((4, 2))
    rows = DenseRows(X, True)
    with pytest.raises(ValueError, match="n_classes >= 2"):
        CyMultinomial(rows, np.zeros(4), 1)
    with pytest.raises(ValueError, match="shape"):
        CyMultinomial(rows, np.zeros(3), 2)
    for bad in ([0, 1, 2, 1], [0, 1, -1, 0], [0, 0.5, 1, 1], [0, np.nan, 1, 1]):
        with pytest.raises(ValueError, match="class indices"):
            CyMultinomial(rows, np.array(bad, dtype=float), 2)
    with pytest.raises(ValueError, match="n_classes"):
        MultinomialLogisticModel(X, [0, 1, 2, 1], n_classes=2)


# ---------------------------------------------------------------------------
# samplers on the model
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_model():
    X, y, _ = make_data(3, np.float64, True, n=300, d=2, seed=3, extreme=False)
    return MultinomialLogisticModel(X, y, prior_scale=3.0)


def _reference_model(model):
    """The same posterior from the NumPy definitions (run through the callbacks)."""
    args = (model.X, model.y)
    K, icpt = model.n_classes, model.fit_intercept
    return FunctionModel(lambda t, i: multinomial_loglik_reference(*args, t, K, icpt, i),
                         lambda t, i: multinomial_grad_reference(*args, t, K, icpt, i),
                         model.n_data, model.n_params, prior_scale=model.prior.scale)


@pytest.mark.parametrize("name", ["hmc", "nuts", "mh"])
def test_sampler_chain_matches_numpy_model(name, small_model):
    sampler = SAMPLERS[name]()
    prepared = sampler.prepare(small_model, np.random.default_rng(0))
    chains = []
    for model in (small_model, _reference_model(small_model)):
        kernel = sampler.build(model, prepared, 20)
        r = np.random.default_rng(11)
        state = kernel.init(r, prepared.theta_init.copy())
        out = []
        for i in range(40):
            if i < 20:
                state, info = kernel.warmup_step(r, state, i)
            else:
                state = kernel.end_warmup(state) if i == 20 else state
                state, info = kernel.step(r, state)
            out.append((*state.theta, float(info.accepted)))
        chains.append(np.array(out))
    np.testing.assert_allclose(chains[0], chains[1], rtol=1e-7, atol=1e-7)
    assert chains[0][:, -1].mean() > 0.2                 # the chain moved


def test_hmc_smoke(small_model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = sample(small_model, "hmc", n_samples=60, n_warmup=60, n_chains=2,
                       random_state=1, check_convergence=False)
    draws = trace.draws
    assert draws.shape == (2, 60, small_model.n_params) and np.all(np.isfinite(draws))
    assert np.mean(trace.stats["accepted"]) > 0.3


def test_cv_range_bound_of_huge_rows_is_inf_not_overflow_error():
    """Rows of norm ~1e200: R^3 overflows float64. The bound is inf (it never
    stops a decision) and 0 without a move, not Python's OverflowError (found
    by the property test of the confidence sampler on multiclass data)."""
    X = np.array([[1e200, 1.0], [1.0, 2.0], [3.0, 1.0]])
    model = MultinomialLogisticModel(X, np.array([0.0, 1.0, 2.0]), n_classes=3)
    z = np.zeros(model.n_params)
    assert model.cv_range_bound(z, z, z, 2) == 0.0
    assert model.cv_range_bound(z, z + np.arange(model.n_params), z, 2) == np.inf
