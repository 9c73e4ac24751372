"""Sparse (scipy.sparse CSR) design matrices.

* Every ``CsrRows`` method (through its ``py_*`` entry point) against the
  ``DenseRows`` of the same matrix and a plain NumPy reference, for float32
  and float64 data, int32 and int64 indices, with and without intercept, on
  a matrix with empty rows (the first and the last among them), a full row
  and explicit zeros.
* ``check_design``: other formats converted to CSR, duplicates summed on a
  copy (the caller's matrix is left as it was), integers converted, clear
  errors for NaN/inf, wrong shapes and dtypes.
* The GLMs on CSR against the same GLMs on the dense array: full pass,
  per-datum terms, control-variate residuals, bounds, the HMC-ECS core.
* Sampling: every registered sampler on a sparse model agrees with the dense
  model run with the same seed; the estimators fit and predict on sparse X,
  in scikit-learn pipelines (OneHotEncoder, TfidfVectorizer).

Tolerances: the CSR and dense kernels add the same products in different
orders (CSR skips the zeros), so per-datum values agree to a few ulps of the
sum of absolute terms (1e-12 relative here); posteriors sampled with the same
seed agree draw for draw up to the growth of those rounding differences along
a chain, far inside the criterion used (means within 0.1 posterior sd, sds
within 10%); full-data HMC, whose trajectories are chaotic, is held to its
Monte Carlo standard error instead.
"""
import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

from bayes_subsample import (BayesianLinearRegression, BayesianLogisticRegression,
                             BayesianPoissonRegression, diagnostics, sample)
from bayes_subsample.control_variates import TaylorControlVariate
from bayes_subsample.models import GLM, GaussianRegressionModel, MultinomialLogisticModel
from bayes_subsample.models._glm import check_design
from bayes_subsample.models._csr_rows import CsrRows
from bayes_subsample.models._rows import DenseRows, make_rows
from bayes_subsample.samplers import SAMPLERS
from bayes_subsample.samplers._hmc_ecs_fast import ECSCore

FAMILIES = ["logistic", "poisson", "gaussian"]


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------
def sparse_design(n=40, d=7, density=0.3, seed=0):
    """A dense array with ~``density`` nonzeros, empty rows (0, 5 and the last),
    a full row (3) and two explicit zeros stored in its CSR form."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    X[[0, 5, n - 1]] = 0.0
    X[3] = rng.normal(size=d)
    S = sparse.csr_matrix(X)
    # explicit zeros: stored entries whose value is 0 (sorted indices kept)
    row = 3
    lo = S.indptr[row]
    S.data[lo] = 0.0
    S.data[lo + 2] = 0.0
    X[row, S.indices[lo]] = 0.0
    X[row, S.indices[lo + 2]] = 0.0
    return X, S


def as_csr(S, data_dtype, index_dtype, kind=sparse.csr_matrix):
    """``S`` as a CSR of the given data and index types (the arrays set directly:
    scipy would pick int32 indices for a small matrix)."""
    T = kind(S.astype(data_dtype))
    T.indices = T.indices.astype(index_dtype)
    T.indptr = T.indptr.astype(index_dtype)
    return T


def with_ones(X, intercept):
    X = np.asarray(X, dtype=np.float64)
    return np.column_stack([X, np.ones(X.shape[0])]) if intercept else X


row_cases = pytest.mark.parametrize(
    "data_dtype,index_dtype,intercept",
    [(dt, it, ic) for dt in (np.float32, np.float64) for it in (np.int32, np.int64)
     for ic in (True, False)],
    ids=lambda v: v.__name__ if isinstance(v, type) else str(v))


def close(a, b, scale, rtol=1e-12):
    """``|a - b| <= rtol * scale`` elementwise (``scale``: the sum of absolute terms)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    assert np.all(np.abs(a - b) <= rtol * (np.asarray(scale) + 1e-300)), np.max(np.abs(a - b))


# ---------------------------------------------------------------------------
# CsrRows against DenseRows and NumPy
# ---------------------------------------------------------------------------
@row_cases
def test_csr_rows_methods_match_dense_and_numpy(data_dtype, index_dtype, intercept):
    X, S = sparse_design()
    Xt = X.astype(data_dtype)
    csr = CsrRows(as_csr(S, data_dtype, index_dtype), intercept)
    dense = DenseRows(np.ascontiguousarray(Xt), intercept)
    assert csr.index64 == (index_dtype == np.int64) and csr.is32 == (data_dtype == np.float32)
    assert (csr.n_rows, csr.n_features, csr.n_cols) == (dense.n_rows, dense.n_features,
                                                         dense.n_cols)
    assert csr.nnz == S.nnz
    X1 = with_ones(Xt, intercept)          # the NumPy reference: [X 1] in float64
    n, p = X1.shape
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=p), rng.normal(size=p)
    idx = np.concatenate([[0, 3, 5, n - 1, 3], rng.integers(0, n, size=30)])
    absX = np.abs(X1)
    for rows in (csr, dense):
        # dot, dot_range (a range with empty rows at both ends, and an empty range)
        close(rows.py_dot(idx, a), X1[idx] @ a, absX[idx] @ np.abs(a))
        close(rows.py_dot_range(0, n, a), X1 @ a, absX @ np.abs(a))
        close(rows.py_dot_range(4, 9, a), X1[4:9] @ a, absX[4:9] @ np.abs(a))
        assert rows.py_dot_range(7, 7, a).shape == (0,)
        assert rows.py_dot([], a).shape == (0,)
        oa, ob = rows.py_dot2(idx, a, b)
        close(oa, X1[idx] @ a, absX[idx] @ np.abs(a))
        close(ob, X1[idx] @ b, absX[idx] @ np.abs(b))
        # add_xt accumulates into ``out``
        c = rng.normal(size=idx.shape[0])
        out0 = rng.normal(size=p)
        got = rows.py_add_xt(idx, c, out=out0.copy())
        close(got, out0 + c @ X1[idx], np.abs(out0) + np.abs(c) @ absX[idx])
        c = rng.normal(size=n)
        close(rows.py_add_xt_range(0, n, c), c @ X1, np.abs(c) @ absX)
        close(rows.py_add_xt_range(10, 20, c[10:20]), c[10:20] @ X1[10:20],
              np.abs(c[10:20]) @ absX[10:20])
        # add_xwx_range: the lower triangle only, added to what ``out`` holds
        w = rng.normal(size=n)
        H0 = rng.normal(size=(p, p))
        H = rows.py_add_xwx_range(0, n, w, out=H0.copy())
        ref = X1.T @ (w[:, None] * X1)
        lower = np.tril_indices(p)
        upper = np.triu_indices(p, 1)
        close(H[lower], (H0 + ref)[lower],
              (np.abs(H0) + absX.T @ (np.abs(w)[:, None] * absX))[lower],
              rtol=1e-12 + rows.hessian_rtol)
        np.testing.assert_array_equal(H[upper], H0[upper])
        # gather / row write every entry (the buffers start as NaN)
        np.testing.assert_array_equal(rows.py_gather(idx), X1[idx])
        for k in (0, 3, n - 1):
            np.testing.assert_array_equal(rows.py_row(k), X1[k])
        norms = np.sqrt(np.sum(X1 * X1, axis=1))
        np.testing.assert_allclose(rows.row_norms(), norms, rtol=1e-14)
        np.testing.assert_allclose(rows.row_norms(2, 11), norms[2:11], rtol=1e-14)
        np.testing.assert_allclose(rows.row_norm_max(), norms.max(), rtol=1e-14)
    # the two Rows agree with each other as tightly as with the reference
    close(csr.py_dot(idx, a), dense.py_dot(idx, a), absX[idx] @ np.abs(a))
    np.testing.assert_array_equal(csr.py_gather(idx), dense.py_gather(idx))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dense_hessian_pass_equals_csr(dtype):
    """The dense full pass with the Hessian (eight-row blocks, ``_simd.h``)
    against the CSR pass (row loop) of the same matrix, chunks of every length
    included."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(4096 + 300, 5)).astype(dtype)
    y = (rng.random(X.shape[0]) < 0.5).astype(float)
    theta = rng.normal(size=6) * 0.3
    dm = GLM(X, y, "logistic")
    dense = dm.full_pass(theta, hessian=True)
    csr = GLM(sparse.csr_matrix(X), y, "logistic").full_pass(theta, hessian=True)
    for a, b in zip(dense[:2], csr[:2]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    # the Hessian's terms w_i x_ij x_ik (w > 0): dense float32 rows in float32 blocks
    X1 = np.column_stack([X.astype(np.float64), np.ones(X.shape[0])])
    w = np.exp(-np.logaddexp(0, X1 @ theta) - np.logaddexp(0, -X1 @ theta))
    scale = (np.abs(X1) * w[:, None]).T @ np.abs(X1)
    rtol = 1e-12 + dm.compiled.rows.hessian_rtol
    close(dense[2], csr[2], scale, rtol=rtol)


@pytest.mark.parametrize("intercept", [True, False])
def test_csr_rows_without_stored_entries(intercept):
    S = sparse.csr_matrix((6, 4))
    rows = CsrRows(S, intercept)
    theta = np.arange(rows.n_cols, dtype=np.float64) + 1.0
    icpt = theta[-1] if intercept else 0.0
    np.testing.assert_array_equal(rows.py_dot_range(0, 6, theta), np.full(6, icpt))
    np.testing.assert_array_equal(rows.py_gather([1, 2]), with_ones(np.zeros((2, 4)), intercept))
    H = rows.py_add_xwx_range(0, 6, np.ones(6))
    assert H.sum() == (6.0 if intercept else 0.0)
    assert rows.row_norm_max() == (1.0 if intercept else 0.0)


def test_csr_rows_are_a_view_and_mixed_index_types_read_as_int64():
    _, S = sparse_design()
    rows = CsrRows(S, True)
    assert rows.matrix is S
    S.data[:] = 2 * S.data                 # no copy: the rows see the change
    np.testing.assert_array_equal(rows.py_gather([3])[0, :-1], S[[3]].toarray()[0])
    T = S.copy()
    T.indptr = T.indptr.astype(np.int64)   # int32 indices, int64 indptr
    rows64 = CsrRows(T, True)
    assert rows64.index64
    np.testing.assert_array_equal(rows64.py_gather(np.arange(S.shape[0])),
                                  rows.py_gather(np.arange(S.shape[0])))


def test_make_rows_picks_the_class():
    X, S = sparse_design()
    assert isinstance(make_rows(S, True), CsrRows)
    assert isinstance(make_rows(sparse.csr_array(S), False), CsrRows)
    assert isinstance(make_rows(np.ascontiguousarray(X), True), DenseRows)


def test_csr_rows_reject_what_they_cannot_read():
    X, S = sparse_design()
    with pytest.raises(TypeError, match="CSR"):
        CsrRows(S.tocsc(), True)
    with pytest.raises(TypeError, match="CSR"):
        CsrRows(X, True)
    with pytest.raises(TypeError, match="float32 or float64"):
        CsrRows(S.astype(np.int64), True)
    # unsorted indices in a row, duplicates, an index out of range
    T = S.copy()
    lo = T.indptr[3]
    T.indices[lo], T.indices[lo + 1] = T.indices[lo + 1], T.indices[lo]
    with pytest.raises(ValueError, match="canonical.*row 3"):
        CsrRows(T, True)
    D = sparse.csr_matrix((np.ones(3), np.array([1, 1, 2]), np.array([0, 3, 3])), shape=(2, 4))
    with pytest.raises(ValueError, match="canonical.*row 0"):
        CsrRows(D, True)
    T = S.copy()
    T.indices[T.indptr[3]] = S.shape[1]
    with pytest.raises(ValueError, match="canonical"):
        CsrRows(T, True)
    rows = CsrRows(S, True)
    with pytest.raises(IndexError):
        rows.py_dot([S.shape[0]], np.zeros(rows.n_cols))
    with pytest.raises(ValueError, match="theta"):
        rows.py_dot([0], np.zeros(rows.n_cols + 1))


# ---------------------------------------------------------------------------
# check_design
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [sparse.csr_matrix, sparse.csr_array])
def test_check_design_keeps_canonical_csr_without_copy(kind):
    _, S = sparse_design()
    S = kind(S)
    assert check_design(S, accept_sparse=True) is S
    S32 = S.astype(np.float32)
    assert check_design(S32, accept_sparse=True) is S32


@pytest.mark.parametrize("fmt", ["csc", "coo", "lil", "dok", "bsr", "dia"])
@pytest.mark.parametrize("kind", [sparse.csr_matrix, sparse.csr_array])
def test_check_design_converts_other_formats_to_csr(fmt, kind):
    X, S = sparse_design()
    T = kind(S).asformat(fmt)
    out = check_design(T, accept_sparse=True)
    assert out.format == "csr" and out.has_canonical_format
    assert isinstance(out, sparse.sparray) == isinstance(T, sparse.sparray)
    np.testing.assert_array_equal(out.toarray(), X)


def test_check_design_sums_duplicates_on_a_copy():
    data, indices, indptr = np.array([1.0, 2.0, 3.0, 4.0]), np.array([2, 0, 2, 1]), \
        np.array([0, 3, 4])
    S = sparse.csr_matrix((data, indices, indptr), shape=(2, 3))
    before = (S.data.copy(), S.indices.copy(), S.indptr.copy())
    out = check_design(S, accept_sparse=True)
    assert out is not S and out.has_canonical_format
    np.testing.assert_array_equal(out.toarray(), [[2.0, 0.0, 4.0], [0.0, 4.0, 0.0]])
    for a, b in zip(before, (S.data, S.indices, S.indptr)):
        np.testing.assert_array_equal(a, b)          # the caller's matrix is untouched
    # a GLM of the duplicated matrix equals the GLM of its sum
    y = np.array([0.0, 1.0])
    theta = np.array([0.3, -0.2, 0.5, 0.1])
    m1 = GLM(S, y, "logistic")
    m2 = GLM(out.toarray(), y, "logistic")
    for v1, v2 in zip(m1.full_pass(theta, hessian=True), m2.full_pass(theta, hessian=True)):
        np.testing.assert_allclose(v1, v2, rtol=1e-14)


def test_check_design_dtypes():
    X, S = sparse_design()
    for dt in (np.int32, np.int64, np.uint8, bool):
        out = check_design(S.astype(dt), accept_sparse=True)
        assert out.dtype == np.float64
        np.testing.assert_array_equal(out.toarray(), X.astype(dt).astype(np.float64))
    for dt in (np.complex128, np.longdouble):      # (scipy.sparse has no float16)
        with pytest.raises(TypeError, match="float32 or float64"):
            check_design(S.astype(dt), accept_sparse=True)
    # without accept_sparse (the models that read dense rows only)
    with pytest.raises(TypeError, match="sparse"):
        check_design(S)


def test_multinomial_reads_csr_like_dense():
    """The multinomial model reads CSR through the same Rows methods: its full
    pass (log-likelihood, gradient, Hessian) equals the dense model's."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 5))
    X[X < 0.5] = 0.0
    y = rng.integers(0, 3, 3000)
    dense = MultinomialLogisticModel(X, y)
    csr = MultinomialLogisticModel(sparse.csr_matrix(X), y)
    theta = rng.normal(size=dense.n_params) * 0.3
    for a, b in zip(dense.full_pass(theta, hessian=True), csr.full_pass(theta, hessian=True)):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-10)
    assert csr.row_norm_max == pytest.approx(dense.row_norm_max, rel=1e-14)
    np.testing.assert_allclose(csr.linear_predictor(theta, sparse.csr_matrix(X[:7])),
                               dense.linear_predictor(theta, X[:7]), rtol=1e-12)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_check_design_rejects_non_finite_values(bad):
    _, S = sparse_design()
    S = S.copy()
    S.data[4] = bad
    with pytest.raises(ValueError, match="NaN or infinity"):
        check_design(S, accept_sparse=True)
    with pytest.raises(ValueError, match="NaN or infinity"):
        GLM(S, np.zeros(S.shape[0]), "logistic")


def test_check_design_rejects_bad_shapes():
    with pytest.raises(ValueError, match="at least one row"):
        check_design(sparse.csr_matrix((0, 3)), accept_sparse=True)
    with pytest.raises(ValueError, match="at least one row"):
        check_design(sparse.csr_matrix((3, 0)), accept_sparse=True)
    _, S = sparse_design()
    with pytest.raises(ValueError, match="y must have shape"):
        GLM(S, np.zeros(S.shape[0] + 1), "logistic")
    with pytest.raises(ValueError, match="2-D"):
        check_design(sparse.coo_array(np.ones(4)), accept_sparse=True)


# ---------------------------------------------------------------------------
# the GLMs on CSR against the GLMs on dense arrays
# ---------------------------------------------------------------------------
def glm_pair(family, data_dtype=np.float64, index_dtype=np.int32, fit_intercept=True,
             n=500, d=9, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.3)
    X[::17] = 0.0
    X = X.astype(data_dtype)
    beta = rng.normal(size=d) * 0.5
    eta = X.astype(np.float64) @ beta + 0.2
    y = {"logistic": (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float),
         "poisson": rng.poisson(np.exp(eta)).astype(float),
         "gaussian": eta + rng.normal(size=n)}[family]
    S = as_csr(sparse.csr_matrix(X), data_dtype, index_dtype)
    return (GLM(S, y, family, fit_intercept=fit_intercept),
            GLM(X, y, family, fit_intercept=fit_intercept), X)


glm_cases = pytest.mark.parametrize(
    "family,data_dtype,index_dtype,fit_intercept",
    [(f, dt, it, fi) for f in FAMILIES for dt in (np.float32, np.float64)
     for it in (np.int32, np.int64) for fi in (True, False)],
    ids=lambda v: v.__name__ if isinstance(v, type) else str(v))


@glm_cases
def test_glm_on_csr_matches_dense(family, data_dtype, index_dtype, fit_intercept):
    ms, md, X = glm_pair(family, data_dtype, index_dtype, fit_intercept)
    assert isinstance(ms.compiled.rows, CsrRows) and isinstance(md.compiled.rows, DenseRows)
    rng = np.random.default_rng(3)
    theta = rng.normal(size=md.n_params) * 0.3
    theta_star = theta + 0.05 * rng.normal(size=md.n_params)
    idx = rng.integers(0, md.n_data, size=200)
    X1 = with_ones(X, fit_intercept)
    scale = np.abs(X1) @ np.abs(theta) + 1.0         # per-datum magnitude of eta
    # the full pass (and its threads: bit-identical for any count)
    sums = ms.full_pass(theta, hessian=True)
    ref = md.full_pass(theta, hessian=True)
    for s, r in zip(sums[:2], ref[:2]):
        np.testing.assert_allclose(s, r, rtol=1e-11, atol=1e-11 * np.max(np.abs(r)))
    # the Hessian (dense float32 rows: in float32 blocks) against its absolute terms
    w = np.abs(md.compiled.link_terms_array(md.y, md.linear_predictor(theta), False)[2])
    rtol = 1e-11 + md.compiled.rows.hessian_rtol
    close(sums[2], ref[2], (np.abs(X1) * w[:, None]).T @ np.abs(X1), rtol=rtol)
    for s, t in zip(sums, ms.compiled.full_pass(theta, True, True, True, 2)):
        np.testing.assert_array_equal(s, t)
    # per-datum terms and their sums
    np.testing.assert_allclose(ms.linear_predictor(theta), md.linear_predictor(theta),
                               rtol=0, atol=1e-12 * scale.max())
    for name in ("loglik_terms", "grad_terms", "grad_sum"):
        a, b = getattr(ms, name)(theta, idx), getattr(md, name)(theta, idx)
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10 * np.max(np.abs(b)))
    np.testing.assert_allclose(ms.loglik_diff_terms(theta, theta_star, idx),
                               md.loglik_diff_terms(theta, theta_star, idx), rtol=1e-8,
                               atol=1e-10)
    for order in (0, 1, 2):
        a = ms.cv_residual_terms(theta, theta_star, idx, order)
        b = md.cv_residual_terms(theta, theta_star, idx, order)
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
        for a, b in zip(ms.cv_residuals_and_grads(theta, theta_star, idx, order),
                        md.cv_residuals_and_grads(theta, theta_star, idx, order)):
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)
        for a, b in zip(ms.cv_grad_sum(theta, theta_star, idx, order),
                        md.cv_grad_sum(theta, theta_star, idx, order)):
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-9)
    # eta for new sparse X (not densified) and for dense X
    Xn = X[:7]
    eta_s = ms.linear_predictor(theta, sparse.csr_matrix(Xn))
    np.testing.assert_allclose(eta_s, md.linear_predictor(theta, Xn), rtol=0,
                               atol=1e-12 * scale.max())
    # range bounds read the row norms
    assert ms.row_norm_max == pytest.approx(md.row_norm_max, rel=1e-14)
    assert ms._max_abs_y_times_norm() == pytest.approx(md._max_abs_y_times_norm(), rel=1e-14)
    assert ms.range_bound(theta, theta_star) == pytest.approx(md.range_bound(theta, theta_star),
                                                               rel=1e-12)
    # subset keeps CSR and the rows
    sub = ms.subset([4, 1, 9])
    assert sparse.issparse(sub.X)
    np.testing.assert_array_equal(sub.X.toarray(), X[[1, 4, 9]])


def test_fingerprint_of_sparse_data():
    ms, md, X = glm_pair("logistic")
    fp = ms.fingerprint()
    assert fp["X"].startswith("csr") and fp != md.fingerprint()
    # the same matrix with int64 indices or as a csr_array: the same fingerprint
    S64 = as_csr(ms.X, np.float64, np.int64)
    assert GLM(S64, ms.y, "logistic").fingerprint() == fp
    assert GLM(sparse.csr_array(ms.X), ms.y, "logistic").fingerprint() == fp
    S = ms.X.copy()
    S.data[S.indptr[-1] - 1] += 1.0        # the last stored value: every value is hashed
    assert GLM(S, ms.y, "logistic").fingerprint()["terms"] != fp["terms"]


def test_exact_posterior_on_sparse_data():
    for fit_intercept in (True, False):
        ms, md, X = glm_pair("gaussian", fit_intercept=fit_intercept)
        s = GaussianRegressionModel(ms.X, ms.y, fit_intercept=fit_intercept)
        d = GaussianRegressionModel(X, md.y, fit_intercept=fit_intercept)
        for a, b in zip(s.exact_posterior(), d.exact_posterior()):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("mode", ["perturbed", "signed"])
def test_hmc_ecs_core_on_csr_matches_dense(mode):
    """The ECS core gathers the subsample rows densely through the model's Rows:
    the same potential and gradient for a CSR and a dense model."""
    ms, md, _ = glm_pair("logistic", n=2000)
    rng = np.random.default_rng(4)
    theta_star = rng.normal(size=md.n_params) * 0.3
    idx = rng.integers(0, md.n_data, size=300)
    out = []
    for model in (ms, md):
        cv = TaylorControlVariate(model, theta_star, order=2)
        core = ECSCore(model.compiled, 2, model.prior.precision, mode)
        core.set_rows(idx, 30)
        core.set_reference(theta_star, cv.L_star, cv.A, cv.B)
        if mode == "signed":
            core.set_signed(-10.0, 10.0)
        theta = theta_star + 0.05 * np.random.default_rng(5).normal(size=model.n_params)
        out.append(core.value_and_grad(theta))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-12)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------------
# sampling
# ---------------------------------------------------------------------------
def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


def assert_posteriors_agree(a, b, ess=None):
    """Means within 0.1 posterior sd and sds within 10% (or, with ``ess``, the
    larger of that and 4 Monte Carlo standard errors of a difference of two
    independent runs: ``sd sqrt(2 / ess)`` for means, ``sqrt(1 / ess)`` for the
    relative difference of sds)."""
    sd = a.std(axis=0)
    tol_mean, tol_sd = 0.1, 0.1
    if ess is not None:
        tol_mean = max(tol_mean, 4 * np.sqrt(2 / ess))
        tol_sd = max(tol_sd, 4 * np.sqrt(1 / ess))
    assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) <= tol_mean * sd)
    ratio = b.std(axis=0) / sd
    assert np.all(np.abs(ratio - 1) < tol_sd), ratio


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_every_sampler_on_sparse_model_matches_dense(sampler):
    ms, md, _ = glm_pair("logistic", data_dtype=np.float32, n=3000, d=6)
    kw = dict(n_samples=300, n_warmup=300, n_chains=2, random_state=0)
    # pSGLD (no control variates) refuses this tall posterior at its default step
    # (test_noise_scale.py); an explicit one runs it
    obj = sampler
    if sampler == "psgld":
        obj = SAMPLERS[sampler](step_size=1e-5, batch_size=1000)
        kw["n_warmup"] = 800
    ts = _quiet(sample, ms, obj, **kw)
    td = _quiet(sample, md, obj, **kw)
    a, b = td.pooled_draws(), ts.pooled_draws()
    assert np.isfinite(b).all()
    if sampler in ("mh", "austerity", "confidence", "sgld", "sghmc", "ewsg", "psgld"):
        # random-walk and stochastic-gradient chains: rounding differences stay small
        assert_posteriors_agree(a, b)
        np.testing.assert_allclose(b, a, atol=1e-3 * a.std(axis=0).min())
    else:
        # Hamiltonian trajectories amplify rounding differences until an
        # acceptance decision flips: from there the chains part ways
        assert_posteriors_agree(a, b, ess=np.min(diagnostics.ess_mean(td.draws)))


@pytest.mark.parametrize("family", FAMILIES)
def test_sparse_fit_matches_dense_fit(family):
    """The estimators with their default sampler (HMC-ECS, subsampling here; linear
    regression with the plug-in noise, the GLM: with the noise sampled its full
    passes are cheap and HMC-ECS runs on the full data, see test_noise_scale.py)."""
    ms, md, X = glm_pair(family, n=20000, d=6, seed=2)
    est = {"logistic": BayesianLogisticRegression, "poisson": BayesianPoissonRegression,
           "gaussian": BayesianLinearRegression}[family]
    kw = dict(n_samples=500, n_warmup=500, n_chains=2, random_state=0,
              **({"noise_scale": "plugin"} if family == "gaussian" else {}))
    fs = _quiet(est(**kw).fit, ms.X, ms.y)
    fd = _quiet(est(**kw).fit, X, md.y)
    assert not fs.diagnostics_["tuning"][0].get("full_data", False)
    assert fs.diagnostics_["tuning"][0]["m"] < 20000 / 2
    # nearly draw for draw (the Monte Carlo bound in case a chain parts ways)
    assert_posteriors_agree(fd.posterior_draws_.reshape(-1, 7),
                            fs.posterior_draws_.reshape(-1, 7),
                            ess=np.min(diagnostics.ess_mean(fd.posterior_draws_)))
    # prediction on sparse and on dense X gives the same thing
    Xt, St = X[:50], ms.X[:50]
    if family == "logistic":
        np.testing.assert_allclose(fs.predict_proba(St), fs.predict_proba(Xt), rtol=1e-10)
        np.testing.assert_allclose(fs.predict_log_proba(St), fs.predict_log_proba(Xt),
                                   rtol=1e-10)
        np.testing.assert_array_equal(fs.predict(St), fs.predict(Xt))
    else:
        for a, b in zip(fs.predict(St, return_std=True), fs.predict(Xt, return_std=True)):
            np.testing.assert_allclose(a, b, rtol=1e-10)
        np.testing.assert_allclose(fs.sample_y(St, 3, random_state=1),
                                   fs.sample_y(Xt, 3, random_state=1), rtol=1e-10)
    if family == "gaussian":
        assert fs.noise_scale_ == pytest.approx(fd.noise_scale_, rel=1e-10)


def test_noise_estimate_on_sparse_data_without_intercept():
    ms, md, X = glm_pair("gaussian", n=400, seed=5)
    for fit_intercept in (True, False):
        est = BayesianLinearRegression(fit_intercept=fit_intercept)
        assert est._estimate_noise(ms.X, ms.y) == pytest.approx(
            est._estimate_noise(X, md.y), rel=1e-10)


def test_one_hot_encoder_pipeline():
    rng = np.random.default_rng(0)
    n = 3000
    cats = np.column_stack([rng.choice(["a", "b", "c", "d"], size=n),
                            rng.choice(["x", "y", "z"], size=n)])
    effect = {"a": -1.0, "b": 0.0, "c": 1.0, "d": 2.0, "x": 0.5, "y": -0.5, "z": 0.0}
    eta = np.vectorize(effect.get)(cats).sum(axis=1) - 0.5
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    kw = dict(n_samples=300, n_warmup=300, n_chains=2, random_state=0)
    pipe = make_pipeline(OneHotEncoder(), BayesianLogisticRegression(**kw))
    _quiet(pipe.fit, cats, y)
    Z = pipe[0].transform(cats)
    assert sparse.issparse(Z) and Z.shape == (n, 7)
    proba = pipe.predict_proba(cats)
    assert proba.shape == (n, 2) and np.isfinite(proba).all()
    # the same encoder with dense output: the same posterior
    dense = make_pipeline(OneHotEncoder(sparse_output=False), BayesianLogisticRegression(**kw))
    _quiet(dense.fit, cats, y)
    assert_posteriors_agree(dense[-1].posterior_draws_.reshape(-1, 8),
                            pipe[-1].posterior_draws_.reshape(-1, 8),
                            ess=np.min(diagnostics.ess_mean(dense[-1].posterior_draws_)))
    np.testing.assert_allclose(proba, dense.predict_proba(cats), atol=0.01)
    # the effects are recovered (differences within a group are identified)
    coef = pipe[-1].coef_
    assert coef[3] - coef[0] == pytest.approx(3.0, abs=0.4)


def test_tfidf_pipeline():
    texts = ["good great film", "great acting, good plot", "wonderful film", "good fun",
             "bad film", "terrible plot, bad acting", "awful and boring", "boring bad",
             "great fun", "terrible film"] * 3
    y = np.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 0] * 3)
    pipe = make_pipeline(TfidfVectorizer(),
                         BayesianLogisticRegression(n_samples=300, n_warmup=300, n_chains=2,
                                                    random_state=0, prior_scale=3.0))
    _quiet(pipe.fit, texts, y)
    assert sparse.issparse(pipe[0].transform(texts))
    proba = pipe.predict_proba(["a good film", "a bad film"])
    assert proba[0, 1] > 0.5 > proba[1, 1]
    assert np.mean(pipe.predict(texts) == y) == 1.0


def test_estimator_errors_on_sparse_input():
    ms, _, _ = glm_pair("logistic", n=60)
    S = ms.X.copy()
    S.data[0] = np.nan
    est = BayesianLogisticRegression(n_samples=20, n_warmup=20, n_chains=1, random_state=0)
    with pytest.raises(ValueError, match="NaN"):
        est.fit(S, ms.y)
    _quiet(est.fit, ms.X, ms.y)
    with pytest.raises(ValueError, match="features"):
        est.predict(ms.X[:, :5])
    with pytest.raises(ValueError, match="NaN"):
        est.predict(S)
    with pytest.raises(ValueError):
        est.fit(ms.X, ms.y[:-1])
    # other formats are converted (scikit-learn's accept_sparse="csr")
    assert est.predict_proba(ms.X.tocsc()).shape == (60, 2)
    assert est.predict_proba(ms.X.tocoo()).shape == (60, 2)


def test_warm_start_continues_on_sparse_data():
    ms, _, _ = glm_pair("logistic", n=300)
    est = BayesianLogisticRegression(n_samples=50, n_warmup=50, n_chains=2, random_state=0,
                                     warm_start=True)
    _quiet(est.fit, ms.X, ms.y)
    _quiet(est.fit, ms.X, ms.y)          # the fingerprint of the sparse data matches
    assert est.posterior_draws_.shape[1] == 100

