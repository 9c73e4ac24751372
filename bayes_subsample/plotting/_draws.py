"""Trace, marginal-density and autocorrelation plots, and what every plot
shares: matplotlib imported on demand, and the posterior read from an
estimator, a Trace or an array of draws (see the package docstring)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

import numpy as np

__all__ = ["plot_autocorrelation", "plot_marginals", "plot_trace"]

_MPL_HINT = ("bayes_subsample.plotting needs matplotlib: pip install matplotlib "
             "(or pip install 'bayes_subsample[plot]')")


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(_MPL_HINT) from exc
    return plt


# --------------------------------------------------------------------------
# reading posteriors
# --------------------------------------------------------------------------

@dataclass(eq=False)
class _Posterior:
    """Draws ``(n_chains, n_draws, n_params)``, names, signs and (for an
    estimator) the estimator itself."""

    draws: np.ndarray
    names: list
    signs: Optional[np.ndarray] = None
    estimator: object = None
    warmup: Optional[np.ndarray] = None

    @property
    def n_params(self):
        return self.draws.shape[2]

    def flat(self, j=None):
        """Pooled draws with a positive sign (all draws for unsigned samplers)."""
        flat = self.draws.reshape(-1, self.n_params)
        if self.signs is not None:
            flat = flat[self.signs.reshape(-1) > 0]
        return flat if j is None else flat[:, j]


def _as_posterior(obj, what="posterior"):
    from .._driver import Trace

    if isinstance(obj, _Posterior):
        return obj
    if isinstance(obj, Trace):
        names = obj.param_names or [f"theta[{j}]" for j in range(obj.draws.shape[2])]
        if obj.ragged:
            # an interrupted run: the chains that made draws, cut to the shortest
            # (what its R-hat and ESS describe)
            draws = obj.common_draws()
            made = obj.chain_lengths > 0
            signs = None if obj.signs is None else obj.signs[made, :draws.shape[1]]
            return _Posterior(draws, list(names), signs, warmup=obj.warmup_draws[made])
        return _Posterior(obj.draws, list(names), obj.signs, warmup=obj.warmup_draws)
    if hasattr(obj, "get_params") and hasattr(obj, "fit"):  # an estimator
        if not hasattr(obj, "posterior_draws_"):
            raise ValueError(f"{type(obj).__name__} is not fitted yet: call fit(X, y) before "
                             "plotting its posterior")
        post = _as_posterior(obj.trace_, what)
        post.estimator = obj
        return post
    arr = np.asarray(obj, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :, None]
    elif arr.ndim == 2:
        arr = arr[None]
    elif arr.ndim != 3:
        raise ValueError(f"{what}: expected a fitted estimator, a Trace or an array of draws "
                         f"with 1 to 3 dimensions, got an array of shape {arr.shape}")
    if arr.shape[1] == 0:
        raise ValueError(f"{what} has no draws")
    return _Posterior(arr, [f"theta[{j}]" for j in range(arr.shape[2])])


def _as_posteriors(samples):
    """A single posterior or a mapping ``{label: posterior}`` -> dict."""
    if isinstance(samples, Mapping):
        if not samples:
            raise ValueError("samples is an empty mapping")
        return {str(k): _as_posterior(v, f"samples[{k!r}]") for k, v in samples.items()}
    return {"": _as_posterior(samples, "samples")}


def _select(names, n_params, params, max_params):
    """Indices of the parameters to plot."""
    if params is None:
        return list(range(min(n_params, max_params)))
    if isinstance(params, (str, int, np.integer)):
        params = [params]
    idx = []
    for p in params:
        if isinstance(p, str):
            if p not in names:
                raise ValueError(f"unknown parameter {p!r}; parameters are {names}")
            idx.append(names.index(p))
        else:
            j = int(p)
            if not -n_params <= j < n_params:
                raise ValueError(f"parameter index {j} out of range for {n_params} parameters")
            idx.append(j % n_params)
    if not idx:
        raise ValueError("params is empty")
    return idx


def _grid_axes(n_panels, ncols, axes, panel_size=(3.2, 2.4)):
    plt = _pyplot()
    if axes is not None:
        axes = np.asarray(axes, dtype=object)
        if axes.size < n_panels:
            raise ValueError(f"axes has {axes.size} entries, {n_panels} panels are needed")
        return axes
    ncols = max(1, min(ncols, n_panels))
    nrows = -(-n_panels // ncols)
    fig, axes = plt.subplots(nrows, ncols, squeeze=False,
                             figsize=(panel_size[0] * ncols, panel_size[1] * nrows))
    for ax in axes.flat[n_panels:]:
        ax.set_visible(False)
    fig.set_layout_engine("constrained")
    return axes


def _density(ax, x, grid, **kw):
    from scipy.stats import gaussian_kde

    x = x[np.isfinite(x)]
    if x.size > 5000:  # the KDE costs O(n_points * n_grid): thin evenly
        x = x[np.linspace(0, x.size - 1, 5000).round().astype(np.int64)]
    if x.size < 2 or np.ptp(x) <= 1e-12 * max(1.0, np.abs(x).max()):
        return ax.axvline(x[0] if x.size else np.nan, **kw)
    try:
        dens = gaussian_kde(x)(grid)
    except (np.linalg.LinAlgError, ValueError):
        return ax.axvline(float(np.mean(x)), **kw)
    return ax.plot(grid, dens, **kw)[0]


# --------------------------------------------------------------------------
# trace
# --------------------------------------------------------------------------

def plot_trace(posterior, params=None, *, max_params=6, warmup=False, density=True, axes=None):
    """Trace plot (draws against iteration, one line per chain) and the
    per-chain marginal density of each parameter.

    Parameters
    ----------
    posterior : fitted estimator, Trace or array of draws
        See the module description.
    params : int, str or list of them, optional
        Parameters to show, by index or name (estimators name them
        ``coef[j]`` and ``intercept``). Default: the first ``max_params``.
    max_params : int, default=6
    warmup : bool, default=False
        Also draw the warmup iterations (shaded, at negative iteration
        numbers); only for estimators and traces.
    density : bool, default=True
        Add a column with each chain's marginal density.
    axes : array of Axes of shape (n_params, 2) (``(n_params,)`` without density), optional
        Where to draw; a new figure by default.

    Returns
    -------
    axes : ndarray of Axes, shape (n_selected, 2), or (n_selected,) without density

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample.plotting import plot_trace
    >>> draws = np.random.default_rng(0).normal(size=(2, 200, 3))
    >>> axes = plot_trace(draws)  # doctest: +SKIP
    """
    plt = _pyplot()
    post = _as_posterior(posterior)
    idx = _select(post.names, post.n_params, params, max_params)
    ncol = 2 if density else 1
    if axes is None:
        fig, axes = plt.subplots(len(idx), ncol, squeeze=False,
                                 figsize=(9 if density else 7, 1.9 * len(idx) + 0.6),
                                 gridspec_kw={"width_ratios": [3, 1][:ncol]})
        fig.set_layout_engine("constrained")
    axes = np.asarray(axes, dtype=object).reshape(-1, ncol)
    if axes.shape[0] < len(idx):
        raise ValueError(f"axes has {axes.shape[0]} rows, {len(idx)} are needed")
    colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    n_chains, n_draws = post.draws.shape[:2]
    show_warm = warmup and post.warmup is not None and post.warmup.shape[1] > 0
    for row, j in enumerate(idx):
        ax_t, ax_d = axes[row, 0], (axes[row, 1] if density else None)
        x = post.draws[:, :, j]
        lo, hi = np.nanmin(x), np.nanmax(x)
        pad = 0.05 * (hi - lo) if hi > lo else 0.5
        grid = np.linspace(lo - pad, hi + pad, 200)
        for c in range(n_chains):
            col = colors[c % len(colors)]
            if show_warm:
                w = post.warmup[c, :, j]
                ax_t.plot(np.arange(-w.size, 0), w, color=col, lw=0.5, alpha=0.35)
            ax_t.plot(np.arange(n_draws), x[c], color=col, lw=0.6, alpha=0.8,
                      label=f"chain {c}")
            if density:
                keep = x[c] if post.signs is None else x[c][post.signs[c] > 0]
                _density(ax_d, keep, grid, color=col, lw=1)
        if show_warm:
            ax_t.axvspan(-post.warmup.shape[1], 0, color="0.9", zorder=0)
        ax_t.set_ylabel(post.names[j])
        if row == 0:
            ax_t.set_title("trace")
        if density:
            ax_d.set_yticks([])
            if row == 0:
                ax_d.set_title("density per chain")
    axes[len(idx) - 1, 0].set_xlabel("iteration")
    return axes[:len(idx)] if density else axes[:len(idx), 0]


# --------------------------------------------------------------------------
# marginals
# --------------------------------------------------------------------------

def plot_marginals(samples, reference=None, params=None, *, max_params=8, ncols=4,
                   reference_label="reference", axes=None):
    """Marginal posterior densities (Gaussian KDE) of one or several sets of
    draws, against a reference set of draws.

    Parameters
    ----------
    samples : posterior or dict of {label: posterior}
        Each posterior is a fitted estimator, a Trace or an array of draws.
    reference : posterior, optional
        Drawn as a thick black line, e.g. a long run of full-data HMC.
    params : int, str or list of them, optional
        Parameters to show (indices or names). Default: the first ``max_params``.
    max_params : int, default=8
    ncols : int, default=4
        Panels per row of a new figure.
    reference_label : str, default="reference"
    axes : array of Axes, optional
        At least as many Axes as parameters shown.

    Returns
    -------
    axes : ndarray of Axes (one panel per parameter; unused panels hidden)

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample.plotting import plot_marginals
    >>> rng = np.random.default_rng(0)
    >>> axes = plot_marginals({"approx": rng.normal(0.1, 1, (2, 500, 2))},
    ...                       reference=rng.normal(size=(2, 500, 2)))  # doctest: +SKIP
    """
    plt = _pyplot()
    sets = _as_posteriors(samples)
    ref = None if reference is None else _as_posterior(reference, "reference")
    first = ref if ref is not None else next(iter(sets.values()))
    for label, post in sets.items():
        if post.n_params != first.n_params:
            raise ValueError(f"samples {label!r} has {post.n_params} parameters, the "
                             f"{'reference' if ref is not None else 'first set'} has "
                             f"{first.n_params}")
    idx = _select(first.names, first.n_params, params, max_params)
    axes = _grid_axes(len(idx), ncols, axes)
    colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for k, j in enumerate(idx):
        ax = axes.flat[k]
        allx = [p.flat(j) for p in sets.values()] + ([ref.flat(j)] if ref is not None else [])
        lo = min(np.nanquantile(x, 0.001) for x in allx if x.size)
        hi = max(np.nanquantile(x, 0.999) for x in allx if x.size)
        pad = 0.1 * (hi - lo) if hi > lo else 0.5
        grid = np.linspace(lo - pad, hi + pad, 256)
        if ref is not None:
            _density(ax, ref.flat(j), grid, color="k", lw=2.2, label=reference_label)
        for i, (label, post) in enumerate(sets.items()):
            _density(ax, post.flat(j), grid, color=colors[i % len(colors)], lw=1.2,
                     label=label or None)
        ax.set_title(first.names[j], fontsize="medium")
        ax.set_yticks([])
        ax.xaxis.set_major_locator(plt.MaxNLocator(4))
        ax.tick_params(labelsize="small")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if labels:
        if axes.size > len(idx) and not axes.flat[len(idx)].get_visible():
            spare = axes.flat[len(idx)]  # an unused panel of a new figure holds the legend
            spare.set_visible(True)
            spare.axis("off")
            spare.legend(handles, labels, loc="center", frameon=False)
        else:
            axes.flat[0].legend(fontsize="small", frameon=False)
    return axes


# --------------------------------------------------------------------------
# autocorrelation
# --------------------------------------------------------------------------

def plot_autocorrelation(samples, params=None, *, max_lag=50, max_params=6, ncols=3,
                         axes=None):
    """Autocorrelation function of each parameter, averaged over chains.

    Uses :func:`bayes_subsample.diagnostics.autocorrelation` per chain; the
    legend gives the inefficiency factor (integrated autocorrelation time,
    :func:`~bayes_subsample.diagnostics.integrated_autocorr_time`) averaged
    over chains.

    Parameters
    ----------
    samples : posterior or dict of {label: posterior}
        Several posteriors are drawn on the same panels.
    params : int, str or list of them, optional
        Default: the first ``max_params``.
    max_lag : int, default=50
    max_params : int, default=6
    ncols : int, default=3
    axes : array of Axes, optional

    Returns
    -------
    axes : ndarray of Axes

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample.plotting import plot_autocorrelation
    >>> draws = np.random.default_rng(0).normal(size=(2, 300, 2))
    >>> axes = plot_autocorrelation(draws, max_lag=20)  # doctest: +SKIP
    """
    from ..diagnostics import autocorrelation, integrated_autocorr_time

    plt = _pyplot()
    sets = _as_posteriors(samples)
    first = next(iter(sets.values()))
    idx = _select(first.names, first.n_params, params, max_params)
    if int(max_lag) < 1:
        raise ValueError(f"max_lag must be >= 1, got {max_lag!r}")
    axes = _grid_axes(len(idx), ncols, axes)
    colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for k, j in enumerate(idx):
        ax = axes.flat[k]
        for i, (label, post) in enumerate(sets.items()):
            if j >= post.n_params:
                raise ValueError(f"samples {label!r} has no parameter {j}")
            x = post.draws[:, :, j]
            if x.shape[1] < 4:
                raise ValueError(f"autocorrelation needs at least 4 draws per chain, "
                                 f"{label or 'samples'} has {x.shape[1]}")
            with np.errstate(invalid="ignore", divide="ignore"):
                rho = np.nanmean([autocorrelation(x[c]) for c in range(x.shape[0])], axis=0)
                ifs = [integrated_autocorr_time(x[c]) for c in range(x.shape[0])]
            if_mean = np.nanmean(ifs) if np.any(np.isfinite(ifs)) else np.nan
            lags = np.arange(min(int(max_lag), rho.size - 1) + 1)
            text = f"IF {if_mean:.1f}"
            ax.plot(lags, rho[lags], color=colors[i % len(colors)], lw=1.3,
                    marker="." if lags.size <= 60 else None, ms=3,
                    label=f"{label}: {text}" if label else text)
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set_ylim(-0.25, 1.05)
        ax.set_title(first.names[j], fontsize="medium")
        ax.set_xlabel("lag")
        ax.legend(fontsize="x-small", frameon=False)
    return axes


# --------------------------------------------------------------------------
# ROC
# --------------------------------------------------------------------------
