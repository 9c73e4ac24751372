"""Priors on the data's scale: what ``prior_scale="auto"`` and
``intercept_prior_scale="auto"`` mean, computed from one or two reads of X.

A coefficient's "auto" prior is ``N(0, (2.5 s / spread_j)^2)``: ``s`` is the
standard deviation of ``y`` for linear regression and 1 for the logistic,
multinomial and Poisson models (whose coefficients are already on the log-odds
or log-rate scale), and ``spread_j`` is the standard deviation of column ``j``,
or, for a column taking two values ``a`` and ``b``, ``|b - a|``. So a change of
one standard deviation in a measured column, or from one value to the other of
an indicator, moves the linear predictor by about 2.5 s a priori, whatever the
units of X and y (rstanarm's weakly informative default; the two-valued rule is
Gelman et al., 2008, "A weakly informative default prior distribution for
logistic and other regression models"). It keeps a rare 0/1 indicator's prior
where a change of the indicator is, not 1 / sd (up to 250 on covtype's rarest
soil types), and it does not change when StandardScaler rescales the column.

The "auto" intercept prior is the marginal of the prior rstanarm puts on the
intercept of the centred predictors, ``alpha_c ~ N(m, (2.5 s)^2)`` with ``m``
the mean of ``y`` for linear regression and 0 otherwise: the intercept of the
uncentred predictors is ``alpha = alpha_c - xbar . beta``, whose prior has mean
``m`` and variance ``(2.5 s)^2 + sum_j xbar_j^2 scale_j^2``. On centred X
(StandardScaler) the two are the same prior.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from ..models._base import coefficient_scales
from ..models._dask import is_dask_array
from ..models._linear import data_scale

__all__ = ["AUTO_SCALE", "DataPriors", "column_spreads", "data_priors", "target_stats"]

#: prior standard deviation, in units of ``s``, of the change of the linear
#: predictor for a change of one spread of a column
AUTO_SCALE = 2.5

#: the prior scales a model accepts (its precision 1 / scale^2 a float64 > 0)
_SCALE_RANGE = (1e-150, 1e150)

#: rows per chunk of the column statistics (bounded float64 temporaries)
_CHUNK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class DataPriors:
    """The priors a fit uses: ``coef_scale`` (one per column),
    ``intercept_loc`` and ``intercept_scale`` (the intercept's prior mean and
    standard deviation)."""

    coef_scale: np.ndarray
    intercept_loc: float
    intercept_scale: float


def _dense_stats(X, weights=None):
    """Per column: mean, standard deviation, min, max, and whether the column
    takes at most two values, from two chunked reads of a dense ``X`` (mean
    and sd under frequency weights ``weights``, if given, all > 0)."""
    n, p = X.shape
    step = max(1, _CHUNK_ELEMENTS // max(1, p))
    lo = np.full(p, np.inf)
    hi = np.full(p, -np.inf)
    mean = np.zeros(p)
    m2 = np.zeros(p)
    seen = 0.0
    for s in range(0, n, step):
        c = np.asarray(X[s:s + step], dtype=np.float64)
        if weights is None:
            k = c.shape[0]
            cm = c.mean(axis=0)
            cm2 = ((c - cm) ** 2).sum(axis=0)
        else:
            wc = weights[s:s + step]
            k = float(wc.sum())
            cm = (wc @ c) / k
            cm2 = wc @ ((c - cm) ** 2)
        delta = cm - mean
        total = seen + k
        mean += delta * (k / total)
        m2 += cm2 + delta * delta * (seen * k / total)
        seen = total
        np.minimum(lo, c.min(axis=0), out=lo)
        np.maximum(hi, c.max(axis=0), out=hi)
    two = np.ones(p, dtype=bool)
    for s in range(0, n, step):
        c = np.asarray(X[s:s + step], dtype=np.float64)
        two &= np.all((c == lo) | (c == hi), axis=0)
    return mean, np.sqrt(m2 / max(1.0, seen)), lo, hi, two


def _sparse_stats(X, weights=None):
    """The same for a CSR ``X`` (implicit zeros included), from its stored values."""
    n, p = X.shape
    X = X.tocsr()
    cols = X.indices
    vals = np.asarray(X.data, dtype=np.float64)
    nnz = np.bincount(cols, minlength=p)
    if weights is None:
        wv, total = vals, n
    else:
        wv = vals * np.repeat(weights, np.diff(X.indptr))
        total = float(weights.sum())
    mean = np.bincount(cols, weights=wv, minlength=p) / total
    sq = np.bincount(cols, weights=wv * vals, minlength=p) / total
    sd = np.sqrt(np.maximum(sq - mean * mean, 0.0))
    lo = np.full(p, np.inf)
    hi = np.full(p, -np.inf)
    np.minimum.at(lo, cols, vals)
    np.maximum.at(hi, cols, vals)
    zeros = nnz < n
    lo[zeros] = np.minimum(lo[zeros], 0.0)
    hi[zeros] = np.maximum(hi[zeros], 0.0)
    lo[nnz == 0] = hi[nnz == 0] = 0.0
    bad = ~((vals == lo[cols]) | (vals == hi[cols]))
    two = np.bincount(cols[bad], minlength=p) == 0
    two &= ~zeros | (lo == 0.0) | (hi == 0.0)
    return mean, sd, lo, hi, two


def _dask_stats(X):
    import dask.array as da
    Xf = X.astype(np.float64)
    mean, sd, lo, hi = da.compute(Xf.mean(axis=0), Xf.std(axis=0), Xf.min(axis=0),
                                  Xf.max(axis=0))
    two = da.all((Xf == lo) | (Xf == hi), axis=0).compute()
    return (np.asarray(mean), np.asarray(sd), np.asarray(lo), np.asarray(hi),
            np.asarray(two, dtype=bool))


def column_stats(X, weights=None):
    """``(mean, spread)`` of each column of ``X`` (dense, memory-mapped, CSR or
    Dask): ``spread`` is the standard deviation, ``|b - a|`` for a column of two
    values ``a`` and ``b``, and 1 for a constant column (which the intercept
    already spans; its coefficient is left to a prior of scale ``2.5 s``).
    With ``weights`` (> 0, one per row; in-memory X) the mean and standard
    deviation are those of the rows repeated by their weights."""
    if is_dask_array(X):
        if weights is not None:
            raise ValueError("weighted column statistics need X in memory")
        mean, sd, lo, hi, two = _dask_stats(X)
    elif sparse.issparse(X):
        mean, sd, lo, hi, two = _sparse_stats(X, weights)
    else:
        mean, sd, lo, hi, two = _dense_stats(X, weights)
    spread = np.where(two, hi - lo, sd)
    spread[~(spread > 0) | ~np.isfinite(spread)] = 1.0
    return mean, spread


def column_spreads(X):
    """The spread of each column (see :func:`column_stats`)."""
    return column_stats(X)[1]


def data_priors(X, *, prior_scale, intercept_prior_scale, fit_intercept, y_scale=1.0,
                y_mean=0.0, weights=None):
    """The priors of a fit (:class:`DataPriors`), resolving ``"auto"``.

    Parameters
    ----------
    X : {array-like, sparse matrix, dask array} of shape (n, p)
    prior_scale : float, array-like of shape (p,) or "auto"
    intercept_prior_scale : float or "auto"
    fit_intercept : bool
    y_scale : float
        ``s``: the standard deviation of ``y`` for linear regression, 1 for
        the other models.
    y_mean : float
        The prior mean of the intercept under ``intercept_prior_scale="auto"``
        (the mean of ``y`` for linear regression, 0 otherwise).
    weights : array-like of shape (n,), optional
        Row weights (``sample_weight``, all > 0): the column statistics are
        those of the rows repeated by their weights.
    """
    auto_coef = isinstance(prior_scale, str)
    if not auto_coef:
        prior_scale = coefficient_scales(prior_scale, X.shape[1])
    auto_icpt = fit_intercept and isinstance(intercept_prior_scale, str)
    # without an intercept its prior is unused (the models take a float)
    icpt = 1.0 if not fit_intercept or auto_icpt else float(intercept_prior_scale)
    if not (auto_coef or auto_icpt):
        return DataPriors(prior_scale, 0.0, icpt)
    mean, spread = column_stats(X, weights)
    with np.errstate(over="ignore"):
        coef = _representable(AUTO_SCALE * y_scale / spread) if auto_coef else prior_scale
    if not auto_icpt:
        return DataPriors(coef, 0.0, icpt)
    scales = np.broadcast_to(np.asarray(coef, dtype=np.float64), mean.shape)
    with np.errstate(over="ignore"):
        loc = _norm(np.append(mean * scales, AUTO_SCALE * y_scale))
    return DataPriors(coef, float(y_mean), float(_representable(loc)))


def _representable(scale):
    """Prior scales kept within [1e-150, 1e150], where the prior precision is a
    float64 (data whose scales fall outside meet the models' own overflow
    checks, which name the data)."""
    return np.clip(scale, _SCALE_RANGE[0], _SCALE_RANGE[1])


def _norm(v):
    """The Euclidean norm of ``v`` without overflow for entries up to 1e308."""
    big = float(np.max(np.abs(v)))
    if not (big > 0 and np.isfinite(big)):
        return big if big > 0 else 1.0
    return big * float(np.sqrt(np.sum((v / big) ** 2)))


def target_stats(y, weights=None):
    """``(mean, scale)`` of the targets ``y`` (under frequency weights
    ``weights``, if given): the level and scale ``s`` of linear regression's
    "auto" priors (the scale is :func:`~bayes_subsample.models._linear.data_scale`)."""
    y = np.asarray(y, dtype=np.float64)
    if not y.size:
        return 0.0, 1.0
    mean = float(np.mean(y)) if weights is None else float(weights @ y / np.sum(weights))
    return mean, data_scale(y, weights)
