"""Stopping a run and keeping what it made: SIGTERM and SIGHUP turned into
the ``KeyboardInterrupt`` that Ctrl-C raises, work run in a worker thread so
that the main thread takes the interrupt and asks the work to stop at a
boundary, and signals held back while outputs are written.

Signals reach Python only in the main thread, between bytecodes; a compiled
loop running in the main thread hears nothing until it returns. So the
samplers run in a worker thread (:func:`run_stoppable`) and the main thread
waits: an interrupt there sets a ``threading.Event`` that the work looks at
between iterations (or sweeps, or short chunks of compiled work), and the
work returns what it made.

Only signals whose handler is the default one are taken over (a handler the
program installed, or a signal the shell ignores, e.g. SIGHUP under
``nohup``, is left alone), only in the main thread (elsewhere, e.g. in a
joblib or Dask worker, nothing is installed), and only while the work runs:
the previous handlers are restored afterwards.
"""
import contextlib
import signal
import threading

__all__ = ["StopSignal", "stop_signals", "signals_deferred", "run_stoppable",
           "received_signal", "stop_description", "exit_status"]

#: the signals that stop a run like Ctrl-C (those the platform has)
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                     if hasattr(signal, name))

# the last signal turned into an interrupt or held back; reset when the
# outermost stop_signals() context is entered (signals are process-wide, so
# is this record)
_received = None
_depth = 0


class StopSignal(KeyboardInterrupt):
    """A stop signal (SIGTERM, SIGHUP, or SIGINT where :func:`stop_signals`
    was asked to take it) raised as a ``KeyboardInterrupt``: every code path
    that keeps the draws on Ctrl-C keeps them on these signals too."""

    def __init__(self, signum):
        self.signum = int(signum)
        super().__init__(f"stopped by {signal.Signals(signum).name}")


def _raise_stop(signum, frame):
    global _received
    _received = signum
    raise StopSignal(signum)


def _is_main_thread():
    return threading.current_thread() is threading.main_thread()


def _takeable(signum, handler):
    """True if ``handler`` (the current one of ``signum``) may be replaced:
    the default action, Python's Ctrl-C handler, or one of this module's."""
    return (handler is signal.SIG_DFL or handler is _raise_stop
            or isinstance(handler, _Deferrer)
            or (signum == signal.SIGINT and handler is signal.default_int_handler))


@contextlib.contextmanager
def _handlers(signums, handler):
    """Install ``handler`` for those of ``signums`` that may be taken over
    (main thread only); restore the previous handlers on exit."""
    previous = {}
    if _is_main_thread():
        for s in signums:
            old = signal.getsignal(s)
            if _takeable(s, old) and old is not handler:
                previous[s] = signal.signal(s, handler)
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


@contextlib.contextmanager
def stop_signals(sigint=False):
    """While active, SIGTERM and SIGHUP (and SIGINT with ``sigint=True``)
    raise :class:`StopSignal`, a ``KeyboardInterrupt``, in the main thread.

    Signals with a handler other than the default (or Python's Ctrl-C
    handler) are left alone, and outside the main thread nothing is
    installed. Entering the outermost active context forgets the signal
    received before (:func:`received_signal`).
    """
    global _received, _depth
    if _depth == 0:
        _received = None
    _depth += 1
    try:
        with _handlers(STOP_SIGNALS + ((signal.SIGINT,) if sigint else ()), _raise_stop):
            yield
    finally:
        _depth -= 1


class _Deferrer:
    """A handler that records the first stop signal and lets the work go on;
    a second one raises :class:`StopSignal` (the user insists)."""

    def __init__(self):
        self.signum = None

    def __call__(self, signum, frame):
        global _received
        _received = signum
        if self.signum is not None:
            raise StopSignal(signum)
        self.signum = signum


@contextlib.contextmanager
def signals_deferred():
    """Hold back SIGINT, SIGTERM and SIGHUP while a short critical section
    (writing the outputs) runs, so that it completes; yields the recorder,
    whose ``signum`` is the first signal received (None if none). A second
    signal raises :class:`StopSignal` at once. Main thread only, and only
    for signals :func:`stop_signals` would take."""
    deferrer = _Deferrer()
    with _handlers((signal.SIGINT,) + STOP_SIGNALS, deferrer):
        yield deferrer


def received_signal():
    """The signal number of the last stop signal received within the active
    :func:`stop_signals` contexts (the most recent run), or None."""
    return _received


def stop_description(exc=None):
    """How the run was stopped, for messages: "interrupted" (Ctrl-C) or
    "stopped by SIGTERM" (or SIGHUP); from ``exc`` if it is a
    :class:`StopSignal`, else from :func:`received_signal`."""
    signum = getattr(exc, "signum", None) or _received
    if signum in (None, signal.SIGINT):
        return "interrupted"
    return f"stopped by {signal.Signals(signum).name}"


def exit_status(exc=None):
    """The shell's status for a process stopped by the signal of
    :func:`stop_description`: 128 + its number (130 for Ctrl-C, 143 for
    SIGTERM, 129 for SIGHUP)."""
    signum = getattr(exc, "signum", None) or _received or signal.SIGINT
    return 128 + int(signum)


def run_stoppable(work, stop, name="bayes_subsample-work"):
    """Run ``work()`` in a worker thread until it returns; ``stop`` (a
    ``threading.Event``) asks it to return early.

    The calling thread waits; a ``KeyboardInterrupt`` there (Ctrl-C, or, in
    the main thread, SIGTERM or SIGHUP: see :func:`stop_signals`) sets
    ``stop`` and waits again for ``work`` to return what it made. A second
    interrupt while waiting propagates (the daemon worker is left to finish
    on its own). An exception raised by ``work`` is re-raised here.

    Returns the interrupt (a ``KeyboardInterrupt``) that stopped the work, or
    None.
    """
    errors = []
    finished = threading.Event()

    def run():
        try:
            work()
        except BaseException as e:    # re-raised in the caller's thread
            errors.append(e)
        finally:
            finished.set()

    interrupt = None
    with stop_signals():
        worker = threading.Thread(target=run, name=name, daemon=True)
        # an Event, not Thread.join: before Python 3.13 a join interrupted by
        # Ctrl-C can mark a running thread as finished
        try:
            worker.start()
            while not finished.wait(0.1):
                pass
        except KeyboardInterrupt as e:
            # (even while the worker starts: it may then never run)
            interrupt = e
            stop.set()
            while worker.is_alive() and not finished.wait(0.1):
                pass
    if errors:
        raise errors[0]
    return interrupt
