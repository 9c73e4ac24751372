"""The sampling driver: :func:`sample` (initial points, the shared preparation,
the chains run in threads or on a Dask cluster, the trace) and resuming a run
from its trace. Kernels live in ``samplers``, a chain and its records in
``_chains``, the Dask execution in ``_cluster``, the result in ``_trace``."""
from __future__ import annotations

import numbers
import threading
import time
import warnings

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs, parallel_config

from ._chains import _Chain, _Recorder, _advance
from ._cluster import _dask_backend, _run_chains_on_cluster
from ._cost import CostWatch, make_progress_bar, run_causes
from ._interrupt import run_stoppable, stop_description, stop_signals
from ._run_checks import (_chain_marks, _check_count, _check_model, _check_param_names,
                          _resume_plan, _warn_nan_evaluations)
from ._seeding import seed_sequence
from ._threads import available_cores, limit_threads, one_blas_thread
from ._trace import Trace
from .samplers import resolve_sampler

__all__ = ["sample", "Trace", "resolve_sampler", "seed_sequence"]


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
        a time (``-1``: one per core). ``None`` means 1, unless a
        ``joblib.parallel_config(n_jobs=...)`` context sets it (scikit-learn's
        convention). Draws are identical for
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
        if model.distributed and not sampler.serves_distributed:
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


def _n_parallel(n_jobs, n_chains, dask_backend):
    """How many chains run at once. ``None`` is scikit-learn's: 1, unless a
    ``joblib.parallel_config(n_jobs=...)`` context says otherwise (not the Dask
    backend's, where None keeps the chains in this process)."""
    if n_jobs is None and dask_backend is None:
        n_jobs = effective_n_jobs(None)
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
                         stop, tick)
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
        # current iteration. BLAS on one thread while they run (see _threads)
        with one_blas_thread():
            if run_stoppable(run_all, stop, name="bayes_subsample-chains") is not None:
                interrupted.set()
    finally:
        if bar is not None:
            bar.close()
    return interrupted.is_set(), time.perf_counter() - t0
