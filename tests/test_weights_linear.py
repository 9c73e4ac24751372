"""Per-row weights (``sample_weight``) of linear regression with the noise scale
sampled (``GaussianScaleRegressionModel(weights=)``, its compiled
``CyGaussianScale(weight=)``).

The log-likelihood is ``sum_k w_k l_k(beta, tau)``: the compiled terms, their
derivatives in eta and in tau, the control-variate residuals, the full-data sums
and the sufficient statistics are checked against weights times plain NumPy
definitions (float32 and float64 rows, dense and CSR); integer weights against
the model of the duplicated rows; weights of ones against no weights (the same
bits); and the errors of bad weights.
"""
import math
import pickle

import numpy as np
import pytest
from scipy import sparse

from bayes_subsample.control_variates import TaylorControlVariate
from bayes_subsample.models import CyGaussianScale, GaussianScaleRegressionModel
from bayes_subsample.models._rows import make_rows
from bayes_subsample.samplers._hmc_ecs_fast import ECSCore

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _data(n=500, d=3, seed=0, dtype=np.float64, fmt="dense"):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[:, 1] += 0.5 * X[:, 0]
    y = X @ np.linspace(1.0, -1.0, d) + 3.0 + 0.7 * rng.normal(size=n)
    if fmt == "csr":
        X[np.abs(X) < 0.5] = 0.0
        return sparse.csr_matrix(X.astype(dtype)), y
    return X.astype(dtype), y


def _dense(X):
    return np.asarray(X.toarray() if sparse.issparse(X) else X, dtype=np.float64)


# ---- plain NumPy definitions of the unweighted per-datum quantities ---------------------------
class Ref:
    def __init__(self, X, y, log_s):
        self.X = np.column_stack([_dense(X), np.ones(X.shape[0])])
        self.y, self.log_s = y, log_s

    def parts(self, theta, idx):
        tau = self.log_s + theta[-1]
        Xi = self.X[idx]
        return tau, Xi, self.y[idx] - Xi @ theta[:-1], math.exp(-2 * tau)

    def loglik(self, theta, idx):
        tau, _, r, w = self.parts(theta, idx)
        return -tau - HALF_LOG_2PI - 0.5 * w * r * r

    def grad(self, theta, idx):
        _, Xi, r, w = self.parts(theta, idx)
        return np.column_stack([Xi * (w * r)[:, None], w * r * r - 1.0])

    def hessians(self, theta, idx):
        _, Xi, r, w = self.parts(theta, idx)
        p1 = Xi.shape[1]
        H = np.zeros((len(idx), p1 + 1, p1 + 1))
        H[:, :p1, :p1] = -w * Xi[:, :, None] * Xi[:, None, :]
        H[:, :p1, p1] = H[:, p1, :p1] = (-2 * w * r)[:, None] * Xi
        H[:, p1, p1] = -2 * w * r * r
        return H

    def residual(self, theta, theta_star, idx, order):
        """``l_k(theta) - q_k(theta)`` and its gradient, ``q_k`` the order-``order``
        Taylor expansion at ``theta_star``."""
        dlt = theta - theta_star
        d = self.loglik(theta, idx) - self.loglik(theta_star, idx)
        g = self.grad(theta, idx)
        if order >= 1:
            gs = self.grad(theta_star, idx)
            d = d - gs @ dlt
            g = g - gs
        if order == 2:
            Hs = self.hessians(theta_star, idx)
            d = d - 0.5 * np.einsum("i,kij,j->k", dlt, Hs, dlt)
            g = g - Hs @ dlt
        return d, g


def _points(p, seed=0):
    rng = np.random.default_rng(seed)
    theta_star = np.append(np.linspace(0.9, -0.9, p - 2), [3.0, 0.0]) \
        + 0.05 * rng.standard_normal(p)
    theta_star[-1] = math.log(0.7 / 1.5) + 0.05 * rng.standard_normal()
    return theta_star, theta_star + 0.05 * rng.standard_normal(p)


def _assert_close(a, b, rtol=1e-10, atol=1e-10):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# ---- (1) the compiled terms and sums against weights times NumPy ---------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_weighted_terms_match_numpy_reference(dtype, fmt):
    X, y = _data(dtype=dtype, fmt=fmt)
    n = X.shape[0]
    rng = np.random.default_rng(1)
    w = rng.uniform(0.0, 3.0, n)
    w[rng.random(n) < 0.1] = 0.0               # some rows out of the likelihood
    model = GaussianScaleRegressionModel(X, y, weights=w, noise_reference=1.5)
    plain = GaussianScaleRegressionModel(X, y, noise_reference=1.5,
                                         sufficient_statistics=False)
    ref = Ref(X, y, math.log(1.5))
    cy = model.compiled
    assert cy.has_weight and not plain.compiled.has_weight
    assert model.weight_sum == pytest.approx(w.sum(), rel=1e-14)
    assert plain.weight_sum == n
    theta_star, theta = _points(model.n_params)
    idx = rng.integers(0, n, size=400)
    wi = w[idx]
    _assert_close(model.loglik_terms(theta, idx), wi * ref.loglik(theta, idx))
    _assert_close(model.grad_terms(theta, idx), wi[:, None] * ref.grad(theta, idx))
    _assert_close(model.grad_sum(theta, idx), wi @ ref.grad(theta, idx), atol=1e-9)
    _assert_close(model.loglik_diff_terms(theta_star, theta, idx),
                  wi * (ref.loglik(theta, idx) - ref.loglik(theta_star, idx)))
    t, dt = cy.term_derivatives(-1, None, theta, idx)
    _, Xi, r, ww = ref.parts(theta, idx)
    _assert_close(t, wi * ref.loglik(theta, idx))
    _assert_close(dt, np.column_stack([wi * ww * r, wi * (ww * r * r - 1.0)]))
    g, total = cy.grad_sum_terms(theta, idx)
    assert total == pytest.approx(float(wi @ ref.loglik(theta, idx)), rel=1e-12)
    for order in (0, 1, 2):
        d_ref, g_ref = ref.residual(theta, theta_star, idx, order)
        d, gd = model.cv_residuals_and_grads(theta, theta_star, idx, order)
        _assert_close(d, wi * d_ref, atol=1e-11)
        _assert_close(gd, wi[:, None] * g_ref, atol=1e-10)
        _assert_close(model.cv_residual_terms(theta, theta_star, idx, order), wi * d_ref,
                      atol=1e-11)
        gs, ds = model.cv_grad_sum(theta, theta_star, idx, order)
        _assert_close(gs, wi @ g_ref, atol=1e-9)
        assert ds == pytest.approx(float(wi @ d_ref), rel=1e-9, abs=1e-10)
        d_new, _ = ref.residual(theta_star + 0.5 * (theta - theta_star), theta_star, idx,
                                order)
        _assert_close(cy.cv_residual_diff_terms(order, theta_star, theta,
                                                theta_star + 0.5 * (theta - theta_star), idx),
                      wi * (d_new - d_ref), atol=1e-11)
    # the full-data sums: from the (weighted) statistics, and by a pass over the rows
    all_rows = np.arange(n)
    ll_ref = w @ ref.loglik(theta, all_rows)
    g_ref = w @ ref.grad(theta, all_rows)
    H_ref = np.einsum("k,kij->ij", w, ref.hessians(theta, all_rows))
    passes = GaussianScaleRegressionModel(X, y, weights=w, noise_reference=1.5,
                                          sufficient_statistics=False)
    # (a pass over float32 rows sums x x^T in float32 products: to their precision)
    htol = 1e-9 if dtype == np.float64 else 1e-5
    for m in (model, passes):
        ll, g, H = m.full_pass(theta, hessian=True)
        assert ll == pytest.approx(ll_ref, rel=1e-10)
        _assert_close(g, g_ref, rtol=1e-9, atol=1e-8)
        _assert_close(H, H_ref, rtol=htol, atol=1e-8)
        _assert_close(m.full_pass(theta, hessian="diag")[2], np.diag(H_ref), rtol=htol,
                      atol=1e-8)
    # the statistics: the weighted least-squares fit and its weighted sums
    beta0, srr0, srx0, G = model.statistics()
    Xd = ref.X
    _assert_close(G, (Xd * w[:, None]).T @ Xd, rtol=1e-12, atol=1e-9)
    beta_ls = np.linalg.solve(G, Xd.T @ (w * y))
    _assert_close(beta0, beta_ls, rtol=1e-8, atol=1e-9)
    r0 = y - Xd @ beta0
    assert srr0 == pytest.approx(float(w @ r0**2), rel=1e-10)
    _assert_close(srx0, Xd.T @ (w * r0), atol=1e-8)
    assert model.compiled.statistics()[1] == srr0
    srr, srx, sxx = passes.compiled.raw_sums_at(theta[:-1], with_sxx=True)
    r = y - Xd @ theta[:-1]
    assert srr == pytest.approx(float(w @ r**2), rel=1e-12)
    _assert_close(srx, Xd.T @ (w * r), atol=1e-9)
    _assert_close(sxx, G, rtol=htol, atol=1e-9)
    # the posterior precision operator (with and without the statistics)
    v = rng.standard_normal(model.n_params)
    want = -H_ref @ v + model.prior.precision * v
    for m in (model, passes):
        _assert_close(m.neg_hessian_operator(theta) @ v, want, rtol=1e-9, atol=1e-8)
    # a subset keeps its rows' weights; pickling keeps them
    sub = model.subset(np.arange(0, n, 7))
    _assert_close(sub.loglik_terms(theta, np.arange(sub.n_data)),
                  w[::7] * ref.loglik(theta, np.arange(0, n, 7)))
    back = pickle.loads(pickle.dumps(model))
    assert back.compiled.has_weight
    assert back.full_pass(theta, hessian=True)[0] == model.full_pass(theta)[0]
    assert model.fingerprint() != plain.fingerprint()
    assert back.fingerprint() == model.fingerprint()
    # the range bounds hold for the weighted terms
    assert model.range_bound(theta_star, theta) >= np.max(np.abs(
        w * (ref.loglik(theta, all_rows) - ref.loglik(theta_star, all_rows))))
    t_new = theta_star + 1.3 * (theta - theta_star)
    d0 = ref.residual(theta, theta_star, all_rows, 2)[0]
    d1 = ref.residual(t_new, theta_star, all_rows, 2)[0]
    assert model.cv_range_bound(theta, t_new, theta_star, 2) >= np.max(np.abs(w * (d1 - d0)))


# ---- (2) integer weights are duplicated rows -----------------------------------------------
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_integer_weights_equal_duplicated_rows(fmt):
    X, y = _data(n=400, fmt=fmt)
    n = X.shape[0]
    rng = np.random.default_rng(2)
    w = rng.integers(0, 4, n).astype(np.float64)
    rep = np.repeat(np.arange(n), w.astype(int))
    for stats in (True, False):
        a = GaussianScaleRegressionModel(X, y, weights=w, sufficient_statistics=stats)
        b = GaussianScaleRegressionModel(X[rep], y[rep], sufficient_statistics=stats)
        # the default noise reference is the weighted sd of y: that of the repeated rows
        assert a.noise_reference == pytest.approx(b.noise_reference, rel=1e-12)
        b = GaussianScaleRegressionModel(X[rep], y[rep], noise_reference=a.noise_reference,
                                         sufficient_statistics=stats)
        assert a.weight_sum == b.n_data == len(rep)
        theta_star, theta = _points(a.n_params, seed=3)
        for th in (theta, theta_star):
            for x, z in zip(a.full_pass(th, hessian=True), b.full_pass(th, hessian=True)):
                _assert_close(x, z, rtol=1e-10, atol=1e-10 * np.max(np.abs(z)))
        for order in (0, 1, 2):
            ga, da = a.cv_grad_sum(theta, theta_star, np.arange(n), order)
            gb, db = b.cv_grad_sum(theta, theta_star, np.arange(len(rep)), order)
            _assert_close(ga, gb, rtol=1e-10, atol=1e-10 * np.max(np.abs(gb)))
            assert da == pytest.approx(db, rel=1e-10, abs=1e-12)
            # a subsample's rows, each once here and w_k times there
            sub = np.arange(0, n, 3)
            ga, _ = a.cv_grad_sum(theta, theta_star, sub, order)
            gb, _ = b.cv_grad_sum(theta, theta_star, np.flatnonzero(rep % 3 == 0), order)
            _assert_close(ga, gb, rtol=1e-10, atol=1e-10 * np.max(np.abs(gb)))
    ea, eb = a.exact_posterior(n_grid=201), b.exact_posterior(n_grid=201)
    _assert_close(ea["mean"], eb["mean"], rtol=1e-9, atol=1e-10)
    _assert_close(ea["sd"], eb["sd"], rtol=1e-8)
    na, nb = a.normal_inverse_gamma_posterior(), b.normal_inverse_gamma_posterior()
    _assert_close(na["mean"], nb["mean"], rtol=1e-9, atol=1e-10)
    _assert_close(na["sd"], nb["sd"], rtol=1e-9)


def test_ecs_core_on_weighted_rows_matches_the_estimator_definition():
    """The HMC-ECS potential (rows copied, and read in place) on a weighted model
    against the perturbed estimator from the model's weighted residuals."""
    X, y = _data(n=1500)
    rng = np.random.default_rng(4)
    w = rng.uniform(0.0, 2.0, X.shape[0])
    model = GaussianScaleRegressionModel(X, y, weights=w, sufficient_statistics=False)
    theta_star, _ = _points(model.n_params, seed=5)
    cv = TaylorControlVariate(model, theta_star, order=2)
    idx = rng.integers(0, model.n_data, size=200)
    for direct in (False, True):
        core = ECSCore(model.compiled, 2, model.prior.precision, "perturbed", direct)
        core.set_rows(idx, 20)
        core.set_reference(*cv.reference())
        theta = theta_star + 0.02 * rng.standard_normal(model.n_params)
        U, g = core.value_and_grad(theta)
        lam, glam = cv.perturbed_loglik_and_grad(theta, idx, None)
        np.testing.assert_allclose(U, -(lam + model.prior.log_prob(theta)), rtol=1e-10,
                                   atol=1e-8)
        np.testing.assert_allclose(g, -(glam + model.prior.grad_log_prob(theta)), rtol=1e-9,
                                   atol=1e-8)


# ---- (3) weights of ones: the bits of no weights -----------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_unit_weights_are_bit_identical_to_none(dtype, fmt):
    X, y = _data(n=700, dtype=dtype, fmt=fmt)       # several chunks of rows
    n = X.shape[0]
    ones = np.ones(n)
    rows = make_rows(X, True)
    a = CyGaussianScale(rows, y, 0.4)
    b = CyGaussianScale(rows, y, 0.4, weight=ones)
    assert b.has_weight and not a.has_weight and a.weight_sum == b.weight_sum == n
    theta_star, theta = _points(a.n_params, seed=6)
    idx = np.random.default_rng(7).integers(0, n, size=600)

    def same(x, z):
        for u, v in zip(x if isinstance(x, tuple) else (x,), z if isinstance(z, tuple)
                        else (z,)):
            assert np.array_equal(np.asarray(u), np.asarray(v))

    for cy_call in (lambda m: m.loglik_terms(theta, idx),
                    lambda m: m.loglik_diff_terms(theta_star, theta, idx),
                    lambda m: m.grad_sum_terms(theta, idx),
                    lambda m: m.term_derivatives(-1, None, theta, idx),
                    lambda m: m.term_derivatives(2, theta_star, theta, idx),
                    lambda m: m.grad_terms(theta, idx),
                    lambda m: m.raw_sums_at(theta[:-1], with_sxx=True),
                    lambda m: m.full_pass(theta, True, True, True, 1),
                    lambda m: m.full_pass(theta, True, True, True, 2)):
        same(cy_call(a), cy_call(b))
    for order in (0, 1, 2):
        same(a.cv_residual_terms(order, theta_star, theta, idx),
             b.cv_residual_terms(order, theta_star, theta, idx))
        same(a.cv_grad_sum_terms(order, theta_star, theta, idx),
             b.cv_grad_sum_terms(order, theta_star, theta, idx))
        same(a.cv_residual_diff_terms(order, theta_star, theta, theta_star, idx),
             b.cv_residual_diff_terms(order, theta_star, theta, theta_star, idx))
    # the Python model: the same statistics, and so the same full passes
    ma = GaussianScaleRegressionModel(X, y)
    mb = GaussianScaleRegressionModel(X, y, weights=ones)
    assert ma.noise_reference == mb.noise_reference
    for u, v in zip(ma.statistics(), mb.statistics()):
        assert np.array_equal(u, v)
    same(ma.full_pass(theta, hessian=True), mb.full_pass(theta, hessian=True))


# ---- (4) clear errors ---------------------------------------------------------------------------
def test_bad_weights_raise_clear_errors():
    X, y = _data(n=50)
    w = np.ones(50)
    cases = [(np.where(np.arange(50) == 3, -1.0, w), ">= 0"),
             (np.where(np.arange(50) == 3, np.nan, w), "NaN or infinity"),
             (np.where(np.arange(50) == 3, np.inf, w), "NaN or infinity"),
             (np.ones(49), r"shape \(50,\)"),
             (np.ones((50, 1)), r"shape \(50,\)"),
             (np.zeros(50), "zero for every row"),
             (np.array(["a"] * 50), "numeric")]
    for bad, msg in cases:
        with pytest.raises(ValueError, match=msg):
            GaussianScaleRegressionModel(X, y, weights=bad)
    rows = make_rows(X, True)
    with pytest.raises(ValueError, match=">= 0"):
        CyGaussianScale(rows, y, 0.0, weight=-w)
    with pytest.raises(ValueError, match="shape"):
        CyGaussianScale(rows, y, 0.0, weight=np.ones(3))
    # too few weighted rows for the flat-prior posterior
    small = GaussianScaleRegressionModel(X, y, weights=np.full(50, 0.01))
    with pytest.raises(ValueError, match="sum of the weights"):
        small.normal_inverse_gamma_posterior()
