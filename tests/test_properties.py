"""Property-based tests (hypothesis) of input validation and of every sampler.

The contract checked on small random problems: a fit, or a call of
:func:`bayes_subsample.sample`, either returns finite draws of the right shape
(and finite predictions), or raises a ``ValueError`` -- never another
exception type, NaN draws, a hang or a crash. ``ValueError`` includes its
subclasses: ``SamplingError``, ``numpy.linalg.LinAlgError``, scikit-learn's
``NotFittedError`` and ``InvalidParameterError``.

``TypeError`` is accepted in exactly two places, both documented conventions:

* the estimators validate ``X`` and ``y`` with scikit-learn, which raises
  ``TypeError`` for a few inputs (objects that are not array-like; sparse
  matrices are accepted, as CSR). The validation properties use
  ``sklearn.utils.validation.check_X_y`` / ``check_array``, called the way the
  estimators call them, as the oracle: the estimator may raise ``TypeError``
  only where scikit-learn itself does, and must raise a ``ValueError``
  wherever scikit-learn raises one (complex data, strings that are not
  numbers, NaN/inf, bad shapes, mismatched lengths).
* the low-level models (``bayes_subsample.models``) raise ``TypeError`` for a
  design or target of the wrong *dtype* (complex, str, object, float16; the
  GLMs accept scipy.sparse designs), and ``ValueError`` for wrong shapes or
  values (their
  documented contract, tested in ``test_models.py::test_bad_dtypes``).

Profiles: the default one (``bs-default``) is small and derandomized, so the
default (``-m "not slow"``) run is deterministic and takes well under two
minutes; the ``@pytest.mark.slow`` twins run the same properties with
``bs-slow`` (ten times the examples or more; two to three minutes on
two cores). Every example runs under a timeout (a
hang is a failure): ``SIGALRM`` raises :class:`ExampleTimeout` in the test, and
``faulthandler`` ends the process, with every thread's traceback, if compiled
code does not return to Python at all.
"""
from __future__ import annotations

import contextlib
import faulthandler
import functools
import signal
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scipy import sparse
from sklearn.utils.validation import check_array, check_X_y

import bayes_subsample
from bayes_subsample import (BayesianLinearRegression, BayesianLogisticRegression,
                             BayesianPoissonRegression)
from bayes_subsample.models import (GaussianRegressionModel, GaussianScaleRegressionModel,
                                    LogisticRegressionModel, PoissonRegressionModel)
from bayes_subsample.samplers import SAMPLERS

SAMPLER_NAMES = sorted(SAMPLERS)
ESTIMATORS = {"logistic": BayesianLogisticRegression, "linear": BayesianLinearRegression,
              "poisson": BayesianPoissonRegression}
MODELS = {"logistic": LogisticRegressionModel, "linear": GaussianRegressionModel,
          "poisson": PoissonRegressionModel, "linear_sigma": GaussianScaleRegressionModel}
#: a tiny run: enough iterations for every sampler's warmup to adapt something
RUN = {"n_samples": 20, "n_warmup": 20, "n_chains": 2}

_COMMON = {"deadline": None, "database": None, "print_blob": True,
           "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
settings.register_profile("bs-default", max_examples=12, derandomize=True, **_COMMON)
settings.register_profile("bs-slow", max_examples=120, derandomize=True, **_COMMON)
DEFAULT = settings.get_profile("bs-default")
SLOW = settings.get_profile("bs-slow")

#: seconds one example may take (a tiny fit takes ~0.05 s) before it is a hang
EXAMPLE_TIMEOUT = 60


# ---- hang guard ---------------------------------------------------------------------------
class ExampleTimeout(Exception):
    """An example ran longer than ``EXAMPLE_TIMEOUT`` (not a ValueError: a failure)."""


@contextlib.contextmanager
def time_limit(seconds=EXAMPLE_TIMEOUT):
    """Fail the example with :class:`ExampleTimeout` after ``seconds``.

    ``SIGALRM`` interrupts Python code (the sampling driver waits for its chain
    thread in a Python loop, so a hung chain is caught too); as a last resort
    against compiled code that never returns to the interpreter in the main
    thread, ``faulthandler`` dumps all tracebacks and ends the process after
    twice the time (the run fails, it does not hang CI).
    """
    use_alarm = hasattr(signal, "SIGALRM") and hasattr(signal, "setitimer")
    if use_alarm:
        def on_alarm(signum, frame):
            raise ExampleTimeout(f"example did not finish within {seconds} s (a hang)")
        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    faulthandler.dump_traceback_later(2 * seconds, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def _check_error(err, allow_type_error=False):
    """``err`` must be a ValueError (or, where allowed, a TypeError)."""
    ok = (ValueError, TypeError) if allow_type_error else (ValueError,)
    assert isinstance(err, ok), (
        f"expected a ValueError{' or TypeError' if allow_type_error else ''}, got "
        f"{type(err).__module__}.{type(err).__qualname__}: {err}")
    assert not isinstance(err, ExampleTimeout)
    assert str(err), f"{type(err).__name__} without a message"


# ---- strategies -------------------------------------------------------------------------
def _pow10(e):
    return 10.0 ** e


def _weighted(*branches):
    """``one_of`` with integer weights: ``_weighted((3, a), (1, b))`` draws ``a``
    about three times as often as ``b``."""
    return st.sampled_from([s for w, s in branches for _ in range(w)]).flatmap(lambda s: s)


#: positive finite magnitudes from 1e-150 to 1e150 (mostly near 1)
magnitudes = _weighted((4, st.just(1.0)), (2, st.integers(-3, 3).map(_pow10)),
                       (1, st.integers(-150, 150).map(_pow10)))

#: prior scales over many orders of magnitude (mostly valid), and invalid ones
scales = _weighted(
    (3, st.just(10.0)),
    (3, st.builds(lambda e, m: m * 10.0 ** e, st.integers(-4, 6), st.floats(1.0, 9.99))),
    (1, st.builds(lambda e, m: m * 10.0 ** e, st.integers(-320, 308), st.floats(1.0, 9.99))),
    (1, st.sampled_from([0.0, -0.0, -1.0, -1e-300, np.inf, -np.inf, np.nan, 5e-324,
                         1.7976931348623157e308, 1e-150, 1e150, 1])),
)


@st.composite
def design_matrices(draw, max_rows=200, max_features=4):
    """``(X as passed, X as a float64 array)``: varied scales (column factors
    1e-150..1e150), constant, duplicated and collinear columns, a single row,
    one feature, float32/float64, C/F order, nested lists."""
    n = draw(_weighted((1, st.just(1)), (2, st.integers(2, 10)),
                       (4, st.integers(11, max_rows))))
    d = draw(st.integers(1, max_features))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    base = draw(st.sampled_from(["normal", "normal", "binary", "integer", "explicit"]))
    if base == "explicit" and n * d <= 24:
        values = st.floats(-1e300, 1e300, allow_nan=False, allow_infinity=False)
        X = np.array(draw(st.lists(values, min_size=n * d, max_size=n * d))).reshape(n, d)
    elif base == "binary":
        X = (rng.random((n, d)) < 0.5).astype(np.float64)
    elif base == "integer":
        X = rng.integers(-5, 6, size=(n, d)).astype(np.float64)
    else:
        X = rng.normal(size=(n, d)) + draw(st.sampled_from([0.0, 0.0, 3.0, -100.0]))
    for j in range(d):
        kind = draw(st.sampled_from(["plain"] * 4 + ["constant", "duplicate", "collinear"]))
        if kind == "constant":
            X[:, j] = draw(st.sampled_from([0.0, 1.0, -2.5]))
        elif kind == "duplicate" and j > 0:
            X[:, j] = X[:, draw(st.integers(0, j - 1))]
        elif kind == "collinear" and j > 1:
            X[:, j] = 2.0 * X[:, 0] - 0.5 * X[:, 1]
        with np.errstate(over="ignore"):
            X[:, j] *= draw(magnitudes)
    with np.errstate(over="ignore"):
        X *= draw(magnitudes)
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    with np.errstate(over="ignore"):
        X = X.astype(dtype)          # float32 may overflow to inf: then a ValueError is due
    if draw(st.booleans()):
        X = np.asfortranarray(X)
    container = draw(st.sampled_from(["array", "array", "list"]))
    passed = X.tolist() if container == "list" else X
    return passed, np.asarray(X, dtype=np.float64)


LABEL_SETS = {
    "int01": (0, 1), "pm1": (-1, 1), "int37": (3, 7), "bool": (False, True),
    "float01": (0.0, 1.0), "str": ("no", "yes"), "object": ("cat", "dog"),
}


@st.composite
def targets(draw, family, X):
    """A target for ``X`` (float64 array): labels of various types, counts,
    or real values of any scale (including constant and huge ``y``)."""
    n = X.shape[0]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    with np.errstate(all="ignore"):
        eta = X @ rng.normal(size=X.shape[1])
    if family == "logistic":
        labels = draw(st.sampled_from(sorted(LABEL_SETS)))
        lo, hi = LABEL_SETS[labels]
        how = draw(st.sampled_from(["random"] * 4 + ["separable"] * 2 + ["one class", "three"]))
        if how == "separable":
            with np.errstate(all="ignore"):
                code = (np.nan_to_num(eta) > np.median(np.nan_to_num(eta))).astype(int)
        elif how == "one class":
            code = np.zeros(n, dtype=int)
        else:
            code = (rng.random(n) < draw(st.floats(0.05, 0.95))).astype(int)
        values = np.array([lo, hi], dtype=object if labels == "object" else None)
        y = values[code]
        if how == "three" and n >= 3:
            y = y.astype(object) if labels in ("str", "object") else y.astype(np.float64)
            y[0] = "maybe" if labels in ("str", "object") else 2.5
    elif family == "poisson":
        rate = draw(st.one_of(st.just(1.0), st.integers(-3, 8).map(_pow10)))
        how = draw(st.sampled_from(["constant rate", "log-linear", "zeros", "huge"]))
        if how == "zeros":
            y = np.zeros(n)
        elif how == "huge":
            y = np.floor(rng.random(n) * 1e15)
        elif how == "log-linear":
            with np.errstate(all="ignore"):
                mu = rate * np.exp(np.clip(np.nan_to_num(eta), -30, 30))
            y = rng.poisson(np.minimum(mu, 1e12)).astype(np.float64)
        else:
            y = rng.poisson(rate, size=n).astype(np.float64)
        y = y.astype(draw(st.sampled_from([np.float64, np.int64, np.int32])) if np.all(
            y < 2**31) else np.float64)
    else:
        how = draw(st.sampled_from(["linear", "linear", "noise", "constant", "huge"]))
        scale = draw(magnitudes)
        if how == "constant":
            y = np.full(n, draw(st.sampled_from([0.0, 1.0, -3e5])))
        elif how == "huge":
            y = rng.normal(size=n) * draw(st.sampled_from([1e100, 1e150, 1e200, 1e300]))
        elif how == "noise":
            y = rng.normal(size=n) * scale
        else:
            with np.errstate(all="ignore"):
                y = np.nan_to_num(eta) + scale * rng.normal(size=n)
        if how != "huge":
            with np.errstate(over="ignore"):
                y = y.astype(draw(st.sampled_from([np.float64, np.float32])))
    if draw(st.integers(0, 5)) == 0:
        y = list(y)
    return y


@st.composite
def fit_cases(draw, family):
    Xp, X = draw(design_matrices())
    y = draw(targets(family, X))
    params = dict(prior_scale=draw(scales), intercept_prior_scale=draw(scales),
                  fit_intercept=draw(st.booleans()),
                  random_state=draw(st.integers(0, 2**32 - 1)))
    if family == "linear":
        params["noise_scale"] = draw(st.one_of(st.sampled_from(["sample", "sample", "plugin"]),
                                               scales))
    return Xp, y, params


# ---- property 1: every estimator x every sampler on small random problems ------------
def check_fit(family, sampler, case):
    Xp, y, params = case
    est = ESTIMATORS[family](sampler=sampler, **RUN, **params)
    with warnings.catch_warnings(), time_limit():
        warnings.simplefilter("ignore")
        try:
            est.fit(Xp, y)
        except Exception as err:
            _check_error(err)
            return
        X = np.asarray(Xp)
        n, d = X.shape
        p = d + int(params["fit_intercept"])
        K = est.classes_.shape[0] if family == "logistic" else 1
        if K > 2:
            p *= K            # multinomial: one block of coefficients per class
        if getattr(est, "noise_reference_", None) is not None:
            p += 1            # linear regression with the noise sampled: log(sigma / s)
        draws = est.posterior_draws_
        assert draws.shape == (RUN["n_chains"], RUN["n_samples"], p)
        assert np.isfinite(draws).all(), f"non-finite draws: {draws}"
        assert np.isfinite(est.coef_).all() and np.isfinite(est.intercept_).all()
        if family == "logistic":
            proba = est.predict_proba(Xp)
            assert proba.shape == (n, max(K, 2))
            assert np.isfinite(proba).all() and (proba >= 0).all() and (proba <= 1).all()
            np.testing.assert_allclose(proba.sum(axis=1), 1.0)
            pred = est.predict(Xp)
            assert pred.shape == (n,)
            assert np.isin(pred, est.classes_).all()
        else:
            mean, std = est.predict(Xp, return_std=True)
            assert mean.shape == std.shape == (n,)
            assert np.isfinite(mean).all(), mean
            assert np.isfinite(std).all() and (std >= 0).all(), std


_all_samplers = pytest.mark.parametrize("sampler", SAMPLER_NAMES)


@_all_samplers
@settings(DEFAULT)
@given(case=fit_cases("logistic"))
def test_logistic_fit_finite_or_value_error(sampler, case):
    check_fit("logistic", sampler, case)


@_all_samplers
@settings(DEFAULT)
@given(case=fit_cases("linear"))
# regression: noise_scale**2 overflowed in Python floats (OverflowError, not a ValueError)
@example(case=(np.array([[0.12573022]]), [-0.11629677479510833],
               dict(prior_scale=10.0, intercept_prior_scale=10.0, fit_intercept=False,
                    random_state=0, noise_scale=2e154)))
@example(case=(np.array([[0.12573022]]), [-0.11629677479510833],
               dict(prior_scale=10.0, intercept_prior_scale=10.0, fit_intercept=False,
                    random_state=0, noise_scale=1.7976931348623157e308)))
def test_linear_fit_finite_or_value_error(sampler, case):
    check_fit("linear", sampler, case)


@_all_samplers
@settings(DEFAULT)
@given(case=fit_cases("poisson"))
# regression: predict(return_std=True) was NaN (E[mu^2] overflowed: inf - inf) when the
# posterior reaches eta > 354 (confidence/austerity here: a wide posterior, y = 0)
@example(case=(np.array([[0.12573022]]), [0.0],
               dict(prior_scale=1e4, intercept_prior_scale=10.0, fit_intercept=False,
                    random_state=1)))
# regression: scipy's trust-exact check of the Hessian leaked from the MAP search
# ("array must not contain infs or NaNs"), now a ValueError naming the scale at fault
@example(case=(np.array([[-2e4]]), [1e14],
               dict(prior_scale=10.0, intercept_prior_scale=10.0, fit_intercept=False,
                    random_state=0)))
# regression: a non-positive sum of the signs (hmc_ecs_signed, all-zero counts) raised a
# bare FloatingPointError from Trace.weights; now a SamplingError (a ValueError)
@example(case=(np.random.default_rng(0).normal(size=(86, 1)), np.zeros(86),
               dict(prior_scale=10.0, intercept_prior_scale=10.0, fit_intercept=True,
                    random_state=0)))
def test_poisson_fit_finite_or_value_error(sampler, case):
    check_fit("poisson", sampler, case)


@pytest.mark.slow
@_all_samplers
@pytest.mark.parametrize("family", sorted(ESTIMATORS))
@settings(SLOW, max_examples=150)
@given(data=st.data())
def test_fit_finite_or_value_error_slow(family, sampler, data):
    check_fit(family, sampler, data.draw(fit_cases(family), label="case"))


# ---- regressions found by the properties, with the messages they now give -------------
@pytest.mark.parametrize("cls, params, X, y, match", [
    # Python's float ** overflowed (OverflowError) for noise scales beyond ~1e154
    (BayesianLinearRegression, {"noise_scale": 2e154}, [[0.126]], [-0.116],
     "noise_scale must lie in"),
    (BayesianLinearRegression, {"noise_scale": 1e-200}, [[0.126]], [-0.116],
     "noise_scale must lie in"),
    # scipy's "array must not contain infs or NaNs" from trust-exact's Hessian check
    (BayesianPoissonRegression, {"sampler": "hmc"}, [[-2e4]], [1e14],
     "not finite in the MAP search.*Check the scale"),
    (BayesianPoissonRegression, {"fit_intercept": True}, [[1.0, 4.0, -3e6], [1.0, -4.0, 5e6]],
     [999503, 1001480], "not finite in the MAP search.*standardise X"),
    # Trace.weights raised a bare FloatingPointError
    # (all-zero counts under the wide fixed prior of 0.2)
    (BayesianPoissonRegression, {"sampler": "hmc_ecs_signed", "fit_intercept": True,
                                 "prior_scale": 10.0, "intercept_prior_scale": 10.0},
     np.random.default_rng(0).normal(size=(86, 1)), np.zeros(86), "non-positive sign sum"),
])
def test_found_errors_are_clear_value_errors(cls, params, X, y, match):
    params = {"fit_intercept": False, **params}
    with warnings.catch_warnings(), time_limit():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=match):
            cls(**RUN, random_state=0, **params).fit(X, y)


@pytest.mark.parametrize("sampler", ["mh", "austerity", "confidence"])
def test_poisson_predictive_sd_finite_for_huge_means(sampler):
    """The predictive sd was NaN (E[mu^2] - E[mu]^2 = inf - inf) once a draw
    reached eta > 354; it is computed on the scaled means now."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = BayesianPoissonRegression(sampler=sampler, prior_scale=1e4, fit_intercept=False,
                                        random_state=1, **RUN).fit([[0.12573022]], [0.0])
    X = np.array([[0.12573022], [1000.0], [-1000.0]])
    mean, sd = est.predict(X, return_std=True)
    assert np.isfinite(mean).all() and np.isfinite(sd).all() and (sd >= 0).all()
    # the sd of a Poisson mixture is at least sqrt(mean)
    assert (sd >= np.sqrt(mean) * (1 - 1e-12)).all()


# ---- property 2: the low-level driver on the compiled models --------------------------
@st.composite
def model_cases(draw):
    family = draw(st.sampled_from(sorted(MODELS)))
    Xp, X = draw(design_matrices())
    y = draw(targets("linear" if family == "linear_sigma" else family, X))
    if family == "logistic":
        # the models take y in {0, 1} (sometimes they get the raw labels: a ValueError,
        # or a TypeError for string labels)
        if draw(st.integers(0, 4)) > 0:
            y = np.unique(np.asarray(y), return_inverse=True)[1] == 1
    kwargs = dict(prior_scale=draw(scales), intercept_prior_scale=draw(scales),
                  fit_intercept=draw(st.booleans()))
    if family == "linear":
        kwargs["noise_scale"] = draw(scales)
    if family == "linear_sigma":
        kwargs["noise_prior_scale"] = draw(scales)
    run = dict(
        n_samples=draw(st.one_of(st.integers(1, 25), st.sampled_from([0, -1, 2.5, None]))),
        n_warmup=draw(st.one_of(st.integers(0, 25), st.sampled_from([-1, 1.5]))),
        n_chains=draw(st.one_of(st.integers(1, 3), st.sampled_from([0, "2"]))),
        random_state=draw(st.integers(0, 2**32 - 1)),
        sampler=draw(st.sampled_from(SAMPLER_NAMES + ["not_a_sampler"])),
    )
    p = X.shape[1] + int(kwargs["fit_intercept"]) + int(family == "linear_sigma")
    init = draw(st.sampled_from(["none"] * 4 + ["zeros", "wrong shape", "nan", "huge"]))
    run["init"] = {"none": None, "zeros": np.zeros(p), "wrong shape": np.zeros(p + 1),
                   "nan": np.full(p, np.nan), "huge": np.full(p, 1e300)}[init]
    return family, Xp, y, kwargs, run


def check_sample(case):
    family, Xp, y, kwargs, run = case
    with warnings.catch_warnings(), time_limit():
        warnings.simplefilter("ignore")
        try:
            model = MODELS[family](Xp, y, **kwargs)
            trace = bayes_subsample.sample(model, **run)
        except Exception as err:
            # the models' contract: TypeError for a y of non-numeric dtype (string labels)
            _check_error(err, allow_type_error=np.asarray(y).dtype.kind not in "iubf")
            return
        p = model.n_params
        n_chains = run["n_chains"]
        assert trace.draws.shape == (n_chains, run["n_samples"], p)
        assert np.isfinite(trace.draws).all(), f"non-finite draws: {trace.draws}"
        assert trace.warmup_draws.shape == (n_chains, run["n_warmup"], p)
        assert np.isfinite(trace.warmup_draws).all()


@settings(DEFAULT, max_examples=60)
@given(case=model_cases())
# regression: noise_scale**2 overflowed (OverflowError) in GaussianRegressionModel
@example(case=("linear", np.array([[0.0]]), [-0.1321048632913019],
               dict(prior_scale=10.0, intercept_prior_scale=10.0, fit_intercept=False,
                    noise_scale=2e154),
               dict(n_samples=1, n_warmup=0, n_chains=1, random_state=0, sampler="austerity",
                    init=None)))
# the models' contract for string labels: TypeError (a wrong dtype), not a failure
@example(case=("logistic", np.ones((4, 1)), np.array(["no", "yes", "no", "yes"]),
               dict(prior_scale=10.0, intercept_prior_scale=10.0, fit_intercept=True),
               dict(n_samples=5, n_warmup=5, n_chains=1, random_state=0, sampler="mh",
                    init=None)))
def test_sample_finite_or_value_error(case):
    check_sample(case)


@pytest.mark.slow
@settings(SLOW, max_examples=600)
@given(case=model_cases())
def test_sample_finite_or_value_error_slow(case):
    check_sample(case)


# ---- property 3: estimator input validation, with scikit-learn as the oracle ------------
X_CORRUPTIONS = ["none", "nan", "inf", "-inf", "complex", "complex real", "str numbers",
                 "str words", "object None", "object mixed", "bytes", "float16", "int", "bool",
                 "1-D", "3-D", "no rows", "no features", "scalar", "sparse", "sparse nan",
                 "ragged list"]
Y_CORRUPTIONS = ["none", "nan", "inf", "short", "long", "2-D column", "2-D", "complex",
                 "str words", "object None", "scalar", "empty"]


@np.errstate(all="ignore")          # casts of huge values (to float16, int) overflow
def _corrupt_X(X, how, rng):
    n, d = X.shape
    i, j = rng.integers(n), rng.integers(d)
    if how in ("nan", "inf", "-inf"):
        X = X.copy()
        X[i, j] = float(how)
    elif how == "complex":
        X = X + 1j
    elif how == "complex real":
        X = X.astype(np.complex128)
    elif how == "str numbers":
        X = X.astype(str)
    elif how == "str words":
        X = X.astype(str)
        X[i, j] = "abc"
    elif how == "object None":
        X = X.astype(object)
        X[i, j] = None
    elif how == "object mixed":
        X = X.astype(object)
        X[i, j] = "x"
    elif how == "bytes":
        X = X.astype(bytes)
    elif how == "float16":
        X = X.astype(np.float16)
    elif how == "int":
        X = np.round(X).astype(np.int64)
    elif how == "bool":
        X = X > 0
    elif how == "1-D":
        X = X[:, 0]
    elif how == "3-D":
        X = X[:, :, None]
    elif how == "no rows":
        X = X[:0]
    elif how == "no features":
        X = X[:, :0]
    elif how == "scalar":
        X = np.float64(X[0, 0])
    elif how == "sparse":
        X = sparse.csr_matrix(X)
    elif how == "sparse nan":
        X = X.copy()
        X[i, j] = np.nan
        X = sparse.csr_matrix(X)
    elif how == "ragged list":
        X = X.tolist()
        X[i] = X[i][:-1] if d > 1 else X[i] + [1.0]
    return X


def _corrupt_y(y, how, rng):
    y = np.asarray(y)
    i = rng.integers(len(y))
    if how in ("nan", "inf"):
        y = y.astype(np.float64)
        y[i] = float(how)
    elif how == "short":
        y = y[:-1]
    elif how == "long":
        y = np.concatenate([y, y[:1]])
    elif how == "2-D column":
        y = y[:, None]
    elif how == "2-D":
        y = np.column_stack([y, y])
    elif how == "complex":
        y = y + 1j
    elif how == "str words":
        y = y.astype(str)
        y[i] = "abc"
    elif how == "object None":
        y = y.astype(object)
        y[i] = None
    elif how == "scalar":
        y = y[0]
    elif how == "empty":
        y = y[:0]
    return y


@st.composite
def validation_cases(draw):
    family = draw(st.sampled_from(sorted(ESTIMATORS)))
    n = draw(st.integers(3, 30))
    d = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = rng.normal(size=(n, d))
    if family == "logistic":
        y = np.arange(n) % 2
    elif family == "poisson":
        y = rng.poisson(1.0, size=n)
    else:
        y = rng.normal(size=n)
    # one corruption at a time (mostly), so the oracle's answer is about that input
    x_how = draw(st.sampled_from(X_CORRUPTIONS))
    y_how = draw(st.sampled_from(Y_CORRUPTIONS)) if x_how == "none" or draw(
        st.integers(0, 3)) == 0 else "none"
    return family, _corrupt_X(X, x_how, rng), _corrupt_y(y, y_how, rng), (x_how, y_how)


def _oracle_fit(family, X, y):
    """What scikit-learn's validation, called as the estimator's ``fit`` calls it,
    raises on ``(X, y)`` (None: it accepts them)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")       # DataConversionWarning for a column y
            check_X_y(X, y, dtype=[np.float64, np.float32], order="C", accept_sparse="csr",
                      y_numeric=family != "logistic")
    except Exception as err:
        return err
    return None


def check_fit_validation(case):
    family, X, y, how = case
    expected = _oracle_fit(family, X, y)
    est = ESTIMATORS[family](sampler="mh", **RUN, random_state=0)
    with warnings.catch_warnings(), time_limit():
        warnings.simplefilter("ignore")
        try:
            est.fit(X, y)
        except Exception as err:
            # a TypeError only where scikit-learn raises one (objects and the like)
            _check_error(err, allow_type_error=isinstance(expected, TypeError)
                         and not isinstance(expected, ValueError))
            return
    assert expected is None, (
        f"fit accepted {how} that scikit-learn rejects ({type(expected).__name__}: {expected})")
    assert np.isfinite(est.posterior_draws_).all()


@settings(DEFAULT, max_examples=80)
@given(case=validation_cases())
def test_fit_validation_like_sklearn(case):
    check_fit_validation(case)


@pytest.mark.slow
@settings(SLOW, max_examples=800)
@given(case=validation_cases())
def test_fit_validation_like_sklearn_slow(case):
    check_fit_validation(case)


@functools.cache
def _fitted(family):
    """A fitted estimator per family (3 features), shared by the predict properties."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 3))
    y = {"logistic": np.arange(60) % 2, "linear": X[:, 0] + rng.normal(size=60),
         "poisson": rng.poisson(1.0, size=60)}[family]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ESTIMATORS[family](sampler="hmc", **RUN, random_state=0).fit(X, y)


@st.composite
def predict_cases(draw):
    family = draw(st.sampled_from(sorted(ESTIMATORS)))
    method = draw(st.sampled_from(
        ["predict", "predict_proba", "predict_log_proba", "decision_function"]
        if family == "logistic" else ["predict", "predict std", "sample_y"]))
    n = draw(st.integers(1, 20))
    d = draw(st.sampled_from([3, 3, 3, 2, 4]))          # the estimators have 3 features
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = rng.normal(size=(n, d)) * draw(magnitudes)
    how = draw(st.sampled_from(X_CORRUPTIONS))
    return family, method, _corrupt_X(X, how, rng), how


def check_predict_validation(case):
    family, method, X, how = case
    est = _fitted(family)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Xc = check_array(X, dtype=[np.float64, np.float32], accept_sparse="csr")
        expected = None if Xc.shape[1] == 3 else ValueError("wrong number of features")
    except Exception as err:
        expected = err
    with warnings.catch_warnings(), time_limit():
        warnings.simplefilter("ignore")
        try:
            if method == "predict std":
                out = est.predict(X, return_std=True)[1]
            elif method == "sample_y":
                out = est.sample_y(X, n_samples=3, random_state=0)
            else:
                out = getattr(est, method)(X)
        except Exception as err:
            _check_error(err, allow_type_error=isinstance(expected, TypeError)
                         and not isinstance(expected, ValueError))
            return
    assert expected is None, (
        f"{method} accepted {how} that scikit-learn rejects ({type(expected).__name__}: "
        f"{expected})")
    assert out.shape[0] == Xc.shape[0]
    if method != "predict" or family != "logistic":
        # log-probabilities may be -inf for probabilities that underflow
        finite = np.isfinite(out) if method not in ("predict_log_proba",
                                                    "decision_function") else ~np.isnan(out)
        assert finite.all(), out


@settings(DEFAULT, max_examples=80)
@given(case=predict_cases())
# regression: the Poisson predictive sd was NaN where E[exp(eta)^2] overflows
@example(case=("poisson", "predict std", np.array([[345.58419206, 821.6181435, 330.43707618]]),
               "none"))
def test_predict_validation_like_sklearn(case):
    check_predict_validation(case)


@pytest.mark.slow
@settings(SLOW, max_examples=800)
@given(case=predict_cases())
def test_predict_validation_like_sklearn_slow(case):
    check_predict_validation(case)


# ---- property 4: the models' own validation (TypeError for dtypes, else ValueError) -----
@st.composite
def model_validation_cases(draw):
    family = draw(st.sampled_from(sorted(MODELS)))
    n = draw(st.integers(3, 30))
    d = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = rng.normal(size=(n, d))
    y = {"logistic": np.arange(n) % 2, "linear": rng.normal(size=n),
         "linear_sigma": rng.normal(size=n), "poisson": rng.poisson(1.0, size=n)}[family]
    x_how = draw(st.sampled_from(X_CORRUPTIONS))
    y_how = draw(st.sampled_from(Y_CORRUPTIONS)) if x_how == "none" else "none"
    return family, _corrupt_X(X, x_how, rng), _corrupt_y(y, y_how, rng), (x_how, y_how)


#: corruptions of the dtype: the models raise TypeError for these
_MODEL_DTYPE_ERRORS = {"complex", "complex real", "str numbers", "str words", "object None",
                       "object mixed", "bytes", "float16"}


def check_model_validation(case):
    family, X, y, (x_how, y_how) = case
    with warnings.catch_warnings(), time_limit():
        warnings.simplefilter("ignore")
        try:
            model = MODELS[family](X, y)
        except Exception as err:
            dtype_error = x_how in _MODEL_DTYPE_ERRORS or y_how in ("complex", "str words",
                                                                   "object None")
            _check_error(err, allow_type_error=dtype_error)
            return
    assert x_how in ("none", "int", "bool", "sparse") and y_how == "none", (
        f"{type(model).__name__} accepted X: {x_how}, y: {y_how}")


@settings(DEFAULT, max_examples=60)
@given(case=model_validation_cases())
def test_model_validation(case):
    check_model_validation(case)


@pytest.mark.slow
@settings(SLOW, max_examples=600)
@given(case=model_validation_cases())
def test_model_validation_slow(case):
    check_model_validation(case)
