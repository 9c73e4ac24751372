"""The result of a sampling run: draws, per-iteration statistics, diagnostics."""
from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np
from sklearn.exceptions import ConvergenceWarning, EfficiencyWarning

from . import diagnostics as diag
from .exceptions import SamplingError

__all__ = ["Trace"]

#: Info fields every kernel reports (doc of the contract: samplers/_base.py)
_CONTRACT_FIELDS = ("accept_prob", "accepted", "n_evals", "diverging", "energy_error", "sign")

#: samplers that decide MH moves on subsamples warn (EfficiencyWarning) when
#: they read more than this share of the data per decision on average
SUBSAMPLE_EFFICIENCY_LIMIT = 0.5


@dataclass(eq=False, kw_only=True)
class Trace:
    """Result of :func:`sample`.

    Attributes
    ----------
    draws : ndarray of shape (n_chains, n_samples, n_params)
        Retained draws (after warmup). After an interrupt chains may have
        different lengths (``chain_lengths``); past its length a chain's
        entries are NaN. :meth:`pooled_draws` gives every draw made.
    chain_lengths : ndarray (n_chains,)
        Retained draws of each chain (all ``n_samples`` unless interrupted).
    stats : dict of ndarray (n_chains, n_samples)
        Per-iteration diagnostics, one entry per field of the sampler's ``Info``:
        ``accept_prob``, ``accepted``, ``n_evals`` always; ``diverging``,
        ``energy_error`` for the Hamiltonian samplers; sampler-specific entries
        (e.g. ``sigma2``, ``alpha_u``, ``sign``, ``data_fraction``).
    warmup_draws, warmup_stats, warmup_lengths : the same for the warmup phase.
    tuning : list of dict
        Tuned quantities per chain (step size, leapfrog steps, theta*, m, ...).
    n_evals_prepare : int
        Per-datum evaluations of the shared preparation (MAP, theta*).
    n_evals_setup : ndarray (n_chains,)
        Per-datum evaluations spent by each chain outside steps (full passes).
    data_passes : dict
        Fused full-data passes over X (sums of log-likelihoods, gradients,
        Hessians over every row): ``prepare`` (the shared preparation: MAP,
        theta*, control variates, metric) and ``chains`` (made while the chains
        ran, all chains together: HMC-ECS's recentring, the full-data gradients
        of HMC). Per-datum work on subsamples is counted in ``n_evals``. Models
        whose rows live with Dask add ``rows_fetched``: the rows brought into this
        process (distinct rows per fetch, all fetches of the run).
    wall_time : dict
        ``prepare``, ``warmup`` and ``sampling`` seconds (per chain arrays);
        ``total`` (their sum: compute time over all chains) and ``elapsed``
        (the wall-clock time of the whole call; smaller than ``total`` when
        chains run in parallel).
    signs : ndarray (n_chains, n_samples) or None
        Signs of the draws of signed samplers (``None`` otherwise).
    interrupted : bool
        True if the run was stopped by KeyboardInterrupt; the draws made are kept.
    class_blocks : int or None
        Multinomial models: the number of classes ``K``, the parameters being K
        blocks of equal size. Summaries and per-parameter diagnostics then
        describe the centred draws (:meth:`reported_draws`); ``draws`` are
        as sampled.
    resumable : bool
        True while the trace holds its chains' states, so that
        ``sample(model, resume=trace)`` can continue the run (a pickled trace
        does not: the states reference the data).
    layout : object or None
        The estimators' parameter layout (``names``, ``priors``,
        ``variables``, ``dims``, ``coords``): the prior of each parameter in
        :meth:`summary`, and named variables with coordinates (``coef`` over
        ``feature``, ...) in :meth:`to_inference_data`. None for
        :func:`sample` runs.
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
    chain_lengths: Optional[np.ndarray] = None
    warmup_lengths: Optional[np.ndarray] = None
    run_state: object = field(default=None, repr=False)
    class_blocks: Optional[int] = None
    data_passes: Optional[dict] = None
    layout: object = field(default=None, repr=False)

    def __post_init__(self):
        if self.data_passes is None:
            self.data_passes = {"prepare": 0, "chains": 0}
        self.n_evals_prepare = int(self.n_evals_prepare)
        self.n_evals_setup = np.asarray(self.n_evals_setup)
        self.n_data = int(self.n_data)
        n_chains, width = self.draws.shape[:2]
        if self.chain_lengths is None:
            self.chain_lengths = np.full(n_chains, width, dtype=np.int64)
        if self.warmup_lengths is None:
            self.warmup_lengths = np.full(n_chains, self.warmup_draws.shape[1], dtype=np.int64)
        self.chain_lengths = np.asarray(self.chain_lengths, dtype=np.int64)
        self.warmup_lengths = np.asarray(self.warmup_lengths, dtype=np.int64)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["run_state"] = None     # kernels reference the data: not pickled
        return state

    def shifted(self, offsets):
        """A copy whose draws (retained and warmup) have ``offsets[j]`` added to
        column ``j``: the posterior of ``theta + offsets`` when the sampled
        parameter was a shifted one (the estimators sample a linear
        regression's intercept minus its prior mean). The copy cannot be
        resumed (its chain states are in the sampled coordinates)."""
        shift = np.zeros(self.draws.shape[-1])
        for j, v in offsets.items():
            shift[j] = v
        return replace(self, draws=self.draws + shift, warmup_draws=self.warmup_draws + shift,
                       run_state=None)

    @property
    def resumable(self):
        return self.run_state is not None

    @property
    def ragged(self):
        """True when the chains have different lengths (an interrupted run)."""
        return bool(np.any(self.chain_lengths != self.draws.shape[1]))

    def _valid(self):
        """Mask (n_chains, n_samples) of the draws each chain made."""
        return np.arange(self.draws.shape[1])[None, :] < self.chain_lengths[:, None]

    def common_draws(self):
        """The draws for rank diagnostics (R-hat, ESS): equal-length chains, so
        after an interrupt the chains that made draws, cut to the shortest."""
        if not self.ragged:
            return self.draws
        made = self.chain_lengths > 0
        if not made.any():
            return self.draws[:, :0]
        return self.draws[made, :int(self.chain_lengths[made].min())]

    def reported_draws(self):
        """The draws summaries and per-parameter diagnostics describe: those of
        :meth:`common_draws`, with each coordinate centred over the classes when
        the model is multinomial (``class_blocks``): a shift common to every
        class changes no probability and keeps its prior, so only the centred
        coefficients are identified by the data."""
        common = self.common_draws()
        if not self.class_blocks:
            return common
        t = common.reshape(common.shape[:-1] + (int(self.class_blocks), -1))
        return (t - t.mean(axis=-2, keepdims=True)).reshape(common.shape)

    def pooled_draws(self):
        """Every retained draw, chains concatenated (chain-major), shape
        (sum(chain_lengths), n_params); aligned with :meth:`weights`."""
        if not self.ragged:
            return self.draws.reshape(-1, self.draws.shape[-1])
        return self.draws[self._valid()]

    def pooled_signs(self):
        """Signs aligned with :meth:`pooled_draws` (None for unsigned samplers)."""
        s = self.signs
        return None if s is None else s[self._valid()]

    def _per_chain_mean(self, v):
        """Mean of a per-iteration statistic over each chain's own iterations."""
        if not self.ragged:
            return v.mean(axis=1) if v.shape[1] else np.full(v.shape[0], np.nan)
        mask = self._valid()
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(mask, v, 0).sum(axis=1) / self.chain_lengths

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
        return np.where(self._valid(), self.stats["sign"], 0).astype(np.int8)

    def weights(self):
        """Normalised importance weights ``s_j / sum s`` of the pooled draws
        (uniform for unsigned samplers); shape (sum(chain_lengths),)."""
        s = self.signs
        if s is None:
            k = int(self.chain_lengths.sum())
            return np.full(k, 1.0 / k) if k else np.empty(0)  # k == 0: interrupted early
        s = s[self._valid()].astype(np.float64)
        total = s.sum()
        if total <= 0:
            # a SamplingError (a ValueError and, as before, a FloatingPointError)
            raise SamplingError(
                "the signed draws have a non-positive sign sum: sign-corrected expectations are "
                "undefined; increase the subsample size m or lambda"
            )
        return s / total

    def posterior_mean(self):
        """(Sign-corrected) posterior mean of the parameters (NaN without draws)."""
        flat = self.pooled_draws()
        if flat.shape[0] == 0:
            return np.full(flat.shape[1], np.nan)
        return self.weights() @ flat

    def n_evals_per_chain(self):
        """All per-datum evaluations per chain: its steps (warmup and sampling),
        its setup passes, and an equal share of the preparation."""
        steps = self._count("n_evals", self.stats) + self._count("n_evals", self.warmup_stats)
        return steps + self.n_evals_setup + self.n_evals_prepare / max(1, self.n_chains)

    def summary(self):
        """:class:`~bayes_subsample.diagnostics.Summary` of the retained draws
        (:meth:`reported_draws`), named by ``param_names``, with the priors
        when the ``layout`` knows them and what the sampler chose and why
        (HMC-ECS: subsampled or full data, :meth:`choice`) under the table."""
        table = self._rank_summary()
        c = self.choice()
        priors = getattr(self.layout, "priors", None)
        return diag.Summary(table.names if self.param_names is None else self.param_names,
                            table.to_dict(), priors=priors,
                            notes=[f"{self.sampler.name}: {c['reason']}"] if c else ())

    def _rank_summary(self):
        """``diagnostics.summary`` of :meth:`reported_draws`, computed once: the
        run's convergence check, :meth:`diagnostics` and :meth:`summary` share
        it (the draws of a trace do not change)."""
        cached = self.__dict__.get("_summary_cache")
        if cached is None:
            cached = self.__dict__["_summary_cache"] = diag.summary(self.reported_draws())
        return cached

    def choice(self):
        """What the sampler's preparation chose and why (HMC-ECS: ``engine``
        "subsampled", "stratified warmup" or "full data", ``rows_per_evaluation``,
        ``n_exact``, ``m``, ``reason`` in words), or None for samplers that make
        no such choice."""
        for t in self.tuning or ():
            if t and t.get("choice"):
                return dict(t["choice"])
        return None

    def diagnostics(self):
        """Per-parameter and per-chain diagnostics as a dict (see estimators'
        ``diagnostics_``). After an interrupt, R-hat, ESS and MCSE use the
        chains that made draws cut to the shortest; per-chain figures use each
        chain's own draws."""
        out = {}
        common = self.reported_draws()
        if common.shape[1] >= 4:
            table = self._rank_summary()
            for k in ("r_hat", "ess_bulk", "ess_tail", "mcse_mean"):
                out[k] = table[k]
            ifs = np.array([[diag.integrated_autocorr_time(common[c, :, j])
                             for j in range(common.shape[2])]
                            for c in range(common.shape[0])])
            out["inefficiency_factor"] = np.nanmean(ifs, axis=0)
        out["chain_lengths"] = self.chain_lengths.copy()
        st = self.stats
        out["acceptance_rate"] = self._per_chain_mean(st["accepted"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # chains without draws
            out["mean_accept_prob"] = np.nanmean(st["accept_prob"], axis=1)
        out["n_divergences"] = (self._count("diverging", st)
                                + self._count("diverging", self.warmup_stats))
        out["n_evals"] = self.n_evals_per_chain()
        passes = self.data_passes or {"prepare": 0, "chains": 0}   # older pickles: None
        out["data_passes"] = {**passes, "total": passes["prepare"] + passes["chains"]}
        out["n_evals_per_iteration"] = self._per_chain_mean(st["n_evals"])
        out["data_fraction_per_iteration"] = out["n_evals_per_iteration"] / self.n_data
        out["wall_time"] = self.wall_time["warmup"] + self.wall_time["sampling"]
        out["sampling_time"] = self.wall_time["sampling"]
        if "ess_bulk" in out:
            # all-in: preparation, warmup and sampling, wall clock (parallel chains overlap)
            elapsed = self.wall_time.get("elapsed", self.wall_time["total"])
            out["ess_per_second"] = out["ess_bulk"] / elapsed if elapsed > 0 else np.nan
        if self.signs is not None:
            out["tau_hat"] = self._per_chain_mean(self.signs > 0)
        ifs_ok = "inefficiency_factor" in out and np.all(out["inefficiency_factor"] > 0) and \
            np.all(np.isfinite(out["inefficiency_factor"])) and np.sum(out["n_evals"]) > 0
        if ifs_ok:
            # CT (doc/algorithms/diagnostics.rst): IF x per-datum evaluations per
            # retained iteration, all evaluations counted (warmup, tuning passes,
            # preparation); signed samplers divide by (2 tau - 1)^2
            evals = float(np.sum(out["n_evals"])) / float(self.chain_lengths.sum())
            tau = float(np.mean(out["tau_hat"])) if self.signs is not None else 1.0
            out["computing_time"] = diag.computing_time(
                out["inefficiency_factor"], evals,
                tau=tau if self.signs is not None else None)
        for k, v in st.items():
            # per-chain means of the sampler-specific statistics
            if k not in _CONTRACT_FIELDS and v.dtype.kind in "fb" and v.shape[1]:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)   # all-NaN columns
                    out[f"mean_{k}"] = (self._per_chain_mean(v) if v.dtype.kind == "b"
                                        else np.nanmean(v.astype(np.float64), axis=1))
        return out

    def _count(self, name, stats):
        """Per-chain sum of a statistic (0 where it was never recorded)."""
        v = stats.get(name)
        return np.zeros(self.n_chains, dtype=np.int64) if v is None else v.sum(axis=1)

    def check_convergence(self, warn=True):
        """Warnings (ConvergenceWarning) for R-hat > 1.01, bulk ESS < 100 per
        chain, divergences, a low share of positive signs; an
        EfficiencyWarning when a sampler deciding on subsamples (austerity,
        confidence) read more than half the data per decision. Returns the
        messages."""
        msgs, efficiency = [], []
        st = self.stats
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
        if getattr(self.sampler, "decides_on_subsamples", False) and "data_fraction" in st:
            frac = float(np.nanmean(self._per_chain_mean(st["data_fraction"])))
            if frac > SUBSAMPLE_EFFICIENCY_LIMIT:
                efficiency.append(
                    f"{self.sampler.name} read {100 * frac:.0f}% of the data per MH decision on "
                    "average: at this rate exact MH, which streams X in one fused pass, is "
                    f"faster. To subsample, {self.sampler.advice_when_reading_everything}.")
        # an approximate sampler whose error knob was too loose for the posterior (its
        # warmup checks against exact MH lowered it): the chains' messages, once each
        for m in dict.fromkeys(t.get("decision_check_message") for t in self.tuning or ()
                               if t and t.get("decision_check_message")):
            msgs.append(f"{self.sampler.name}: {m}")
        ndiv = int(np.sum(self._count("diverging", self.stats)))
        if ndiv:
            total = int(np.size(self.stats["diverging"]))
            # a subsampled chain at its adapted step size: the sampler's own reading
            subsampled = (any(t and not t.get("full_data", False) for t in self.tuning or ())
                          and getattr(self.sampler, "step_size", None) is None)
            why = getattr(self.sampler, "subsampled_divergences", None) if subsampled else None
            msgs.append(
                f"{ndiv} divergent transition{'s' * (ndiv != 1)} after warmup "
                f"({100 * ndiv / total:.2g}% of {total:,}): "
                + (why or "the step size is too large for the posterior's curvature. Increase "
                   "n_warmup or target_accept, or set a smaller step_size.")
            )
        if warn:
            for m in msgs:
                warnings.warn(m, ConvergenceWarning, stacklevel=user_stacklevel())
            for m in efficiency:
                warnings.warn(m, EfficiencyWarning, stacklevel=user_stacklevel())
        return msgs + efficiency

    def to_inference_data(self):
        """An ``arviz.InferenceData`` with posterior draws and sample stats.

        With a ``layout`` (the estimators' traces) the posterior holds its
        variables, e.g. ``coef`` with the coordinate ``feature`` (the column
        names of a DataFrame ``X``, else their indices) and ``intercept``, so
        that ``arviz.summary`` names the rows as :meth:`summary` does;
        otherwise one variable per entry of ``param_names``.
        """
        try:
            import arviz as az
        except ImportError as e:  # pragma: no cover
            raise ImportError("to_inference_data needs arviz: pip install arviz") from e
        names = self.param_names or [f"theta_{j}" for j in range(self.draws.shape[2])]
        common = self.common_draws()
        layout = self.layout
        if layout is not None and list(names) == layout.names:
            posterior, dims, coords = layout.split(common), layout.dims, layout.coords
        else:    # no layout, or param_names renamed since (the command line's files)
            posterior, dims, coords = {n: common[:, :, j] for j, n in enumerate(names)}, None, None
        rename = {"accept_prob": "acceptance_rate", "diverging": "diverging",
                  "energy_error": "energy_error", "n_evals": "n_evals"}
        made = self.chain_lengths > 0 if self.ragged else slice(None)
        stats = {rename.get(k, k): v[made, :common.shape[1]] for k, v in self.stats.items()
                 if k != "accepted"}
        return az.from_dict(posterior=posterior, sample_stats=stats, dims=dims, coords=coords)

    def __repr__(self):
        lengths = (f"chain_lengths={self.chain_lengths.tolist()}" if self.ragged
                   else f"n_samples={self.n_samples}")
        return (f"Trace(sampler={self.sampler.name!r}, n_chains={self.n_chains}, "
                f"{lengths}, interrupted={self.interrupted})")


def user_stacklevel():
    """Stack level of the first frame outside this package (so warnings point
    at the user's call, e.g. ``clf.fit(X, y)``)."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(pkg):
        frame, level = frame.f_back, level + 1
    return level
