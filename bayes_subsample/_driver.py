"""The sampling driver: chains, warmup, collection (kernels live in ``samplers``)."""
from __future__ import annotations

import numbers
import threading
import time
import warnings

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from . import diagnostics as diag
from ._seeding import seed_sequence
from .samplers._base import BaseSampler

__all__ = ["sample", "Trace", "resolve_sampler", "seed_sequence"]

_STD_FIELDS = ("accept_prob", "accepted", "diverging", "energy_error", "n_evals")


def _registry():
    from .samplers import SAMPLERS
    return SAMPLERS


def resolve_sampler(sampler):
    """A fresh sampler object from a registered name or a sampler object (cloned)."""
    reg = _registry()
    if isinstance(sampler, str):
        if sampler not in reg:
            raise ValueError(
                f"unknown sampler {sampler!r}; choose one of {sorted(reg)} or pass a sampler object"
            )
        return reg[sampler]()
    if isinstance(sampler, BaseSampler):
        return clone(sampler)
    raise TypeError(
        f"sampler must be a registered name ({sorted(reg)}) or a sampler object from "
        f"bayes_subsample.samplers, got {type(sampler).__name__}"
    )


class _Recorder:
    """Preallocated per-iteration storage for one phase (warmup or sampling)."""

    def __init__(self, n_chains, n_iter, n_params):
        self.draws = np.full((n_chains, n_iter, n_params), np.nan)
        self.n_iter = n_iter
        self.std = {
            "accept_prob": np.full((n_chains, n_iter), np.nan),
            "accepted": np.zeros((n_chains, n_iter), dtype=bool),
            "diverging": np.zeros((n_chains, n_iter), dtype=bool),
            "energy_error": np.full((n_chains, n_iter), np.nan),
            "n_evals": np.zeros((n_chains, n_iter), dtype=np.int64),
        }
        self.extra = {}
        self.n_done = np.zeros(n_chains, dtype=np.int64)
        self._lock = threading.Lock()

    def record(self, c, i, theta, info):
        self.draws[c, i] = theta
        std = self.std
        std["accept_prob"][c, i] = info.accept_prob
        std["accepted"][c, i] = info.accepted
        std["diverging"][c, i] = info.diverging
        std["energy_error"][c, i] = info.energy_error
        std["n_evals"][c, i] = info.n_evals
        if info.extra:
            for k, v in info.extra.items():
                arr = self.extra.get(k)
                if arr is None:
                    with self._lock:
                        arr = self.extra.get(k)
                        if arr is None:
                            arr = np.full(self.draws.shape[:2], np.nan)
                            self.extra[k] = arr
                arr[c, i] = v
        self.n_done[c] = i + 1

    def stats(self, n_keep, chains):
        out = {k: v[chains, :n_keep] for k, v in self.std.items()}
        out.update({k: v[chains, :n_keep] for k, v in self.extra.items()})
        return out


class Trace:
    """Result of :func:`sample`.

    Attributes
    ----------
    draws : ndarray of shape (n_chains, n_samples, n_params)
        Retained draws (after warmup).
    stats : dict of ndarray (n_chains, n_samples)
        Per-iteration diagnostics: ``accept_prob``, ``accepted``, ``diverging``,
        ``energy_error``, ``n_evals`` and sampler-specific entries (e.g.
        ``sigma2``, ``alpha_u``, ``sign``, ``data_fraction``).
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

    def __init__(self, *, draws, stats, warmup_draws, warmup_stats, tuning, n_evals_prepare,
                 n_evals_setup, wall_time, sampler, n_data, interrupted, param_names=None):
        self.draws = draws
        self.stats = stats
        self.warmup_draws = warmup_draws
        self.warmup_stats = warmup_stats
        self.tuning = tuning
        self.n_evals_prepare = int(n_evals_prepare)
        self.n_evals_setup = np.asarray(n_evals_setup)
        self.wall_time = wall_time
        self.sampler = sampler
        self.n_data = int(n_data)
        self.interrupted = interrupted
        self.param_names = param_names

    @property
    def n_chains(self):
        return self.draws.shape[0]

    @property
    def n_samples(self):
        return self.draws.shape[1]

    @property
    def signs(self):
        s = self.stats.get("sign")
        return None if s is None else s.astype(np.int8)

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
        steps = self.stats["n_evals"].sum(axis=1) + self.warmup_stats["n_evals"].sum(axis=1)
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
        out["n_divergences"] = st["diverging"].sum(axis=1) + self.warmup_stats["diverging"].sum(axis=1)
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
            # CT (ALGORITHMS §6): IF x per-datum evaluations per retained iteration,
            # all evaluations counted (warmup, tuning passes, preparation);
            # signed samplers divide by (2 tau - 1)^2
            evals = float(np.sum(out["n_evals"])) / (self.n_chains * self.n_samples)
            tau = float(np.mean(out["tau_hat"])) if self.signs is not None else 1.0
            out["computing_time"] = diag.computing_time(
                out["inefficiency_factor"], evals,
                tau=tau if self.signs is not None else None)
        for k in ("sigma2", "alpha_u", "data_fraction", "n_batches", "index_accept"):
            if k in st:
                out[f"mean_{k}"] = np.nanmean(st[k], axis=1)
        return out

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
        ndiv = int(np.sum(self.stats["diverging"]))
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
    import os
    import sys
    pkg = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(pkg):
        frame, level = frame.f_back, level + 1
    return level


def _check_count(name, value, minimum):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def sample(model, sampler="hmc", *, n_samples=1000, n_warmup=1000, n_chains=4, n_jobs=None,
           random_state=None, progress=False, init=None, param_names=None,
           check_convergence=True):
    """Run ``n_chains`` chains of ``sampler`` on ``model``.

    Parameters
    ----------
    model : Model
        Any :class:`~bayes_subsample.models.Model` (GLMs or user models).
    sampler : str or sampler object, default="hmc"
        A registered name (see ``bayes_subsample.samplers.SAMPLERS``) or an
        object such as ``HMC(step_size=0.1)``; objects are cloned, never mutated.
    n_samples, n_warmup : int
        Retained iterations and warmup (adaptation) iterations per chain.
    n_chains : int, default=4
    n_jobs : int, optional
        Chains run in parallel threads (kernels release the GIL). ``None``
        means 1. Draws are identical for every ``n_jobs``.
    random_state : int, Generator or None
        Seeds ``SeedSequence(random_state).spawn(n_chains + 1)``: one child for
        the shared preparation, one per chain.
    progress : bool, default=False
        Show a tqdm progress bar (needs ``tqdm``).
    init : array-like of shape (n_params,) or (n_chains, n_params), optional
        Initial points (default: a draw from the Laplace approximation).
    check_convergence : bool, default=True
        Emit ``ConvergenceWarning`` for R-hat, ESS and divergence problems.

    Returns
    -------
    Trace

    Notes
    -----
    A ``KeyboardInterrupt`` stops all chains; the returned trace keeps every
    draw made (truncated to the shortest chain) and has ``interrupted=True``.
    """
    sampler = resolve_sampler(sampler)
    n_samples = _check_count("n_samples", n_samples, 1)
    n_warmup = _check_count("n_warmup", n_warmup, 0)
    n_chains = _check_count("n_chains", n_chains, 1)
    if n_jobs is not None and (not isinstance(n_jobs, numbers.Integral) or n_jobs == 0):
        raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}")
    sampler._check_model(model)
    p = model.n_params
    ss = seed_sequence(random_state)
    children = ss.spawn(n_chains + 1)

    t0 = t_start = time.perf_counter()
    shared = sampler.prepare(model, np.random.Generator(np.random.PCG64(children[0])))
    t_prepare = time.perf_counter() - t0

    if init is not None:
        init = np.asarray(init, dtype=np.float64)
        if init.shape == (p,):
            init = np.tile(init, (n_chains, 1))
        if init.shape != (n_chains, p):
            raise ValueError(f"init must have shape ({p},) or ({n_chains}, {p}), got {init.shape}")
        if not np.isfinite(init).all():
            raise ValueError("init contains NaN or infinity")

    warm = _Recorder(n_chains, n_warmup, p)
    main = _Recorder(n_chains, n_samples, p)
    tuning = [None] * n_chains
    setup_evals = np.zeros(n_chains, dtype=np.int64)
    t_warm = np.zeros(n_chains)
    t_samp = np.zeros(n_chains)
    stop = threading.Event()
    bar = _progress_bar(progress, n_chains * (n_warmup + n_samples))

    def run_chain(c):
        rng = np.random.Generator(np.random.PCG64(children[c + 1]))
        kernel = sampler.build(model, shared, n_warmup)
        if init is not None:
            theta0 = init[c].copy()
        else:
            theta0 = np.asarray(shared["theta_init"], dtype=np.float64).copy()
            if shared.get("chol_cov") is not None:
                theta0 = theta0 + shared["chol_cov"] @ rng.standard_normal(p)
        ts = time.perf_counter()
        state = kernel.init(rng, theta0)
        try:
            for i in range(n_warmup):
                if stop.is_set():
                    return
                state, info = kernel.warmup_step(rng, state, i)
                warm.record(c, i, state.theta, info)
                if bar is not None and i % 20 == 19:
                    bar.update(20)
            state = kernel.end_warmup(state)
            t_warm[c] = time.perf_counter() - ts
            ts = time.perf_counter()
            for i in range(n_samples):
                if stop.is_set():
                    return
                state, info = kernel.step(rng, state)
                main.record(c, i, state.theta, info)
                if bar is not None and i % 20 == 19:
                    bar.update(20)
                    bar.set_postfix(accept=f"{np.mean(main.std['accepted'][c, :i + 1]):.2f}",
                                    refresh=False)
            t_samp[c] = time.perf_counter() - ts
        finally:
            if t_samp[c] == 0 and main.n_done[c] > 0:
                t_samp[c] = time.perf_counter() - ts
            tuning[c] = kernel.tuning()
            setup_evals[c] = kernel.n_evals_setup

    interrupted = False
    # chains in parallel threads share the cores with the model's threaded full
    # passes: split the cores between them (results do not depend on threads)
    from joblib import effective_n_jobs
    n_parallel = 1 if n_jobs in (None, 1) else min(n_chains, effective_n_jobs(n_jobs))
    model_threads = getattr(model, "n_threads", None)
    if n_parallel > 1 and isinstance(model_threads, numbers.Integral):
        model.n_threads = max(1, model_threads // n_parallel)
    try:
        if n_jobs in (None, 1) or n_chains == 1:
            for c in range(n_chains):
                run_chain(c)
        else:
            Parallel(n_jobs=n_jobs, prefer="threads")(delayed(run_chain)(c) for c in range(n_chains))
    except KeyboardInterrupt:
        stop.set()
        interrupted = True
    finally:
        if bar is not None:
            bar.close()
        if n_parallel > 1 and isinstance(model_threads, numbers.Integral):
            model.n_threads = model_threads

    if interrupted:
        chains = np.flatnonzero(main.n_done > 0)
        if chains.size == 0:
            chains = np.flatnonzero(warm.n_done > 0)
        n_keep = int(main.n_done[chains].min()) if chains.size else 0
        n_keep_w = int(warm.n_done[chains].min()) if chains.size else 0
        warnings.warn(
            f"sampling interrupted: kept {n_keep} draws in each of {chains.size} chains",
            RuntimeWarning, stacklevel=2)
    else:
        chains = np.arange(n_chains)
        n_keep, n_keep_w = n_samples, n_warmup

    trace = Trace(
        draws=main.draws[chains, :n_keep], stats=main.stats(n_keep, chains),
        warmup_draws=warm.draws[chains, :n_keep_w], warmup_stats=warm.stats(n_keep_w, chains),
        tuning=[tuning[c] for c in chains], n_evals_prepare=shared.get("n_evals", 0),
        n_evals_setup=setup_evals[chains],
        wall_time={"prepare": t_prepare, "warmup": t_warm[chains], "sampling": t_samp[chains],
                   "total": t_prepare + float(np.sum(t_warm[chains] + t_samp[chains])),
                   "elapsed": time.perf_counter() - t_start},
        sampler=sampler, n_data=model.n_data, interrupted=interrupted, param_names=param_names,
    )
    if check_convergence and not interrupted and n_keep >= 4:
        trace.check_convergence(warn=True)
    return trace


def _progress_bar(progress, total):
    if not progress:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError as e:
        raise ImportError("progress=True needs tqdm: pip install tqdm") from e
    return tqdm(total=total, unit="it", desc="sampling")
