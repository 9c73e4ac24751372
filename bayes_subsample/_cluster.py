"""Chains on a Dask cluster: under joblib's Dask backend, with more than one
chain at a time, each chain runs as a task on a worker (its kernel stays there),
sends its draws back as it goes, and stops at an iteration boundary when the
run is interrupted; a chain continued later is replayed from its seed
(:func:`~bayes_subsample._chains._advance`)."""
from __future__ import annotations

import sys
import threading
import time
import uuid

from joblib.parallel import get_active_backend

from ._chains import _Recorder, _advance
from ._threads import available_cores, limit_threads, one_blas_thread


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
    with limit_threads(threads), one_blas_thread():
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
