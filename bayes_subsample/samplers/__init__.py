"""Sampler objects: hyperparameters of each MCMC algorithm (kernels inside).

``SAMPLERS`` maps the registered names accepted by ``sampler=...`` to classes.
"""
from ._base import BaseSampler, Info, Kernel, State
from functools import partial

from .hmc import HMC
from .hmc_ecs import HMCECS
from .mh import MH

SAMPLERS = {
    "mh": MH,
    "hmc": HMC,
    "hmc_ecs": HMCECS,
    "hmc_ecs_signed": partial(HMCECS, variant="signed"),
}

__all__ = ["BaseSampler", "Kernel", "State", "Info", "MH", "HMC", "HMCECS", "SAMPLERS"]
