"""Tests for the model layer (bayes_subsample.models).

* Every compiled GLM kernel (eta, loglik_terms, grad_terms, grad_sum, full_pass,
  row_norm_max) against a plain NumPy reference of doc/algorithms/building_blocks.rst, for
  float32 and float64 X, the three families, with and without intercept, on data
  that contains rows with extreme linear predictors (|eta| = 50, 500, 1000; Poisson
  down to -1000 and up to +50) where the naive formulas overflow.
* The fused full pass is bit-identical for any number of threads.
* A user-defined model (1-D Gaussian, unknown mean and log-scale) runs through the
  same interface (FunctionModel).
* Bad input gives clear errors, never a crash; read-only and memory-mapped X are
  used without a copy.

Tolerances: every per-datum comparison uses a relative bound on the magnitudes
involved (1e-12 of |y eta| + |eta| + |l| + 1, i.e. a few hundred ulps); sums use
1e-12 of the sum of absolute terms, far above the worst-case summation error
n * eps for the n used here.
"""

import numpy as np
import pytest
from scipy import sparse, stats
from scipy.special import expit, gammaln

from bayes_subsample import _optimize, sample
from bayes_subsample.control_variates import TaylorControlVariate
from bayes_subsample.models._cyglm import CyLogistic, count_binary
from bayes_subsample.models._rows import make_rows
from bayes_subsample.samplers import HMCECS
from bayes_subsample.models import (
    GLM,
    FunctionModel,
    GaussianPrior,
    GaussianRegressionModel,
    LogisticRegressionModel,
    Model,
    PoissonRegressionModel,
)

FAMILIES = ["logistic", "poisson", "gaussian"]
DTYPES = [np.float64, np.float32]
# linear predictors where naive formulas overflow (exp(500) is inf in float64 at 710)
EXTREME_ETA = {
    "logistic": [-1000.0, -500.0, -50.0, 50.0, 500.0, 1000.0],
    "poisson": [-1000.0, -745.0, -500.0, -50.0, 5.0, 20.0, 50.0],
    "gaussian": [-500.0, -50.0, 50.0, 500.0],
}
INTERCEPT = 0.5
NOISE_SCALE = 1.7

all_cases = pytest.mark.parametrize(
    "family,dtype,fit_intercept",
    [(f, dt, fi) for f in FAMILIES for dt in DTYPES for fi in (True, False)],
    ids=lambda v: v.__name__ if isinstance(v, type) else str(v),
)


# ---------------------------------------------------------------------------
# data and the NumPy reference
# ---------------------------------------------------------------------------
def make_data(family, dtype, fit_intercept, n=300, d=4, seed=0, extreme=True):
    """Random design plus rows whose linear predictor is exactly an extreme value.

    theta[0] = 1 and the intercept (if any) is 0.5, so an extreme row
    ``(e - 0.5, 0, ..., 0)`` has ``eta == e`` exactly in float32 and float64.
    Every extreme row appears twice, with two different targets.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    theta = rng.normal(scale=0.4, size=d + int(fit_intercept))
    theta[0] = 1.0
    b = INTERCEPT if fit_intercept else 0.0
    if fit_intercept:
        theta[-1] = INTERCEPT
    eta = X @ theta[:d] + b
    if family == "logistic":
        y = (rng.random(n) < expit(eta)).astype(float)
    elif family == "poisson":
        y = rng.poisson(np.exp(eta)).astype(float)
    else:
        y = eta + NOISE_SCALE * rng.normal(size=n)
    if extreme:
        ext = EXTREME_ETA[family]
        rows = np.zeros((2 * len(ext), d))
        rows[:, 0] = np.repeat(ext, 2) - b
        if family == "logistic":
            ys = np.tile([0.0, 1.0], len(ext))
        elif family == "poisson":
            ys = np.tile([0.0, 3.0], len(ext))
        else:
            ys = np.ravel([[e + 0.25, 0.0] for e in ext])
        X = np.vstack([X, rows])
        y = np.concatenate([y, ys])
        perm = rng.permutation(X.shape[0])
        X, y = X[perm], y[perm]
    return np.ascontiguousarray(X, dtype=dtype), y, theta


def make_model(family, X, y, fit_intercept=True, **kw):
    if family == "gaussian":
        kw.setdefault("noise_scale", NOISE_SCALE)
    return GLM(X, y, family, fit_intercept=fit_intercept, **kw)


def design(X, fit_intercept):
    X64 = np.asarray(X, dtype=np.float64)
    return np.column_stack([X64, np.ones(X64.shape[0])]) if fit_intercept else X64


def ref_terms(family, X, y, theta, fit_intercept, phi):
    """NumPy reference: eta, l_k, r_k = dl/deta, w_k = -d2l/deta2, design with ones."""
    X1 = design(X, fit_intercept)
    eta = X1 @ theta
    if family == "logistic":
        ll = y * eta - np.logaddexp(0.0, eta)
        r = y - expit(eta)
        w = expit(eta) * expit(-eta)
    elif family == "poisson":
        with np.errstate(over="ignore"):
            mu = np.exp(eta)
        ll = y * eta - mu - gammaln(y + 1.0)
        r = y - mu
        w = mu
    else:
        ll = -0.5 * (y - eta) ** 2 / phi - 0.5 * np.log(2 * np.pi * phi)
        r = (y - eta) / phi
        w = np.full_like(eta, 1.0 / phi)
    return eta, ll, r, w, X1


def assert_close(actual, desired, scale, rtol=1e-12):
    """|actual - desired| <= rtol * (|desired| + scale), elementwise."""
    actual, desired = np.asarray(actual), np.asarray(desired)
    assert actual.shape == desired.shape
    assert np.all(np.isfinite(actual) == np.isfinite(desired))
    err = np.abs(actual - desired)
    bound = rtol * (np.abs(desired) + scale)
    bad = ~(err <= bound)
    assert not bad.any(), (
        f"{bad.sum()} mismatches; worst rel err {np.max(err / (np.abs(desired) + scale)):.3g}"
    )


def random_idx(n, rng, m=200):
    """Indices with repeats that also cover every row (so extreme rows are hit)."""
    return np.concatenate([rng.integers(0, n, m), np.arange(n)]).astype(np.int64)


# ---------------------------------------------------------------------------
# compiled kernels vs NumPy
# ---------------------------------------------------------------------------
@all_cases
def test_eta_kernel_and_linear_predictor(family, dtype, fit_intercept, rng):
    X, y, theta = make_data(family, dtype, fit_intercept)
    model = make_model(family, X, y, fit_intercept)
    idx = random_idx(X.shape[0], rng)
    eta_ref = ref_terms(family, X, y, theta, fit_intercept, model.phi)[0]
    out = model.compiled.eta(theta, idx)
    scale = np.abs(design(X, fit_intercept)[idx]) @ np.abs(theta)
    assert_close(out, eta_ref[idx], scale)
    assert_close(model.linear_predictor(theta), eta_ref,
                 np.abs(design(X, fit_intercept)) @ np.abs(theta))


@all_cases
def test_loglik_terms(family, dtype, fit_intercept, rng):
    X, y, theta = make_data(family, dtype, fit_intercept)
    model = make_model(family, X, y, fit_intercept)
    idx = random_idx(X.shape[0], rng)
    eta, ll, _, _, _ = ref_terms(family, X, y, theta, fit_intercept, model.phi)
    got = model.loglik_terms(theta, idx)
    assert got.dtype == np.float64 and got.shape == idx.shape
    assert np.isfinite(got).all()
    assert_close(got, ll[idx], 1.0 + np.abs(y * eta)[idx] + np.abs(eta)[idx])
    # the compiled object directly (the model only validates)
    np.testing.assert_array_equal(model.compiled.loglik_terms(theta, idx), got)
    # the fused difference of two parameters: one read of each datum
    theta2 = theta * 0.9
    np.testing.assert_array_equal(model.loglik_diff_terms(theta, theta2, idx),
                                  model.loglik_terms(theta2, idx) - got)


@all_cases
def test_grad_terms(family, dtype, fit_intercept, rng):
    X, y, theta = make_data(family, dtype, fit_intercept)
    model = make_model(family, X, y, fit_intercept)
    idx = random_idx(X.shape[0], rng)
    _, _, r, _, X1 = ref_terms(family, X, y, theta, fit_intercept, model.phi)
    got = model.grad_terms(theta, idx)
    assert got.shape == (idx.shape[0], model.n_params)
    assert np.isfinite(got).all()
    ref = r[idx, None] * X1[idx]
    scale = (1.0 + np.abs(y[idx]) + np.abs(r[idx]))[:, None] * np.abs(X1[idx])
    assert_close(got, ref, scale)


@all_cases
def test_grad_sum(family, dtype, fit_intercept, rng):
    X, y, theta = make_data(family, dtype, fit_intercept)
    model = make_model(family, X, y, fit_intercept)
    idx = random_idx(X.shape[0], rng)
    eta, ll, r, _, X1 = ref_terms(family, X, y, theta, fit_intercept, model.phi)
    terms = r[idx, None] * X1[idx]
    got = model.grad_sum(theta, idx)
    assert_close(got, terms.sum(axis=0), np.abs(terms).sum(axis=0) + 1.0)
    # the compiled object, with the log-likelihood sum
    g, llsum = model.compiled.grad_sum_terms(theta, idx)
    np.testing.assert_array_equal(g, got)
    assert_close(llsum, ll[idx].sum(), np.sum(1.0 + np.abs(y * eta)[idx] + np.abs(ll[idx])))
    # empty subsample: zero gradient
    np.testing.assert_array_equal(model.grad_sum(theta, np.array([], dtype=np.int64)),
                                  np.zeros(model.n_params))


@all_cases
def test_full_pass(family, dtype, fit_intercept):
    # n > 3 chunks of 4096 rows so the chunked reduction is exercised
    X, y, theta = make_data(family, dtype, fit_intercept, n=4096 * 3 + 517, seed=3)
    model = make_model(family, X, y, fit_intercept, n_threads=1)
    eta, ll, r, w, X1 = ref_terms(family, X, y, theta, fit_intercept, model.phi)
    ll_got, g_got, h_got = model.full_pass(theta, gradient=True, hessian=True)
    assert_close(ll_got, ll.sum(), np.sum(1.0 + np.abs(y * eta) + np.abs(ll)))
    gterms = r[:, None] * X1
    assert_close(g_got, gterms.sum(axis=0), np.abs(gterms).sum(axis=0) + 1.0)
    h_ref = -(X1 * w[:, None]).T @ X1
    assert_close(h_got, h_ref, (np.abs(X1) * w[:, None]).T @ np.abs(X1) + 1e-300,
                 rtol=1e-12 + model.compiled.rows.hessian_rtol)
    np.testing.assert_array_equal(h_got, h_got.T)
    # partial requests give the same numbers (None where not asked)
    ll2, g2, h2 = model.full_pass(theta, gradient=False)
    assert ll2 == ll_got and g2 is None and h2 is None
    ll3, g3, h3 = model.full_pass(theta, gradient=True, hessian=False, loglik=False)
    assert ll3 is None and h3 is None
    np.testing.assert_array_equal(g3, g_got)
    _, g4, h4 = model.full_pass(theta, gradient=False, hessian=True)
    assert g4 is None
    np.testing.assert_array_equal(h4, h_got)
    # the Model API built on full_pass
    assert model.log_likelihood(theta) == ll_got
    lp, gp = model.log_posterior_and_grad(theta)
    np.testing.assert_allclose(lp, ll_got + model.prior.log_prob(theta), rtol=1e-14)
    np.testing.assert_allclose(gp, g_got - model.prior.precision * theta, rtol=1e-14, atol=0)
    np.testing.assert_allclose(model.neg_hessian_log_posterior(theta),
                               -h_got + np.diag(model.prior.precision), rtol=1e-14)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_full_pass_bit_identical_across_threads(family, dtype):
    X, y, theta = make_data(family, dtype, True, n=4096 * 3 + 1234, d=5, seed=7)
    model = make_model(family, X, y)
    results = [model.compiled.full_pass(theta, True, True, True, n_threads)
               for n_threads in (1, 2, 3)]
    for ll, g, h in results[1:]:
        assert ll == results[0][0]
        np.testing.assert_array_equal(g, results[0][1])
        np.testing.assert_array_equal(h, results[0][2])


def test_full_pass_slots_of_several_chunks_bit_identical_and_exact():
    """More chunks than slots (75 chunks of 4096 rows in 64 slots, some slots
    two chunks): the same sums for any number of threads, equal to NumPy's."""
    X, y, theta = make_data("logistic", np.float32, True, n=4096 * 74 + 99, d=3, seed=5,
                            extreme=False)
    model = make_model("logistic", X, y)
    results = [model.compiled.full_pass(theta, True, True, True, t) for t in (1, 2, 3)]
    for ll, g, h in results[1:]:
        assert ll == results[0][0]
        np.testing.assert_array_equal(g, results[0][1])
        np.testing.assert_array_equal(h, results[0][2])
    Xd = np.column_stack([X.astype(np.float64), np.ones(X.shape[0])])
    eta = Xd @ theta
    prob = expit(eta)
    np.testing.assert_allclose(results[0][0], np.sum(y * eta - np.logaddexp(0, eta)),
                               rtol=1e-12)
    np.testing.assert_allclose(results[0][1], Xd.T @ (y - prob), rtol=1e-10, atol=1e-8)
    w = prob * (1 - prob)
    assert_close(results[0][2], -(Xd * w[:, None]).T @ Xd,
                 (np.abs(Xd) * w[:, None]).T @ np.abs(Xd),
                 rtol=1e-12 + model.compiled.rows.hessian_rtol)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sampled_hessian_pass_exact_on_its_rows_and_bit_identical(family, dtype):
    """The pass behind refine_theta_star's first step: log-likelihood and
    gradient over all rows, the Hessian over every k-th chunk of 256 rows
    (several slots, a ragged last chunk): equal to NumPy's on those rows, the
    same for any number of threads, the full pass itself at k = 1."""
    X, y, theta = make_data(family, dtype, True, n=4096 * 5 + 300, d=4, seed=9)
    model = make_model(family, X, y)
    n = X.shape[0]
    full = model.compiled.full_pass(theta, True, True, True, 1)
    eta, ll, r, w, X1 = ref_terms(family, X, y, theta, True, model.phi)
    for every in (1, 3, 7, 200):
        out = [model.compiled.sampled_hessian_pass(theta, every, t) for t in (1, 2, 3)]
        for o in out[1:]:
            assert o[0] == out[0][0] and o[3] == out[0][3]
            for a, b in zip(o[1:3], out[0][1:3]):
                np.testing.assert_array_equal(a, b)
        ll_s, g_s, h_s, rows = out[0]
        assert ll_s == full[0]
        np.testing.assert_array_equal(g_s, full[1])
        chunk = np.arange(n) // 256
        keep = chunk % every == 0
        assert rows == keep.sum()
        if every == 1:
            np.testing.assert_array_equal(h_s, full[2])
        Xk, wk = X1[keep], w[keep]
        assert_close(h_s, -(Xk * wk[:, None]).T @ Xk,
                     (np.abs(Xk) * wk[:, None]).T @ np.abs(Xk) + 1e-300,
                     rtol=1e-12 + model.compiled.rows.hessian_rtol)
    with pytest.raises(ValueError, match="hess_every"):
        model.compiled.sampled_hessian_pass(theta, 0)


def test_hessian_estimate_scaled_and_exact_on_small_data():
    X, y, theta = make_data("logistic", np.float32, True, n=4096 * 8, d=3, seed=2,
                            extreme=False)
    model = LogisticRegressionModel(X, y)
    ll, g, h = model.full_pass(theta, hessian=True)
    before = model.n_full_passes
    ll1, g1, h1, exact = model.full_pass_hessian_estimate(theta)
    assert exact and ll1 == ll
    np.testing.assert_array_equal(g1, g)
    np.testing.assert_array_equal(h1, h)
    # 1024 rows asked: every 32nd chunk of 256 rows, the sum scaled by n / 1024
    ll2, g2, h2, exact = model.full_pass_hessian_estimate(theta, rows=1024)
    assert not exact and ll2 == ll
    np.testing.assert_array_equal(g2, g)
    _, _, h_s, rows = model.compiled.sampled_hessian_pass(theta, 32)
    assert rows == 1024
    np.testing.assert_allclose(h2, h_s * X.shape[0] / 1024, rtol=1e-15)
    assert np.linalg.norm(h2 - h) < 0.1 * np.linalg.norm(h)
    assert model.n_full_passes - before == 3   # each a full pass, counted


def test_model_full_pass_threads_bit_identical():
    # large enough (n * d >= 1e6) that GLM.full_pass really uses its threads
    X, y, theta = make_data("logistic", np.float64, True, n=20000, d=50, seed=11, extreme=False)
    out = []
    for n_threads in (1, 2):
        model = LogisticRegressionModel(X, y, n_threads=n_threads)
        out.append(model.full_pass(theta, gradient=True, hessian=True))
    assert out[0][0] == out[1][0]
    np.testing.assert_array_equal(out[0][1], out[1][1])
    np.testing.assert_array_equal(out[0][2], out[1][2])


@pytest.mark.parametrize("layout", ["dense32", "dense64", "csr", "multinomial", "user"])
def test_models_pickle(layout, user_data):
    """Models pickle (chains on a Dask cluster ship them to the workers): the
    compiled object is rebuilt from X and y, with the same terms, passes and
    count of passes (a user model's closures need cloudpickle, as Dask uses)."""
    cloudpickle = pytest.importorskip("cloudpickle")

    from bayes_subsample.models import MultinomialLogisticModel
    X, y, theta = make_data("poisson", np.float64, True, n=500, d=4, seed=2, extreme=False)
    if layout == "dense32":
        model = GLM(X.astype(np.float32), y, "poisson", prior_scale=3.0)
    elif layout == "dense64":
        model = GLM(X, y, "poisson", fit_intercept=False)
        theta = theta[:-1]
    elif layout == "csr":
        model = GLM(sparse.csr_matrix(np.where(np.abs(X) > 1, X, 0.0)), y, "poisson")
    elif layout == "multinomial":
        model = MultinomialLogisticModel(X, np.arange(500) % 3)
        theta = np.linspace(-0.3, 0.3, model.n_params)
    else:
        model = gaussian_1d_model(user_data)
        theta = np.array([1.0, 0.5])
    model.full_pass(np.zeros(model.n_params))
    model.compiled                          # built (and cached, for the user model)
    copy = cloudpickle.loads(cloudpickle.dumps(model))
    assert copy.n_full_passes == model.n_full_passes == 1
    idx = np.array([0, 7, 499, 7])
    np.testing.assert_array_equal(copy.loglik_terms(theta, idx), model.loglik_terms(theta, idx))
    for a, b in zip(copy.full_pass(theta, hessian=True), model.full_pass(theta, hessian=True)):
        np.testing.assert_array_equal(a, b)
    assert copy.compiled is not model.compiled
    np.testing.assert_array_equal(copy.prior.scale, model.prior.scale)


def test_compiled_objects_refuse_pickling(tmp_path):
    """The compiled rows, the multinomial model and HMC-ECS's core raise
    TypeError when pickled (Cython's generated pickling of them crashed the
    interpreter). Run in a subprocess, so that a crash fails this test only."""
    import subprocess
    import sys
    code = """
import pickle, numpy as np
from scipy import sparse
from bayes_subsample.models import GLM, MultinomialLogisticModel
from bayes_subsample.samplers._hmc_ecs_fast import ECSCore
X = np.random.default_rng(0).normal(size=(50, 3))
glm = GLM(X, (X[:, 0] > 0).astype(float), "logistic")
objs = [glm.compiled.rows, GLM(sparse.csr_matrix(X), glm.y, "logistic").compiled.rows,
        MultinomialLogisticModel(X, np.arange(50) % 3).compiled,
        ECSCore(glm.compiled, 2, glm.prior.precision, "perturbed")]
for obj in objs:
    try:
        pickle.dumps(obj)
    except TypeError:
        print("refused", type(obj).__name__)
"""
    # run outside the source tree: ``python -c`` puts its working directory first
    # on sys.path, where a clone's uncompiled package would shadow the installed one
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["refused", "DenseRows", "refused", "CsrRows",
                                  "refused", "CyMultinomial", "refused", "ECSCore"]


def test_logistic_terms_finite_up_to_1e3():
    eta = np.concatenate([np.linspace(-1e3, 1e3, 2001), [-1e3, 1e3, -745.2, 709.8, 0.0]])
    X = eta[:, None].copy()
    for yv in (0.0, 1.0):
        y = np.full(eta.shape[0], yv)
        model = LogisticRegressionModel(X, y, fit_intercept=False)
        idx = np.arange(eta.shape[0])
        theta = np.ones(1)
        ll = model.loglik_terms(theta, idx)
        g = model.grad_terms(theta, idx)
        assert np.isfinite(ll).all() and np.isfinite(g).all()
        assert np.all(ll <= 0.0)
        np.testing.assert_allclose(ll, yv * eta - np.logaddexp(0.0, eta), rtol=1e-14, atol=1e-300)
        ll_sum, gs, h = model.full_pass(theta, hessian=True)
        assert np.isfinite(ll_sum) and np.isfinite(gs).all() and np.isfinite(h).all()
        # control-variate residuals at extreme eta and eta*
        for order in (0, 1, 2):
            cv = TaylorControlVariate(model, np.array([0.3]), order=order)
            d, dp = cv.residual_derivatives(theta, idx)
            assert np.isfinite(d).all() and np.isfinite(dp).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_row_norm_max(dtype, fit_intercept):
    X, y, _ = make_data("gaussian", dtype, fit_intercept, extreme=False)
    model = GaussianRegressionModel(X, y, fit_intercept=fit_intercept)
    ref = np.sqrt(np.max(np.sum(design(X, fit_intercept) ** 2, axis=1)))
    np.testing.assert_allclose(model.row_norm_max, ref, rtol=1e-13)


@pytest.mark.parametrize("family", FAMILIES)
def test_range_bound_dominates_term_differences(family, rng):
    X, y, theta = make_data(family, np.float64, True, n=500, extreme=False)
    model = make_model(family, X, y)
    idx = np.arange(model.n_data)
    for _ in range(5):
        t1 = theta + rng.normal(scale=0.1, size=theta.shape)
        t2 = t1 + rng.normal(scale=0.05, size=theta.shape)
        C = model.range_bound(t1, t2)
        diff = np.max(np.abs(model.loglik_terms(t2, idx) - model.loglik_terms(t1, idx)))
        assert C >= diff * (1 - 1e-12)


# ---------------------------------------------------------------------------
# a user-defined model through the same interface
# ---------------------------------------------------------------------------
def gaussian_1d_model(x, prior_scale=10.0):
    """theta = (mu, log_sigma); l_k = log N(x_k; mu, sigma^2)."""

    def loglik(theta, idx):
        mu, log_s = theta
        z = (x[idx] - mu) / np.exp(log_s)
        return -0.5 * z**2 - log_s - 0.5 * np.log(2 * np.pi)

    def grad(theta, idx):
        mu, log_s = theta
        z = (x[idx] - mu) / np.exp(log_s)
        return np.column_stack([z / np.exp(log_s), z**2 - 1.0])

    return FunctionModel(loglik, grad, n_data=len(x), n_params=2, prior_scale=prior_scale)


@pytest.fixture
def user_data():
    # 70,000 > one 65,536-row chunk of the generic full pass
    return np.random.default_rng(5).normal(1.3, 2.1, size=70_000)


def analytic_hessian(x, theta):
    mu, log_s = theta
    s = np.exp(log_s)
    z = (x - mu) / s
    return np.array([[-len(x) / s**2, -2 * np.sum(z) / s],
                     [-2 * np.sum(z) / s, -2 * np.sum(z**2)]])


def test_user_model_terms(user_data, rng):
    x = user_data
    model = gaussian_1d_model(x)
    assert isinstance(model, Model) and model.family is None
    theta = np.array([0.7, 0.4])
    idx = rng.integers(0, len(x), 300)
    np.testing.assert_allclose(model.loglik_terms(theta, idx),
                               stats.norm.logpdf(x[idx], 0.7, np.exp(0.4)), rtol=1e-13)
    g = model.grad_terms(theta, idx)
    h = 1e-6
    for j in range(2):
        e = np.zeros(2)
        e[j] = h
        fd = (model.loglik_terms(theta + e, idx) - model.loglik_terms(theta - e, idx)) / (2 * h)
        np.testing.assert_allclose(g[:, j], fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(model.grad_sum(theta, idx), g.sum(axis=0), rtol=1e-14)


def test_user_model_full_pass_and_posterior(user_data):
    x = user_data
    model = gaussian_1d_model(x)
    theta = np.array([1.0, 0.6])
    ll, g, H = model.full_pass(theta, gradient=True, hessian=True)
    all_idx = np.arange(len(x))
    np.testing.assert_allclose(ll, model.loglik_terms(theta, all_idx).sum(), rtol=1e-12)
    np.testing.assert_allclose(g, model.grad_terms(theta, all_idx).sum(axis=0), rtol=1e-10)
    # numerical Hessian (central differences of the gradient) vs the analytic one
    np.testing.assert_allclose(H, analytic_hessian(x, theta), rtol=1e-5)
    assert model.full_pass(theta, gradient=False)[1] is None
    lp, gp = model.log_posterior_and_grad(theta)
    np.testing.assert_allclose(lp, ll - 0.5 * np.sum(theta**2) / 100.0, rtol=1e-13)
    np.testing.assert_allclose(gp, g - theta / 100.0, rtol=1e-12)
    np.testing.assert_allclose(model.log_posterior(theta), lp, rtol=1e-13)


@pytest.mark.parametrize("method", [None, "lbfgs", "newton"])
def test_user_model_find_map(user_data, method):
    x = user_data
    model = gaussian_1d_model(x)
    theta, info = _optimize.find_map(model, method=method)
    assert info["success"] and info["n_evals"] % len(x) == 0
    # the MLE (mean, log of the ddof=0 std); the N(0, 10^2) prior moves the mode by
    # about sigma^2 * mu / (100 n) ~ 1e-6 here
    mle = np.array([x.mean(), np.log(x.std())])
    np.testing.assert_allclose(theta, mle, atol=1e-4)
    _, gp = model.log_posterior_and_grad(theta)
    assert np.max(np.abs(gp)) < 1e-3
    lap = _optimize.laplace(model)
    np.testing.assert_allclose(lap["precision"],
                               -analytic_hessian(x, lap["theta_map"]) + np.eye(2) / 100, rtol=1e-4)


def test_user_model_control_variate_order1(user_data, rng):
    x = user_data
    model = gaussian_1d_model(x)
    theta_star = np.array([x.mean(), np.log(x.std())])
    cv = TaylorControlVariate(model, theta_star, order=1)
    theta = theta_star + np.array([0.02, -0.01])
    all_idx = np.arange(len(x))
    ll_full, g_full, _ = model.full_pass(theta)
    # m = n with every index once: the estimator is the full sum exactly
    ell, _ = cv.estimate(theta, all_idx)
    np.testing.assert_allclose(ell, ll_full, rtol=1e-10)
    np.testing.assert_allclose(cv.grad_estimate(theta, all_idx), g_full, rtol=1e-8, atol=1e-6)
    # residuals d_k = l_k - q_k with q_k the first-order expansion
    idx = rng.integers(0, len(x), 100)
    d, gd = cv.residuals(theta, idx)
    q = (model.loglik_terms(theta_star, idx)
         + model.grad_terms(theta_star, idx) @ (theta - theta_star))
    np.testing.assert_allclose(d, model.loglik_terms(theta, idx) - q, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gd, model.grad_terms(theta, idx) - model.grad_terms(theta_star, idx),
                               rtol=1e-10, atol=1e-13)
    lam, glam = cv.perturbed_loglik_and_grad(theta, idx)
    assert np.isfinite(lam) and glam.shape == (2,)
    # order 2 from central differences of the per-datum gradients
    cv2 = TaylorControlVariate(model, theta_star, order=2)
    np.testing.assert_allclose(cv2.residual_terms(theta, idx),
                               d - 0.5 * np.einsum("kij,i,j->k", model.hess_terms(theta_star, idx),
                                                   theta - theta_star, theta - theta_star),
                               rtol=1e-9, atol=1e-12)
    with pytest.raises(TypeError):
        cv.residual_derivatives(theta, idx)
    with pytest.raises(NotImplementedError, match="range_bound"):
        model.range_bound(theta, theta_star)


def test_function_model_validation():
    x = np.arange(5.0)

    def ll(theta, idx):
        return x[idx]

    def gr(theta, idx):
        return np.ones((len(idx), 2))

    with pytest.raises(TypeError, match="callables"):
        FunctionModel(None, gr, n_data=5, n_params=2)
    for bad in (0, -1, 2.5, "3"):
        with pytest.raises(ValueError, match="n_data"):
            FunctionModel(ll, gr, n_data=bad, n_params=2)
        with pytest.raises(ValueError, match="n_params"):
            FunctionModel(ll, gr, n_data=5, n_params=bad)
    bad_shape = FunctionModel(lambda t, i: np.ones((len(i), 2)), lambda t, i: np.ones(len(i)),
                              n_data=5, n_params=2)
    with pytest.raises(ValueError, match="loglik returned shape"):
        bad_shape.loglik_terms(np.zeros(2), np.arange(3))
    with pytest.raises(ValueError, match="grad returned shape"):
        bad_shape.grad_terms(np.zeros(2), np.arange(3))
    m = FunctionModel(ll, gr, n_data=5, n_params=2, range_bound=lambda a, b: 7)
    assert m.range_bound(np.zeros(2), np.ones(2)) == 7.0


def test_gaussian_prior():
    prior = GaussianPrior([1.0, 2.0])
    t = np.array([1.0, 2.0])
    assert prior.log_prob(t) == -1.0
    np.testing.assert_array_equal(prior.grad_log_prob(t), [-1.0, -0.5])
    np.testing.assert_array_equal(prior.neg_hessian(), np.diag([1.0, 0.25]))
    assert GaussianPrior(3.0, n_params=4).n_params == 4
    for bad in ([1.0, 0.0], [1.0, -1.0], [np.nan, 1.0], [np.inf, 1.0]):
        with pytest.raises(ValueError):
            GaussianPrior(bad)
    with pytest.raises(ValueError, match="n_params"):
        GaussianPrior(1.0)
    with pytest.raises(ValueError, match="shape"):
        GaussianPrior([1.0, 2.0], n_params=3)


# ---------------------------------------------------------------------------
# bad input, layouts, read-only data
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_bad_shapes(family):
    X, y, _ = make_data(family, np.float64, True, n=20, extreme=False)
    with pytest.raises(ValueError, match="2-D"):
        make_model(family, X[:, 0], y)
    with pytest.raises(ValueError, match="2-D"):
        make_model(family, X[:, :, None], y)
    with pytest.raises(ValueError, match="at least one"):
        make_model(family, X[:0], y[:0])
    with pytest.raises(ValueError, match="at least one"):
        make_model(family, X[:, :0], y)
    with pytest.raises(ValueError, match="y must have shape"):
        make_model(family, X, y[:-1])
    with pytest.raises(ValueError, match="y must have shape"):
        make_model(family, X, y[:, None])
    model = make_model(family, X, y)
    for bad_theta in (np.zeros(X.shape[1]), np.zeros(X.shape[1] + 2), np.zeros((1, 5))):
        with pytest.raises(ValueError, match="theta must have shape"):
            model.loglik_terms(bad_theta, [0])
        with pytest.raises(ValueError, match="theta must have shape"):
            model.full_pass(bad_theta)


def test_bad_dtypes():
    X, y, _ = make_data("logistic", np.float64, True, n=20, extreme=False)
    with pytest.raises(TypeError, match="float32 or float64"):
        LogisticRegressionModel(X.astype(np.complex128), y)
    with pytest.raises(TypeError, match="float32 or float64"):
        LogisticRegressionModel(X.astype(str), y)
    # sparse designs are accepted (tests/test_sparse.py), but not of a wrong dtype
    with pytest.raises(TypeError, match="float32 or float64"):
        LogisticRegressionModel(sparse.csr_matrix(X.astype(np.complex128)), y)
    with pytest.raises(TypeError, match="numeric"):
        LogisticRegressionModel(X, y.astype(str))
    # integer / boolean designs are converted (a copy), float16 is not silently accepted
    Xi = (X > 0).astype(np.int32)
    m = LogisticRegressionModel(Xi, y.astype(bool))
    assert m.X.dtype == np.float64
    np.testing.assert_array_equal(m.X, Xi)
    with pytest.raises(TypeError):
        LogisticRegressionModel(X.astype(np.float16), y)
    with pytest.raises(ValueError, match="family"):
        GLM(X, y, "binomial")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input(family, dtype, bad):
    X, y, _ = make_data(family, dtype, True, n=50, extreme=False)
    Xb = X.copy()
    Xb[17, 2] = bad
    with pytest.raises(ValueError, match="NaN or infinity"):
        make_model(family, Xb, y)
    yb = y.copy()
    yb[3] = bad
    with pytest.raises(ValueError, match="NaN or infinity"):
        make_model(family, X, yb)


def test_target_domains():
    X, y, _ = make_data("logistic", np.float64, True, n=20, extreme=False)
    for bad in (2.0, -1.0, 0.5):
        yb = y.copy()
        yb[0] = bad
        with pytest.raises(ValueError, match=r"y in \{0, 1\}"):
            LogisticRegressionModel(X, yb)
    # other label types: uint8 0/1 in place, int and float32 as bytes, others refused
    for bad in (2, 255):
        with pytest.raises(ValueError, match=r"y in \{0, 1\}"):
            LogisticRegressionModel(X, np.where(y > 0, bad, 0).astype(np.uint8))
        with pytest.raises(ValueError, match=r"y in \{0, 1\}"):
            LogisticRegressionModel(X, np.where(y > 0, bad, 0).astype(np.int64))
    yf = y.astype(np.float32)
    yf[1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        LogisticRegressionModel(X, yf)
    with pytest.raises(ValueError, match="uint8 targets must be 0/1"):
        CyLogistic(make_rows(X, True), np.full(20, 3, np.uint8))
    yc = np.arange(20.0) % 4
    PoissonRegressionModel(X, yc)  # fine
    for bad in (-1.0, 0.5, 2.25):
        yb = yc.copy()
        yb[5] = bad
        with pytest.raises(ValueError, match="non-negative integer"):
            PoissonRegressionModel(X, yb)
    for bad in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="noise_scale"):
            GaussianRegressionModel(X, y, noise_scale=bad)


@pytest.mark.parametrize("family", FAMILIES)
def test_bad_indices(family):
    X, y, theta = make_data(family, np.float64, True, n=30, extreme=False)
    model = make_model(family, X, y)
    cv = TaylorControlVariate(model, theta, order=2 if family != "gaussian" else 1)
    calls = [
        lambda i: model.loglik_terms(theta, i),
        lambda i: model.grad_terms(theta, i),
        lambda i: model.grad_sum(theta, i),
        lambda i: cv.residuals(theta, i),
        lambda i: cv.estimate(theta, i),
        lambda i: cv.grad_estimate(theta, i),
    ]
    for f in calls:
        with pytest.raises(IndexError, match="out of range"):
            f(np.array([0, 30]))
        with pytest.raises(IndexError, match="out of range"):
            f(np.array([-1, 2]))
        with pytest.raises(IndexError, match="out of range"):
            f(np.array([2**62]))
        with pytest.raises(TypeError, match="integers"):
            f(np.array([0.0, 1.0]))
        with pytest.raises(TypeError, match="integers"):
            f(np.array([True, False]))
        with pytest.raises(ValueError, match="1-D"):
            f(np.array([[0, 1]]))
    # lists and other integer dtypes are fine
    np.testing.assert_array_equal(model.loglik_terms(theta, [3, 4]),
                                  model.loglik_terms(theta, np.array([3, 4], dtype=np.uint8)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["fortran", "row_strided", "col_strided"])
def test_non_contiguous_X_is_copied_and_correct(dtype, layout):
    X, y, theta = make_data("logistic", dtype, True, n=40, d=6, extreme=False)
    if layout == "fortran":
        Xnc = np.asfortranarray(X)
        Xc, yc = X, y
    elif layout == "row_strided":
        big = np.repeat(X, 2, axis=0)
        Xnc, Xc, yc = big[::2], X, y
    else:
        big = np.repeat(X, 2, axis=1)
        Xnc, Xc, yc = big[:, ::2], X, y
    assert not Xnc.flags.c_contiguous
    m_nc = LogisticRegressionModel(Xnc, yc)
    m_c = LogisticRegressionModel(Xc, yc)
    assert m_nc.X.flags.c_contiguous and m_nc.X.dtype == dtype
    assert not np.shares_memory(m_nc.X, Xnc)  # deliberate copy
    idx = np.arange(40)
    np.testing.assert_array_equal(m_nc.loglik_terms(theta, idx), m_c.loglik_terms(theta, idx))
    a, b = m_nc.full_pass(theta, hessian=True), m_c.full_pass(theta, hessian=True)
    assert a[0] == b[0]
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(a[2], b[2])


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_read_only_X_used_without_copy(family, dtype):
    X, y, theta = make_data(family, dtype, True, n=60, extreme=False)
    ref = make_model(family, X.copy(), y.copy())
    X.setflags(write=False)
    y.setflags(write=False)
    model = make_model(family, X, y)
    assert np.shares_memory(model.X, X)
    assert np.shares_memory(model.y, y)
    idx = np.array([0, 5, 59, 5])
    np.testing.assert_array_equal(model.loglik_terms(theta, idx), ref.loglik_terms(theta, idx))
    np.testing.assert_array_equal(model.grad_terms(theta, idx), ref.grad_terms(theta, idx))
    np.testing.assert_array_equal(model.grad_sum(theta, idx), ref.grad_sum(theta, idx))
    assert model.full_pass(theta, hessian=True)[0] == ref.full_pass(theta, hessian=True)[0]
    cv = TaylorControlVariate(model, theta + 0.01, order=1)
    cv_ref = TaylorControlVariate(ref, theta + 0.01, order=1)
    assert cv.estimate(theta, idx) == cv_ref.estimate(theta, idx)
    np.testing.assert_array_equal(cv.grad_estimate(theta, idx), cv_ref.grad_estimate(theta, idx))
    assert model.row_norm_max == ref.row_norm_max


@pytest.mark.parametrize("dtype", DTYPES)
def test_memmap_X_used_without_copy(dtype, tmp_path):
    X, y, theta = make_data("logistic", dtype, True, n=5000, extreme=False)
    path = tmp_path / "X.dat"
    mm = np.memmap(path, dtype=dtype, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    del mm
    Xr = np.memmap(path, dtype=dtype, mode="r", shape=X.shape)
    model = LogisticRegressionModel(Xr, y)
    assert np.shares_memory(model.X, Xr)
    ref = LogisticRegressionModel(X, y)
    a, b = model.full_pass(theta, hessian=True), ref.full_pass(theta, hessian=True)
    assert a[0] == b[0]
    np.testing.assert_array_equal(a[1], b[1])
    np.testing.assert_array_equal(a[2], b[2])
    idx = np.arange(0, 5000, 7)
    np.testing.assert_array_equal(model.grad_terms(theta, idx), ref.grad_terms(theta, idx))
    del model, Xr


def test_repr_and_attributes():
    X, y, _ = make_data("poisson", np.float32, False, n=10, extreme=False)
    m = PoissonRegressionModel(X, y, fit_intercept=False, prior_scale=2.0)
    assert m.n_params == m.n_features == 4 and m.n_data == 10
    assert "dtype=float32" in repr(m)
    np.testing.assert_array_equal(m.prior.scale, np.full(4, 2.0))
    m2 = PoissonRegressionModel(X, y, prior_scale=2.0, intercept_prior_scale=5.0)
    np.testing.assert_array_equal(m2.prior.scale, [2.0, 2.0, 2.0, 2.0, 5.0])


@pytest.mark.parametrize("layout", ["dense32", "dense64", "csr"])
def test_compact_labels_give_the_same_numbers(layout):
    """Logistic labels stored as one byte a row (uint8 and bool used in place,
    other integer types copied to bytes) give bit-identical terms, passes,
    control-variate residuals and gathered targets to float64 labels, and the
    same HMC-ECS draws (its core reads the targets through CyGLM.target)."""
    X, y, theta = make_data("logistic", np.float64, True, n=4096 + 300, d=4, seed=4,
                            extreme=False)
    X = sparse.csr_matrix(X) if layout == "csr" else X.astype(
        np.float32 if layout == "dense32" else np.float64)
    ref = LogisticRegressionModel(X, y)
    idx = np.random.default_rng(0).integers(0, ref.n_data, 500)
    for labels in (y.astype(np.uint8), y.astype(bool), y.astype(np.int32)):
        m = LogisticRegressionModel(X, labels)
        assert m.y.dtype == np.uint8 and m.compiled.labels8 and not ref.compiled.labels8
        assert np.shares_memory(m.y, labels) == (labels.dtype != np.int32)
        for a, b in zip(m.full_pass(theta, hessian=True), ref.full_pass(theta, hessian=True)):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(m.loglik_terms(theta, idx), ref.loglik_terms(theta, idx))
        np.testing.assert_array_equal(m.grad_sum(theta, idx), ref.grad_sum(theta, idx))
        got = m.compiled.targets(idx)
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, ref.compiled.targets(idx))
        cm = TaylorControlVariate(m, theta * 0.9, order=2)
        cr = TaylorControlVariate(ref, theta * 0.9, order=2)
        np.testing.assert_array_equal(cm.residuals(theta, idx)[0], cr.residuals(theta, idx)[0])
    kw = dict(n_samples=50, n_warmup=50, n_chains=1, random_state=3, check_convergence=False)
    a = sample(LogisticRegressionModel(X, y.astype(bool)), HMCECS(), **kw)
    b = sample(ref, HMCECS(), **kw)
    assert not a.tuning[0].get("full_data", False)
    np.testing.assert_array_equal(a.draws, b.draws)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32, np.int16,
                                   np.int8, np.uint64, np.uint32, np.uint16, np.uint8,
                                   np.bool_, np.longlong, ">f8", ">i4"])
def test_count_binary_against_numpy(dtype):
    """The compiled 0/1 label count behind the logistic targets' check, for every
    integer and float type NumPy has on this platform (non-native byte order
    included), against NumPy; NaN is neither 0 nor 1; float16 is refused."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3 if dtype != np.bool_ else 2, size=1001).astype(dtype)
    assert count_binary(y) == (int(np.sum(y == 0)), int(np.sum(y == 1)))
    assert count_binary(y[::2]) == (int(np.sum(y[::2] == 0)), int(np.sum(y[::2] == 1)))
    if np.dtype(dtype).kind == "f":
        z = y.copy()
        z[[0, 5]] = np.nan
        assert count_binary(z) == (int(np.sum(z == 0)), int(np.sum(z == 1)))
    assert count_binary(np.zeros(0, dtype)) == (0, 0)
    with pytest.raises(TypeError, match="numeric"):
        count_binary(np.zeros(3, np.float16))
    with pytest.raises(TypeError, match="numeric"):
        count_binary(np.array(["0", "1"]))
