"""Bayesian logistic and linear regression estimators, and what the GLM
estimators share: parameter docs, the regressors' base (``_poisson.py`` holds
Poisson regression)."""
from __future__ import annotations

import warnings
from numbers import Real

import numpy as np
from scipy import sparse
from scipy.special import expit, log_expit, log_softmax, logsumexp, softmax
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets

from .. import diagnostics as diag
from .._driver import seed_sequence
from .._params import store_params
from ..models import (GaussianRegressionModel, GaussianScaleRegressionModel,
                      LogisticRegressionModel, MultinomialLogisticModel)
from ..models._glm import normal_equations
from ..models._linear import NOISE_PRIOR_SCALE
from ..models._cyglm import count_binary
from ..models._dask import is_dask_array
from ._base import MAX_PREDICT_DRAWS, BayesianGLMBase, all_or_nothing, times_coef
from ._priors import target_stats

#: rows per block of the predictions: each block holds (rows x draws) linear
#: predictors, (rows x draws x classes) for multiclass models (about 33 MB
#: and 56 MB at 1000 draws and 7 classes)
_ROWS = 4096
_ROWS_MULTICLASS = 1024

__all__ = ["BayesianLogisticRegression", "BayesianLinearRegression"]

_COMMON_DOC_TEMPLATE = """
    sampler : str or sampler object, default="hmc_ecs"
        MCMC algorithm: a registered name ("hmc_ecs", "hmc_ecs_nuts",
        "hmc_ecs_signed", "mh", "hmc", "nuts", "austerity", "confidence", "sgld",
        "sghmc", "ewsg", "psgld") or an object from :mod:`bayes_subsample.samplers`
        carrying its hyperparameters (``GridSearchCV`` reaches them as
        ``sampler__<name>``). The default, HMC with energy-conserving
        subsampling, reads a small subsample per step and falls back to
        full-data HMC where subsampling would not pay (small data).
    n_samples : int, default=1000
        Retained iterations per chain.
    n_warmup : int, default=1000
        Warmup (adaptation) iterations per chain, discarded.
    n_chains : int, default=4
        Independent chains (R-hat needs at least 2).
    n_jobs : int, default=None
        Chains run in parallel threads; ``None`` means 1 (unless a
        ``joblib.parallel_config(n_jobs=...)`` context sets it), ``-1`` all cores.
        Draws do not depend on it. Inside joblib's Dask backend
        (``joblib.parallel_config(backend="dask")``), ``n_jobs`` other than
        None and 1 runs the chains on the cluster's workers (``-1``: one per
        worker thread), with the same draws.
    prior_scale : float, array-like of shape (n_features,) or "auto", default="auto"
        Standard deviation of the Gaussian prior ``N(0, prior_scale^2)`` on
        each coefficient (an array: one per column). ``"auto"``: on the data's
        scale, ``2.5 s / spread_j`` for column ``j``, where ``spread_j`` is
        the column's standard deviation (``|b - a|`` for a column of two values
        ``a`` and ``b``, such as a 0/1 indicator, standardised or not),
        and ``s`` is %(s)s.
        The values used are ``prior_scale_``. ``prior_scale=10.0,
        intercept_prior_scale=10.0`` is the fixed prior of version 0.2.
    intercept_prior_scale : float or "auto", default="auto"
        Standard deviation of the Gaussian prior ``N(0, scale^2)`` on the
        intercept. ``"auto"``: the prior rstanarm puts on the intercept of the
        centred columns, ``N(%(m)s, (2.5 s)^2)``, carried to the intercept of
        X as it is (mean %(m)s, standard deviation ``sqrt((2.5 s)^2 +
        sum_j (mean_j prior_scale_j)^2)``; the same on centred X). The values
        used are ``intercept_prior_mean_`` and ``intercept_prior_scale_``.
    fit_intercept : bool, default=True
        Add an intercept (the last posterior column).
    random_state : int, Generator, SeedSequence, RandomState or None, default=None
        Seeds ``SeedSequence(random_state).spawn(...)``: one stream per chain
        (a Generator or RandomState is advanced to draw the seed).
    warm_start : bool, default=False
        When True, fitting again on the same data continues the previous
        chains from their last states, with their adapted tuning and random
        streams, and appends ``n_samples`` draws per chain: the result equals,
        draw for draw, one fit with the total number of draws. A fit that was
        interrupted (Ctrl-C) is first completed. Data that changed since the
        first fit (a hash of every value of X and y is compared), even in
        place, raise a ValueError; the sampler, ``n_chains`` and ``n_warmup``
        must not change.
    progress : bool or None, default=None
        Show a progress bar (needs tqdm): True from the start, False never,
        None (the default) from the moment a
        :class:`~bayes_subsample.exceptions.LongFitWarning` says that the fit
        is estimated to take more than a few minutes.
"""

#: the parameter docs of the logistic and Poisson estimators, and of linear regression
_COMMON_DOC = _COMMON_DOC_TEMPLATE % dict(
    s="1 (the coefficients are on the log-odds or log-rate scale)",
    m="0")
_LINEAR_COMMON_DOC = _COMMON_DOC_TEMPLATE % dict(
    s="the standard deviation of ``y``", m="mean(y)")

_ATTR_DOC = """
    coef_ : ndarray of shape (n_features,)
        Posterior mean of the coefficients (sign-corrected for signed samplers).
    intercept_ : float
        Posterior mean of the intercept (0.0 if ``fit_intercept=False``).
    posterior_draws_ : ndarray of shape (n_chains, n_samples, n_features + fit_intercept)
        Retained draws; columns are the coefficients in feature order, then the
        intercept (last).
    diagnostics_ : dict
        Per-parameter ``r_hat``, ``ess_bulk``, ``ess_tail``, ``mcse_mean``,
        ``inefficiency_factor``; per-chain ``acceptance_rate``,
        ``mean_accept_prob``, ``n_divergences``, ``n_evals`` (per-datum
        evaluations, tuning included), ``n_evals_per_iteration``,
        ``data_fraction_per_iteration``, ``wall_time``; ``ess_per_second``,
        ``tuning`` (step size, leapfrog steps, ...), ``choice`` (HMC-ECS:
        whether it subsampled or ran on the full data, the rows it read per
        evaluation and why, in words; None for other samplers), ``summary``
        (a table, with the choice under it).
    trace_ : Trace
        The full sampling result (warmup draws, per-iteration statistics).
    prior_scale_ : ndarray of shape (n_features,)
        The prior standard deviation of each coefficient (``"auto"`` resolved).
    intercept_prior_mean_, intercept_prior_scale_ : float
        The intercept's prior mean and standard deviation (the scale is None
        with ``fit_intercept=False``).
    n_features_in_ : int
"""


#: rows per chunk of the label passes (bounded temporaries on tall y)
_LABEL_CHUNK = 1 << 20


def _encode_labels(y):
    """``(classes, y01)``: the sorted distinct labels and, for two classes,
    ``y == classes[1]``: ``y`` itself when its labels are numeric 0/1 (the
    model stores them, ``check_targets``: one byte a row at most), else 0/1
    bytes; None for other numbers of classes.

    Numeric 0/1 labels are recognised in one compiled read (``count_binary``).
    Other labels are read in chunks (the distinct labels of each chunk, then a
    comparison per chunk), so tall label arrays need no sorted copy or index
    arrays: the memory added is one byte a row at most. Labels that cannot be
    ordered (str mixed with numbers, None) raise a clear ValueError.
    """
    if y.dtype.kind in "iub" or y.dtype in (np.float32, np.float64):
        zeros, ones = count_binary(y)
        if zeros + ones == y.shape[0]:
            classes = np.array([v for v, c in ((0, zeros), (1, ones)) if c], dtype=y.dtype)
            check_classification_targets(classes)
            return classes, (y if classes.shape[0] == 2 else None)
    try:
        parts = [np.unique(y[s:s + _LABEL_CHUNK]) for s in range(0, y.shape[0], _LABEL_CHUNK)]
        classes = np.unique(np.concatenate(parts)) if parts else np.unique(y)
        # the type of target follows from the distinct values
        check_classification_targets(classes)
    except TypeError as e:
        kinds = sorted({type(v).__name__ for v in np.asarray(y, dtype=object).ravel()})
        raise ValueError(
            f"y mixes label types that cannot be ordered ({', '.join(kinds)}): use labels of "
            "one type (all strings or all numbers, no None)") from e
    if classes.shape[0] != 2:
        return classes, None
    y01 = np.empty(y.shape[0], dtype=np.uint8)
    for s in range(0, y.shape[0], _LABEL_CHUNK):
        np.equal(y[s:s + _LABEL_CHUNK], classes[1], out=y01[s:s + _LABEL_CHUNK],
                 casting="unsafe")
    return classes, y01


def _class_indices(y, classes):
    """Labels as float64 class indices ``0 .. K - 1`` (chunked)."""
    out = np.empty(y.shape[0], dtype=np.float64)
    for s in range(0, y.shape[0], _LABEL_CHUNK):
        out[s:s + _LABEL_CHUNK] = np.searchsorted(classes, y[s:s + _LABEL_CHUNK])
    return out


class BayesianLogisticRegression(ClassifierMixin, BayesianGLMBase):
    __doc__ = f"""Bayesian logistic regression sampled by MCMC.

    Two classes: logistic regression (``classes_[1]`` is the positive class).
    More than two: multinomial (softmax) regression with one coefficient vector
    per class, :class:`~bayes_subsample.models.MultinomialLogisticModel`; every
    sampler runs on both (see the algorithm page on multinomial regression for
    the parameterisation and why its posterior is proper).

    Parameters
    ----------{_COMMON_DOC}
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted.{_ATTR_DOC}
    With more than two classes (``K = n_classes``, ``p1 = n_features_in_ +
    fit_intercept``), ``coef_`` has shape (K, n_features) and ``intercept_``
    (K,): the posterior means of the centred coefficients (each coordinate
    minus its mean over classes, the part the data identify; they sum to zero
    over classes, like scikit-learn's multinomial coefficients).
    ``posterior_draws_`` has shape (n_chains, n_samples, K * p1): the draws as
    sampled, one block of ``p1`` columns per class in the order of
    ``classes_`` (coefficients, then the intercept); a shift common to all
    classes changes no prediction and is left to the prior. The per-parameter
    entries of ``diagnostics_`` (R-hat, ESS, MCSE, the summary) describe the
    centred draws.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample import BayesianLogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = (X[:, 0] + rng.normal(size=200) > 0).astype(int)
    >>> clf = BayesianLogisticRegression(n_samples=200, n_warmup=200, n_chains=2,
    ...                                  random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:3]).shape
    (3, 2)
    """

    @all_or_nothing
    def fit(self, X, y, sample_weight=None):
        """Sample the posterior of the coefficients given ``X`` and binary ``y``.

        Parameters
        ----------
        X : array-like, sparse matrix or Dask array of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels. Two classes: float64 0/1 labels and 0/1 labels stored
            as uint8 or bool are used in place; other labels are encoded once,
            at one byte a row. More than two: multinomial regression.
        sample_weight : array-like of shape (n_samples,), optional
            Row weights ``w_k >= 0``: the log-likelihood is ``sum_k w_k l_k``,
            so an integer weight counts its row that many times (the "auto"
            priors use the weighted column statistics). Rows of weight 0 are
            left out (on a copy of the other rows); weights all 1 are the
            unweighted fit. Needs X in memory.

        Returns
        -------
        self
        """
        self._validate()
        # X's values are checked once, by the model (check_design: "X contains NaN
        # or infinity"), before anything reads them: scikit-learn's check would
        # be a second read of X (0.05 s per GB)
        X, y = self._check_fit_data(X, y, dtype=[np.float64, np.float32], order="C",
                                   accept_sparse="csr", ensure_all_finite=False)
        weights, X, (y,) = self._sample_weight(sample_weight, X, y)
        previous = getattr(self, "classes_", None) if self.warm_start else None
        self.classes_, y01 = _encode_labels(y)
        if self.classes_.shape[0] < 2:
            raise ValueError(
                "This solver needs samples of at least 2 classes in the data, but the data "
                f"contains only one class: {self.classes_[0]!r}"
            )
        if previous is not None and not np.array_equal(previous, self.classes_):
            raise ValueError(f"warm_start: the classes changed from {previous.tolist()} to "
                             f"{self.classes_.tolist()}; fit on the same data to continue")
        if y01 is None:
            K = self.classes_.shape[0]
            return self._fit_model(MultinomialLogisticModel, X,
                                   _class_indices(y, self.classes_), weights=weights,
                                   n_classes=K)
        return self._fit_model(LogisticRegressionModel, X, y01, weights=weights)

    @property
    def _multiclass(self):
        return self.classes_.shape[0] > 2

    def decision_function(self, X):
        """Binary: the log-odds of the posterior predictive probability of
        ``classes_[1]``, shape (n,). More than two classes: the log posterior
        predictive probabilities, shape (n, n_classes) (:meth:`predict_log_proba`;
        ``predict`` is their argmax).

        ``log p / (1 - p)`` with ``p = predict_proba(X)[:, 1]``, so it ranks
        samples exactly as ``predict_proba`` does (and ``predict`` is its sign).
        This is not ``X @ coef_ + intercept_`` (the linear predictor at the
        posterior mean), which averages before the sigmoid.
        """
        if is_dask_array(X):
            return self._blockwise(self.decision_function, X,
                                   self.classes_.shape[0] if self._multiclass else None)
        logp = self.predict_log_proba(X)
        if self._multiclass:
            return logp
        return logp[:, 1] - logp[:, 0]

    def predict_proba(self, X):
        """Posterior predictive class probabilities ``E[sigmoid(x^T theta)]``
        averaged over (at most 1000 evenly spaced) posterior draws, shape (n, 2);
        with more than two classes ``E[softmax(eta)]``, shape (n, n_classes).
        A Dask array ``X`` gives a Dask array, computed chunk by chunk where the
        chunks live (so do :meth:`predict`, :meth:`predict_log_proba` and
        :meth:`decision_function`)."""
        if is_dask_array(X):
            return self._blockwise(self.predict_proba, X, self.classes_.shape[0])
        out, blocks = self._draw_blocks(X)
        for rows, eta, w in blocks:
            if self._multiclass:
                out[rows] = np.einsum("nsk,s->nk", softmax(eta, axis=2), w)
            else:
                out[rows, 1] = expit(eta) @ w
        if self._multiclass:
            return np.clip(out, 0.0, 1.0)
        p1 = np.clip(out[:, 1], 0.0, 1.0)
        return np.column_stack([1.0 - p1, p1])

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, computed stably from the
        per-draw log-probabilities (log-sum-exp over the draws), shape (n, 2) or
        (n, n_classes)."""
        if is_dask_array(X):
            return self._blockwise(self.predict_log_proba, X, self.classes_.shape[0])
        out, blocks = self._draw_blocks(X)
        for rows, eta, w in blocks:
            if np.any(w < 0):
                # sign-corrected weights (signed HMC-ECS): no log-sum-exp form
                with np.errstate(divide="ignore"):
                    if self._multiclass:
                        out[rows] = np.log(np.clip(np.einsum("nsk,s->nk", softmax(eta, axis=2),
                                                             w), 0.0, 1.0))
                    else:
                        p1 = np.clip(expit(eta) @ w, 0.0, 1.0)
                        out[rows, 1] = np.log(p1)
                        out[rows, 0] = np.log1p(-p1)
                continue
            with np.errstate(divide="ignore"):
                lw = np.log(w)
            if self._multiclass:
                out[rows] = logsumexp(log_softmax(eta, axis=2) + lw[None, :, None], axis=1)
            else:
                out[rows, 1] = logsumexp(log_expit(eta) + lw, axis=1)
                out[rows, 0] = logsumexp(log_expit(-eta) + lw, axis=1)
        return out

    def _draw_blocks(self, X):
        """``(out, blocks)``: an empty output of shape (n, n_classes) and the
        blocks ``(rows, eta, w)`` of the rows of ``X`` (checked): the draws of their
        linear predictors (per class with more than two classes) and the draws'
        weights."""
        X = self._check_X(X)
        if self._multiclass:
            step, draws = _ROWS_MULTICLASS, self._class_predictor_draws
        else:
            step, draws = _ROWS, self._linear_predictor_draws
        blocks = ((slice(s, s + step), *draws(X[s:s + step]))
                  for s in range(0, X.shape[0], step))
        return np.empty((X.shape[0], self.classes_.shape[0])), blocks

    def predict(self, X):
        """The class of largest posterior predictive probability (binary: above 1/2)."""
        if is_dask_array(X):
            return self._blockwise(self.predict, X, dtype=self.classes_.dtype)
        proba = self.predict_proba(X)
        if self._multiclass:
            return self.classes_[np.argmax(proba, axis=1)]
        return self.classes_[(proba[:, 1] > 0.5).astype(int)]


def _floored_noise(sigma, y):
    """The least-squares noise estimate ``sigma``, at least 1e-3 x the scale of
    ``y`` (with a warning: an exact fit leaves no noise to estimate)."""
    sd = float(np.std(y))
    floor = 1e-3 * (sd if sd > 0 else max(1.0, float(np.max(np.abs(y)))))
    if sigma < floor:
        warnings.warn(
            f"noise_scale='plugin': y is fitted (almost) exactly by a linear function of X "
            f"(residual sd {sigma:.3g}), so the noise cannot be estimated; using "
            f"noise_scale_={floor:.3g} (1e-3 x the scale of y). Pass noise_scale to "
            "choose it.", UserWarning, stacklevel=4)
        return floor
    return sigma


def _exact_fit_noise(model, y, weights=None):
    """None, or (with a warning) the noise scale to hold fixed when the
    least-squares fit of ``model`` (a :class:`GaussianScaleRegressionModel`)
    leaves almost no residual: ``n <= p``, or a residual sd below 1e-3 x the
    scale of ``y`` (the floor of the plug-in). The data then bound the noise
    scale only from above; sampled, it would follow its prior towards 0 and
    the coefficients' spread with it (a funnel no sampler crosses). Models
    without sufficient statistics (more than 2,000 coefficients) are not
    checked. With row ``weights``, ``n`` counts each row by its weight."""
    if not model.compiled.has_statistics:
        return None
    n, p = model.n_data, model.n_cols
    sd = float(np.std(y))
    if weights is not None:
        n, sd = float(weights.sum()), target_stats(y, weights)[1]
    if n <= p:
        value, why = (sd if sd > 0 else 1.0), f"n = {n} rows for p = {p} coefficients"
    else:
        sigma = float(np.sqrt(model.statistics()[1] / (n - p)))
        floor = 1e-3 * (sd if sd > 0 else max(1.0, float(np.max(np.abs(y)))))
        if sigma >= floor:
            return None
        value, why = floor, f"least-squares residual sd {sigma:.3g}"
    warnings.warn(
        f"noise_scale='sample': y is fitted (almost) exactly by a linear function of X "
        f"({why}), so the data do not bound the noise scale from below and sampling it "
        f"would follow its prior towards 0; it is held fixed at noise_scale_={value:.3g} "
        f"instead ({'the sd of y' if n <= p else '1e-3 x the scale of y'}). Pass "
        "noise_scale (a float) to choose it.", UserWarning, stacklevel=4)
    return value


class _BayesianRegressorBase(RegressorMixin, BayesianGLMBase):
    def _validate_fit_data(self, X, y):
        """Validate the hyperparameters and the training data (``y`` as float64)."""
        self._validate()
        X, y = self._check_fit_data(X, y, dtype=[np.float64, np.float32], order="C",
                                   accept_sparse="csr", y_numeric=True)
        return X, np.asarray(y, dtype=np.float64)

    def _predictive_moments(self, X, offset=None):
        """Mean and sd of the posterior predictive of y."""
        raise NotImplementedError

    def predict(self, X, return_std=False):
        """Posterior predictive mean (and standard deviation with ``return_std``).
        A Dask array ``X`` gives Dask arrays, computed chunk by chunk where the
        chunks live."""
        if is_dask_array(X):
            mean = self._blockwise(self.predict, X)
            return (mean, self._blockwise(self._predict_std, X)) if return_std else mean
        return self._predict(self._check_X(X), return_std)

    def _predict(self, X, return_std, offset=None):
        """``predict`` on validated in-memory rows, with per-row ``offset`` (added to
        every draw's linear predictor) if given."""
        mean = np.empty(X.shape[0])
        std = np.empty(X.shape[0])
        step = _ROWS
        for s in range(0, X.shape[0], step):
            off = None if offset is None else offset[s:s + step]
            mean[s:s + step], std[s:s + step] = self._predictive_moments(X[s:s + step], off)
        return (mean, std) if return_std else mean

    def _predict_std(self, X):
        return self.predict(X, return_std=True)[1]

    def sample_y(self, X, n_samples=1, random_state=None):
        """Draws from the posterior predictive of y, shape (n, n_samples)."""
        return self._sample_y(self._check_X(X), n_samples, random_state)

    def _sample_y(self, X, n_samples, random_state, offset=None):
        if not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer, got {n_samples!r}")
        rng = np.random.default_rng(seed_sequence(random_state))
        draws = self.sample_posterior(n_samples=n_samples, random_state=rng)
        p = self.n_features_in_
        icpt = draws[:, p] if self.fit_intercept else 0.0
        eta = times_coef(X, draws[:, :p].T) + icpt
        if offset is not None:
            eta = eta + offset[:, None]
        return self._sample_observation(rng, eta, draws)


class BayesianLinearRegression(_BayesianRegressorBase):
    __doc__ = f"""Bayesian linear regression (Gaussian noise) sampled by MCMC.

    The model is ``y = X coef + intercept + sigma eps`` with ``eps ~ N(0, 1)``.
    By default the noise scale ``sigma`` is a parameter of the posterior,
    sampled with the coefficients (what Stan and PyMC users fit): the
    posterior's last column is ``log(sigma / s)``, ``s = noise_reference_``, the
    standard deviation of ``y``, with the prior ``log(sigma / s) ~ N(0,
    noise_prior_scale^2)``, a log-normal prior on ``sigma`` centred on the
    data's scale (see the user guide, "Linear regression"). Every sampler
    needs a zero-mean independent Gaussian prior on what it samples; on
    ``log(sigma / s)`` it is one, so every sampler and the Taylor control
    variates run on this model unchanged, where a half-normal or half-Student-t
    prior on ``sigma`` would not fit that contract. Given ``sigma`` the
    coefficients are Gaussian: with flat priors (large ``prior_scale``,
    ``intercept_prior_scale`` and ``noise_prior_scale``) the posterior is the
    normal-inverse-gamma one of least squares (coefficients Student-t with
    ``n - p`` degrees of freedom around the least-squares fit).

    Parameters
    ----------
    noise_scale : "sample", "plugin" or float, default="sample"
        The noise standard deviation ``sigma``. ``"sample"``: a parameter of
        the posterior, as above. ``"plugin"``: estimated once before sampling
        from the residuals of the (minimum-norm) least-squares fit, ``sqrt(RSS
        / (n - p))`` (``p`` counting the intercept; ``n <= p`` falls back to
        ``std(y)``, or 1 for constant ``y``), and held fixed (an
        empirical-Bayes plug-in, narrower than the posterior when ``n`` is
        small), at least 1e-3 times the standard deviation of ``y`` (when the
        fit is (almost) exact there is no noise to estimate; the floor, with a
        warning, keeps the posterior well conditioned). A float fixes it.
        ``None`` (the default before ``"sample"``, meaning the plug-in) is a
        deprecated spelling of ``"plugin"``.
    noise_prior_scale : float, default={NOISE_PRIOR_SCALE}
        ``noise_scale="sample"``: the prior standard deviation of ``log(sigma /
        s)`` (at 2.0, ``sigma`` lies within a factor 50 of ``s`` with prior
        probability 0.95).{_LINEAR_COMMON_DOC}
    Attributes
    ----------
    noise_scale_ : float
        The posterior mean of ``sigma`` (``"sample"``), or the fixed value used.
    noise_scale_std_ : float
        The posterior standard deviation of ``sigma`` (0.0 when it is fixed).
    noise_reference_ : float or None
        ``s``, the data's scale the noise prior is centred on (the standard
        deviation of ``y``; None when ``sigma`` is fixed).{_ATTR_DOC}
    With ``noise_scale="sample"``, ``posterior_draws_`` has one more column,
    the last: ``log(sigma / noise_reference_)`` (named ``log_noise_ratio``);
    ``predict(return_std=True)`` and :meth:`sample_y` use the draws of
    ``sigma`` (the posterior predictive). A Dask array ``X`` needs a fixed
    noise (``"plugin"`` or a float).

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample import BayesianLinearRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2)); y = X @ [1.0, -2.0] + rng.normal(size=100)
    >>> reg = BayesianLinearRegression(n_samples=500, n_warmup=500, n_chains=2,
    ...                                random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:2], return_std=True)
    >>> bool(0.8 < reg.noise_scale_ < 1.2)
    True
    """

    _parameter_constraints = {
        **BayesianGLMBase._parameter_constraints,
        "noise_scale": [Interval(Real, 0, None, closed="neither"),
                        StrOptions({"sample", "plugin"}), None],
        "noise_prior_scale": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, noise_scale="sample", noise_prior_scale=NOISE_PRIOR_SCALE,
                 sampler="hmc_ecs", n_samples=1000, n_warmup=1000, n_chains=4, n_jobs=None,
                 prior_scale="auto", intercept_prior_scale="auto", fit_intercept=True,
                 random_state=None, warm_start=False, progress=None):
        store_params(self, locals())

    def _noise_mode(self):
        """``"sample"``, ``"plugin"`` or ``"fixed"`` (``None``: the plug-in, with
        its deprecation warning)."""
        if self.noise_scale is None:
            warnings.warn(
                "BayesianLinearRegression(noise_scale=None) is deprecated and will be removed "
                "in 0.3: it means the least-squares plug-in, now spelled "
                "noise_scale='plugin'. The default is now noise_scale='sample' (the noise "
                "scale sampled with the coefficients).", FutureWarning, stacklevel=4)
            return "plugin"
        if isinstance(self.noise_scale, str):
            return self.noise_scale
        return "fixed"

    @property
    def _sampled_noise(self):
        return getattr(self, "noise_reference_", None) is not None

    @all_or_nothing
    def fit(self, X, y, sample_weight=None):
        """Sample the posterior of the coefficients (and of the noise scale, with
        ``noise_scale="sample"``) given ``X`` and ``y``.

        Parameters
        ----------
        X : array-like, sparse matrix or Dask array of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional
            Row weights ``w_k >= 0``: the log-likelihood is ``sum_k w_k l_k``,
            so an integer weight counts its row that many times (frequency
            weights: the "auto" priors, the plug-in noise estimate and its
            degrees of freedom use the weighted statistics). Rows of weight 0
            are left out; needs X in memory.

        Returns
        -------
        self
        """
        X, y = self._validate_fit_data(X, y)
        weights, X, (y,) = self._sample_weight(sample_weight, X, y)
        y_mean, y_scale = target_stats(y, weights)
        mode = self._noise_mode()
        fixed = None
        if mode == "sample":
            if is_dask_array(X):
                raise ValueError(
                    "noise_scale='sample' needs X in memory (a NumPy array, a memory map or "
                    "a scipy.sparse matrix): with a Dask array X, pass noise_scale='plugin' "
                    "(the noise scale estimated by one Dask pass and held fixed) or a float, "
                    "or bring X into memory (X.compute())")
            priors = self._resolve_priors(X, y_scale, y_mean, weights)
            model = GaussianScaleRegressionModel(
                X, y - priors.intercept_loc, fit_intercept=self.fit_intercept,
                prior_scale=priors.coef_scale, intercept_prior_scale=priors.intercept_scale,
                noise_prior_scale=self.noise_prior_scale, noise_reference=y_scale,
                **({} if weights is None else {"weights": weights}))
            fixed = _exact_fit_noise(model, y, weights)
            if fixed is None:
                self.noise_reference_ = model.noise_reference
                self._run(model, priors.intercept_loc)
                sigma = model.noise_scale(self._flat_draws())
                w = self.trace_.weights()
                self.noise_scale_ = float(w @ sigma)
                self.noise_scale_std_ = float(np.sqrt(max(
                    w @ (sigma - self.noise_scale_) ** 2, 0.0)))
                return self
        elif mode == "fixed":
            fixed = float(self.noise_scale)
        else:
            fixed = self._estimate_noise(X, y, weights)
        self.noise_scale_ = fixed
        self.noise_scale_std_ = 0.0
        self.noise_reference_ = None
        return self._fit_model(GaussianRegressionModel, X, y, y_scale=y_scale, y_mean=y_mean,
                               weights=weights, noise_scale=fixed)

    def _estimate_noise(self, X, y, weights=None):
        # rows counted by their weights (frequency weights)
        n = X.shape[0] if weights is None else float(weights.sum())
        p = X.shape[1] + int(self.fit_intercept)
        if n <= p:
            s = target_stats(y, weights)[1] if weights is not None else float(np.std(y))
            return s if s > 0 else 1.0
        if is_dask_array(X):
            return self._estimate_noise_dask(X, y, p)
        # normal equations in chunks (X is not copied; sparse X by sparse products)
        A, b = normal_equations(X, y, self.fit_intercept, weights)
        if not (np.isfinite(A).all() and np.isfinite(b).all()):
            raise self._overflow(X, y)
        # minimum-norm least squares (collinear columns allowed)
        beta = np.linalg.lstsq(A, b, rcond=None)[0]
        rss = 0.0
        step = max(1, 2**20 // max(1, X.shape[1]))
        for s in range(0, X.shape[0], step):
            pred = (times_coef(X[s:s + step], beta[:X.shape[1]])
                    + (beta[-1] if self.fit_intercept else 0.0))
            r2 = (y[s:s + step] - pred) ** 2
            rss += float(np.sum(r2) if weights is None else weights[s:s + step] @ r2)
        sigma = float(np.sqrt(rss / (n - p)))
        if not np.isfinite(sigma):
            raise self._overflow(X, y)
        return _floored_noise(sigma, y)

    def _estimate_noise_dask(self, X, y, p):
        """The least-squares residual sd from one Dask pass: ``X^T X``, ``X^T y``
        (intercept column included) reduced where the chunks live, and
        ``RSS = y^T y - 2 beta^T X^T y + beta^T X^T X beta``."""
        import dask.array as da
        Xf = X.astype(np.float64)
        if self.fit_intercept:
            Xf = da.concatenate([Xf, da.ones((X.shape[0], 1), chunks=(X.chunks[0], 1))],
                                axis=1)
        yd = da.from_array(y, chunks=(Xf.chunks[0],))
        A, b = da.compute(Xf.T @ Xf, Xf.T @ yd)
        if not (np.isfinite(A).all() and np.isfinite(b).all()):
            raise ValueError("noise_scale='plugin': the least-squares fit overflows float64. "
                             "Standardise X and y, or pass noise_scale.")
        beta = np.linalg.lstsq(A, b, rcond=None)[0]
        rss = max(0.0, float(y @ y - 2.0 * beta @ b + beta @ A @ beta))
        return _floored_noise(float(np.sqrt(rss / (X.shape[0] - p))), y)

    @staticmethod
    def _overflow(X, y):
        return ValueError(
            "noise_scale='plugin': the noise scale could not be estimated, the least-squares fit "
            f"overflows float64 (|X| up to {_absmax(X):.3g}, |y| up to "
            f"{float(np.max(np.abs(y))):.3g}). Standardise X and y, or pass noise_scale.")

    def _noise_draws(self, draws):
        """``sigma`` of each draw (``noise_scale="sample"``): the last column
        of ``draws`` is ``log(sigma / noise_reference_)``."""
        return self.noise_reference_ * np.exp(draws[..., -1])

    def _predictive_moments(self, X, offset=None):
        eta, w = self._linear_predictor_draws(X)
        mean, sd = _weighted_mean_sd(eta, w)
        if not self._sampled_noise:
            return mean, np.hypot(sd, self.noise_scale_)
        # Var y = Var[eta] + E[sigma^2] over the (same thinned) draws
        flat, w = self._thinned_draws(MAX_PREDICT_DRAWS)
        sigma = self._noise_draws(flat)
        return mean, np.sqrt(sd * sd + float(w @ (sigma * sigma)))

    def _sample_observation(self, rng, eta, draws):
        sigma = self._noise_draws(draws) if self._sampled_noise else self.noise_scale_
        return eta + sigma * rng.standard_normal(eta.shape)

    def summary(self):
        """The posterior summary table: one row per parameter (see
        :meth:`BayesianLogisticRegression.summary`). With ``noise_scale="sample"``
        the row ``log_noise_ratio`` is the sampled ``log(sigma / s)`` and a last
        row, ``sigma``, summarises the noise scale itself, with its prior
        ``lognormal(log(s), noise_prior_scale)``, ``s = noise_reference_``.

        Returns
        -------
        summary : :class:`~bayes_subsample.diagnostics.Summary`
        """
        table = super().summary()
        if not self._sampled_noise:
            return table
        sigma = self._noise_draws(self.trace_.reported_draws())[:, :, None]
        prior = (f"lognormal(log({self.noise_reference_:.4g}), "
                 f"{self.trace_.layout.prior_scales[-1]:.4g})")
        return table.append(diag.summary(sigma, names=["sigma"], priors=[prior]))

    def to_inference_data(self):
        """The fitted posterior as ``arviz.InferenceData`` (see
        :meth:`BayesianLogisticRegression.to_inference_data`); with
        ``noise_scale="sample"`` the posterior also holds ``sigma``."""
        idata = super().to_inference_data()
        if self._sampled_noise and "log_noise_ratio" in idata.posterior:
            t = idata.posterior["log_noise_ratio"]
            idata.posterior["sigma"] = t.copy(data=self._noise_draws(t.values[..., None]))
        return idata


def _weighted_mean_sd(v, w):
    """Mean and standard deviation of the rows of ``v`` (n, S) under the draw
    weights ``w`` (S,), computed on ``v`` scaled by each row's largest
    ``|v|``: ``E[v^2]`` overflows float64 for ``|v|`` above ~1e154 (e.g. a
    Poisson mean ``exp(eta)``, eta > 354) while the standard deviation does not."""
    mean = v @ w
    scale = np.max(np.abs(v), axis=1, initial=0.0)
    scale[~(scale > 0)] = 1.0
    z = v / scale[:, None]
    var_z = np.clip((z * z) @ w - (z @ w) ** 2, 0, None)
    return mean, scale * np.sqrt(var_z)


def _absmax(X, step=2**16):
    """``max |X|`` in row chunks (no copy of X; sparse: its stored values)."""
    if sparse.issparse(X):
        return float(np.max(np.abs(X.data), initial=0.0))
    return max((float(np.max(np.abs(X[s:s + step]))) for s in range(0, X.shape[0], step)),
               default=0.0)


def __getattr__(name):
    # pickles made before Poisson regression moved to _poisson.py name it here
    if name == "BayesianPoissonRegression":
        from ._poisson import BayesianPoissonRegression
        return BayesianPoissonRegression
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
