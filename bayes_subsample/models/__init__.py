"""Model layer: per-datum log-likelihood terms, gradients and curvature.

:class:`Model` is the protocol every sampler uses; :class:`FunctionModel`
builds one from NumPy functions; the GLMs are compiled implementations. Every
model exposes a compiled object (``model.compiled``, a :class:`CyModel`) that
sampler kernels take as a typed argument: the GLMs' family classes, or a
:class:`CyCallbackModel` that calls a Python model back.
"""
from ._base import FunctionModel, GaussianPrior, Model
from ._views import SubsetModel, WeightedModel
from ._callback import CyCallbackModel
from ._cyglm import CyGLM
from ._cymodel import CyModel
from ._cylinear import CyGaussianScale
from ._cymultinomial import CyMultinomial
from ._multinomial import MultinomialLogisticModel
from ._cymlp import CyMLP
from ._mlp import MLPModel
from ._dask import DaskGLM
from ._strata import RowStrata, logistic_stratum_range_bounds, row_strata
from ._glm import (GLM, GaussianRegressionModel, LogisticRegressionModel,
                   PoissonRegressionModel, RowGeometry,
                   logistic_residual_range_bound)
from ._linear import GaussianScaleRegressionModel

__all__ = ["Model", "FunctionModel", "GaussianPrior", "SubsetModel", "WeightedModel", "GLM",
           "LogisticRegressionModel", "MultinomialLogisticModel", "PoissonRegressionModel",
           "GaussianRegressionModel", "MLPModel",
           "GaussianScaleRegressionModel", "CyGaussianScale",
           "CyModel", "CyGLM", "CyMultinomial", "CyMLP", "CyCallbackModel",
           "RowGeometry", "RowStrata", "row_strata", "logistic_residual_range_bound",
           "logistic_stratum_range_bounds", "DaskGLM"]
