"""The one registry of samplers: the names ``sampler="..."`` accepts."""
from __future__ import annotations

import importlib
from collections.abc import MutableMapping
from functools import partial

__all__ = ["SAMPLERS", "resolve_sampler"]

# registered name -> (module, class, keyword arguments); the modules are imported on
# the first look-up, so the names are known without importing scikit-learn
_REGISTERED = {
    "mh": ("mh", "MH", {}),
    "hmc": ("hmc", "HMC", {}),
    "nuts": ("hmc", "NUTS", {}),
    "hmc_ecs": ("hmc_ecs", "HMCECS", {}),
    "hmc_ecs_signed": ("hmc_ecs", "HMCECS", {"variant": "signed"}),
    "hmc_ecs_nuts": ("hmc_ecs", "HMCECS", {"inner": "nuts"}),
    "austerity": ("austerity", "AusterityMH", {}),
    "confidence": ("confidence", "ConfidenceMH", {}),
    "sgld": ("sgmcmc", "SGLD", {}),
    "sghmc": ("sghmc", "SGHMC", {}),
    "ewsg": ("ewsg", "EWSG", {}),
    "psgld": ("psgld", "PSGLD", {}),
}


class _Registry(MutableMapping):
    """Registered name -> factory of the sampler object with its defaults (the
    class, or a ``functools.partial`` of it for a variant): a dict whose
    built-in entries import their module on the first look-up."""

    def __init__(self, registered):
        self._registered = dict(registered)
        self._factories = {}

    def __getitem__(self, name):
        if name not in self._factories:
            module, cls, kwargs = self._registered[name]
            factory = getattr(importlib.import_module(f".{module}", __package__), cls)
            self._factories[name] = partial(factory, **kwargs) if kwargs else factory
        return self._factories[name]

    def __setitem__(self, name, factory):
        self._registered[name] = None
        self._factories[name] = factory

    def __delitem__(self, name):
        del self._registered[name]
        self._factories.pop(name, None)

    def __iter__(self):
        return iter(self._registered)

    def __len__(self):
        return len(self._registered)

    def __repr__(self):
        return f"SAMPLERS({', '.join(self._registered)})"


#: registered name -> factory of the sampler object with its defaults
SAMPLERS = _Registry(_REGISTERED)


def resolve_sampler(sampler):
    """A fresh sampler object from a registered name or a sampler object (cloned)."""
    from sklearn.base import clone

    from ._base import BaseSampler

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
