"""MCMC diagnostics: autocorrelation, inefficiency factors, ESS, R-hat, MCSE and cost.

Two families of tools live here (see :ref:`algo-diagnostics`):

* **Single chain**: :func:`autocorrelation`, :func:`integrated_autocorr_time`
  (the inefficiency factor IF, by Geyer's initial monotone sequence or by a
  CODA-style AR(p) spectral estimate) and :func:`ess_single` ``= R / IF``.
* **Several chains** (Vehtari, Gelman, Simpson, Carpenter and Buerkner, 2021):
  :func:`rhat`, :func:`ess_bulk`, :func:`ess_tail`, :func:`ess_mean`,
  :func:`ess_quantile`, :func:`mcse_mean`, :func:`mcse_quantile` and the table
  :func:`summary`.  These follow the conventions of ArviZ's ``az.ess``,
  ``az.rhat(method="rank")`` and ``az.mcse`` and agree with them to rounding
  error on the same draws.

The cost helpers :func:`computing_time`, :func:`relative_computing_time` and
:func:`rct_summary` turn inefficiency factors and density-evaluation counts into
the computing time CT and relative computing time RCT used to compare samplers.

Conventions
-----------
Multi-chain functions take ``draws`` of shape ``(n_chains, n_draws)`` (one
scalar quantity; a 1-D array is read as a single chain) or
``(n_chains, n_draws, *param_shape)``; they return a Python ``float`` in the
first case and an array of shape ``param_shape`` in the second.

Edge cases (chosen to match ArviZ where ArviZ defines a value):

* Non-finite draws (NaN or inf) raise ``ValueError``.
* Fewer than 4 draws per chain raise ``ValueError``.
* :func:`rhat` with a single chain returns ``nan`` (as ArviZ).
* A constant quantity (max - min below ``np.finfo(float).resolution``) has
  ESS equal to the total number of split draws, R-hat ``nan`` and MCSE 0, as
  ArviZ.  The single-chain :func:`integrated_autocorr_time` and
  :func:`ess_single` return ``nan`` for a constant chain instead: the
  autocorrelation is 0/0, and a constant chain from a sampler is usually a
  stuck chain, for which "independent draws" would be the wrong message.
"""

from collections import namedtuple

import numpy as np
from scipy import fft as sp_fft
from scipy import special, stats

__all__ = [
    "RCTSummary",
    "Summary",
    "autocorrelation",
    "computing_time",
    "ess_bulk",
    "ess_mean",
    "ess_quantile",
    "ess_single",
    "ess_tail",
    "integrated_autocorr_time",
    "mcse_mean",
    "mcse_quantile",
    "rct_summary",
    "relative_computing_time",
    "rhat",
    "summary",
]

_MIN_DRAWS = 4
_CONST_TOL = np.finfo(float).resolution


# --------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------
def _as_finite(x, name):
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric array; got {type(x).__name__}") from exc
    if arr.size and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _as_finite_or_inf(x, name):
    """Like _as_finite but allows +inf (an infinite IF is a legitimate verdict)."""
    arr = np.asarray(x, dtype=np.float64)
    if np.any(np.isnan(arr)) or np.any(arr == -np.inf):
        raise ValueError(f"{name} contains NaN or -inf values")
    return arr


def _check_chain(x, axis):
    """Validate a single chain; return it with draws moved to axis 0."""
    arr = _as_finite(x, "x")
    if arr.ndim == 0:
        raise ValueError("x must be at least 1-D (a chain of draws), got a scalar")
    arr = np.moveaxis(arr, axis, 0)
    if arr.shape[0] < _MIN_DRAWS:
        raise ValueError(f"x must have at least {_MIN_DRAWS} draws, got {arr.shape[0]}")
    return arr


def _check_draws(draws):
    """Validate multi-chain draws.

    Returns
    -------
    arr : ndarray of shape (n_chains, n_draws, n_quantities)
    shape : tuple or None
        Trailing parameter shape, or None for a scalar quantity.
    """
    arr = _as_finite(draws, "draws")
    if arr.ndim == 0:
        raise ValueError("draws must have shape (n_chains, n_draws[, ...]), got a scalar")
    if arr.ndim == 1:
        arr = arr[np.newaxis, :]
    n_chains, n_draws = arr.shape[:2]
    if n_chains < 1:
        raise ValueError("draws must contain at least one chain")
    if n_draws < _MIN_DRAWS:
        raise ValueError(
            f"draws must have at least {_MIN_DRAWS} draws per chain, got {n_draws} "
            f"(draws.shape={arr.shape}; expected (n_chains, n_draws[, ...]))"
        )
    shape = None if arr.ndim == 2 else arr.shape[2:]
    arr = arr.reshape(n_chains, n_draws, -1)
    if arr.shape[2] == 0:
        raise ValueError(f"draws has an empty parameter axis (shape {arr.shape})")
    return arr, shape


#: values (n_chains x n_draws x columns) per block of the column-wise diagnostics
_BLOCK_VALUES = 1 << 18


def _by_columns(core, a, *args):
    """``core(a, *args)`` of a column-wise diagnostic, on blocks of ``a``'s columns
    (parameters) concatenated: the result is the same, and its temporaries
    (ranks, zero-padded FFTs: several draws-sized copies) are those of one
    block of about 262,000 values, not of the whole trace (a 10,000-parameter
    trace of 1,000 draws is 80 MB a copy)."""
    m, n, k = a.shape
    step = max(1, _BLOCK_VALUES // (m * n))
    if k <= step:
        return core(a, *args)
    return np.concatenate([np.atleast_1d(core(a[:, :, s:s + step], *args))
                           for s in range(0, k, step)])


def _finish(values, shape):
    values = np.asarray(values, dtype=np.float64)
    if shape is None:
        return float(values[0])
    return values.reshape(shape)


# --------------------------------------------------------------------------
# building blocks (all on arrays of shape (n_chains, n_draws, k))
# --------------------------------------------------------------------------
def _autocov(a, axis):
    """Autocovariance at every lag with divisor n, by zero-padded FFT."""
    n = a.shape[axis]
    m = sp_fft.next_fast_len(2 * n, real=True)
    a = a - a.mean(axis=axis, keepdims=True)
    f = sp_fft.rfft(a, n=m, axis=axis)
    acov = sp_fft.irfft(f * np.conjugate(f), n=m, axis=axis)
    acov = np.take(acov, np.arange(n), axis=axis)
    return acov / n


def _split_chains(a):
    """(m, n, k) -> (2m, n // 2, k): first and last halves (middle draw dropped if n odd)."""
    half = a.shape[1] // 2
    return np.concatenate((a[:, :half], a[:, a.shape[1] - half :]), axis=0)


def _z_scale(a):
    """Pooled rank-normalisation z = Phi^{-1}((r - 3/8) / (S + 1/4)), average ranks for ties."""
    m, n, k = a.shape
    size = m * n
    ranks = stats.rankdata(a.reshape(size, k), method="average", axis=0)
    return special.ndtri((ranks - 0.375) / (size + 0.25)).reshape(m, n, k)


def _quantile_type7(a, prob):
    """R type-7 quantile of all draws of each column, computed as scipy's ``mquantiles``."""
    flat = np.sort(a.reshape(-1, a.shape[2]), axis=0)
    size = flat.shape[0]
    aleph = size * prob + (1.0 - prob)
    k = int(np.clip(np.floor(aleph), 1, size - 1))
    gamma = float(np.clip(aleph - k, 0.0, 1.0))
    return (1.0 - gamma) * flat[k - 1] + gamma * flat[k]


def _ess_core(a):
    """Multi-chain ESS of each column of ``a`` (m, n, k), no splitting.

    Multi-chain autocorrelation rho_t = 1 - (W - mean_m acov_{t,m}) / var_plus, then
    Geyer's initial positive and monotone sequences with the conventions of ArviZ:
    the last even-lag term is added once, and tau is floored at 1 / log10(S) so that
    ESS <= S log10(S).
    """
    m, n, k = a.shape
    size = m * n
    span = a.max(axis=(0, 1)) - a.min(axis=(0, 1))
    const = span < _CONST_TOL

    acov = _autocov(a, axis=1)  # (m, n, k)
    mean_var = acov[:, 0, :].mean(axis=0) * n / (n - 1.0)  # W
    var_plus = mean_var * (n - 1.0) / n
    if m > 1:
        var_plus = var_plus + np.var(a.mean(axis=1), axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var - acov.mean(axis=0)) / var_plus  # (n, k)
    rho[0] = 1.0

    # pairs P_j = rho_{2j} + rho_{2j+1}, j = 0..j_max (ArviZ's loop bound t < n - 3)
    j_max = max((n - 3) // 2, 0)
    pairs = rho[0 : 2 * j_max + 1 : 2] + rho[1 : 2 * j_max + 2 : 2]  # (j_max + 1, k)
    nonpos = pairs <= 0.0
    has_nonpos = nonpos.any(axis=0)
    j_last = np.where(has_nonpos, np.argmax(nonpos, axis=0), j_max)  # (k,)
    cols = np.arange(k)

    monotone = np.minimum.accumulate(pairs, axis=0)
    used = np.arange(j_max + 1)[:, None] < j_last[None, :]
    total = np.where(used, monotone, 0.0).sum(axis=0)

    last_even = rho[2 * j_last, cols]
    last_pair = pairs[j_last, cols]
    final = np.where((last_even > 0.0) | (last_pair >= 0.0), last_even, 0.0)

    tau = -1.0 + 2.0 * total + final
    tau = np.maximum(tau, 1.0 / np.log10(size))
    ess = size / tau
    ess = np.where(np.isnan(rho).any(axis=0), np.nan, ess)
    return np.where(const, float(size), ess)


def _rhat_core(a):
    """Classic (non-split) R-hat of each column of ``a`` (m, n, k); nan if W == 0."""
    n = a.shape[1]
    between = n * np.var(a.mean(axis=1), axis=0, ddof=1)
    within = np.var(a, axis=1, ddof=1).mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1.0) / n)


def _ess_quantile_core(a, prob):
    q = _quantile_type7(a, prob)
    return _ess_core(_split_chains((a <= q).astype(np.float64)))


def _ess_mean_core(a):
    return _ess_core(_split_chains(a))


def _check_prob(prob):
    prob = float(prob)
    if not 0.0 < prob < 1.0:
        raise ValueError(f"prob must lie strictly between 0 and 1, got {prob}")
    return prob


# --------------------------------------------------------------------------
# single chain
# --------------------------------------------------------------------------
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


# --------------------------------------------------------------------------
# several chains
# --------------------------------------------------------------------------
def rhat(draws):
    """Rank-normalised split R-hat (Vehtari et al. 2021): max of bulk and tail R-hat.

    Each chain is split in half.  The bulk R-hat is the classic R-hat
    ``sqrt(var_plus / W)`` with ``var_plus = (N-1)/N W + B/N`` on the pooled
    rank-normalised draws; the tail R-hat is the same on the rank-normalised
    folded draws ``|theta - median(theta)|``.  Values above 1.01 flag
    non-convergence.  Matches ``arviz.rhat(draws, method="rank")``.

    Parameters
    ----------
    draws : array_like of shape (n_chains, n_draws) or (n_chains, n_draws, ...)
        At least 4 draws per chain.

    Returns
    -------
    r_hat : float or ndarray
        ``nan`` with a single chain or for a constant quantity (as ArviZ).

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample.diagnostics import rhat
    >>> draws = np.random.default_rng(0).normal(size=(4, 1000))
    >>> bool(rhat(draws) < 1.01)
    True
    """
    a, shape = _check_draws(draws)
    if a.shape[0] < 2:
        return _finish(np.full(a.shape[2], np.nan), shape)
    return _finish(_by_columns(_rank_rhat_core, a), shape)


def _rank_rhat_core(a):
    split = _split_chains(a)
    bulk = _rhat_core(_z_scale(split))
    folded = np.abs(split - np.median(split.reshape(-1, split.shape[2]), axis=0))
    tail = _rhat_core(_z_scale(folded))
    return np.where(np.isnan(tail), bulk, np.maximum(bulk, tail))


def ess_bulk(draws):
    """Bulk effective sample size: multi-chain ESS of the rank-normalised split chains.

    Matches ``arviz.ess(draws, method="bulk")``.

    Parameters
    ----------
    draws : array_like of shape (n_chains, n_draws) or (n_chains, n_draws, ...)

    Returns
    -------
    ess : float or ndarray
    """
    a, shape = _check_draws(draws)
    return _finish(_by_columns(_ess_bulk_core, a), shape)


def _ess_bulk_core(a):
    return _ess_core(_z_scale(_split_chains(a)))


def ess_quantile(draws, prob):
    """ESS of the indicator ``I(theta <= q_prob)`` (split chains).

    The quantile is R's type-7 quantile of all draws.  Matches
    ``arviz.ess(draws, method="quantile", prob=prob)``.

    Parameters
    ----------
    draws : array_like of shape (n_chains, n_draws) or (n_chains, n_draws, ...)
    prob : float in (0, 1)

    Returns
    -------
    ess : float or ndarray
    """
    prob = _check_prob(prob)
    a, shape = _check_draws(draws)
    return _finish(_by_columns(_ess_quantile_core, a, prob), shape)


def ess_tail(draws, prob=0.05):
    """Tail effective sample size: min ESS of ``I(theta <= q_p)`` and ``I(theta <= q_{1-p})``.

    Matches ``arviz.ess(draws, method="tail")`` (default ``prob=0.05``, i.e. the 5 %
    and 95 % quantiles).

    Parameters
    ----------
    draws : array_like of shape (n_chains, n_draws) or (n_chains, n_draws, ...)
    prob : float in (0, 1), default=0.05

    Returns
    -------
    ess : float or ndarray
    """
    prob = _check_prob(prob)
    a, shape = _check_draws(draws)
    low = _by_columns(_ess_quantile_core, a, prob)
    high = _by_columns(_ess_quantile_core, a, 1.0 - prob)
    return _finish(np.minimum(low, high), shape)


def ess_mean(draws):
    """Effective sample size for the mean: multi-chain ESS of the split chains (no ranks).

    Matches ``arviz.ess(draws, method="mean")``.

    Parameters
    ----------
    draws : array_like of shape (n_chains, n_draws) or (n_chains, n_draws, ...)

    Returns
    -------
    ess : float or ndarray
    """
    a, shape = _check_draws(draws)
    return _finish(_by_columns(_ess_mean_core, a), shape)


def mcse_mean(draws):
    """Monte Carlo standard error of the posterior mean, ``sd / sqrt(ess_mean)``.

    ``sd`` is the standard deviation of all draws (``ddof=1``).  Matches
    ``arviz.mcse(draws, method="mean")``.

    Parameters
    ----------
    draws : array_like of shape (n_chains, n_draws) or (n_chains, n_draws, ...)

    Returns
    -------
    mcse : float or ndarray
    """
    a, shape = _check_draws(draws)
    return _finish(_by_columns(_mcse_mean_core, a), shape)


def _mcse_mean_core(a):
    return np.std(a.reshape(-1, a.shape[2]), axis=0, ddof=1) / np.sqrt(_ess_mean_core(a))


def mcse_quantile(draws, prob):
    """Monte Carlo standard error of the ``prob`` quantile.

    Half the width of the central ~68 % interval for the quantile's rank, from the
    Beta posterior of the indicator's mean with the quantile ESS.  Matches
    ``arviz.mcse(draws, method="quantile", prob=prob)``.

    Parameters
    ----------
    draws : array_like of shape (n_chains, n_draws) or (n_chains, n_draws, ...)
    prob : float in (0, 1)

    Returns
    -------
    mcse : float or ndarray
    """
    prob = _check_prob(prob)
    a, shape = _check_draws(draws)
    ess = _by_columns(_ess_quantile_core, a, prob)
    flat = np.sort(a.reshape(-1, a.shape[2]), axis=0)
    size = flat.shape[0]
    out = np.empty(a.shape[2])
    for j in range(a.shape[2]):
        with np.errstate(invalid="ignore"):
            ppf = stats.beta.ppf(
                [0.1586553, 0.8413447], ess[j] * prob + 1.0, ess[j] * (1.0 - prob) + 1.0
            )
        pos = ppf * size - 1.0
        lo = int(np.floor(np.nanmax((pos[0], 0.0))))
        hi = int(np.ceil(np.nanmin((pos[1], size - 1.0))))
        out[j] = (flat[hi, j] - flat[lo, j]) / 2.0
    return _finish(out, shape)


# --------------------------------------------------------------------------
# summary table
# --------------------------------------------------------------------------
class Summary:
    """Per-parameter posterior summary, returned by :func:`summary`.

    Attributes
    ----------
    names : list of str
        Row labels.
    columns : tuple of str
        Column labels, in display order.
    """

    columns = ("mean", "sd", "q5", "q95", "mcse_mean", "ess_bulk", "ess_tail", "r_hat")

    def __init__(self, names, values, notes=()):
        self.names = list(names)
        self._values = {c: np.asarray(values[c], dtype=np.float64) for c in self.columns}
        #: lines printed under the table (e.g. what the sampler chose and why)
        self.notes = [str(x) for x in notes]

    def __getitem__(self, column):
        if column not in self._values:
            raise KeyError(f"unknown column {column!r}; columns are {self.columns}")
        return self._values[column].copy()

    def __len__(self):
        return len(self.names)

    def to_dict(self):
        """Return ``{column: ndarray of shape (n_params,)}`` plus ``"name": list``."""
        out = {"name": list(self.names)}
        out.update({c: v.copy() for c, v in self._values.items()})
        return out

    def to_pandas(self):
        """Return a :class:`pandas.DataFrame` indexed by parameter name (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - depends on environment
            raise ImportError("Summary.to_pandas requires pandas") from exc
        return pd.DataFrame(
            {c: self._values[c] for c in self.columns}, index=pd.Index(self.names, name="name")
        )

    def _format(self):
        fmt = {"ess_bulk": "{:.0f}", "ess_tail": "{:.0f}", "r_hat": "{:.3f}"}
        rows = [["name", *self.columns]]
        for i, name in enumerate(self.names):
            row = [name]
            for c in self.columns:
                row.append(fmt.get(c, "{:.4g}").format(self._values[c][i]))
            rows.append(row)
        widths = [max(len(r[j]) for r in rows) for j in range(len(rows[0]))]
        lines = []
        for r in rows:
            cells = [r[0].ljust(widths[0])] + [s.rjust(w) for s, w in zip(r[1:], widths[1:])]
            lines.append("  ".join(cells))
        return "\n".join(lines + self.notes)

    def __str__(self):
        return self._format()

    def __repr__(self):
        return f"Summary({len(self)} parameters)\n{self._format()}"


def summary(draws, names=None, notes=()):
    """Posterior summary table per parameter.

    Parameters
    ----------
    draws : array_like of shape (n_chains, n_draws, n_params)
        A 2-D array is read as one parameter, ``(n_chains, n_draws)``.  Extra trailing
        axes are flattened in C order.
    names : sequence of str, optional
        Parameter names; default ``"x[0]", "x[1]", ...``.
    notes : sequence of str, optional
        Lines printed under the table.

    Returns
    -------
    Summary
        Columns ``mean``, ``sd`` (``ddof=1``), ``q5``, ``q95`` (type-7 quantiles of
        all draws), ``mcse_mean``, ``ess_bulk``, ``ess_tail`` and ``r_hat``.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample.diagnostics import summary
    >>> s = summary(np.random.default_rng(0).normal(size=(4, 500, 2)), names=["a", "b"])
    >>> s["ess_bulk"].shape
    (2,)
    """
    a, shape = _check_draws(draws)
    k = a.shape[2]
    if names is None:
        names = ["x"] if shape is None else [f"x[{j}]" for j in range(k)]
    else:
        names = [str(n) for n in names]
        if len(names) != k:
            raise ValueError(f"names has {len(names)} entries but draws has {k} parameters")
    moments = _by_columns(_moments_core, a)
    values = {
        "mean": moments[:, 0],
        "sd": moments[:, 1],
        "q5": moments[:, 2],
        "q95": moments[:, 3],
        "mcse_mean": np.atleast_1d(mcse_mean(a)),
        "ess_bulk": np.atleast_1d(ess_bulk(a)),
        "ess_tail": np.atleast_1d(ess_tail(a)),
        "r_hat": np.atleast_1d(rhat(a)),
    }
    return Summary(names, values, notes)


def _moments_core(a):
    """(k, 4): mean, sd (ddof=1), 5% and 95% quantiles of every column's draws."""
    flat = a.reshape(-1, a.shape[2])
    return np.stack([flat.mean(axis=0), flat.std(axis=0, ddof=1),
                     np.quantile(flat, 0.05, axis=0), np.quantile(flat, 0.95, axis=0)], axis=1)


# --------------------------------------------------------------------------
# cost
# --------------------------------------------------------------------------
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
