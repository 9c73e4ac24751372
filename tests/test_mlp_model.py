"""Tests for the compiled multilayer perceptron (``CyMLP`` behind ``MLPModel``).

* Every compiled pass (per-datum log-likelihoods and their differences,
  minibatch gradient sums, per-datum gradients, the full pass, the outputs of
  new rows) against the plain NumPy definitions ``mlp_*_reference`` of
  ``bayes_subsample.models._mlp``, for each activation, both outputs and both
  dtypes, with minibatches longer than one chunk of rows (``MODEL_CHUNK``) and
  a full pass over more than one chunk (``FULL_CHUNK``).
* Gradients against central finite differences on a tiny float64 net.
* Per-datum gradients sum to the gradient sum.
* With no hidden layer the model is multinomial logistic regression
  (``MultinomialLogisticModel``) and, with a Gaussian output, linear regression
  (``GaussianRegressionModel``): same log-likelihoods and gradients once the
  layouts are mapped.
* Bad input gives clear errors; unsupported methods (control variates,
  Hessians) raise NotImplementedError.

Tolerances. float64: 1e-10 of the scale of the compared values (the largest
|value| for per-datum arrays, the sum of |terms| for sums): the two sides
differ by the order of floating-point operations only, a few ulps times the
depth and width of these small nets. float32: the layers run in float32 with
``theta`` rounded to float32, so each value carries a relative error of a few
float32 ulps (6e-8) per layer and per accumulated product; the bound
``F32_RTOL = 2e-5`` of the same scales is 300 ulps, above what these nets of
width <= 9 and depth <= 3 reach (about 3e-7 measured) and far below an error
in a formula (which is of the order of the values).
"""
import pickle

import numpy as np
import pytest
from scipy.special import softmax

from bayes_subsample.models import GaussianRegressionModel, MLPModel, MultinomialLogisticModel
from bayes_subsample.models._cymlp import CyMLP
from bayes_subsample.models._mlp import (mlp_forward_reference, mlp_grad_reference,
                                         mlp_loglik_reference)
from bayes_subsample.models._rows import DenseRows

ACTIVATIONS = ["relu", "tanh", "logistic"]
OUTPUTS = ["softmax", "gaussian"]
DTYPES = [np.float64, np.float32]
F64_RTOL = 1e-10
F32_RTOL = 2e-5
NOISE = 0.7


def rtol(dtype):
    return F64_RTOL if dtype == np.float64 else F32_RTOL


def assert_close(actual, expected, dtype, scale=None):
    """|actual - expected| <= rtol * scale (default: the largest |expected|)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    if scale is None:
        scale = np.max(np.abs(expected)) if expected.size else 1.0
    err = np.max(np.abs(actual - expected)) if expected.size else 0.0
    assert err <= rtol(dtype) * scale, (err, scale)


def make_model(dtype, activation, output, n=300, d=5, hidden=(7, 4), K=3, seed=0, **kw):
    """Model, inputs (as float64 values of the stored dtype), targets and a
    ``theta`` twice the initial scale (activations spread over their range:
    relu units both on and off, tanh and logistic beyond their linear part)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    y = rng.integers(0, K, n) if output == "softmax" else rng.normal(size=(n, K))
    model = MLPModel(X, y, hidden_layer_sizes=hidden, activation=activation, output=output,
                     n_classes=K if output == "softmax" else None, noise_scale=NOISE, **kw)
    theta = 2.0 * model.init_params(rng)
    return model, X.astype(np.float64), y, theta


def reference(X, y, theta, model):
    args = (theta, model.sizes, model.activation, model.output, model.noise_scale)
    return mlp_loglik_reference(X, y, *args), mlp_grad_reference(X, y, *args)


cases = pytest.mark.parametrize(
    "dtype,activation,output",
    [(dt, a, o) for dt in DTYPES for a in ACTIVATIONS for o in OUTPUTS],
    ids=lambda v: v.__name__ if isinstance(v, type) else str(v))


@cases
def test_minibatch_terms_against_reference(dtype, activation, output):
    model, X, y, theta = make_model(dtype, activation, output)
    # 600 indices with repeats: more than one chunk of MODEL_CHUNK = 256 rows
    idx = np.random.default_rng(1).integers(0, model.n_data, 600)
    ll_ref, g_ref = reference(X[idx], y[idx], theta, model)
    assert_close(model.loglik_terms(theta, idx), ll_ref, dtype)
    g, total = model.compiled.grad_sum_terms(theta, idx)
    assert_close(g, g_ref.sum(axis=0), dtype, scale=np.abs(g_ref).sum(axis=0).max())
    assert_close(total, ll_ref.sum(), dtype, scale=np.abs(ll_ref).sum())
    assert_close(model.grad_sum(theta, idx), g, dtype, scale=0.0)     # the same pass
    assert_close(model.grad_terms(theta, idx), g_ref, dtype)
    theta_new = theta + 0.1 * np.random.default_rng(2).normal(size=theta.shape)
    ll_new = reference(X[idx], y[idx], theta_new, model)[0]
    assert_close(model.loglik_diff_terms(theta, theta_new, idx), ll_new - ll_ref, dtype,
                 scale=np.max(np.abs(ll_ref)))


@cases
def test_full_pass_against_reference(dtype, activation, output):
    # 2100 rows: three chunks of FULL_CHUNK = 1024 rows, the last one partial
    model, X, y, theta = make_model(dtype, activation, output, n=2100, hidden=(6,))
    ll_ref, g_ref = reference(X, y, theta, model)
    ll, g, h = model.full_pass(theta)
    assert h is None
    assert_close(ll, ll_ref.sum(), dtype, scale=np.abs(ll_ref).sum())
    assert_close(g, g_ref.sum(axis=0), dtype, scale=np.abs(g_ref).sum(axis=0).max())
    assert_close(model.log_likelihood(theta), ll, dtype, scale=0.0)
    lp, glp = model.log_posterior_and_grad(theta)
    assert_close(lp, ll - 0.5 * theta @ theta, dtype, scale=abs(ll) + theta @ theta)
    assert_close(glp, g - theta, dtype, scale=np.abs(g_ref).sum(axis=0).max())
    passes = model.n_full_passes
    model.full_pass(theta, gradient=False)
    assert model.n_full_passes == passes + 1


@cases
def test_outputs_and_predictions(dtype, activation, output):
    model, X, y, theta = make_model(dtype, activation, output, n=50)
    Z = mlp_forward_reference(X, theta, model.sizes, activation)[-1]
    new = np.random.default_rng(3).normal(size=(1500, model.n_features)).astype(dtype)
    Z_new = mlp_forward_reference(new.astype(np.float64), theta, model.sizes, activation)[-1]
    assert_close(model.compiled.outputs(theta, idx=np.arange(50)), Z, dtype)
    assert_close(model.compiled.outputs(theta, new), Z_new, dtype)
    if output == "softmax":
        proba = model.predict_proba(theta, X.astype(dtype))
        assert_close(proba, softmax(Z, axis=1), dtype, scale=1.0)
        # the probability of the observed class is exp(l_k)
        ll = model.loglik_terms(theta, np.arange(50))
        assert_close(proba[np.arange(50), y], np.exp(ll), dtype, scale=1.0)
        np.testing.assert_array_equal(model.predict(theta, new),
                                      np.argmax(model.compiled.outputs(theta, new), axis=1))
    else:
        assert_close(model.predict(theta, new), Z_new, dtype)
        with pytest.raises(ValueError, match="predict_proba needs output='softmax'"):
            model.predict_proba(theta, new)


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("output", OUTPUTS)
def test_gradient_finite_differences(activation, output):
    model, _, _, theta = make_model(np.float64, activation, output, n=20, d=3, hidden=(4, 3),
                                    K=2)
    idx = np.arange(model.n_data)
    g = model.grad_sum(theta, idx)
    h = 1e-6
    fd = np.empty_like(theta)
    for j in range(theta.size):
        tp, tm = theta.copy(), theta.copy()
        tp[j] += h
        tm[j] -= h
        fd[j] = (model.loglik_terms(tp, idx).sum() - model.loglik_terms(tm, idx).sum()) / (2 * h)
    # central differences: O(h^2) truncation and O(eps / h) rounding, ~1e-9 here
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * np.max(np.abs(g)))


@cases
def test_per_datum_gradients_sum_to_gradient_sum(dtype, activation, output):
    model, _, _, theta = make_model(dtype, activation, output)
    idx = np.random.default_rng(4).integers(0, model.n_data, 400)
    G = model.grad_terms(theta, idx)
    assert G.shape == (400, model.n_params)
    assert_close(G.sum(axis=0), model.grad_sum(theta, idx), dtype,
                 scale=np.abs(G).sum(axis=0).max())


def test_float32_computes_in_float32():
    model32, X, y, theta = make_model(np.float32, "tanh", "softmax")
    model64 = MLPModel(X, y, hidden_layer_sizes=(7, 4), activation="tanh", n_classes=3)
    idx = np.arange(model32.n_data)
    ll32, ll64 = model32.loglik_terms(theta, idx), model64.loglik_terms(theta, idx)
    err = np.max(np.abs(ll32 - ll64))
    # the float32 passes round (so they are not float64 passes on widened rows),
    # within the float32 bound
    assert 0 < err <= F32_RTOL * np.max(np.abs(ll64))


# ---- no hidden layer: the GLMs ------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("K", [2, 4])
def test_no_hidden_layer_is_multinomial_regression(dtype, K):
    rng = np.random.default_rng(5)
    n, d = 400, 6
    X = rng.normal(size=(n, d)).astype(dtype)
    y = rng.integers(0, K, n)
    mlp = MLPModel(X, y, hidden_layer_sizes=(), n_classes=K)
    glm = MultinomialLogisticModel(X, y, n_classes=K, fit_intercept=True)
    assert mlp.sizes == (d, K) and mlp.n_params == glm.n_params == K * (d + 1)
    # multinomial: theta (K, d + 1) row-major, coef_[k, j] then intercept_[k] last;
    # MLP: W (d, K) row-major then b (K,): W = coef.T, b = intercept
    coef, icpt = rng.normal(size=(K, d)), rng.normal(size=K)
    t_glm = np.column_stack([coef, icpt]).ravel()
    t_mlp = np.concatenate([coef.T.ravel(), icpt])

    def to_mlp(g):            # a gradient in the multinomial layout, in the MLP's
        g = np.asarray(g).reshape(g.shape[:-1] + (K, d + 1))
        return np.concatenate([np.swapaxes(g[..., :d], -1, -2).reshape(g.shape[:-2] + (-1,)),
                               g[..., d]], axis=-1)

    idx = rng.integers(0, n, 300)
    assert_close(mlp.loglik_terms(t_mlp, idx), glm.loglik_terms(t_glm, idx), dtype)
    assert_close(mlp.grad_terms(t_mlp, idx), to_mlp(glm.grad_terms(t_glm, idx)), dtype)
    g_glm = to_mlp(glm.grad_sum(t_glm, idx))
    assert_close(mlp.grad_sum(t_mlp, idx), g_glm, dtype, scale=np.abs(g_glm).max() * 300)
    ll_m, g_m, _ = mlp.full_pass(t_mlp)
    ll_g, g_g, _ = glm.full_pass(t_glm)
    assert_close(ll_m, ll_g, dtype, scale=n * np.max(np.abs(glm.loglik_terms(t_glm, idx))))
    assert_close(g_m, to_mlp(g_g), dtype, scale=n * np.max(np.abs(g_g)))
    np.testing.assert_allclose(mlp.predict_proba(t_mlp, X),
                               softmax(glm.linear_predictor(t_glm, X), axis=1),
                               rtol=0, atol=rtol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_no_hidden_layer_gaussian_is_linear_regression(dtype):
    rng = np.random.default_rng(6)
    n, d = 300, 4
    X = rng.normal(size=(n, d)).astype(dtype)
    y = rng.normal(size=n)
    mlp = MLPModel(X, y, hidden_layer_sizes=(), output="gaussian", noise_scale=NOISE)
    glm = GaussianRegressionModel(X, y, noise_scale=NOISE)
    # both layouts are (coef, intercept): W (d, 1) row-major is coef, b the intercept
    theta = rng.normal(size=d + 1)
    idx = rng.integers(0, n, 200)
    ll = glm.loglik_terms(theta, idx)
    assert_close(mlp.loglik_terms(theta, idx), ll, dtype)
    assert_close(mlp.grad_terms(theta, idx), glm.grad_terms(theta, idx), dtype)
    assert_close(mlp.full_pass(theta)[0], glm.full_pass(theta)[0], dtype,
                 scale=n * np.max(np.abs(ll)))


# ---- layout, initial values, pickling -----------------------------------------------
def test_layout_pack_unpack_and_init_params():
    model, _, _, _ = make_model(np.float64, "logistic", "softmax", hidden=(7, 4), K=3)
    assert model.sizes == (5, 7, 4, 3)
    assert model.n_params == 5 * 7 + 7 + 7 * 4 + 4 + 4 * 3 + 3
    assert model.compiled.sizes == model.sizes
    assert model.compiled.offsets == (0, 42, 74, 89)
    theta = model.init_params(0)
    np.testing.assert_array_equal(theta, model.init_params(np.random.default_rng(0)))
    layers = model.unpack(theta)
    np.testing.assert_array_equal(model.pack(layers), theta)
    np.testing.assert_array_equal(layers[1][0].ravel(), theta[42:70])
    np.testing.assert_array_equal(layers[1][1], theta[70:74])
    for (W, b), (a, c) in zip(layers, zip(model.sizes[:-1], model.sizes[1:])):
        bound = np.sqrt(2.0 / (a + c))                   # logistic: factor 2
        assert W.shape == (a, c) and b.shape == (c,)
        assert np.all(np.abs(W) <= bound) and np.all(np.abs(b) <= bound)
        assert np.max(np.abs(W)) > 0.5 * bound           # uniform on the whole range
    relu = MLPModel(np.ones((3, 5)), [0, 1, 2], hidden_layer_sizes=(7, 4))
    assert np.max(np.abs(relu.unpack(relu.init_params(1))[0][0])) > np.sqrt(2.0 / 12)
    with pytest.raises(ValueError, match="layer 0: W must have shape"):
        model.pack([(np.zeros((4, 7)), np.zeros(7))] + layers[1:])


def test_pickle_round_trip():
    model, _, _, theta = make_model(np.float32, "relu", "gaussian")
    idx = np.arange(40)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.grad_sum(theta, idx), model.grad_sum(theta, idx))
    assert again.fingerprint() == {**model.fingerprint(), "terms": again.fingerprint()["terms"]}


# ---- errors ----------------------------------------------------------------------------
def test_bad_input_errors():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(30, 3))
    y = rng.integers(0, 3, 30)
    model = MLPModel(X, y, hidden_layer_sizes=(4,))
    theta = model.init_params(0)
    for bad in (theta[:-1], np.r_[theta, 0.0], theta.reshape(1, -1)):
        with pytest.raises(ValueError, match=rf"theta must have shape \({model.n_params},\)"):
            model.loglik_terms(bad, np.arange(3))
        with pytest.raises(ValueError, match="theta must have shape"):
            model.compiled.grad_sum_terms(bad, np.arange(3))
        with pytest.raises(ValueError, match="theta must have shape"):
            model.full_pass(bad)
    with pytest.raises(IndexError, match="out of range"):
        model.grad_sum(theta, [0, 30])
    Xn = X.copy()
    Xn[4, 1] = np.nan
    with pytest.raises(ValueError, match="X contains NaN or infinity"):
        MLPModel(Xn, y)
    with pytest.raises(ValueError, match="y has class index 2 >= n_classes = 2"):
        MLPModel(X, y, n_classes=2)
    for bad_y, msg in ((np.r_[y[:-1], -1], "class indices"), (np.r_[y[:-1], 0.5], "class indices"),
                       (y[:-1], r"y must have shape \(30,\)")):
        with pytest.raises(ValueError, match=msg):
            MLPModel(X, bad_y)
    with pytest.raises(ValueError, match="unknown activation 'sigmoid'.*logistic"):
        MLPModel(X, y, activation="sigmoid")
    with pytest.raises(ValueError, match="unknown output 'poisson'"):
        MLPModel(X, y, output="poisson")
    with pytest.raises(ValueError, match="hidden_layer_sizes must be positive"):
        MLPModel(X, y, hidden_layer_sizes=(4, 0))
    with pytest.raises(ValueError, match="n_classes >= 2"):
        MLPModel(X, np.zeros(30))
    with pytest.raises(ValueError, match=r"y must have shape \(30,\) or \(30, K\)"):
        MLPModel(X, np.zeros((29, 2)), output="gaussian")
    with pytest.raises(ValueError, match="noise_scale must be finite and > 0"):
        MLPModel(X, np.zeros(30), output="gaussian", noise_scale=0.0)
    with pytest.raises(ValueError, match=r"X must have shape \(n, 3\)"):
        model.predict_proba(theta, np.zeros((2, 4)))
    with pytest.raises(ValueError, match="X contains NaN or infinity"):
        model.predict(theta, Xn)
    # the compiled object's own checks
    with pytest.raises(ValueError, match="sizes\\[0\\] = 4 must equal the number of features 3"):
        CyMLP(DenseRows(X, False), y, (4, 3))
    with pytest.raises(ValueError, match="without the intercept column"):
        CyMLP(DenseRows(X, True), y, (3, 3))
    with pytest.raises(ValueError, match="unknown activation"):
        CyMLP(DenseRows(X, False), y, (3, 3), activation="softplus")
    with pytest.raises(ValueError, match="class indices 0, 1, ..., 1"):
        CyMLP(DenseRows(X, False), y, (3, 2))


def test_unsupported_methods_raise():
    model, _, _, theta = make_model(np.float64, "relu", "softmax", n=20)
    idx = np.arange(5)
    msg = "no control-variate residuals: Taylor control variates and Hessians"
    with pytest.raises(NotImplementedError, match=msg):
        model.cv_residual_terms(theta, theta, idx, 1)
    with pytest.raises(NotImplementedError, match=msg):
        model.cv_grad_sum(theta, theta, idx, 2)
    with pytest.raises(NotImplementedError, match=msg):
        model.compiled.cv_residual_diff_terms(1, theta, theta, theta, idx)
    with pytest.raises(NotImplementedError, match="Hessian"):
        model.compiled.full_pass(theta, True, True, True)
    with pytest.raises(NotImplementedError, match="provides no Hessian"):
        model.full_pass(theta, hessian=True)
    with pytest.raises(NotImplementedError, match="provides no Hessian"):
        model.neg_hessian_log_posterior(theta)
    with pytest.raises(NotImplementedError, match="per-datum Hessians"):
        model.hess_terms(theta, idx)
    with pytest.raises(NotImplementedError, match="Taylor control variates"):
        model.cv_residuals_and_grads(theta, theta, idx, 1)
    # the model still works after the kept errors were raised
    assert np.isfinite(model.grad_sum(theta, idx)).all()
