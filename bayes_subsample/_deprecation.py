"""Renamed hyperparameters: the old name keeps working for two releases with a
``FutureWarning`` (scikit-learn's convention: the old name stays in ``__init__``
with the default ``"deprecated"``)."""
from __future__ import annotations

import warnings

from sklearn.utils._param_validation import Hidden, StrOptions

__all__ = ["DEPRECATED", "deprecated_constraint", "renamed"]

DEPRECATED = "deprecated"


def deprecated_constraint(*constraints):
    """The constraints of a renamed hyperparameter's old name."""
    return [*constraints, Hidden(StrOptions({DEPRECATED}))]


def renamed(obj, old, new, warn=True, removed_in="0.3"):
    """The value of hyperparameter ``new`` of ``obj``, or the one given under its
    deprecated name ``old`` (with a ``FutureWarning`` if ``warn``; both given is an
    error)."""
    value = getattr(obj, old)
    if isinstance(value, str) and value == DEPRECATED:
        return getattr(obj, new)
    name = type(obj).__name__
    default = type(obj)().get_params()[new]
    if getattr(obj, new) != default:
        raise ValueError(f"{name}: give {new} only ({old} is its deprecated name)")
    if warn:
        warnings.warn(f"{name}({old}=...) is deprecated and will be removed in {removed_in}; "
                      f"use {name}({new}=...)", FutureWarning, stacklevel=3)
    return value
