"""Inputs that must be refused before any work, data that must be seen to have
changed, and interrupts that must not lose a run: each case gives a one-line
error naming the input at fault, or a correct result. Real files, FIFOs,
symlink loops, read-only folders and signals; no mocks."""
import signal
import warnings

import numpy as np
import pytest

from bayes_subsample import sample
from bayes_subsample.linear_model import BayesianLogisticRegression
from bayes_subsample.models import LogisticRegressionModel


def _quiet(f, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*args, **kwargs)


@pytest.fixture
def logit_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6000, 3))
    y = (X @ np.array([1.0, -1.0, 0.5]) + rng.logistic(size=6000) > 0).astype(float)
    return X, y


# ---- warm_start and resume see edited data ------------------------------------------------
def _warm_estimator(n_samples=20):
    return BayesianLogisticRegression(sampler="mh", n_samples=n_samples, n_warmup=20,
                                      n_chains=2, warm_start=True, random_state=0)


@pytest.mark.parametrize("edit", ["X in place", "y in place", "X copy, one value"])
def test_warm_start_refuses_edited_data(logit_data, edit):
    """A continuation compares a hash of all of X and y made at the first fit
    with one of the data it is given: an edit anywhere is refused, and the
    previous fit stays continuable."""
    X, y = logit_data
    X, y = X.copy(), y.copy()
    est = _warm_estimator()
    _quiet(est.fit, X, y)
    if edit == "X in place":
        X[:, 0] *= 3
    elif edit == "y in place":
        y[4321] = 1 - y[4321]
    else:
        X = X.copy()
        X[4321, 2] += 1e-9          # a row between those a sample of 4096 rows reads
    with pytest.raises(ValueError, match=r"the data changed since the run was sampled"):
        _quiet(est.fit, X, y)
    assert est.trace_.resumable and est.posterior_draws_.shape == (2, 20, 4)


def test_resume_of_the_same_model_object_edited_in_place(logit_data):
    X, y = (a.copy() for a in logit_data)
    model = LogisticRegressionModel(X, y)
    trace = _quiet(sample, model, "mh", n_samples=10, n_warmup=10, n_chains=1, random_state=0)
    X[-1, -1] = 7.0
    with pytest.raises(ValueError, match=r"differs in: X"):
        sample(model, resume=trace)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def test_interrupt_early_in_a_continuation_keeps_the_run(logit_data):
    """A KeyboardInterrupt (a real signal, at several moments early in a
    warm_start continuation: while the data are hashed, the recorders made,
    the chains started) never leaves the estimator unable to continue: the
    next fits complete the run, and it equals the uninterrupted one. (The
    continuation takes about 0.05 s: every delay falls early in it.)"""
    X, y = logit_data
    ref = _warm_estimator(500)
    _quiet(ref.fit, X, y)
    _quiet(ref.fit, X, y)
    for delay in (1e-4, 1e-3, 3e-3, 1e-2):
        est = _warm_estimator(500)
        _quiet(est.fit, X, y)
        old = signal.signal(signal.SIGALRM, _raise_interrupt)
        try:
            signal.setitimer(signal.ITIMER_REAL, delay)
            try:
                _quiet(est.fit, X, y)
            except KeyboardInterrupt:
                pass
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, old)
        assert est.trace_.resumable, delay
        while est.trace_.interrupted or est.trace_.n_samples < 1000:
            _quiet(est.fit, X, y)
        np.testing.assert_array_equal(est.posterior_draws_[:, :1000], ref.posterior_draws_)
