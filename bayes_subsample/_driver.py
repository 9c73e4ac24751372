"""The sampling driver: initial points, a chain loop, a recorder (kernels live
in ``samplers``, the result in ``_trace``)."""
from __future__ import annotations

import numbers
import threading
import time
import warnings

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs

from ._seeding import seed_sequence
from ._threads import available_cores, limit_threads
from ._trace import Trace
from .samplers import resolve_sampler

__all__ = ["sample", "Trace", "resolve_sampler", "seed_sequence"]

#: iterations per call of a batched (compiled multi-iteration) kernel
_BLOCK = 100


class _Recorder:
    """Per-iteration storage for one phase (warmup or sampling): the draws and
    one array per field of the kernels' ``Info``, allocated at the first record
    with the field's type (bool, int64 or float64; floats start as NaN)."""

    def __init__(self, n_chains, n_iter, n_params):
        self.draws = np.full((n_chains, n_iter, n_params), np.nan)
        self.stats = {}
        self._by_type = {}            # Info type -> its fields' arrays
        self.n_done = np.zeros(n_chains, dtype=np.int64)
        self._lock = threading.Lock()

    def _array(self, name, value):
        arr = self.stats.get(name)
        if arr is None:
            with self._lock:
                arr = self.stats.get(name)
                if arr is None:
                    kind = np.asarray(value).dtype.kind
                    shape = self.draws.shape[:2]
                    if kind == "b":
                        arr = np.zeros(shape, dtype=bool)
                    elif kind in "iu":
                        arr = np.zeros(shape, dtype=np.int64)
                    else:
                        arr = np.full(shape, np.nan)
                    self.stats[name] = arr
        return arr

    def record(self, c, i, theta, info):
        self.draws[c, i] = theta
        arrays = self._by_type.get(type(info))
        if arrays is None:
            arrays = [self._array(name, value) for name, value in zip(info._fields, info)]
            self._by_type[type(info)] = arrays
        for arr, value in zip(arrays, info):
            arr[c, i] = value
        self.n_done[c] = i + 1

    def record_block(self, c, start, draws, stats):
        stop = start + len(draws)
        self.draws[c, start:stop] = draws
        for name, values in stats.items():
            self._array(name, values[0])[c, start:stop] = values
        self.n_done[c] = stop

    def stats_of(self, n_keep, chains):
        return {k: v[chains, :n_keep] for k, v in self.stats.items()}


def _check_count(name, value, minimum):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_model(model):
    from .models import GaussianPrior, Model
    if not isinstance(model, Model):
        raise TypeError(f"model must be a bayes_subsample.models.Model, got "
                        f"{type(model).__name__}")
    if not isinstance(model.prior, GaussianPrior):
        raise TypeError(f"the samplers need a GaussianPrior, got {type(model.prior).__name__}")


def _initial_points(init, n_chains, p):
    if init is None:
        return None
    init = np.asarray(init, dtype=np.float64)
    if init.shape == (p,):
        init = np.tile(init, (n_chains, 1))
    if init.shape != (n_chains, p):
        raise ValueError(f"init must have shape ({p},) or ({n_chains}, {p}), got {init.shape}")
    if not np.isfinite(init).all():
        raise ValueError("init contains NaN or infinity")
    return init


def sample(model, sampler="hmc_ecs", *, n_samples=1000, n_warmup=1000, n_chains=4, n_jobs=None,
           random_state=None, progress=False, init=None, param_names=None,
           check_convergence=True):
    """Run ``n_chains`` chains of ``sampler`` on ``model``.

    Parameters
    ----------
    model : Model
        Any :class:`~bayes_subsample.models.Model` (GLMs or user models).
    sampler : str or sampler object, default="hmc_ecs"
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
    _check_model(model)
    p = model.n_params
    children = seed_sequence(random_state).spawn(n_chains + 1)

    t0 = t_start = time.perf_counter()
    prepared = sampler.prepare(model, np.random.Generator(np.random.PCG64(children[0])))
    t_prepare = time.perf_counter() - t0
    init = _initial_points(init, n_chains, p)

    warm = _Recorder(n_chains, n_warmup, p)
    main = _Recorder(n_chains, n_samples, p)
    tuning = [None] * n_chains
    setup_evals = np.zeros(n_chains, dtype=np.int64)
    t_warm = np.zeros(n_chains)
    t_samp = np.zeros(n_chains)
    stop = threading.Event()
    bar = _progress_bar(progress, n_chains * (n_warmup + n_samples))
    # chains in parallel threads share the cores with the model's threaded full
    # passes: each chain gets its share (results do not depend on threads)
    n_parallel = 1 if n_jobs in (None, 1) else min(n_chains, effective_n_jobs(n_jobs))
    chain_threads = max(1, available_cores() // n_parallel)

    def tick(c, i, phase):
        if bar is not None and i % 20 == 19:
            bar.update(20)
            if phase is main:
                bar.set_postfix(accept=f"{np.mean(main.stats['accepted'][c, :i + 1]):.2f}",
                                refresh=False)

    def run_chain(c):
        rng = np.random.Generator(np.random.PCG64(children[c + 1]))
        kernel = sampler.build(model, prepared, n_warmup)
        if init is not None:
            theta0 = init[c].copy()
        else:
            theta0 = np.asarray(prepared.theta_init, dtype=np.float64).copy()
            if prepared.init_chol is not None:
                theta0 = theta0 + prepared.init_chol @ rng.standard_normal(p)
        ts = time.perf_counter()
        try:
            with limit_threads(chain_threads):
                state = kernel.init(rng, theta0)
                for i in range(n_warmup):
                    if stop.is_set():
                        return
                    state, info = kernel.warmup_step(rng, state, i)
                    warm.record(c, i, state.theta, info)
                    tick(c, i, warm)
                state = kernel.end_warmup(state)
                t_warm[c] = time.perf_counter() - ts
                ts = time.perf_counter()
                i = 0
                while i < n_samples:
                    if stop.is_set():
                        return
                    if kernel.batched:
                        # compiled kernels run many iterations per call
                        k = min(_BLOCK, n_samples - i)
                        state, draws, stats = kernel.sample(rng, state, k)
                        main.record_block(c, i, draws, stats)
                        if bar is not None:
                            bar.update(k)
                    else:
                        k = 1
                        state, info = kernel.step(rng, state)
                        main.record(c, i, state.theta, info)
                        tick(c, i, main)
                    i += k
                t_samp[c] = time.perf_counter() - ts
        finally:
            if t_samp[c] == 0 and main.n_done[c] > 0:
                t_samp[c] = time.perf_counter() - ts
            tuning[c] = kernel.tuning()
            setup_evals[c] = kernel.n_evals_setup

    interrupted = False
    try:
        if n_parallel == 1 or n_chains == 1:
            for c in range(n_chains):
                run_chain(c)
        else:
            Parallel(n_jobs=n_jobs, prefer="threads")(
                delayed(run_chain)(c) for c in range(n_chains))
    except KeyboardInterrupt:
        stop.set()
        interrupted = True
    finally:
        if bar is not None:
            bar.close()

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
        draws=main.draws[chains, :n_keep], stats=main.stats_of(n_keep, chains),
        warmup_draws=warm.draws[chains, :n_keep_w], warmup_stats=warm.stats_of(n_keep_w, chains),
        tuning=[tuning[c] for c in chains], n_evals_prepare=prepared.n_evals,
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
