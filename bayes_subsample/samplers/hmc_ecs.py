"""HMC with energy-conserving subsampling (Dang, Quiroz, Kohn, Tran, Villani 2019;
:ref:`algo-hmc-ecs`), composed of three parts:

* the **proxy**: Taylor control variates around theta* (:class:`TaylorControlVariate`),
  loaded into a subsampled potential (the compiled ``ECSCore`` for GLMs,
  multinomial logistic regression and linear regression with the noise
  sampled, the NumPy ``NumpyECSPotential`` for other models);
* the **block update** of the subsample at fixed theta (perturbed: one of G
  blocks, ``PerturbedUpdate``; signed: kappa of the lambda products,
  ``SignedUpdate``; in ``_ecs_updates``), a pseudo-marginal MH step;
* the **inner Hamiltonian kernel**: the compiled HMC transition on that
  potential, the same one as full-data HMC.

Tuning (theta*, m, lambda) and the report of the preparation's choice
(``choice``) live in ``_ecs_tuning``, the rules particular to user models in
``_ecs_user``, the kernel of models whose rows live with Dask in
``_ecs_fetching``.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from .._optimize import diagonal_mode
from .._params import store_params
from ..control_variates import TaylorControlVariate, TaylorRows, row_table_fits
from ..models._base import python_terms
from ._adapt import VarianceWindows, diagonal_windows, rescaled_precision
from ._base import (BaseSampler, Kernel, Prepared, cv_order, diagonal_metric,
                    refuse_without_hessian, shared_constraints)
from ._ecs_numpy import NumpyECSPotential
from ._ecs_updates import ECSState, PerturbedUpdate, SignedUpdate
from ._ecs_user import choose_user_order, subsample_pays, user_model_order
from ._ecs_tuning import (STRATA_GAIN, astray_strata, choice, choose_n_products,
                          choose_strata, choose_subsample_size, heavy_rows,
                          initial_theta_star, laplace_strata, pilot_strata_gain,
                          residual_scan, refine_theta_star, residual_variances,
                          typical_thetas)
from ._hmc_ecs_fast import SERVED, ECSCore
from ._inner import info_type, make_inner
from ._hamiltonian import FullPotential
from .hmc import HMCKernel, metric_from_precision

__all__ = ["HMCECS"]


@dataclass
class ECSPrepared(Prepared):
    """Shared preparation of HMC-ECS: the proxy at theta* and the subsample layout."""

    #: a stratified warmup adapts an exact stratum and theta* to the chain's draws
    #: (where the control variates at the mode would need more than 5% of the
    #: data, instead of that subsample or, beyond half the data, full-data HMC;
    #: ``build`` falls back when the warmup is too short for its stages)
    stratify: bool = False
    #: stratified warmup: the subsample size of its first stage
    m_stage: int = 0

    cv: TaylorControlVariate = None
    #: full-data Hessian sum at theta* (the mass matrix is ``-hessian + prior precision``);
    #: its diagonal, a (p,) vector, with a diagonal metric
    hessian: np.ndarray = None
    m: int = 0                       # perturbed: total rows; signed: rows per batch
    block_size: int = 0
    n_products: int = 1              # signed: lambda
    auto_m: bool = False             # m chosen here (recalibrated when theta* moves)
    auto_theta_star: bool = False    # theta* found here
    #: the Newton refinement of theta* converged (no recentring during warmup)
    theta_star_converged: bool = False
    full_data: bool = False          # subsampling does not pay: full-data HMC/NUTS
    #: rows summed exactly at every evaluation (bool mask (n,)), chosen at
    #: preparation from every row's residuals at draws of the Laplace
    #: approximation; None: every row is subsampled
    exact_mask: np.ndarray = None
    #: what the preparation chose (subsampled, stratified warmup or full data),
    #: the rows per evaluation and the reason in words (``choice``)
    choice: dict = None


#: Info fields of an HMC-ECS iteration after those of its inner kernel: the subsample
#: update's acceptance probability, the estimator's variance, the rows, the data fraction
ECS_FIELDS = (("alpha_u", float), ("sigma2", float), ("subsample_rows", int),
              ("data_fraction", float))


# ----------------------------------------------------------------------------------------
# the kernel
# ----------------------------------------------------------------------------------------
def _spread(draws, k):
    """``k`` of ``draws`` evenly spread over them (first and last included)."""
    return draws[np.linspace(0, len(draws) - 1, k).astype(int)]


def _posterior_precision(model, hessian):
    """``-hessian + prior precision``: a matrix, or its diagonal for a (p,)
    ``hessian`` (the Hessian sum's diagonal: the diagonal metric)."""
    prec = model.prior.precision
    if np.ndim(hessian) == 1:
        return -np.asarray(hessian) + prec
    return -np.asarray(hessian) + np.diag(prec)


#: the least warmup a stratified HMC-ECS run adapts with (shorter: full-data HMC)
MIN_STRATIFIED_WARMUP = 200
#: ``stratify="auto"`` runs a stratified warmup where the control variates at the
#: mode would need more than this share of the rows per evaluation: there the
#: chain's own draws usually choose a much cheaper exact stratum (covtype, 7
#: classes, 464,809 rows, default priors: the mode's rule asks 61,453 rows per
#: evaluation, 13%; the stratified warmup settles on 1,500 + 10,384 exact rows,
#: one chain in 174 s against 508 s)
STRATIFY_FRACTION = 0.05
#: points of each stage whose residuals (a full pass each) choose the stratum
STRATA_POINTS = 3
#: transitions of the exact pilot chain (full-data potential) run once, at the
#: first stage of the stratified warmup that samples the posterior: its draws go
#: where the posterior goes, not where the subsampled chain was confined
PILOT_ITERATIONS = 30
#: the pilot's draws (of its second half) whose residuals join the stage's
PILOT_POINTS = 6


class HMCECSKernel(Kernel):
    def __init__(self, model, sampler, prepared, n_warmup, stratify=False):
        self.model = model
        self.sampler = sampler
        self.n = model.n_data
        self.cv = prepared.cv
        self.hessian = prepared.hessian
        self.order = prepared.cv.order
        self.m, self.block_size = prepared.m, prepared.block_size
        # stratified warmup (:ref:`algo-hmc-ecs-strata`): stages of the chain, after
        # each theta* moves to the mean of its draws and rows whose residuals there
        # are large join the exact stratum
        self.stratify = stratify
        self.exact_mask = prepared.exact_mask
        self.choice = prepared.choice
        self.stages = []
        if stratify:
            self.m = prepared.m_stage
            self.block_size = self.m // sampler.n_blocks
            self.stage_len = max(25, min(100, n_warmup // 6))
            self.last_stage = n_warmup - max(100, n_warmup // 4)
            # the best exact log posterior at a centre so far (a stage whose mean
            # falls far below it was not sampling the posterior)
            self.lp_best = self.cv.L_star + model.prior.log_prob(self.cv.theta_star)
            self.piloted = False     # the exact pilot chain has run
        self.n_products = prepared.n_products
        self.auto_m = prepared.auto_m
        self.n_warmup = n_warmup
        signed = sampler.variant == "signed"
        self.update = (SignedUpdate(self.n, self.m, self.n_products, sampler.correlation)
                       if signed else PerturbedUpdate(self.n, self.m, sampler.n_blocks))
        if self.exact_mask is not None:
            self.update.set_sampled(np.flatnonzero(~self.exact_mask))
        self.inner = make_inner(sampler.inner, sampler, model.n_params)
        self.tuner = self.inner.tuner
        extra = ECS_FIELDS + ((("sign", int),) if signed else ())
        self.info = info_type("SignedECSInfo" if signed else "ECSInfo", type(self.inner),
                              extra)
        # recentring costs a full pass and restarts the step-size adaptation: only
        # while theta* is not known to be near the mode (the Newton refinement
        # did not converge); the mode is a better centre than a mean of early draws
        # (not with an exact stratum: it was chosen from the residuals around theta*)
        self.recentre = (sampler.recentre_every is not None and prepared.auto_theta_star
                         and not prepared.theta_star_converged and not stratify
                         and self.exact_mask is None)
        self._window = []
        self.n_recentre_declined = 0
        self.metric, self.factors = metric_from_precision(self._mass(self.hessian),
                                                          model.prior.precision)
        # the metric adapts to the draws' marginal variances (once adapted, a
        # recentring or a new stratum keeps it): the diagonal one as full-data HMC's
        # does (the Hessian's diagonal at theta* is the conditional precision), the
        # dense one over the second quarter of warmup, its variances rescaled
        # where the draws' differ (``rescaled_precision``: the curvature at the
        # mode is too narrow along directions few rows inform)
        diagonal = np.ndim(self.hessian) == 1
        self.variance_windows = (
            None if n_warmup < 100 else VarianceWindows(
                diagonal_windows(n_warmup) if diagonal else [(n_warmup // 4, n_warmup // 2)],
                covariance=not diagonal))
        self._mass_adapted = False

    def _mass(self, hessian):
        """The mass matrix: the posterior precision ``-hessian + prior precision``
        (its diagonal for a (p,) ``hessian``: the diagonal metric)."""
        return _posterior_precision(self.model, hessian)

    @property
    def _hessian_kind(self):
        """What a full pass computes of the Hessian: all of it, or its diagonal."""
        return "diag" if np.ndim(self.hessian) == 1 else True

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

    def warmup_step(self, rng, state, iteration):
        state, info = self.step(rng, state)
        self.tuner.update(info.accept_prob)
        window = (None if self.variance_windows is None
                  else self.variance_windows.update(iteration, state.theta))
        if window is not None:
            k, _, var = window
            prec = (VarianceWindows.precision(k, var, self.factors.cov)
                    if np.ndim(self.hessian) == 1 else
                    rescaled_precision(self.factors, var, k, cov=self.variance_windows.cov))
            if prec is not None:
                self.metric, self.factors = metric_from_precision(prec,
                                                                  self.model.prior.precision)
                self._mass_adapted = True
                self.tuner.restart()
        if self.stratify:
            self._window.append(state.theta)
            if (iteration + 1) % self.stage_len == 0 and iteration + 1 <= self.last_stage:
                state = self._restratify(rng, state)
                self._window = []
        elif self.recentre:
            self._window.append(state.theta)
            every = int(self.sampler.recentre_every)
            last_ok = self.n_warmup - min(100, self.n_warmup // 4)
            if (iteration + 1) % every == 0 and iteration + 1 <= last_ok:
                state = self._recentre(rng, state, np.mean(self._window, axis=0))
                self._window = []
        return state, info

    def _reference_at(self, theta_star):
        """The control variates and the metric at a new ``theta_star`` from one
        full pass (counted); None when the sums there are not finite."""
        model = self.model
        ll, g, h = model.full_pass(theta_star, gradient=True, hessian=self._hessian_kind)
        self.n_evals_setup += self.n
        if not (np.isfinite(ll) and np.all(np.isfinite(g)) and np.all(np.isfinite(h))):
            return None
        cv = TaylorControlVariate(model, theta_star, self.order, sums=(ll, g, h))
        return (cv, *metric_from_precision(self._mass(h), model.prior.precision))

    def _recentre(self, rng, state, theta_star):
        """New theta*: full-data sums recomputed (one pass, counted), mass matrix
        from the Hessian, subsample size recalibrated, caches rebuilt.

        A recentring that would need a larger subsample than the current one
        (the mean of early, skewed or unconverged draws can sit further from the
        mode than theta* already is) is declined: the current reference stays.
        """
        ref = self._reference_at(theta_star)
        if ref is None:
            return state
        cv, metric, factors = ref
        if self._mass_adapted:
            metric, factors = self.metric, self.factors
        m = self.m
        if self.auto_m and not self.update.signed:
            m, ev = choose_subsample_size(cv, factors.chol_cov, rng,
                                          n_blocks=self.sampler.n_blocks,
                                          target_variance=self.sampler.target_variance)
            self.n_evals_setup += ev
            if m > self.m:
                self.n_recentre_declined += 1
                return state
        self.cv, self.metric, self.factors = cv, metric, factors
        pot = state.potential
        pot.set_reference(*cv.reference())
        if m != self.m:
            self.m = m
            self.update.m = m
            rows, self.block_size, _ = self.update.fresh(rng)
            pot.set_rows(rows, self.block_size)
        U = pot.set_position(state.theta)
        self.n_evals_setup += pot.m
        self.tuner.restart()
        return state._replace(potential_energy=U)

    def _restratify(self, rng, state):
        """End of a stage of stratified warmup: theta* to the mean of the stage's
        second half (one full pass for the sums), residuals of every row at
        ``STRATA_POINTS`` of its draws (a pass each), then the exact stratum and
        the subsample size from them (``choose_strata``), the mass matrix from the
        new Hessian, a fresh subsample; the step-size adaptation restarts.

        A stage whose mean has a log posterior more than ``2 p`` below the best
        centre's so far was not sampling the posterior (:ref:`algo-hmc-ecs-strata`:
        on a log-concave posterior the mean of draws is within ``p`` of the
        mode's log density): the chain sat where its estimator hid rows from the
        subsample. theta* then stays, the rows with large residuals at the
        stage's draws join the exact stratum and the chain restarts at theta*.

        The first stage that is not astray also runs a short exact pilot chain
        from its mean (``_exact_pilot``); residuals at ``PILOT_POINTS`` of the
        pilot's later draws join the stage's. The subsampled chain's draws show
        where its perturbed target let it go: along directions only the prior
        bounds, the estimator's variance confines it, and rows that would free
        it never show large residuals at its draws. The pilot's draws go where
        the posterior goes.
        """
        half = np.asarray(self._window[len(self._window) // 2:])
        centre = half.mean(axis=0)
        ref = self._reference_at(centre)
        if ref is None:
            return state
        cv, metric, factors = ref
        lp = cv.L_star + self.model.prior.log_prob(centre)
        astray = lp < self.lp_best - 2.0 * self.model.n_params
        if astray:
            cv = self.cv          # residuals at the stage's draws around the old theta*
        else:
            if not self._mass_adapted:
                self.metric, self.factors = metric, factors
            self.lp_best = max(self.lp_best, lp)
        points = _spread(half, STRATA_POINTS)
        pilot_accept = None
        if not astray and not self.piloted:
            pilot, pilot_accept = self._exact_pilot(rng, centre)
            points = np.vstack([points, _spread(pilot[len(pilot) // 2:], PILOT_POINTS)])
        R = residual_scan(cv, points)
        self.n_evals_setup += len(points) * self.n
        old = np.zeros(self.n, dtype=bool) if self.exact_mask is None else self.exact_mask
        if astray:
            exact, m = astray_strata(R, old), self.m
            cost = int(exact.sum()) + m
        else:
            exact, m, cost = choose_strata(R, old, n_blocks=self.sampler.n_blocks,
                                           target_variance=self.sampler.target_variance)
        del R
        self.exact_mask = exact
        self.cv = cv
        self.m = self.update.m = m
        self.update.set_sampled(np.flatnonzero(~exact))
        pot = self._new_potential()
        rows, self.block_size, _ = self.update.fresh(rng)
        pot.set_rows(rows, self.block_size)
        theta = cv.theta_star.copy() if astray else state.theta
        U = pot.set_position(theta)
        self.n_evals_setup += pot.m + int(exact.sum())
        self.tuner.restart()
        self.stages.append({"n_exact": int(exact.sum()), "m": int(m), "rows": int(cost),
                            "astray": bool(astray), "pilot_accept": pilot_accept})
        return state._replace(theta=pot.position, potential_energy=U, potential=pot)

    def _exact_pilot(self, rng, theta0):
        """``PILOT_ITERATIONS`` transitions of the inner kernel on the full-data
        potential from ``theta0`` with the current metric, one full pass per
        gradient (counted): draws that go where the posterior goes. The step
        size is the warmup's averaged one so far, not dual averaging's latest
        iterate (which can be ten times larger), and stays fixed. Returns the
        draws and their mean acceptance probability."""
        self.piloted = True
        pot = FullPotential(self.model.compiled, self.model.prior.precision,
                            self.model.pass_threads())
        if not np.isfinite(pot.set_position(theta0)):
            return theta0[None, :], 0.0
        self.n_evals_setup += self.n
        self.tuner.finalize()
        draws, accept = [], []
        for _ in range(PILOT_ITERATIONS):
            _, alpha, _, n_eval, _, _ = self.inner.transition(rng, pot, self.metric)
            self.n_evals_setup += int(n_eval * self.n)
            draws.append(pot.position.copy())
            accept.append(alpha)
        return np.asarray(draws), float(np.mean(accept))

    def end_warmup(self, state):
        self.tuner.finalize()
        return state

    def tuning(self):
        return {**self.inner.tuning(), "m": self.m, "block_size": self.block_size,
                "n_products": self.n_products if self.update.signed else None,
                "theta_star": self.cv.theta_star.copy(),
                "mass_matrix": self.factors.precision.copy(), "cv_order": self.order,
                "recentre_declined": self.n_recentre_declined,
                "n_exact": 0 if self.exact_mask is None else int(self.exact_mask.sum()),
                "strata_stages": list(self.stages), "choice": self.choice}


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
        Fraction of the data (at least 1,000 rows) for the initial ``theta*``.
    stratify : "auto" or bool, default="auto"
        Perturbed variant, compiled models in memory: a stratified warmup
        (:ref:`algo-hmc-ecs-strata`). Warmup runs in stages; after each,
        ``theta*`` moves to the mean of the stage's draws and the rows whose
        residuals are large at its draws (a full pass per point, three points)
        join an exact stratum that every evaluation sums exactly; the subsample
        is drawn from the other rows. ``"auto"``: only where the control
        variates at the mode would need more than 5% of the rows per
        evaluation (instead of that subsample, or, beyond half the data, of
        falling back to full-data HMC), e.g. posteriors with
        directions that only the prior bounds (rare categories, quasi-separation),
        where the Laplace approximation reaches likelihood walls the posterior
        does not. ``True``: always; ``False``: never. It needs at least 200
        warmup iterations (with fewer, ``"auto"`` falls back to full-data HMC
        and ``True`` raises).
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
    def _force_strata(self):
        return not isinstance(self.stratify, str) and bool(self.stratify)

    @property
    def signed(self):
        """Draws carry a sign (the block-Poisson variant)."""
        return self.variant == "signed"

    def prepare(self, model, rng):
        self._validate_params()
        refuse_without_hessian(model, "needs the posterior's mode, its curvature and Taylor "
                               "control variates around it")
        signed = self.signed
        diagonal = diagonal_metric(self.metric, model)
        python = python_terms(model)
        auto_order = self.cv_order in (None, "auto")
        order = self.cv_order if not auto_order else (
            user_model_order(model, diagonal) if python else cv_order(model, diagonal))
        distributed = getattr(model, "distributed", False)
        can_stratify = (not signed and not distributed
                        and isinstance(model.compiled, SERVED))
        force_strata = self._force_strata
        if force_strata and not can_stratify:
            raise ValueError(
                "stratify=True needs the perturbed variant and a compiled model (the "
                "GLMs, multinomial regression) with its rows in memory")
        if distributed and signed:
            raise ValueError("the signed HMC-ECS variant does not sample models whose rows "
                             "live with Dask (its batches are redrawn by the chain's "
                             "sign-correcting MH steps); use variant='perturbed'")
        if diagonal:
            # wide models: no p x p matrix (B needs one: order 1 by default)
            if order == 2:
                raise ValueError("cv_order=2 needs the p x p Hessian sum, which the diagonal "
                                 "metric avoids: use cv_order=1 (the default with "
                                 "metric='diag') or metric='dense'")
            if signed:
                raise ValueError("the signed HMC-ECS variant needs a dense metric "
                                 "(metric='dense'); use variant='perturbed' on wide models")
            if force_strata:
                raise ValueError("stratify=True needs a dense metric (metric='dense')")
            can_stratify = False
        batch_size = self.batch_size
        if not signed and batch_size is not None:
            # nothing a user sets is silently dropped
            raise ValueError(f"batch_size={batch_size} is the signed variant's block-Poisson "
                             "batch size; the perturbed variant's subsample size is "
                             "subsample_size")
        if signed and self.subsample_size is not None:
            warnings.warn("HMCECS(variant='signed', subsample_size=...) is deprecated: the "
                          "size of each block-Poisson batch is now batch_size; "
                          "subsample_size will be the perturbed variant's only.",
                          FutureWarning, stacklevel=2)
            batch_size = self.subsample_size if batch_size is None else batch_size
        n = model.n_data
        #: per-datum evaluations a full-data gradient costs (n, unless the model's
        #: full passes do not read the rows), and the rows' worth of one call of
        #: a Python model's functions (counted on both sides of the rule)
        pass_cost, overhead = model.full_pass_cost, model.evaluation_overhead
        n_evals = 0
        if self.theta_star is not None:
            theta_star, auto_ts = model.check_theta(self.theta_star), False
        else:
            theta_star, ev = initial_theta_star(model, rng, self.subset_fraction,
                                                diagonal=diagonal)
            n_evals += ev
            auto_ts = True
        if diagonal:
            theta_star, (ll, g, h), ev, converged = diagonal_mode(
                model, theta_star, max_iter=200 if auto_ts else 0)
            mode = theta_star
        else:
            theta_star, (ll, g, h), ev, converged, mode = refine_theta_star(
                model, theta_star, max_steps=10 if auto_ts else 0)
        n_evals += ev
        cv = TaylorControlVariate(model, theta_star, order, sums=(ll, g, h))
        _, factors = metric_from_precision(_posterior_precision(model, h),
                                           model.prior.precision)
        chol_cov = factors.chol_cov
        G = self.n_blocks
        if signed:
            m = int(batch_size or 30)
            if batch_size is not None and m > n:
                raise ValueError(f"batch_size={m} is larger than the data (n={n})")
            if self.n_products is not None:
                lam = int(self.n_products)
            elif m <= n:
                pilot = rng.integers(0, n, size=min(n, 2000))
                thetas = typical_thetas(cv, chol_cov, rng, centre=mode)
                s2 = residual_variances(cv, thetas, pilot)
                n_evals += len(thetas) * pilot.shape[0]
                lam = choose_n_products(n * n * float(np.median(s2)) / m)
            else:
                lam = 1
            # lambda batches of m rows on average: does that undercut the data?
            layout = dict(m=m, block_size=m, n_products=lam, auto_m=False,
                          full_data=batch_size is None and not subsample_pays(
                              m * lam, pass_cost, overhead))
        elif self.subsample_size is not None:
            if force_strata:
                raise ValueError("stratify=True chooses the subsample size: leave "
                                 "subsample_size=None")
            m = int(self.subsample_size)
            if m > n:
                raise ValueError(f"subsample_size={m} is larger than the data (n={n})")
            if m % G:
                raise ValueError(
                    f"subsample_size={m} must be a multiple of n_blocks={G} (equal blocks)")
            layout = dict(m=m, block_size=m // G, n_products=1, auto_m=False)
        else:
            m, exact, n_heavy = n, None, 0
            if G <= n and python and auto_order and order == 2:
                # user models: order 2 only where it needs fewer rows than order 1
                order, m, ev = choose_user_order(cv, chol_cov, rng, n_blocks=G,
                                                 target_variance=self.target_variance,
                                                 centre=mode)
                n_evals += ev
                if order < cv.order:
                    cv = TaylorControlVariate(model, theta_star, order, sums=(ll, g, h))
            elif G <= n:
                m, ev, (R, thetas) = choose_subsample_size(
                    cv, chol_cov, rng, n_blocks=G, target_variance=self.target_variance,
                    centre=mode, return_residuals=True)
                n_evals += ev
                # a few rows carry the residuals' variance (the pilot saw some):
                # sum them exactly, subsample the rest (:ref:`algo-hmc-ecs-strata`)
                # or rows move far along directions few rows inform (heavy_rows);
                # only where full passes read the rows
                if (can_stratify and self.stratify is not False and pass_cost >= n
                        and n >= 20 * G):
                    heavy, read = heavy_rows(model, factors.cov)
                    n_evals += n if read else 0
                    n_heavy = 0 if heavy is None else int(heavy.sum())
                    cost0, best = pilot_strata_gain(R, n, n_blocks=G,
                                                    target_variance=self.target_variance)
                    if heavy is not None or best < STRATA_GAIN * cost0:
                        mask, m_s, cost, J = laplace_strata(
                            cv, thetas, heavy, n_blocks=G,
                            target_variance=self.target_variance)
                        n_evals += J * n
                        if mask.any():
                            exact, m = mask, m_s
                        else:
                            m = m_s
                del R
            n_exact = 0 if exact is None else int(exact.sum())
            # the control variates need more than half the data (poor), or the
            # subsample costs more than half a full pass (cheap full passes: the
            # sufficient statistics of linear regression)
            poor = G > n or m + n_exact > n / 2
            full = poor or not subsample_pays(m + n_exact, pass_cost, overhead)
            # the control variates at the mode are too poor (e.g. directions only
            # the prior bounds, where a Laplace draw walks into a likelihood wall):
            # a stratified warmup may still subsample (compiled models in memory)
            costly = poor or m + n_exact > STRATIFY_FRACTION * n
            stratify = can_stratify and (force_strata or (
                isinstance(self.stratify, str) and costly and pass_cost >= n
                and n >= 20 * G))
            layout = dict(m=m, block_size=m // G, n_products=1, auto_m=True,
                          full_data=full and not stratify, stratify=stratify,
                          m_stage=G * max(1, min(m, n // 20) // G) if stratify else 0,
                          exact_mask=None if full else exact)
        if distributed and layout.get("full_data", False):
            raise ValueError(
                f"HMC-ECS would need a subsample of more than half the data (m = {m} of "
                f"n = {n}): subsampling does not pay on this model, and full-data HMC "
                "on rows that live with Dask would make a cluster pass per leapfrog step. "
                "Bring X into memory (X.compute()) and fit again.")
        layout["choice"] = choice(n, pass_cost, G, layout, signed,
                                  n_heavy=n_heavy if layout.get("exact_mask") is not None else 0,
                                  overhead=overhead, inner=self.inner)
        if python and not layout.get("full_data"):
            # the rows' Taylor constants at theta*, kept for every row where they fit
            cv.taylor_rows = TaylorRows(model, theta_star, order,
                                        table=row_table_fits(model, order))
            n_evals += cv.taylor_rows.n_evals
        # chains start around the mode (theta* plus its Newton step: no extra pass)
        return ECSPrepared(theta_init=mode, init_chol=chol_cov, n_evals=n_evals, cv=cv,
                           hessian=h, auto_theta_star=auto_ts,
                           theta_star_converged=converged, **layout)

    def build(self, model, prepared, n_warmup):
        if prepared.stratify:
            if n_warmup >= MIN_STRATIFIED_WARMUP:
                return HMCECSKernel(model, self, prepared, n_warmup, stratify=True)
            if self._force_strata:
                raise ValueError(f"stratify=True needs n_warmup >= {MIN_STRATIFIED_WARMUP} "
                                 f"(its warmup stages), got {n_warmup}")
        if prepared.full_data or (prepared.stratify and prepared.m > model.n_data / 2):
            # the subsample would cost more than half the data per gradient: the
            # inner kernel on the full data (exact, and cheaper)
            return HMCKernel(model, self, self.inner,
                             _posterior_precision(model, prepared.hessian), n_warmup,
                             extra_tuning={"full_data": True, "m": model.n_data,
                                           "choice": prepared.choice,
                                           "cv_order": prepared.cv.order,
                                           # the subsample the control variates would
                                           # have needed (perturbed; rule at theta*)
                                           "m_needed": (None if self.signed
                                                        else int(prepared.m))})
        if getattr(model, "distributed", False):
            from ._ecs_fetching import FetchingHMCECSKernel
            return FetchingHMCECSKernel(model, self, prepared, n_warmup)
        return HMCECSKernel(model, self, prepared, n_warmup)
