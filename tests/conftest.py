"""Shared pytest fixtures (keep this small: helpers used by one file live in that file),
and the ``--time-budget`` option CI gives the slow set."""

import hashlib
import random
import time

import numpy as np
import pytest

from bayes_subsample.models import (FunctionModel, GaussianRegressionModel,
                                    LogisticRegressionModel)


# ---- a time budget for a run (CI's slow set) -------------------------------------------
def pytest_addoption(parser):
    parser.addoption(
        "--time-budget", type=float, default=None, metavar="SECONDS",
        help="skip (reported as skipped, with this reason) the tests that would start after "
             "SECONDS of the run; the test files then run in an order shuffled by "
             "--budget-seed, so that runs with other seeds cover the files that were skipped")
    parser.addoption("--budget-seed", default="0",
                     help="a string seeding the order of the files under --time-budget")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--time-budget") is None:
        return
    # whole files move, so a module's fixtures are still made once
    files = sorted({item.path for item in items})
    seed = int(hashlib.sha256(config.getoption("--budget-seed").encode()).hexdigest()[:16], 16)
    random.Random(seed).shuffle(files)
    rank = {path: k for k, path in enumerate(files)}
    items.sort(key=lambda item: rank[item.path])      # stable: in-file order kept


def pytest_sessionstart(session):
    session.config._budget_start = time.monotonic()


def pytest_runtest_setup(item):
    budget = item.config.getoption("--time-budget")
    if budget is not None and time.monotonic() - item.config._budget_start > budget:
        pytest.skip(f"--time-budget of {budget:g} s spent: not run here (pytest -m slow runs "
                    "it)")


@pytest.fixture
def rng():
    """A fixed-seed Generator: every test sees the same stream, whatever runs first."""
    return np.random.default_rng(20240607)


# ---- shared by the sampler tests -------------------------------------------------------
def _logistic_data(n, d, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    beta = np.linspace(1.0, -0.5, d)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ beta + 0.2)))).astype(np.float64)
    return X, y


def _as_user_model(model):
    return FunctionModel(model.loglik_terms, model.grad_terms, model.n_data, model.n_params,
                         prior_scale=model.prior.scale, range_bound=model.range_bound)


@pytest.fixture
def logistic_data():
    """``logistic_data(n, d, seed=0, dtype=float64) -> (X, y)``: logistic-regression data
    with coefficients ``linspace(1, -0.5, d)`` and intercept 0.2."""
    return _logistic_data


@pytest.fixture
def as_user_model():
    """``as_user_model(model)``: the same posterior as a :class:`FunctionModel` calling
    ``model``'s per-datum terms. Samplers run it through the callback object, the
    NumPy path, so comparing the two checks the compiled kernels against NumPy."""
    return _as_user_model


@pytest.fixture(scope="module")
def logistic_model():
    X, y = _logistic_data(5000, 3)
    return LogisticRegressionModel(X, y)


@pytest.fixture(scope="module")
def gaussian_model():
    rng = np.random.default_rng(1)
    n = 3000
    X = rng.normal(size=(n, 2))
    y = X @ np.array([0.5, -1.0]) + 0.3 + rng.normal(scale=1.0, size=n)
    return GaussianRegressionModel(X, y, noise_scale=1.0)


def _hessian_atol(H, rtol, n_sums=1):
    """The error allowed in each entry of a GLM Hessian sum ``H`` (weights
    w_i >= 0) from ``n_sums`` sums of rows whose ``Rows.hessian_rtol`` is
    ``rtol``: each within ``rtol`` of sum_i w_i |x_ij x_ik| <= sqrt(|H_jj H_kk|)."""
    dg = np.sqrt(np.abs(np.diag(np.atleast_2d(H))))
    return n_sums * rtol * np.outer(dg, dg)


@pytest.fixture
def hessian_atol():
    """``hessian_atol(H, rtol, n_sums=1)``: the error allowed in each entry of a
    GLM Hessian sum of rows with ``hessian_rtol`` ``rtol`` (dense float32 rows:
    summed in float32 blocks), an array to compare against elementwise."""
    return _hessian_atol


@pytest.fixture
def sigint_handler():
    """Ctrl-C raises KeyboardInterrupt during the test, also where the test
    process was started with SIGINT ignored (a shell's background job): tests
    that press Ctrl-C (a real SIGINT, or ``_thread.interrupt_main``) use it."""
    import signal
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory):
    """A small logistic-regression CSV for the command line (header
    alpha,beta,gamma,label; 300 rows): its path, X and y."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X @ [1.0, -1.0, 0.5] + rng.logistic(size=300) > 0).astype(int)
    path = tmp_path_factory.mktemp("data") / "small.csv"
    with open(path, "w") as fh:
        fh.write("alpha,beta,gamma,label\n")
        fh.writelines(",".join(f"{v:.5f}" for v in row) + f",{t}\n" for row, t in zip(X, y))
    return path, X, y

