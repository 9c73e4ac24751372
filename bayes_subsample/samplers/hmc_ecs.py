"""HMC with energy-conserving subsampling (Dang, Quiroz, Kohn, Tran, Villani 2019;
:ref:`algo-hmc-ecs`): the public sampler :class:`HMCECS` and its kernel, one
Gibbs sweep per iteration of

* the **block update** of the subsample at fixed theta (perturbed: one of G
  blocks, ``PerturbedUpdate``; signed: kappa of the lambda products,
  ``SignedUpdate``; in ``_ecs_updates``), a pseudo-marginal MH step;
* the **inner Hamiltonian kernel**: the compiled HMC transition on the
  subsampled potential, the same one as full-data HMC (``_inner``);

on the **proxy**: Taylor control variates around theta*
(:class:`TaylorControlVariate`), loaded into a subsampled potential (the
compiled ``ECSCore`` for GLMs, multinomial logistic regression and linear
regression with the noise sampled; the NumPy ``NumpyECSPotential`` of
``_ecs_numpy`` for other models).

The other parts each have their module: the preparation (theta*, the choice
between subsampling, a stratified warmup and full data; m and the exact
stratum) in ``_ecs_prepare``, the rules it applies and the report of its
choice in ``_ecs_tuning``, those particular to user models in ``_ecs_user``,
the warmup (adaptation, recentring, the stratified warmup and its exact
pilot) in ``_ecs_warmup``, the kernel of models whose rows live with Dask in
``_ecs_fetching``.
"""
from __future__ import annotations

import dataclasses
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from .._params import store_params
from ._base import BaseSampler, Kernel, refuse_without_hessian, shared_constraints
from ._ecs_numpy import NumpyECSPotential
from ._ecs_prepare import posterior_precision, prepare_ecs, strata_forced
from ._ecs_updates import ECS_INFO, ECSState, PerturbedUpdate, SignedUpdate
from ._ecs_warmup import MIN_STRATIFIED_WARMUP, ECSWarmup
from ._hmc_ecs_fast import SERVED, ECSCore
from ._inner import NUTSInner, make_inner
from .hmc import HMCKernel, metric_from_precision

__all__ = ["HMCECS"]


#: Info fields of an HMC-ECS iteration after those of its inner kernel: the subsample
#: update's acceptance probability, the estimator's variance, the rows, the data fraction


# ----------------------------------------------------------------------------------------
# the kernel
# ----------------------------------------------------------------------------------------
class HMCECSKernel(ECSWarmup, Kernel):
    """One chain of HMC-ECS: the subsample update then the inner Hamiltonian
    transition on the subsampled potential; its warmup is :class:`ECSWarmup`'s."""

    def __init__(self, model, sampler, prepared, n_warmup, stratify=False):
        self.model = model
        self.sampler = sampler
        self.n = model.n_data
        self.cv = prepared.cv
        self.hessian = prepared.hessian
        self.order = prepared.cv.order
        self.m, self.block_size = prepared.m, prepared.block_size
        self.exact_mask = prepared.exact_mask
        self.choice = prepared.choice
        # a stratified warmup's shared exact pilot, what it did (None: none ran)
        self.pilot_info = prepared.pilot if stratify else None
        self.n_products = prepared.n_products
        self.auto_m = prepared.auto_m
        self.metric, self.factors = metric_from_precision(
            posterior_precision(model, self.hessian), model.prior.precision)
        # a stratified warmup's first stage sets m and the block size
        self._init_warmup(prepared, n_warmup, stratify)
        signed = sampler.variant == "signed"
        self.update = (SignedUpdate(self.n, self.m, self.n_products, sampler.correlation)
                       if signed else PerturbedUpdate(self.n, self.m, sampler.n_blocks))
        if self.exact_mask is not None:
            self.update.set_sampled(np.flatnonzero(~self.exact_mask))
        self.inner = make_inner(sampler.inner, sampler, model.n_params)
        self.tuner = self.inner.tuner
        self.info = ECS_INFO[bool(signed), isinstance(self.inner, NUTSInner)]

    def _new_potential(self):
        prec = self.model.prior.precision
        if isinstance(self.model.compiled, SERVED):   # compiled potential
            mode = "signed" if self.update.signed else "perturbed"
            # sparse rows are read in place (their stored entries), not copied dense
            direct = not getattr(self.model.compiled, "dense", True)
            pot = ECSCore(self.model.compiled, self.order, prec, mode, direct)
            if self.update.signed:
                pot.set_signed(-float(self.n_products), float(self.n_products))
        else:
            pot = NumpyECSPotential(self.model, self.order, prec,
                                    "signed" if self.update.signed else "perturbed",
                                    rows=self.cv.taylor_rows)
            if self.update.signed:
                pot.set_signed(-float(self.n_products), float(self.n_products))
        if self.exact_mask is not None:
            pot.set_strata(np.flatnonzero(self.exact_mask), self.update.sampled)
            if isinstance(pot, ECSCore):
                # the exact stratum is a partial full pass: in threads where one
                # would pay (the chain's share of the cores; the sums do not
                # depend on it)
                pot.set_exact_threads(self.model.pass_threads(rows=pot.n_exact))
        cv = self.cv
        pot.set_reference(*cv.reference())
        return pot

    def init(self, rng, theta0):
        pot = self._new_potential()
        rows, block_size, products = self.update.fresh(rng)
        pot.set_rows(rows, block_size)
        U = pot.set_position(theta0)
        self.n_evals_setup += pot.m
        if not np.isfinite(U):
            raise self.model.overflow_error(
                f"on the subsample at a chain's initial point (max |theta| = "
                f"{np.max(np.abs(theta0)):.3g}; chains start at a draw from the Laplace "
                "approximation, which can reach where the likelihood overflows, e.g. Poisson's "
                "exp(eta): pass init= near the mode)", theta0)
        return ECSState(pot.position, U, pot, products)

    def step(self, rng, state):
        state, alpha_u, ev_u = self.update(rng, state)
        pot = state.potential
        accepted, alpha, dE, n_eval, div, extra = self.inner.transition(rng, pot, self.metric)
        m = pot.m
        n_evals = int(n_eval * (m + pot.n_exact) + ev_u)
        ecs = (alpha_u, pot.sigma2, m, n_evals / self.n)
        info = self.info(alpha, accepted, n_evals, div, dE, *extra, *ecs,
                         *((int(pot.sign),) if self.update.signed else ()))
        return ECSState(pot.position, pot.U, pot, state.batch_products), info

    def tuning(self):
        return {**self.inner.tuning(), "m": self.m, "block_size": self.block_size,
                "n_products": self.n_products if self.update.signed else None,
                "theta_star": self.cv.theta_star.copy(),
                "mass_matrix": self.factors.precision.copy(), "cv_order": self.order,
                "recentre_declined": self.n_recentre_declined,
                "n_exact": 0 if self.exact_mask is None else int(self.exact_mask.sum()),
                "strata_stages": list(self.stages), "strata_pilot": self.pilot_info,
                "choice": self.choice}


# ----------------------------------------------------------------------------------------
# the sampler object
# ----------------------------------------------------------------------------------------
class HMCECS(BaseSampler):
    """HMC with energy-conserving subsampling (perturbed or signed).

    Each iteration is a Gibbs sweep (:ref:`algo-hmc-ecs`): (1) the subsample ``u``
    is refreshed in part by a pseudo-marginal MH step at fixed theta (perturbed: one of
    ``n_blocks`` blocks; signed: ``kappa = max(1, round(lambda (1 - rho)))`` of
    the lambda products), (2) an HMC move of theta given ``u``, with the *same*
    subsampled estimator in the dynamics and the acceptance. The log-likelihood
    estimator is the difference estimator with Taylor control variates around
    ``theta*``:

    * ``variant="perturbed"`` targets ``exp(ell_hat - sigma_hat^2 / 2)``: the
      posterior is perturbed by ``O(1 / (n m^2))`` in total variation when
      ``theta*`` is the full-data mode.
    * ``variant="signed"`` uses the unbiased block-Poisson estimator; HMC runs
      on ``log |L_hat|`` and each draw carries a sign, so expectations are
      sign-corrected (``E[f] = sum s_j f_j / sum s_j``; estimators do this
      automatically). ``tau_hat`` (fraction of positive signs) should be near 1.

    Where the control variates at the mode would need more than 5% of the data
    per evaluation (the automatic ``m`` and exact rows above ``n / 20``), the
    perturbed variant runs a stratified warmup (``stratify``): theta* moves to the mean
    of the chain's draws and the rows with large residuals are summed exactly
    (an exact stratum), the subsample drawn from the rest. On small data
    (``n < 20 n_blocks``, or fewer than 200 warmup iterations), for the signed
    variant (``lambda`` batches of ``batch_size`` rows above ``n / 2``) and
    with ``stratify=False``, subsampling does not pay: the inner kernel then
    runs on the full data (exact), with the same tuning, and
    ``tuning["full_data"]`` is True.

    Tuning (automatic unless given): ``theta*`` is the posterior mode of
    a random 1% subset (likelihood scaled by ``n / n_sub``), refined by
    full-data Newton steps (the last pass gives the control variates' sums)
    until the Newton decrement, the squared distance to the mode in the
    posterior metric, is below ``max(0.01, 0.05 p)``: on tall data two full
    passes in all. Only when that refinement does not converge (10 steps) is
    ``theta*`` recentred every ``recentre_every`` warmup iterations at the mean
    of the recent draws with the full-data sums, the mass matrix (the posterior
    precision ``-B + prior precision``) and, for the perturbed variant, the
    subsample size ``m`` recomputed. ``diagnostics_["data_passes"]`` counts the
    full passes. Dual averaging of the step size to ``target_accept`` with
    ``n_leapfrog = round(trajectory_length / step_size)``. Every full-data pass
    is counted in the per-datum evaluations.

    Parameters
    ----------
    variant : {"perturbed", "signed"}, default="perturbed"
    subsample_size : int, optional
        Perturbed: the total subsample size ``m`` (a multiple of ``n_blocks``;
        default chosen so that ``Var[ell_hat] ~= target_variance``).
    batch_size : int, optional
        Signed: the batch size ``m`` of each block-Poisson factor (default 30).
    n_blocks : int, default=100
        Perturbed: number of blocks ``G`` of the subsample (one refreshed per
        iteration, correlation ``rho ~= 1 - 1/G``).
    n_products : int, optional
        Signed: number of products ``lambda`` (default: the smallest with
        ``Var[log|L_hat|] <= 1`` and ``tau >= 0.99``).
    correlation : float, default=0.99
        Signed: ``rho``; ``kappa = max(1, round(lambda (1 - rho)))`` products
        are regenerated per iteration.
    cv_order : {0, 1, 2}, optional
        Taylor order of the control variates (default 2 for GLMs, 1 for user
        models, which have no per-datum Hessians).
    inner : {"hmc", "nuts"}, default="hmc"
        The Hamiltonian move of theta given the subsample: HMC with a jittered
        trajectory length, or NUTS (no trajectory length to choose; a NUTS
        draw that is not the trajectory's last point costs one more subsample
        evaluation to move the residual banks to it).
    step_size : float, optional
        Leapfrog step (``None``: dual averaging during warmup).
    trajectory_length : float, default=2.0
        HMC inner kernel: ``step_size * n_leapfrog`` in the whitened metric (see
        :class:`HMC` for how the default was chosen).
    jitter : float in [0, 1), default=0.1
        HMC inner kernel: relative jitter of each transition's length.
    target_accept : float, default=0.8
    n_leapfrog : int, optional
        HMC inner kernel: fix ``L`` instead of ``round(trajectory_length / step_size)``.
    max_leapfrog : int, default=100
    max_tree_depth : int, default=10
        NUTS inner kernel: at most ``2**max_tree_depth`` leapfrog steps.
    theta_star : array-like, optional
        Fix the expansion point (disables recentring).
    recentre_every : int or None, default=200
        Recentre ``theta*`` every so many warmup iterations when its Newton
        refinement did not converge (None: never). At
        least 10: each recentring makes a full pass over the data and restarts
        the step-size adaptation, which needs several iterations to settle
        (restarted at every iteration, dual averaging only grows the step).
    target_variance : float, default=1.0
        Perturbed: target ``Var[ell_hat_m]`` for choosing ``m``.
    subset_fraction : float, default=0.01
        Fraction of the data (at least 1,000 rows) for the initial ``theta*``
        (its mode refined on a tenth of the data where it has fewer than 100
        rows per parameter, then on the full data).
    stratify : "auto" or bool, default="auto"
        Perturbed variant, compiled models in memory: a stratified warmup
        (:ref:`algo-hmc-ecs-strata`). Warmup runs in stages; after each,
        ``theta*`` moves to the mean of the stage's draws and the rows whose
        residuals are large at its draws (a full pass per point, three points)
        join an exact stratum that every evaluation sums exactly; the subsample
        is drawn from the other rows. The stratum the stages start from comes
        from a short exact (full-data) pilot chain from the mode, run once for
        all chains at preparation (``strata_pilot`` in the tuning).
        ``"auto"``: only where the control variates at the mode would need
        more than 5% of the rows per
        evaluation (instead of that subsample, or, beyond half the data, of
        falling back to full-data HMC), e.g. posteriors with
        directions that only the prior bounds (rare categories, quasi-separation),
        where the Laplace approximation reaches likelihood walls the posterior
        does not; or where a few rows carry the residuals at the mode (an exact
        stratum: rare indicators whose coefficients' posteriors are skewed away
        from the mode, where a chain around the mode is biased). ``True``:
        always; ``False``: never (nor an exact stratum at the mode). It needs
        at least 200 warmup iterations: with fewer, ``"auto"`` runs HMC-ECS with
        the subsample the mode's rule asks for (full-data HMC where that is more
        than half the rows) and ``True`` raises.
    metric : {"auto", "dense", "diag"}, default="auto"
        The mass matrix: the posterior precision at theta*, dense, or its
        diagonal (wide models, compiled GLMs: no ``p x p`` matrix anywhere --
        theta* by L-BFGS preconditioned with the precision's diagonal, one full
        pass for its diagonal, order-1 control variates by default, since order
        2 needs the ``p x p`` Hessian sum; ``O(p)`` work per leapfrog step).
        ``"auto"``: dense up to 2,000 parameters, diagonal beyond. The
        diagonal metric does not combine with the signed variant or a
        stratified warmup. See :ref:`scaling-wide`.

    Examples
    --------
    >>> from bayes_subsample import BayesianLogisticRegression
    >>> from bayes_subsample.samplers import HMCECS
    >>> clf = BayesianLogisticRegression(sampler=HMCECS(n_blocks=50))
    >>> signed = BayesianLogisticRegression(sampler="hmc_ecs_signed")
    """

    name = "hmc_ecs"
    exact = False
    subsampled_divergences = (
        "on a subsampled chain they are trajectories that ran away on the subsample's "
        "estimate of the log-likelihood, rejected: a subsampled row whose control variate "
        "is poor (along a direction few rows inform: a rare indicator, a separating "
        "direction) bends the estimated potential, and a smaller step size does not remove "
        "them (the HMC-ECS algorithm page, 'Divergent transitions'). A few per thousand "
        "cost little; to check the posterior against exact draws, compare with "
        "sampler='nuts' (full data).")
    #: samples models whose rows live with Dask (perturbed variant): its subsample
    #: rows do not depend on the chain, so they are fetched ahead in batches
    serves_distributed = True
    _parameter_constraints = {
        **shared_constraints("step_size", "trajectory_length", "jitter", "n_leapfrog",
                             "max_leapfrog", "max_tree_depth", "target_accept"),
        "inner": [StrOptions({"hmc", "nuts"})],
        "variant": [StrOptions({"perturbed", "signed"})],
        "subsample_size": [Interval(Integral, 1, None, closed="left"), None],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "n_blocks": [Interval(Integral, 1, None, closed="left")],
        "n_products": [Interval(Integral, 1, None, closed="left"), None],
        "correlation": [Interval(Real, 0, 1, closed="left")],
        "cv_order": [StrOptions({"auto"}), Interval(Integral, 0, 2, closed="both"), None],
        "theta_star": ["array-like", None],
        "recentre_every": [Interval(Integral, 10, None, closed="left"), None],
        "target_variance": [Interval(Real, 0, None, closed="neither")],
        "subset_fraction": [Interval(Real, 0, 1, closed="right")],
        "stratify": [StrOptions({"auto"}), "boolean"],
        **shared_constraints("metric"),
    }

    def __init__(self, variant="perturbed", subsample_size=None, batch_size=None, n_blocks=100,
                 n_products=None, correlation=0.99, cv_order=None, inner="hmc",
                 step_size=None, trajectory_length=2.0, jitter=0.1, target_accept=0.8,
                 n_leapfrog=None, max_leapfrog=100, max_tree_depth=10, theta_star=None,
                 recentre_every=200, target_variance=1.0, subset_fraction=0.01,
                 stratify="auto", metric="auto"):
        store_params(self, locals())

    @property
    def signed(self):
        """Draws carry a sign (the block-Poisson variant)."""
        return self.variant == "signed"

    def prepare(self, model, rng):
        self._validate_params()
        refuse_without_hessian(model, "needs the posterior's mode, its curvature and Taylor "
                               "control variates around it")
        return prepare_ecs(self, model, rng)

    def build(self, model, prepared, n_warmup):
        if prepared.stratify:
            if n_warmup >= MIN_STRATIFIED_WARMUP:
                return HMCECSKernel(model, self, prepared, n_warmup, stratify=True)
            if strata_forced(self.stratify):
                raise ValueError(f"stratify=True needs n_warmup >= {MIN_STRATIFIED_WARMUP} "
                                 f"(its warmup stages), got {n_warmup}")
            # too short a warmup for the stages: the mode's layout (full data where
            # its subsample is more than half the rows), reported as such
            fallback = dict(prepared.fallback_choice)
            fallback["reason"] += (f" (a stratified warmup was chosen, but needs "
                                   f"n_warmup >= {MIN_STRATIFIED_WARMUP}, got {n_warmup})")
            prepared = dataclasses.replace(prepared, choice=fallback, stratify=False,
                                           full_data=fallback["engine"] == "full data")
        if prepared.full_data:
            # the subsample would cost more than half the data per gradient: the
            # inner kernel on the full data (exact, and cheaper)
            return HMCKernel(model, self, self.inner,
                             posterior_precision(model, prepared.hessian), n_warmup,
                             extra_tuning={"full_data": True, "m": model.n_data,
                                           "choice": prepared.choice,
                                           "cv_order": prepared.cv.order,
                                           # the subsample the control variates would
                                           # have needed (perturbed; rule at theta*)
                                           "m_needed": (None if self.signed
                                                        else int(prepared.m))})
        if model.distributed:
            from ._ecs_fetching import FetchingHMCECSKernel
            return FetchingHMCECSKernel(model, self, prepared, n_warmup)
        return HMCECSKernel(model, self, prepared, n_warmup)
