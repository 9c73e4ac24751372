"""Shared pytest fixtures (keep this small: helpers used by one file live in that file)."""

import numpy as np
import pytest


@pytest.fixture
def rng():
    """A fixed-seed Generator: every test sees the same stream, whatever runs first."""
    return np.random.default_rng(20240607)
