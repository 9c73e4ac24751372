"""Single-chain diagnostics: autocorrelation, the inefficiency factor, ESS."""
import numpy as np

from ._core import _autocov, _check_chain

__all__ = ["autocorrelation", "integrated_autocorr_time", "ess_single"]


def autocorrelation(x, axis=0):
    """Autocorrelation of a chain at every lag, by FFT.

    Uses the usual biased estimator with divisor ``R`` (the chain length),
    ``rho_t = sum_{i<R-t} (x_i - xbar)(x_{i+t} - xbar) / sum_i (x_i - xbar)^2``,
    which gives a positive semi-definite sequence.

    Parameters
    ----------
    x : array_like
        Draws of one chain; draws along ``axis``.
    axis : int, default=0
        Axis holding the draws (other axes are separate quantities).

    Returns
    -------
    rho : ndarray
        Same shape as ``x``; ``rho[0] == 1``.  A constant chain gives ``nan``.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample.diagnostics import autocorrelation
    >>> rho = autocorrelation(np.random.default_rng(0).normal(size=1000))
    >>> float(rho[0])
    1.0
    """
    arr = _check_chain(x, axis)
    acov = _autocov(arr, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = acov / acov[:1]
    return np.moveaxis(rho, 0, axis)


def _if_geyer(arr):
    """Geyer initial monotone sequence on a (R, k) array."""
    n = arr.shape[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        acov = _autocov(arr, axis=0)
        rho = acov / acov[:1]
    n_pairs = n // 2
    pairs = rho[0 : 2 * n_pairs : 2] + rho[1 : 2 * n_pairs : 2]
    nonpos = ~(pairs > 0.0)  # also stops at nan
    j_stop = np.where(nonpos.any(axis=0), np.argmax(nonpos, axis=0), n_pairs)
    monotone = np.minimum.accumulate(pairs, axis=0)
    used = np.arange(n_pairs)[:, None] < j_stop[None, :]
    if_ = -1.0 + 2.0 * np.where(used, monotone, 0.0).sum(axis=0)
    if_ = np.maximum(if_, 1.0 / np.log10(n))
    return np.where(acov[0] > 0.0, if_, np.nan)


def _levinson_durbin(r, order_max):
    """Yule-Walker AR coefficients of every order 0..order_max and innovation variances."""
    coefs = [np.zeros(0)]
    variances = np.empty(order_max + 1)
    v = r[0]
    variances[0] = v
    phi = np.zeros(0)
    for p in range(1, order_max + 1):
        kappa = (r[p] - phi @ r[p - 1 : 0 : -1]) / v if p > 1 else r[1] / v
        phi = np.concatenate((phi - kappa * phi[::-1], [kappa]))
        v = v * (1.0 - kappa * kappa)
        coefs.append(phi)
        variances[p] = v
    return coefs, variances


def _if_ar_1d(x):
    """CODA ``spectrum0.ar`` / ``effectiveSize``: IF = S(0) / var(x)."""
    n = x.size
    var_x = np.var(x, ddof=1)
    if not var_x > 0.0:
        return np.nan
    order_max = int(min(n - 1, np.floor(10.0 * np.log10(n))))
    r = _autocov(x[:, None], axis=0)[: order_max + 1, 0]
    coefs, variances = _levinson_durbin(r, order_max)
    with np.errstate(divide="ignore", invalid="ignore"):
        aic = n * np.log(variances) + 2.0 * np.arange(order_max + 1)
    order = int(np.nanargmin(aic)) if np.isfinite(aic).any() else 0
    var_pred = variances[order] * n / (n - (order + 1.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        spec0 = var_pred / (1.0 - coefs[order].sum()) ** 2
        return spec0 / var_x


def integrated_autocorr_time(x, method="geyer", axis=0):
    """Inefficiency factor IF (integrated autocorrelation time) of one chain.

    Parameters
    ----------
    x : array_like
        Draws of one chain, draws along ``axis`` (at least 4).
    method : {"geyer", "ar"}, default="geyer"
        ``"geyer"``: Geyer's initial monotone sequence on the FFT autocorrelations
        (divisor ``R``): ``P_j = rho_{2j} + rho_{2j+1}``, stop at the first
        ``P_j <= 0``, replace ``P_j`` by ``min(P_j, P_{j-1})`` and return
        ``IF = -1 + 2 sum_j P_j``.  The result is floored at ``1 / log10(R)``
        (ESS at most ``R log10 R``, as ArviZ), which only binds for strongly
        antithetic chains.

        ``"ar"``: the CODA ``effectiveSize`` estimate.  An AR(p) model is fitted by
        Yule-Walker (Levinson-Durbin on the divisor-``R`` autocovariances), the order
        ``p <= min(R - 1, floor(10 log10 R))`` minimising
        ``AIC = R log(sigma_p^2) + 2 p`` is chosen as R's ``ar()``, the innovation
        variance is rescaled by ``R / (R - p - 1)``, and
        ``IF = sigma_e^2 / ((1 - sum_i phi_i)^2 gamma_0)`` with ``gamma_0`` the sample
        variance (``ddof=1``): the spectral density at 0 over the variance.
    axis : int, default=0
        Axis holding the draws; other axes are separate quantities.

    Returns
    -------
    if_ : float or ndarray
        Float for a 1-D chain, else an array of the non-draw shape.  ``nan`` for a
        constant chain.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.signal import lfilter
    >>> from bayes_subsample.diagnostics import integrated_autocorr_time
    >>> e = np.random.default_rng(1).normal(size=50_000)
    >>> x = lfilter([1.0], [1.0, -0.5], e)      # AR(1), true IF = 3
    >>> bool(abs(integrated_autocorr_time(x) - 3) < 0.3)
    True
    """
    if method not in ("geyer", "ar"):
        raise ValueError(f"method must be 'geyer' or 'ar', got {method!r}")
    arr = _check_chain(x, axis)
    rest = arr.shape[1:]
    flat = arr.reshape(arr.shape[0], -1)
    if method == "geyer":
        out = _if_geyer(flat)
    else:
        out = np.array([_if_ar_1d(flat[:, j]) for j in range(flat.shape[1])])
    if not rest:
        return float(out[0])
    return out.reshape(rest)


def ess_single(x, method="geyer", axis=0):
    """Effective sample size ``R / IF`` of one chain.

    Parameters
    ----------
    x : array_like
        Draws of one chain, draws along ``axis``.
    method : {"geyer", "ar"}, default="geyer"
        How IF is estimated, see :func:`integrated_autocorr_time`.
    axis : int, default=0
        Axis holding the draws.

    Returns
    -------
    ess : float or ndarray
        ``nan`` for a constant chain.
    """
    if_ = integrated_autocorr_time(x, method=method, axis=axis)
    n = np.shape(x)[axis]
    out = n / np.asarray(if_)
    return float(out) if np.ndim(out) == 0 else out
