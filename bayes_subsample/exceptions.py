"""Exceptions the package raises besides the standard ones."""
from __future__ import annotations

__all__ = ["SamplingError"]


class SamplingError(FloatingPointError, ValueError):
    """A sampler's dynamics became numerically unstable for this posterior at
    these settings: a non-finite state, or a chain that ran away from the
    posterior mass; or a sampler without an accept/reject step cannot be
    trusted on it (the stochastic-gradient samplers' refusals, before any draw
    or at the end of warmup). The message says what to change (usually a
    smaller step size, control variates or another sampler).

    It is a ``ValueError`` (the settings do not suit the data) and, as before,
    a ``FloatingPointError``.
    """
