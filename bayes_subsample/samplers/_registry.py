"""The one registry of samplers: the names ``sampler="..."`` accepts."""
from __future__ import annotations

from functools import partial

from sklearn.base import clone

from ._base import BaseSampler
from .austerity import AusterityMH
from .confidence import ConfidenceMH
from .ewsg import EWSG
from .hmc import HMC, NUTS
from .hmc_ecs import HMCECS
from .mh import MH
from .sgmcmc import SGHMC, SGLD

__all__ = ["SAMPLERS", "resolve_sampler"]

#: registered name -> factory of the sampler object with its defaults
SAMPLERS = {
    "mh": MH,
    "hmc": HMC,
    "nuts": NUTS,
    "hmc_ecs": HMCECS,
    "hmc_ecs_signed": partial(HMCECS, variant="signed"),
    "hmc_ecs_nuts": partial(HMCECS, inner="nuts"),
    "austerity": AusterityMH,
    "confidence": ConfidenceMH,
    "sgld": SGLD,
    "sghmc": SGHMC,
    "ewsg": EWSG,
}


def resolve_sampler(sampler):
    """A fresh sampler object from a registered name or a sampler object (cloned)."""
    if isinstance(sampler, str):
        if sampler not in SAMPLERS:
            raise ValueError(
                f"unknown sampler {sampler!r}; choose one of {sorted(SAMPLERS)} or pass a "
                "sampler object"
            )
        return SAMPLERS[sampler]()
    if isinstance(sampler, BaseSampler):
        return clone(sampler)
    raise TypeError(
        f"sampler must be a registered name ({sorted(SAMPLERS)}) or a sampler object from "
        f"bayes_subsample.samplers, got {type(sampler).__name__}"
    )
