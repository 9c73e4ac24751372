"""Bayesian Poisson regression: counts with a log link, each row's exposure and
offset."""
from __future__ import annotations

import warnings

import numpy as np

from ..models import PoissonRegressionModel
from ..models._dask import is_dask_array
from ..models._glm import check_row_values
from ._base import all_or_nothing
from ._estimators import _ATTR_DOC, _COMMON_DOC, _BayesianRegressorBase, _weighted_mean_sd

__all__ = ["BayesianPoissonRegression"]

#: the largest mean numpy's ``Generator.poisson`` accepts (its "lam value too large")
_POISSON_MAX_MEAN = float(np.iinfo(np.int64).max) - 10.0 * np.sqrt(float(np.iinfo(np.int64).max))


def _total_offset(exposure, offset, n, where):
    """``log(exposure) + offset`` as a float64 array of shape (n,), or None when
    both are None; clear errors for other shapes, non-finite values and
    exposures <= 0."""
    if exposure is None and offset is None:
        return None
    total = np.zeros(n)
    for name, v in (("exposure", exposure), ("offset", offset)):
        if v is None:
            continue
        v = np.asarray(v)
        if v.ndim == 2 and 1 in v.shape:       # a column or row vector
            v = v.reshape(-1)
        try:
            v = check_row_values(v, n, name)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        if name == "exposure":
            if np.any(v <= 0):
                raise ValueError(f"{where}: exposure must be > 0 (got {float(v.min()):.3g}); "
                                 "rows with no exposure carry no information: drop them")
            total += np.log(v)
        else:
            total += v
    return total


class BayesianPoissonRegression(_BayesianRegressorBase):
    __doc__ = f"""Bayesian Poisson regression (log link) sampled by MCMC.

    Parameters
    ----------{_COMMON_DOC}
    Attributes
    ----------{_ATTR_DOC}
    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample import BayesianPoissonRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = rng.poisson(np.exp(0.3 * X[:, 0]))
    >>> reg = BayesianPoissonRegression(n_samples=200, n_warmup=200, n_chains=2,
    ...                                 random_state=0).fit(X, y)
    >>> reg.predict(X[:2]).shape
    (2,)
    """

    @all_or_nothing
    def fit(self, X, y, sample_weight=None, *, exposure=None, offset=None):
        """Sample the posterior given ``X`` and non-negative integer counts ``y``.

        Parameters
        ----------
        X : array-like, sparse matrix or Dask array of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Counts.
        sample_weight : array-like of shape (n_samples,), optional
            Row weights ``w_k >= 0``: the log-likelihood is ``sum_k w_k l_k``,
            so an integer weight counts its row that many times (unlike
            ``exposure``, which scales a row's rate). Rows of weight 0 are
            left out; needs X in memory.
        exposure : array-like of shape (n_samples,), optional
            The exposure of each row (time at risk, population, area: each
            ``y_k ~ Poisson(exposure_k exp(x_k . coef + intercept))``), > 0.
        offset : array-like of shape (n_samples,), optional
            A known term added to each row's linear predictor (with
            ``exposure``, ``log(exposure)`` is added to it). Dask arrays ``X``
            take neither.

        Returns
        -------
        self
        """
        X, y = self._validate_fit_data(X, y)
        if np.any(y < 0) or np.any(y != np.round(y)):
            raise ValueError("BayesianPoissonRegression needs non-negative integer counts y")
        total = _total_offset(exposure, offset, X.shape[0], "fit")
        if total is not None and is_dask_array(X):
            raise ValueError("exposure and offset need X in memory (a NumPy array, a memory "
                             "map or a scipy.sparse matrix), not a Dask array")
        weights, X, (y, total) = self._sample_weight(sample_weight, X, y, total)
        if y.shape[0] and not np.any(y):
            warnings.warn(
                "BayesianPoissonRegression: every count in y is 0. The data then bound the "
                "rates only from above (the intercept can go to -infinity), and the posterior "
                "below is the prior's: its lower tail is set by intercept_prior_scale, not by "
                "the data. Check the counts (and the exposure); a model of any event at all "
                "needs some.", UserWarning, stacklevel=3)
        if total is None:
            return self._fit_model(PoissonRegressionModel, X, y, weights=weights)
        return self._fit_model(PoissonRegressionModel, X, y, weights=weights, offset=total)

    def predict(self, X, return_std=False, *, exposure=None, offset=None):
        """Posterior predictive mean of the counts (and standard deviation with
        ``return_std``), for rows with the given ``exposure`` and ``offset``
        (default: exposure 1, offset 0, i.e. the rate per unit exposure). A
        Dask array ``X`` gives Dask arrays (without exposure or offset)."""
        if exposure is None and offset is None:
            return super().predict(X, return_std)
        if is_dask_array(X):
            raise ValueError("predict with exposure or offset needs X in memory")
        X = self._check_X(X)
        return self._predict(X, return_std,
                             _total_offset(exposure, offset, X.shape[0], "predict"))

    def sample_y(self, X, n_samples=1, random_state=None, *, exposure=None, offset=None):
        """Draws from the posterior predictive of the counts, shape (n, n_samples),
        for rows with the given ``exposure`` and ``offset`` (see :meth:`predict`)."""
        X = self._check_X(X)
        return self._sample_y(X, n_samples, random_state,
                              _total_offset(exposure, offset, X.shape[0], "sample_y"))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True  # counts y >= 0
        return tags

    def _predictive_moments(self, X, offset=None):
        eta, w = self._linear_predictor_draws(X)
        if offset is not None:
            eta = eta + offset[:, None]
        mu = np.exp(np.clip(eta, None, 700))
        mean, sd = _weighted_mean_sd(mu, w)
        # Poisson mixture: Var y = E[mu] + Var[mu]
        return mean, np.hypot(np.sqrt(np.clip(mean, 0, None)), sd)

    def _sample_observation(self, rng, eta, draws):
        mu = np.exp(np.clip(eta, None, 700))
        if mu.size and np.max(mu) > _POISSON_MAX_MEAN:
            raise ValueError(
                f"sample_y: the posterior predictive means reach {np.max(mu):.3g}, beyond the "
                f"largest mean numpy's Poisson sampler draws from ({_POISSON_MAX_MEAN:.3g}); "
                "these X are far outside the data the model was fitted on (use predict for "
                "the means)")
        return rng.poisson(mu).astype(np.float64)
