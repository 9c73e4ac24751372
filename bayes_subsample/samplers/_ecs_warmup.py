"""HMC-ECS's warmup: the step size and the metric adapted to the draws,
theta* recentred while its Newton refinement had not converged, and the
stratified warmup (:ref:`algo-hmc-ecs-strata`): stages after each of which
theta* moves to the mean of the stage's draws and the rows with large
residuals there join an exact stratum. The exact stratum the stages start
from comes from a short exact pilot chain run once for all chains at
preparation (:func:`shared_pilot`).

:class:`ECSWarmup` is the warmup half of the HMC-ECS kernel
(``hmc_ecs.HMCECSKernel`` inherits it): its methods move the kernel's
reference (``cv``), metric, subsample size and exact stratum.
"""
from __future__ import annotations

import numpy as np

from ..control_variates import TaylorControlVariate
from ._adapt import MIN_METRIC_WARMUP, VarianceWindows, diagonal_windows, rescaled_precision
from ._ecs_prepare import posterior_precision
from ._ecs_tuning import astray_strata, choose_strata, choose_subsample_size, residual_scan
from ._hamiltonian import FullPotential
from ._inner import make_inner
from .hmc import metric_from_precision

__all__ = ["ECSWarmup", "MIN_STRATIFIED_WARMUP", "STRATA_POINTS", "PILOT_ITERATIONS",
           "PILOT_POINTS", "PILOT_ADAPT", "exact_pilot", "shared_pilot"]


#: the least warmup a stratified HMC-ECS run adapts with (shorter: full-data HMC)
MIN_STRATIFIED_WARMUP = 200
#: a stratified warmup runs in stages of a sixth of warmup each, within 25 to 100
#: iterations
STAGES_PER_WARMUP = 6
MIN_STAGE_LENGTH, MAX_STAGE_LENGTH = 25, 100
#: the end of warmup where theta* and the exact stratum stay, for the step size
#: to adapt to the last ones: a stratified warmup's last stage ends at least
#: ``SETTLE_ITERATIONS`` and ``SETTLE_FRACTION`` of warmup before its end, the
#: last recentring the smaller of the two before it
SETTLE_ITERATIONS = 100
SETTLE_FRACTION = 0.25
#: a stage whose mean has a log posterior more than this many nats per parameter
#: below the best centre's went astray (on a log-concave posterior the mean of
#: the draws is within ``p`` nats of the mode's log density)
ASTRAY_NATS_PER_PARAM = 2.0
#: points of each stage whose residuals (a full pass each) choose the stratum
STRATA_POINTS = 3
#: transitions of the exact pilot chain (full-data potential) run once, at the
#: first stage of the stratified warmup that samples the posterior: its draws go
#: where the posterior goes, not where the subsampled chain was confined
PILOT_ITERATIONS = 30
#: the pilot's draws (of its second half) whose residuals join the stage's
PILOT_POINTS = 6
#: transitions of the shared pilot (at preparation, from the mode) that adapt
#: its step size by dual averaging before its ``PILOT_ITERATIONS``
PILOT_ADAPT = 20


def _spread(draws, k):
    """``k`` of ``draws`` evenly spread over them (first and last included)."""
    return draws[np.linspace(0, len(draws) - 1, k).astype(int)]


def exact_pilot(model, inner, metric, theta0, rng, adapt=0):
    """``adapt`` transitions of ``inner`` on the full-data potential from
    ``theta0`` whose acceptance probabilities adapt its step size (dual
    averaging, then its average), then ``PILOT_ITERATIONS`` at that step size:
    draws that go where the posterior goes. Returns ``(draws, mean acceptance
    probability of the kept transitions, full passes)``; a start where the
    potential is not finite gives ``(theta0[None], 0.0, 1)``."""
    pot = FullPotential(model.compiled, model.prior.precision, model.pass_threads())
    if not np.isfinite(pot.set_position(theta0)):
        return theta0[None, :], 0.0, 1
    passes = 1.0
    draws, accept = [], []
    for i in range(adapt + PILOT_ITERATIONS):
        _, alpha, _, n_eval, _, _ = inner.transition(rng, pot, metric)
        passes += n_eval
        if i < adapt:
            inner.tuner.update(alpha)
            if i == adapt - 1:
                inner.tuner.finalize()
            continue
        draws.append(pot.position.copy())
        accept.append(alpha)
    return np.asarray(draws), float(np.mean(accept)), int(round(passes))


def shared_pilot(sampler, model, cv, metric, exact, theta0, rng):
    """The exact stratum and subsample size a stratified warmup's chains start
    from, chosen once for all of them (:ref:`algo-hmc-ecs-strata`): an exact
    pilot chain (:func:`exact_pilot`) from ``theta0`` (the mode) with the
    Laplace ``metric`` (the posterior precision at theta*), its step size
    adapted over its first ``PILOT_ADAPT`` transitions, and the rows with large
    residuals (around ``cv``'s theta*) at ``PILOT_POINTS`` of its later draws
    joined to ``exact`` (``choose_strata``).

    Returns ``(exact_mask, m, info, n_evals)``: ``exact_mask`` None where the
    pilot did not move (a start where the potential is not finite), ``info``
    what the pilot did (``accept``, ``step_size``, ``transitions``,
    ``n_exact``, ``m``)."""
    n = model.n_data
    inner = make_inner(sampler.inner, sampler, model.n_params)
    draws, accept, passes = exact_pilot(model, inner, metric, theta0, rng, adapt=PILOT_ADAPT)
    n_evals = passes * n
    info = {"accept": accept, "step_size": float(inner.tuner.step_size),
            "transitions": PILOT_ADAPT + PILOT_ITERATIONS, "n_exact": None, "m": None}
    if len(draws) < PILOT_ITERATIONS:
        return None, None, info, n_evals
    points = _spread(draws[len(draws) // 2:], PILOT_POINTS)
    R = residual_scan(cv, points)
    n_evals += len(points) * n
    old = np.zeros(n, dtype=bool) if exact is None else exact
    mask, m, _ = choose_strata(R, old, n_blocks=sampler.n_blocks,
                               target_variance=sampler.target_variance)
    info.update(n_exact=int(mask.sum()), m=int(m))
    return mask, int(m), info, n_evals


class ECSWarmup:
    """The warmup of the HMC-ECS kernel, a base of ``HMCECSKernel``, whose
    ``__init__`` sets ``model``, ``sampler``, ``n``, ``cv``, ``hessian``,
    ``order``, ``m``, ``block_size``, ``exact_mask``, ``auto_m``, ``metric``,
    ``factors``, ``update``, ``inner`` and ``tuner``, and calls
    :meth:`_init_warmup` before building its subsample update; ``step`` and
    ``_new_potential`` are the kernel's."""

    def _init_warmup(self, prepared, n_warmup, stratify):
        """The warmup's schedule: stages of a stratified warmup (their first
        subsample size replaces ``m``), recentring, the metric's windows."""
        self.n_warmup = n_warmup
        # stratified warmup (:ref:`algo-hmc-ecs-strata`): stages of the chain, after
        # each theta* moves to the mean of its draws and rows whose residuals there
        # are large join the exact stratum
        self.stratify = stratify
        self.stages = []
        if stratify:
            self.m = prepared.m_stage
            self.block_size = self.m // self.sampler.n_blocks
            if prepared.stage_exact is not None:
                # the shared pilot's stratum (:func:`shared_pilot`)
                self.exact_mask = prepared.stage_exact
            self.stage_len = max(MIN_STAGE_LENGTH,
                                 min(MAX_STAGE_LENGTH, n_warmup // STAGES_PER_WARMUP))
            self.last_stage = n_warmup - max(SETTLE_ITERATIONS,
                                             int(SETTLE_FRACTION * n_warmup))
            # the best exact log posterior at a centre so far (a stage whose mean
            # falls far below it was not sampling the posterior)
            self.lp_best = self.cv.L_star + self.model.prior.log_prob(self.cv.theta_star)
            # the exact pilot chain has run (once for all chains, at preparation;
            # else at the first stage that is not astray)
            self.piloted = prepared.pilot is not None
        # recentring costs a full pass and restarts the step-size adaptation: only
        # while theta* is not known to be near the mode (the Newton refinement
        # did not converge); the mode is a better centre than a mean of early draws
        # (not with an exact stratum: it was chosen from the residuals around theta*)
        self.recentre = (self.sampler.recentre_every is not None and prepared.auto_theta_star
                         and not prepared.theta_star_converged and not stratify
                         and self.exact_mask is None)
        self._window = []
        self.n_recentre_declined = 0
        # the metric adapts to the draws' marginal variances (once adapted, a
        # recentring or a new stratum keeps it): the diagonal one as full-data HMC's
        # does (the Hessian's diagonal at theta* is the conditional precision), the
        # dense one over the second quarter of warmup, its variances rescaled
        # where the draws' differ (``rescaled_precision``: the curvature at the
        # mode is too narrow along directions few rows inform)
        diagonal = np.ndim(self.hessian) == 1
        self.variance_windows = (
            None if n_warmup < MIN_METRIC_WARMUP else VarianceWindows(
                diagonal_windows(n_warmup) if diagonal else [(n_warmup // 4, n_warmup // 2)],
                covariance=not diagonal))
        self._mass_adapted = False

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
                state = self.restratify(rng, state, self._window)
                self._window = []
        elif self.recentre:
            self._window.append(state.theta)
            every = int(self.sampler.recentre_every)
            last_ok = self.n_warmup - min(SETTLE_ITERATIONS,
                                          int(SETTLE_FRACTION * self.n_warmup))
            if (iteration + 1) % every == 0 and iteration + 1 <= last_ok:
                state = self._recentre(rng, state, np.mean(self._window, axis=0))
                self._window = []
        return state, info

    def end_warmup(self, state):
        self.tuner.finalize()
        return state

    def _reference_at(self, theta_star):
        """The control variates and the metric at a new ``theta_star`` from one
        full pass (counted); None when the sums there are not finite."""
        model = self.model
        # what a full pass computes of the Hessian: all of it, or its diagonal
        kind = "diag" if np.ndim(self.hessian) == 1 else True
        ll, g, h = model.full_pass(theta_star, gradient=True, hessian=kind)
        self.n_evals_setup += self.n
        if not (np.isfinite(ll) and np.all(np.isfinite(g)) and np.all(np.isfinite(h))):
            return None
        cv = TaylorControlVariate(model, theta_star, self.order, sums=(ll, g, h))
        return (cv, *metric_from_precision(posterior_precision(model, h),
                                           model.prior.precision))

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

    def restratify(self, rng, state, window):
        """End of a stage of stratified warmup whose draws are ``window``: theta*
        to the mean of the stage's second half (one full pass for the sums),
        residuals of every row at ``STRATA_POINTS`` of its draws (a pass each),
        then the exact stratum and
        the subsample size from them (``choose_strata``), the mass matrix from the
        new Hessian, a fresh subsample; the step-size adaptation restarts.

        A stage whose mean has a log posterior more than ``2 p`` below the best
        centre's so far (``ASTRAY_NATS_PER_PARAM``) was not sampling the
        posterior (:ref:`algo-hmc-ecs-strata`: on a log-concave posterior the
        mean of draws is within ``p`` of the mode's log density): the chain sat
        where its estimator hid rows from the subsample. theta* then stays, the
        rows with large residuals at the stage's draws join the exact stratum
        and the chain restarts at theta*.

        The first stage that is not astray also runs a short exact pilot chain
        from its mean (:meth:`exact_pilot`); residuals at ``PILOT_POINTS`` of the
        pilot's later draws join the stage's. The subsampled chain's draws show
        where its perturbed target let it go: along directions only the prior
        bounds, the estimator's variance confines it, and rows that would free
        it never show large residuals at its draws. The pilot's draws go where
        the posterior goes.
        """
        half = np.asarray(window[len(window) // 2:])
        centre = half.mean(axis=0)
        ref = self._reference_at(centre)
        if ref is None:
            return state
        cv, metric, factors = ref
        lp = cv.L_star + self.model.prior.log_prob(centre)
        astray = lp < self.lp_best - ASTRAY_NATS_PER_PARAM * self.model.n_params
        if astray:
            cv = self.cv          # residuals at the stage's draws around the old theta*
        else:
            if not self._mass_adapted:
                self.metric, self.factors = metric, factors
            self.lp_best = max(self.lp_best, lp)
        points = _spread(half, STRATA_POINTS)
        pilot_accept = None
        if not astray and not self.piloted:
            pilot, pilot_accept = self.exact_pilot(rng, centre)
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

    def exact_pilot(self, rng, theta0):
        """The chain's own exact pilot (where the preparation ran none, see
        :func:`shared_pilot`): :func:`exact_pilot` from ``theta0`` with the
        current metric at the warmup's averaged step size so far (not dual
        averaging's latest iterate, which can be ten times larger), fixed;
        every pass counted. Returns the draws and their mean acceptance
        probability."""
        self.piloted = True
        self.tuner.finalize()
        draws, accept, passes = exact_pilot(self.model, self.inner, self.metric, theta0, rng)
        self.n_evals_setup += passes * self.n
        return draws, accept
