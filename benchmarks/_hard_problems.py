"""The hard problems of ``bench_hard_data.py``: their data and models, a long
full-data NUTS reference, and the comparison of a run's draws with it.

Each problem is a function returning its data (and, for user models, the
``FunctionModel``); the sections of ``bench_hard_data.py`` (``_hard_*.py``)
share them, so every sampler is judged on the same posterior.
"""
from __future__ import annotations

import os
import time
import warnings

import numpy as np

import _provenance
from bayes_subsample import sample
from bayes_subsample import diagnostics as diag
from bayes_subsample.models import FunctionModel

RESULTS = os.path.join(os.path.dirname(__file__), "results")

#: the acceptance bounds of the hard-data benchmark: exact samplers' posterior
#: means within this many reference sds, approximate ones' means and sd ratios
EXACT_MEAN_SD = 0.1
APPROX_MEAN_SD = 0.3
APPROX_SD_RATIO = 0.3


def header(command):
    """The provenance every result of this benchmark carries (``_provenance.py``)."""
    return _provenance.header(command)


# ------------------------------------------------------------------------------------
# data
# ------------------------------------------------------------------------------------
def covtype_split(binary=True, seed=0):
    """covtype with all 54 attributes (the ten quantitative ones standardised over
    all rows, the 44 indicators as they are), all 581,012 rows, an 80/20 split
    (``train_test_split(..., test_size=0.2, random_state=seed)``)."""
    from sklearn.model_selection import train_test_split

    from bayes_subsample.datasets import load_covtype
    X, y = load_covtype(binary=binary, standardize=True, return_X_y=True,
                        data_home=os.environ.get("BAYES_SUBSAMPLE_DATA"))
    return train_test_split(X, y, test_size=0.2, random_state=seed)


def iris_setosa():
    """Iris, its four measurements standardised, ``y = 1`` for setosa: separable."""
    from sklearn.datasets import load_iris
    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    return np.ascontiguousarray(X), (y == 0).astype(np.float64)


def separable_synthetic(n=100_000, d=20, seed=0, margin=0.5):
    """``n x d`` standard-normal rows labelled by the sign of ``x^T w`` for a random
    unit ``w``, rows within ``margin`` of the plane dropped and redrawn: linearly
    separable with a margin (the MLE does not exist; the prior bounds the
    posterior along ``w``)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(d)
    w /= np.linalg.norm(w)
    rows = []
    left = n
    while left > 0:
        Z = rng.standard_normal((2 * left, d))
        s = Z @ w
        Z = Z[np.abs(s) > margin][:left]
        rows.append(Z)
        left -= Z.shape[0]
    X = np.ascontiguousarray(np.vstack(rows))
    return X, (X @ w > 0).astype(np.float64)


def ill_conditioned_regression(n=5000, p=24, seed=0, rho=0.99999):
    """Linear regression data with ``p`` strongly correlated predictors: the
    columns share one factor (correlation ``rho``; condition number of
    ``X^T X`` above 1e6 at the defaults), plus a column of ones, coefficients
    N(0, 1), noise sd 1. Returns ``(X, y)`` with the intercept column last."""
    rng = np.random.default_rng(seed)
    f = rng.standard_normal((n, 1))
    X = np.sqrt(rho) * f + np.sqrt(1.0 - rho) * rng.standard_normal((n, p))
    beta = rng.standard_normal(p)
    y = X @ beta + 0.5 + rng.standard_normal(n)
    X = np.column_stack([X, np.ones(n)])
    return np.ascontiguousarray(X), y


def small_regression(n=434, seed=0):
    """A 434-row regression shaped like the kid-IQ data (a binary and two
    continuous predictors on their own scales, an intercept, noise sd 18):
    ``(X, y)`` with the intercept column last; with the noise's log sd the
    posterior has 5 parameters."""
    rng = np.random.default_rng(seed)
    hs = (rng.random(n) < 0.79).astype(np.float64)
    iq = rng.normal(100.0, 15.0, n)
    age = rng.integers(17, 30, n).astype(np.float64)
    y = 26.0 + 6.0 * hs + 0.56 * iq + 0.2 * age + rng.normal(0.0, 18.0, n)
    X = np.column_stack([hs, (iq - 100.0) / 15.0, (age - 23.0) / 3.0, np.ones(n)])
    return np.ascontiguousarray(X), y


def tall_regression(n=1_000_000, p=20, seed=0):
    """A tall linear regression: ``n`` rows of ``p`` standard-normal predictors
    (pairs correlated 0.5 through a shared factor), coefficients N(0, 1), an
    intercept of 1, noise sd 2. Returns ``(X, y)`` without a column of ones (the
    estimators fit the intercept)."""
    rng = np.random.default_rng(seed)
    f = rng.standard_normal((n, 1))
    X = np.sqrt(0.5) * f + np.sqrt(0.5) * rng.standard_normal((n, p))
    beta = rng.standard_normal(p)
    y = X @ beta + 1.0 + 2.0 * rng.standard_normal(n)
    return np.ascontiguousarray(X), y


def gaussian_function_model(X, y, prior_scale=10.0):
    """Linear regression with the noise's log sd sampled, as a user model:
    ``theta = (beta, log sigma)``, ``l_k = -(y_k - x_k^T beta)^2 / (2 sigma^2) -
    log sigma - log(2 pi) / 2``; prior N(0, prior_scale^2) on beta and on
    ``log sigma - log sd(y)`` (the last parameter is ``log(sigma / sd(y))``, so
    the prior is on the data's scale)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, p = X.shape
    log_sy = float(np.log(np.std(y)))

    def loglik(theta, idx):
        s = theta[p] + log_sy
        z = (y[idx] - X[idx] @ theta[:p]) * np.exp(-s)
        return -0.5 * z * z - s - 0.5 * np.log(2.0 * np.pi)

    def grad(theta, idx):
        s = theta[p] + log_sy
        z = (y[idx] - X[idx] @ theta[:p]) * np.exp(-s)
        return np.column_stack([X[idx] * (z * np.exp(-s))[:, None], z * z - 1.0])

    return FunctionModel(loglik, grad, n_data=n, n_params=p + 1, prior_scale=prior_scale)


# ------------------------------------------------------------------------------------
# reference and comparison
# ------------------------------------------------------------------------------------
def run_sampler(model, sampler, *, n_samples=1000, n_warmup=1000, n_chains=4, seed=0,
                n_jobs=1):
    """``sample`` at the given sizes, convergence warnings kept (returned with the
    trace: a sampler that warns says so in the table). Returns
    ``(trace, warnings as str list, elapsed s)``; an exception is returned in
    place of the trace (a clear error before any draw is an accepted outcome)."""
    t = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            trace = sample(model, sampler, n_samples=n_samples, n_warmup=n_warmup,
                           n_chains=n_chains, n_jobs=n_jobs, random_state=seed)
        except Exception as e:          # reported, not hidden
            trace = e
    return trace, [f"{w.category.__name__}: {w.message}" for w in caught], \
        time.perf_counter() - t


def nuts_reference(model, *, n_samples=5000, n_warmup=1000, n_chains=4, seed=12345, n_jobs=2,
                   keep_draws=False):
    """A long full-data NUTS run: posterior means, sds and the MCSE of the means
    (``keep_draws``: and the draws, ``"draws"``)."""
    trace, warns, elapsed = run_sampler(model, "nuts", n_samples=n_samples, n_warmup=n_warmup,
                                        n_chains=n_chains, seed=seed, n_jobs=n_jobs)
    if isinstance(trace, Exception):
        raise trace
    ref = reference_from_draws(trace.draws, elapsed=elapsed, warnings=warns)
    if keep_draws:
        ref["draws"] = trace.draws
    return ref


def reference_from_draws(draws, **extra):
    flat = draws.reshape(-1, draws.shape[-1])
    return {"mean": flat.mean(0), "sd": flat.std(0, ddof=1),
            "mcse_mean": np.asarray(diag.mcse_mean(draws)),
            "min_ess_bulk": float(np.min(diag.ess_bulk(draws))),
            "max_rhat": float(np.max(diag.rhat(draws))), **extra}


def moments(draws, weights=None):
    """Posterior means and sds of ``draws`` (chains, draws, p); ``weights``:
    signs of a signed sampler (expectations sign-corrected)."""
    flat = draws.reshape(-1, draws.shape[-1])
    if weights is None:
        return flat.mean(0), flat.std(0, ddof=1)
    w = weights.reshape(-1).astype(np.float64)
    mean = w @ flat / w.sum()
    return mean, np.sqrt(np.maximum(w @ (flat - mean) ** 2 / w.sum(), 0.0))


def compare(draws, ref, weights=None):
    """Posterior means and sds of ``draws`` (chains, draws, p) against ``ref``:
    ``max_mean_err_sd`` (the largest |mean - ref mean| / ref sd), the sd ratios'
    range, min bulk ESS and max R-hat. ``weights``: signs of a signed sampler
    (expectations sign-corrected)."""
    mean, sd = moments(draws, weights)
    ratio = sd / ref["sd"]
    return {"max_mean_err_sd": float(np.max(np.abs(mean - ref["mean"]) / ref["sd"])),
            "sd_ratio_min": float(ratio.min()), "sd_ratio_max": float(ratio.max()),
            "min_ess_bulk": float(np.min(diag.ess_bulk(draws))),
            "max_rhat": float(np.max(diag.rhat(draws)))}


def within(cmp, exact):
    """Whether a comparison meets the benchmark's bound for an exact or an
    approximate sampler."""
    if exact:
        return cmp["max_mean_err_sd"] <= EXACT_MEAN_SD
    return (cmp["max_mean_err_sd"] <= APPROX_MEAN_SD
            and 1 - APPROX_SD_RATIO <= cmp["sd_ratio_min"]
            and cmp["sd_ratio_max"] <= 1 + APPROX_SD_RATIO)


def jsonable(obj):
    """Arrays and NumPy scalars as lists and floats, recursively."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj
