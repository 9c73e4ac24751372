"""Sampler objects: hyperparameters of each MCMC algorithm (kernels inside).

``SAMPLERS`` maps the registered names accepted by ``sampler=...`` to
factories of sampler objects (``SAMPLERS[name]()`` gives the defaults).
"""
from functools import partial

from ._base import BaseSampler, Info, Kernel, State
from .austerity import AusterityMH
from .confidence import ConfidenceMH
from .ewsg import EWSG
from .hmc import HMC
from .hmc_ecs import HMCECS
from .mh import MH
from .sgmcmc import SGHMC, SGLD, iterations_for_passes, suggest_step_size

SAMPLERS = {
    "mh": MH,
    "hmc": HMC,
    "hmc_ecs": HMCECS,
    "hmc_ecs_signed": partial(HMCECS, variant="signed"),
    "austerity": AusterityMH,
    "confidence": ConfidenceMH,
    "sgld": SGLD,
    "sghmc": SGHMC,
    "ewsg": EWSG,
}

__all__ = ["BaseSampler", "Kernel", "State", "Info", "MH", "HMC", "HMCECS", "AusterityMH",
           "ConfidenceMH", "SGLD", "SGHMC", "EWSG", "suggest_step_size",
           "iterations_for_passes", "SAMPLERS"]
