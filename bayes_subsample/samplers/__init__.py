"""Sampler objects: hyperparameters of each MCMC algorithm (kernels inside).

``SAMPLERS`` maps the registered names accepted by ``sampler=...`` to classes.
"""
from ._base import BaseSampler, Info, Kernel, State
from .hmc import HMC
from .mh import MH

SAMPLERS = {
    "mh": MH,
    "hmc": HMC,
}

__all__ = ["BaseSampler", "Kernel", "State", "Info", "MH", "HMC", "SAMPLERS"]
