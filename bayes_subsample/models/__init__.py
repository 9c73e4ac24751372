"""Model layer: per-datum log-likelihood terms, gradients and curvature.

:class:`Model` is the protocol every sampler uses; :class:`FunctionModel`
builds one from NumPy functions; the GLMs are compiled implementations.
"""
from ._base import FunctionModel, GaussianPrior, Model
from ._glm import (GLM, GaussianRegressionModel, LogisticRegressionModel,
                   PoissonRegressionModel)

__all__ = ["Model", "FunctionModel", "GaussianPrior", "GLM", "LogisticRegressionModel",
           "PoissonRegressionModel", "GaussianRegressionModel"]
