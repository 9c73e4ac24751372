"""bayes_subsample: subsampling MCMC for tall data with scikit-learn estimators."""

__version__ = "0.1.0"
