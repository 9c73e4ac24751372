"""Per-row weights (``sample_weight``) of the multinomial logistic regression
model (``MultinomialLogisticModel(weights=)``, ``CyMultinomial(weight=)``).

The weighted log-likelihood is ``sum_k w_k l_k(theta)``:

* every compiled method (terms, differences, gradients, residuals of orders
  0 to 2 with their derivatives and sums, the full pass with its Hessian)
  equals ``w_k`` times the plain NumPy definitions, for float32 and float64
  designs, dense and CSR; per-datum values are ``w_k`` times the unweighted
  model's, bit for bit (the weight multiplies the finished value);
* integer weights are duplicated rows (``np.repeat``): full pass and
  control-variate gradient sums to 1e-10 relative;
* weights of all ones give the unweighted model's bits;
* the wrapper: subset, pickling, fingerprint, range bounds; clear errors.
"""
import pickle

import numpy as np
import pytest
from scipy import sparse
from scipy.special import softmax

from bayes_subsample.models import MultinomialLogisticModel
from bayes_subsample.models._cymultinomial import CyMultinomial
from bayes_subsample.models._multinomial import (multinomial_grad_reference,
                                                 multinomial_loglik_reference,
                                                 multinomial_residual_reference)
from bayes_subsample.models._rows import DenseRows

CASES = pytest.mark.parametrize(
    "dtype,csr", [(dt, sp) for dt in (np.float64, np.float32) for sp in (False, True)],
    ids=lambda v: v.__name__ if isinstance(v, type) else ("csr" if v else "dense"))


def make_data(K=3, n=120, d=4, seed=0, dtype=np.float64, csr=False):
    """``(X, y, theta, theta_star)``: X with about a third of its entries zero (so
    CSR has structure), labels drawn from the model at ``theta_star``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[rng.random((n, d)) < 0.3] = 0.0
    theta_star = rng.normal(scale=0.5, size=(K, d + 1))
    eta = X @ theta_star[:, :d].T + theta_star[:, -1]
    y = np.array([rng.choice(K, p=p) for p in softmax(eta, axis=1)], dtype=np.float64)
    theta = theta_star + rng.normal(scale=0.2, size=theta_star.shape)
    X = X.astype(dtype)
    return (sparse.csr_matrix(X) if csr else X), y, theta.ravel(), theta_star.ravel()


def make_weights(n, seed=1):
    """Non-integer weights in [0, 3), some zero."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.0, 3.0, n)
    w[rng.random(n) < 0.1] = 0.0
    return w


def _dense(X):
    Xs = X.toarray() if sparse.issparse(X) else X
    return np.asarray(Xs, dtype=np.float64)


def weighted_hessian_reference(X, theta, K, w):
    """``-sum_k w_k (diag(p_k) - p_k p_k^T) (x) x_k x_k^T`` (intercept included)."""
    Xs = _dense(X)
    Xs = np.column_stack([Xs, np.ones(Xs.shape[0])])
    p = softmax(Xs @ theta.reshape(K, -1).T, axis=1)
    p1 = Xs.shape[1]
    H = np.zeros((K, p1, K, p1))
    for a in range(K):
        for b in range(K):
            c = w * ((p[:, a] if a == b else 0.0) - p[:, a] * p[:, b])
            H[a, :, b, :] = -(Xs * c[:, None]).T @ Xs
    return H.reshape(K * p1, K * p1)


def assert_close(actual, desired, scale, rtol=1e-12):
    """|actual - desired| <= rtol * (|desired| + scale), elementwise."""
    actual, desired = np.asarray(actual), np.asarray(desired)
    assert actual.shape == desired.shape
    assert np.all(np.isfinite(actual))
    bad = np.abs(actual - desired) > rtol * (np.abs(desired) + scale)
    assert not bad.any(), f"{bad.sum()} of {bad.size} entries differ"


# ---------------------------------------------------------------------------
# (1) weighted terms against w times the NumPy definitions
# ---------------------------------------------------------------------------
@CASES
def test_weighted_terms_against_numpy(dtype, csr):
    K = 3
    X, y, theta, theta_star = make_data(K, dtype=dtype, csr=csr)
    n = X.shape[0]
    w = make_weights(n)
    model = MultinomialLogisticModel(X, y, n_classes=K, weights=w)
    plain = MultinomialLogisticModel(X, y, n_classes=K)
    cy, cy0 = model.compiled, plain.compiled
    assert cy.has_weight and not cy0.has_weight
    np.testing.assert_array_equal(cy.weights, w)
    rng = np.random.default_rng(2)
    idx = np.r_[rng.integers(0, n, 150), np.arange(n)]       # repeats, and every row
    wi = w[idx]
    theta_new = theta + rng.normal(scale=0.1, size=theta.shape)

    def ref(fn, t, *args):
        return fn(X, y, t, K, True, idx, *args)

    # log-likelihood terms, their differences, gradients and gradient sums
    l0 = ref(multinomial_loglik_reference, theta)
    l1 = ref(multinomial_loglik_reference, theta_new)
    g0 = ref(multinomial_grad_reference, theta)
    assert_close(model.loglik_terms(theta, idx), wi * l0, wi * (np.abs(l0) + 1.0))
    assert_close(model.loglik_diff_terms(theta, theta_new, idx), wi * (l1 - l0),
                 wi * (np.abs(l0) + np.abs(l1) + 1.0))
    assert_close(model.grad_terms(theta, idx), wi[:, None] * g0,
                 wi[:, None] * (np.abs(g0) + 1.0))
    assert_close(model.grad_sum(theta, idx), (wi[:, None] * g0).sum(axis=0),
                 (wi[:, None] * (np.abs(g0) + 1.0)).sum(axis=0))

    # per-datum values are w_k times the unweighted model's, bit for bit
    np.testing.assert_array_equal(cy.loglik_terms(theta, idx), wi * cy0.loglik_terms(theta, idx))
    np.testing.assert_array_equal(cy.loglik_diff_terms(theta, theta_new, idx),
                                  wi * cy0.loglik_diff_terms(theta, theta_new, idx))
    t, dt = cy.term_derivatives(-1, None, theta, idx)
    t0, dt0 = cy0.term_derivatives(-1, None, theta, idx)
    np.testing.assert_array_equal(t, wi * t0)
    np.testing.assert_array_equal(dt, wi[:, None] * dt0)

    # the control-variate cache is the same (values at theta*), the residuals weighted
    cache = cy.cv_cache(theta_star)
    np.testing.assert_array_equal(cache, cy0.cv_cache(theta_star))
    for order in (0, 1, 2):
        r = multinomial_residual_reference(X, y, theta, theta_star, K, True, idx, order)
        scale = wi * (np.abs(l0) + np.abs(ref(multinomial_loglik_reference, theta_star)) + 10.0)
        for es in (None, cache):
            d = cy.cv_residual_terms(order, theta_star, theta, idx, es)
            assert_close(d, wi * r, scale, rtol=1e-11)
            np.testing.assert_array_equal(d, wi * cy0.cv_residual_terms(order, theta_star,
                                                                        theta, idx, es))
            np.testing.assert_array_equal(
                cy.cv_residual_diff_terms(order, theta_star, theta, theta_new, idx, es),
                wi * cy0.cv_residual_diff_terms(order, theta_star, theta, theta_new, idx, es))
            t, dt = cy.term_derivatives(order, theta_star, theta, idx, es)
            t0, dt0 = cy0.term_derivatives(order, theta_star, theta, idx, es)
            np.testing.assert_array_equal(t, d)
            np.testing.assert_array_equal(dt, wi[:, None] * dt0)
            # the gradient sum and the residual total: the sums of the weighted terms
            g, tot = cy.cv_grad_sum_terms(order, theta_star, theta, idx, es)
            _, G0 = plain.cv_residuals_and_grads(theta, theta_star, idx, order)
            WG = wi[:, None] * G0
            assert_close(g, WG.sum(axis=0), np.abs(WG).sum(axis=0) + 1.0)
            assert_close(tot, d.sum(), np.abs(d).sum() + 1.0)
        d, G = model.cv_residuals_and_grads(theta, theta_star, idx, order)
        np.testing.assert_array_equal(d, cy.cv_residual_terms(order, theta_star, theta, idx))
        assert_close(G, wi[:, None] * G0, wi[:, None] * (np.abs(G0) + 1.0))

    # the full pass: weighted sums of the definitions
    all_idx = np.arange(n)
    ll, g, H = model.full_pass(theta, hessian=True)
    la = multinomial_loglik_reference(X, y, theta, K, True, all_idx)
    ga = multinomial_grad_reference(X, y, theta, K, True, all_idx)
    assert_close(ll, (w * la).sum(), (w * (np.abs(la) + 1.0)).sum())
    assert_close(g, (w[:, None] * ga).sum(axis=0), (w[:, None] * (np.abs(ga) + 1.0)).sum(axis=0))
    Href = weighted_hessian_reference(X, theta, K, w)
    Xs = np.abs(cy.gather(None))
    np.testing.assert_array_equal(H, H.T)
    assert_close(H, Href, np.tile((Xs * w[:, None]).T @ Xs, (K, K)) + 1.0,
                 rtol=1e-12 + cy.rows.hessian_rtol)
    ll2, g2, _ = cy.full_pass(theta, True, True, False, 2)
    assert ll2 == ll
    np.testing.assert_array_equal(g2, g)


def test_weighted_full_pass_bit_identical_across_threads():
    """Several slots of rows (n > 4096 each): 1 and 2 threads, same bits."""
    rng = np.random.default_rng(5)
    n, d, K = 12_000, 3, 3
    X = rng.normal(size=(n, d))
    y = rng.integers(0, K, n)
    cy = CyMultinomial(DenseRows(X, True), y, K, weight=make_weights(n))
    theta = rng.normal(scale=0.3, size=K * (d + 1))
    base = cy.full_pass(theta, True, True, True, 1)
    for hess in (True, False):
        ll, g, H = cy.full_pass(theta, True, True, hess, 2)
        assert ll == base[0]
        np.testing.assert_array_equal(g, base[1])
        if hess:
            np.testing.assert_array_equal(H, base[2])


# ---------------------------------------------------------------------------
# (2) integer weights are duplicated rows
# ---------------------------------------------------------------------------
def _duplicated(X, y, w):
    counts = w.astype(np.int64)
    rows = np.repeat(np.arange(X.shape[0]), counts)
    return X[rows], y[rows], counts


def _dup_index(counts, idx):
    """The rows of the duplicated data that copy the rows ``idx``."""
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    return np.concatenate([np.arange(starts[k], starts[k] + counts[k]) for k in idx]
                          ).astype(np.int64)


def _rel_close(a, b, rtol=1e-10):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert np.abs(a - b).max() <= rtol * max(np.abs(b).max(), 1e-300), (
        f"relative difference {np.abs(a - b).max() / np.abs(b).max():.3g}")


@CASES
def test_integer_weights_are_duplicated_rows(dtype, csr):
    K = 4
    X, y, theta, theta_star = make_data(K, n=150, seed=3, dtype=dtype, csr=csr)
    n = X.shape[0]
    w = np.random.default_rng(4).integers(0, 4, n).astype(np.float64)
    weighted = MultinomialLogisticModel(X, y, n_classes=K, weights=w)
    Xd, yd, counts = _duplicated(X, y, w)
    dup = MultinomialLogisticModel(Xd, yd, n_classes=K)
    assert dup.n_data == int(w.sum())

    ll, g, H = weighted.full_pass(theta, hessian=True)
    lld, gd, Hd = dup.full_pass(theta, hessian=True)
    _rel_close(ll, lld)
    _rel_close(g, gd)
    # float32 rows: both Hessians summed in float32 blocks (in another order)
    _rel_close(H, Hd, 1e-10 + 4 * weighted.compiled.rows.hessian_rtol)
    _rel_close(weighted.neg_hessian_log_posterior(theta),
               dup.neg_hessian_log_posterior(theta),
               1e-10 + 4 * weighted.compiled.rows.hessian_rtol)

    # control-variate residual gradient sums (and totals), all rows and a subsample
    # (repeats included), on the fly and from the cache
    rng = np.random.default_rng(6)
    sub = rng.integers(0, n, 60)
    cache, cache_d = weighted.compiled.cv_cache(theta_star), dup.compiled.cv_cache(theta_star)
    for idx in (np.arange(n), sub):
        idx_d = _dup_index(counts, idx)
        _rel_close(weighted.loglik_terms(theta, idx).sum(), dup.loglik_terms(theta, idx_d).sum())
        _rel_close(weighted.grad_sum(theta, idx), dup.grad_sum(theta, idx_d))
        for order in (0, 1, 2):
            g, tot = weighted.cv_grad_sum(theta, theta_star, idx, order)
            gd, totd = dup.cv_grad_sum(theta, theta_star, idx_d, order)
            _rel_close(g, gd)
            _rel_close(tot, totd)
            g, tot = weighted.compiled.cv_grad_sum_terms(order, theta_star, theta, idx, cache)
            gd, totd = dup.compiled.cv_grad_sum_terms(order, theta_star, theta, idx_d, cache_d)
            _rel_close(g, gd)
            _rel_close(tot, totd)
            _rel_close(weighted.cv_residual_terms(theta, theta_star, idx, order).sum(),
                       dup.cv_residual_terms(theta, theta_star, idx_d, order).sum())


# ---------------------------------------------------------------------------
# (3) weights of all ones: the unweighted bits
# ---------------------------------------------------------------------------
@CASES
def test_unit_weights_bit_identical(dtype, csr):
    K = 3
    X, y, theta, theta_star = make_data(K, seed=7, dtype=dtype, csr=csr)
    n = X.shape[0]
    ones = MultinomialLogisticModel(X, y, n_classes=K, weights=np.ones(n))
    plain = MultinomialLogisticModel(X, y, n_classes=K)
    assert ones.compiled.has_weight and plain.weights is None
    idx = np.random.default_rng(8).integers(0, n, 100)
    theta_new = theta + 0.05
    eq = np.testing.assert_array_equal
    for m in (ones, plain):
        m._results = [
            m.loglik_terms(theta, idx), m.loglik_diff_terms(theta, theta_new, idx),
            m.grad_terms(theta, idx), m.grad_sum(theta, idx),
            *m.full_pass(theta, hessian=True),
            m.range_bound(theta, theta_new), m.cv_range_bound(theta, theta_new, theta_star, 2),
        ]
        cache = m.compiled.cv_cache(theta_star)
        for order in (0, 1, 2):
            for es in (None, cache):
                m._results += [
                    m.compiled.cv_residual_terms(order, theta_star, theta, idx, es),
                    m.compiled.cv_residual_diff_terms(order, theta_star, theta, theta_new,
                                                      idx, es),
                    *m.compiled.cv_grad_sum_terms(order, theta_star, theta, idx, es),
                    *m.compiled.term_derivatives(order, theta_star, theta, idx, es),
                ]
            m._results += list(m.cv_residuals_and_grads(theta, theta_star, idx, order))
    assert len(ones._results) == len(plain._results)
    for a, b in zip(ones._results, plain._results):
        eq(a, b)


# ---------------------------------------------------------------------------
# the wrapper: subset, pickling, fingerprint, range bounds
# ---------------------------------------------------------------------------
def test_wrapper_subset_pickle_fingerprint_bounds():
    K = 3
    X, y, theta, theta_star = make_data(K, seed=9)
    n = X.shape[0]
    w = make_weights(n)
    model = MultinomialLogisticModel(X, y, n_classes=K, weights=w)
    plain = MultinomialLogisticModel(X, y, n_classes=K)
    theta_new = theta + np.random.default_rng(10).normal(scale=0.1, size=theta.shape)

    # subset: the rows with their weights
    idx = np.array([5, 1, 40, 77, 3])
    sub = model.subset(idx)
    np.testing.assert_array_equal(sub.weights, w[np.sort(idx)])
    assert sub.full_pass(theta)[0] == pytest.approx(
        model.loglik_terms(theta, np.sort(idx)).sum(), rel=1e-13)

    # pickling rebuilds the compiled object with the weights
    back = pickle.loads(pickle.dumps(model))
    assert back.compiled.has_weight
    for a, b in zip(back.full_pass(theta, hessian=True), model.full_pass(theta, hessian=True)):
        np.testing.assert_array_equal(a, b)

    # fingerprint: the weights' digest
    fp = model.fingerprint()
    assert "weights" in fp and "weights" not in plain.fingerprint()
    assert MultinomialLogisticModel(X, y, n_classes=K, weights=w.copy()).fingerprint() == fp
    assert MultinomialLogisticModel(X, y, n_classes=K, weights=2 * w).fingerprint() != fp

    # range bounds: the unweighted ones times the largest weight, and they hold
    wmax = w.max()
    assert model.range_bound(theta, theta_new) == pytest.approx(
        wmax * plain.range_bound(theta, theta_new), rel=1e-15)
    assert model.cv_range_bound(theta, theta_new, theta_star, 2) == pytest.approx(
        wmax * plain.cv_range_bound(theta, theta_new, theta_star, 2), rel=1e-15)
    all_idx = np.arange(n)
    assert (np.abs(model.loglik_diff_terms(theta, theta_new, all_idx)).max()
            <= model.range_bound(theta, theta_new))
    dd = model.compiled.cv_residual_diff_terms(2, theta_star, theta, theta_new, all_idx)
    assert np.abs(dd).max() <= model.cv_range_bound(theta, theta_new, theta_star, 2)


# ---------------------------------------------------------------------------
# (4) errors
# ---------------------------------------------------------------------------
def test_bad_weights_errors():
    X, y, _, _ = make_data(3, n=10)
    good = np.ones(10)
    cases = [
        (np.r_[good[:-1], -0.5], ">= 0"),
        (np.r_[good[:-1], np.nan], "NaN or infinity"),
        (np.r_[good[:-1], np.inf], "NaN or infinity"),
        (np.ones(9), r"shape \(10,\)"),
        (np.ones((10, 1)), r"shape \(10,\)"),
        (np.zeros(10), "zero for every row"),
        (np.array(["1"] * 10), "numeric"),
    ]
    for bad, msg in cases:
        with pytest.raises(ValueError, match=msg):
            MultinomialLogisticModel(X, y, n_classes=3, weights=bad)
    # the compiled object checks its own (None: unweighted)
    rows = DenseRows(X, True)
    assert not CyMultinomial(rows, y, 3, weight=None).has_weight
    assert CyMultinomial(rows, y, 3, weight=None).weights is None
    with pytest.raises(ValueError, match="shape"):
        CyMultinomial(rows, y, 3, weight=np.ones(9))
    for bad in (-good, np.r_[good[:-1], np.nan]):
        with pytest.raises(ValueError, match="finite and >= 0"):
            CyMultinomial(rows, y, 3, weight=bad)
    # a read-only view, and integer weights are accepted (as float64)
    cy = MultinomialLogisticModel(X, y, n_classes=3, weights=np.arange(10) % 3 + 1).compiled
    assert cy.weights.dtype == np.float64 and not cy.weights.flags.writeable


# ---------------------------------------------------------------------------
# HMC-ECS's compiled potential weighs its buffered rows itself: it agrees with the
# weighted model's control variate
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("order", [1, 2])
def test_ecs_core_matches_weighted_control_variate(order):
    from bayes_subsample.control_variates import TaylorControlVariate
    from bayes_subsample.samplers._hmc_ecs_fast import ECSCore

    K = 3
    X, y, theta, theta_star = make_data(K, n=400, seed=11)
    model = MultinomialLogisticModel(X, y, n_classes=K, weights=make_weights(400, seed=12),
                                     prior_scale=5.0)
    rng = np.random.default_rng(13)
    cv = TaylorControlVariate(model, theta_star, order=order)
    core = ECSCore(model.compiled, order, model.prior.precision, "perturbed")
    assert core.weighted
    idx = rng.integers(0, model.n_data, size=120)
    core.set_rows(idx, 30)
    core.set_reference(theta_star, cv.L_star, cv.A, cv.B)
    for _ in range(3):
        th = theta_star + 0.05 * rng.normal(size=model.n_params)
        U, g = core.value_and_grad(th)
        lam, glam = cv.perturbed_loglik_and_grad(th, idx)
        np.testing.assert_allclose(U, -(lam + model.prior.log_prob(th)), rtol=1e-10,
                                   atol=1e-8)
        np.testing.assert_allclose(g, -(glam + model.prior.grad_log_prob(th)), rtol=1e-9,
                                   atol=1e-8)
