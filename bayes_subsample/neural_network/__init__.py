"""scikit-learn estimators: Bayesian neural networks (multilayer perceptrons)
sampled by stochastic-gradient MCMC."""
from ._base import InputScaleWarning
from ._multilayer_perceptron import BayesianMLPClassifier, BayesianMLPRegressor

__all__ = ["BayesianMLPClassifier", "BayesianMLPRegressor", "InputScaleWarning"]
