"""Cost: the computing time CT and the relative computing time RCT."""
from collections import namedtuple

import numpy as np

from ._core import _as_finite, _as_finite_or_inf

__all__ = ["RCTSummary", "computing_time", "relative_computing_time", "rct_summary"]

RCTSummary = namedtuple("RCTSummary", ["min", "median", "max"])


def computing_time(if_, n_evals_per_iter, tau=None):
    """Computing time CT = IF x (density evaluations per retained iteration).

    For signed (pseudo-marginal with sign) samplers the variance inflation from the
    signs is included: ``CT = IF x evals / (2 tau - 1)^2`` with ``tau`` the fraction
    of positive signs.

    Parameters
    ----------
    if_ : float or array_like
        Inefficiency factor(s), e.g. one per parameter; positive.
    n_evals_per_iter : float or array_like
        Mean number of per-datum density (+gradient) evaluations per retained
        iteration; positive.
    tau : float or array_like, optional
        Fraction of positive signs, in ``[0, 1]``.  ``tau = 0.5`` gives ``inf``.

    Returns
    -------
    ct : float or ndarray
        Broadcast shape of the inputs.

    Examples
    --------
    >>> from bayes_subsample.diagnostics import computing_time
    >>> computing_time(2.0, 100.0)
    200.0
    >>> computing_time(2.0, 100.0, tau=0.75)
    800.0
    """
    if_ = _as_finite_or_inf(if_, "if_")
    evals = _as_finite(n_evals_per_iter, "n_evals_per_iter")
    if np.any(if_ <= 0):
        raise ValueError("if_ (inefficiency factor) must be positive")
    if np.any(evals <= 0):
        raise ValueError("n_evals_per_iter must be positive")
    ct = if_ * evals
    if tau is not None:
        tau = _as_finite(tau, "tau")
        if np.any((tau < 0) | (tau > 1)):
            raise ValueError("tau (fraction of positive signs) must lie in [0, 1]")
        with np.errstate(divide="ignore"):
            ct = ct / (2.0 * tau - 1.0) ** 2
    return float(ct) if np.ndim(ct) == 0 else ct


def relative_computing_time(ct_reference, ct_other):
    """Relative computing time RCT = CT_other / CT_reference, per parameter.

    RCT > 1 means ``other`` is that many times more expensive than the reference
    for the same Monte Carlo accuracy.

    Parameters
    ----------
    ct_reference, ct_other : float or array_like
        Computing times (see :func:`computing_time`); broadcastable; positive.

    Returns
    -------
    rct : float or ndarray

    Examples
    --------
    >>> from bayes_subsample.diagnostics import relative_computing_time
    >>> relative_computing_time([10.0, 20.0], [5.0, 60.0])
    array([0.5, 3. ])
    """
    ref = _as_finite_or_inf(ct_reference, "ct_reference")
    other = _as_finite_or_inf(ct_other, "ct_other")
    if np.any(ref <= 0) or np.any(other <= 0):
        raise ValueError("computing times must be positive")
    with np.errstate(invalid="ignore"):
        rct = other / ref
    return float(rct) if np.ndim(rct) == 0 else rct


def rct_summary(rct):
    """Min, median and max of relative computing times over parameters.

    Parameters
    ----------
    rct : array_like
        RCT per parameter (non-empty, no NaN).

    Returns
    -------
    RCTSummary
        Named tuple ``(min, median, max)`` of floats.
    """
    arr = _as_finite_or_inf(rct, "rct").ravel()
    if arr.size == 0:
        raise ValueError("rct must not be empty")
    return RCTSummary(float(arr.min()), float(np.median(arr)), float(arr.max()))
