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
from dataclasses import dataclass
from numbers import Integral, Real
from typing import NamedTuple, Optional

import numpy as np
from sklearn.utils._param_validation import StrOptions

from .._params import store_params
from ..control_variates import TaylorControlVariate
from . import _sgmcmc_fast as _fast
from ._base import BaseSampler, Kernel, LaplacePrepared, prepare_laplace, shared_constraints
from ._hamiltonian import Metric
from ._sgmcmc_fast import GradientEstimator
from .hmc import metric_from_precision

__all__ = ["SGLD", "SGHMC", "suggest_step_size", "iterations_for_passes"]

_BIAS_NOTE = """
    .. warning::
       This sampler has no Metropolis-Hastings correction (``exact = False``):
       its draws follow a discretised, noisy dynamics whose stationary
       distribution differs from the posterior. The bias grows with the step
       size (and with the minibatch gradient noise); it vanishes only as the
       step size goes to 0, at the price of slower mixing. Start from
       :func:`suggest_step_size` and check that halving ``step_size`` does not
       change the summaries you report.
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


_DEFAULT_FRICTION = {"sghmc": 1.0, "ewsg": 10.0}


def suggest_step_size(model, sampler="sgld", *, batch_size=None, control_variates=True,
                      friction=None, mass="identity", c=0.1, precision=None):
    """A conservative step size from the curvature of the posterior at its mode.

    With ``P`` the posterior precision at the MAP (``-Hessian`` of the log
    posterior; the Laplace approximation ``N(theta*, P^-1)``), ``M`` the mass
    matrix and ``lam = lambda_max(M^-1 P)`` (``lambda_max(P)`` for the identity
    mass, 1 for ``mass="laplace"``), the rule is

    * SGLD (``theta += eps/2 g + N(0, eps I)``): ``eps = c q / lam``;
    * SGHMC (friction ``C``) and EWSG (friction ``gamma``):
      ``h = c min(lam^-1/2, 1/C, q C / lam)``;

    where ``q = min(1, b / n)`` for uniform minibatches without control
    variates (always for EWSG) and ``q = 1`` with control variates.

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
    ``h Var(g) / (2 C)`` of the noisy gradient by ``c / 2``. ``c = 0.1`` targets
    a few percent of variance error at the Gaussian approximation; larger
    ``c`` mixes faster with more bias. Curvature far from the mode and the
    gradient noise of control variates are not accounted for.

    Parameters
    ----------
    model : Model
    sampler : {"sgld", "sghmc", "ewsg"} or a sampler object
        A sampler object supplies ``batch_size``, ``control_variates``,
        ``friction`` and ``mass`` when those are not given here.
    batch_size : int, optional
        Minibatch size (needed for the noise term; ignored when None).
    control_variates : bool, default=True
        Whether the gradients use Taylor control variates (SGLD/SGHMC).
    friction : float, optional
        ``C`` (SGHMC, default 1) or ``gamma`` (EWSG, default 10).
    mass : {"identity", "laplace"}, default="identity"
        SGHMC mass matrix.
    c : float, default=0.1
        The constant of the rule (in (0, 1]).
    precision : ndarray of shape (n_params, n_params), optional
        Posterior precision at the mode; computed (MAP + Laplace, a few full
        passes) when not given.

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
        mass = getattr(obj, "mass", mass)
    if sampler not in ("sgld", "sghmc", "ewsg"):
        raise ValueError(f"sampler must be 'sgld', 'sghmc' or 'ewsg', got {sampler!r}")
    if mass not in ("identity", "laplace"):
        raise ValueError(f"mass must be 'identity' or 'laplace', got {mass!r}")
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
        precision = laplace(model)["precision"]
    precision = np.asarray(precision, dtype=np.float64)
    if precision.shape != (model.n_params, model.n_params):
        raise ValueError(f"precision must have shape ({model.n_params}, {model.n_params}), "
                         f"got {precision.shape}")
    lam = 1.0 if (sampler == "sghmc" and mass == "laplace") else \
        float(np.max(np.linalg.eigvalsh(0.5 * (precision + precision.T))))
    if not (np.isfinite(lam) and lam > 0):
        raise ValueError("the posterior precision at the mode is not positive definite")
    uniform_noise = sampler == "ewsg" or not control_variates
    q = min(1.0, batch_size / model.n_data) if (uniform_noise and batch_size) else 1.0
    if sampler == "sgld":
        return c * q / lam
    return c * min(lam ** -0.5, 1.0 / friction, q * friction / lam)


# --------------------------------------------------------------------------------------
# shared machinery
# --------------------------------------------------------------------------------------
@dataclass
class SGPrepared(LaplacePrepared):
    """The Laplace preparation (MAP: theta* and chain starts), the control
    variates at the MAP (or None) and the step size."""

    cv: Optional[TaylorControlVariate] = None
    step_size: float = 0.0


def prepare_sg(sampler, model, *, control_variates, batch_size, friction=None,
               mass="identity"):
    """MAP / Laplace, control variates at the MAP (order 2 for GLMs, 1 otherwise;
    their cache built), and the step size."""
    lap = prepare_laplace(model)
    n_evals, cv = lap.n_evals, None
    if control_variates:
        cv = TaylorControlVariate(model, lap.theta_init, order=min(2, model.max_cv_order))
        cv.build_cache()
        n_evals += cv.n_evals
    if sampler.step_size is None:
        step = suggest_step_size(model, sampler.name, batch_size=batch_size,
                                 control_variates=control_variates, friction=friction,
                                 mass=mass, precision=lap.precision)
    else:
        step = float(sampler.step_size)
    return SGPrepared(**{**vars(lap), "n_evals": n_evals}, cv=cv, step_size=step)


def _diverged(name, step_size, where):
    return FloatingPointError(
        f"{name} produced a non-finite state ({where}): step_size={step_size:g} is too large "
        "for this posterior's curvature or gradient noise. Use a smaller step_size (see "
        "bayes_subsample.samplers.suggest_step_size) or control variates.")


class SGState(NamedTuple):
    theta: np.ndarray
    momentum: Optional[np.ndarray] = None


class SGInfo(NamedTuple):
    accept_prob: float
    accepted: bool
    n_evals: int
    data_passes: float        # cumulative passes of the chain's steps (warmup included)


class _SGKernelBase(Kernel):
    def __init__(self, model, prepared, batch_size, n_steps):
        self.model = model
        self.n = model.n_data
        self.p = model.n_params
        self.gradient = GradientEstimator(model.compiled, model.prior.precision, prepared.cv)
        self.step_size = float(prepared.step_size)
        self.batch_size = int(batch_size)
        self.n_steps = int(n_steps)
        self._idx = np.empty(self.batch_size, dtype=np.int64)
        self._g = np.empty(self.p)
        self._evals = 0

    def _info(self, n_evals):
        self._evals += n_evals
        return SGInfo(1.0, True, int(n_evals), self._evals / self.n)

    def tuning(self):
        return {"step_size": self.step_size, "batch_size": self.batch_size,
                "n_steps": self.n_steps, "data_passes": self._evals / self.n}


# --------------------------------------------------------------------------------------
# SGLD
# --------------------------------------------------------------------------------------
class SGLDKernel(_SGKernelBase):
    def init(self, rng, theta0):
        return SGState(self.model.check_theta(theta0).copy())

    def step(self, rng, state):
        theta = state.theta.copy()
        done = _fast.sgld_steps(self.gradient, theta, self.step_size, self.batch_size,
                                self.n_steps, rng, self._idx, self._g)
        if done < self.n_steps:
            raise _diverged("SGLD", self.step_size, f"step {done + 1} of an iteration")
        return SGState(theta), self._info(
            self.n_steps * self.batch_size * self.gradient.evals_per_datum)


class SGLD(BaseSampler):
    """Stochastic-gradient Langevin dynamics (Welling & Teh 2011; :ref:`algo-sgmcmc`).

    Each step draws ``batch_size`` indices ``u`` iid uniformly (with
    replacement) and moves ``theta <- theta + eps/2 g_hat(theta) + N(0, eps I)``
    with the unbiased gradient estimate

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
        ``theta <- theta - h grad V + sqrt(2h) xi`` is ``eps = 2h``). ``None``
        uses :func:`suggest_step_size` (``0.1 q / lambda_max``).
    batch_size : int, default=100
        Minibatch size ``m`` (iid indices, fresh at every step).
    control_variates : bool, default=True
        Use Taylor control variates around the MAP.
    n_steps : int, default=1
        Langevin steps per retained iteration (thinning); ``n_samples`` of the
        driver / estimators counts retained iterations.

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
    _parameter_constraints = shared_constraints("step_size", "batch_size", "control_variates",
                                                "n_steps")

    def __init__(self, step_size=None, batch_size=100, control_variates=True, n_steps=1):
        store_params(self, locals())

    def prepare(self, model, rng):
        self._validate_params()
        return prepare_sg(self, model, control_variates=self.control_variates,
                          batch_size=self.batch_size)

    def build(self, model, prepared, n_warmup):
        return SGLDKernel(model, prepared, self.batch_size, self.n_steps)


# --------------------------------------------------------------------------------------
# SGHMC
# --------------------------------------------------------------------------------------
class SGHMCKernel(_SGKernelBase):
    def __init__(self, model, prepared, sampler):
        super().__init__(model, prepared, sampler.batch_size, sampler.n_steps)
        self.friction = float(sampler.friction)
        self.refresh = bool(sampler.refresh_momentum)
        if sampler.mass == "laplace":
            self.metric, self.factors = metric_from_precision(prepared.precision)
        else:
            self.metric, self.factors = Metric(dim=self.p), None
        self._v, self._z, self._xi = np.empty(self.p), np.empty(self.p), np.empty(self.p)

    def init(self, rng, theta0):
        theta = self.model.check_theta(theta0).copy()
        z = rng.standard_normal(self.p)
        return SGState(theta, z if self.factors is None else self.factors.chol @ z)

    def step(self, rng, state):
        theta, mom = state.theta.copy(), state.momentum.copy()
        done = _fast.sghmc_steps(self.gradient, theta, mom, self.refresh, self.metric,
                                 self.step_size, self.friction, self.batch_size, self.n_steps,
                                 rng, self._idx, self._g, self._v, self._z, self._xi)
        if done < self.n_steps:
            raise _diverged("SGHMC", self.step_size, f"step {done + 1} of an iteration")
        return SGState(theta, mom), self._info(
            self.n_steps * self.batch_size * self.gradient.evals_per_datum)

    def tuning(self):
        out = super().tuning()
        out.update(friction=self.friction,
                   mass_matrix=np.eye(self.p) if self.factors is None
                   else self.factors.precision.copy())
        return out


class SGHMC(BaseSampler):
    """Stochastic-gradient Hamiltonian Monte Carlo (Chen et al. 2014) with friction
    ``C = friction * M`` (``= friction * I`` for the default identity mass) and
    ``B_hat = 0`` (:ref:`algo-sgmcmc`).

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
        ``eps``; ``None`` uses :func:`suggest_step_size`.
    batch_size : int, default=100
        Minibatch size ``m`` per gradient.
    n_steps : int, default=20
        Steps per iteration (``L``; the HMC-ECS paper's SGHMC uses 20 on HIGGS).
    friction : float, default=1.0
        The damping rate: ``C = friction * M``, so ``C M^-1 p = friction * p``
        and the injected noise is ``N(0, 2 friction eps M)``. With the identity
        mass this is ``C = friction * I`` as in the paper; with
        ``mass="laplace"`` it keeps the damping rate the same in whitened
        coordinates (a literal ``C = I`` next to ``M ~ n`` would barely damp,
        leaving the momentum-kept dynamics non-ergodic).
    control_variates : bool, default=True
        Taylor control variates around the MAP.
    mass : {"identity", "laplace"}, default="identity"
        Mass matrix ``M``: the identity or the posterior precision at the MAP.
    refresh_momentum : bool, default=True
        Redraw ``p ~ N(0, M)`` at the start of every iteration. Note that
        with this first-order (``theta`` first) integrator a refresh discards
        the last gradient and the ``O(eps)`` correlation between ``theta`` and
        ``p`` that the discretised dynamics builds up, which adds a bias of
        order ``1 / n_steps`` that does not vanish as ``eps -> 0`` at fixed
        ``n_steps`` (about 10% of the variance at ``n_steps=10`` on a Gaussian).
        ``False`` keeps the momentum across iterations (an uninterrupted
        underdamped Langevin discretisation whose bias is ``O(eps)``).

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
        **shared_constraints("step_size", "batch_size", "n_steps", "friction", "control_variates"),
        "mass": [StrOptions({"identity", "laplace"})],
        "refresh_momentum": ["boolean"],
    }

    def __init__(self, step_size=None, batch_size=100, n_steps=20, friction=1.0,
                 control_variates=True, mass="identity", refresh_momentum=True):
        store_params(self, locals())

    def prepare(self, model, rng):
        self._validate_params()
        return prepare_sg(self, model, control_variates=self.control_variates,
                          batch_size=self.batch_size, friction=self.friction, mass=self.mass)

    def build(self, model, prepared, n_warmup):
        return SGHMCKernel(model, prepared, self)


for _cls in (SGLD, SGHMC):
    _cls.__doc__ = (_cls.__doc__.replace("{bias}", _BIAS_NOTE)
                    .replace("    {example_data}", _EXAMPLE_DATA))
