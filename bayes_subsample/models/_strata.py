"""Strata of a GLM's rows with a range bound for each (the confidence sampler's
stratified decision, doc/algorithms/confidence.rst, "Strata of rows").

A stratum is described by a *center* ``c`` (a point in the space of the rows,
intercept column included) and a *radius* ``rho``: each of its rows differs
from ``c`` only in the *varying* columns ``V`` (shared by all strata), by at
most ``rho`` in the metric of a lower-triangular ``M`` on those columns:
``||M^{-1} (x_k - c)_V|| <= rho``. For any direction ``u``, by Cauchy-Schwarz,

``x_k . u`` lies in ``[c . u - rho nu(u), c . u + rho nu(u)]``, ``nu(u) = ||M^T u_V||``,

where ``c . u`` is computed exactly. Rows are grouped by the values of their 0/1
columns (one-hot indicators: the rows of a group share those columns exactly,
so the group's center holds them and ``V`` is the other columns), and each group
is split by the radius of its rows, so that the few rows far from their center
do not widen the bound of the many near it.
"""
from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.linalg import cholesky, solve_triangular

from . import _strata_fast as _fast
from ._glm import LOGISTIC_B3_MAX

__all__ = ["RowStrata", "row_strata", "logistic_stratum_range_bounds", "logistic_b3_sup"]

#: rows in a chunk of the passes over X
_CHUNK = 1 << 16


class RowStrata:
    """Strata of the rows of a GLM's design, each with a center and a radius
    (see the module's docstring for the geometry).

    Parameters
    ----------
    members : int64 array of shape (n_data,)
        The row indices, grouped by stratum (ascending within each).
    offsets : int64 array of shape (n_strata + 1,)
        Stratum ``s`` holds ``members[offsets[s]:offsets[s + 1]]``.
    centers : float64 array of shape (n_strata, n_params)
        The centers ``c_s`` (the intercept's column included).
    radius : float64 array of shape (n_strata,)
        ``rho_s >= max_k ||M^{-1} (x_k - c_s)_V||`` over the stratum's rows.
    varying : int64 array
        The columns ``V`` in which rows may differ from their center.
    chol : float64 array of shape (len(V), len(V)), or (len(V),) for a diagonal ``M``
        The metric's lower-triangular factor ``M``.
    eta_star_range : float64 array of shape (n_strata, 2), optional
        The smallest and largest linear predictor ``x_k . theta*`` over each
        stratum's rows at the Taylor proxies' expansion point ``theta*``: the
        residual bounds then use the largest ``|b'''|`` over the linear predictors
        a move can reach instead of its global maximum.
    """

    def __init__(self, members, offsets, centers, radius, varying, chol, eta_star_range=None):
        self.members = np.ascontiguousarray(members, dtype=np.int64)
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.centers = np.ascontiguousarray(centers, dtype=np.float64)
        self.radius = np.ascontiguousarray(radius, dtype=np.float64)
        self.varying = np.ascontiguousarray(varying, dtype=np.int64)
        self.chol = np.ascontiguousarray(chol, dtype=np.float64)
        S = self.offsets.shape[0] - 1
        if S < 1 or self.offsets[0] != 0 or self.offsets[-1] != self.members.shape[0] \
                or np.any(np.diff(self.offsets) < 1):
            raise ValueError("offsets must rise from 0 to len(members), each stratum non-empty")
        if self.centers.ndim != 2 or self.centers.shape[0] != S or self.radius.shape != (S,):
            raise ValueError(f"centers must have shape (n_strata, n_params) and radius "
                             f"(n_strata,) for {S} strata")
        if not np.all(np.isfinite(self.radius)) or np.any(self.radius < 0):
            raise ValueError("radius must hold finite floats >= 0")
        self.eta_star_range = None if eta_star_range is None else \
            np.ascontiguousarray(eta_star_range, dtype=np.float64)
        if self.eta_star_range is not None and self.eta_star_range.shape != (S, 2):
            raise ValueError(f"eta_star_range must have shape ({S}, 2)")
        v = self.varying.shape[0]
        if self.chol.shape not in ((v, v), (v,)):
            raise ValueError(f"chol must have shape ({v}, {v}) or ({v},) for {v} varying "
                             f"columns, got {self.chol.shape}")

    @property
    def n_strata(self):
        return self.offsets.shape[0] - 1

    @property
    def sizes(self):
        """The number of rows of each stratum."""
        return np.diff(self.offsets)

    def labels(self):
        """The stratum of each row, shape (n_data,)."""
        out = np.empty(self.members.shape[0], dtype=np.int64)
        out[self.members] = np.repeat(np.arange(self.n_strata), self.sizes)
        return out

    def nu(self, U):
        """``||M^T u_V||`` for each column ``u`` of ``U`` (shape (n_params, m)): the
        factor the radius multiplies."""
        W = np.asarray(U, dtype=np.float64)[self.varying]
        if W.shape[0] == 0:
            return np.zeros(W.shape[1])
        W = self.chol[:, None] * W if self.chol.ndim == 1 else self.chol.T @ W
        return np.sqrt(np.einsum("ij,ij->j", W, W))

    def logistic_bounds(self, theta, theta_new, theta_star=None, order=None):
        """The logistic GLM's per-stratum range bounds, compiled (the values of
        :func:`logistic_stratum_range_bounds`)."""
        if order not in (None, 2):
            raise NotImplementedError(f"a range bound for order-{order} residual differences "
                                      "is derived for order 2 only")
        return _fast.logistic_bounds(
            self.centers, self.radius, self.varying, self.chol,
            np.ascontiguousarray(theta, dtype=np.float64),
            np.ascontiguousarray(theta_new, dtype=np.float64),
            None if order is None else theta_star, self.eta_star_range,
            np.empty(self.n_strata))

    def __repr__(self):
        return (f"RowStrata(n_strata={self.n_strata}, n_data={self.members.shape[0]}, "
                f"varying columns={self.varying.shape[0]})")


def _binary_columns(X):
    """The columns of a dense ``X`` whose values are all 0 or 1, and their sums."""
    d = X.shape[1]
    ok = np.ones(d, dtype=bool)
    sums = np.zeros(d)
    for s in range(0, X.shape[0], _CHUNK):
        block = np.asarray(X[s : s + _CHUNK])
        ok &= np.all((block == 0) | (block == 1), axis=0)
        sums += block.sum(axis=0, dtype=np.float64)
    return np.flatnonzero(ok), sums


def _pattern_labels(X, cols):
    """Group ids of the rows by their values in the 0/1 columns ``cols``."""
    if len(cols) == 0:
        return np.zeros(X.shape[0], dtype=np.int64), 1
    keys = []
    for s in range(0, X.shape[0], _CHUNK):
        keys.append(np.packbits(np.asarray(X[s : s + _CHUNK][:, cols]) != 0, axis=1))
    keys = np.ascontiguousarray(np.concatenate(keys))
    view = keys.view(np.dtype((np.void, keys.shape[1]))).reshape(-1)
    _, labels = np.unique(view, return_inverse=True)
    labels = labels.reshape(-1).astype(np.int64)
    return labels, int(labels.max()) + 1


def _choose_pattern_columns(X, binary, sums, max_groups):
    """The 0/1 columns to group by: all of them if their patterns make at most
    ``max_groups`` groups, else the longest prefix of the rarest ones that does."""
    if len(binary) == 0:
        return binary
    n = X.shape[0]
    rarity = np.minimum(sums[binary], n - sums[binary])
    order = binary[np.argsort(rarity, kind="stable")]
    if _pattern_labels(X, order)[1] <= max_groups:
        return np.sort(order)
    lo, hi = 0, len(order)          # lo columns fit, hi do not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _pattern_labels(X, order[:mid])[1] <= max_groups:
            lo = mid
        else:
            hi = mid
    return np.sort(order[:lo])


def _group_sums(X, labels, n_groups, fit_intercept):
    """Per-group sums of the rows (intercept column included) and counts."""
    d = X.shape[1]
    sums = np.zeros((n_groups, d + int(fit_intercept)))
    for s in range(0, X.shape[0], _CHUNK):
        block = X[s : s + _CHUNK]
        lab = labels[s : s + _CHUNK]
        G = sparse.csr_matrix((np.ones(lab.shape[0]), (lab, np.arange(lab.shape[0]))),
                              shape=(n_groups, lab.shape[0]))
        part = G @ block
        sums[:, :d] += part.toarray() if sparse.issparse(part) else part
    counts = np.bincount(labels, minlength=n_groups).astype(np.float64)
    if fit_intercept:
        sums[:, d] = counts
    return sums, counts


def _radii(X, labels, centers, varying, chol):
    """``||M^{-1} (x_k - c_{g(k)})_V||`` for every row, in chunks of at most about
    2M values; a sparse ``X`` with a diagonal ``M`` is never densified (the
    square expanded over the stored entries, with a margin for its rounding)."""
    n, nv = X.shape[0], len(varying)
    rho = np.zeros(n)
    if nv == 0:
        return rho
    rows = max(1, min(_CHUNK, (1 << 21) // nv))
    inv_T = None if chol.ndim == 1 else \
        solve_triangular(chol, np.eye(nv), lower=True).T      # z = e @ inv_T
    Cv = centers[:, varying]
    if chol.ndim == 1:
        Cw = Cv / chol                                         # per group
        cc = np.einsum("ij,ij->i", Cw, Cw)
    else:
        Cz = Cv @ inv_T
    for s in range(0, n, rows):
        block = X[s : s + rows][:, varying]
        lab = labels[s : s + rows]
        if sparse.issparse(block) and chol.ndim == 1:
            B = sparse.csr_matrix(block, dtype=np.float64)
            row_of = np.repeat(np.arange(B.shape[0]), np.diff(B.indptr))
            v = B.data / chol[B.indices]
            sq = np.bincount(row_of, weights=v * v, minlength=B.shape[0])
            cross = np.bincount(row_of, weights=v * Cw[lab[row_of], B.indices],
                                minlength=B.shape[0])
            r2 = sq - 2.0 * cross + cc[lab]
            rho[s : s + rows] = np.sqrt(np.maximum(r2, 0.0) + 1e-12 * (sq + cc[lab]))
            continue
        if sparse.issparse(block):
            Z = np.asarray(block @ inv_T) - Cz[lab]
        else:
            E = np.asarray(block, dtype=np.float64) - Cv[lab]
            Z = E / chol if chol.ndim == 1 else E @ inv_T
        rho[s : s + rows] = np.sqrt(np.einsum("ij,ij->i", Z, Z))
    return rho


def row_strata(model, precision, *, eta_star=None, max_groups=None, n_bins=8):
    """Strata of ``model``'s rows for the stratified range bounds: rows grouped by
    their values in the 0/1 columns of a dense ``X`` (one group for CSR ``X`` or
    without such columns), each group split by radius into bins of ratio 2.

    The metric ``M`` on the varying columns ``V`` is that of the marginal
    posterior of their coefficients under the Laplace approximation: ``M M^T =
    (Sigma_VV)^{-1}``, ``Sigma = precision^{-1}``, so that ``nu(theta -
    theta*)`` is about ``sqrt(len(V))`` for a posterior draw. Three passes over X
    (the 0/1 columns, the groups' centers, the radii).

    Parameters
    ----------
    model : GLM
    precision : array of shape (n_params, n_params), or (n_params,) for a diagonal one
        A posterior precision (the Laplace approximation's).
    eta_star : array of shape (n_data,), optional
        The linear predictors at the Taylor proxies' expansion point (their
        cache), for the strata's ``eta_star_range``.
    max_groups : int, optional
        At most this many groups of 0/1 patterns (default ``min(1024, max(1,
        n_data // 100), 2**20 // n_params)``); with more patterns, the rarest columns whose
        patterns fit are grouped by, the others join ``V``.
    n_bins : int, default=8
        Radius bins per group: ``(rho_max / 2, rho_max]``, ``(rho_max / 4, rho_max / 2]``,
        ..., the last bin holding every smaller radius.

    Returns
    -------
    RowStrata
    """
    X = model.X
    n, d = X.shape
    p = model.n_params
    fit_intercept = bool(model.fit_intercept)
    if max_groups is None:
        # the centers hold n_groups x n_params values, read at every decision
        max_groups = min(1024, max(1, n // 100), max(1, (1 << 20) // p))
    if sparse.issparse(X):
        pattern = np.zeros(0, dtype=np.int64)
        labels, n_groups = np.zeros(n, dtype=np.int64), 1
    else:
        binary, col_sums = _binary_columns(X)
        pattern = _choose_pattern_columns(X, binary, col_sums, max_groups)
        labels, n_groups = _pattern_labels(X, pattern)
    varying = np.setdiff1d(np.arange(d), pattern).astype(np.int64)
    sums, counts = _group_sums(X, labels, n_groups, fit_intercept)
    centers = sums / counts[:, None]
    if len(pattern):
        # the group's rows share these columns: its center holds them exactly
        first = np.zeros(n_groups, dtype=np.int64)
        first[labels[::-1]] = np.arange(n - 1, -1, -1)
        centers[:, pattern] = np.asarray(X[first][:, pattern], dtype=np.float64)
    if fit_intercept:
        centers[:, d] = 1.0
    # the metric on V: the marginal posterior precision of those coefficients
    precision = np.asarray(precision, dtype=np.float64)
    if precision.ndim == 1:
        chol = np.sqrt(precision[varying])
    else:
        cov = np.linalg.inv(precision)
        sub = cov[np.ix_(varying, varying)]
        chol = cholesky(np.linalg.inv(0.5 * (sub + sub.T)), lower=True) if len(varying) \
            else np.zeros((0, 0))
    rho = _radii(X, labels, centers, varying, chol)
    # radius bins within each group
    rmax = np.zeros(n_groups)
    np.maximum.at(rmax, labels, rho)
    with np.errstate(divide="ignore"):
        ratio = np.where(rho > 0, rmax[labels] / np.where(rho > 0, rho, 1.0), np.inf)
    bins = np.minimum(np.floor(np.log2(np.maximum(ratio, 1.0))), n_bins - 1).astype(np.int64)
    key = labels * n_bins + bins
    uniq, strata_of = np.unique(key, return_inverse=True)
    strata_of = strata_of.reshape(-1)
    members = np.argsort(strata_of, kind="stable").astype(np.int64)
    sizes = np.bincount(strata_of, minlength=len(uniq))
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    radius = np.zeros(len(uniq))
    np.maximum.at(radius, strata_of, rho)
    eta_range = None
    if eta_star is not None:
        eta_star = np.asarray(eta_star, dtype=np.float64)
        eta_range = np.column_stack([np.full(len(uniq), np.inf), np.full(len(uniq), -np.inf)])
        np.minimum.at(eta_range[:, 0], strata_of, eta_star)
        np.maximum.at(eta_range[:, 1], strata_of, eta_star)
    # a relative margin covers the rounding of the computed norms
    return RowStrata(members, offsets, centers[uniq // n_bins], radius * (1.0 + 1e-9),
                     varying, chol, eta_range)


def _intervals(strata, U):
    """``(dot, half)``: ``x_k . u`` lies in ``dot +- half`` over each stratum's rows,
    for each column ``u`` of ``U``; shapes (n_strata, m)."""
    U = np.asarray(U, dtype=np.float64)
    return strata.centers @ U, strata.radius[:, None] * strata.nu(U)[None, :]


#: where |b'''| of the softplus peaks: eta = +-log((3 + sqrt 3) / (3 - sqrt 3))
_B3_PEAK = float(np.log((3.0 + np.sqrt(3.0)) / (3.0 - np.sqrt(3.0))))


def _abs_b3(eta):
    """``|b'''(eta)| = sigma (1 - sigma) |1 - 2 sigma|`` of the softplus."""
    e = np.exp(-np.abs(eta))
    return e / (1.0 + e) ** 2 * (1.0 - e) / (1.0 + e)


def logistic_b3_sup(lo, hi):
    """``max |b'''|`` over the intervals ``[lo, hi]`` of linear predictors (it
    rises from 0 to its peak at ``|eta| = 1.317`` and falls beyond, evenly)."""
    lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=np.float64),
                                 np.asarray(hi, dtype=np.float64))
    peak = ((lo <= _B3_PEAK) & (hi >= _B3_PEAK)) | ((lo <= -_B3_PEAK) & (hi >= -_B3_PEAK))
    return np.where(peak, LOGISTIC_B3_MAX, np.maximum(_abs_b3(lo), _abs_b3(hi)))


def logistic_stratum_range_bounds(theta, theta_new, theta_star, strata, order=2):
    """Per-stratum bounds ``C_s >= max_{k in s} |t_k|`` for the logistic GLM's
    terms: ``t_k = l_k(theta') - l_k(theta)`` (``order=None``) or the differences
    of its second-order Taylor residuals around ``theta_star`` (``order=2``).

    With ``a_k, b_k, h_k = x_k . (theta - theta*), x_k . (theta' - theta*),
    x_k . (theta' - theta)`` in the stratum's intervals ``A, B, H``:

    * ``order=None``: ``|l'| <= 1``, so ``|t_k| <= |h_k| <= max |H|``;
    * ``order=2``: ``|t_k| <= max|b'''| / 6 |b_k^3 - a_k^3|`` (see
      :func:`~bayes_subsample.models.logistic_residual_range_bound`), bounded by the
      smallest of ``max|H| max_{A x B} (a^2 + a b + b^2)`` (a convex function: its
      maximum is at a corner), ``max(|B_hi^3 - A_lo^3|, |B_lo^3 - A_hi^3|)``
      (``b^3 - a^3`` rises with ``b`` and falls with ``a``) and ``max|H| (3 max|M|^2 +
      max|H|^2 / 4)``, since ``b^3 - a^3 = h (3 m^2 + h^2 / 4)`` with ``m_k = (a_k + b_k)
      / 2 = x_k . ((theta + theta') / 2 - theta*)`` in the stratum's interval ``M``.

    With the strata's ``eta_star_range`` (taken at ``theta_star``) ``max|b'''|`` is
    over the linear predictors ``eta*_k + delta`` the residual's remainder visits,
    ``delta`` between 0 and ``A, B`` (:func:`logistic_b3_sup`), instead of the
    global ``1 / (6 sqrt 3)``.

    Returns a float64 array of shape (n_strata,).
    """
    theta = np.asarray(theta, dtype=np.float64)
    theta_new = np.asarray(theta_new, dtype=np.float64)
    h = theta_new - theta
    if order is None:
        dot, half = _intervals(strata, h[:, None])
        return np.abs(dot[:, 0]) + half[:, 0]
    if order != 2:
        raise NotImplementedError(
            f"a range bound for order-{order} residual differences is derived for order 2 only")
    theta_star = np.asarray(theta_star, dtype=np.float64)
    dot, half = _intervals(strata, np.column_stack([h, theta - theta_star, theta_new - theta_star,
                                                    0.5 * (theta + theta_new) - theta_star]))
    H = np.abs(dot[:, 0]) + half[:, 0]
    M = np.abs(dot[:, 3]) + half[:, 3]
    a_lo, a_hi = dot[:, 1] - half[:, 1], dot[:, 1] + half[:, 1]
    b_lo, b_hi = dot[:, 2] - half[:, 2], dot[:, 2] + half[:, 2]
    with np.errstate(over="ignore", invalid="ignore"):
        quad = np.maximum.reduce([a * a + a * b + b * b for a in (a_lo, a_hi)
                                  for b in (b_lo, b_hi)])
        cubes = np.maximum(np.abs(b_hi ** 3 - a_lo ** 3), np.abs(b_lo ** 3 - a_hi ** 3))
        b3 = LOGISTIC_B3_MAX
        if strata.eta_star_range is not None:
            lo = strata.eta_star_range[:, 0] + np.minimum(0.0, np.minimum(a_lo, b_lo))
            hi = strata.eta_star_range[:, 1] + np.maximum(0.0, np.maximum(a_hi, b_hi))
            b3 = logistic_b3_sup(lo, hi)
        C = np.minimum.reduce([H * quad, cubes, H * (3.0 * M * M + 0.25 * H * H)]) * b3 / 6.0
    C[np.isnan(C)] = np.inf
    C[H == 0.0] = 0.0               # no move, no difference
    return C
