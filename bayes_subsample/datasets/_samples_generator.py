"""Synthetic data: :func:`make_logistic_data` (and :func:`make_logistic_data_dask`,
the same rows as Dask arrays) and :func:`make_gaussian_regression`."""

import functools

import numpy as np

from .._seeding import seed_sequence
from ._base import _check_dtype

_SEED_BLOCK_ROWS = 1 << 16  # rows per independently seeded block (fixed: part of the output)
_LOGISTIC_RHO = 0.5  # AR(1) correlation between neighbouring features
_LOGISTIC_DF = 6.0  # degrees of freedom of the multivariate-t features
_LOGISTIC_SIGNAL_SD = 1.3  # sd of x @ coef for the default coef
_LOGISTIC_POSITIVE_RATE = 0.53


def _block_generators(root, k, n_streams):
    """Generators of seeding block k: SeedSequence child k of root, then its n children."""
    child = np.random.SeedSequence(
        root.entropy, spawn_key=tuple(root.spawn_key) + (k,), pool_size=root.pool_size
    )
    return [np.random.Generator(np.random.PCG64(s)) for s in child.spawn(n_streams)]


def _check_n(n, name, minimum=1):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {n!r}")
    return int(n)


def _check_coef(coef, n_features):
    """A float64 copy of the user's ``coef``, which must have shape (n_features,)."""
    coef = np.asarray(coef, dtype=np.float64).copy()
    if coef.shape != (n_features,):
        raise ValueError(f"coef must have shape ({n_features},), got {coef.shape}")
    return coef


def _logistic_default_coef(n_features):
    j = np.arange(n_features)
    base = np.where(j % 2 == 0, 1.0, -0.6) / np.sqrt(1.0 + j / 4.0)
    base[j % 5 == 4] = 0.0  # some irrelevant features, as in real data
    if not base.any():
        base[0] = 1.0
    return base * (_LOGISTIC_SIGNAL_SD / np.sqrt(_ar1_quadratic_form(base)))


def _ar1_quadratic_form(c, rho=_LOGISTIC_RHO):
    d = c.size
    idx = np.arange(d)
    cov = rho ** np.abs(idx[:, None] - idx[None, :])
    return float(c @ cov @ c)


@functools.lru_cache(maxsize=64)
def _balance_intercept(signal_sd, rate=_LOGISTIC_POSITIVE_RATE, df=_LOGISTIC_DF):
    """Intercept b with E[sigmoid(b + signal_sd * T)] = rate, T unit-variance Student t."""
    from scipy import integrate, optimize, special, stats

    if signal_sd == 0:
        return float(special.logit(rate))
    t = stats.t(df, scale=np.sqrt((df - 2.0) / df))

    def excess(b):
        val = integrate.quad(
            lambda s: special.expit(b + signal_sd * s) * t.pdf(s), -np.inf, np.inf
        )[0]
        return val - rate

    return float(optimize.brentq(excess, -20, 20, xtol=1e-12))


def _logistic_coef_intercept(n_features, coef, intercept):
    """The checked true coefficients and intercept (defaults as documented in
    :func:`make_logistic_data`)."""
    d = _check_n(n_features, "n_features")
    if coef is None:
        coef = _logistic_default_coef(d)
    else:
        coef = _check_coef(coef, d)
        if not np.isfinite(coef).all():
            raise ValueError("coef must be finite")
    if intercept is None:
        intercept = _balance_intercept(float(np.sqrt(_ar1_quadratic_form(coef))))
    intercept = float(intercept)
    if not np.isfinite(intercept):
        raise ValueError("intercept must be finite")
    return coef, intercept


def _fill_logistic_rows(X, y, row0, coef, intercept, root, chunk):
    """Fill ``X``, ``y`` with rows ``row0, row0 + 1, ...`` of the data set seeded by
    ``root`` (``row0`` a multiple of the seeding block: each block's streams start
    at its first row)."""
    from scipy.special import expit

    assert row0 % _SEED_BLOCK_ROWS == 0
    n, d = X.shape
    rho, df = _LOGISTIC_RHO, _LOGISTIC_DF
    innov = np.sqrt(1.0 - rho * rho)
    gens, gens_block = None, -1
    start = 0
    while start < n:
        # a segment never crosses a user chunk or a seeding block boundary
        block = (row0 + start) // _SEED_BLOCK_ROWS
        stop = min(n, start + chunk, (block + 1) * _SEED_BLOCK_ROWS - row0)
        if block != gens_block:
            gens, gens_block = _block_generators(root, block, 3), block
        m = stop - start
        z = gens[0].standard_normal((m, d))
        radius = np.sqrt((df - 2.0) / gens[1].chisquare(df, size=m))
        u = gens[2].random(m)
        # AR(1) recursion column by column (element-wise, so bit-identical for any m)
        for j in range(1, d):
            z[:, j] = rho * z[:, j - 1] + innov * z[:, j]
        z *= radius[:, None]
        Xs = X[start:stop]
        Xs[...] = z
        eta = np.full(m, intercept)
        for j in range(d):
            eta += Xs[:, j].astype(np.float64) * coef[j]
        y[start:stop] = u < expit(eta)
        start = stop


def _logistic_block(row0, n_rows, d, coef, intercept, root, dtype):
    X = np.empty((n_rows, d), dtype=dtype)
    y = np.empty(n_rows, dtype=np.float64)
    _fill_logistic_rows(X, y, row0, coef, intercept, root, 65536)
    return X, y


def make_logistic_data_dask(n_samples, n_features=28, *, chunk_rows=8 * 65536, coef=None,
                            intercept=None, dtype=np.float64, random_state=None):
    """:func:`make_logistic_data` as Dask arrays whose chunks are drawn where
    they are computed (on a ``distributed`` cluster's workers: this process
    never holds them).

    The rows are those of ``make_logistic_data(n_samples, n_features,
    random_state=random_state, ...)``, bit for bit.

    Parameters
    ----------
    n_samples, n_features, coef, intercept, dtype, random_state
        As for :func:`make_logistic_data`; ``random_state`` must fix the seed
        (an int or a SeedSequence): every chunk is drawn from it separately.
    chunk_rows : int, default=524288
        Rows per chunk, a multiple of 65,536 (the seeding block).

    Returns
    -------
    X : dask.array.Array of shape (n_samples, n_features), chunked by rows
    y : dask.array.Array of shape (n_samples,), float64 0/1, chunked alike

    Examples
    --------
    >>> from bayes_subsample.datasets import make_logistic_data_dask
    >>> X, y = make_logistic_data_dask(200_000, chunk_rows=65536, random_state=0)
    >>> X.chunks[0]
    (65536, 65536, 65536, 3392)
    """
    import dask
    import dask.array as da

    n = _check_n(n_samples, "n_samples", 1)
    coef, intercept = _logistic_coef_intercept(n_features, coef, intercept)
    d = coef.shape[0]
    dtype = _check_dtype(dtype)
    chunk_rows = _check_n(chunk_rows, "chunk_rows")
    if chunk_rows % _SEED_BLOCK_ROWS:
        raise ValueError(f"chunk_rows must be a multiple of {_SEED_BLOCK_ROWS}, got "
                         f"{chunk_rows}")
    if random_state is None or isinstance(random_state, (np.random.Generator,
                                                         np.random.RandomState)):
        raise ValueError("random_state must be an int or a SeedSequence: every chunk is "
                         "drawn from it separately")
    root = seed_sequence(random_state)
    xs, ys = [], []
    for row0 in range(0, n, chunk_rows):
        rows = min(chunk_rows, n - row0)
        part = dask.delayed(_logistic_block, pure=True, nout=2)(row0, rows, d, coef,
                                                                 intercept, root, dtype)
        xs.append(da.from_delayed(part[0], shape=(rows, d), dtype=dtype))
        ys.append(da.from_delayed(part[1], shape=(rows,), dtype=np.float64))
    return da.concatenate(xs, axis=0), da.concatenate(ys, axis=0)


def make_logistic_data(
    n_samples,
    n_features=28,
    *,
    coef=None,
    intercept=None,
    dtype=np.float64,
    chunk_size=65536,
    random_state=None,
    return_coef=False,
):
    """Draw HIGGS-shaped data from a logistic-regression model, in chunks.

    Features (no intercept column) follow a multivariate Student t with 6
    degrees of freedom scaled to unit variance (heavy-ish tails, like HIGGS
    kinematics after standardisation) and AR(1) correlation 0.5 between
    neighbouring columns: x_0 = z_0, x_j = 0.5 x_{j-1} + sqrt(0.75) z_j,
    all multiplied by sqrt(4 / w) with w ~ chi2(6) per row. Labels are
    y ~ Bernoulli(sigmoid(intercept + x @ coef)).

    The default ``coef`` is deterministic (alternating signs, decaying,
    every fifth zero) and scaled so that x @ coef has sd 1.3, which gives a
    ROC AUC of about 0.77 under the true model; the default ``intercept``
    makes the expected fraction of positives 0.53, as in HIGGS.

    The output is allocated once and filled in chunks of ``chunk_size``
    rows, so 10 million x 28 float32 (1.1 GB) needs only a few MB on top.
    It is identical for any ``chunk_size``: rows are seeded in fixed blocks
    of 65,536, block k using child k of ``SeedSequence(random_state)`` with
    separate streams for normals, chi-squares and uniforms.

    Parameters
    ----------
    n_samples : int
        Number of rows.
    n_features : int, default=28
        Number of features (28 as in HIGGS).
    coef : array-like of shape (n_features,), default=None
        True coefficients; None for the default above.
    intercept : float, default=None
        True intercept; None to make 53% positives in expectation.
    dtype : {np.float64, np.float32}, default=np.float64
        Dtype of X (y is float64 0/1).
    chunk_size : int, default=65536
        Rows generated at a time (memory only; does not change the output).
    random_state : int, SeedSequence, Generator, RandomState or None
        Seed. None draws fresh entropy.
    return_coef : bool, default=False
        Also return the true ``coef`` and ``intercept``.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), float64 0/1
    coef : ndarray of shape (n_features,), only if ``return_coef``
    intercept : float, only if ``return_coef``

    Examples
    --------
    >>> from bayes_subsample.datasets import make_logistic_data
    >>> X, y = make_logistic_data(1000, random_state=0)
    >>> X.shape, y.shape
    ((1000, 28), (1000,))
    >>> X, y, coef, b = make_logistic_data(10, 3, random_state=0, return_coef=True)
    >>> coef.shape
    (3,)
    """
    n = _check_n(n_samples, "n_samples", 0)
    chunk = _check_n(chunk_size, "chunk_size")
    dtype = _check_dtype(dtype)
    coef, intercept = _logistic_coef_intercept(n_features, coef, intercept)
    d = coef.shape[0]
    root = seed_sequence(random_state)
    X = np.empty((n, d), dtype=dtype)
    y = np.empty(n, dtype=np.float64)
    _fill_logistic_rows(X, y, 0, coef, intercept, root, chunk)
    if return_coef:
        return X, y, coef, intercept
    return X, y


def make_gaussian_regression(
    n_samples,
    n_features,
    noise_scale=1.0,
    *,
    coef=None,
    intercept=0.0,
    dtype=np.float64,
    random_state=None,
):
    """Draw data from a linear-Gaussian model, for tests against exact posteriors.

    ``X`` has independent standard-normal entries (no intercept column),
    ``coef`` defaults to standard-normal draws, and
    ``y = intercept + X @ coef + noise_scale * eps`` with standard-normal
    ``eps``. With a Gaussian prior the posterior of ``coef`` is Gaussian in
    closed form, which the samplers' statistical tests compare against.

    Parameters
    ----------
    n_samples : int
        Number of rows.
    n_features : int
        Number of features.
    noise_scale : float, default=1.0
        Standard deviation of the noise (> 0).
    coef : array-like of shape (n_features,), default=None
        True coefficients; None draws them from N(0, 1).
    intercept : float, default=0.0
        True intercept.
    dtype : {np.float64, np.float32}, default=np.float64
        Dtype of X; y is computed from the stored X in float64 and returned
        as float64.
    random_state : int, SeedSequence, Generator, RandomState or None
        Seed.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), float64
    coef : ndarray of shape (n_features,), float64

    Examples
    --------
    >>> from bayes_subsample.datasets import make_gaussian_regression
    >>> X, y, coef = make_gaussian_regression(100, 3, noise_scale=0.5, random_state=0)
    >>> X.shape, y.shape, coef.shape
    ((100, 3), (100,), (3,))
    """
    n = _check_n(n_samples, "n_samples", 0)
    d = _check_n(n_features, "n_features")
    dtype = _check_dtype(dtype)
    noise_scale = float(noise_scale)
    if not (np.isfinite(noise_scale) and noise_scale > 0):
        raise ValueError(f"noise_scale must be a positive finite number, got {noise_scale}")
    rng = np.random.Generator(np.random.PCG64(seed_sequence(random_state)))
    if coef is None:
        coef = rng.standard_normal(d)
    else:
        coef = _check_coef(coef, d)
    X = rng.standard_normal((n, d)).astype(dtype, copy=False)
    y = float(intercept) + X.astype(np.float64, copy=False) @ coef
    y += noise_scale * rng.standard_normal(n)
    return X, y, coef
