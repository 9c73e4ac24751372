"""Multinomial (softmax) logistic regression posterior.

Parameterisation: one coefficient vector per class, ``theta`` of shape
``(K, p1)`` flattened row-major, ``p1 = n_features + fit_intercept``:
``theta[k * p1 + j]`` is ``coef_[k, j]`` for ``j < n_features`` and
``theta[k * p1 + n_features]`` is ``intercept_[k]`` (scikit-learn's shapes).
``eta_k = x . theta_k``, ``P(y = k | x) = softmax(eta)_k``.

Identifiability: the likelihood depends on the differences ``theta_k -
theta_K`` only (adding a vector ``c`` to every class changes nothing). Write
``theta_k = gamma_k + c`` with ``sum_k gamma_k = 0``; the Gaussian prior,
independent with the same scale across classes for each coordinate, factorises
as ``sum_k ||theta_k||^2 = sum_k ||gamma_k||^2 + K ||c||^2``. So the posterior
is proper: ``c`` keeps its prior ``N(0, s^2 / K)``, independent of ``gamma``,
which the data identify, and the posterior mean of ``c`` is 0 (posterior means
sum to zero over classes, as scikit-learn's symmetric multinomial
coefficients do). Predictions depend on ``gamma`` only.

The model's per-datum methods run on the compiled :class:`CyMultinomial`
(``model.compiled``, the object sampler kernels take); the functions
``multinomial_*_reference`` are the plain NumPy definitions it is tested
against.
"""
from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.special import logsumexp, softmax

from .._threads import available_cores
from ._base import GaussianPrior, RowsModel, coefficient_scales, design_size
from ._cymultinomial import CyMultinomial
from ._glm import (check_design, check_weights, data_fingerprint, max_weight,
                   psd_factor, row_form_norms)
from ._rows import make_rows

__all__ = ["MultinomialLogisticModel"]


# ---- plain NumPy definitions (the reference of the compiled kernels) -------------------------
def _design(X, idx, intercept):
    Xs = X[idx].toarray() if sparse.issparse(X) else X[idx]
    Xs = np.asarray(Xs, dtype=np.float64)
    if intercept:
        Xs = np.column_stack([Xs, np.ones(Xs.shape[0])])
    return Xs


def multinomial_eta_reference(X, theta, n_classes, intercept, idx):
    """Linear predictors ``(len(idx), K)``."""
    Xs = _design(X, idx, intercept)
    return Xs @ np.asarray(theta, dtype=np.float64).reshape(n_classes, -1).T


def multinomial_loglik_reference(X, y, theta, n_classes, intercept, idx):
    """``l_k(theta) = eta_{y_k} - logsumexp(eta)`` for ``k`` in ``idx``."""
    eta = multinomial_eta_reference(X, theta, n_classes, intercept, idx)
    yi = np.asarray(y)[idx].astype(np.int64)
    return eta[np.arange(len(yi)), yi] - logsumexp(eta, axis=1)


def multinomial_grad_reference(X, y, theta, n_classes, intercept, idx):
    """Per-datum gradients, shape ``(len(idx), K * p1)`` (class-major)."""
    Xs = _design(X, idx, intercept)
    eta = Xs @ np.asarray(theta, dtype=np.float64).reshape(n_classes, -1).T
    r = -softmax(eta, axis=1)
    r[np.arange(len(idx)), np.asarray(y)[idx].astype(np.int64)] += 1.0
    return (r[:, :, None] * Xs[:, None, :]).reshape(len(idx), -1)


def multinomial_hessian_reference(X, y, theta, n_classes, intercept, idx):
    """``sum_k Hessian l_k(theta)``: ``-sum_k (diag(p_k) - p_k p_k^T) (x) x_k x_k^T``."""
    Xs = _design(X, idx, intercept)
    p = softmax(Xs @ np.asarray(theta, dtype=np.float64).reshape(n_classes, -1).T, axis=1)
    K, p1 = n_classes, Xs.shape[1]
    H = np.zeros((K, p1, K, p1))
    for a in range(K):
        for b in range(K):
            w = (p[:, a] if a == b else 0.0) - p[:, a] * p[:, b]
            H[a, :, b, :] = -(Xs * w[:, None]).T @ Xs
    return H.reshape(K * p1, K * p1)


def multinomial_residual_reference(X, y, theta, theta_star, n_classes, intercept, idx, order):
    """Residuals ``d_k = l_k(theta) - q_k(theta)`` of the order-0/1/2 Taylor
    expansion ``q_k`` of ``l_k`` at ``theta_star``, by definition (per-datum
    gradient and Hessian at ``theta_star``)."""
    idx = np.asarray(idx, dtype=np.int64)
    ll = multinomial_loglik_reference(X, y, theta, n_classes, intercept, idx)
    d = ll - multinomial_loglik_reference(X, y, theta_star, n_classes, intercept, idx)
    delta = np.asarray(theta, dtype=np.float64) - theta_star
    if order >= 1:
        d -= multinomial_grad_reference(X, y, theta_star, n_classes, intercept, idx) @ delta
    if order == 2:
        for i, k in enumerate(idx):
            h = multinomial_hessian_reference(X, y, theta_star, n_classes, intercept, [k])
            d[i] -= 0.5 * delta @ h @ delta
    return d


class MultinomialLogisticModel(RowsModel):
    """Multinomial (softmax) logistic regression posterior with an independent
    Gaussian prior; one coefficient vector per class (see the module notes for
    the layout of ``theta`` and why the posterior is proper).

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Design matrix (float32 or float64; kept in its dtype). A scipy.sparse
        ``X`` is read as CSR without densifying it (see :class:`GLM`).
    y : array-like of shape (n_samples,)
        Class indices ``0 .. n_classes - 1``.
    n_classes : int, optional
        ``K`` (default: ``max(y) + 1``); at least 2.
    fit_intercept : bool, default=True
        One intercept per class (the last entry of each class's block).
    prior_scale : float or array-like of shape (n_features,), default=10.0
        Prior standard deviation of the coefficients (one per column, the
        same in every class, for an array).
    intercept_prior_scale : float, default=10.0
        Prior standard deviation of the intercepts.
    n_threads : int, optional
        Threads for full-data passes (default: all available cores). Results
        do not depend on it.
    weights : array-like of shape (n_samples,), optional
        Per-row weights ``w_k >= 0`` (``sample_weight``): the log-likelihood is
        ``sum_k w_k l_k``, so an integer weight counts its row that many times.
        Every term, residual, gradient, full pass (Hessian included) and range
        bound sees them; the control-variate cache (values at ``theta*``) does
        not need to.
    """

    family = "multinomial"
    max_cv_order = 2
    analytic_hessian = True

    def __init__(self, X, y, *, n_classes=None, fit_intercept=True, prior_scale=10.0,
                 intercept_prior_scale=10.0, n_threads=None, weights=None):
        self.X = check_design(X, accept_sparse=True)
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != self.X.shape[0]:
            raise ValueError(f"y must have shape ({self.X.shape[0]},) to match X, got {y.shape}")
        if y.dtype.kind not in "iubf":
            raise TypeError(f"y must hold class indices (numbers), got dtype {y.dtype}")
        y = np.ascontiguousarray(y, dtype=np.float64)
        if not np.isfinite(y).all() or np.any(y < 0) or np.any(y != np.round(y)):
            raise ValueError("y must hold class indices 0, 1, ..., n_classes - 1")
        K = int(y.max()) + 1 if n_classes is None else int(n_classes)
        if K < 2:
            raise ValueError(f"multinomial regression needs n_classes >= 2, got {K}")
        if y.size and y.max() >= K:
            raise ValueError(f"y has class index {int(y.max())} >= n_classes = {K}")
        self.y = y
        self.weights = check_weights(weights, self.X.shape[0])
        self.n_classes = K
        self.fit_intercept = bool(fit_intercept)
        self.n_data, self.n_features = self.X.shape
        self.n_cols = self.n_features + int(self.fit_intercept)
        self.n_params = K * self.n_cols
        scales = np.empty((K, self.n_cols))
        scales[:, :self.n_features] = coefficient_scales(prior_scale, self.n_features)
        if self.fit_intercept:
            scales[:, -1] = float(intercept_prior_scale)
        self.prior = GaussianPrior(scales.ravel(), self.n_params)
        self.n_threads = available_cores() if n_threads is None else max(1, int(n_threads))
        self._cy = self._make_compiled()

    def _make_compiled(self):
        # getattr: models pickled before weights existed rebuild unweighted
        return CyMultinomial(make_rows(self.X, self.fit_intercept), self.y, self.n_classes,
                             weight=getattr(self, "weights", None))

    @property
    def compiled(self):
        """The compiled model (:class:`CyMultinomial`) that sampler kernels take."""
        return self._cy

    def fingerprint(self):
        fp = super().fingerprint()
        fp.update(family=self.family, n_classes=str(self.n_classes),
                  fit_intercept=str(self.fit_intercept), **data_fingerprint(self))
        return fp

    # ---- layout ---------------------------------------------------------------------------
    def unpack(self, theta):
        """``(coef (..., K, n_features), intercept (..., K))`` of parameter vectors
        ``theta`` of shape (..., n_params) (intercepts 0 without ``fit_intercept``)."""
        t = np.asarray(theta, dtype=np.float64)
        t = t.reshape(t.shape[:-1] + (self.n_classes, self.n_cols))
        coef = t[..., : self.n_features]
        icpt = t[..., self.n_features] if self.fit_intercept else np.zeros(t.shape[:-1])
        return coef, icpt

    def linear_predictor(self, theta, X=None):
        """``eta`` of shape (n, K) for ``X`` (default: the model's data)."""
        theta = self.check_theta(theta)
        if X is None:
            return self._cy.eta(theta)
        coef, icpt = self.unpack(theta)
        if sparse.issparse(X):
            return np.asarray(X @ coef.T, dtype=np.float64) + icpt
        return np.asarray(X, dtype=np.float64) @ coef.T + icpt

    # ---- per-datum terms (compiled) ----------------------------------------------------------

    def cv_residuals_and_grads(self, theta, theta_star, idx, order):
        self._check_cv_order(order)
        idx = self.check_indices(idx)
        d, dd = self._cy.term_derivatives(order, self.check_theta(theta_star),
                                          self.check_theta(theta), idx)
        X = self._cy.gather(idx)
        return d, (dd[:, :, None] * X[:, None, :]).reshape(len(idx), self.n_params)


    def linear_predictor_sd(self, cov):
        """The largest standard deviation, over classes, of every datum's centred
        linear predictor ``x_k^T (beta_c - mean_c' beta_c')`` under a Gaussian with
        covariance ``cov`` (n_params, n_params) over theta, e.g. the Laplace
        approximation's (the shift common to all classes changes no likelihood
        and is left out). One chunked pass over X per class."""
        K, q = self.n_classes, self.n_cols
        C = np.asarray(cov, dtype=np.float64).reshape(K, q, K, q)
        # Cov of the centred class-c coefficients: (e_c - 1/K)^T C (e_c - 1/K) blockwise
        row = C.mean(axis=2)                      # (K, q, q): mean over the second class
        col = C.mean(axis=0)                      # (q, K, q): mean over the first class
        both = row.mean(axis=0)                   # (q, q)
        mats = [C[c, :, c, :] - row[c] - col[:, c, :] + both for c in range(K)]
        return row_form_norms(self.X, self.fit_intercept, [psd_factor(M) for M in mats])

    def pass_values(self):
        """Values a full pass reads, times the classes (each value is read once
        per class)."""
        return (design_size(self.X) + self.n_data) * self.n_classes

    def full_pass(self, theta, *, gradient=True, hessian=False, loglik=True):
        """One fused read of X: ``(sum l_k, sum grad l_k, sum Hessian l_k)``.

        The Hessian is summed as the ``K (K - 1) / 2`` symmetric blocks of its class
        pairs, each by the rows' Hessian kernel (float32 rows: in float32 blocks, as
        for the GLMs; ``self._cy.rows.hessian_rtol``), the pairs in threads."""
        return self._cy.full_pass(self.check_theta(theta), loglik, gradient, bool(hessian),
                                  self.pass_threads())

    def subset(self, idx):
        """The model of the rows ``idx`` (copied, with their weights), with the same
        prior and one thread."""
        return self._subset(idx, type(self), n_classes=self.n_classes)

    # ---- range bounds (the confidence sampler) ---------------------------------------------
    def _spread(self, h):
        """``max_{a,b} ||h_a - h_b||`` over the class blocks of ``h`` (n_params,):
        ``R`` times it bounds ``max_c x . h_c - min_c x . h_c`` for every row."""
        h = np.asarray(h, dtype=np.float64).reshape(self.n_classes, self.n_cols)
        diff = h[:, None, :] - h[None, :, :]
        return float(np.sqrt(np.max(np.einsum("abj,abj->ab", diff, diff))))

    def range_bound(self, theta, theta_new):
        """``C >= max_k |l_k(theta') - l_k(theta)|``.

        As a function of ``eta``, ``l`` has gradient ``g = e_y - p``, which sums to
        zero with ``||g||_1 = 2 (1 - p_y) <= 2``; so ``|g . v| <= range(v) =
        max_c v_c - min_c v_c`` for every ``v``, and by the mean value theorem
        ``|l(eta') - l(eta)| <= range(eta' - eta) <= R max_{a,b} ||h_a - h_b||``
        with ``h = theta' - theta`` and ``R = max_k ||x_k||`` (Cauchy-Schwarz). The
        bound ignores a shift common to every class, which changes no ``l_k``.
        Weighted rows: times the largest weight."""
        return max_weight(self) * self.row_norm_max * self._spread(
            np.asarray(theta_new, dtype=np.float64) - np.asarray(theta, dtype=np.float64))

    def cv_range_bound(self, theta, theta_new, theta_star, order):
        """``C >= max_k |d_k(theta') - d_k(theta)|`` for the second-order Taylor
        residuals ``d = -R``, ``R(eta) = lse(eta) - lse* - p* . delta -
        delta^T W* delta / 2`` (``delta = eta - eta*``).

        ``grad R(s) . v`` is the Taylor remainder of ``t -> D lse(eta* + t delta_s)[v]``,
        i.e. ``D^3 lse[v, delta_s, delta_s] / 2`` at an intermediate point; that third
        derivative is the joint cumulant ``E[(V - EV)(Delta - E Delta)^2]`` of the
        class-indexed values ``v_c``, ``delta_c`` under the softmax probabilities, at
        most ``range(v) range(delta_s)^2 / 4`` in absolute value. ``range`` is a
        seminorm, so on the segment ``range(delta_s) <= max(range(delta),
        range(delta'))``, and the mean value theorem gives

        ``|d(theta') - d(theta)| <= range(eta' - eta) max(range(delta), range(delta'))^2 / 8``,

        with ``range(x . h) <= R max_{a,b} ||h_a - h_b||`` as in :meth:`range_bound`;
        weighted rows: times the largest weight."""
        if order != 2:
            raise NotImplementedError(
                f"a range bound for order-{order} residual differences is derived for "
                "order 2 only")
        theta, theta_new, theta_star = (np.asarray(a, dtype=np.float64)
                                        for a in (theta, theta_new, theta_star))
        R = self.row_norm_max
        r = max(self._spread(theta - theta_star), self._spread(theta_new - theta_star))
        c = self._spread(theta_new - theta)
        if c == 0.0 or r == 0.0:
            return 0.0                  # no move, or no residual: no difference
        # float64 arithmetic: rows of norm ~1e103 or more overflow to inf (a bound that
        # never stops a decision), not to Python's OverflowError
        with np.errstate(over="ignore"):
            return float(np.float64(R) ** 3 * c * r * r / 8.0 * max_weight(self))

    def scale_problem(self):
        R = self.row_norm_max
        if not (np.isfinite(R) and R * R * max(1, self.n_data) < 1e300):
            return (f"X has rows of norm up to {R:.3g}: the log-likelihood's gradient and "
                    "curvature overflow float64. Standardise X (e.g. StandardScaler).")
        return None

    def __repr__(self):
        return (f"{type(self).__name__}(n_data={self.n_data}, n_features={self.n_features}, "
                f"n_classes={self.n_classes}, fit_intercept={self.fit_intercept}, "
                f"dtype={self.X.dtype})")
