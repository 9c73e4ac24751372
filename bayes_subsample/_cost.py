"""The predicted cost of a run, said before the run is long: after the chains'
first seconds the driver knows their speed; if the whole run is estimated to
take more than :data:`LONG_FIT_SECONDS`, one :class:`~bayes_subsample.exceptions.LongFitWarning`
says so, with the likely cause in the data or the sampler and what to do, and
a progress bar appears (unless ``progress=False``).

The cause detection (:func:`design_report`) is one cheap pass over ``X``
(dense or scipy.sparse) and runs only when the warning is emitted.
"""
from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

from .exceptions import LongFitWarning

__all__ = ["LONG_FIT_SECONDS", "CHECK_AFTER_SECONDS", "INDICATOR_MAX_ABS", "ROW_NORM_RATIO",
           "estimate_total_seconds", "design_report", "DesignReport", "likely_causes",
           "long_fit_message", "CostWatch"]

#: a run estimated to take longer than this many seconds (warmup and sampling
#: of all chains, at the speed measured so far) gets a LongFitWarning
LONG_FIT_SECONDS = 300.0
#: the first estimate is made after the chains ran this many seconds; if it is
#: below the threshold, the estimate is made again each time the elapsed time
#: doubles (early warmup iterations may be cheaper than later ones)
CHECK_AFTER_SECONDS = 10.0
#: a two-valued column other than 0/1 whose largest absolute value exceeds this
#: looks like a standardised rare indicator (a standardised 0/1 column with a
#: fraction ``p`` of ones reaches ``sqrt((1 - p) / p)``: above 5 for ``p`` < 4%)
INDICATOR_MAX_ABS = 5.0
#: rows "dominate" when the largest row norm exceeds the median one this many times
ROW_NORM_RATIO = 20.0
#: evaluations per iteration, as a multiple of the rows, from which a sampler
#: is said to read all the data at every step
FULL_DATA_READS = 1.0
#: data size (rows) from which reading all of it per step is named as a cause
FULL_DATA_MIN_ROWS = 10_000
#: the registered samplers that read every row at every step, whatever the data
FULL_DATA_SAMPLERS = ("mh", "hmc", "nuts")
#: the registered samplers whose iteration is ``n_steps`` minibatch steps (the
#: thinning): many of them make an iteration read as much as a full pass
THINNED_SG_SAMPLERS = ("sgld", "sghmc", "ewsg", "psgld")
#: rows per chunk of the passes over a dense X (bounded temporaries)
_CHUNK = 1 << 16
#: two-valued columns beyond this many are not checked for separated classes
_MAX_SEPARATION_COLUMNS = 4096
#: columns and rows named in a message
_SHOW = 5


def estimate_total_seconds(elapsed, n_done, n_total):
    """Seconds the whole run takes at the speed measured so far: ``elapsed``
    seconds for ``n_done`` of its ``n_total`` iterations (all chains; the
    chains running at once are in the measured speed). ``inf`` before the
    first iteration."""
    if n_done <= 0:
        return float("inf")
    return float(elapsed) * float(n_total) / float(n_done)


@dataclass
class DesignReport:
    """What in a design matrix makes fits slow (see :func:`design_report`).

    Attributes
    ----------
    indicator_columns : ndarray of int
        Columns with exactly two distinct values, not 0 and 1, the largest in
        absolute value above :data:`INDICATOR_MAX_ABS`: standardised rare 0/1
        indicators, by decreasing largest absolute value.
    indicator_max_abs : ndarray of float
        Their largest absolute values.
    row_norm_ratio : float
        Largest row norm over the median row norm (raw ``X``, no intercept;
        ``inf`` when the median is 0 and some row is not).
    dominant_rows : ndarray of int
        Rows whose norm exceeds :data:`ROW_NORM_RATIO` times the median, the
        largest first (at most a few).
    separated_pairs : int
        With class labels: the (class, two-valued column) pairs where no row of
        the class has the column's rarer value, though other rows do (the
        classes are separated along that column: its coefficient for the class
        is bounded by the prior alone on one side).
    separated_columns : ndarray of int
        The columns of those pairs, the ones with most separated classes first.
    """

    indicator_columns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    indicator_max_abs: np.ndarray = field(default_factory=lambda: np.zeros(0))
    row_norm_ratio: float = 1.0
    dominant_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    separated_pairs: int = 0
    separated_columns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def _dense_columns(X):
    """``(min, max, two_valued)`` of each column of a dense X, in chunks of rows."""
    n, d = X.shape
    lo, hi = np.full(d, np.inf), np.full(d, -np.inf)
    for s in range(0, n, _CHUNK):
        block = X[s:s + _CHUNK]
        np.minimum(lo, block.min(axis=0), out=lo)
        np.maximum(hi, block.max(axis=0), out=hi)
    other = np.zeros(d, dtype=bool)        # a value neither min nor max
    for s in range(0, n, _CHUNK):
        block = X[s:s + _CHUNK]
        other |= ~((block == lo) | (block == hi)).all(axis=0)
    return lo, hi, (lo != hi) & ~other


def _sparse_columns(X):
    """``(min, max, two_valued)`` of each column of a CSR/CSC X from its stored
    entries and the implicit zeros (one pass over ``data``)."""
    X = X.tocsr()
    n, d = X.shape
    data, cols = X.data[:X.nnz], X.indices[:X.nnz]
    lo, hi = np.full(d, np.inf), np.full(d, -np.inf)
    np.minimum.at(lo, cols, data)
    np.maximum.at(hi, cols, data)
    implicit = np.bincount(cols, minlength=d) < n       # some zeros not stored
    lo[implicit] = np.minimum(lo[implicit], 0.0)
    hi[implicit] = np.maximum(hi[implicit], 0.0)
    bad = (data != lo[cols]) & (data != hi[cols])
    other = np.bincount(cols[bad], minlength=d) > 0
    return lo, hi, (lo != hi) & ~other


def _row_norms(X):
    if sparse.issparse(X):
        X = X.tocsr()
        return np.sqrt(np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel())
    out = np.empty(X.shape[0])
    for s in range(0, X.shape[0], _CHUNK):
        block = np.asarray(X[s:s + _CHUNK], dtype=np.float64)
        out[s:s + _CHUNK] = np.sqrt(np.einsum("ij,ij->i", block, block))
    return out


def design_report(X, labels=None, n_classes=None):
    """Look for what makes fits on ``X`` slow, in one cheap pass: standardised
    rare 0/1 indicators (two-valued columns other than 0/1 reaching large
    values: a StandardScaler'd indicator present in 0.1% of the rows reaches
    about 30), rows whose norm dominates and, given class ``labels`` (integers
    in ``[0, n_classes)``), classes separated along two-valued columns. ``X`` is
    a dense array or a scipy.sparse matrix (read through its stored entries).
    Returns a :class:`DesignReport`."""
    if sparse.issparse(X):
        lo, hi, two = _sparse_columns(X)
    else:
        X = np.asarray(X)
        lo, hi, two = _dense_columns(X)
    big = np.maximum(np.abs(lo), np.abs(hi))
    flagged = np.flatnonzero(two & ~((lo == 0) & (hi == 1)) & (big > INDICATOR_MAX_ABS))
    flagged = flagged[np.argsort(-big[flagged], kind="stable")]
    norms = _row_norms(X)
    med, top = float(np.median(norms)), float(norms.max())
    ratio = top / med if med > 0 else (float("inf") if top > 0 else 1.0)
    rows = np.zeros(0, dtype=np.int64)
    if ratio > ROW_NORM_RATIO:
        rows = np.flatnonzero(norms > ROW_NORM_RATIO * med)
        rows = rows[np.argsort(-norms[rows], kind="stable")][:_SHOW]
    pairs, sep_cols = 0, np.zeros(0, dtype=np.int64)
    if labels is not None:
        pairs, sep_cols = _separated(X, np.asarray(labels), n_classes, lo, hi, two)
    return DesignReport(flagged, big[flagged], ratio, rows, pairs, sep_cols)


def _separated(X, labels, n_classes, lo, hi, two):
    """``(pairs, columns)`` of :attr:`DesignReport.separated_pairs` /
    ``separated_columns``: per class, the rows with each two-valued column's
    rarer value, counted in chunks of rows."""
    cols = np.flatnonzero(two)
    if len(cols) == 0 or len(cols) > _MAX_SEPARATION_COLUMNS:
        return 0, np.zeros(0, dtype=np.int64)
    labels = labels.astype(np.int64, copy=False)
    k = int(n_classes) if n_classes is not None else int(labels.max()) + 1
    n = X.shape[0]
    at_hi = np.zeros((k, len(cols)))
    for s in range(0, n, _CHUNK):
        block = X[s:s + _CHUNK][:, cols]
        block = block.toarray() if sparse.issparse(block) else np.asarray(block)
        onehot = np.zeros((block.shape[0], k))
        onehot[np.arange(block.shape[0]), labels[s:s + _CHUNK]] = 1.0
        at_hi += onehot.T @ (block == hi[cols]).astype(np.float64)
    per_class = np.bincount(labels, minlength=k).astype(np.float64)
    rare_hi = at_hi.sum(axis=0) <= n / 2           # the rarer value of each column
    rare = np.where(rare_hi, at_hi, per_class[:, None] - at_hi)
    sep = (rare == 0) & (per_class[:, None] > 0) & (rare.sum(axis=0) > 0)
    order = np.argsort(-sep.sum(axis=0), kind="stable")
    order = order[sep.sum(axis=0)[order] > 0]
    return int(sep.sum()), cols[order]


def _names(indices, feature_names):
    shown = [str(feature_names[k]) if feature_names is not None else str(k)
             for k in indices[:_SHOW]]
    more = f" and {len(indices) - _SHOW} more" if len(indices) > _SHOW else ""
    return ", ".join(shown) + more


def likely_causes(X=None, *, labels=None, n_classes=None, feature_names=None,
                  sampler_name=None, n_data=None, evals_per_iteration=None):
    """The likely causes of a slow fit, each a sentence with what to do: from
    the design ``X`` and the class ``labels`` of a classification model (see
    :func:`design_report`; None: not looked at) and from the sampler's
    measured per-datum evaluations per iteration on ``n_data`` rows (a
    sampler that reads all the data at every step)."""
    causes = []
    if X is not None:
        rep = design_report(X, labels, n_classes)
        if len(rep.indicator_columns):
            cols = _names(rep.indicator_columns, feature_names)
            causes.append(
                f"X has {len(rep.indicator_columns)} two-valued column(s) that look like "
                f"standardised rare 0/1 indicators (columns {cols}; values up to "
                f"{rep.indicator_max_abs[0]:.3g} in absolute value): they make the posterior "
                "badly scaled and the sampler's steps tiny. Leave 0/1 indicator columns "
                "unscaled (e.g. a ColumnTransformer with StandardScaler on the continuous "
                "columns only), or, for covtype, use load_covtype(standardize=True)")
        # (standardised indicators make their rows dominate: said once, above)
        elif len(rep.dominant_rows):
            causes.append(
                f"some rows dominate: the largest row norm is {rep.row_norm_ratio:.3g} times "
                f"the median one (rows {_names(rep.dominant_rows, None)}); check those rows "
                "for extreme values, and scale columns so that no single value is extreme")
        if rep.separated_pairs:
            cols = _names(rep.separated_columns, feature_names)
            causes.append(
                f"in {rep.separated_pairs} (class, column) pair(s) no row of the class has "
                f"the column's rarer value (columns {cols}): the data separate those classes "
                "along those columns, so their coefficients are bounded on one side by the "
                "prior alone, and the sampler needs small steps between that wide, flat "
                "side and the likelihood's steep one. The fit is right, only slow; a "
                "smaller prior_scale, merging rare levels of a categorical variable, or "
                "dropping columns no row of some class has makes it faster")
    if (evals_per_iteration is not None and n_data and n_data >= FULL_DATA_MIN_ROWS
            and evals_per_iteration >= FULL_DATA_READS * n_data):
        passes = f"about {evals_per_iteration / n_data:.3g} full passes per iteration"
        if sampler_name in THINNED_SG_SAMPLERS:
            causes.append(
                f"each recorded iteration of the sampler {sampler_name!r} is many minibatch "
                f"steps (n_steps, the thinning: {passes}), so the fit costs its budget of "
                "data passes: fewer passes (n_passes for the neural-network estimators), "
                "fewer iterations or a smaller n_steps cost less")
        elif sampler_name in FULL_DATA_SAMPLERS:
            causes.append(
                f"the sampler {sampler_name!r} reads all {n_data} rows at every step "
                f"({passes}): on data this large a subsampling sampler (sampler='hmc_ecs', "
                "the default) costs less per iteration")
        else:
            name = f"the sampler {sampler_name!r}" if sampler_name else "the sampler"
            causes.append(
                f"{name} read all {n_data} rows at every iteration so far ({passes}: exact "
                "warmup passes, or the full data where subsampling would not pay); if it "
                "subsamples later, the rest of the fit costs less than estimated")
    return causes


def _duration(seconds):
    if not np.isfinite(seconds):
        return "an unknown time"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def long_fit_message(estimate, elapsed, n_done, n_total, causes, *, showing_progress=False):
    """The text of the LongFitWarning."""
    text = (f"this fit is estimated to take about {_duration(estimate)} (measured: "
            f"{n_done} of its {n_total} iterations in {elapsed:.1f} s; a rough estimate: "
            "warmup iterations can cost more or less than sampling ones)")
    if causes:
        text += ". Likely cause" + ("s" if len(causes) > 1 else "") + ": " + "; ".join(causes)
    else:
        text += (". No cause was found in the data (standardised indicators, dominant "
                 "rows) or the sampler; many parameters or a strongly correlated posterior "
                 "also make fits slow (see the user guide, 'Before you fit')")
    if showing_progress:
        text += ". Progress is shown from here on"
    return text + "."


def _tqdm_available():
    try:
        import tqdm.auto  # noqa: F401
    except ImportError:
        return False
    return True


def make_progress_bar(total, initial=0):
    """A tqdm bar over ``total`` iterations (ImportError with the install
    command when tqdm is missing)."""
    try:
        from tqdm.auto import tqdm
    except ImportError as e:
        raise ImportError("progress=True needs tqdm: pip install tqdm") from e
    return tqdm(total=total, initial=initial, unit="it", desc="sampling")


class CostWatch:
    """The progress display of a run in threads and its cost check, used by
    the driver where it used a tqdm bar (``update``, ``set_postfix``,
    ``close``); ``tick()`` is called after every iteration of any chain.

    ``progress``: True shows the bar from the start, False never, None (the
    default of the estimators) from the moment the long-fit warning is
    emitted, if tqdm is installed. The check only reads a clock per
    iteration, and never touches the chains' random streams.

    Parameters
    ----------
    progress : bool or None
    total : int
        Iterations (all chains) this call runs.
    done : callable
        Iterations run so far in this call (read at check times only).
    causes : callable
        The likely causes (a list of sentences), called once, when warning.
    stop : threading.Event, optional
        Set when the warning is turned into an error (``-W error``), so that
        every chain stops before the error is raised.
    clock : callable, default=time.perf_counter
    """

    def __init__(self, progress, total, done, causes, stop=None, clock=time.perf_counter):
        self.total = int(total)
        self._progress = progress
        self._done = done
        self._causes = causes
        self._stop = stop
        self._clock = clock
        self._lock = threading.Lock()
        self._counted = 0                 # iterations reported through update()
        self.bar = make_progress_bar(self.total) if progress else None
        self.warned = False
        self._t0 = clock()
        self._next = self._t0 + CHECK_AFTER_SECONDS

    # ---- the tqdm-like side ------------------------------------------------------
    def update(self, n):
        self._counted += n
        if self.bar is not None:
            self.bar.update(n)
        self.tick()

    def set_postfix(self, **kwargs):
        if self.bar is not None:
            self.bar.set_postfix(**kwargs)

    def close(self):
        if self.bar is not None:
            self.bar.close()

    # ---- the cost check ----------------------------------------------------------
    def tick(self):
        """After an iteration: estimate the run's cost when a check is due."""
        if self.warned:
            return
        now = self._clock()
        if now < self._next or not self._lock.acquire(blocking=False):
            return
        try:
            if not self.warned and now >= self._next:
                self.check(now - self._t0, int(self._done()))
        finally:
            self._lock.release()

    def check(self, elapsed, n_done):
        """Decide, from ``elapsed`` seconds for ``n_done`` iterations, whether
        to warn (at most once); returns the estimate in seconds."""
        estimate = estimate_total_seconds(elapsed, n_done, self.total)
        # the next check when the elapsed time has doubled
        self._next = self._t0 + max(2 * elapsed, CHECK_AFTER_SECONDS)
        if self.warned or not estimate > LONG_FIT_SECONDS:
            return estimate
        self.warned = True
        show = self._progress is None and self.bar is None and _tqdm_available()
        text = long_fit_message(estimate, elapsed, n_done, self.total, self._causes(),
                                showing_progress=show or self.bar is not None)
        if self._progress is None and not show:
            text += " Install tqdm to see the progress of long fits."
        try:
            warnings.warn(text, LongFitWarning, stacklevel=2)
        except LongFitWarning:
            # warnings turned into errors: stop every chain, then raise
            if self._stop is not None:
                self._stop.set()
            raise
        if show:
            self.bar = make_progress_bar(self.total, initial=min(self._counted, self.total))
        return estimate


def run_causes(model, sampler, recorders):
    """A callable giving the likely causes of a slow run of ``sampler`` on
    ``model`` (used by :class:`CostWatch`): its design matrix when it has one
    in memory (``model.X``, dense or scipy.sparse), and the per-datum
    evaluations per iteration recorded so far (``n_evals`` in the
    recorders)."""
    def causes():
        X = getattr(model, "X", None)
        if not (isinstance(X, np.ndarray) or sparse.issparse(X)):
            X = None
        evals, iters = 0, 0
        for rec in recorders:
            arr = rec.stats.get("n_evals")
            if arr is None:
                continue
            for c, k in enumerate(rec.n_done):
                evals += int(arr[c, :k].sum())
                iters += int(k)
        labels, n_classes = None, getattr(model, "n_classes", None)
        if X is not None and (n_classes is not None or getattr(model, "family", None)
                              == "logistic"):
            labels, n_classes = getattr(model, "y", None), n_classes or 2
        return likely_causes(X, labels=labels, n_classes=n_classes,
                             sampler_name=getattr(sampler, "name", None),
                             n_data=getattr(model, "n_data", None),
                             evals_per_iteration=evals / iters if iters else None)
    return causes
