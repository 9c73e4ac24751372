"""Choosing a sampler's accuracy knob (austerity's ``epsilon``, the confidence
sampler's ``delta``, a step size) with scikit-learn's search.

Held-out scores cannot choose these knobs: they change how closely the chain
follows the posterior, not the model, and on tall data the posterior
predictive of a slightly biased chain scores the same as the exact one to four
decimals (a ``GridSearchCV`` over ``epsilon`` by ROC AUC breaks a tie by
noise). What decides is the sampler's bias against its cost.
:class:`SamplerScorer` measures both on the data the estimator was fitted on:
the bias of the posterior means against an exact reference fit of the same
model (NUTS by default, made once and reused for every candidate), net of the
Monte Carlo error of both, and the cost as full data passes per effective
draw. Its score is the negative cost for candidates within the stated
accuracy, and lower than any of those for the others, so that the search
returns the cheapest setting within the accuracy. :class:`WholeData` is the
"split" to search with: the candidates are fitted and scored on all rows.

Examples
--------
>>> import numpy as np
>>> from sklearn.model_selection import GridSearchCV
>>> from bayes_subsample import BayesianLogisticRegression
>>> from bayes_subsample.model_selection import SamplerScorer, WholeData
>>> from bayes_subsample.samplers import AusterityMH
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(2000, 3)); y = (X[:, 0] + rng.logistic(size=2000) > 0).astype(int)
>>> est = BayesianLogisticRegression(sampler=AusterityMH(), n_samples=300, n_warmup=300,
...                                  n_chains=2, random_state=0)
>>> search = GridSearchCV(est, {"sampler__epsilon": [0.0, 0.05]},
...                       scoring=SamplerScorer(tolerance=0.2), cv=WholeData(),
...                       refit=False).fit(X, y)
>>> sorted(search.cv_results_["params"][0])
['sampler__epsilon']
"""
from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import clone
from sklearn.utils.validation import _num_samples, check_is_fitted

from ._hashing import array_digest
from .linear_model._base import rows_signature
from .models._dask import is_dask_array

__all__ = ["SamplerScorer", "WholeData"]

#: the score of a candidate outside the accuracy is below ``-FAIL_SCORE``
FAIL_SCORE = 1e9

#: family-wise level of the Monte Carlo allowance over all parameters
_LEVEL = 0.05


class WholeData:
    """A cross-validation splitter with one split whose training and test rows
    are all the rows: ``GridSearchCV(..., cv=WholeData())`` fits each
    candidate on the data and scores it on the same data, which is what
    :class:`SamplerScorer` compares with the exact posterior."""

    def split(self, X, y=None, groups=None):
        """Yield ``(rows, rows)`` once, ``rows = arange(n_samples)``."""
        rows = np.arange(_num_samples(X))
        yield rows, rows

    def get_n_splits(self, X=None, y=None, groups=None):
        """1."""
        return 1

    def __repr__(self):
        return "WholeData()"


def _data_key(X, y):
    """A content hash of the data (X's values, y's), to reuse the reference
    fit for every candidate fitted on the same data."""
    if is_dask_array(X):
        return ("dask", X.name, array_digest(np.asarray(y)))
    if sparse.issparse(X):
        X = X.tocsr()
        return ("csr", X.shape, array_digest(X.data, X.indices, X.indptr, np.asarray(y)))
    return ("dense", array_digest(np.asarray(X), np.asarray(y)))


class SamplerScorer:
    """A scorer that trades a sampler's bias against its cost.

    ``scorer(estimator, X, y)`` compares the fitted ``estimator`` with a
    reference fit of the same estimator on the same ``X`` and ``y`` by an
    exact sampler, and returns:

    * ``-cost`` when the bias is within ``tolerance``;
    * ``-(FAIL_SCORE + bias)`` otherwise (``FAIL_SCORE = 1e9``): below every
      candidate within the accuracy, the least biased first.

    The bias is ``max_j max(0, |mean_j - ref_mean_j| - z se_j) / ref_sd_j``
    over the parameters: the distance of each posterior mean from the
    reference's, in reference posterior sds, less the Monte Carlo error of
    both means (``se_j^2 = mcse_j^2 + ref_mcse_j^2``; ``z`` the two-sided
    normal quantile at the family-wise level 5% over all parameters, e.g.
    3.1 for 29 of them). A candidate whose means are within ``tolerance``
    reference sds of the exact ones, as far as the two runs' lengths can
    tell, passes. The cost is per-datum evaluations of the whole fit (warmup
    and preparation included) over ``n`` and the smallest bulk ESS: full data
    passes per effective draw, counted, not timed (``cost="time"``: seconds
    per effective draw, over all chains).

    Use it with :class:`WholeData` as ``cv``, so that each candidate is
    scored on the data it was fitted on (a scorer call on other rows raises
    a ValueError).

    Parameters
    ----------
    tolerance : float, default=0.1
        The largest bias accepted, in posterior sds.
    reference : str or sampler object, default="nuts"
        The exact sampler of the reference fit (``"nuts"``, ``"hmc"``,
        ``"mh"``, or e.g. ``AusterityMH(epsilon=0)``). It is fitted once per
        data set with the estimator's other parameters (priors, chains,
        ``random_state``), ``n_samples`` and ``n_warmup`` as below, and
        reused for every candidate this scorer object scores (GridSearchCV
        with ``n_jobs > 1`` runs a copy per worker; pass ``reference_fit``
        to share one).
    reference_samples : int, default=1000
        ``n_samples`` and ``n_warmup`` of the reference fit.
    reference_fit : fitted estimator, optional
        A reference fitted already (on the data the candidates are fitted
        on), used instead of fitting one.
    cost : {"evaluations", "time"}, default="evaluations"
        What a candidate costs (see above).

    Attributes
    ----------
    reference_fits_ : dict
        The reference fits made, by data hash.

    Notes
    -----
    The reference's own Monte Carlo error enters the allowance, so a short
    reference makes the scorer lenient, not wrong: with 1000 draws in each of
    4 chains of NUTS the standard error of a mean is about 0.02 sd.
    Sign-corrected samplers (``"hmc_ecs_signed"``) are compared by their
    unweighted draws.
    """

    def __init__(self, tolerance=0.1, reference="nuts", reference_samples=1000,
                 reference_fit=None, cost="evaluations"):
        if not (isinstance(tolerance, Real) and math.isfinite(tolerance) and tolerance > 0):
            raise ValueError(f"tolerance must be a float > 0 (posterior sds), got {tolerance!r}")
        if not (isinstance(reference_samples, Integral) and reference_samples >= 10):
            raise ValueError(f"reference_samples must be an integer >= 10, got "
                             f"{reference_samples!r}")
        if cost not in ("evaluations", "time"):
            raise ValueError(f"cost must be 'evaluations' or 'time', got {cost!r}")
        self.tolerance = float(tolerance)
        self.reference = reference
        self.reference_samples = int(reference_samples)
        self.reference_fit = reference_fit
        self.cost = cost
        self.reference_fits_ = {}

    def __repr__(self):
        return (f"SamplerScorer(tolerance={self.tolerance}, reference={self.reference!r}, "
                f"cost={self.cost!r})")

    def __call__(self, estimator, X, y=None):
        return self.evaluate(estimator, X, y)["score"]

    # ---- the parts ---------------------------------------------------------------------
    def reference_for(self, estimator, X, y):
        """The reference fit for ``estimator``'s data (made on first use)."""
        if self.reference_fit is not None:
            check_is_fitted(self.reference_fit)
            return self.reference_fit
        key = _data_key(X, y)
        ref = self.reference_fits_.get(key)
        if ref is None:
            ref = clone(estimator).set_params(
                sampler=self.reference, n_samples=self.reference_samples,
                n_warmup=self.reference_samples, warm_start=False, progress=False)
            ref.fit(X, y)
            self.reference_fits_[key] = ref
        return ref

    def evaluate(self, estimator, X, y=None):
        """The figures behind the score, as a dict: ``bias`` (in reference
        sds, net of Monte Carlo error), ``max_mean_error_sd`` (the plain
        largest distance), ``within`` (bias <= tolerance), ``cost``,
        ``reference_cost`` (the reference's, for scale) and ``score``."""
        check_is_fitted(estimator)
        if getattr(estimator, "_weighted_fit", False) and self.reference_fit is None:
            raise ValueError(
                "SamplerScorer compares a fit with an exact fit of the same data, which it "
                "makes without sample_weight: score unweighted fits (or pass reference_fit, an "
                "exact fit with the same weights)")
        n = _num_samples(X)
        kept = getattr(estimator, "_rows_signature", None)
        if estimator.trace_.n_data != n or (kept is not None and kept != rows_signature(X)):
            raise ValueError(
                f"SamplerScorer compares a fit with the exact posterior of the data it was "
                f"fitted on, but it was fitted on {estimator.trace_.n_data} rows and is scored "
                f"on {n} {'other ' if estimator.trace_.n_data == n else ''}rows: search with "
                "cv=WholeData() (bayes_subsample.model_selection)")
        ref = self.reference_for(estimator, X, y)
        fit, exact = estimator.trace_.summary(), ref.trace_.summary()
        names = list(exact.names)
        if list(fit.names) != names:
            raise ValueError("the reference fit has other parameters than the estimator "
                             f"({len(names)} against {len(fit.names)}): fit it on the same "
                             "data with the same model")
        sd = np.asarray(exact["sd"], dtype=np.float64)
        gap = np.abs(np.asarray(fit["mean"]) - np.asarray(exact["mean"]))
        se = np.hypot(np.asarray(fit["mcse_mean"]), np.asarray(exact["mcse_mean"]))
        z = _normal_quantile(1.0 - _LEVEL / (2 * max(1, len(names))))
        with np.errstate(invalid="ignore", divide="ignore"):
            bias = float(np.nanmax(np.maximum(0.0, gap - z * se) / sd))
            plain = float(np.nanmax(gap / sd))
        cost = self._cost(estimator, n)
        within = bool(bias <= self.tolerance)
        return {"bias": bias, "max_mean_error_sd": plain, "within": within, "cost": cost,
                "reference_cost": self._cost(ref, n),
                "score": -cost if within else -(FAIL_SCORE + bias)}

    def _cost(self, est, n):
        trace = est.trace_
        ess = float(np.min(trace.summary()["ess_bulk"]))
        if not ess > 0:
            return math.inf
        if self.cost == "time":
            return float(trace.wall_time["total"]) / ess
        return float(np.sum(trace.n_evals_per_chain())) / max(1, n) / ess


def _normal_quantile(p):
    from scipy.stats import norm
    return float(norm.ppf(p))
