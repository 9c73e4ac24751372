"""Stochastic-gradient Langevin (SGLD) and Hamiltonian (SGHMC) samplers with
optional Taylor control variates (:ref:`algo-sgmcmc`), the step-size
helper shared with EWSG, and budgets in data passes.

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

import math
import warnings
from dataclasses import dataclass
from numbers import Integral, Real
from typing import NamedTuple, Optional

import numpy as np
from sklearn.exceptions import ConvergenceWarning, EfficiencyWarning
from sklearn.utils._param_validation import StrOptions

from .._deprecation import DEPRECATED, deprecated_constraint
from .._params import store_params
from ..control_variates import TaylorControlVariate
from ..exceptions import SamplingError
from . import _sgmcmc_fast as _fast
from .._linalg import scale_draws, solve_chol
from ._base import (BaseSampler, Kernel, LaplacePrepared, cv_order, diagonal_metric,
                    prepare_laplace, shared_constraints)
from ._hamiltonian import Metric
from ._sg_check import SteinCheck
from ._sg_tuning import (_DEFAULT_FRICTION, StepRule, curvature_and_noise, max_curvature,
                         refuse_if_too_slow, step_from_curvature, step_rule)
from ._sgmcmc_fast import GradientEstimator

__all__ = ["SGLD", "SGHMC", "suggest_step_size", "iterations_for_passes"]

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

# the data set-up of the SGLD and SGHMC examples ({example_data} in their docstrings)
_EXAMPLE_DATA = """\
    >>> import numpy as np
    >>> from bayes_subsample import sample
    >>> from bayes_subsample.models import GaussianRegressionModel
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 2)); y = X @ [1.0, -1.0] + rng.normal(size=2000)"""


# --------------------------------------------------------------------------------------
# budgets and step sizes
# --------------------------------------------------------------------------------------
def iterations_for_passes(n_passes, n_data, batch_size, index_chain_length=0, n_steps=1):
    """Number of retained iterations that spend ``n_passes`` passes over the data.

    One iteration evaluates ``n_steps * (index_chain_length + 1) * batch_size``
    per-datum gradients (SGLD, SGHMC: ``index_chain_length=0``; EWSG:
    ``index_chain_length=M``), so ``K`` passes are
    ``ceil(K n / ((M + 1) b n_steps))`` iterations. Use it
    for ``n_warmup + n_samples`` when budgets are stated in data passes.

    Parameters
    ----------
    n_passes : float
        Budget in passes over the data (> 0).
    n_data : int
        Number of data terms ``n``.
    batch_size : int
        Minibatch size ``b`` (``m``).
    index_chain_length : int, default=0
        EWSG's index-chain length ``M`` (0 for SGLD/SGHMC).
    n_steps : int, default=1
        Dynamics steps per retained iteration (SGHMC's ``n_steps``).

    Returns
    -------
    int

    Examples
    --------
    >>> iterations_for_passes(30, n_data=20, batch_size=1, index_chain_length=1)
    300
    """
    if not (isinstance(n_passes, Real) and np.isfinite(n_passes) and n_passes > 0):
        raise ValueError(f"n_passes must be a finite number > 0, got {n_passes!r}")
    for name, v, lo in (("n_data", n_data, 1), ("batch_size", batch_size, 1),
                        ("index_chain_length", index_chain_length, 0), ("n_steps", n_steps, 1)):
        if not isinstance(v, Integral) or isinstance(v, bool) or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    per_iter = (index_chain_length + 1) * min(batch_size, n_data) * n_steps
    return max(1, int(math.ceil(n_passes * n_data / per_iter - 1e-9)))


def suggest_step_size(model, sampler="sgld", *, batch_size=None, control_variates=True,
                      friction=None, precondition=False, c=0.3, precision=None, mass=None,
                      metric="auto"):
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

    Parameters
    ----------
    model : Model
    sampler : {"sgld", "sghmc", "ewsg"} or a sampler object
        A sampler object supplies ``batch_size``, ``control_variates``,
        ``friction`` and ``precondition`` when those are not given here.
    batch_size : int, optional
        Minibatch size (needed for the noise term; ignored when None).
    control_variates : bool, default=True
        Whether the gradients use Taylor control variates (SGLD/SGHMC).
    friction : float, optional
        ``C`` (SGHMC, default 1) or ``gamma`` (EWSG, default 2).
    precondition : bool, default=False
        The sampler runs in the whitened coordinates of the Laplace approximation
        (the samplers' default; a sampler object passed as ``sampler`` supplies it).
    c : float, default=0.3
        The constant of the rule (in (0, 1]).
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
        if batch_size is None:
            batch_size = getattr(obj, "batch_size", None)
        control_variates = getattr(obj, "control_variates", control_variates)
        if friction is None:
            friction = getattr(obj, "friction", None)
        precondition = getattr(obj, "precondition", precondition)
        metric = getattr(obj, "metric", metric)
    if sampler not in ("sgld", "sghmc", "ewsg"):
        raise ValueError(f"sampler must be 'sgld', 'sghmc' or 'ewsg', got {sampler!r}")
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
    variates at the MAP (or None) and the step size."""

    cv: Optional[TaylorControlVariate] = None
    step_size: float = 0.0
    #: the dynamics run in the whitened coordinates of the Laplace approximation
    precondition: bool = True
    #: the curvature and noise behind the default step (None: ``step_size`` given)
    step_rule: Optional[StepRule] = None


#: a ``batch_size`` larger than the data is refused, unless it is at most this
#: (the default, 32, on fewer than 32 rows: the minibatch draws rows with
#: replacement, so it stays valid and cheap)
SMALL_BATCH = 32


def prepare_sg(sampler, model, *, control_variates, batch_size, friction=None,
               precondition=None):
    """MAP / Laplace, control variates at the MAP (order 2 for GLMs, 1 otherwise;
    their cache built), and the step size: the default from the curvature and
    gradient noise at the mode and at draws of the Laplace approximation
    (:func:`~._sg_tuning.step_rule`), refused when it is too small for the
    chains to mix (:func:`~._sg_tuning.refuse_if_too_slow`, a
    :class:`~bayes_subsample.exceptions.SamplingError` before any draw). With
    a diagonal metric (wide models) the Laplace approximation is diagonal and
    the control variates are of order 1 (order 2 needs the ``p x p`` Hessian
    sum): ``O(p)`` work a step."""
    asked = sampler.batch_size
    if asked > max(model.n_data, SMALL_BATCH):
        # refused before any work (a minibatch buffer of batch_size rows is allocated)
        raise ValueError(f"{type(sampler).__name__}: batch_size={asked} is larger than the "
                         f"data (n={model.n_data}); use batch_size <= {model.n_data}")
    precondition = sampler.precondition if precondition is None else precondition
    diagonal = diagonal_metric(sampler.metric, model)
    lap = prepare_laplace(model, diagonal=diagonal)
    n_evals, cv = lap.n_evals, None
    if control_variates:
        cv = TaylorControlVariate(model, lap.theta_init, order=cv_order(model, diagonal))
        cv.build_cache()
        n_evals += cv.n_evals
    rule = None
    if sampler.step_size is None:
        rule = step_rule(model, lap.theta_init, lap.init_chol, lap.precision, diagonal,
                         precondition, cv, batch_size)
        n_evals += rule.n_evals
        q = rule.q
        step = step_from_curvature(sampler.name, rule.lam, q, friction=friction)
        refuse_if_too_slow(sampler, model, rule, batch_size, step, control_variates)
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
    return SGPrepared(**{**vars(lap), "n_evals": n_evals}, cv=cv, step_size=step,
                      precondition=bool(precondition), step_rule=rule)


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


class SGInfo(NamedTuple):
    accept_prob: float
    accepted: bool
    n_evals: int
    data_passes: float        # cumulative passes of the chain's steps (warmup included)


class _SGKernelBase(Kernel):
    """The gradient estimator, the coordinates the dynamics move (whitened by the
    Laplace approximation when preconditioned), the runaway check and the
    check of the chain's spread at the end of warmup (:class:`SteinCheck`).
    Subclasses implement ``_advance(rng, state, stein)`` (one iteration, the
    Stein sums added to ``stein`` unless None)."""

    def __init__(self, model, prepared, sampler, batch_size, n_steps, n_warmup):
        self.model = model
        self.name = type(sampler).__name__
        self.n = model.n_data
        self.p = model.n_params
        self.gradient = GradientEstimator(model.compiled, model.prior.precision, prepared.cv)
        self.shift, self.chol = prepared.theta_init, prepared.init_chol
        self.precondition = prepared.precondition
        if self.precondition:
            self.gradient.whiten(self.shift, self.chol)
        self.step_size = float(prepared.step_size)
        self.batch_size = int(batch_size)
        self.n_steps = int(n_steps)
        self._idx = np.empty(self.batch_size, dtype=np.int64)
        self._g = np.empty(self.p)
        self._evals = 0
        self._warned = False
        self.check = SteinCheck(self.p, n_warmup if sampler.check_spread else 0,
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

    def _theta(self, position):
        """The draw of a position; raises if the chain ran away."""
        if self.precondition:
            z, theta = position, self.shift + scale_draws(self.chol, position)
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
        if dist > SUSPECT_SD and not self._warned:
            self._warned = True
            warnings.warn(
                f"{self.name} visits points {dist:.3g} posterior standard deviations (of the "
                f"Laplace approximation) from the mode: step_size={self.step_size:g} is most "
                "likely too large for this posterior (the draws are then wrong although "
                "finite). Check the summaries with a smaller step_size.", ConvergenceWarning,
                stacklevel=2)
        return theta

    def _info(self, n_evals):
        self._evals += n_evals
        return SGInfo(1.0, True, int(n_evals), self._evals / self.n)

    def tuning(self):
        out = {"step_size": self.step_size, "batch_size": self.batch_size,
               "n_steps": self.n_steps, "data_passes": self._evals / self.n,
               "precondition": self.precondition, "spread_check": dict(self.check.summary)}
        if self.rule is not None:
            out.update(curvature=self.rule.lam, curvature_at_mode=self.rule.lam_mode,
                       noise_factor=1.0 / self.rule.q)
        return out


# --------------------------------------------------------------------------------------
# SGLD
# --------------------------------------------------------------------------------------
class SGLDKernel(_SGKernelBase):
    def init(self, rng, theta0):
        z = self._position(theta0)
        return SGState(self._theta(z), z)

    def _advance(self, rng, state, stein):
        z = state.position.copy()
        done = _fast.sgld_steps(self.gradient, z, self.step_size, self.batch_size,
                                self.n_steps, rng, self._idx, self._g, stein)
        if done < self.n_steps:
            raise _diverged("SGLD", self.step_size, f"step {done + 1} of an iteration")
        return SGState(self._theta(z), z), self._info(
            self.n_steps * self.batch_size * self.gradient.evals_per_datum)


class SGLD(BaseSampler):
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
    passes are counted in ``Trace.n_evals_prepare``.
    {bias}
    Parameters
    ----------
    step_size : float, optional
        ``eps`` in the Welling-Teh convention above (the EWSG paper's
        ``theta <- theta - h grad V + sqrt(2h) xi`` is ``eps = 2h``), in the
        whitened coordinates when ``precondition``. ``None`` uses
        :func:`suggest_step_size` (``0.3 q / lambda_max``, ``lambda_max = 1``
        when preconditioned: 0.3 with control variates).
    batch_size : int, default=32
        Minibatch size ``m`` (iid indices, fresh at every step). With control
        variates the gradient noise is small near the mode, so a small
        minibatch suffices. At most the number of data (values up to 32 are
        taken on fewer rows too); larger values are refused before any work.
    control_variates : bool, default=True
        Use Taylor control variates around the MAP.
    n_steps : int, default=10
        Langevin steps per retained iteration (thinning); ``n_samples`` of the
        driver / estimators counts retained iterations. At the default step
        size ten steps give draws with an inefficiency factor of about 2 on a
        near-Gaussian posterior, at ``10 m`` gradient evaluations a draw.
    precondition : bool, default=True
        Run the dynamics in the whitened coordinates of the Laplace
        approximation (the identity metric there is the posterior precision at
        the mode in ``theta``). ``False``: the identity metric in ``theta``,
        whose stable step size is set by the stiffest direction.
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
    See :func:`iterations_for_passes` for budgets in data passes.

    Examples
    --------
    {example_data}
    >>> trace = sample(GaussianRegressionModel(X, y), SGLD(batch_size=20), n_samples=200,
    ...                n_warmup=100, n_chains=1, random_state=0, check_convergence=False)
    >>> trace.draws.shape
    (1, 200, 3)
    """

    name = "sgld"
    exact = False
    _parameter_constraints = {
        **shared_constraints("step_size", "batch_size", "control_variates", "n_steps",
                             "precondition", "metric"),
        "check_spread": ["boolean"],
    }

    def __init__(self, step_size=None, batch_size=32, control_variates=True, n_steps=10,
                 precondition=True, metric="auto", check_spread=True):
        store_params(self, locals())

    def prepare(self, model, rng):
        self._validate_params()
        return prepare_sg(self, model, control_variates=self.control_variates,
                          batch_size=self.batch_size)

    def build(self, model, prepared, n_warmup):
        return SGLDKernel(model, prepared, self, self.batch_size, self.n_steps, n_warmup)


# --------------------------------------------------------------------------------------
# SGHMC
# --------------------------------------------------------------------------------------
class SGHMCKernel(_SGKernelBase):
    def __init__(self, model, prepared, sampler, n_warmup):
        super().__init__(model, prepared, sampler, sampler.batch_size, sampler.n_steps,
                         n_warmup)
        self.friction = float(sampler.friction)
        self.refresh = bool(sampler.refresh_momentum)
        # the identity mass in the coordinates the dynamics move
        self.metric = Metric(dim=self.p)
        self._v, self._z, self._xi = np.empty(self.p), np.empty(self.p), np.empty(self.p)

    def init(self, rng, theta0):
        z = self._position(theta0)
        return SGState(self._theta(z), z, rng.standard_normal(self.p))

    def _advance(self, rng, state, stein):
        z, mom = state.position.copy(), state.momentum.copy()
        done = _fast.sghmc_steps(self.gradient, z, mom, self.refresh, self.metric,
                                 self.step_size, self.friction, self.batch_size, self.n_steps,
                                 rng, self._idx, self._g, self._v, self._z, self._xi, stein)
        if done < self.n_steps:
            raise _diverged("SGHMC", self.step_size, f"step {done + 1} of an iteration")
        return SGState(self._theta(z), z, mom), self._info(
            self.n_steps * self.batch_size * self.gradient.evals_per_datum)

    def tuning(self):
        return {**super().tuning(), "friction": self.friction}


class SGHMC(BaseSampler):
    """Stochastic-gradient Hamiltonian Monte Carlo (Chen et al. 2014) with friction
    ``C = friction * M`` and ``B_hat = 0`` (:ref:`algo-sgmcmc`). The mass ``M`` is
    the posterior precision at the mode when ``precondition`` (the dynamics run
    with the identity mass in the whitened coordinates of the Laplace
    approximation), the identity otherwise.

    Each iteration refreshes ``p ~ N(0, M)`` (``refresh_momentum=True``, as
    assumed for the HMC-ECS comparisons) and runs ``n_steps`` steps

    ``theta_l = theta_{l-1} + eps M^-1 p_{l-1}``,
    ``p_l = p_{l-1} + eps g_hat(theta_l) - eps C M^-1 p_{l-1} + N(0, 2 C eps)``

    with a fresh minibatch of ``batch_size`` iid indices per gradient and the
    same gradient estimate ``g_hat`` as :class:`SGLD` (control variates or
    plain). Warmup iterations run the same dynamics; nothing is adapted.
    {bias}
    Parameters
    ----------
    step_size : float, optional
        ``eps`` (in the whitened coordinates when ``precondition``); ``None`` uses
        :func:`suggest_step_size`.
    batch_size : int, default=32
        Minibatch size ``m`` per gradient; at most the number of data (values
        up to 32 are taken on fewer rows too).
    n_steps : int, default=10
        Steps per iteration (``L``; the HMC-ECS paper's SGHMC uses 20 on
        HIGGS). At the default step size (``0.3`` in whitened units with
        control variates) ten steps span a trajectory of about 3, which gives
        nearly independent draws on a near-Gaussian posterior.
    friction : float, default=1.0
        The damping rate: ``C = friction * M``, so ``C M^-1 p = friction * p``
        and the injected noise is ``N(0, 2 friction eps M)``. With the identity
        mass this is ``C = friction * I`` as in the paper; preconditioned, it
        keeps the damping rate the same in whitened coordinates (a literal
        ``C = I`` next to ``M ~ n`` would barely damp, leaving the momentum-kept
        dynamics non-ergodic).
    control_variates : bool, default=True
        Taylor control variates around the MAP.
    precondition : bool, default=True
        Mass matrix ``M``: the posterior precision at the MAP (True) or the
        identity (False). Replaces ``mass="laplace"`` / ``mass="identity"``
        (``mass`` is deprecated).
    {metric}
    refresh_momentum : bool, default=True
        Redraw ``p ~ N(0, M)`` at the start of every iteration. Note that
        with this first-order (``theta`` first) integrator a refresh discards
        the last gradient and the ``O(eps)`` correlation between ``theta`` and
        ``p`` that the discretised dynamics builds up, which adds a bias of
        order ``1 / n_steps`` that does not vanish as ``eps -> 0`` at fixed
        ``n_steps`` (about 10% of the variance at ``n_steps=10`` on a Gaussian).
        ``False`` keeps the momentum across iterations (an uninterrupted
        underdamped Langevin discretisation whose bias is ``O(eps)``).
    {check}

    Notes
    -----
    ``Info.n_evals = n_steps * batch_size`` per-datum gradients (twice that for
    a user model with control variates); ``trace.stats["data_passes"]`` is
    cumulative as for :class:`SGLD`.

    Examples
    --------
    {example_data}
    >>> trace = sample(GaussianRegressionModel(X, y), SGHMC(batch_size=20, n_steps=10),
    ...                n_samples=100, n_warmup=50, n_chains=1, random_state=0,
    ...                check_convergence=False)
    >>> trace.draws.shape
    (1, 100, 3)
    """

    name = "sghmc"
    exact = False
    _parameter_constraints = {
        **shared_constraints("step_size", "batch_size", "n_steps", "friction", "control_variates",
                             "precondition", "metric"),
        "refresh_momentum": ["boolean"],
        "mass": deprecated_constraint(StrOptions({"identity", "laplace"})),
        "check_spread": ["boolean"],
    }

    def __init__(self, step_size=None, batch_size=32, n_steps=10, friction=1.0,
                 control_variates=True, precondition=True, refresh_momentum=True,
                 mass=DEPRECATED, metric="auto", check_spread=True):
        store_params(self, locals())

    def prepare(self, model, rng):
        self._validate_params()
        precondition = self.precondition
        if self.mass != DEPRECATED:
            warnings.warn("SGHMC(mass=...) is deprecated and will be removed in 0.3; use "
                          "SGHMC(precondition=True) for mass='laplace' and "
                          "precondition=False for mass='identity'", FutureWarning,
                          stacklevel=2)
            precondition = self.mass == "laplace"
        return prepare_sg(self, model, control_variates=self.control_variates,
                          batch_size=self.batch_size, friction=self.friction,
                          precondition=precondition)

    def build(self, model, prepared, n_warmup):
        return SGHMCKernel(model, prepared, self, n_warmup)


for _cls in (SGLD, SGHMC):
    _cls.__doc__ = (_cls.__doc__.replace("{bias}", _BIAS_NOTE)
                    .replace("    {metric}\n", _METRIC_PARAM)
                    .replace("    {check}\n", _CHECK_PARAM)
                    .replace("    {example_data}", _EXAMPLE_DATA))
