"""bayes_subsample: subsampling MCMC for tall data with scikit-learn estimators.

Public names: the estimators :class:`BayesianLogisticRegression`,
:class:`BayesianLinearRegression`, :class:`BayesianPoissonRegression`, the
Bayesian neural networks :class:`BayesianMLPClassifier` and
:class:`BayesianMLPRegressor`, the
low-level driver :func:`sample` (any :class:`~bayes_subsample.models.Model`),
and the submodules ``models``, ``samplers``, ``control_variates``,
``diagnostics``, ``datasets``, ``exceptions``, ``mrf``, ``model_selection``,
``neural_network``.

Names and submodules are imported on first use (scikit-learn, which the
estimators and samplers build on, costs about a second to import), so
``import bayes_subsample`` itself is quick.
"""
from ._lazy import attach

__version__ = "0.1.0"

__all__ = ["BayesianLogisticRegression", "BayesianLinearRegression", "BayesianPoissonRegression",
           "BayesianMLPClassifier", "BayesianMLPRegressor", "sample", "Trace", "datasets", "models",
           "samplers", "diagnostics", "exceptions"]

__getattr__, __dir__ = attach(
    __name__,
    names={"BayesianLogisticRegression": ".linear_model",
           "BayesianLinearRegression": ".linear_model",
           "BayesianPoissonRegression": ".linear_model",
           "BayesianMLPClassifier": ".neural_network",
           "BayesianMLPRegressor": ".neural_network",
           "sample": "._driver", "Trace": "._driver"},
    submodules=["datasets", "models", "samplers", "diagnostics", "exceptions", "control_variates",
                "linear_model", "neural_network", "model_selection", "mrf", "plotting", "cli"],
)
del attach
