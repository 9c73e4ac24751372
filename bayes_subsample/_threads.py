"""Thread budget of the compiled full-data passes.

Models default to all available cores. When the driver runs several chains
in parallel threads it gives each chain a share of the cores with
:func:`limit_threads`, a per-thread setting: no model object is mutated, so
chains (and users) sharing a model never see each other's budget. Results
never depend on the number of threads.

While chains run, BLAS (OpenBLAS, MKL: the libraries NumPy and SciPy load) is
held to one thread (:func:`one_blas_thread`): the products chains make are
minibatch-sized (``MLPModel``'s forward and backward passes through
``scipy.linalg.cython_blas``), too small for threads to pay, and BLAS threads,
which spin while they wait, competed with the chains for the cores: one MNIST
pass (784-100-10, batches of 100) of SGHMC took 17 to 23 s with two BLAS
threads on a loaded 2-core machine, 0.74 s with one.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager

__all__ = ["available_cores", "thread_budget", "threads_for_pass", "limit_threads",
           "one_blas_thread"]

#: values a full pass reads from which it runs in threads (below, one thread is faster)
THREADED_PASS_MIN_VALUES = 1_000_000

_local = threading.local()
_controller = None
_controller_lock = threading.Lock()


def available_cores():
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def thread_budget(default):
    """The threads a full pass may use in this thread: the innermost
    :func:`limit_threads` value, else ``default``."""
    limit = getattr(_local, "limit", None)
    return default if limit is None else min(default, limit)


def threads_for_pass(n_values, default):
    """Threads of a full pass that reads ``n_values`` values in this thread:
    ``thread_budget(default)`` from :data:`THREADED_PASS_MIN_VALUES` values
    on, where threads pay off, else 1."""
    return thread_budget(default) if n_values >= THREADED_PASS_MIN_VALUES else 1


@contextmanager
def limit_threads(n):
    """Cap the threads of full passes run by the current thread to ``n``."""
    old = getattr(_local, "limit", None)
    _local.limit = max(1, int(n))
    try:
        yield
    finally:
        _local.limit = old


def _blas_controller():
    """A ``threadpoolctl.ThreadpoolController`` made once (scanning the loaded
    libraries each time costs milliseconds)."""
    global _controller
    with _controller_lock:
        if _controller is None:
            from threadpoolctl import ThreadpoolController
            _controller = ThreadpoolController()
        return _controller


@contextmanager
def one_blas_thread():
    """Hold BLAS to one thread (a process-wide setting, restored on exit)."""
    with _blas_controller().limit(limits=1, user_api="blas"):
        yield
