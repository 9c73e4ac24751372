"""ROC curves with posterior bands: the curve of every posterior draw and
the band they make (binary, and one-vs-rest for several classes)."""
from __future__ import annotations

import numpy as np

from ._draws import _as_posterior, _pyplot

__all__ = ["plot_roc", "roc_band", "roc_ovr"]


def _coef_draws(post, n_features):
    flat = post.flat()
    if post.estimator is not None:
        est = post.estimator
        p = est.n_features_in_
        coef = flat[:, :p]
        icpt = flat[:, p] if est.fit_intercept else np.zeros(flat.shape[0])
        return coef, icpt
    if flat.shape[1] == n_features + 1:
        return flat[:, :n_features], flat[:, n_features]
    if flat.shape[1] == n_features:
        return flat, np.zeros(flat.shape[0])
    raise ValueError(f"the draws have {flat.shape[1]} parameters but X has {n_features} "
                     f"columns: expected {n_features} (no intercept) or {n_features + 1} "
                     "(intercept last)")


def _classes_of(post, classes):
    """The class labels of the draws' blocks: ``classes``, else an estimator's
    ``classes_``, else None (one linear predictor, the binary layout)."""
    if classes is not None:
        classes = np.asarray(classes)
        if classes.ndim != 1 or classes.shape[0] < 2 or np.unique(classes).shape[0] != \
                classes.shape[0]:
            raise ValueError(f"classes must be at least 2 distinct labels, got {classes!r}")
        return classes
    if post.estimator is not None:
        return post.estimator.classes_
    return None


def _class_coef_draws(post, n_features, n_classes):
    """Multinomial draws (one block per class, class-major): coefficients
    (S, K, d) and intercepts (S, K)."""
    flat = post.flat()
    if post.estimator is not None:
        est = post.estimator
        if n_features != est.n_features_in_:
            raise ValueError(f"X has {n_features} columns, the estimator was fitted on "
                             f"{est.n_features_in_}")
        intercept = est.fit_intercept
    elif flat.shape[1] in (n_classes * n_features, n_classes * (n_features + 1)):
        intercept = flat.shape[1] == n_classes * (n_features + 1)
    else:
        raise ValueError(
            f"the draws have {flat.shape[1]} parameters but X has {n_features} columns and "
            f"there are {n_classes} classes: expected {n_classes} blocks of {n_features} "
            f"(no intercept) or {n_features + 1} (intercept last), "
            f"{n_classes * n_features} or {n_classes * (n_features + 1)} parameters")
    t = flat.reshape(flat.shape[0], n_classes, -1)
    icpt = t[:, :, n_features] if intercept else np.zeros(t.shape[:2])
    return t[:, :, :n_features], icpt


def _thin(max_draws, *arrays):
    n = arrays[0].shape[0]
    if n == 0:
        raise ValueError("no posterior draws to score with")
    if n <= max_draws:
        return arrays
    keep = np.linspace(0, n - 1, int(max_draws)).round().astype(np.int64)
    return tuple(a[keep] for a in arrays)


def _check_roc_input(posterior, X, y, prob):
    if not 0 < prob < 1:
        raise ValueError(f"prob must be in (0, 1), got {prob!r}")
    post = _as_posterior(posterior)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}")
    y = np.asarray(y)
    if y.shape != (X.shape[0],):
        raise ValueError(f"y has shape {y.shape}, expected ({X.shape[0]},)")
    return post, X, y


def _roc_draw(y_bin, score, grid):
    """One draw's ROC curve, interpolated on the grid, and its AUC (the area
    under ``roc_curve``, which is what ``roc_auc_score`` computes)."""
    from sklearn.metrics import auc, roc_curve

    fpr, tpr, _ = roc_curve(y_bin, score)
    return np.interp(grid, fpr, tpr), auc(fpr, tpr)


def _summarise(tprs, aucs, y_bin, p_mean, grid, prob):
    """The pointwise band of the draws' curves and the posterior-predictive curve."""
    from sklearn.metrics import auc, roc_curve
    from sklearn.utils import Bunch

    tprs[:, 0] = 0.0
    fpr_m, tpr_m, _ = roc_curve(y_bin, p_mean)
    a = (1 - prob) / 2
    lo, med, hi = np.quantile(tprs, [a, 0.5, 1 - a], axis=0)
    return Bunch(fpr=grid, tpr_low=lo, tpr_median=med, tpr_high=hi, fpr_mean=fpr_m,
                 tpr_mean=tpr_m, auc=float(auc(fpr_m, tpr_m)), auc_draws=aucs,
                 n_draws=tprs.shape[0], prob=prob)


def _ovr_draws(post, X, cls, ks, y_bins, grid, max_draws):
    """One-vs-rest curves of the classes ``ks`` of a multinomial posterior:
    each draw scores the rows by ``log softmax(eta_s)`` of the class; returns
    the draws' curves (len(ks), S, n_grid), AUCs (len(ks), S) and the
    posterior-predictive probabilities ``E[softmax(eta)]`` (n, K). One draw's
    predictors at a time: memory n x K."""
    from scipy.special import log_softmax

    coef, icpt = _thin(max_draws, *_class_coef_draws(post, X.shape[1], cls.shape[0]))
    S = coef.shape[0]
    tprs = np.empty((len(ks), S, grid.size))
    aucs = np.empty((len(ks), S))
    p_mean = np.zeros((X.shape[0], cls.shape[0]))
    for s in range(S):
        logp = log_softmax(X @ coef[s].T + icpt[s], axis=1)
        p_mean += np.exp(logp)
        for i, k in enumerate(ks):
            tprs[i, s], aucs[i, s] = _roc_draw(y_bins[i], logp[:, k], grid)
    return tprs, aucs, p_mean / S


def roc_band(posterior, X, y, *, max_draws=200, prob=0.9, pos_label=None, n_grid=201,
             classes=None):
    """ROC curves of a logistic-regression posterior, summarised pointwise.

    For each of (at most ``max_draws``, evenly spaced) posterior draws
    ``theta_s`` the scores ``x^T theta_s`` give an ROC curve
    (``sklearn.metrics.roc_curve``); the true positive rates on a common
    false positive rate grid give the pointwise median and the central
    ``prob`` band. The posterior-predictive curve scores each row by
    ``E[sigmoid(x^T theta)]``. Needs no matplotlib.

    For a multinomial posterior (more than two classes) it is the
    one-vs-rest curve of the class ``pos_label``: each draw scores a row by
    its log-probability of that class, ``log softmax(eta_s)``, the
    posterior-predictive curve by ``E[softmax(eta)]`` of that class (the
    column of ``predict_proba``). :func:`roc_ovr` gives every class's curve.

    Parameters
    ----------
    posterior : fitted BayesianLogisticRegression, Trace or array of draws
        For a Trace or an array the columns are the coefficients, then the
        intercept if there is one more column than ``X`` has; with
        ``classes`` of more than two labels, one such block per class
        (class-major, the layout of the estimator's ``posterior_draws_``).
    X : array-like of shape (n, n_features)
        Held-out features (transformed as for fitting).
    y : array-like of shape (n,)
        Held-out labels.
    max_draws : int, default=200
    prob : float, default=0.9
        Mass of the central band.
    pos_label : optional
        The positive class; default ``classes_[1]`` for a binary estimator
        (``classes[1]`` if given), else 1. Required for more than two classes.
    n_grid : int, default=201
        Points of the false-positive-rate grid.
    classes : array-like, optional
        The class labels of a Trace's or an array's blocks of draws, in their
        order (an estimator's ``classes_`` by default); more than two labels
        mean the multinomial layout.

    Returns
    -------
    sklearn.utils.Bunch
        ``fpr`` (grid), ``tpr_low``, ``tpr_median``, ``tpr_high`` (pointwise),
        ``fpr_mean``, ``tpr_mean``, ``auc`` (the posterior-predictive curve and
        its AUC), ``auc_draws`` (AUC of each draw used), ``n_draws``.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample.plotting import roc_band
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = (X[:, 0] + rng.normal(size=300) > 0).astype(int)
    >>> draws = rng.normal([1.0, 0.0, 0.0], 0.1, size=(100, 3))
    >>> band = roc_band(draws, X, y)
    >>> bool(0.5 < band.auc < 1.0)
    True
    """
    from scipy.special import expit

    post, X, y = _check_roc_input(posterior, X, y, prob)
    cls = _classes_of(post, classes)
    grid = np.linspace(0.0, 1.0, int(n_grid))
    if cls is not None and cls.shape[0] > 2:
        if pos_label is None:
            raise ValueError(f"the posterior has {cls.shape[0]} classes: pass pos_label for "
                             "one class's one-vs-rest curve, or use roc_ovr for all")
        k = np.flatnonzero(cls == pos_label)
        if k.size != 1:
            raise ValueError(f"pos_label {pos_label!r} is not one of the classes "
                             f"{cls.tolist()}")
        y_bin = (y == pos_label).astype(np.int8)
        if y_bin.min() == y_bin.max():
            raise ValueError("y must contain both classes to draw an ROC curve "
                             f"(positive label {pos_label!r})")
        tprs, aucs, p_mean = _ovr_draws(post, X, cls, [k[0]], [y_bin], grid, max_draws)
        return _summarise(tprs[0], aucs[0], y_bin, p_mean[:, k[0]], grid, prob)
    if pos_label is None:
        pos_label = cls[1] if cls is not None else 1
    y_bin = (y == pos_label).astype(np.int8)
    if y_bin.min() == y_bin.max():
        raise ValueError("y must contain both classes to draw an ROC curve "
                         f"(positive label {pos_label!r})")
    coef, icpt = _thin(max_draws, *_coef_draws(post, X.shape[1]))
    tprs = np.empty((coef.shape[0], grid.size))
    aucs = np.empty(coef.shape[0])
    p_mean = np.zeros(X.shape[0])
    for s in range(coef.shape[0]):
        eta = X @ coef[s] + icpt[s]
        tprs[s], aucs[s] = _roc_draw(y_bin, eta, grid)
        p_mean += expit(eta)
    return _summarise(tprs, aucs, y_bin, p_mean / coef.shape[0], grid, prob)


def roc_ovr(posterior, X, y, *, max_draws=200, prob=0.9, n_grid=201, classes=None):
    """One-vs-rest ROC curves of every class of a multinomial posterior, per
    class (as :func:`roc_band` with ``pos_label``) and macro-averaged.

    Class ``k``'s curve separates class ``k`` from the others: each draw
    scores a row by its log-probability of ``k``, the posterior-predictive
    curve by the column ``k`` of ``predict_proba`` (``E[softmax(eta)]``).
    The macro average gives each class the same weight: its AUC is the mean
    of the classes' AUCs (what ``sklearn.metrics.roc_auc_score(y,
    predict_proba, multi_class="ovr")`` computes), its curve the mean of
    the classes' true positive rates at each false positive rate. Classes
    absent from ``y`` have no curve (AUC NaN) and do not enter the average.
    Needs no matplotlib.

    Parameters
    ----------
    posterior : fitted BayesianLogisticRegression, Trace or array of draws
        A multinomial posterior: an estimator fitted on more than two classes,
        or draws of one block per class (class-major; each block the
        coefficients, then the intercept if there is one more column than
        ``X`` has) with their ``classes``.
    X : array-like of shape (n, n_features)
        Held-out features (transformed as for fitting).
    y : array-like of shape (n,)
        Held-out labels, from ``classes``.
    max_draws : int, default=200
    prob : float, default=0.9
        Mass of the central bands.
    n_grid : int, default=201
        Points of the false-positive-rate grid.
    classes : array-like, optional
        The labels of the blocks of draws, in order (an estimator's
        ``classes_`` by default); at least 3.

    Returns
    -------
    sklearn.utils.Bunch
        ``classes``; ``bands``, one :func:`roc_band` result per class (None
        for a class absent from ``y``); ``auc`` (per class, of the
        posterior-predictive curves) and ``auc_draws`` (n_draws, n_classes);
        ``macro_auc`` and ``macro_auc_draws`` (per draw); the macro-averaged
        curves ``fpr`` (grid), ``tpr_low``, ``tpr_median``, ``tpr_high``
        (pointwise over draws) and ``tpr_mean`` (of the posterior-predictive
        curves); ``n_draws``, ``prob``.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample.plotting import roc_ovr
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = np.digitize(X[:, 0], [-0.5, 0.5])
    >>> centre = np.array([[-2.0, 0.0, 0.0], [0.0, 0.0, 1.0], [2.0, 0.0, 0.0]])
    >>> draws = centre.ravel() + 0.1 * rng.normal(size=(100, 9))  # 3 blocks (coef, intercept)
    >>> res = roc_ovr(draws, X, y, classes=[0, 1, 2])
    >>> res.auc.shape, bool(res.macro_auc > 0.8)
    ((3,), True)
    """
    from sklearn.utils import Bunch

    post, X, y = _check_roc_input(posterior, X, y, prob)
    cls = _classes_of(post, classes)
    if cls is None or cls.shape[0] < 3:
        raise ValueError("roc_ovr needs a posterior of more than two classes (an estimator "
                         "fitted on them, or classes=...); use roc_band for two")
    unknown = np.setdiff1d(np.unique(y), cls)
    if unknown.size:
        raise ValueError(f"y has labels {unknown.tolist()} that are not among the classes "
                         f"{cls.tolist()}")
    grid = np.linspace(0.0, 1.0, int(n_grid))
    K = cls.shape[0]
    y_bins = [(y == c).astype(np.int8) for c in cls]
    present = [k for k in range(K) if y_bins[k].min() < y_bins[k].max()]
    if len(present) < 2:
        raise ValueError(f"y must contain at least two of the classes {cls.tolist()} to draw "
                         "one-vs-rest ROC curves")
    tprs, auc_k, p_mean = _ovr_draws(post, X, cls, present, [y_bins[k] for k in present],
                                     grid, max_draws)
    S = tprs.shape[1]
    bands = [None] * K
    aucs, auc_draws = np.full(K, np.nan), np.full((S, K), np.nan)
    tpr_means = []
    for i, k in enumerate(present):
        bands[k] = _summarise(tprs[i], auc_k[i], y_bins[k], p_mean[:, k], grid, prob)
        tpr_means.append(np.interp(grid, bands[k].fpr_mean, bands[k].tpr_mean))
        aucs[k], auc_draws[:, k] = bands[k].auc, auc_k[i]
    macro = tprs.mean(axis=0)
    a = (1 - prob) / 2
    lo, med, hi = np.quantile(macro, [a, 0.5, 1 - a], axis=0)
    tpr_mean = np.mean(tpr_means, axis=0)
    tpr_mean[0] = 0.0
    return Bunch(classes=cls, bands=bands, auc=aucs, auc_draws=auc_draws,
                 macro_auc=float(np.nanmean(aucs)),
                 macro_auc_draws=np.nanmean(auc_draws, axis=1), fpr=grid, tpr_low=lo,
                 tpr_median=med, tpr_high=hi, tpr_mean=tpr_mean, n_draws=S, prob=prob)


def plot_roc(posterior, X, y, *, ax=None, label=None, color=None, max_draws=200, prob=0.9,
             pos_label=None, band=True, chance=True, classes=None):
    """ROC curve of the posterior predictive with a pointwise posterior band.

    The line is the ROC curve of the posterior-predictive probabilities
    ``E[sigmoid(x^T theta)]``; the shaded band covers, at each false positive
    rate, the central ``prob`` mass of the ROC curves of individual posterior
    draws (see :func:`roc_band`). Compare two samplers by calling it twice on
    the same ``ax``.

    A multinomial posterior (more than two classes) without ``pos_label``
    gives the one-vs-rest curves of every class (thin lines, each with its
    AUC) and their macro average (thick, with its band; see
    :func:`roc_ovr`); with ``pos_label``, that class's one-vs-rest curve.

    Parameters
    ----------
    posterior : fitted BayesianLogisticRegression, Trace or array of draws
    X, y : held-out features and labels
    ax : Axes, optional
    label : str, optional
        Legend label (the AUC is appended; prefixed to the class names for
        one-vs-rest curves).
    color : color, optional
        Of the curve (of the macro average for one-vs-rest curves, black by
        default; the classes take the colour cycle).
    max_draws, prob, pos_label, classes
        As in :func:`roc_band`.
    band : bool, default=True
        Draw the band.
    chance : bool, default=True
        Draw the diagonal of a random classifier.

    Returns
    -------
    ax : Axes
        ``ax.roc_bands_`` collects the :func:`roc_band` results drawn on it
        (:func:`roc_ovr` results for one-vs-rest curves).

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample import BayesianLogisticRegression
    >>> from bayes_subsample.plotting import plot_roc
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = (X[:, 0] + rng.normal(size=300) > 0).astype(int)
    >>> clf = BayesianLogisticRegression(n_samples=200, n_warmup=200, n_chains=2,
    ...                                  random_state=0).fit(X, y)
    >>> ax = plot_roc(clf, X, y, label="HMC")  # doctest: +SKIP
    """
    plt = _pyplot()
    post = _as_posterior(posterior)
    cls = _classes_of(post, classes)
    ovr = cls is not None and cls.shape[0] > 2 and pos_label is None
    if ovr:
        res = roc_ovr(post, X, y, max_draws=max_draws, prob=prob, classes=cls)
    else:
        res = roc_band(post, X, y, max_draws=max_draws, prob=prob, pos_label=pos_label,
                       classes=cls)
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 4.6), layout="constrained")
    if ovr:
        prefix = f"{label}: " if label else ""
        for k, c in enumerate(res.classes):
            b = res.bands[k]
            if b is not None:
                ax.plot(b.fpr_mean, b.tpr_mean, lw=0.9, alpha=0.85,
                        label=f"{prefix}{c} (AUC {b.auc:.3f})")
        color = "k" if color is None else color
        ax.plot(res.fpr, res.tpr_mean, color=color, lw=2.0,
                label=f"{prefix}macro average (AUC {res.macro_auc:.3f})")
        if band:
            ax.fill_between(res.fpr, res.tpr_low, res.tpr_high, color=color, alpha=0.2, lw=0,
                            label=f"{round(100 * prob)}% band over {res.n_draws} draws")
    else:
        line, = ax.plot(res.fpr_mean, res.tpr_mean, color=color, lw=1.6,
                        label=f"{label + ' ' if label else ''}(AUC {res.auc:.3f})")
        if band:
            ax.fill_between(res.fpr, res.tpr_low, res.tpr_high, color=line.get_color(),
                            alpha=0.25, lw=0,
                            label=f"{round(100 * prob)}% band over {res.n_draws} draws")
    if chance and not getattr(ax, "_bayes_subsample_chance", False):
        ax.plot([0, 1], [0, 1], ls="--", color="0.6", lw=0.8)
        ax._bayes_subsample_chance = True
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.legend(loc="lower right", fontsize="small")
    if not hasattr(ax, "roc_bands_"):
        ax.roc_bands_ = []
    ax.roc_bands_.append(res)
    return ax
