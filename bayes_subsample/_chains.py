"""A chain and its records: the recorder of draws and per-iteration statistics,
a chain (its seed, kernel, state and times), and the loop that advances a chain,
replaying it from its seed where its kernel stayed on a Dask worker. The driver
(``_driver``) runs chains with these in threads, ``_cluster`` on Dask workers."""
from __future__ import annotations

import threading
import time

import numpy as np




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
            theta0 = prepared.initial_point(model, self.rng)
        self.state = self.kernel.init(self.rng, theta0)


def _advance(ch, sampler, model, prepared, n_warmup, n_target, warm, main, c, stop,
             tick=None):
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
                ch.state, info = kernel.step(rng, ch.state)
                if i >= main_done:
                    main.record(c, i, ch.state.theta, info)
                    if tick is not None:
                        tick(c, i, main)
                elif i + 1 == main_done:
                    check(main_done, ch.state.theta, main.draws[c, i])
                i += 1
        finally:
            if not behind:
                ch.t_sampling += time.perf_counter() - ts
    finally:
        if behind:
            ch.kernel = ch.state = ch.rng = None
