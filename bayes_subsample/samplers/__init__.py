"""Sampler objects: hyperparameters of each MCMC algorithm (kernels inside).

``SAMPLERS`` maps the registered names accepted by ``sampler=...`` to
factories of sampler objects (``SAMPLERS[name]()`` gives the defaults);
:func:`resolve_sampler` turns a name or an object into a fresh sampler object.
"""
from .._lazy import attach

__all__ = ["BaseSampler", "Kernel", "Prepared", "LaplacePrepared", "MH", "HMC", "NUTS", "HMCECS",
           "AusterityMH", "ConfidenceMH", "SGLD", "SGHMC", "EWSG", "PSGLD", "suggest_step_size",
           "iterations_for_passes", "SAMPLERS", "resolve_sampler"]

# imported on first use: the samplers are scikit-learn estimators, and the command
# line's --help needs only the registered names
__getattr__, __dir__ = attach(
    __name__,
    names={"BaseSampler": "._base", "Kernel": "._base", "Prepared": "._base",
           "LaplacePrepared": "._base", "SAMPLERS": "._registry", "resolve_sampler": "._registry",
           "AusterityMH": ".austerity", "ConfidenceMH": ".confidence", "EWSG": ".ewsg",
           "HMC": ".hmc", "NUTS": ".hmc", "HMCECS": ".hmc_ecs", "MH": ".mh", "PSGLD": ".psgld",
           "SGLD": ".sgmcmc", "SGHMC": ".sghmc", "iterations_for_passes": "._sg_tuning",
           "suggest_step_size": ".sgmcmc"},
    submodules=["austerity", "confidence", "ewsg", "hmc", "hmc_ecs", "mh", "psgld", "sghmc",
                "sgmcmc"],
)
del attach
