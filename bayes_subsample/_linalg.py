"""Small dense linear algebra of tuning code: one factorisation of a posterior
precision serves the Laplace approximation, every mass matrix (HMC, HMC-ECS,
SGHMC) and every proposal covariance."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import linalg

__all__ = ["inv_lower", "PrecisionFactors", "factor_precision", "factor_diagonal", "solve_chol",
           "scale_draws", "precision_factor"]


def inv_lower(L):
    """Inverse of a lower-triangular matrix by LAPACK ``trtri`` (microseconds
    for the small matrices here, where ``solve_triangular`` against the
    identity costs a fraction of a millisecond)."""
    inv, info = linalg.lapack.dtrtri(np.asarray(L, dtype=np.float64), lower=1)
    if info != 0:
        raise linalg.LinAlgError(f"singular triangular matrix (trtri info={info})")
    return np.tril(inv)


class PrecisionFactors(NamedTuple):
    """A positive-definite precision ``P`` and what samplers need of it: (p, p)
    matrices, or (p,) vectors of their diagonals for a diagonal ``P``
    (:func:`factor_diagonal`; wide models)."""

    #: ``P`` (symmetrised; regularised if it was not positive definite)
    precision: np.ndarray
    #: lower Cholesky factor ``L`` of ``P = L L^T`` (draws momenta ``p ~ N(0, P)``)
    chol: np.ndarray
    #: ``P^-1`` (the covariance, or the inverse mass matrix)
    cov: np.ndarray
    #: lower Cholesky factor of ``P^-1`` (draws ``N(0, P^-1)``)
    chol_cov: np.ndarray


def factor_precision(precision, regulariser=None):
    """Factor a posterior precision (or mass matrix) ``P``.

    Parameters
    ----------
    precision : array-like of shape (p, p)
        Symmetric up to rounding.
    regulariser : array-like of shape (p,), optional
        Added to the diagonal (with ``1e-8``) if ``P`` is not numerically
        positive definite, e.g. the prior precision; without it such a ``P``
        raises ``numpy.linalg.LinAlgError``.

    Returns
    -------
    PrecisionFactors
    """
    P = np.asarray(precision, dtype=np.float64)
    P = 0.5 * (P + P.T)
    try:
        L = linalg.cholesky(P, lower=True)
    except linalg.LinAlgError:
        if regulariser is None:
            raise
        P = P + np.diag(np.asarray(regulariser, dtype=np.float64)) + 1e-8 * np.eye(len(P))
        try:
            L = linalg.cholesky(P, lower=True)
        except linalg.LinAlgError as e:
            d = np.abs(np.diag(P))
            raise linalg.LinAlgError(
                "the posterior precision is numerically singular even with the prior's "
                f"precision added (its diagonal spans {d.min():.3g}..{d.max():.3g}): the "
                "posterior's scales differ by more than float64 resolves. Usual cause: "
                "collinear columns of X (a constant column with fit_intercept=True, one-hot "
                "groups with an intercept) with a noise_scale or prior_scale many orders of "
                "magnitude from the data's scale. Standardise X, drop redundant columns, or "
                "rescale noise_scale / prior_scale.") from e
    inv_L = inv_lower(L)
    cov = inv_L.T @ inv_L
    return PrecisionFactors(P, L, cov, linalg.cholesky(cov, lower=True))


def factor_diagonal(precision, regulariser=None):
    """:func:`factor_precision` of the diagonal precision ``diag(precision)``:
    every factor a (p,) vector (``O(p)`` memory where the dense factors take
    ``p^2``). Entries that are not positive take the ``regulariser`` (e.g. the
    prior precision) added, with ``1e-8``; without it they raise
    ``numpy.linalg.LinAlgError``."""
    P = np.array(precision, dtype=np.float64)
    if P.ndim != 1:
        raise ValueError(f"a diagonal precision is a 1-d array, got shape {P.shape}")
    bad = ~(np.isfinite(P) & (P > 0))
    if bad.any():
        if regulariser is None:
            raise linalg.LinAlgError("the diagonal precision has entries that are not "
                                     "positive and finite")
        P = P + np.asarray(regulariser, dtype=np.float64) + 1e-8
        if not np.all(np.isfinite(P) & (P > 0)):
            raise linalg.LinAlgError("the diagonal precision is not positive even with the "
                                     "prior's precision added")
    return PrecisionFactors(P, np.sqrt(P), 1.0 / P, 1.0 / np.sqrt(P))


def scale_draws(chol, z):
    """``z @ chol.T``: standard normal draws ``z`` (shape (..., p)) mapped by a
    Cholesky factor, dense (p, p) or diagonal (p,)."""
    chol = np.asarray(chol)
    if chol.ndim == 1:
        return z * chol
    return chol @ z if np.ndim(z) == 1 else z @ chol.T


def solve_chol(chol, v, trans=False):
    """``chol^-1 v`` (``chol^-T v`` with ``trans``) for a lower Cholesky factor,
    dense (p, p) or diagonal (p,): the inverse of :func:`scale_draws` on one
    vector."""
    chol = np.asarray(chol)
    if chol.ndim == 1:
        return v / chol
    return linalg.solve_triangular(chol, v, lower=True, trans="T" if trans else "N")


def precision_factor(precision):
    """``L`` with ``L L^T = precision``: the Cholesky factor of a dense
    precision, or the square roots of a diagonal one given as a (p,) vector."""
    P = np.asarray(precision, dtype=np.float64)
    return np.sqrt(P) if P.ndim == 1 else np.linalg.cholesky(P)
