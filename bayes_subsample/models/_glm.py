"""Compiled generalised linear models (logistic, Poisson, Gaussian).

``theta`` holds the coefficients followed by the intercept (if
``fit_intercept``); the intercept is a virtual column of ones, so ``X`` is
never copied to add it. ``X`` is used as given when it is a C-contiguous
float32/float64 array (read-only and memory-mapped arrays work); otherwise it
is copied once, deliberately, to that layout. A scipy.sparse ``X`` is read as
a CSR matrix (``CsrRows``), never densified.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import sparse
from scipy.linalg import solve_triangular

from .._hashing import array_digest
from .._threads import available_cores, threads_for_pass
from ._base import GaussianPrior, RowsModel, _digest, coefficient_scales
from ._cyglm import CyGaussian, CyLogistic, CyPoisson, count_binary
from ._rows import all_finite, make_rows

__all__ = ["GLM", "LogisticRegressionModel", "PoissonRegressionModel", "GaussianRegressionModel",
           "RowGeometry", "logistic_residual_range_bound"]

#: family name -> its compiled class (one ``CyGLM`` subclass per family)
_FAMILIES = {"logistic": CyLogistic, "poisson": CyPoisson, "gaussian": CyGaussian}


def check_design(X, name="X", accept_sparse=False):
    """Validate a design matrix: 2-D, float32/float64, finite, C-contiguous.

    With ``accept_sparse``, a scipy.sparse matrix or array is returned as a
    canonical CSR matrix (see ``check_sparse_design``); otherwise it is a
    TypeError.
    """
    if sparse.issparse(X):
        if not accept_sparse:
            raise TypeError(f"{name}: sparse matrices are not supported by this model; pass "
                            "a dense array")
        return check_sparse_design(X, name)
    if hasattr(X, "toarray") or hasattr(X, "tocsr"):
        raise TypeError(f"{name}: sparse matrices of type {type(X).__name__} are not "
                        "supported; pass a scipy.sparse matrix or a dense array")
    X = np.asarray(X)
    if X.dtype not in (np.float32, np.float64):
        if X.dtype.kind in "iub":
            X = X.astype(np.float64)
        else:
            raise TypeError(f"{name} must be a float32 or float64 array, got dtype {X.dtype}")
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {X.shape}")
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"{name} must have at least one row and one column, got {X.shape}")
    if not X.flags.c_contiguous:
        X = np.ascontiguousarray(X)  # deliberate copy: kernels read rows
    # one threaded read, no temporary
    if not all_finite(X, threads_for_pass(X.size, available_cores())):
        raise ValueError(f"{name} contains NaN or infinity")
    return X


def check_sparse_design(X, name="X"):
    """Validate a scipy.sparse design matrix (matrix or array); returns it as
    a canonical CSR matrix of the same kind with float32/float64 data.

    A CSR input with float32/float64 data in canonical form (sorted indices,
    no duplicates) is returned as it is, without a copy. Otherwise one copy
    is made: other formats (CSC, COO, ...) are converted to CSR (the compiled
    models read rows), integer or boolean data are converted to float64, and
    duplicate entries are summed and indices sorted (``sum_duplicates``) on
    that copy, never on the caller's matrix. The stored values must be finite.
    """
    if len(X.shape) != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {X.shape}")
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"{name} must have at least one row and one column, got {X.shape}")
    dtype = X.dtype
    if dtype not in (np.float32, np.float64):
        if dtype.kind not in "iub":
            raise TypeError(f"{name} must have float32 or float64 values, got dtype {dtype}")
        dtype = np.float64
    owned = False
    if X.format != "csr":
        X = X.tocsr()                      # one copy: the kernels read rows
        owned = True
    if X.dtype != dtype:
        X = X.astype(dtype)                # a copy of the data (and of the indices)
        owned = True
    if not X.has_canonical_format:
        if not owned:
            X = X.copy()                   # sum_duplicates works in place
        X.sum_duplicates()
    if not np.isfinite(X.data[: X.nnz]).all():
        raise ValueError(f"{name} contains NaN or infinity")
    return X


def design_fingerprint(X):
    """``{"X": shape and dtype, "terms": a hash of every value}`` of a dense or
    CSR design (its stored entries and their places; the index types unified:
    the same matrix in int32 or int64 indices has one fingerprint)."""
    if sparse.issparse(X):
        return {"X": f"csr{X.dtype.str}{X.shape}",
                "terms": _digest(X.data[: X.nnz]) + array_digest(
                    X.indices[: X.nnz], X.indptr, as_dtype=np.int64)}
    return {"X": f"{X.dtype.str}{X.shape}", "terms": _digest(X)}


def data_fingerprint(model):
    """The fingerprint entries of a model's data: a hash of ``y``, the design's
    (:func:`design_fingerprint`) and a hash of the weights, if it has any."""
    fp = {"y": _digest(model.y), **design_fingerprint(model.X)}
    if getattr(model, "weights", None) is not None:
        fp["weights"] = _digest(model.weights)
    return fp


#: values per chunk of :func:`normal_equations` (a float64 copy of 8 MB at most)
_NORMAL_CHUNK = 1 << 20


def normal_equations(X, y, fit_intercept, weights=None):
    """``([X 1]^T W [X 1], [X 1]^T W y)`` in float64 (``W`` the diagonal of the
    row ``weights``, the identity without them), in row chunks (dense: BLAS
    products of float64 copies of each chunk, on one BLAS thread; sparse: sparse
    products, no densified X). The weighted Gram matrix is ``(W^1/2 [X 1])^T
    (W^1/2 [X 1])``: the same products as unweighted, so weights of ones give
    the unweighted bits.

    One BLAS thread: the result does not depend on BLAS's threads, and OpenBLAS's
    threads, which spin while they wait, took 10 to 60 s instead of 0.09 s for
    1e6 x 20 rows on a loaded 2-core machine (``threadpoolctl``)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        if weights is None:
            return _normal_equations(X, y, fit_intercept)
        return _weighted_normal_equations(X, y, fit_intercept,
                                          np.asarray(weights, dtype=np.float64))


def _weighted_normal_equations(X, y, fit_intercept, w):
    d = X.shape[1]
    p1 = d + int(fit_intercept)
    G = np.zeros((p1, p1))
    b = np.zeros(p1)
    root = np.sqrt(w)
    wy = w * y
    if sparse.issparse(X):
        Xf = X.astype(np.float64, copy=False)
        Xr = sparse.csr_matrix(Xf.multiply(root[:, None]))
        G[:d, :d] = (Xr.T @ Xr).toarray()
        b[:d] = Xf.T @ wy
        if fit_intercept:
            G[d, :d] = G[:d, d] = np.asarray(
                sparse.csr_matrix(Xf.multiply(w[:, None])).sum(axis=0)).reshape(-1)
    else:
        step = max(1, _NORMAL_CHUNK // max(1, d))
        for s in range(0, X.shape[0], step):
            xs = np.asarray(X[s:s + step], dtype=np.float64)
            xr = xs * root[s:s + step, None]
            G[:d, :d] += xr.T @ xr
            b[:d] += xs.T @ wy[s:s + step]
            if fit_intercept:
                G[d, :d] += (xs * w[s:s + step, None]).sum(axis=0)
        if fit_intercept:
            G[:d, d] = G[d, :d]
    if fit_intercept:
        G[d, d] = float(np.sum(w))
        b[d] = float(np.sum(wy))
    return G, b


def _normal_equations(X, y, fit_intercept):
    d = X.shape[1]
    p1 = d + int(fit_intercept)
    G = np.zeros((p1, p1))
    b = np.zeros(p1)
    if sparse.issparse(X):
        Xf = X.astype(np.float64, copy=False)
        G[:d, :d] = (Xf.T @ Xf).toarray()
        b[:d] = Xf.T @ y
        if fit_intercept:
            G[d, :d] = G[:d, d] = np.asarray(Xf.sum(axis=0)).reshape(-1)
    else:
        step = max(1, _NORMAL_CHUNK // max(1, d))
        for s in range(0, X.shape[0], step):
            xs = np.asarray(X[s:s + step], dtype=np.float64)
            G[:d, :d] += xs.T @ xs
            b[:d] += xs.T @ y[s:s + step]
            if fit_intercept:
                G[d, :d] += xs.sum(axis=0)
        if fit_intercept:
            G[:d, d] = G[d, :d]
    if fit_intercept:
        G[d, d] = X.shape[0]
        b[d] = float(np.sum(y))
    return G, b


#: max over eta of |b'''(eta)| for b = softplus: sigma (1 - sigma) (1 - 2 sigma)
#: peaks at sigma = (3 - sqrt 3) / 6 with value 1 / (6 sqrt 3)
LOGISTIC_B3_MAX = 1.0 / (6.0 * math.sqrt(3.0))


def row_form_norms(X, fit_intercept, factors, step=1 << 16):
    """``max_j ||F_j^T x_k||`` over the (n_cols, r_j) matrices ``factors`` for every
    row ``x_k`` of ``X`` (dense or CSR, with a last entry 1 when
    ``fit_intercept``): the largest standard deviation of ``F_j F_j^T``-Gaussian
    quadratic forms of the rows. One chunked pass over X (BLAS products); a
    float64 array of shape (n_rows,)."""
    d = X.shape[1]
    out = np.zeros(X.shape[0])
    for s in range(0, X.shape[0], step):
        block = X[s : s + step]
        for F in factors:
            F = np.asarray(F, dtype=np.float64)
            Z = (np.asarray(block @ F[:d]) if sparse.issparse(block)
                 else np.asarray(block, dtype=np.float64) @ F[:d])
            if fit_intercept:
                Z += F[d]
            np.maximum(out[s : s + step], np.sqrt(np.einsum("ij,ij->i", Z, Z)),
                       out=out[s : s + step])
    return out


def psd_factor(M):
    """``F`` with ``F F^T = M`` for a symmetric positive semi-definite ``M``
    (eigenvectors scaled by the roots of the non-negative eigenvalues)."""
    w, V = np.linalg.eigh(0.5 * (M + M.T))
    return V * np.sqrt(np.maximum(w, 0.0))


class RowGeometry:
    """The data's geometry in a metric: every datum ``k`` of the population it
    describes has ``||L^{-1} x_k|| <= radius`` (``x_k`` with the intercept's 1,
    ``L`` lower triangular, e.g. the Cholesky factor of the Laplace precision),
    so that for any direction ``u``, by Cauchy-Schwarz,

    ``|x_k . u| = |(L^{-1} x_k) . (L^T u)| <= radius * ||L^T u||``.

    In the posterior's own metric ``||L^T u||`` is O(1) for a proposal step while
    ``radius`` is O(n^-1/2), which makes range bounds shrink as the data grow,
    where the Euclidean ``max_k ||x_k|| ||u||`` does not. A ``(p,)`` ``chol`` is
    a diagonal ``L`` (wide models: the square roots of the precision's
    diagonal); the inequality holds for any invertible ``L``.
    """

    def __init__(self, chol, radius):
        self.chol = np.ascontiguousarray(chol, dtype=np.float64)
        self.radius = float(radius)
        if not (self.chol.ndim == 1 or (self.chol.ndim == 2
                                         and self.chol.shape[0] == self.chol.shape[1])):
            raise ValueError(f"chol must be a square matrix or the (p,) diagonal of one, got "
                             f"shape {self.chol.shape}")
        if not (self.radius >= 0.0 and np.isfinite(self.radius)):
            raise ValueError(f"radius must be a finite float >= 0, got {radius!r}")

    def norm(self, u):
        """``||L^T u||``."""
        u = np.asarray(u, dtype=np.float64)
        return float(np.linalg.norm(self.chol * u if self.chol.ndim == 1 else self.chol.T @ u))

    def __repr__(self):
        return f"RowGeometry(n_params={self.chol.shape[0]}, radius={self.radius:.4g})"


def logistic_residual_range_bound(theta, theta_new, theta_star, row_norm_max, geometry=None):
    """Bound on ``max_k |d_k(theta') - d_k(theta)|`` for the second-order
    Taylor residuals of logistic regression.

    With ``a_k = x_k^T (theta - theta*)``, ``b_k = x_k^T (theta' - theta*)`` the
    residual is ``d_k = -R(eta_k)``, ``R(eta) = b(eta) - b(eta*) - b'(eta*) delta -
    b''(eta*) delta^2 / 2``, and ``R'(s) = b'(s) - b'(eta*) - b''(eta*) (s - eta*)
    = b'''(xi) (s - eta*)^2 / 2`` (Taylor with Lagrange remainder), so

    ``|d_k(theta') - d_k(theta)| <= max|b'''| / 2 |int_{a_k}^{b_k} s^2 ds|
    = max|b'''| / 6 |b_k - a_k| |a_k^2 + a_k b_k + b_k^2|``.

    Cauchy-Schwarz bounds ``|b_k - a_k| = |x_k . (theta' - theta)|``, ``|a_k|`` and
    ``|b_k|`` by ``R_x`` times Euclidean norms (``R_x = max_k ||x_k||``, intercept
    column included) and, given a :class:`RowGeometry`, by its radius times the
    norms ``||L^T .||``; the bound is the smaller of the two. With
    ``max|b'''| = 1/(6 sqrt 3)``:

    ``C = R^3 c (alpha^2 + alpha beta + beta^2) / (36 sqrt 3)``, ``c``, ``alpha``,
    ``beta`` the norms of ``theta' - theta``, ``theta - theta*``, ``theta' - theta*``.
    """
    theta, theta_new, theta_star = (np.asarray(a, dtype=np.float64)
                                    for a in (theta, theta_new, theta_star))
    moves = (theta_new - theta, theta - theta_star, theta_new - theta_star)

    def bound(R, norm):
        c, a, b = (norm(v) for v in moves)
        if c == 0.0:
            return 0.0                  # no move, no difference
        # float64 arithmetic: rows of norm ~1e103 or more overflow to inf (a bound
        # that never stops a decision), not to Python's OverflowError
        with np.errstate(over="ignore"):
            return float(np.float64(R) ** 3 * c * (a * a + a * b + b * b)
                         * LOGISTIC_B3_MAX / 6.0)

    C = bound(row_norm_max, lambda v: float(np.linalg.norm(v)))
    if geometry is not None:
        C = min(C, bound(geometry.radius, geometry.norm))
    return C


def check_targets(y, n, family):
    """Validate the targets of a GLM with ``n`` rows; returns them as C-contiguous
    float64, or for the logistic family as 0/1 bytes (uint8) unless they are
    C-contiguous float64 already: uint8 and bool labels are used in place,
    other types copied at one byte a row."""
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must have shape ({n},) to match X, got {y.shape}")
    if y.dtype.kind not in "iubf":
        raise TypeError(f"y must be numeric, got dtype {y.dtype}")
    if y.dtype.kind == "f" and y.dtype not in (np.float32, np.float64):
        y = y.astype(np.float64)           # float16, long double
    if family == "logistic":
        zeros, ones = count_binary(y)      # one compiled read, no temporaries
        if zeros + ones != n:
            if y.dtype.kind == "f" and not np.isfinite(y).all():
                raise ValueError("y contains NaN or infinity")
            raise ValueError("logistic regression needs y in {0, 1}")
        # float64, uint8 and bool labels in place; others copied at one byte a row
        if y.flags.c_contiguous and y.dtype == np.float64:
            return y
        if y.flags.c_contiguous and y.dtype in (np.uint8, np.bool_):
            return y.view(np.uint8)
        return np.ascontiguousarray(y, dtype=np.uint8)
    y = np.ascontiguousarray(y, dtype=np.float64)
    if not np.isfinite(y).all():
        raise ValueError("y contains NaN or infinity")
    if family == "poisson" and (np.any(y < 0) or np.any(y != np.round(y))):
        raise ValueError("Poisson regression needs non-negative integer counts y")
    return y


def check_row_values(values, n, name="offset"):
    """``values`` (one number per row of X) as a float64 array of shape (n,):
    a clear ValueError for a non-numeric dtype, another shape, NaN or infinity
    (``name`` says which input)."""
    values = np.asarray(values)
    if values.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be numeric, got dtype {values.dtype}")
    values = np.ascontiguousarray(values, dtype=np.float64)
    if values.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) (one value per row of X), got "
                         f"{values.shape}")
    if not np.isfinite(values).all():
        raise ValueError(f"{name} contains NaN or infinity")
    return values


def check_offset(offset, n, family):
    """``offset`` as a float64 array of shape (n,), or None; finite values,
    and a logistic or Poisson family (for the Gaussian family, subtract it
    from y)."""
    if offset is None:
        return None
    if family not in ("logistic", "poisson"):
        raise ValueError(f"offset is for the logistic and Poisson families, not {family!r} "
                         "(with Gaussian noise, subtract the offset from y)")
    return check_row_values(offset, n)


def check_weights(weights, n):
    """Per-row weights (``sample_weight``) as a float64 array of shape (n,), or
    None (unweighted): finite, >= 0 and not all zero."""
    if weights is None:
        return None
    weights = check_row_values(weights, n, "sample_weight")
    if (weights < 0).any():
        raise ValueError("sample_weight must be >= 0 (a weight counts its row's "
                         f"log-likelihood that many times), got {weights.min():.6g}")
    if n and not weights.any():
        raise ValueError("sample_weight is zero for every row: nothing to fit")
    return weights


def max_weight(model, idx=None):
    """The largest weight of ``model``'s rows (those ``idx`` if given; 1.0
    unweighted): range bounds of unweighted terms scale by it."""
    w = getattr(model, "weights", None)
    if w is None:
        return 1.0
    w = w if idx is None else w[idx]
    return float(w.max()) if w.size else 1.0


def check_noise(noise_scale, y):
    """The Gaussian family's ``(noise_scale, phi = noise_scale**2)``, checked
    against overflow of the squared residuals of ``y``."""
    if not (np.isfinite(noise_scale) and noise_scale > 0):
        raise ValueError(f"noise_scale must be a finite float > 0, got {noise_scale!r}")
    noise_scale = float(noise_scale)
    with np.errstate(over="ignore", under="ignore"):
        phi = float(np.float64(noise_scale) ** 2)
    if not (np.isfinite(phi) and phi > 0 and np.isfinite(1.0 / phi)):
        raise ValueError(
            f"noise_scale must lie in [1e-150, 1e150] (its square, the noise variance, "
            f"must be a finite float64 > 0 with a finite inverse), got "
            f"{noise_scale:.3g}. Rescale y, or pass a noise_scale in that range.")
    z = float(np.max(np.abs(y))) / noise_scale if y.size else 0.0
    if z * z * max(1, y.size) > 1e300:
        raise ValueError(
            f"y has values up to {z * noise_scale:.3g} for a noise scale of "
            f"{noise_scale:.3g}: the Gaussian log-likelihood's squared residuals "
            "overflow float64. Rescale y (e.g. divide by its standard deviation).")
    return noise_scale, phi


def set_glm_fields(model, shape, y, family, fit_intercept, prior_scale,
                   intercept_prior_scale, noise_scale):
    """Set what a GLM posterior of a design of ``shape`` holds besides its rows:
    ``family``, the checked targets ``y``, the sizes, the noise (Gaussian
    family) and the independent Gaussian prior (intercept last)."""
    model.family = family
    model.y = check_targets(y, shape[0], family)
    model.fit_intercept = bool(fit_intercept)
    model.n_data, model.n_features = int(shape[0]), int(shape[1])
    model.n_params = model.n_features + int(model.fit_intercept)
    if family == "gaussian":
        model.noise_scale, model.phi = check_noise(noise_scale, model.y)
    else:
        model.noise_scale = None
        model.phi = 1.0
    scales = np.empty(model.n_params)
    scales[:model.n_features] = coefficient_scales(prior_scale, model.n_features)
    if model.fit_intercept:
        scales[-1] = float(intercept_prior_scale)
    model.prior = GaussianPrior(scales, model.n_params)


class GLM(RowsModel):
    """Canonical GLM posterior with an independent Gaussian prior.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Design matrix (float32 or float64; kept in its dtype). A scipy.sparse
        matrix or array is read as CSR without densifying it (other formats
        are converted to CSR once, duplicates summed, on a copy).
    y : array-like of shape (n_samples,)
        Targets.
    family : {"logistic", "poisson", "gaussian"}
    fit_intercept : bool, default=True
        Add an intercept, the last entry of ``theta``.
    prior_scale : float or array-like of shape (n_features,), default=10.0
        Prior standard deviation of every coefficient, or of each.
    intercept_prior_scale : float, default=10.0
        Prior standard deviation of the intercept.
    noise_scale : float, default=1.0
        Gaussian family only: the (known) noise standard deviation.
    n_threads : int, optional
        Threads for full-data passes (default: all available cores). Results
        do not depend on it.
    offset : array-like of shape (n_samples,), optional
        Logistic and Poisson families: a known term added to every linear
        predictor, ``eta_k = x_k . theta + offset_k`` (a Poisson model's log
        exposure). Every term, pass, control variate and sampler sees it.
    weights : array-like of shape (n_samples,), optional
        Per-row weights ``w_k >= 0`` (``sample_weight``): the log-likelihood is
        ``sum_k w_k l_k``, so an integer weight counts its row that many times.
    """

    _per_row = ("offset", "weights")

    def __init__(self, X, y, family, *, fit_intercept=True, prior_scale=10.0,
                 intercept_prior_scale=10.0, noise_scale=1.0, n_threads=None, offset=None,
                 weights=None):
        if family not in _FAMILIES:
            raise ValueError(f"family must be one of {sorted(_FAMILIES)}, got {family!r}")
        self.X = check_design(X, accept_sparse=True)
        set_glm_fields(self, self.X.shape, y, family, fit_intercept, prior_scale,
                       intercept_prior_scale, noise_scale)
        self.offset = check_offset(offset, self.n_data, family)
        self.weights = check_weights(weights, self.n_data)
        self.n_threads = available_cores() if n_threads is None else max(1, int(n_threads))
        self._cy = self._make_compiled()
        self._y_absmax = None

    def _make_compiled(self):
        return _FAMILIES[self.family](make_rows(self.X, self.fit_intercept), self.y, self.phi,
                                      offset=getattr(self, "offset", None),
                                      weight=getattr(self, "weights", None))

    #: per-datum Hessians exist (scalar curvature of eta): second-order control variates
    max_cv_order = 2
    #: the Hessian sum's diagonal in one pass (``full_pass(hessian="diag")``)
    diagonal_passes = True
    analytic_hessian = True

    @property
    def compiled(self):
        """The compiled family object (``CyLogistic``, ``CyPoisson`` or ``CyGaussian``)."""
        return self._cy

    def fingerprint(self):
        """Family, prior, noise, intercept, shapes and dtype, and a hash of
        every value of ``X`` and ``y`` (:func:`design_fingerprint`)."""
        fp = super().fingerprint()
        fp.update(family=self.family, phi=repr(self.phi), fit_intercept=str(self.fit_intercept),
                  **data_fingerprint(self))
        if getattr(self, "offset", None) is not None:
            fp["offset"] = _digest(self.offset)
        return fp

    # ---- per-datum terms ------------------------------------------------------
    def linear_predictor(self, theta, X=None):
        """``eta = X theta_coef + intercept`` for ``X`` (default: the model's data)."""
        theta = self.check_theta(theta)
        if X is None:
            return self._cy.eta(theta)
        if sparse.issparse(X):
            eta = np.asarray(X @ theta[: self.n_features], dtype=np.float64).reshape(-1)
        else:
            eta = np.asarray(X, dtype=np.float64) @ theta[: self.n_features]
        if self.fit_intercept:
            eta += theta[-1]
        return eta


    def cv_residuals_and_grads(self, theta, theta_star, idx, order):
        self._check_cv_order(order)
        idx = self.check_indices(idx)
        d, dp = self._cy.cv_derivatives(order, self.check_theta(theta_star),
                                        self.check_theta(theta), idx)
        return d, dp[:, None] * self._cy.gather(idx)


    def full_pass(self, theta, *, gradient=True, hessian=False, loglik=True):
        """One fused read of X: ``(sum l_k, sum grad l_k, sum Hessian l_k)``;
        ``hessian="diag"``: the Hessian sum's diagonal only, a (p,) vector (wide
        models: no ``p x p`` matrix)."""
        if isinstance(hessian, str):
            if hessian != "diag":
                raise ValueError(f"hessian must be a bool or 'diag', got {hessian!r}")
            ll, g, hd = self._cy.diag_hessian_pass(self.check_theta(theta), self.pass_threads())
            return (ll if loglik else None), (g if gradient else None), hd
        return self._cy.full_pass(self.check_theta(theta), loglik, gradient, hessian,
                                  self.pass_threads())

    def neg_hessian_operator(self, theta):
        """The posterior precision at ``theta`` (``-d^2 log pi / d theta^2``) as
        a symmetric :class:`scipy.sparse.linalg.LinearOperator`, without a
        ``p x p`` matrix (wide models: its largest eigenvalue by Lanczos). One
        pass for the per-datum curvatures, then each product ``P v`` reads X
        twice (``X v``, then ``X^T (w X v)``), counted as one pass."""
        from scipy.sparse.linalg import LinearOperator

        theta = self.check_theta(theta)
        rows, n = self._cy.rows, self.n_data
        w = self.linear_predictor_curvature(theta)
        prec = np.asarray(self.prior.precision, dtype=np.float64)

        def matvec(v):
            v = np.asarray(v, dtype=np.float64).reshape(-1)
            self._cy.note_passes(1)
            return prec * v + rows.py_add_xt_range(0, n, w * rows.py_dot_range(0, n, v))

        p = self.n_params
        return LinearOperator((p, p), matvec=matvec, rmatvec=matvec, dtype=np.float64)

    def linear_predictor_curvature(self, theta):
        """Every datum's curvature in its linear predictor at ``theta``,
        ``w_k = -d^2 l_k / d eta_k^2`` (weights included): its term of the
        Hessian is ``-w_k x_k x_k^T``. One pass over X, counted."""
        theta = self.check_theta(theta)
        rows, n = self._cy.rows, self.n_data
        _, _, w = self._cy.link_terms_array(
            self.y, rows.py_dot_range(0, n, theta) + self._cy.offsets(), want_ll=False)
        if getattr(self, "weights", None) is not None:
            w = w * self.weights
        self._cy.note_passes(1)
        return w

    def full_pass_hessian_estimate(self, theta, *, rows=2**21):
        """A full pass of the log-likelihood and gradient sums with the Hessian sum
        estimated from about ``rows`` rows: those of every k-th chunk of 256
        rows, evenly spread over the data (a systematic sample, so also on
        rows sorted by a feature or the label), the sum scaled by ``n`` over
        the rows it covers. The Hessian is the compute-bound part of a pass,
        so this costs little more than a gradient pass. Returns ``(ll, grad,
        hess, exact)``; ``exact`` is True when ``hess`` is the full-data sum
        (every chunk used: data of fewer than about ``2 rows`` rows). One full
        pass; the result does not depend on the number of threads."""
        n = self.n_data
        every = max(1, -(-n // 256) // max(1, -(-int(rows) // 256)))
        ll, g, h, covered = self._cy.sampled_hessian_pass(self.check_theta(theta), every,
                                                          self.pass_threads())
        if covered < n:
            h *= n / covered
        return ll, g, h, covered == n

    def subset(self, idx):
        """A GLM of the rows ``idx`` (copied; CSR stays CSR), with the same prior and
        one thread."""
        return self._subset(idx, GLM, family=self.family, noise_scale=self.noise_scale or 1.0)

    # ---- range bounds for the confidence sampler (doc/algorithms/building_blocks.rst) --
    def scale_problem(self):
        """Which input's scale overflows float64 in this model's sums, as a
        message, or None (one pass over X for its largest row norm)."""
        R = self.row_norm_max
        if not (np.isfinite(R) and R * R * max(1, self.n_data) < 1e300):
            size = (f"rows of norm up to {R:.3g}" if np.isfinite(R)
                    else "rows whose norm overflows float64")
            return (f"X has {size}: the log-likelihood's gradient and curvature (sums of "
                    "x x^T) overflow float64. Standardise X (e.g. StandardScaler), or rescale "
                    "its columns.")
        return super().scale_problem()

    def _max_abs_y_times_norm(self):
        if self._y_absmax is None:
            best = 0.0
            step = 2**16        # row norms in chunks (compiled, dense or CSR rows)
            for s in range(0, self.n_data, step):
                norms = self._cy.rows.row_norms(s, min(s + step, self.n_data))
                best = max(best, float(np.max(np.abs(self.y[s : s + step]) * norms)))
            self._y_absmax = best
        return self._y_absmax

    def range_bound(self, theta, theta_new, *, geometry=None):
        """``C >= max_k |l_k(theta_new) - l_k(theta)|`` over the data (or, with a
        :class:`RowGeometry`, over the data it describes; used by the logistic
        family, whose ``|l_k'| <= 1`` gives ``C = max_k |x_k . (theta' - theta)|``)."""
        return max_weight(self) * self._unweighted_range_bound(theta, theta_new, geometry)

    def _unweighted_range_bound(self, theta, theta_new, geometry):
        u = np.asarray(theta_new, dtype=np.float64) - np.asarray(theta, dtype=np.float64)
        dtheta = float(np.linalg.norm(u))
        R = self.row_norm_max
        if self.family == "logistic":
            C = R * dtheta
            if geometry is not None:
                C = min(C, geometry.radius * geometry.norm(u))
            return C
        if self.family == "gaussian":
            s = float(np.linalg.norm(np.asarray(theta_new) + np.asarray(theta)))
            return dtheta * (2 * self._max_abs_y_times_norm() + R * R * s) / (2 * self.phi)
        big = R * max(np.linalg.norm(theta), np.linalg.norm(theta_new))
        if getattr(self, "offset", None) is not None and self.offset.size:
            big += float(np.max(self.offset))
        return dtheta * (self._max_abs_y_times_norm() + R * np.exp(min(big, 700.0)))

    def cv_range_bound(self, theta, theta_new, theta_star, order, *, geometry=None):
        """``C >= max_k |d_k(theta_new) - d_k(theta)|`` for second-order Taylor
        residuals (logistic: :func:`logistic_residual_range_bound`; Gaussian: 0,
        the residuals vanish), over the data or those a :class:`RowGeometry`
        describes."""
        if order == 2 and self.family == "gaussian":
            return 0.0
        if order == 2 and self.family == "logistic":
            return max_weight(self) * logistic_residual_range_bound(
                theta, theta_new, theta_star, self.row_norm_max, geometry)
        raise NotImplementedError(
            f"a range bound for order-{order} residual differences is derived for the "
            "logistic and Gaussian families at order 2 only")

    def stratum_range_bounds(self, theta, theta_new, theta_star, order, strata):
        """``C_s >= max_{k in s} |t_k|`` for each stratum of a :class:`RowStrata`
        (``t_k`` the log-likelihood differences for ``order=None``, else the
        differences of Taylor residuals around ``theta_star``); the logistic family
        (:func:`logistic_stratum_range_bounds`)."""
        if self.family != "logistic":
            raise NotImplementedError("per-stratum range bounds are derived for the logistic "
                                      "family only")
        bounds = strata.logistic_bounds(theta, theta_new, theta_star, order)
        if getattr(self, "weights", None) is None:
            return bounds
        cached = getattr(self, "_stratum_wmax", None)
        if cached is None or cached[0] is not strata:
            wmax = np.maximum.reduceat(self.weights[strata.members], strata.offsets[:-1])
            self._stratum_wmax = cached = (strata, wmax)
        return bounds * cached[1]

    def range_bound_degree(self, order=None):
        """How the range bound given a :class:`RowGeometry` grows with its radius,
        ``C ~ radius^degree``: 1 for log-likelihood differences (``order=None``),
        3 for second-order residual differences (logistic family); None when the
        bound does not use the geometry."""
        if self.family != "logistic":
            return None
        return 1 if order is None else (3 if order == 2 else None)

    def whitened_row_norms(self, chol):
        """``||L^{-1} x_k||`` for every datum (``x_k`` with the intercept's 1),
        ``L = chol`` lower triangular of shape (n_params, n_params), or diagonal
        given as its (n_params,) diagonal: the rows' leverage in the metric ``L
        L^T``. One chunked pass over X (dense or CSR, BLAS products); a float64
        array of shape (n_data,)."""
        chol = np.asarray(chol, dtype=np.float64)
        p = self.n_params
        if chol.shape not in ((p, p), (p,)):
            raise ValueError(f"chol must have shape ({p}, {p}) or ({p},), got {chol.shape}")
        d = self.n_features
        out = np.empty(self.n_data)
        step = 1 << 16
        if chol.ndim == 1:
            inv = 1.0 / chol
            extra = inv[d] ** 2 if self.fit_intercept else 0.0
            for s in range(0, self.n_data, step):
                block = self.X[s : s + step]
                if sparse.issparse(block):
                    b = block.astype(np.float64)
                    sq = np.asarray(b.multiply(b) @ (inv[:d] ** 2)).reshape(-1)
                else:
                    Z = np.asarray(block, dtype=np.float64) * inv[:d]
                    sq = np.einsum("ij,ij->i", Z, Z)
                out[s : s + step] = np.sqrt(sq + extra)
            return out
        # the rows of [X, 1] L^{-T} are (L^{-1} x_k)^T
        M = solve_triangular(chol, np.eye(p), lower=True).T
        for s in range(0, self.n_data, step):
            block = self.X[s : s + step]
            if sparse.issparse(block):
                Z = np.asarray(block @ M[:d])
            else:
                Z = np.asarray(block, dtype=np.float64) @ M[:d]
            if self.fit_intercept:
                Z += M[d]
            out[s : s + step] = np.sqrt(np.einsum("ij,ij->i", Z, Z))
        return out

    def linear_predictor_sd(self, cov):
        """The standard deviation of every datum's linear predictor ``x_k^T theta``
        under a Gaussian with covariance ``cov`` (n_params, n_params) over
        theta, e.g. the Laplace approximation's: how far its ``eta`` moves under
        the posterior (one chunked pass over X)."""
        return row_form_norms(self.X, self.fit_intercept, [psd_factor(np.asarray(cov))])

    def __repr__(self):
        return (f"{type(self).__name__}(n_data={self.n_data}, n_features={self.n_features}, "
                f"fit_intercept={self.fit_intercept}, dtype={self.X.dtype})")


class LogisticRegressionModel(GLM):
    """Bayesian logistic regression posterior (y in {0, 1}). See :class:`GLM`."""

    def __init__(self, X, y, *, fit_intercept=True, prior_scale=10.0,
                 intercept_prior_scale=10.0, n_threads=None, weights=None):
        super().__init__(X, y, "logistic", fit_intercept=fit_intercept, prior_scale=prior_scale,
                         intercept_prior_scale=intercept_prior_scale, n_threads=n_threads,
                         weights=weights)


class PoissonRegressionModel(GLM):
    """Bayesian Poisson regression posterior (log link). See :class:`GLM`;
    ``offset`` is the log exposure (``y_k ~ Poisson(exposure_k exp(x_k .
    theta))``: ``offset = log(exposure)``)."""

    def __init__(self, X, y, *, fit_intercept=True, prior_scale=10.0,
                 intercept_prior_scale=10.0, n_threads=None, offset=None, weights=None):
        super().__init__(X, y, "poisson", fit_intercept=fit_intercept, prior_scale=prior_scale,
                         intercept_prior_scale=intercept_prior_scale, n_threads=n_threads,
                         offset=offset, weights=weights)


class GaussianRegressionModel(GLM):
    """Bayesian linear regression posterior with known noise sd. See :class:`GLM`."""

    def __init__(self, X, y, *, noise_scale=1.0, fit_intercept=True, prior_scale=10.0,
                 intercept_prior_scale=10.0, n_threads=None, weights=None):
        super().__init__(X, y, "gaussian", fit_intercept=fit_intercept, prior_scale=prior_scale,
                         intercept_prior_scale=intercept_prior_scale, noise_scale=noise_scale,
                         n_threads=n_threads, weights=weights)

    def exact_posterior(self):
        """Closed-form posterior ``(mean, covariance)`` (conjugate Gaussian)."""
        XtX, Xty = normal_equations(self.X, self.y, self.fit_intercept,
                                    getattr(self, "weights", None))
        prec = XtX / self.phi + np.diag(self.prior.precision)
        cov = np.linalg.inv(prec)
        mean = cov @ (Xty / self.phi)
        return mean, cov
