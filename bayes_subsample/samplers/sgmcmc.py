"""Stochastic-gradient Langevin dynamics (SGLD) with optional Taylor control
variates (:ref:`algo-sgmcmc`), and what the SG samplers share: their
preparation, their kernel's base, the step-size helper and budgets in data
passes (SGHMC in ``sghmc.py``, EWSG in ``ewsg.py``, pSGLD in ``psgld.py``).

These samplers have **no Metropolis-Hastings correction**: their stationary
distribution is not the posterior, and its error grows with the step size
(and, for uniform minibatches, with the gradient-noise variance). Use
:func:`suggest_step_size` for a conservative start and check results against a
smaller step size.

Every step runs in the ``nogil`` loops of ``_sgmcmc_fast.pyx`` with the one
stochastic-gradient estimator (``GradientEstimator``) on the model's compiled
object (user models through their callback object).
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from numbers import Integral, Real
from typing import NamedTuple, Optional

import numpy as np
from sklearn.exceptions import ConvergenceWarning, EfficiencyWarning

from .._params import store_params
from ..control_variates import TaylorControlVariate
from ..exceptions import SamplingError
from . import _sgmcmc_fast as _fast
from .._linalg import scale_draws, solve_chol
from ._base import (BaseSampler, Kernel, LaplacePrepared, cv_order, diagonal_metric,
                    prepare_laplace, shared_constraints)
from ._sg_check import SteinCheck
from ._sg_tuning import (_DEFAULT_FRICTION, START_BATCH, START_FRICTION, START_SEED, START_STEP,
                         StepRule, curvature_and_noise, max_curvature, psgld_rule,
                         refuse_if_too_slow, start_curvature, step_at_start, step_from_curvature,
                         step_rule)
from ._sgmcmc_fast import GradientEstimator, whitened_draw

__all__ = ["SGLD", "suggest_step_size"]

_BIAS_NOTE = """
    .. warning::
       This sampler has no Metropolis-Hastings correction (``exact = False``):
       its draws follow a discretised, noisy dynamics whose stationary
       distribution differs from the posterior. The bias grows with the step
       size (and with the minibatch gradient noise); it vanishes only as the
       step size goes to 0, at the price of slower mixing. The default step
       size keeps it to a few percent of the variance where the curvature
       and gradient noise measured at draws of the Laplace approximation hold;
       where they make that step too small for the chains to mix, the sampler
       refuses before any draw, and a chain whose spread disagrees with the
       posterior's gradient at the end of warmup stops with an error
       (:ref:`algo-sg-safety`). Check that halving ``step_size`` does not
       change the summaries you report.
"""

#: the ``check_spread`` parameter of SGLD, SGHMC and EWSG
_CHECK_PARAM = """    check_spread : bool, default=True
        At the end of warmup, compare each chain's spread and centre with the
        posterior's gradient (Stein's identity, on the second half of warmup;
        no extra gradient evaluations) and raise a
        :class:`~bayes_subsample.exceptions.SamplingError` where its variance
        in a whitened coordinate is outside 1/1.5 to 1.5 times the posterior's,
        or its mean more than 0.3 posterior sds off, beyond four standard
        errors (:ref:`algo-sg-safety`). Needs ``n_warmup >= 200``. ``False``
        skips it (to measure the bias of deliberately large steps).
"""

#: the ``metric`` parameter of SGLD, SGHMC and EWSG
_METRIC_PARAM = """\
    metric : {"auto", "dense", "diag"}, default="auto"
        The Laplace approximation that starts the chains, preconditions the
        dynamics and checks for runaways: dense, or diagonal (wide models,
        compiled GLMs: no ``p x p`` matrix anywhere -- the mode by L-BFGS, the
        precision's diagonal from one pass, control variates of order 1,
        since order 2 needs the ``p x p`` Hessian sum, and the default step
        size from the largest curvature in the diagonally whitened
        coordinates, by Lanczos; ``O(p)`` work a step). ``"auto"``: dense up
        to 2,000 parameters, diagonal beyond. See :ref:`scaling-wide`.
"""

# the example of the SG samplers: a run of the sampler written after
# ``{example: `` in their docstrings on a Gaussian regression
_EXAMPLE = """\
    >>> import numpy as np
    >>> from bayes_subsample import sample
    >>> from bayes_subsample.models import GaussianRegressionModel
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2)); y = X @ [1.0, -1.0] + rng.normal(size=500)
    >>> trace = sample(GaussianRegressionModel(X, y), {sampler},
    ...                n_samples=100, n_warmup=50, n_chains=1, random_state=0,
    ...                check_convergence=False)
    >>> trace.draws.shape
    (1, 100, 3)"""


class SGSampler(BaseSampler):
    """Base of the stochastic-gradient samplers (SGLD, SGHMC, pSGLD, EWSG): not
    exact (the step size biases what they sample). A subclass's docstring gets
    the shared parts put in: the bias note, the ``metric`` and ``check_spread``
    entries and the example (the placeholders of this module)."""

    exact = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        doc = (cls.__doc__.replace("{bias}", _BIAS_NOTE)
               .replace("    {metric}\n", _METRIC_PARAM)
               .replace("    {check}\n", _CHECK_PARAM))
        cls.__doc__ = re.sub(r"    \{example: (.+)\}",
                             lambda m: _EXAMPLE.format(sampler=m.group(1)), doc)


# --------------------------------------------------------------------------------------
# budgets and step sizes
# --------------------------------------------------------------------------------------
def suggest_step_size(model, sampler="sgld", *, batch_size=None, control_variates=True,
                      friction=None, precondition=False, c=None, precision=None, mass=None,
                      metric="auto", damping=1e-5):
    """A conservative step size from the curvature of the posterior where its
    Laplace approximation puts its mass.

    With ``P`` the posterior precision at the MAP (``-Hessian`` of the log
    posterior; the Laplace approximation ``N(theta*, P^-1)``), ``M`` the mass
    matrix (the metric of the dynamics) and ``lam = lambda_max(M^-1 P)``
    (``lambda_max(P)`` for the identity metric, 1 when ``precondition``: the
    dynamics then run in the whitened coordinates, where ``P`` is the identity),
    raised to the largest ``lambda_max(M^-1 P(theta_i)) / 1.25`` at four draws
    ``theta_i`` of the Laplace approximation when it is computed here
    (``precision=None``; on tall data as ``lam`` times a ratio of curvatures
    on 2,048 rows; on a near-Gaussian posterior this leaves ``lam`` as it is,
    on separable data it raises it by orders of magnitude), the rule is

    * SGLD (``theta += eps/2 g + N(0, eps I)``): ``eps = c q / lam``;
    * SGHMC (friction ``C``) and EWSG (friction ``gamma``):
      ``h = c min(lam^-1/2, 1/C, q C / lam)``;

    where ``q = min(1, b / n)`` for uniform minibatches without control
    variates and ``q = min(1, lam / v)`` with them, ``v`` the largest
    per-coordinate variance of the estimate's noise in the coordinates the
    dynamics move, measured at draws of the Laplace approximation (when the
    Laplace approximation is computed here, ``precision=None``; with a given
    ``precision``, ``q = 1``). On tall data with order-2 control variates
    ``v`` is far below ``lam`` and ``q = 1``; with order 1 on wide models, or
    far from the Laplace approximation, it is not.

    Why: on the Gaussian approximation with exact gradients, the SGLD
    recursion ``theta' = (1 - eps lam/2) theta + N(0, eps)`` has stationary
    variance ``1 / (lam (1 - eps lam / 4))``: a relative inflation of about
    ``c / 4`` in the stiffest direction (it is unstable for ``eps lam >= 4``).
    Minibatch noise of covariance ``~ (n / b) P`` (the per-datum Fisher
    information) adds a relative inflation ``~ eps n lam / (4 b)``, again
    ``c / 4`` with the ``q`` factor. For the underdamped samplers ``lam^-1/2``
    resolves the fastest oscillation, ``1/C`` keeps the friction step
    contractive, ``C / lam`` keeps the explicit Euler step of EWSG stable
    (``h < gamma / lam``) and ``q C / lam`` bounds the excess temperature
    ``h Var(g) / (2 C)`` of the noisy gradient by ``c / 2``. The default
    ``c = 0.3`` was chosen by measurement: preconditioned, with control
    variates, every posterior sd on covtype and on the HIGGS sample is within
    9% of full-data NUTS for all three samplers (the table of bias
    against step size is printed by ``benchmarks/bench_mixing.py``); smaller
    ``c`` is more accurate and mixes more slowly. The samplers refuse a
    default step more than 20 times below the same rule's on a Gaussian
    posterior with the mode's curvature (:ref:`algo-sg-safety`); this function
    returns it.

    pSGLD: SGLD's rule in the coordinates of its preconditioner ``G`` at its
    stationary value around the Laplace approximation (``lam =
    lambda_max(G^1/2 P G^1/2)``, ``q = min(1, b / n)``: no control variates).

    On a model without a Hessian (``model.has_hessian`` False: no mode, no
    Laplace approximation; :ref:`algo-sg-no-hessian`) the rule is set by the
    curvature ``lam`` at the chains' typical start (``model.init_params`` of
    a fixed seed), with ``lam_z = lam / n`` its value in the coordinates
    ``z = sqrt(n) theta`` the dynamics move: SGLD ``eps_z = c / lam_z``
    (``eps = c / lam`` in ``theta``), SGHMC and EWSG
    ``h_z = c min(lam_z^-1/2, 1 / gamma)`` and pSGLD ``eps = c / n`` in
    ``theta``, with ``c`` from ``START_STEP`` (2, 0.3, 0.2 and 0.01, measured
    on networks: see :ref:`algo-sg-no-hessian`).

    Parameters
    ----------
    model : Model
    sampler : {"sgld", "sghmc", "ewsg", "psgld"} or a sampler object
        A sampler object supplies ``batch_size``, ``control_variates``,
        ``friction``, ``precondition`` and ``damping`` when those are not given
        here (its ``None`` defaults resolved on ``model``).
    batch_size : int, optional
        Minibatch size (needed for the noise term; ignored when None).
    control_variates : bool, default=True
        Whether the gradients use Taylor control variates (SGLD/SGHMC).
    friction : float, optional
        ``C`` (SGHMC, default 1) or ``gamma`` (EWSG, default 2); 0.1 for both
        on a model without a Hessian.
    precondition : bool, default=False
        The sampler runs in the whitened coordinates of the Laplace approximation
        (the samplers' default; a sampler object passed as ``sampler`` supplies it).
    c : float, optional
        The constant of the rule: in (0, 1], 0.3 by default; on a model
        without a Hessian any number > 0, the sampler's ``START_STEP`` by
        default.
    precision : ndarray of shape (n_params, n_params), optional
        Posterior precision at the mode; computed (MAP + Laplace, a few full
        passes) when not given.
    mass : {"identity", "laplace"}, optional
        Deprecated: ``"laplace"`` is ``precondition=True``.
    metric : {"auto", "dense", "diag"}, default="auto"
        With ``precision=None``: the Laplace approximation computed, dense or
        diagonal (``"auto"``: diagonal beyond 2,000 parameters, as the
        samplers' own ``metric``). With a diagonal one (``M`` the precision's
        diagonal when ``precondition``) ``lam`` is found by Lanczos iterations
        on products with ``P`` (two reads of X each), no ``p x p`` matrix.
    damping : float, default=1e-5
        pSGLD's ``lambda`` (added to the root mean square gradient).

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample.models import GaussianRegressionModel
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(1000, 2)); y = X @ [1.0, -1.0] + rng.normal(size=1000)
    >>> eps = suggest_step_size(GaussianRegressionModel(X, y), "sgld")
    >>> bool(0 < eps < 1e-3)
    True
    """
    if isinstance(sampler, BaseSampler):
        obj = sampler
        sampler = obj.name
        settings = sg_settings(obj, model)
        if batch_size is None:
            batch_size = settings.get("batch_size")
            if sampler == "ewsg":
                batch_size = min(batch_size, model.n_data)
        control_variates = settings.get("control_variates", False)
        if friction is None:
            friction = settings.get("friction")
        precondition = settings.get("precondition", False)
        metric = getattr(obj, "metric", metric)
        damping = getattr(obj, "damping", damping)
    if sampler not in ("sgld", "sghmc", "ewsg", "psgld"):
        raise ValueError(f"sampler must be 'sgld', 'sghmc', 'ewsg' or 'psgld', got "
                         f"{sampler!r}")
    if not model.has_hessian:
        if c is not None and not (isinstance(c, Real) and 0 < c < np.inf):
            raise ValueError(f"c must be a finite number > 0, got {c!r}")
        lam = float("nan")
        if sampler != "psgld":
            theta0 = model.check_theta(model.init_params(np.random.default_rng(START_SEED)))
            lam = start_curvature(model, theta0)[0]
        step = step_at_start(sampler, lam, model.n_data, friction)
        return step if c is None else step * c / START_STEP[sampler]
    if c is None:
        c = 0.3
    if mass is not None:
        if mass not in ("identity", "laplace"):
            raise ValueError(f"mass must be 'identity' or 'laplace', got {mass!r}")
        warnings.warn("suggest_step_size(mass=...) is deprecated; use precondition=True for "
                      "mass='laplace'", FutureWarning, stacklevel=2)
        precondition = mass == "laplace"
    if not (isinstance(c, Real) and 0 < c <= 1):
        raise ValueError(f"c must be a number in (0, 1], got {c!r}")
    if batch_size is not None and (not isinstance(batch_size, Integral) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if friction is None:
        friction = _DEFAULT_FRICTION.get(sampler, 1.0)
    if not (np.isfinite(friction) and friction > 0):
        raise ValueError(f"friction must be a finite number > 0, got {friction!r}")
    if sampler == "psgld":
        if precision is not None:
            raise ValueError("pSGLD's step needs its preconditioner, estimated at the Laplace "
                             "approximation computed here: leave precision=None")
        from .._optimize import laplace
        diagonal = diagonal_metric(metric, model)
        lap = laplace(model, diagonal=diagonal)
        rule, _ = psgld_rule(model, lap["theta_map"], lap["chol_cov"], lap["precision"],
                             diagonal, batch_size or SMALL_BATCH, damping)
        return step_from_curvature(sampler, rule.lam, rule.q, c=c)
    if precision is None:
        from .._optimize import laplace
        diagonal = diagonal_metric(metric, model)
        lap = laplace(model, diagonal=diagonal)
        cv = None
        if control_variates and batch_size:
            cv = TaylorControlVariate(model, lap["theta_map"], order=cv_order(model, diagonal))
        lam, q, _ = curvature_and_noise(model, lap["theta_map"], lap["chol_cov"],
                                        lap["precision"], diagonal, precondition, cv,
                                        batch_size)
    else:
        precision = np.asarray(precision, dtype=np.float64)
        if precision.shape != (model.n_params, model.n_params):
            raise ValueError(f"precision must have shape ({model.n_params}, "
                             f"{model.n_params}), got {precision.shape}")
        lam = max_curvature(model, None, None, precondition, precision)
        q = min(1.0, batch_size / model.n_data) if (batch_size and not control_variates) else 1.0
    return step_from_curvature(sampler, lam, q, friction=friction, c=c)


# --------------------------------------------------------------------------------------
# shared machinery
# --------------------------------------------------------------------------------------
@dataclass
class SGPrepared(LaplacePrepared):
    """The Laplace preparation (MAP: theta* and chain starts), the control
    variates at the MAP (or None), the step size and the hyperparameters
    resolved on the model; or, on a model without a Hessian (``laplace``
    False), the point where the default step's curvature was measured
    (``theta_init``, no ``init_chol``: each chain starts from
    ``model.init_params`` drawn from its own generator)."""

    cv: Optional[TaylorControlVariate] = None
    step_size: float = 0.0
    #: the dynamics run in the whitened coordinates of the Laplace approximation
    precondition: bool = True
    #: the curvature and noise behind the default step (None: ``step_size`` given)
    step_rule: Optional[StepRule] = None
    #: False: no mode and no Laplace approximation (the model has no Hessian)
    laplace: bool = True
    #: the minibatch size, friction and momentum refresh, resolved on the model
    #: (:func:`sg_settings`; None where the sampler has no such hyperparameter)
    batch_size: int = 0
    friction: Optional[float] = None
    refresh_momentum: Optional[bool] = None
    #: pSGLD: the preconditioner's running mean of squared gradients at the
    #: chains' start (its estimated stationary value on a Laplace approximation,
    #: zeros otherwise, as in the pSGLD paper)
    second_moment: Optional[np.ndarray] = None

    def initial_point(self, model, rng):
        if not self.laplace:
            return model.check_theta(model.init_params(rng)).copy()
        return super().initial_point(model, rng)


#: a ``batch_size`` larger than the data is refused, unless it is at most this
#: (the default, 32, on fewer than 32 rows: the minibatch draws rows with
#: replacement, so it stays valid and cheap)
SMALL_BATCH = 32

#: hyperparameter -> its default with a Hessian (the Laplace path) and without
#: (the EWSG paper's settings for its MLP on MNIST, :ref:`algo-sg-no-hessian`)
_MODEL_DEFAULTS = {
    "batch_size": (32, START_BATCH),
    "control_variates": (True, False),
    "precondition": (True, False),
    "refresh_momentum": (True, False),
}


def sg_settings(sampler, model, precondition=None):
    """The hyperparameters of an SG sampler that depend on the model, resolved:
    ``None`` is the default on ``model`` (with or without a Hessian, see
    ``_MODEL_DEFAULTS``; ``friction``: the sampler's Laplace-path default, or
    :data:`~._sg_tuning.START_FRICTION`); ``control_variates=True`` and
    ``precondition=True`` need the mode and the Laplace approximation, and
    are refused on a model without a Hessian. ``precondition`` overrides the
    sampler's (SGHMC's deprecated ``mass``). Returns a dict with an entry per
    hyperparameter the sampler has."""
    laplace = model.has_hessian
    given = dict(sampler.get_params())
    if precondition is not None:
        given["precondition"] = precondition
    out = {}
    for name, (with_hessian, without) in _MODEL_DEFAULTS.items():
        if name not in given:
            continue
        value = given[name]
        if value is None:
            value = with_hessian if laplace else without
        elif value and not laplace and name in ("control_variates", "precondition"):
            raise ValueError(
                f"{type(sampler).__name__}({name}=True) needs the posterior's mode and its "
                f"Laplace approximation, which {type(model).__name__} does not provide (it "
                f"has no Hessian); leave {name}=None (no {name.replace('_', ' ')} on such "
                "models)")
        out[name] = value
    if "friction" in given:
        friction = given["friction"]
        if friction is None:
            friction = _DEFAULT_FRICTION[sampler.name] if laplace else START_FRICTION
        out["friction"] = float(friction)
    return out


def prepare_sg(sampler, model, *, precondition=None, cap_batch=False):
    """The preparation of the SG samplers, on the hyperparameters resolved on
    the model (:func:`sg_settings`).

    With a Hessian: MAP / Laplace, control variates at the MAP (order 2 for
    GLMs, 1 otherwise; their cache built), and the step size: the default
    from the curvature and gradient noise at the mode and at draws of the
    Laplace approximation (:func:`~._sg_tuning.step_rule`), refused when it
    is too small for the chains to mix (:func:`~._sg_tuning.refuse_if_too_slow`,
    a :class:`~bayes_subsample.exceptions.SamplingError` before any draw).
    With a diagonal metric (wide models) the Laplace approximation is diagonal
    and the control variates are of order 1 (order 2 needs the ``p x p``
    Hessian sum): ``O(p)`` work a step. pSGLD (``sampler.name == "psgld"``)
    has no control variates and moves ``theta`` with its own preconditioner;
    its default step is SGLD's rule in that preconditioner's coordinates
    (:func:`~._sg_tuning.psgld_rule`).

    Without a Hessian (``model.has_hessian`` False): no mode, no Laplace
    approximation, no control variates; the default step from the curvature
    at ``model.init_params`` of a fixed seed (:func:`~._sg_tuning.step_at_start`,
    :ref:`algo-sg-no-hessian`). ``cap_batch``: the step rule sees
    ``min(batch_size, n)`` (EWSG's blocks)."""
    settings = sg_settings(sampler, model, precondition)
    asked = settings["batch_size"]
    if asked > max(model.n_data, SMALL_BATCH):
        # refused before any work (a minibatch buffer of batch_size rows is allocated)
        raise ValueError(f"{type(sampler).__name__}: batch_size={asked} is larger than the "
                         f"data (n={model.n_data}); use batch_size <= {model.n_data}")
    batch_size = min(asked, model.n_data) if cap_batch else asked
    common = dict(batch_size=int(asked), friction=settings.get("friction"),
                  refresh_momentum=settings.get("refresh_momentum"))
    psgld = sampler.name == "psgld"
    if not model.has_hessian:
        theta0 = model.check_theta(model.init_params(np.random.default_rng(START_SEED))).copy()
        rule, n_evals, step = None, 0, sampler.step_size
        if step is None:
            lam = float("nan")
            if not psgld:
                lam, n_evals = start_curvature(model, theta0)
                rule = StepRule(lam, 1.0, lam, float("nan"), n_evals, lam)
            step = step_at_start(sampler.name, lam, model.n_data, settings.get("friction"))
        return SGPrepared(theta_init=theta0, init_chol=None, n_evals=n_evals, step_size=float(step),
                          precondition=False, step_rule=rule, laplace=False,
                          second_moment=np.zeros(model.n_params) if psgld else None, **common)
    precondition = False if psgld else settings["precondition"]
    control_variates = False if psgld else settings["control_variates"]
    diagonal = diagonal_metric(sampler.metric, model)
    lap = prepare_laplace(model, diagonal=diagonal)
    n_evals, cv, second_moment = lap.n_evals, None, None
    if control_variates:
        cv = TaylorControlVariate(model, lap.theta_init, order=cv_order(model, diagonal))
        cv.build_cache()
        n_evals += cv.n_evals
    rule = None
    if psgld:
        rule, G = psgld_rule(model, lap.theta_init, lap.init_chol, lap.precision, diagonal,
                             batch_size, sampler.damping)
        n_evals += rule.n_evals
        # the running mean of squared gradients that gives G (its stationary estimate)
        second_moment = np.maximum(1.0 / G - sampler.damping, 0.0) ** 2
    if sampler.step_size is None:
        if not psgld:
            rule = step_rule(model, lap.theta_init, lap.init_chol, lap.precision, diagonal,
                             precondition, cv, batch_size)
            n_evals += rule.n_evals
        q = rule.q
        step = step_from_curvature(sampler.name, rule.lam, q, friction=settings.get("friction"))
        refuse_if_too_slow(sampler, model, rule, batch_size, step, control_variates,
                           friction=settings.get("friction"))
        if cv is not None and q < 0.1:
            needed = batch_size / q
            cure = (f"A batch_size of about {needed:.0f} restores it" if needed < model.n_data
                    else "No batch smaller than the data restores it")
            warnings.warn(
                f"{type(sampler).__name__}: the control variates' gradient noise on minibatches "
                f"of {batch_size} rows is {1 / q:.3g} times what the posterior's curvature "
                f"allows (order-{cv.order} control variates, {model.n_params} parameters), so "
                f"the default step size is {1 / q:.3g} times smaller and the chains mix that "
                f"much more slowly. {cure}; on wide models HMC-ECS or NUTS (diagonal "
                "metric) are the better choice.", EfficiencyWarning, stacklevel=3)
    else:
        step = float(sampler.step_size)
        if psgld:
            rule = None
    return SGPrepared(**{**vars(lap), "n_evals": n_evals}, cv=cv, step_size=step,
                      precondition=bool(precondition), step_rule=rule,
                      second_moment=second_moment, **common)


def _diverged(name, step_size, where):
    return SamplingError(
        f"{name} produced a non-finite state ({where}): step_size={step_size:g} is too large "
        "for this posterior's curvature or gradient noise. Use a smaller step_size (see "
        "bayes_subsample.samplers.suggest_step_size) or control variates.")


#: a chain this many posterior standard deviations (of the Laplace approximation)
#: from the mode has run away: the discretised dynamics are unstable
RUNAWAY_SD = 1e3
#: beyond this many, the draws are most likely wrong (a ConvergenceWarning, once)
SUSPECT_SD = 20.0


class SGState(NamedTuple):
    theta: np.ndarray
    #: the coordinates the dynamics move (whitened: theta = theta_map + L position)
    position: np.ndarray
    momentum: Optional[np.ndarray] = None
    #: per-datum evaluations of the chain's steps so far (warmup included)
    n_evals: int = 0
    #: whether the chain has warned that it visits suspect points (it warns once)
    warned: bool = False


#: the fields of every SG kernel's Info: ``data_passes`` is the cumulative
#: passes of the chain's steps (warmup included)
SG_INFO_FIELDS = [("accept_prob", float), ("accepted", bool), ("n_evals", int),
                  ("data_passes", float)]
SGInfo = NamedTuple("SGInfo", SG_INFO_FIELDS)


class _SGKernelBase(Kernel):
    """The gradient estimator, the coordinates the dynamics move (whitened by the
    Laplace approximation when preconditioned; ``z = sqrt(n) theta`` on a model
    without a Hessian, unless ``scale_without_laplace`` is False), the runaway
    check and the check of the chain's spread at the end of warmup
    (:class:`SteinCheck`; not on a model without a Hessian). Subclasses
    implement ``_advance(rng, state, stein)`` (one iteration, the Stein sums
    added to ``stein`` unless None), ending in :meth:`_iteration` (or their own
    Info on :meth:`_moved`). A step
    changes nothing on the kernel: the evaluation count and the one-time warning
    are in the State, the scratch buffers are the step's own."""

    #: on a model without a Hessian the dynamics move ``z = sqrt(n) theta``
    #: (the metric ``n I``); False: ``theta`` itself (pSGLD, whose own
    #: preconditioner is its metric)
    scale_without_laplace = True

    def __init__(self, model, prepared, sampler, batch_size, n_steps, n_warmup):
        self.model = model
        self.name = type(sampler).__name__
        self.n = model.n_data
        self.p = model.n_params
        self.gradient = GradientEstimator(model.compiled, model.prior.precision, prepared.cv)
        # a model computing in float32 (a network on float32 rows) takes float32 normals
        # (_normal32: numpy's float32 fill made an MNIST pass of SGHMC 0.4-0.5 s slower,
        # 1.23-1.44 s against 0.83-0.90 s)
        self.gradient.noise32 = bool(model.float32_noise)
        self.laplace = prepared.laplace
        if self.laplace:
            self.shift = np.ascontiguousarray(prepared.theta_init, dtype=np.float64)
            self.chol = np.ascontiguousarray(prepared.init_chol, dtype=np.float64)
            self.precondition = prepared.precondition
        else:
            # no Laplace approximation: the per-datum scale, z = sqrt(n) theta, where
            # the posterior's curvature is the average per-datum curvature
            self.shift, self.chol = np.zeros(self.p), np.full(self.p, self.n ** -0.5)
            self.precondition = self.scale_without_laplace
            # the runaway check's unit: prior standard deviations
            self._prior_sd = 1.0 / np.sqrt(np.asarray(model.prior.precision, dtype=np.float64))
        if self.precondition:
            self.gradient.whiten(self.shift, self.chol)
        self.step_size = float(prepared.step_size)
        self.batch_size = int(batch_size)
        self.n_steps = int(n_steps)
        # a network's posterior is multimodal and no chain mixes across its modes: the
        # check (which needs every coordinate to mix) applies with a Laplace approximation
        checked = sampler.check_spread and self.laplace
        self.check = SteinCheck(self.p, n_warmup if checked else 0,
                                None if self.precondition else self.chol)
        self.rule = prepared.step_rule

    def step(self, rng, state):
        return self._advance(rng, state, None)

    def warmup_step(self, rng, state, iteration):
        return self._advance(rng, state, self.check.accumulator(iteration))

    def end_warmup(self, state):
        self.check.verdict(self.name, self.step_size)
        return state

    def _position(self, theta):
        theta = self.model.check_theta(theta).copy()
        if not self.precondition:
            return theta
        return solve_chol(self.chol, theta - self.shift)

    def _scratch(self):
        """A step's scratch buffers: the minibatch's indices and a gradient."""
        return np.empty(self.batch_size, dtype=np.int64), np.empty(self.p)

    def _moved(self, state, done, position, n_evals, **fields):
        """The state after an iteration that made ``n_evals`` per-datum
        evaluations and moved to ``position`` (other changed fields in
        ``fields``); raises if it stopped at a non-finite state after ``done`` of
        its ``n_steps`` steps."""
        if done < self.n_steps:
            raise _diverged(self.name, self.step_size, f"step {done + 1} of an iteration")
        theta, warned = self._theta(position, state.warned)
        return state._replace(theta=theta, position=position, warned=warned,
                              n_evals=state.n_evals + int(n_evals), **fields)

    def _theta(self, position, warned):
        """The draw of a position, and whether the chain has warned that it visits
        suspect points (it warns once, if not ``warned``); raises if the chain
        ran away."""
        if not self.laplace:
            theta = (scale_draws(self.chol, position) if self.precondition
                     else position.copy())
            dist = float(np.max(np.abs(theta) / self._prior_sd))
            if not dist < RUNAWAY_SD:
                raise SamplingError(
                    f"{self.name} ran away: a parameter is {dist:.3g} prior standard "
                    f"deviations from 0; step_size={self.step_size:g} makes the discretised "
                    "dynamics unstable for this posterior. Use a smaller step_size (the "
                    "default is set from the curvature at the starting point, "
                    "suggest_step_size).")
            return theta, warned
        if self.precondition:
            theta = np.empty(self.p)
            dist = whitened_draw(position, self.shift, self.chol, theta)
        else:
            z = solve_chol(self.chol, position - self.shift)
            theta = position.copy()
            dist = float(np.max(np.abs(z)))
        if not dist < RUNAWAY_SD:
            cure = ("The default step, from the curvature at draws of the Laplace "
                    "approximation, is too large where this chain went: the posterior is far "
                    "from Gaussian. Use 'nuts' or 'hmc' (exact), or a smaller step_size."
                    if self.rule is not None else
                    "Use the default step size (preconditioned, suggest_step_size), a smaller "
                    "step_size or control variates.")
            raise SamplingError(
                f"{self.name} ran away: the chain is {dist:.3g} posterior standard deviations "
                f"(of the Laplace approximation) from the mode; step_size={self.step_size:g} "
                f"makes the discretised dynamics unstable for this posterior. {cure}")
        if dist > SUSPECT_SD and not warned:
            warned = True
            warnings.warn(
                f"{self.name} visits points {dist:.3g} posterior standard deviations (of the "
                f"Laplace approximation) from the mode: step_size={self.step_size:g} is most "
                "likely too large for this posterior (the draws are then wrong although "
                "finite). Check the summaries with a smaller step_size.", ConvergenceWarning,
                stacklevel=2)
        return theta, warned

    def _iteration(self, state, done, position, **fields):
        """``(state, info)`` after an iteration of ``n_steps`` minibatch
        gradients (:meth:`_moved`)."""
        n_evals = self.n_steps * self.batch_size * self.gradient.evals_per_datum
        state = self._moved(state, done, position, n_evals, **fields)
        return state, SGInfo(1.0, True, int(n_evals), state.n_evals / self.n)

    def tuning(self):
        out = {"step_size": self.step_size, "batch_size": self.batch_size,
               "n_steps": self.n_steps,
               "precondition": self.precondition and self.laplace,
               "laplace": self.laplace, "spread_check": dict(self.check.summary)}
        if self.rule is not None and not self.laplace:
            out.update(curvature_at_start=self.rule.lam)
        elif self.rule is not None:
            out.update(curvature=self.rule.lam, curvature_at_mode=self.rule.lam_mode,
                       noise_factor=1.0 / self.rule.q)
        return out


# --------------------------------------------------------------------------------------
# SGLD
# --------------------------------------------------------------------------------------
class SGLDKernel(_SGKernelBase):
    def init(self, rng, theta0):
        z = self._position(theta0)
        theta, warned = self._theta(z, False)
        return SGState(theta, z, warned=warned)

    def _advance(self, rng, state, stein):
        z = state.position.copy()
        done = _fast.sgld_steps(self.gradient, z, self.step_size, self.batch_size,
                                self.n_steps, rng, *self._scratch(), stein)
        return self._iteration(state, done, z)


class SGLD(SGSampler):
    """Stochastic-gradient Langevin dynamics (Welling & Teh 2011; :ref:`algo-sgmcmc`).

    Each step draws ``batch_size`` indices ``u`` iid uniformly (with
    replacement) and moves ``theta <- theta + eps/2 g_hat(theta) + N(0, eps I)``
    (in the whitened coordinates ``z = L^-1 (theta - theta_map)`` of the
    Laplace approximation ``N(theta_map, L L^T)`` when ``precondition``: the
    posterior precision at the mode preconditions the dynamics) with the
    unbiased gradient estimate

    ``g_hat = grad log p(theta) + A + B (theta - theta*) + n/m sum_i (grad l_{u_i} - grad q_{u_i})``

    (second-order Taylor control variates ``q`` around ``theta*`` = the MAP,
    the same :class:`~bayes_subsample.control_variates.TaylorControlVariate`
    as HMC-ECS; first order for user models), or
    ``grad log p + n/m sum_i grad l_{u_i}`` with ``control_variates=False``.
    Warmup iterations run the same dynamics (burn-in); nothing is adapted.
    ``prepare`` finds the MAP (start of the chains and ``theta*``); its full
    passes are counted in ``Trace.n_evals_prepare``. On a model without a
    Hessian (``model.has_hessian`` False: :class:`~bayes_subsample.models.MLPModel`)
    there is no MAP: each chain starts from ``model.init_params`` drawn from its
    own generator, without control variates, in ``z = sqrt(n) theta``, with
    ``eps = 2 / lam`` (``lam`` the posterior's largest curvature at such a
    start) by default (:ref:`algo-sg-no-hessian`).
    {bias}
    Parameters
    ----------
    step_size : float, optional
        ``eps`` in the Welling-Teh convention above (the EWSG paper's
        ``theta <- theta - h grad V + sqrt(2h) xi`` is ``eps = 2h``), in the
        whitened coordinates when ``precondition``. ``None`` uses
        :func:`suggest_step_size` (``0.3 q / lambda_max``, ``lambda_max = 1``
        when preconditioned: 0.3 with control variates). On a model without a
        Hessian it is stated in ``z = sqrt(n) theta`` (``n`` times the step in
        ``theta``), and ``None`` is ``2 / lam_z``, ``lam_z`` the largest
        curvature at the start in ``z``.
    batch_size : int, optional
        Minibatch size ``m`` (iid indices, fresh at every step); ``None``: 32,
        or 100 on a model without a Hessian. With control variates the
        gradient noise is small near the mode, so a small minibatch suffices.
        At most the number of data (values up to 32 are taken on fewer rows
        too); larger values are refused before any work.
    control_variates : bool, optional
        Use Taylor control variates around the MAP; ``None``: True, or False
        on a model without a Hessian (which has no MAP; True is refused there).
    n_steps : int, default=10
        Langevin steps per retained iteration: the thinning. ``n_samples`` of
        the driver / estimators counts retained iterations, so a run keeps
        ``n_samples`` draws of ``n_steps * (n_warmup + n_samples)`` steps (a
        network's ``p`` in the tens of thousands makes keeping every step
        impossible: choose ``n_steps`` for the draws you can hold). At the
        default step size ten steps give draws with an inefficiency factor of
        about 2 on a near-Gaussian posterior, at ``10 m`` gradient evaluations
        a draw.
    precondition : bool, optional
        Run the dynamics in the whitened coordinates of the Laplace
        approximation (the identity metric there is the posterior precision at
        the mode in ``theta``). ``False``: the identity metric in ``theta``,
        whose stable step size is set by the stiffest direction. ``None``:
        True, or, on a model without a Hessian, the coordinates ``z = sqrt(n)
        theta`` (the metric ``n I``; :ref:`algo-sg-no-hessian`; True is
        refused there).
    {metric}
    {check}

    A chain that leaves the finite numbers, or runs more than ``1000`` posterior
    standard deviations (of the Laplace approximation) away from the mode,
    stops with a :class:`~bayes_subsample.exceptions.SamplingError` (a
    ``ValueError`` and ``FloatingPointError``) saying what to change; so does
    a default step size too small for the chains to mix (before any draw) and
    a chain that fails the check of ``check_spread``.

    Notes
    -----
    ``Info.n_evals`` = per-datum gradient evaluations of the iteration
    (``n_steps * batch_size``; twice that for a user model with control
    variates, which evaluates gradients at ``theta`` and ``theta*``);
    ``trace.stats["data_passes"]`` is the cumulative number of data passes of
    the chain's steps since its start (warmup included, ``prepare`` excluded).
    See :func:`~bayes_subsample.samplers.iterations_for_passes` for budgets in data passes.

    Examples
    --------
    {example: SGLD(batch_size=20)}
    """

    name = "sgld"
    _parameter_constraints = {
        **shared_constraints("step_size", "batch_size", "control_variates", "n_steps",
                             "precondition", "metric",
                             optional=("batch_size", "control_variates", "precondition")),
        "check_spread": ["boolean"],
    }

    def __init__(self, step_size=None, batch_size=None, control_variates=None, n_steps=10,
                 precondition=None, metric="auto", check_spread=True):
        store_params(self, locals())

    def prepare(self, model, rng):
        self._validate_params()
        return prepare_sg(self, model)

    def build(self, model, prepared, n_warmup):
        return SGLDKernel(model, prepared, self, prepared.batch_size, self.n_steps, n_warmup)


def __getattr__(name):
    # pickles (and imports) made before SGHMC moved to sghmc.py name it here
    if name == "SGHMC":
        from .sghmc import SGHMC
        return SGHMC
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
