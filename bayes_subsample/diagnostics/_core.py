"""Validation and the column-wise building blocks of the diagnostics (arrays of
shape (n_chains, n_draws, k)): autocovariance, split chains, rank
normalisation, the multi-chain ESS and R-hat cores."""
import numpy as np
from scipy import fft as sp_fft
from scipy import special

MIN_DRAWS = 4
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
    if arr.shape[0] < MIN_DRAWS:
        raise ValueError(f"x must have at least {MIN_DRAWS} draws, got {arr.shape[0]}")
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
    if n_draws < MIN_DRAWS:
        raise ValueError(
            f"draws must have at least {MIN_DRAWS} draws per chain, got {n_draws} "
            f"(draws.shape={arr.shape}; expected (n_chains, n_draws[, ...]))"
        )
    shape = None if arr.ndim == 2 else arr.shape[2:]
    arr = arr.reshape(n_chains, n_draws, -1)
    if arr.shape[2] == 0:
        raise ValueError(f"draws has an empty parameter axis (shape {arr.shape})")
    return arr, shape


#: values (n_chains x n_draws x columns) per block of the column-wise diagnostics
_BLOCK_VALUES = 1 << 18


def _columnwise(core, draws, *args):
    """``core(a, *args)`` of the checked ``draws`` ``a``, by blocks of columns
    (``_by_columns``), shaped as the draws' parameters (a float for 2-d draws)."""
    a, shape = _check_draws(draws)
    return _finish(_by_columns(core, a, *args), shape)


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
    from scipy import stats  # 0.5 s to import: on first use

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
