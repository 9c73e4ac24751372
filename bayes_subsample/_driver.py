"""The sampling driver: initial points, a chain loop, a recorder (kernels live
in ``samplers``, the result in ``_trace``), and resuming a run from its trace."""
from __future__ import annotations

import numbers
import sys
import threading
import time
import uuid
import warnings

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs, parallel_config
from joblib.parallel import get_active_backend

from ._cost import CostWatch, make_progress_bar, run_causes
from ._interrupt import run_stoppable, stop_description, stop_signals
from ._linalg import scale_draws
from ._run_checks import (_chain_marks, _check_count, _check_model, _check_param_names,
                          _resume_plan, _warn_nan_evaluations)
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
        #: what a run on a Dask worker returned (its kernel stays there): the
        #: chain's ``tuning``, ``n_evals_setup`` and the worker's address
        self.remote = None

    def needs_work(self, warm_done, main_done, n_warmup, n_target):
        return warm_done < n_warmup or not self.warmup_ended or main_done < n_target

    def tuning(self):
        if self.kernel is not None:
            return self.kernel.tuning()
        return dict(self.remote["tuning"]) if self.remote is not None else {}

    def n_evals_setup(self):
        if self.kernel is not None:
            return self.kernel.n_evals_setup
        return self.remote["n_evals_setup"] if self.remote is not None else 0

    def shippable(self):
        """This chain without kernel, generator and state (they do not pickle:
        kernels hold compiled objects): what a Dask worker restarts it from."""
        ch = _Chain(self.index, self.seed, self.theta0)
        ch.warmup_ended = self.warmup_ended
        return ch

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

    def __init__(self, model, sampler, prepared, chains, n_warmup, n_target, fingerprint):
        self.model = model
        #: ``model.fingerprint()`` when the run started (a hash of all its data):
        #: a continuation compares it with a fresh one, so data edited in place
        #: since then are seen
        self.fingerprint = fingerprint
        self.sampler = sampler
        self.prepared = prepared
        self.chains = chains
        self.n_warmup = n_warmup
        self.n_target = n_target
        #: full passes and fetched rows of chains that ran on Dask workers (made
        #: by the workers' copies of the model, not counted by ``model``)
        self.remote_passes = 0
        self.remote_rows = 0


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
           random_state=None, progress=None, init=None, param_names=None,
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
        Chains run in parallel threads (kernels release the GIL), ``n_jobs`` at
        a time (``-1``: one per core). ``None`` means 1. Draws are identical for
        every ``n_jobs``. Under joblib's Dask backend (``with
        joblib.parallel_config(backend="dask"):`` and a ``distributed.Client``)
        and ``n_jobs`` other than None and 1, the chains run as tasks on the
        cluster's workers instead, ``n_jobs`` at a time (``-1``: one per worker
        thread), with the same draws (see Notes).
    random_state : int, Generator or None
        Seeds ``SeedSequence(random_state).spawn(n_chains + 1)``: one child for
        the shared preparation, one per chain. Ignored with ``resume`` (the
        chains continue their own streams).
    progress : bool or None, default=None
        Show a tqdm progress bar (needs ``tqdm``): True from the start, False
        never, None from the moment a
        :class:`~bayes_subsample.exceptions.LongFitWarning` says the run is
        estimated to be long (if tqdm is installed).
    init : array-like of shape (n_params,) or (n_chains, n_params), optional
        Initial points (default: a draw from the Laplace approximation).
    param_names : sequence of str, optional
        One distinct name per parameter (``model.n_params`` of them; another
        number is refused), used by the summary and the ArviZ export.
    check_convergence : bool, default=True
        Emit ``ConvergenceWarning`` for R-hat, ESS and divergence problems.
    resume : Trace, optional
        Continue the run that returned this trace (``trace.resumable``): every
        chain goes on from its last state, with its adapted tuning and its
        random stream. An interrupted run is first completed to the length it
        was asked for, then ``n_samples`` draws are added per chain. The
        result holds the whole run and equals, draw for draw, one call with
        the total length. ``model`` must be the data the trace was sampled
        on, and ``sampler`` the same sampler (``None`` or equal parameters):
        ``model.fingerprint()`` (for the GLMs a hash of every value of X and
        y) is taken when a run starts and compared at each continuation, so
        data edited in place since then raise a ValueError. The trace keeps
        its chains until the continuation moves one of them on.

    Returns
    -------
    Trace

    Notes
    -----
    A ``KeyboardInterrupt`` (Ctrl-C) stops all chains at the end of their
    current iteration; the returned trace keeps every draw each chain made
    (``trace.chain_lengths``; the draws array is NaN past a chain's length)
    and has ``interrupted=True``. ``sample(model, resume=trace)`` completes it.
    Called from the main thread, SIGTERM and SIGHUP (when their handler is
    the default one, which would end the process and lose the draws) do the
    same while the chains run; from another thread (a joblib or Dask worker)
    signal handling is left as it is.

    *Chains on a Dask cluster.* The model (with its data: an in-memory ``X``
    travels to every worker once, so this suits moderate ``X``; a
    :class:`~bayes_subsample.models.DaskGLM`'s workers fetch the rows they
    need from the cluster), the sampler and its preparation are pickled and
    scattered to the workers; the preparation runs in this process. Each chain
    is a task that builds its kernel on its worker, runs its warmup and draws
    and returns them, with its statistics, clocks and tuning (where
    ``tuning[c]["worker"]`` is the worker's address). Its kernel stays on the
    worker (kernels do not pickle), so resuming the run (``resume=``,
    ``warm_start``) *replays* each chain from its seed up to its last draw
    (checked against it; not counted in ``wall_time``, its full passes counted
    in ``data_passes``) before continuing; so does continuing on the cluster a
    run made in threads. The result still equals one call with the total
    length. On KeyboardInterrupt the chains stop at an iteration
    boundary (they look for the stop signal every 0.2 s) and return their
    draws, which are kept; a second interrupt while waiting for them cancels
    their tasks and gives up those draws.
    """
    if n_jobs is not None and (not isinstance(n_jobs, numbers.Integral) or n_jobs == 0):
        raise ValueError(f"n_jobs must be None or a non-zero integer, got {n_jobs!r}")
    param_names = _check_param_names(param_names, model)
    if resume is not None:
        run, n_add = _resume_plan(resume, model, sampler, n_samples)
        old = resume
        n_chains = len(run.chains)
        n_target = run.n_target + n_add
        param_names = param_names if param_names is not None else old.param_names
        warm = _Recorder.extending(old.warmup_draws, old.warmup_stats, old.warmup_lengths,
                                   run.n_warmup)
        main = _Recorder.extending(old.draws, old.stats, old.chain_lengths, n_target)
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
        fingerprint = model.fingerprint()
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
        run = _RunState(model, sampler, prepared, chains, n_warmup, n_samples, fingerprint)
        warm = _Recorder(n_chains, n_warmup, p)
        main = _Recorder(n_chains, n_samples, p)

    p1 = run.model.n_full_passes - run.remote_passes
    nan0 = run.model.nan_evaluations[0]
    if resume is None:
        interrupted, seconds = _run_chains(run, warm, main, n_jobs, progress)
    else:
        # the chains stay the old trace's until they move on: a failure or an
        # interrupt that escapes before any chain moved leaves it resumable
        marks = _chain_marks(run)
        try:
            run.n_target = n_target
            interrupted, seconds = _run_chains(run, warm, main, n_jobs, progress)
        except BaseException:
            if _chain_marks(run) == marks:
                run.n_target = n_target - n_add
            else:
                old.run_state = None
            raise
        old.run_state = None          # its chains moved on: the new trace owns them
    passes_chains += run.model.n_full_passes + run.remote_passes - p1
    elapsed = elapsed_before + seconds
    _warn_nan_evaluations(run.model, nan0)
    if interrupted:
        warnings.warn(
            f"sampling {stop_description()}: kept " + ", ".join(str(int(k)) for k in main.n_done)
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
        tuning=[ch.tuning() for ch in chains],
        n_evals_prepare=n_evals_prepare,
        data_passes={"prepare": int(passes_prepare), "chains": int(passes_chains),
                     **({"rows_fetched": int(run.model.rows_fetched + run.remote_rows)}
                        if hasattr(run.model, "rows_fetched") else {})},
        n_evals_setup=np.array([ch.n_evals_setup() for ch in chains], dtype=np.int64),
        wall_time={"prepare": t_prepare, "warmup": t_warm, "sampling": t_samp,
                   "total": t_prepare + float(np.sum(t_warm + t_samp)), "elapsed": elapsed},
        sampler=sampler, n_data=run.model.n_data, interrupted=interrupted,
        param_names=param_names, run_state=run,
        class_blocks=getattr(run.model, "n_classes", None),
    )
    if check_convergence and not interrupted and trace.n_samples >= 4:
        trace.check_convergence(warn=True)
    return trace


def _advance(ch, sampler, model, prepared, n_warmup, n_target, warm, main, c, stop,
             tick=None, bar=None):
    """Run chain ``ch`` until its warmup is done and it holds ``n_target``
    draws, recording iteration ``i`` in row ``c`` of the recorders ``warm`` and
    ``main`` from their ``n_done[c]`` on; returns early when ``stop.is_set()``
    at an iteration boundary (the chain's state stays consistent).

    A chain without a kernel but with recorded iterations ran on a Dask worker,
    where its kernel stayed (kernels do not pickle): it is *replayed* first,
    restarted from its seed and run without recording up to where its records
    end, which gives its state there exactly (a chain's draws depend only on
    its seed); the replayed draw at that point is checked against the record.
    A replay stopped by ``stop`` leaves the chain to be replayed again.
    """
    warm_done, main_done = int(warm.n_done[c]), int(main.n_done[c])
    replay = ch.kernel is None and (warm_done > 0 or main_done > 0)
    if ch.kernel is None:
        ch.start(sampler, model, prepared, n_warmup)
        if replay:
            ch.warmup_ended = False
    kernel, rng = ch.kernel, ch.rng
    # while the kernel is behind the records it replays (untimed, unrecorded);
    # left behind (a stop or an error), the chain is replayed again next time
    behind = replay

    def check(n, theta, recorded):
        if not np.array_equal(theta, recorded, equal_nan=True):
            raise RuntimeError(
                f"chain {ch.index}: replaying its first {n} iterations of a phase did not "
                "reproduce its recorded draws (the model or sampler changed since they were "
                "made?)")

    try:
        ts = time.perf_counter()
        try:
            for i in range(0 if replay else warm_done, n_warmup):
                if behind and main_done == 0 and i >= warm_done:
                    behind = False
                    ts = time.perf_counter()
                if stop.is_set():
                    return
                ch.state, info = kernel.warmup_step(rng, ch.state, i)
                if i >= warm_done:
                    warm.record(c, i, ch.state.theta, info)
                    if tick is not None:
                        tick(c, i, warm)
                elif i == warm_done - 1:
                    check(warm_done, ch.state.theta, warm.draws[c, i])
            if not ch.warmup_ended:
                ch.state = kernel.end_warmup(ch.state)
                ch.warmup_ended = True
        finally:
            if not behind:
                ch.t_warmup += time.perf_counter() - ts
        if behind and main_done == 0:
            behind = False
        ts = time.perf_counter()
        try:
            i = 0 if replay else main_done
            while i < n_target:
                if behind and i >= main_done:
                    behind = False
                    ts = time.perf_counter()
                if stop.is_set():
                    return
                # a replay ends exactly where the records end
                end = main_done if i < main_done else n_target
                if kernel.batched:
                    # compiled kernels run many iterations per call
                    k = min(_BLOCK, end - i)
                    ch.state, draws, stats = kernel.sample(rng, ch.state, k)
                    if i >= main_done:
                        main.record_block(c, i, draws, stats)
                        if bar is not None:
                            bar.update(k)
                    elif i + k == main_done:
                        check(main_done, draws[-1], main.draws[c, main_done - 1])
                else:
                    k = 1
                    ch.state, info = kernel.step(rng, ch.state)
                    if i >= main_done:
                        main.record(c, i, ch.state.theta, info)
                        if tick is not None:
                            tick(c, i, main)
                    elif i + 1 == main_done:
                        check(main_done, ch.state.theta, main.draws[c, i])
                i += k
        finally:
            if not behind:
                ch.t_sampling += time.perf_counter() - ts
    finally:
        if behind:
            ch.kernel = ch.state = ch.rng = None


def _dask_backend():
    """The active joblib backend when it is joblib's Dask backend
    (``parallel_config(backend="dask")`` or ``parallel_backend("dask")``), else
    None. Looked up without importing dask: joblib imports its Dask backend
    when such a context is entered."""
    mod = sys.modules.get("joblib._dask")
    if mod is None:
        return None
    backend, _ = get_active_backend()
    return backend if isinstance(backend, mod.DaskDistributedBackend) else None


def _n_parallel(n_jobs, n_chains, dask_backend):
    """How many chains run at once."""
    if n_jobs in (None, 1) or n_chains == 1:
        return 1
    if dask_backend is not None:
        slots = max(1, dask_backend.effective_n_jobs(n_jobs))    # threads of the workers
        n = n_jobs if n_jobs > 0 else max(1, slots + 1 + n_jobs)
    else:
        with parallel_config(backend="threading"):
            n = effective_n_jobs(n_jobs)
    return max(1, min(n_chains, n))


def _run_chains(run, warm, main, n_jobs, progress):
    """Run (or continue) every chain of ``run`` until its warmup is done and it
    holds ``run.n_target`` draws. Chains run in worker threads so that a
    KeyboardInterrupt in the main thread (Ctrl-C, SIGTERM or SIGHUP: see
    :func:`~bayes_subsample._interrupt.run_stoppable`) stops them at an
    iteration boundary (their state stays consistent, so the run can be
    resumed). Under joblib's
    Dask backend, with more than one chain at a time, they run on the
    cluster's workers instead (:func:`_run_chains_on_cluster`).

    Returns ``(interrupted, elapsed seconds)``.
    """
    model, sampler, prepared = run.model, run.sampler, run.prepared
    n_warmup, n_target = run.n_warmup, run.n_target
    chains = run.chains
    n_chains = len(chains)
    remaining = int(np.sum(n_warmup - warm.n_done) + np.sum(n_target - main.n_done))
    done0 = int(warm.n_done.sum() + main.n_done.sum())
    dask_backend = _dask_backend()
    n_parallel = _n_parallel(n_jobs, n_chains, dask_backend)
    if dask_backend is not None and n_parallel > 1:
        bar = make_progress_bar(remaining) if progress else None
        try:
            with stop_signals():
                return _run_chains_on_cluster(run, warm, main, dask_backend, n_parallel, bar)
        finally:
            if bar is not None:
                bar.close()
    stop = threading.Event()
    interrupted = threading.Event()
    # the progress bar, and the estimate of the run's cost (LongFitWarning)
    bar = CostWatch(progress, remaining, lambda: int(warm.n_done.sum() + main.n_done.sum())
                    - done0, run_causes(model, sampler, (warm, main)), stop)
    # chains in parallel threads share the cores with the model's threaded full
    # passes: each chain gets its share (results do not depend on threads)
    chain_threads = max(1, available_cores() // n_parallel)

    def tick(c, i, phase):
        bar.tick()
        if i % 20 == 19:
            bar.update(20)
            if phase is main and bar.bar is not None:
                done = main.stats["accepted"][c, :i + 1]
                bar.set_postfix(accept=f"{np.mean(done):.2f}", refresh=False)

    def run_chain(ch):
        c = ch.index
        if not ch.needs_work(warm.n_done[c], main.n_done[c], n_warmup, n_target):
            return
        try:
            with limit_threads(chain_threads):
                _advance(ch, sampler, model, prepared, n_warmup, n_target, warm, main, c,
                         stop, tick, bar)
        except KeyboardInterrupt:
            # raised inside a chain (e.g. by a user callback): stop them all
            interrupted.set()
            stop.set()

    def run_all():
        if n_parallel == 1:
            for ch in chains:
                run_chain(ch)
                if stop.is_set():
                    break
        else:
            # threads (the chains write into this process's recorders); this
            # thread does not see the caller's parallel_config (thread-local),
            # and require="sharedmem" keeps threads even if it did
            Parallel(n_jobs=n_parallel, require="sharedmem")(
                delayed(run_chain)(ch) for ch in chains)

    t0 = time.perf_counter()
    try:
        # Ctrl-C, SIGTERM or SIGHUP: the chains stop at the end of their
        # current iteration
        if run_stoppable(run_all, stop, name="bayes_subsample-chains") is not None:
            interrupted.set()
    finally:
        if bar is not None:
            bar.close()
    return interrupted.is_set(), time.perf_counter() - t0


class _ChainJob:
    """What every chain of a run needs on a Dask worker: the sampler, the model
    and the shared preparation (pickled together, so the model's data travel
    once), and the run's lengths."""

    def __init__(self, sampler, model, prepared, n_warmup, n_target):
        self.sampler = sampler
        self.model = model
        self.prepared = prepared
        self.n_warmup = n_warmup
        self.n_target = n_target

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_reported")}

    def __setstate__(self, state):
        # a worker unpickles the job once; its chains share the model copy
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._reported = self._counts()

    def _counts(self):
        return (self.model.n_full_passes, getattr(self.model, "rows_fetched", 0))

    def report(self):
        """Full passes and fetched rows of this worker's model copy since the
        last report: chains running at once on one worker share the copy, so
        each pass or row is reported by exactly one of them."""
        with self._lock:
            now = self._counts()
            delta = (now[0] - self._reported[0], now[1] - self._reported[1])
            self._reported = now
        return delta


class _StopFlag:
    """``is_set()`` of a ``distributed.Event`` asked at most every ``every``
    seconds (each question is a round trip to the scheduler)."""

    def __init__(self, name, every=0.2):
        from distributed import Event
        self._event = Event(name)
        self._every = every
        self._next = time.perf_counter() + every
        self._set = False

    def is_set(self):
        if not self._set and time.perf_counter() >= self._next:
            self._set = self._event.is_set()
            self._next = time.perf_counter() + self._every
        return self._set


def _chain_on_worker(job, ch, warm_done, main_done, last_warm, last_main, stop_name):
    """A Dask task: run (or continue by replaying) chain ``ch`` on this worker
    and return what it added -- draws and statistics from ``warm_done`` and
    ``main_done`` on -- with its clocks, tuning and where it ran. It stops early
    when the run's stop event is set (an interrupt in the client)."""
    from distributed import get_worker

    worker = get_worker()
    p = job.model.n_params
    warm = _Recorder(1, job.n_warmup, p)
    main = _Recorder(1, job.n_target, p)
    # the last recorded draws: what a replay must reproduce
    if warm_done:
        warm.draws[0, warm_done - 1] = last_warm
    if main_done:
        main.draws[0, main_done - 1] = last_main
    warm.n_done[0], main.n_done[0] = warm_done, main_done
    model = job.model
    threads = max(1, available_cores() // max(1, worker.state.nthreads))
    with limit_threads(threads):
        _advance(ch, job.sampler, model, job.prepared, job.n_warmup, job.n_target, warm, main,
                 0, _StopFlag(stop_name))
    passes, rows = job.report()
    wdraws, wstats, wn = warm.result()
    mdraws, mstats, mn = main.result()
    return {
        "warm": (wdraws[0, warm_done:wn[0]], {k: v[0, warm_done:wn[0]] for k, v in wstats.items()}),
        "main": (mdraws[0, main_done:mn[0]], {k: v[0, main_done:mn[0]] for k, v in mstats.items()}),
        "warmup_ended": ch.warmup_ended, "t_warmup": ch.t_warmup, "t_sampling": ch.t_sampling,
        "tuning": {**ch.tuning(), "worker": worker.address},
        "n_evals_setup": ch.n_evals_setup(),
        "passes": passes, "rows": rows,
    }


def _record_remote(run, ch, warm, main, warm_done, main_done, out):
    """Record in this process what chain ``ch`` added on a worker."""
    c = ch.index
    for rec, start, (draws, stats) in ((warm, warm_done, out["warm"]),
                                       (main, main_done, out["main"])):
        if len(draws):
            rec.record_block(c, start, draws, stats)
    ch.warmup_ended = out["warmup_ended"]
    ch.t_warmup += out["t_warmup"]
    ch.t_sampling += out["t_sampling"]
    ch.kernel = ch.state = ch.rng = None      # the kernel stayed on the worker
    ch.remote = {"tuning": out["tuning"], "n_evals_setup": out["n_evals_setup"]}
    run.remote_passes += out["passes"]
    run.remote_rows += out["rows"]


def _run_chains_on_cluster(run, warm, main, backend, n_parallel, bar):
    """Run the chains as tasks on the workers of the Dask cluster of joblib's
    Dask ``backend``, ``n_parallel`` at a time, and record their results here.

    The tasks are submitted with the backend's client (and its submit options),
    not through ``joblib.Parallel``: the chains' futures can then be cancelled,
    and each chain is recorded as soon as it finishes. The model, sampler and
    preparation are scattered to every worker once. A chain's kernel is built on its worker and
    stays there; the chain keeps no state in this process, so continuing it
    (``resume``) replays it from its seed (see :func:`_advance`).

    On KeyboardInterrupt the run's stop event is set: the chains stop at an
    iteration boundary (within a fraction of a second) and return the draws
    they made, which are kept. A second KeyboardInterrupt while waiting for
    them cancels their tasks; their draws of this call are then lost.
    """
    from distributed import Event, as_completed

    client = backend.client
    chains = run.chains
    todo = [ch for ch in chains
            if ch.needs_work(warm.n_done[ch.index], main.n_done[ch.index], run.n_warmup,
                             run.n_target)]
    t0 = time.perf_counter()
    if not todo:
        return False, time.perf_counter() - t0
    tag = uuid.uuid4().hex
    stop = Event(f"bayes_subsample-stop-{tag}", client=client)
    job = _ChainJob(run.sampler, run.model, run.prepared, run.n_warmup, run.n_target)
    try:
        job = client.scatter(job, broadcast=True, hash=False)
    except TypeError as e:        # distributed's "Could not serialize", from the pickle error
        raise TypeError(
            "chains on a Dask cluster (joblib's Dask backend with n_jobs > 1) ship the model, "
            "the sampler and its preparation to the workers, and pickling them failed "
            f"({e.__cause__ or e!r}); make the model picklable, or sample outside the Dask "
            "backend (chains in threads)") from e
    futures = {}

    def submit(ch):
        c = ch.index
        wd, md = int(warm.n_done[c]), int(main.n_done[c])
        fut = client.submit(_chain_on_worker, job, ch.shippable(), wd, md,
                            warm.draws[c, wd - 1] if wd else None,
                            main.draws[c, md - 1] if md else None, stop.name,
                            key=f"bayes_subsample-chain-{c}-{tag}", pure=False,
                            **backend.submit_kwargs)
        futures[fut] = (ch, wd, md)
        return fut

    def collect(fut):
        ch, wd, md = futures.pop(fut)
        out = fut.result()                # a chain's error is raised here
        _record_remote(run, ch, warm, main, wd, md, out)
        if bar is not None:
            bar.update(len(out["warm"][0]) + len(out["main"][0]))

    waiting = list(reversed(todo))
    done = as_completed([submit(waiting.pop()) for _ in range(min(n_parallel, len(waiting)))])
    interrupted = False
    try:
        try:
            for fut in done:
                collect(fut)
                if waiting:
                    done.add(submit(waiting.pop()))
        except KeyboardInterrupt:
            interrupted = True
            stop.set()
            # the running chains stop at an iteration boundary and return the
            # draws they made; a second Ctrl-C gives them up
            try:
                for fut in done:
                    collect(fut)
            except KeyboardInterrupt:
                client.cancel(list(futures))
    except BaseException:
        stop.set()
        client.cancel(list(futures))
        raise
    finally:
        client.cancel([job])
        if interrupted and not futures:
            # every task returned: free the scheduler's record of the event
            # (tasks cancelled while running keep polling it: it stays set)
            stop.clear()
    return interrupted, time.perf_counter() - t0
