"""bayes_subsample: subsampling MCMC for tall data with scikit-learn estimators.

Public names: the estimators :class:`BayesianLogisticRegression`,
:class:`BayesianLinearRegression`, :class:`BayesianPoissonRegression`, the
low-level driver :func:`sample` (any :class:`~bayes_subsample.models.Model`),
and the submodules ``models``, ``samplers``, ``control_variates``,
``diagnostics``, ``datasets``, ``exceptions``, ``mrf``.
"""
from . import datasets, diagnostics, exceptions, models, samplers
from ._driver import Trace, sample
from .linear_model import (BayesianLinearRegression, BayesianLogisticRegression,
                           BayesianPoissonRegression)

__version__ = "0.1.0"

__all__ = ["BayesianLogisticRegression", "BayesianLinearRegression", "BayesianPoissonRegression",
           "sample", "Trace", "datasets", "models", "samplers", "diagnostics", "exceptions"]
