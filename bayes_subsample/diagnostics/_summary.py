"""The per-parameter summary table."""
import numpy as np

from ._chains import ess_bulk, ess_tail, mcse_mean, rhat
from ._core import _by_columns, _check_draws

__all__ = ["Summary", "summary"]


class Summary:
    """Per-parameter posterior summary, returned by :func:`summary`.

    ``str()`` prints the table (the priors, when known, after the names, and
    the notes under it); :meth:`to_pandas` gives a DataFrame.

    Attributes
    ----------
    names : list of str
        Row labels.
    columns : tuple of str
        Column labels of the numbers, in display order.
    priors : list of str or None
        The prior of each parameter in words (``"normal(0, 10)"``), or None
        when not known.
    notes : list of str
        Lines printed under the table (e.g. what the sampler chose and why).
    """

    columns = ("mean", "sd", "q5", "q95", "mcse_mean", "ess_bulk", "ess_tail", "r_hat")
    priors = None    # summaries pickled before the priors were recorded

    def __init__(self, names, values, notes=(), priors=None):
        self.names = list(names)
        self._values = {c: np.asarray(values[c], dtype=np.float64) for c in self.columns}
        self.notes = [str(x) for x in notes]
        if priors is not None:
            priors = [str(p) for p in priors]
            if len(priors) != len(self.names):
                raise ValueError(f"priors has {len(priors)} entries for {len(self.names)} "
                                 "parameters")
        self.priors = priors

    def __getitem__(self, column):
        if column not in self._values:
            raise KeyError(f"unknown column {column!r}; columns are {self.columns}")
        return self._values[column].copy()

    def __len__(self):
        return len(self.names)

    def append(self, other):
        """A new summary with the rows of ``other`` under these (notes of both);
        priors are kept when both know them."""
        priors = (self.priors + other.priors
                  if self.priors is not None and other.priors is not None else None)
        values = {c: np.concatenate([self._values[c], other._values[c]]) for c in self.columns}
        return Summary(self.names + other.names, values, self.notes + other.notes, priors)

    def to_dict(self):
        """Return ``{column: ndarray of shape (n_params,)}`` plus ``"name": list``
        (and ``"prior": list`` when the priors are known)."""
        out = {"name": list(self.names)}
        if self.priors is not None:
            out["prior"] = list(self.priors)
        out.update({c: v.copy() for c, v in self._values.items()})
        return out

    def to_pandas(self):
        """Return a :class:`pandas.DataFrame` indexed by parameter name, the
        ``prior`` column first when the priors are known (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - depends on environment
            raise ImportError("Summary.to_pandas requires pandas") from exc
        data = {} if self.priors is None else {"prior": list(self.priors)}
        data.update({c: self._values[c] for c in self.columns})
        return pd.DataFrame(data, index=pd.Index(self.names, name="name"))

    def _format(self):
        fmt = {"ess_bulk": "{:.0f}", "ess_tail": "{:.0f}", "r_hat": "{:.3f}"}
        left = ["name"] + ([] if self.priors is None else ["prior"])
        rows = [[*left, *self.columns]]
        for i, name in enumerate(self.names):
            row = [name] + ([] if self.priors is None else [self.priors[i]])
            for c in self.columns:
                row.append(fmt.get(c, "{:.4g}").format(self._values[c][i]))
            rows.append(row)
        widths = [max(len(r[j]) for r in rows) for j in range(len(rows[0]))]
        lines = []
        for r in rows:
            cells = ([s.ljust(w) for s, w in zip(r[:len(left)], widths)]
                     + [s.rjust(w) for s, w in zip(r[len(left):], widths[len(left):])])
            lines.append("  ".join(cells))
        return "\n".join(lines + self.notes)

    def __str__(self):
        return self._format()

    def __repr__(self):
        return f"Summary({len(self)} parameters)\n{self._format()}"


def summary(draws, names=None, notes=(), priors=None):
    """Posterior summary table per parameter.

    Parameters
    ----------
    draws : array_like of shape (n_chains, n_draws, n_params)
        A 2-D array is read as one parameter, ``(n_chains, n_draws)``.  Extra trailing
        axes are flattened in C order.
    names : sequence of str, optional
        Parameter names; default ``"x[0]", "x[1]", ...``.
    notes : sequence of str, optional
        Lines printed under the table.
    priors : sequence of str, optional
        The prior of each parameter in words, printed after its name.

    Returns
    -------
    Summary
        Columns ``mean``, ``sd`` (``ddof=1``), ``q5``, ``q95`` (type-7 quantiles of
        all draws), ``mcse_mean``, ``ess_bulk``, ``ess_tail`` and ``r_hat``.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample.diagnostics import summary
    >>> s = summary(np.random.default_rng(0).normal(size=(4, 500, 2)), names=["a", "b"],
    ...             priors=["normal(0, 1)", "normal(0, 1)"])
    >>> s["ess_bulk"].shape
    (2,)
    >>> s.to_pandas().columns[0]
    'prior'
    """
    a, shape = _check_draws(draws)
    k = a.shape[2]
    if names is None:
        names = ["x"] if shape is None else [f"x[{j}]" for j in range(k)]
    else:
        names = [str(n) for n in names]
        if len(names) != k:
            raise ValueError(f"names has {len(names)} entries but draws has {k} parameters")
    moments = _by_columns(_moments_core, a)
    values = {
        "mean": moments[:, 0],
        "sd": moments[:, 1],
        "q5": moments[:, 2],
        "q95": moments[:, 3],
        "mcse_mean": np.atleast_1d(mcse_mean(a)),
        "ess_bulk": np.atleast_1d(ess_bulk(a)),
        "ess_tail": np.atleast_1d(ess_tail(a)),
        "r_hat": np.atleast_1d(rhat(a)),
    }
    return Summary(names, values, notes, priors)


def _moments_core(a):
    """(k, 4): mean, sd (ddof=1), 5% and 95% quantiles of every column's draws."""
    flat = a.reshape(-1, a.shape[2])
    return np.stack([flat.mean(axis=0), flat.std(axis=0, ddof=1),
                     np.quantile(flat, 0.05, axis=0), np.quantile(flat, 0.95, axis=0)], axis=1)
