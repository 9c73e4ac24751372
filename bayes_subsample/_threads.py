"""Thread budget of the compiled full-data passes.

Models default to all available cores. When the driver runs several chains
in parallel threads it gives each chain a share of the cores with
:func:`limit_threads`, a per-thread setting: no model object is mutated, so
chains (and users) sharing a model never see each other's budget. Results
never depend on the number of threads.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager

__all__ = ["available_cores", "thread_budget", "threads_for_pass", "limit_threads"]

#: values a full pass reads from which it runs in threads (below, one thread is faster)
THREADED_PASS_MIN_VALUES = 1_000_000

_local = threading.local()


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
