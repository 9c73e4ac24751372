"""Shared pytest fixtures (keep this small: helpers used by one file live in that file)."""

import numpy as np
import pytest

from bayes_subsample.models import GaussianRegressionModel, LogisticRegressionModel


@pytest.fixture
def rng():
    """A fixed-seed Generator: every test sees the same stream, whatever runs first."""
    return np.random.default_rng(20240607)


# ---- shared by test_austerity.py and test_confidence.py ----------------------------
def logistic_data(n, d, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    beta = np.linspace(1.0, -0.5, d)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ beta + 0.2)))).astype(np.float64)
    return X, y


@pytest.fixture(scope="module")
def logistic_model():
    X, y = logistic_data(5000, 3)
    return LogisticRegressionModel(X, y)


@pytest.fixture(scope="module")
def gaussian_model():
    rng = np.random.default_rng(1)
    n = 3000
    X = rng.normal(size=(n, 2))
    y = X @ np.array([0.5, -1.0]) + 0.3 + rng.normal(scale=1.0, size=n)
    return GaussianRegressionModel(X, y, noise_scale=1.0)
