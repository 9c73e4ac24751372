"""Shared machinery of the Bayesian GLM estimators: validation, the call to
the sampling driver, posterior summaries and prediction helpers."""
from __future__ import annotations

import functools
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from .._driver import sample, seed_sequence
from .._hashing import array_digest
from .._interrupt import stop_description
from .._params import store_params
from ..models import GaussianRegressionModel, LogisticRegressionModel, PoissonRegressionModel
from ..models._dask import DaskGLM, is_dask_array
from ..samplers import SAMPLERS, BaseSampler
from ._layout import param_layout
from ._priors import data_priors

#: the family of each estimator model class a Dask array can be fitted with
_DASK_FAMILIES = {LogisticRegressionModel: "logistic", PoissonRegressionModel: "poisson",
                  GaussianRegressionModel: "gaussian"}

#: draws used by predict_proba / predict (evenly spaced over the pooled draws)
MAX_PREDICT_DRAWS = 1000


#: rows of X a fit keeps a hash of (evenly spaced), to tell later whether other
#: rows are its training data (model_selection.SamplerScorer)
_SIGNATURE_ROWS = 64


def rows_signature(X):
    """A hash of ``X``'s shape and of up to 64 evenly spaced rows (dense,
    sparse or Dask): cheap, and different for other rows of the same data
    set with near certainty."""
    n = X.shape[0]
    rows = np.unique(np.linspace(0, max(0, n - 1), min(n, _SIGNATURE_ROWS)).astype(np.intp))
    block = X[rows]
    if is_dask_array(block):
        block = block.compute()
    if sparse.issparse(block):
        block = block.toarray()
    return f"{tuple(X.shape)}:{array_digest(np.asarray(block, dtype=np.float64))}"


def _hashable(value):
    """A prior parameter as a comparable value ("auto", a float, or a tuple)."""
    if isinstance(value, str):
        return value
    return tuple(np.ravel(np.asarray(value, dtype=np.float64)).tolist())


def times_coef(X, coef_t):
    """``X @ coef_t`` as a float64 ndarray; a sparse ``X`` is multiplied as it
    is (never densified)."""
    if sparse.issparse(X):
        return np.asarray(X @ coef_t, dtype=np.float64)
    return np.asarray(X, dtype=np.float64) @ coef_t


def all_or_nothing(fit):
    """Make ``fit`` atomic: if it raises (an error, or an interrupt before any
    draw), the estimator's fitted attributes are restored to what they were
    (or it stays unfitted), never a mix of the new data's attributes and the
    old draws."""
    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        params = set(self.get_params(deep=False))
        before = {k: v for k, v in vars(self).items() if k not in params}
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            for k in [k for k in vars(self) if k not in params]:
                delattr(self, k)
            vars(self).update(before)
            raise
    return wrapper


class BayesianGLMBase(BaseEstimator):
    """Base of the estimators; subclasses set ``_family`` and build the model."""

    _parameter_constraints: dict = {
        "sampler": [StrOptions(set(SAMPLERS)), BaseSampler],
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "n_warmup": [Interval(Integral, 0, None, closed="left")],
        "n_chains": [Interval(Integral, 1, None, closed="left")],
        "n_jobs": [Integral, None],
        "prior_scale": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"}),
                        "array-like"],
        "intercept_prior_scale": [Interval(Real, 0, None, closed="neither"),
                                  StrOptions({"auto"})],
        "fit_intercept": ["boolean"],
        "random_state": ["random_state", np.random.Generator, np.random.SeedSequence],
        "warm_start": ["boolean"],
        "progress": ["boolean", None],
    }

    def __init__(self, sampler="hmc_ecs", n_samples=1000, n_warmup=1000, n_chains=4, n_jobs=None,
                 prior_scale="auto", intercept_prior_scale="auto", fit_intercept=True,
                 random_state=None, warm_start=False, progress=None):
        store_params(self, locals())

    def _validate(self):
        self._validate_params()
        if self.n_jobs == 0:
            raise ValueError("n_jobs == 0 has no meaning; use None, -1 or a positive integer")

    # ---- fitting -------------------------------------------------------------------
    def _check_fit_data(self, X, y, **kwargs):
        """scikit-learn's ``validate_data`` for in-memory data; a Dask array ``X``
        is checked without computing it (shape, dtype, known row chunks) and ``y``
        brought into this process (8 bytes per row)."""
        if not is_dask_array(X):
            return validate_data(self, X, y, **kwargs)
        if X.ndim != 2:
            raise ValueError(f"Expected a 2-D dask array X, got shape {X.shape}")
        if is_dask_array(y):
            y = y.compute()
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
        if kwargs.get("y_numeric") and y.dtype.kind not in "iubf":
            raise ValueError(f"y must be numeric, got dtype {y.dtype}")
        self.n_features_in_ = int(X.shape[1])
        self.__dict__.pop("feature_names_in_", None)
        return X, y

    def _sample_weight(self, sample_weight, X, *row_values):
        """``sample_weight`` checked (finite, >= 0, one per row of ``X``, not all
        zero) and applied: returns ``(weights, X, row_values)``. Rows of weight
        0 are dropped from ``X`` and from each array of ``row_values`` (a fit
        on them is a fit without them; a copy of the rows kept); ``weights`` is
        None when every weight is 1 (the unweighted fit, draw for draw) or when
        none is given. The weights are copied: the fit never reads the
        caller's array again."""
        self._weighted_fit = False
        if sample_weight is None:
            return None, X, row_values
        if is_dask_array(X):
            raise ValueError("sample_weight needs X in memory (a NumPy array, a memory map "
                             "or a scipy.sparse matrix), not a Dask array")
        w = np.array(_check_sample_weight(sample_weight, X, dtype=np.float64,
                                          ensure_non_negative=True), dtype=np.float64)
        keep = w > 0
        if not keep.all():
            X = X[keep]
            row_values = tuple(None if v is None else np.asarray(v)[keep] for v in row_values)
            w = w[keep]
        self._weighted_fit = not np.all(w == 1.0)
        return (w if self._weighted_fit else None), X, row_values

    def _resolve_priors(self, X, y_scale=1.0, y_mean=0.0, weights=None):
        """The fit's priors (``"auto"`` resolved on ``X``, see
        :mod:`~bayes_subsample.linear_model._priors`), kept as the fitted
        attributes ``prior_scale_``, ``intercept_prior_mean_`` and
        ``intercept_prior_scale_``. A ``warm_start`` continuation asked for the
        same priors keeps those of the run it continues (the chains continue
        on the same posterior; data edited since are refused by the run's data
        hash, with that message, not as a changed prior)."""
        request = (_hashable(self.prior_scale), _hashable(self.intercept_prior_scale),
                   self.fit_intercept)
        kept = self.__dict__.get("_priors")
        if (self.warm_start and kept is not None and kept[0] == request
                and getattr(self, "trace_", None) is not None):
            priors = kept[1]
        else:
            priors = data_priors(X, prior_scale=self.prior_scale,
                                 intercept_prior_scale=self.intercept_prior_scale,
                                 fit_intercept=self.fit_intercept, y_scale=y_scale,
                                 y_mean=y_mean, weights=weights)
        self._priors = (request, priors)
        self._rows_signature = rows_signature(X)
        self.prior_scale_ = np.array(priors.coef_scale, dtype=np.float64)
        self.intercept_prior_mean_ = priors.intercept_loc
        self.intercept_prior_scale_ = priors.intercept_scale if self.fit_intercept else None
        return priors

    def _fit_model(self, model_class, X, y, y_scale=1.0, y_mean=0.0, weights=None, **params):
        """Sample the posterior of ``model_class(X, y, **params)`` with the
        estimator's intercept and priors (``y_scale`` and ``y_mean`` are the
        data's scale and level that ``"auto"`` priors use) and the row
        ``weights`` (or none); returns ``self``.
        An intercept prior centred on ``m != 0`` is sampled as the intercept
        minus ``m`` given ``y - m`` (the same posterior shifted, for linear
        regression), so every sampler keeps its zero-mean prior. A Dask array
        ``X`` gets the model of the same family whose passes run where the
        chunks live (:class:`~bayes_subsample.models.DaskGLM`)."""
        priors = self._resolve_priors(X, y_scale, y_mean, weights)
        kw = dict(fit_intercept=self.fit_intercept, prior_scale=priors.coef_scale,
                  intercept_prior_scale=priors.intercept_scale, **params)
        if weights is not None:
            kw["weights"] = weights
        if priors.intercept_loc:
            y = y - priors.intercept_loc
        if is_dask_array(X):
            family = _DASK_FAMILIES.get(model_class)
            if family is None:
                raise ValueError(
                    f"{model_class.__name__} does not take a Dask array X (multiclass "
                    "fits need X in memory or memory-mapped)")
            self._run(DaskGLM(X, y, family, **kw), priors.intercept_loc)
        else:
            self._run(model_class(X, y, **kw), priors.intercept_loc)
        return self

    def _previous_run(self):
        """The trace a ``warm_start`` fit continues, or None for a fresh run."""
        old = getattr(self, "_sampled_trace", None) or getattr(self, "trace_", None)
        if not self.warm_start or old is None:
            return None
        if not old.resumable:
            raise ValueError(
                "warm_start=True, but the previous fit cannot be continued: its chain states "
                "were dropped (the estimator was pickled or cloned, fitted with "
                "warm_start=False, or a continuation of it failed). Fit once with "
                "warm_start=True, then fit again to continue.")
        if self.n_chains != old.n_chains:
            raise ValueError(f"warm_start continues the previous fit's {old.n_chains} chains; "
                             f"n_chains cannot change (got {self.n_chains})")
        n_warmup = old.run_state.n_warmup
        if self.n_warmup != n_warmup:
            raise ValueError(f"warm_start continues chains warmed up for {n_warmup} "
                             f"iterations; n_warmup cannot change (got {self.n_warmup})")
        return old

    def _run(self, model, intercept_loc=0.0):
        """Sample ``model``'s posterior and set the fitted attributes. With
        ``intercept_loc`` (the model was given ``y - intercept_loc``) the
        intercept's draws in ``trace_`` are shifted back; the trace as sampled
        is kept for ``warm_start``."""
        K = getattr(model, "n_classes", None)
        layout = param_layout(model, feature_names=getattr(self, "feature_names_in_", None),
                              classes=getattr(self, "classes_", None),
                              intercept_loc=intercept_loc)
        previous = self._previous_run()
        if previous is not None:
            # an interrupted fit is completed first; a complete one gains n_samples draws
            trace = sample(model, self.sampler, resume=previous, n_jobs=self.n_jobs,
                           n_samples=None if previous.interrupted else self.n_samples,
                           progress=self.progress)
        else:
            rs = self.random_state
            if isinstance(rs, np.random.RandomState):
                rs = int(rs.randint(2**31))
            trace = sample(model, self.sampler, n_samples=self.n_samples, n_warmup=self.n_warmup,
                           n_chains=self.n_chains, n_jobs=self.n_jobs,
                           random_state=seed_sequence(rs), progress=self.progress,
                           param_names=layout.names)
        if trace.chain_lengths.sum() == 0:
            # Ctrl-C (or SIGTERM) before any retained draw: nothing to fit, let the
            # interrupt through
            raise KeyboardInterrupt(f"sampling was {stop_description()} before any draw was "
                                    "retained")
        if not (self.warm_start or trace.interrupted):
            trace.run_state = None    # it references the data; keep it only to continue
        trace.param_names, trace.layout = layout.names, layout
        self.__dict__.pop("_sampled_trace", None)
        if intercept_loc:
            if trace.resumable:
                self._sampled_trace = trace
            trace = trace.shifted({model.n_features: intercept_loc})
        self.trace_ = trace
        self.posterior_draws_ = trace.draws
        mean = trace.posterior_mean()
        p = model.n_features
        if K is None:
            self.coef_ = mean[:p].copy()
            self.intercept_ = float(mean[p]) if model.fit_intercept else 0.0
        else:
            # posterior means of the centred coefficients (each coordinate minus its
            # mean over classes): the part the data identify, summing to zero over
            # classes like scikit-learn's multinomial coefficients
            coef, icpt = model.unpack(mean)
            self.coef_ = coef - coef.mean(axis=0)
            self.intercept_ = icpt - icpt.mean()
        self.diagnostics_ = self._diagnostics(trace)
        if trace.signs is not None:
            self.posterior_signs_ = trace.signs
            self.tau_hat_ = float((trace.pooled_signs() > 0).mean())
        else:
            # a previous fit's signs would describe other draws
            self.__dict__.pop("posterior_signs_", None)
            self.__dict__.pop("tau_hat_", None)

    @staticmethod
    def _diagnostics(trace):
        d = trace.diagnostics()
        d["sampler"] = trace.sampler.name
        d["tuning"] = trace.tuning
        d["choice"] = trace.choice()
        d["interrupted"] = trace.interrupted
        d["summary"] = trace.summary() if trace.common_draws().shape[1] >= 4 else None
        return d

    # ---- posterior access --------------------------------------------------------------
    def _flat_draws(self):
        return self.trace_.pooled_draws()

    def _thinned_draws(self, max_draws=None):
        """``(draws (S, n_params), weights (S,))`` pooled over chains, evenly
        thinned to at most ``max_draws``; weights are the sign-correction
        weights (uniform for unsigned samplers)."""
        flat = self._flat_draws()
        w = self.trace_.weights()
        if max_draws is not None and flat.shape[0] > max_draws:
            keep = np.linspace(0, flat.shape[0] - 1, max_draws).round().astype(np.int64)
            flat, w = flat[keep], w[keep]
            w = w / w.sum()
        return flat, w

    def _coef_draws(self, max_draws=None):
        """``(coef draws (S, d), intercept draws (S,), weights (S,))``, pooled over
        chains, evenly thinned to at most ``max_draws``; weights are the
        sign-correction weights (uniform for unsigned samplers)."""
        flat, w = self._thinned_draws(max_draws)
        p = self.n_features_in_
        icpt = flat[:, p] if self.fit_intercept else np.zeros(flat.shape[0])
        return flat[:, :p], icpt, w

    def sample_posterior(self, n_samples=None, random_state=None):
        """Posterior draws of ``(coef, intercept)``, shape (n_draws, n_params).

        Parameters
        ----------
        n_samples : int, optional
            ``None`` returns all retained draws pooled over chains (chain-major
            order). An integer returns that many draws resampled with
            replacement.
        random_state : int, Generator or None
            For the resampling.

        Returns
        -------
        ndarray of shape (n_draws, n_features + fit_intercept)
            Coefficients first, intercept last.

        Notes
        -----
        For signed samplers (``sampler="hmc_ecs_signed"``) the posterior is the
        sign-weighted draws. With ``n_samples=None`` only draws with a positive
        sign are returned (exact when every sign is positive; see
        ``tau_hat_``); with an integer, draws are resampled with probabilities
        proportional to the positive part of the sign weights.
        """
        check_is_fitted(self)
        flat = self._flat_draws()
        signs = self.trace_.pooled_signs()
        if n_samples is None:
            if signs is None:
                return flat.copy()
            return flat[signs > 0].copy()
        if not isinstance(n_samples, Integral) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer or None, got {n_samples!r}")
        rng = np.random.default_rng(seed_sequence(random_state))
        if signs is None:
            idx = rng.integers(0, flat.shape[0], size=n_samples)
        else:
            prob = np.clip(signs.astype(float), 0, None)
            idx = rng.choice(flat.shape[0], size=n_samples, p=prob / prob.sum())
        return flat[idx].copy()

    def _check_X(self, X):
        check_is_fitted(self)
        if is_dask_array(X):
            raise TypeError(
                "this method needs X in memory (predict, predict_proba, predict_log_proba "
                "and decision_function take a Dask array and return one, computed chunk "
                "by chunk where the chunks live)")
        return validate_data(self, X, reset=False, dtype=[np.float64, np.float32],
                             accept_sparse="csr")

    def _blockwise(self, method, X, width=None, dtype=np.float64):
        """``method`` (a prediction method taking in-memory rows) on each row chunk
        of the Dask array ``X``, where the chunk lives: a Dask array of shape
        (n,) (``width`` None) or (n, width)."""
        check_is_fitted(self)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[-1]} features, but {type(self).__name__} is "
                             f"expecting {self.n_features_in_} features as input.")
        if len(X.chunks[1]) > 1:
            X = X.rechunk({1: -1})
        if width is None:
            return X.map_blocks(method, drop_axis=1, dtype=dtype, meta=np.empty(0, dtype))
        return X.map_blocks(method, chunks=(X.chunks[0], (width,)), dtype=dtype,
                            meta=np.empty((0, 0), dtype))

    def _linear_predictor_draws(self, X, max_draws=MAX_PREDICT_DRAWS):
        """``eta`` for every (thinned) draw: shape (n, S), and the weights."""
        coef, icpt, w = self._coef_draws(max_draws)
        eta = times_coef(X, coef.T) + icpt[None, :]
        return eta, w

    def _class_predictor_draws(self, X, max_draws=MAX_PREDICT_DRAWS):
        """Multinomial fits: ``eta`` of shape (n, S, K) for every (thinned) draw,
        and the weights (the draws' class blocks as ``_coef_draws`` thins them)."""
        flat, w = self._thinned_draws(max_draws)
        K, d = self.classes_.shape[0], self.n_features_in_
        t = flat.reshape(flat.shape[0], K, -1)
        coef = t[:, :, :d]                                   # (S, K, d)
        icpt = t[:, :, d] if self.fit_intercept else np.zeros((flat.shape[0], K))
        eta = times_coef(X, coef.reshape(-1, d).T).reshape(X.shape[0], flat.shape[0], K)
        return eta + icpt[None, :, :], w

    def summary(self):
        """The posterior summary table: one row per parameter.

        Rows are named ``coef[<feature>]`` (the column names of a DataFrame
        ``X``, else ``coef[0]``, ``coef[1]``, ...) and ``intercept``; with more
        than two classes ``coef[<class>, <feature>]`` and
        ``intercept[<class>]``, describing the centred coefficients (see
        ``coef_``). The columns are the prior of each parameter, the
        posterior mean, sd, 5% and 95% quantiles, the Monte Carlo standard
        error of the mean, bulk and tail ESS and R-hat, computed once, when
        the fit checked convergence (the same numbers as ``diagnostics_``).

        Returns
        -------
        summary : :class:`~bayes_subsample.diagnostics.Summary`
            Printing it shows the table (and what the sampler chose, under
            it); ``summary.to_pandas()`` gives a DataFrame indexed by the
            names, ``summary.to_dict()`` a dict of columns.

        Examples
        --------
        >>> from bayes_subsample import BayesianLogisticRegression
        >>> from bayes_subsample.datasets import make_logistic_data
        >>> X, y = make_logistic_data(300, 2, random_state=0)
        >>> s = BayesianLogisticRegression(n_samples=200, n_warmup=200, n_chains=2,
        ...                                random_state=0).fit(X, y).summary()
        >>> s.names, s.priors[0]
        (['coef[0]', 'coef[1]', 'intercept'], 'normal(0, 2.401)')
        """
        check_is_fitted(self)
        return self.trace_.summary()

    def to_inference_data(self):
        """The fitted posterior as ``arviz.InferenceData`` (needs arviz): the
        variables ``coef`` (dimension ``feature``, or ``class`` and
        ``feature``, labelled as in :meth:`summary`) and ``intercept``, and
        the per-iteration sample statistics."""
        check_is_fitted(self)
        return self.trace_.to_inference_data()

    def __getstate__(self):
        state = dict(super().__getstate__())      # a copy: the object's own dict otherwise
        # the trace as sampled (shifted intercept) serves only warm_start, which
        # a pickled estimator cannot do (the chain states are not pickled)
        state.pop("_sampled_trace", None)
        return state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        tags.input_tags.sparse = True     # CSR (other formats converted), never densified
        return tags
