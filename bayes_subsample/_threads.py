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

__all__ = ["available_cores", "thread_budget", "limit_threads"]

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


@contextmanager
def limit_threads(n):
    """Cap the threads of full passes run by the current thread to ``n``."""
    old = getattr(_local, "limit", None)
    _local.limit = max(1, int(n))
    try:
        yield
    finally:
        _local.limit = old
