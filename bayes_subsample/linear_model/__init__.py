"""scikit-learn estimators: Bayesian GLMs sampled by (subsampling) MCMC."""
from ._estimators import BayesianLinearRegression, BayesianLogisticRegression
from ._poisson import BayesianPoissonRegression

__all__ = ["BayesianLogisticRegression", "BayesianLinearRegression", "BayesianPoissonRegression"]
