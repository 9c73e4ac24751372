"""Exceptions the package raises besides the standard ones."""
from __future__ import annotations

__all__ = ["SamplingError", "LongFitWarning"]


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


class LongFitWarning(UserWarning):
    """A fit is estimated to take long: emitted once, after the chains' first
    seconds, when the run (warmup and sampling of every chain, at the speed
    measured so far) would take more than
    ``bayes_subsample._cost.LONG_FIT_SECONDS`` (300 s). The message gives the
    estimate, the likely cause (standardised rare 0/1 indicator columns, rows
    whose norm dominates, a sampler that reads all the data at every step) and
    what to do. The estimate is rough: warmup iterations can cost more or less
    than sampling ones. Silence it with ``warnings.simplefilter("ignore",
    LongFitWarning)``.
    """
