"""One place for turning ``random_state`` into independent numpy streams."""
from __future__ import annotations

import numbers

import numpy as np

__all__ = ["seed_sequence", "chain_generators"]


def seed_sequence(random_state):
    """``SeedSequence`` from None, an int, a SeedSequence, a Generator or a RandomState.

    A Generator or RandomState contributes 256 bits drawn from it (so it is
    advanced); None gives fresh OS entropy.
    """
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be non-negative, got {random_state}")
        return np.random.SeedSequence(int(random_state))
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(random_state.integers(0, 2**63, size=4).tolist())
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(
            random_state.randint(0, 2**63, size=4, dtype=np.int64).tolist())
    raise TypeError(
        "random_state must be None, an int, a SeedSequence, a Generator or a RandomState, "
        f"got {random_state!r}")


def chain_generators(random_state, n):
    """``n`` independent ``Generator(PCG64)`` streams: ``seed_sequence(random_state).spawn(n)``."""
    return [np.random.Generator(np.random.PCG64(child))
            for child in seed_sequence(random_state).spawn(n)]
