"""The sampling driver: initial points, a chain loop, a recorder (kernels live
in ``samplers``, the result in ``_trace``), and resuming a run from its trace."""
from __future__ import annotations

import numbers
import threading
import time
import warnings

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs

from ._linalg import scale_draws
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
    with the field's type (bool, int64 or float64; floats start as NaN).
    ``n_done[c]`` is the number of iterations chain ``c`` has recorded."""

    def __init__(self, n_chains, n_iter, n_params):
        self.draws = np.full((n_chains, n_iter, n_params), np.nan)
        self.stats = {}
        self._by_type = {}            # Info type -> its fields' arrays
        self.n_done = np.zeros(n_chains, dtype=np.int64)
        self._lock = threading.Lock()

    @classmethod
    def extending(cls, draws, stats, lengths, n_iter):
        """A recorder of ``n_iter`` iterations holding a previous run's records."""
        rec = cls(draws.shape[0], max(n_iter, draws.shape[1]), draws.shape[2])
        rec.draws[:, :draws.shape[1]] = draws
        for name, values in stats.items():
            rec._array(name, values.reshape(-1)[:1])[:, :values.shape[1]] = values
        rec.n_done[:] = lengths
        return rec

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

    def result(self):
        """``(draws, stats, lengths)`` cut to the longest chain."""
        width = int(self.n_done.max()) if self.n_done.size else 0
        return (self.draws[:, :width], {k: v[:, :width] for k, v in self.stats.items()},
                self.n_done.copy())


class _Chain:
    """One chain's progress: its random stream, kernel and state, how far its
    warmup and sampling went, and its clocks. Kept in the trace so the run can
    be resumed (:func:`sample` with ``resume=``)."""

    def __init__(self, index, seed, theta0):
        self.index = index
        self.seed = seed              # SeedSequence child of the chain
        self.theta0 = theta0          # fixed start (None: drawn from Prepared)
        self.rng = None
        self.kernel = None
        self.state = None
        self.warmup_ended = False
        self.t_warmup = 0.0
        self.t_sampling = 0.0

    def start(self, sampler, model, prepared, n_warmup):
        self.rng = np.random.Generator(np.random.PCG64(self.seed))
        self.kernel = sampler.build(model, prepared, n_warmup)
        if self.theta0 is not None:
            theta0 = self.theta0.copy()
        else:
            theta0 = np.asarray(prepared.theta_init, dtype=np.float64).copy()
            if prepared.init_chol is not None:
                theta0 = theta0 + scale_draws(prepared.init_chol,
                                              self.rng.standard_normal(len(theta0)))
        self.state = self.kernel.init(self.rng, theta0)


class _RunState:
    """Everything needed to continue a run: the model and the (cloned) sampler,
    the shared preparation, the chains, and the planned warmup length. Held by
    ``Trace`` (never pickled: it references the data)."""

    def __init__(self, model, sampler, prepared, chains, n_warmup, n_target):
        self.model = model
        self.sampler = sampler
        self.prepared = prepared
        self.chains = chains
        self.n_warmup = n_warmup
        self.n_target = n_target


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


def sample(model, sampler=None, *, n_samples=1000, n_warmup=1000, n_chains=4, n_jobs=None,
           random_state=None, progress=False, init=None, param_names=None,
           check_convergence=True, resume=None):
    """Run ``n_chains`` chains of ``sampler`` on ``model``.

    Parameters
    ----------
    model : Model
        Any :class:`~bayes_subsample.models.Model` (GLMs or user models).
    sampler : str or sampler object, default=None
        A registered name (see ``bayes_subsample.samplers.SAMPLERS``) or an
        object such as ``HMC(step_size=0.1)``; objects are cloned, never mutated.
        ``None`` means ``"hmc_ecs"`` (with ``resume``: the trace's sampler).
    n_samples, n_warmup : int
        Retained iterations and warmup (adaptation) iterations per chain.
        With ``resume``, ``n_samples`` is the number of draws to add per
        chain (the default adds 1000; ``None`` adds none and only completes
        an interrupted run) and ``n_warmup`` is ignored (the resumed run's
        warmup is kept).
    n_chains : int, default=4
        Ignored with ``resume`` (the trace's chains continue).
    n_jobs : int, optional
        Chains run in parallel threads (kernels release the GIL). ``None``
        means 1. Draws are identical for every ``n_jobs``.
    random_state : int, Generator or None
        Seeds ``SeedSequence(random_state).spawn(n_chains + 1)``: one child for
        the shared preparation, one per chain. Ignored with ``resume`` (the
        chains continue their own streams).
    progress : bool, default=False
        Show a tqdm progress bar (needs ``tqdm``).
    init : array-like of shape (n_params,) or (n_chains, n_params), optional
        Initial points (default: a draw from the Laplace approximation).
    check_convergence : bool, default=True
        Emit ``ConvergenceWarning`` for R-hat, ESS and divergence problems.
    resume : Trace, optional
        Continue the run that returned this trace (``trace.resumable``): every
        chain goes on from its last state, with its adapted tuning and its
        random stream. An interrupted run is first completed to the length it
        was asked for, then ``n_samples`` draws are added per chain. The
        result holds the whole run and equals, draw for draw, one call with
        the total length. ``model`` must be the data the trace was sampled
        on, and ``sampler`` the same sampler (``None`` or equal parameters).

    Returns
    -------
    Trace

    Notes
    -----
    A ``KeyboardInterrupt`` stops all chains at the end of their current
    iteration; the returned trace keeps every draw each chain made
    (``trace.chain_lengths``; the draws array is NaN past a chain's length)
    and has ``interrupted=True``. ``sample(model, resume=trace)`` completes it.
    """
    if n_jobs is not None and (not isinstance(n_jobs, numbers.Integral) or n_jobs == 0):
        raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}")
    if resume is not None:
        run, n_add = _resume_plan(resume, model, sampler, n_samples)
        old = resume
        old.run_state = None          # its chains move on: the new trace owns them
        n_chains = len(run.chains)
        run.n_target += n_add
        param_names = param_names if param_names is not None else old.param_names
        warm = _Recorder.extending(old.warmup_draws, old.warmup_stats, old.warmup_lengths,
                                   run.n_warmup)
        main = _Recorder.extending(old.draws, old.stats, old.chain_lengths, run.n_target)
        t_prepare, n_evals_prepare = old.wall_time["prepare"], old.n_evals_prepare
        passes_prepare = old.data_passes["prepare"]
        passes_chains = old.data_passes["chains"]
        elapsed_before = old.wall_time["elapsed"]
        sampler = run.sampler
    else:
        sampler = resolve_sampler("hmc_ecs" if sampler is None else sampler)
        n_samples = _check_count("n_samples", n_samples, 1)
        n_warmup = _check_count("n_warmup", n_warmup, 0)
        n_chains = _check_count("n_chains", n_chains, 1)
        _check_model(model)
        if getattr(model, "distributed", False) and not getattr(sampler, "serves_distributed",
                                                                  False):
            raise ValueError(
                f"the sampler {sampler.name!r} cannot sample a model whose rows live with "
                "Dask (it reads rows chosen by the chain at every step, each a round trip "
                "to the cluster): use sampler='hmc_ecs', or bring X into memory (or a "
                "memory map)")
        p = model.n_params
        init = _initial_points(init, n_chains, p)
        children = seed_sequence(random_state).spawn(n_chains + 1)
        t0 = time.perf_counter()
        p0 = model.n_full_passes
        prepared = sampler.prepare(model, np.random.Generator(np.random.PCG64(children[0])))
        t_prepare = time.perf_counter() - t0
        passes_prepare, passes_chains = model.n_full_passes - p0, 0
        n_evals_prepare = prepared.n_evals
        elapsed_before = t_prepare
        chains = [_Chain(c, children[c + 1], None if init is None else init[c].copy())
                  for c in range(n_chains)]
        run = _RunState(model, sampler, prepared, chains, n_warmup, n_samples)
        warm = _Recorder(n_chains, n_warmup, p)
        main = _Recorder(n_chains, n_samples, p)

    p1 = run.model.n_full_passes
    interrupted, seconds = _run_chains(run, warm, main, n_jobs, progress)
    passes_chains += run.model.n_full_passes - p1
    elapsed = elapsed_before + seconds
    if interrupted:
        warnings.warn(
            "sampling interrupted: kept " + ", ".join(str(int(k)) for k in main.n_done)
            + f" draws in the {n_chains} chains; continue the run with sample(model, "
            "resume=trace), or fit again with warm_start=True",
            RuntimeWarning, stacklevel=2)
    draws, stats, lengths = main.result()
    wdraws, wstats, wlengths = warm.result()
    chains = run.chains
    t_warm = np.array([ch.t_warmup for ch in chains])
    t_samp = np.array([ch.t_sampling for ch in chains])
    trace = Trace(
        draws=draws, stats=stats, chain_lengths=lengths,
        warmup_draws=wdraws, warmup_stats=wstats, warmup_lengths=wlengths,
        tuning=[ch.kernel.tuning() if ch.kernel is not None else {} for ch in chains],
        n_evals_prepare=n_evals_prepare,
        data_passes={"prepare": int(passes_prepare), "chains": int(passes_chains),
                     **({"rows_fetched": int(run.model.rows_fetched)}
                        if hasattr(run.model, "rows_fetched") else {})},
        n_evals_setup=np.array([ch.kernel.n_evals_setup if ch.kernel is not None else 0
                                for ch in chains], dtype=np.int64),
        wall_time={"prepare": t_prepare, "warmup": t_warm, "sampling": t_samp,
                   "total": t_prepare + float(np.sum(t_warm + t_samp)), "elapsed": elapsed},
        sampler=sampler, n_data=run.model.n_data, interrupted=interrupted,
        param_names=param_names, run_state=run,
        class_blocks=getattr(run.model, "n_classes", None),
    )
    if check_convergence and not interrupted and trace.n_samples >= 4:
        trace.check_convergence(warn=True)
    return trace


def _resume_plan(trace, model, sampler, n_samples):
    """Check that ``trace`` can be continued on ``model`` with ``sampler``;
    returns its run state and the number of draws to add per chain."""
    if not isinstance(trace, Trace):
        raise TypeError(f"resume must be a Trace returned by sample(), got {type(trace).__name__}")
    run = trace.run_state
    if run is None:
        raise ValueError(
            "this trace cannot be resumed: it holds no chain states (a pickled trace loses "
            "them, and estimators keep them only with warm_start=True or after an interrupt)")
    if model is not run.model:
        _check_model(model)
        fp_old, fp_new = run.model.fingerprint(), model.fingerprint()
        if fp_old != fp_new:
            diff = sorted(k for k in set(fp_old) | set(fp_new) if fp_old.get(k) != fp_new.get(k))
            raise ValueError(
                "resume: the model differs from the one the trace was sampled on (it differs "
                f"in: {', '.join(diff)}); a run can only be continued on the same data, "
                "likelihood and prior")
    if sampler is not None:
        other = resolve_sampler(sampler)
        if other.name != run.sampler.name or repr(other.get_params()) != repr(
                run.sampler.get_params()):
            raise ValueError(
                f"resume: the trace was sampled with {run.sampler!r}, not {other!r}; a run "
                "can only be continued with the same sampler and hyperparameters")
    n_add = 0 if n_samples is None else _check_count("n_samples", n_samples, 0)
    return run, n_add


def _run_chains(run, warm, main, n_jobs, progress):
    """Run (or continue) every chain of ``run`` until its warmup is done and it
    holds ``run.n_target`` draws. Chains run in worker threads so that a
    KeyboardInterrupt in the main thread stops them at an iteration boundary
    (their state stays consistent, so the run can be resumed).

    Returns ``(interrupted, elapsed seconds)``.
    """
    model, sampler, prepared = run.model, run.sampler, run.prepared
    n_warmup, n_target = run.n_warmup, run.n_target
    chains = run.chains
    n_chains = len(chains)
    stop = threading.Event()
    interrupted = threading.Event()
    remaining = int(np.sum(n_warmup - warm.n_done) + np.sum(n_target - main.n_done))
    bar = _progress_bar(progress, remaining)
    # chains in parallel threads share the cores with the model's threaded full
    # passes: each chain gets its share (results do not depend on threads)
    n_parallel = 1 if n_jobs in (None, 1) else min(n_chains, effective_n_jobs(n_jobs))
    chain_threads = max(1, available_cores() // n_parallel)

    def tick(c, i, phase):
        if bar is not None and i % 20 == 19:
            bar.update(20)
            if phase is main:
                done = main.stats["accepted"][c, :i + 1]
                bar.set_postfix(accept=f"{np.mean(done):.2f}", refresh=False)

    def run_chain(ch):
        c = ch.index
        try:
            with limit_threads(chain_threads):
                if ch.kernel is None:
                    ch.start(sampler, model, prepared, n_warmup)
                kernel, rng = ch.kernel, ch.rng
                ts = time.perf_counter()
                try:
                    for i in range(int(warm.n_done[c]), n_warmup):
                        if stop.is_set():
                            return
                        ch.state, info = kernel.warmup_step(rng, ch.state, i)
                        warm.record(c, i, ch.state.theta, info)
                        tick(c, i, warm)
                    if not ch.warmup_ended:
                        ch.state = kernel.end_warmup(ch.state)
                        ch.warmup_ended = True
                finally:
                    ch.t_warmup += time.perf_counter() - ts
                ts = time.perf_counter()
                try:
                    i = int(main.n_done[c])
                    while i < n_target:
                        if stop.is_set():
                            return
                        if kernel.batched:
                            # compiled kernels run many iterations per call
                            k = min(_BLOCK, n_target - i)
                            ch.state, draws, stats = kernel.sample(rng, ch.state, k)
                            main.record_block(c, i, draws, stats)
                            if bar is not None:
                                bar.update(k)
                        else:
                            k = 1
                            ch.state, info = kernel.step(rng, ch.state)
                            main.record(c, i, ch.state.theta, info)
                            tick(c, i, main)
                        i += k
                finally:
                    ch.t_sampling += time.perf_counter() - ts
        except KeyboardInterrupt:
            # raised inside a chain (e.g. by a user callback): stop them all
            interrupted.set()
            stop.set()

    errors = []

    finished = threading.Event()

    def run_all():
        try:
            if n_parallel == 1 or n_chains == 1:
                for ch in chains:
                    run_chain(ch)
                    if stop.is_set():
                        break
            else:
                Parallel(n_jobs=n_jobs, prefer="threads")(delayed(run_chain)(ch) for ch in chains)
        except BaseException as e:   # re-raised in the caller's thread
            errors.append(e)
        finally:
            finished.set()

    t0 = time.perf_counter()
    worker = threading.Thread(target=run_all, name="bayes_subsample-chains", daemon=True)
    try:
        worker.start()
        # an Event, not Thread.join: before Python 3.13 a join interrupted by
        # Ctrl-C can mark a running thread as finished
        try:
            while not finished.wait(0.1):
                pass
        except KeyboardInterrupt:
            # Ctrl-C: the chains stop at the end of their current iteration
            interrupted.set()
            stop.set()
            while not finished.wait(0.1):
                pass
    finally:
        if bar is not None:
            bar.close()
    if errors:
        raise errors[0]
    return interrupted.is_set(), time.perf_counter() - t0


def _progress_bar(progress, total):
    if not progress:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError as e:
        raise ImportError("progress=True needs tqdm: pip install tqdm") from e
    return tqdm(total=total, unit="it", desc="sampling")
