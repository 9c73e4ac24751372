"""Sampler objects: hyperparameters of each MCMC algorithm (kernels inside).

``SAMPLERS`` maps the registered names accepted by ``sampler=...`` to
factories of sampler objects (``SAMPLERS[name]()`` gives the defaults);
:func:`resolve_sampler` turns a name or an object into a fresh sampler object.
"""
from ._base import BaseSampler, Kernel, LaplacePrepared, Prepared
from ._registry import SAMPLERS, resolve_sampler
from .austerity import AusterityMH
from .confidence import ConfidenceMH
from .ewsg import EWSG
from .hmc import HMC, NUTS
from .hmc_ecs import HMCECS
from .mh import MH
from .sgmcmc import SGHMC, SGLD, iterations_for_passes, suggest_step_size

__all__ = ["BaseSampler", "Kernel", "Prepared", "LaplacePrepared", "MH", "HMC", "NUTS", "HMCECS",
           "AusterityMH", "ConfidenceMH", "SGLD", "SGHMC", "EWSG", "suggest_step_size",
           "iterations_for_passes", "SAMPLERS", "resolve_sampler"]
