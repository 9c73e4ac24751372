"""The inner Hamiltonian kernels: one transition of theta on a ``Potential``
(the full-data one of HMC and NUTS, or the subsampled one of HMC-ECS), with its
step-size adaptation. ``LeapfrogInner`` is HMC with a (jittered) fixed
trajectory length; ``NUTSInner`` the no-U-turn sampler (doc/algorithms/full_data.rst).

An inner kernel's ``transition(rng, potential, metric)`` moves the potential's
position and returns ``(accepted, accept_prob, energy_error, n_evaluations,
diverging, extra)`` with ``extra`` the values of its own Info fields (after
the five every Hamiltonian transition has). The Info types are declared once,
at import: ``HMCInfo`` and ``NUTSInfo`` (full data) here, ``ECSInfo`` /
``ECSNUTSInfo`` and their signed forms in ``_ecs_updates.py``.
"""
from __future__ import annotations

import math
from typing import NamedTuple

from ._adapt import TrajectoryTuner
from ._nuts import NUTSCore, nuts_step

__all__ = ["LeapfrogInner", "NUTSInner", "DIVERGENCE_THRESHOLD", "is_divergent",
           "make_inner", "HMCInfo", "NUTSInfo", "HMC_FIELDS", "NUTS_FIELDS"]

#: |energy error| above which a transition is flagged as divergent
DIVERGENCE_THRESHOLD = 1000.0


def is_divergent(energy_error):
    """A transition whose energy error is non-finite or above the threshold."""
    return bool(not math.isfinite(energy_error) or abs(energy_error) > DIVERGENCE_THRESHOLD)


#: the Info fields of every Hamiltonian transition, then those of each inner kernel
BASE_FIELDS = [("accept_prob", float), ("accepted", bool), ("n_evals", int),
               ("diverging", bool), ("energy_error", float)]
HMC_FIELDS = BASE_FIELDS + [("step_size", float), ("n_leapfrog", int)]
NUTS_FIELDS = HMC_FIELDS + [("tree_depth", int)]

#: a full-data HMC step (also HMC-ECS's full-data fallback)
HMCInfo = NamedTuple("HMCInfo", HMC_FIELDS)
#: a full-data NUTS step
NUTSInfo = NamedTuple("NUTSInfo", NUTS_FIELDS)


class LeapfrogInner:
    """HMC: ``n_leapfrog`` leapfrog steps then an MH decision; the step size is
    tuned by dual averaging and ``n_leapfrog = round(length / step_size)``."""

    #: the Info of a full-data kernel with this transition
    INFO = HMCInfo

    def __init__(self, sampler, dim):
        self.tuner = TrajectoryTuner(sampler.step_size, sampler.trajectory_length,
                                     sampler.target_accept, sampler.n_leapfrog,
                                     sampler.max_leapfrog, jitter=sampler.jitter)

    def transition(self, rng, potential, metric):
        n_steps = self.tuner.draw_steps(rng)
        accepted, alpha, dE, n_grad = potential.hmc_step(metric, rng, self.tuner.step_size,
                                                         n_steps)
        return accepted, alpha, dE, n_grad, is_divergent(dE), (self.tuner.step_size, n_steps)

    def tuning(self):
        return {"step_size": self.tuner.step_size, "n_leapfrog": self.tuner.n_steps,
                "trajectory_length": self.tuner.trajectory_length}


class NUTSInner:
    """NUTS: trajectories double until they turn back (at most
    ``2**max_tree_depth`` leapfrog steps); dual averaging of the step size on the
    mean acceptance statistic of the trajectory's points."""

    INFO = NUTSInfo

    def __init__(self, sampler, dim):
        self.tuner = TrajectoryTuner(sampler.step_size, 1.0, sampler.target_accept)
        self.core = NUTSCore(dim, sampler.max_tree_depth)

    def transition(self, rng, potential, metric):
        moved, acc, dE, n_eval, depth, div = nuts_step(self.core, potential, metric, rng,
                                                       self.tuner.step_size)
        return moved, acc, dE, n_eval, div, (self.tuner.step_size, n_eval, depth)

    def tuning(self):
        return {"step_size": self.tuner.step_size, "max_tree_depth": self.core.max_depth}


def make_inner(name, sampler, dim):
    """The inner kernel ``name`` ("hmc" or "nuts") with ``sampler``'s hyperparameters."""
    return {"hmc": LeapfrogInner, "nuts": NUTSInner}[name](sampler, dim)
