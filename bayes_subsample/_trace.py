"""The result of a sampling run: draws, per-iteration statistics, diagnostics."""
from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from . import diagnostics as diag

__all__ = ["Trace"]

#: Info fields every kernel reports (doc of the contract: samplers/_base.py)
_CONTRACT_FIELDS = ("accept_prob", "accepted", "n_evals", "diverging", "energy_error", "sign")


@dataclass(eq=False, kw_only=True)
class Trace:
    """Result of :func:`sample`.

    Attributes
    ----------
    draws : ndarray of shape (n_chains, n_samples, n_params)
        Retained draws (after warmup).
    stats : dict of ndarray (n_chains, n_samples)
        Per-iteration diagnostics, one entry per field of the sampler's ``Info``:
        ``accept_prob``, ``accepted``, ``n_evals`` always; ``diverging``,
        ``energy_error`` for the Hamiltonian samplers; sampler-specific entries
        (e.g. ``sigma2``, ``alpha_u``, ``sign``, ``data_fraction``).
    warmup_draws, warmup_stats : the same for the warmup phase.
    tuning : list of dict
        Tuned quantities per chain (step size, leapfrog steps, theta*, m, ...).
    n_evals_prepare : int
        Per-datum evaluations of the shared preparation (MAP, theta*).
    n_evals_setup : ndarray (n_chains,)
        Per-datum evaluations spent by each chain outside steps (full passes).
    wall_time : dict
        ``prepare``, ``warmup`` and ``sampling`` seconds (per chain arrays);
        ``total`` (their sum: compute time over all chains) and ``elapsed``
        (the wall-clock time of the whole call; smaller than ``total`` when
        chains run in parallel).
    signs : ndarray (n_chains, n_samples) or None
        Signs of the draws of signed samplers (``None`` otherwise).
    interrupted : bool
        True if the run was stopped by KeyboardInterrupt; the draws made are kept.
    """

    draws: np.ndarray
    stats: dict
    warmup_draws: np.ndarray
    warmup_stats: dict
    tuning: list
    n_evals_prepare: int
    n_evals_setup: np.ndarray
    wall_time: dict
    sampler: object
    n_data: int
    interrupted: bool
    param_names: Optional[list] = None

    def __post_init__(self):
        self.n_evals_prepare = int(self.n_evals_prepare)
        self.n_evals_setup = np.asarray(self.n_evals_setup)
        self.n_data = int(self.n_data)

    @property
    def n_chains(self):
        return self.draws.shape[0]

    @property
    def n_samples(self):
        return self.draws.shape[1]

    @property
    def signs(self):
        """Signs of the draws of signed samplers (None otherwise)."""
        if not self.sampler.signed or "sign" not in self.stats:
            return None
        return self.stats["sign"].astype(np.int8)

    def weights(self):
        """Normalised importance weights ``s_j / sum s`` of the pooled draws
        (uniform for unsigned samplers); shape (n_chains * n_samples,)."""
        s = self.signs
        if s is None:
            k = self.n_chains * self.n_samples
            return np.full(k, 1.0 / k) if k else np.empty(0)  # k == 0: interrupted early
        s = s.reshape(-1).astype(np.float64)
        total = s.sum()
        if total <= 0:
            raise FloatingPointError(
                "the signed draws have a non-positive sign sum: sign-corrected expectations are "
                "undefined; increase the subsample size m or lambda"
            )
        return s / total

    def posterior_mean(self):
        """(Sign-corrected) posterior mean of the parameters (NaN without draws)."""
        flat = self.draws.reshape(-1, self.draws.shape[-1])
        if flat.shape[0] == 0:
            return np.full(flat.shape[1], np.nan)
        return self.weights() @ flat

    def n_evals_per_chain(self):
        """All per-datum evaluations per chain: its steps (warmup and sampling),
        its setup passes, and an equal share of the preparation."""
        steps = self._count("n_evals", self.stats) + self._count("n_evals", self.warmup_stats)
        return steps + self.n_evals_setup + self.n_evals_prepare / max(1, self.n_chains)

    def summary(self):
        """:class:`~bayes_subsample.diagnostics.Summary` of the retained draws."""
        return diag.summary(self.draws, names=self.param_names)

    def diagnostics(self):
        """Per-parameter and per-chain diagnostics as a dict (see estimators'
        ``diagnostics_``)."""
        out = {}
        if self.n_samples >= 4:
            out["r_hat"] = np.atleast_1d(diag.rhat(self.draws))
            out["ess_bulk"] = np.atleast_1d(diag.ess_bulk(self.draws))
            out["ess_tail"] = np.atleast_1d(diag.ess_tail(self.draws))
            out["mcse_mean"] = np.atleast_1d(diag.mcse_mean(self.draws))
            ifs = np.array([[diag.integrated_autocorr_time(self.draws[c, :, j])
                             for j in range(self.draws.shape[2])]
                            for c in range(self.n_chains)])
            out["inefficiency_factor"] = np.nanmean(ifs, axis=0)
        st = self.stats
        out["acceptance_rate"] = st["accepted"].mean(axis=1)
        out["mean_accept_prob"] = np.nanmean(st["accept_prob"], axis=1)
        out["n_divergences"] = (self._count("diverging", st)
                                + self._count("diverging", self.warmup_stats))
        out["n_evals"] = self.n_evals_per_chain()
        out["n_evals_per_iteration"] = st["n_evals"].mean(axis=1)
        out["data_fraction_per_iteration"] = out["n_evals_per_iteration"] / self.n_data
        out["wall_time"] = self.wall_time["warmup"] + self.wall_time["sampling"]
        out["sampling_time"] = self.wall_time["sampling"]
        if "ess_bulk" in out:
            # all-in: preparation, warmup and sampling, wall clock (parallel chains overlap)
            elapsed = self.wall_time.get("elapsed", self.wall_time["total"])
            out["ess_per_second"] = out["ess_bulk"] / elapsed if elapsed > 0 else np.nan
        if self.signs is not None:
            out["tau_hat"] = (self.signs > 0).mean(axis=1)
        ifs_ok = "inefficiency_factor" in out and np.all(out["inefficiency_factor"] > 0) and \
            np.all(np.isfinite(out["inefficiency_factor"])) and np.sum(out["n_evals"]) > 0
        if ifs_ok:
            # CT (doc/algorithms/diagnostics.rst): IF x per-datum evaluations per
            # retained iteration, all evaluations counted (warmup, tuning passes,
            # preparation); signed samplers divide by (2 tau - 1)^2
            evals = float(np.sum(out["n_evals"])) / (self.n_chains * self.n_samples)
            tau = float(np.mean(out["tau_hat"])) if self.signs is not None else 1.0
            out["computing_time"] = diag.computing_time(
                out["inefficiency_factor"], evals,
                tau=tau if self.signs is not None else None)
        for k, v in st.items():
            # per-chain means of the sampler-specific statistics
            if k not in _CONTRACT_FIELDS and v.dtype.kind in "fb" and v.shape[1]:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)   # all-NaN columns
                    out[f"mean_{k}"] = np.nanmean(v.astype(np.float64), axis=1)
        return out

    def _count(self, name, stats):
        """Per-chain sum of a statistic (0 where it was never recorded)."""
        v = stats.get(name)
        return np.zeros(self.n_chains, dtype=np.int64) if v is None else v.sum(axis=1)

    def check_convergence(self, warn=True):
        """Warnings (ConvergenceWarning) for R-hat > 1.01, bulk ESS < 100 per
        chain, divergences; returns the messages."""
        msgs = []
        d = self.diagnostics()
        if "r_hat" in d and self.n_chains > 1:
            rh = np.nanmax(d["r_hat"]) if np.any(np.isfinite(d["r_hat"])) else np.nan
            if rh > 1.01:
                msgs.append(
                    f"max R-hat is {rh:.3f} > 1.01: the chains disagree. Run longer "
                    "(n_warmup, n_samples), or check the sampler's tuning."
                )
        if "ess_bulk" in d:
            ess = np.nanmin(d["ess_bulk"])
            if ess < 100 * self.n_chains:
                msgs.append(
                    f"min bulk ESS is {ess:.0f}, below 100 per chain ({100 * self.n_chains} "
                    f"for {self.n_chains} chains): posterior summaries are noisy. Increase "
                    "n_samples or n_chains."
                )
        if "tau_hat" in d and np.mean(d["tau_hat"]) < 0.9:
            msgs.append(
                f"only {100 * np.mean(d['tau_hat']):.0f}% of the signed draws are positive "
                "(tau_hat < 0.9): sign-corrected estimates are noisy. Increase the batch size "
                "(subsample_size) or the number of products (n_products), use second-order "
                "control variates, or let theta* recentre during a longer warmup."
            )
        ndiv = int(np.sum(self._count("diverging", self.stats)))
        if ndiv:
            msgs.append(
                f"{ndiv} divergent transitions after warmup: the step size is too large for the "
                "posterior's curvature. Increase n_warmup or target_accept, or set a smaller "
                "step_size."
            )
        if warn:
            for m in msgs:
                warnings.warn(m, ConvergenceWarning, stacklevel=_user_stacklevel())
        return msgs

    def to_inference_data(self):
        """An ``arviz.InferenceData`` with posterior draws and sample stats."""
        try:
            import arviz as az
        except ImportError as e:  # pragma: no cover
            raise ImportError("to_inference_data needs arviz: pip install arviz") from e
        names = self.param_names or [f"theta_{j}" for j in range(self.draws.shape[2])]
        posterior = {n: self.draws[:, :, j] for j, n in enumerate(names)}
        rename = {"accept_prob": "acceptance_rate", "diverging": "diverging",
                  "energy_error": "energy_error", "n_evals": "n_evals"}
        stats = {rename.get(k, k): v for k, v in self.stats.items() if k != "accepted"}
        return az.from_dict(posterior=posterior, sample_stats=stats)

    def __repr__(self):
        return (f"Trace(sampler={self.sampler.name!r}, n_chains={self.n_chains}, "
                f"n_samples={self.n_samples}, interrupted={self.interrupted})")


def _user_stacklevel():
    """Stack level of the first frame outside this package (so warnings point
    at the user's call, e.g. ``clf.fit(X, y)``)."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(pkg):
        frame, level = frame.f_back, level + 1
    return level
