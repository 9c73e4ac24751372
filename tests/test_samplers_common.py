"""The sampler contract, checked on every registered sampler (in the spirit of
scikit-learn's ``parametrize_with_checks``), each on a compiled GLM and on the
same posterior as a user ``FunctionModel``:

* sampler objects: ``clone`` keeps the hyperparameters; ``sample`` never mutates
  them; invalid hyperparameters raise ``InvalidParameterError`` (bad types and
  bad values, generated as scikit-learn's common check does);
* the kernel contract: ``prepare`` returns a ``Prepared``; ``State`` and ``Info``
  are NamedTuples; every ``Info`` has ``accept_prob`` (float in [0, 1]),
  ``accepted`` (bool), ``n_evals`` (int >= 0), and the trace records every field;
  a step changes nothing on its kernel (every change is in the State it returns);
* reproducibility: the same ``random_state`` gives identical draws for any
  ``n_jobs``;
* compiled vs NumPy: the kernels on a compiled GLM and on the same posterior as
  a user model (whose NumPy terms the kernels call back) make the same chain
  from the same preparation and seed.
"""
import dataclasses
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import (InvalidParameterError,
                                             generate_invalid_param_val, make_constraint)

from bayes_subsample import sample
from bayes_subsample.control_variates import TaylorControlVariate
from bayes_subsample.models import LogisticRegressionModel
from bayes_subsample.samplers import SAMPLERS, BaseSampler, Prepared

NAMES = sorted(SAMPLERS)
RUN = {"n_samples": 30, "n_warmup": 30, "n_chains": 2, "random_state": 3,
       "check_convergence": False}


@pytest.fixture(scope="module")
def glm():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = (rng.random(600) < 1 / (1 + np.exp(-(X @ [1.0, -0.5, 0.25] + 0.3)))) * 1.0
    return LogisticRegressionModel(X, y, prior_scale=5.0)


@pytest.fixture(params=["glm", "user"])
def model(request, glm, as_user_model):
    if request.param == "user":
        return as_user_model(glm)
    return glm


@pytest.mark.parametrize("name", NAMES)
def test_clone_and_no_mutation(name, glm):
    sampler = SAMPLERS[name]()
    assert isinstance(sampler, BaseSampler) and sampler.name is not None
    params = sampler.get_params()
    twin = clone(sampler)
    assert twin is not sampler and twin.get_params() == params
    sample(glm, sampler, **RUN)
    assert sampler.get_params() == params


@pytest.mark.parametrize("name", NAMES)
def test_kernel_contract_and_trace_fields(name, model):
    sampler = SAMPLERS[name]()
    prepared = sampler.prepare(model, np.random.default_rng(0))
    assert isinstance(prepared, Prepared) and prepared.n_evals >= 0
    kernel = sampler.build(model, prepared, 5)
    rng = np.random.default_rng(1)
    state = kernel.init(rng, prepared.theta_init.copy())
    assert hasattr(state, "_fields") and state._fields[0] == "theta"
    for i in range(5):
        state, info = kernel.warmup_step(rng, state, i)
    state = kernel.end_warmup(state)
    for _ in range(5):
        state, info = kernel.step(rng, state)
        assert hasattr(info, "_fields")
        assert {"accept_prob", "accepted", "n_evals"} <= set(info._fields)
        assert isinstance(info.accepted, (bool, np.bool_))
        assert 0.0 <= info.accept_prob <= 1.0
        assert isinstance(info.n_evals, (int, np.integer)) and info.n_evals >= 0
        assert np.all(np.isfinite(state.theta)) and state.theta.shape == (model.n_params,)
    assert isinstance(kernel.tuning(), dict)
    trace = sample(model, sampler, **RUN)
    assert trace.draws.shape == (2, 30, model.n_params) and np.all(np.isfinite(trace.draws))
    assert set(info._fields) == set(trace.stats)
    assert all(v.shape == (2, 30) for v in trace.stats.values())
    assert np.all(trace.diagnostics()["n_evals"] > 0)
    # signed draws, unless the sampler fell back to an exact chain on the full data
    full_data = trace.tuning[0].get("full_data", False)
    assert (trace.signs is not None) == (sampler.signed and not full_data)


def _snapshot(value, seen=None):
    """A deep copy of ``value`` for comparison: arrays, containers and the
    ``vars`` of Python objects, recursively (each object once; those in ``seen``
    not at all); compiled objects (no ``__dict__``) by identity."""
    seen = set() if seen is None else seen
    if isinstance(value, np.ndarray):
        return ("array", value.copy())
    if isinstance(value, (tuple, list)):
        return (type(value), [_snapshot(v, seen) for v in value])
    if isinstance(value, dict):
        return (dict, {k: _snapshot(v, seen) for k, v in value.items()})
    if isinstance(value, (int, float, complex, str, bytes, type(None), np.generic, type)):
        return ("value", value)
    if hasattr(value, "__dict__") and id(value) not in seen:
        seen.add(id(value))
        return ("object", id(value), _snapshot(vars(value), seen))
    return ("identity", id(value))


def _assert_same(a, b, where="kernel"):
    assert a[0] == b[0], where
    if a[0] == "array":
        assert a[1].shape == b[1].shape and np.array_equal(a[1], b[1], equal_nan=True), where
    elif a[0] in (tuple, list) or (isinstance(a[0], type) and issubclass(a[0], tuple)):
        assert len(a[1]) == len(b[1]), where
        for i, (x, y) in enumerate(zip(a[1], b[1])):
            _assert_same(x, y, f"{where}[{i}]")
    elif a[0] is dict:
        assert a[1].keys() == b[1].keys(), where
        for k in a[1]:
            _assert_same(a[1][k], b[1][k], f"{where}[{k!r}]")
    elif a[0] == "object":
        assert a[1] == b[1], f"{where} was replaced"
        for k in a[2][1]:
            _assert_same(a[2][1][k], b[2][1].get(k, ("missing",)), f"{where}.{k}")
        assert a[2][1].keys() == b[2][1].keys(), where
    elif a[0] == "value":
        assert a[1] == b[1] or (a[1] != a[1] and b[1] != b[1]), where     # NaN == NaN
    else:
        assert a[1] == b[1], f"{where} was replaced"


@pytest.mark.parametrize("name", NAMES)
def test_step_changes_nothing_on_the_kernel(name, model):
    """After warmup, ``step`` leaves ``vars(kernel)`` as it was, deeply (arrays,
    containers, the Python objects it holds): the chain's state is all in the
    State (so a kernel can serve any state, and stepping is a function). The
    model is the data all chains share, compared by identity: its pass counter
    counts what the chains read."""
    sampler = SAMPLERS[name](**({"step_size": 1e-3} if name == "psgld" else {}))
    prepared = sampler.prepare(model, np.random.default_rng(0))
    kernel = sampler.build(model, prepared, 10)
    rng = np.random.default_rng(1)
    state = kernel.init(rng, prepared.theta_init.copy())
    for i in range(10):
        state, _ = kernel.warmup_step(rng, state, i)
    state = kernel.end_warmup(state)
    before = _snapshot(kernel, {id(model)})
    moved = False
    for _ in range(5):
        theta = state.theta.copy()
        state, _ = kernel.step(rng, state)
        moved |= not np.array_equal(theta, state.theta)
    assert moved
    _assert_same(before, _snapshot(kernel, {id(model)}))


def test_the_kernel_snapshot_sees_changes():
    class Holder:
        pass

    outer, inner = Holder(), Holder()
    outer.a, outer.inner, inner.v, inner.d = np.zeros(3), inner, 1.0, {"k": [np.ones(2)]}
    before = _snapshot(outer)
    for change in (lambda: outer.a.__setitem__(0, 1.0), lambda: setattr(inner, "v", 2.0),
                   lambda: inner.d["k"][0].__setitem__(1, 0.0),
                   lambda: setattr(inner, "new", 1), lambda: setattr(outer, "inner", Holder())):
        change()
        with pytest.raises(AssertionError):
            _assert_same(before, _snapshot(outer))
        outer.a[0], inner.v, inner.d["k"][0][1], outer.inner = 0.0, 1.0, 1.0, inner
        inner.__dict__.pop("new", None)
        _assert_same(before, _snapshot(outer))


@pytest.mark.parametrize("name", NAMES)
def test_same_draws_any_n_jobs(name, model):
    a = sample(model, name, n_jobs=1, **RUN)
    b = sample(model, name, n_jobs=2, **RUN)
    np.testing.assert_array_equal(a.draws, b.draws)
    for k in a.stats:
        np.testing.assert_array_equal(a.stats[k], b.stats[k])


def _first_order(prepared, model):
    """The preparation with first-order control variates (what a user model has)."""
    cv = getattr(prepared, "cv", None)
    if cv is None or cv.order < 2:
        return prepared
    return dataclasses.replace(prepared, cv=TaylorControlVariate(model, cv.theta_star, 1))


def _chain(sampler, model, prepared, n=40):
    kernel = sampler.build(model, prepared, 20)
    rng = np.random.default_rng(11)
    state = kernel.init(rng, prepared.theta_init.copy())
    out = []
    for i in range(n):
        if i < 20:
            state, info = kernel.warmup_step(rng, state, i)
        else:
            state = kernel.end_warmup(state) if i == 20 else state
            state, info = kernel.step(rng, state)
        out.append((*state.theta, float(info.accepted)))
    return np.array(out), rng.random()


@pytest.mark.parametrize("name", NAMES)
def test_compiled_matches_numpy(name, glm, as_user_model):
    # the confidence sampler's user-model path: the plain bound over all data (its
    # proxy needs second-order residual bounds, its strata the GLMs' geometry)
    sampler = SAMPLERS[name](**({"proxy": None, "stratify": False} if name == "confidence"
                                else {}))
    prepared = _first_order(sampler.prepare(glm, np.random.default_rng(0)), glm)
    a, u_a = _chain(sampler, glm, prepared)
    b, u_b = _chain(sampler, as_user_model(glm), prepared)
    np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-7)
    assert u_a == u_b            # the same random numbers were drawn


def _invalid_values(constraints):
    """A value of a type no constraint accepts, then values of an accepted type
    outside every accepted range (as scikit-learn's check_param_validation)."""
    yield type("BadType", (), {})()
    for c in constraints:
        try:
            yield generate_invalid_param_val(make_constraint(c))
        except NotImplementedError:
            continue


@pytest.mark.parametrize("name", NAMES)
def test_invalid_hyperparameters_raise(name, glm):
    sampler = SAMPLERS[name]()
    for param, constraints in sampler._parameter_constraints.items():
        for bad in _invalid_values(constraints):
            s = clone(sampler).set_params(**{param: bad})
            with pytest.raises(InvalidParameterError, match=param):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    s.prepare(glm, np.random.default_rng(0))


@pytest.mark.parametrize("cls, old, new, value", [
    ("austerity", "first_batch", "first_batch_size", 50),
    ("confidence", "first_batch", "first_batch_size", 5),
    ("confidence", "gamma", "batch_growth", 3.0),
])
def test_renamed_hyperparameters(cls, old, new, value, glm):
    """The old names of renamed hyperparameters still work, with a FutureWarning, and
    give the same chain as the new names; both at once is an error."""
    new_run = sample(glm, SAMPLERS[cls](**{new: value}), **RUN)
    with pytest.warns(FutureWarning, match=f"{old}=.*deprecated.*{new}="):
        old_run = sample(glm, SAMPLERS[cls](**{old: value}), **RUN)
    np.testing.assert_array_equal(old_run.draws, new_run.draws)
    with pytest.raises(ValueError, match=f"give {new} only"):
        sample(glm, SAMPLERS[cls](**{old: value, new: value}), **RUN)


class _Failing:
    """Per-datum functions that raise once ``armed``: an error in user code."""

    def __init__(self, model):
        self.model, self.armed = model, False

    def loglik(self, theta, idx):
        if self.armed:
            raise ArithmeticError("user code failed")
        return self.model.loglik_terms(theta, idx)

    def grad(self, theta, idx):
        if self.armed:
            raise ArithmeticError("user code failed")
        return self.model.grad_terms(theta, idx)


@pytest.mark.parametrize("name", NAMES)
def test_user_code_errors_propagate(name, glm):
    """An exception raised by a user model inside a compiled loop reaches the
    caller unchanged (not a crash, not a silently rejected step)."""
    from bayes_subsample.models import FunctionModel
    f = _Failing(glm)
    user = FunctionModel(f.loglik, f.grad, glm.n_data, glm.n_params,
                         prior_scale=glm.prior.scale, range_bound=glm.range_bound)
    sampler = SAMPLERS[name]()
    prepared = sampler.prepare(user, np.random.default_rng(0))
    kernel = sampler.build(user, prepared, 0)
    rng = np.random.default_rng(1)
    f.armed = True
    with pytest.raises(ArithmeticError, match="user code failed"):
        state = kernel.init(rng, prepared.theta_init.copy())
        for _ in range(3):
            state, _ = kernel.step(rng, state)
