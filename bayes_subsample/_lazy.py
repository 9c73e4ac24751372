"""Lazy loading of a package's public names (PEP 562).

scikit-learn pulls in ``scipy.stats`` and pandas when it is imported (about a
second of CPU), and the samplers and estimators build on it. A package that
loads its names through :func:`attach` imports a submodule only when one of
its names is first used, so ``import bayes_subsample`` and the command line's
``--help`` stay cheap while ``from bayes_subsample import X`` works as before.
"""
import importlib
import sys

__all__ = ["attach"]


def attach(package, names, submodules=()):
    """Module-level ``__getattr__`` and ``__dir__`` for lazy loading.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    names : dict of str to str
        Public name -> the submodule that defines it, relative to the package
        (``"._driver"``).
    submodules : iterable of str
        Public submodules, imported on first attribute access.

    Returns
    -------
    __getattr__, __dir__ : callables
        Assign both at module level. A loaded name is stored on the package, so
        the second look-up does not reach ``__getattr__``.
    """
    submodules = frozenset(submodules)

    def __getattr__(name):
        if name in names:
            value = getattr(importlib.import_module(names[name], package), name)
        elif name in submodules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(names) | submodules)

    return __getattr__, __dir__
