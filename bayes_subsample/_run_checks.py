"""The driver's checks of a run: its arguments (counts, the model, parameter
names), whether a trace can be continued on the model given (the data's
fingerprint), whether a continuation's chains have moved on, and what the
model's own functions returned while the chains ran."""
from __future__ import annotations

import numbers
import warnings

from ._trace import Trace
from .samplers import resolve_sampler


def _chain_marks(run):
    """What changes when a chain of ``run`` moves on: its state object, its
    random stream's position, its kernel and warmup flag (compared with
    ``==``; states by identity)."""
    return [(_Same(ch.state), None if ch.rng is None else repr(ch.rng.bit_generator.state),
             _Same(ch.kernel), ch.warmup_ended) for ch in run.chains]


class _Same:
    """Equal to another ``_Same`` of the same object (identity, not value)."""

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return self.obj is other.obj


def _check_param_names(names, model):
    """``names`` as a list of one distinct name per parameter of ``model`` (or
    None): a list of another length would label some parameters only (the
    summary and the ArviZ export would drop the others)."""
    if names is None:
        return None
    if isinstance(names, str):
        raise TypeError("param_names must be a sequence of names, got a string")
    names = list(names)
    p = getattr(model, "n_params", None)
    if p is not None and len(names) != p:
        raise ValueError(f"param_names has {len(names)} names, but the model has {p} "
                         "parameters: give one name per parameter")
    if len(set(map(str, names))) != len(names):
        raise ValueError("param_names has repeated names: give each parameter its own name")
    return names


def _check_count(name, value, minimum):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_model(model):
    from .models import GaussianPrior, Model
    if not isinstance(model, Model):
        raise TypeError(f"model must be a bayes_subsample.models.Model, got "
                        f"{type(model).__name__}")
    if not isinstance(model.prior, GaussianPrior):
        raise TypeError(f"the samplers need a GaussianPrior, got {type(model.prior).__name__}")


def _warn_nan_evaluations(model, before):
    """Warn if the model's own functions returned NaN while the chains ran
    (``before`` NaN calls before): every sampler treats such a point as one of
    zero density -- a rejected proposal (MH, austerity, confidence), a divergent
    trajectory (HMC, NUTS) -- so a model NaN over a region makes the chains
    stall at its border, with nothing else to say why."""
    n, name, theta = model.nan_evaluations
    if n > before:
        from .models._base import show_theta
        warnings.warn(
            f"the model's {name} returned NaN in {n - before:,} calls while the chains ran "
            f"(first at theta = {show_theta(theta)}); proposals there were rejected as if "
            "of zero density (HMC, NUTS: divergent), so the chains may stall at the border "
            "of that region, or in it: make the functions finite (-inf for a point outside "
            "the support)",
            RuntimeWarning, stacklevel=3)


def _resume_plan(trace, model, sampler, n_samples):
    """Check that ``trace`` can be continued on ``model`` with ``sampler``;
    returns its run state and the number of draws to add per chain."""
    if not isinstance(trace, Trace):
        raise TypeError(f"resume must be a Trace returned by sample(), got {type(trace).__name__}")
    run = trace.run_state
    if run is None:
        raise ValueError(
            "this trace cannot be resumed: it holds no chain states (a pickled trace loses "
            "them, and estimators keep them only with warm_start=True or after an interrupt)")
    _check_model(model)
    fp_new = model.fingerprint()
    if fp_new != run.fingerprint:
        fp_old = run.fingerprint
        diff = sorted(k for k in set(fp_old) | set(fp_new) if fp_old.get(k) != fp_new.get(k))
        if "y" in fp_old and set(diff) <= {"terms", "y"}:
            # the GLMs' fingerprints hash every value of X ("terms") and of y
            shown = ", ".join({"terms": "X"}.get(k, k) for k in diff)
            raise ValueError(
                f"resume: the data changed since the run was sampled (it differs in: "
                f"{shown}; edited in place, or replaced by other values of the same "
                "shape); a run can only be continued on the data it was sampled on: "
                "sample the new data afresh (for an estimator: warm_start=False)")
        raise ValueError(
            "resume: the model differs from the one the trace was sampled on (it differs "
            f"in: {', '.join(diff)}); a run can only be continued on the same data, "
            "likelihood and prior")
    if sampler is not None:
        other = resolve_sampler(sampler)
        if other.name != run.sampler.name or repr(other.get_params()) != repr(
                run.sampler.get_params()):
            raise ValueError(
                f"resume: the trace was sampled with {run.sampler!r}, not {other!r}; a run "
                "can only be continued with the same sampler and hyperparameters")
    n_add = 0 if n_samples is None else _check_count("n_samples", n_samples, 0)
    return run, n_add
