"""HMC-ECS's preparation, once for all chains (:ref:`algo-hmc-ecs-tuning`):
theta* and the control variates there, then the choice between a subsampled
chain, a stratified warmup and full-data HMC, with the subsample size ``m``
(or the signed variant's batches) and the exact stratum chosen from the
residuals at draws of the Laplace approximation. The record it fills is
:class:`ECSPrepared`; the rules it applies live in ``_ecs_tuning`` (and
``_ecs_user`` for user models)."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .._optimize import diagonal_mode
from ..control_variates import TaylorControlVariate, TaylorRows, row_table_fits
from ..models._base import python_terms
from ._base import Prepared, cv_order, diagonal_metric
from ._ecs_tuning import (PILOT_ROWS, STRATA_GAIN, choice, choose_n_products,
                          choose_subsample_size, heavy_rows, initial_theta_star,
                          laplace_strata, pilot_strata_gain, refine_theta_star,
                          residual_variances, typical_thetas)
from ._ecs_user import choose_user_order, subsample_pays, user_model_order
from ._hmc_ecs_fast import SERVED
from .hmc import metric_from_precision

__all__ = ["ECSPrepared", "prepare_ecs", "posterior_precision", "strata_forced",
           "STRATIFY_FRACTION", "MIN_ROWS_PER_BLOCK", "SIGNED_BATCH_SIZE", "NEWTON_STEPS"]


#: ``stratify="auto"`` runs a stratified warmup where the control variates at the
#: mode would need more than this share of the rows per evaluation: there the
#: chain's own draws usually choose a much cheaper exact stratum (covtype, 7
#: classes, 464,809 rows, default priors: the mode's rule asks 61,453 rows per
#: evaluation, 13%; the stratified warmup settles on 1,500 + 10,384 exact rows,
#: one chain in 174 s against 508 s), and where the mode's layout has an exact
#: stratum at all (``_automatic_layout``)
STRATIFY_FRACTION = 0.05
#: an exact stratum (at preparation or in a stratified warmup) only on data with
#: at least this many rows per block of the subsample; a stratified warmup's
#: first stage draws at most one row in this many (so at least one per block)
MIN_ROWS_PER_BLOCK = 20
#: the signed variant's rows per block-Poisson batch unless ``batch_size`` is given
SIGNED_BATCH_SIZE = 30
#: full-data Newton steps refining the subset's theta* (not converged after them:
#: the warmup recentres theta*)
NEWTON_STEPS = 10


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
    #: stratified warmup: the exact stratum of its first stage, from the shared
    #: exact pilot (``_ecs_warmup.shared_pilot``; None: ``exact_mask``'s)
    stage_exact: np.ndarray = None
    #: stratified warmup: what the shared exact pilot did (``accept``,
    #: ``step_size``, ``transitions``, ``n_exact``, ``m``); None: each chain runs
    #: its own at its first stage
    pilot: dict = None

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
    #: stratified warmup: what runs instead where ``build`` falls back (a warmup
    #: shorter than its stages), the mode's layout, in the same terms
    fallback_choice: dict = None


def posterior_precision(model, hessian):
    """``-hessian + prior precision``: a matrix, or its diagonal for a (p,)
    ``hessian`` (the Hessian sum's diagonal: the diagonal metric)."""
    prec = model.prior.precision
    if np.ndim(hessian) == 1:
        return -np.asarray(hessian) + prec
    return -np.asarray(hessian) + np.diag(prec)


def strata_forced(stratify):
    """``stratify=True`` (a bool, NumPy's included): a stratified warmup whatever
    the control variates at the mode need."""
    return not isinstance(stratify, str) and bool(stratify)


def prepare_ecs(sampler, model, rng):
    """The :class:`ECSPrepared` of ``sampler`` (an ``HMCECS``, validated) on
    ``model``: theta*, the control variates, the engine and the subsample layout
    (every per-datum evaluation counted in ``n_evals``)."""
    signed = sampler.signed
    diagonal = diagonal_metric(sampler.metric, model)
    python = python_terms(model)
    auto_order = sampler.cv_order in (None, "auto")
    order = sampler.cv_order if not auto_order else (
        user_model_order(model, diagonal) if python else cv_order(model, diagonal))
    distributed = model.distributed
    can_stratify, batch_size = _check(sampler, model, order, diagonal, distributed)
    n = model.n_data
    #: per-datum evaluations a full-data gradient costs (n, unless the model's
    #: full passes do not read the rows), and the rows' worth of one call of
    #: a Python model's functions (counted on both sides of the rule)
    pass_cost, overhead = model.full_pass_cost, model.evaluation_overhead
    theta_star, auto_ts, sums, converged, mode, n_evals = _theta_star(sampler, model, rng,
                                                                      diagonal)
    cv = TaylorControlVariate(model, theta_star, order, sums=sums)
    metric, factors = metric_from_precision(posterior_precision(model, sums[2]),
                                       model.prior.precision)
    n_heavy = 0
    if signed:
        layout, ev = _signed_layout(sampler, model, cv, factors.chol_cov, rng, mode,
                                    batch_size)
    elif sampler.subsample_size is not None:
        layout, ev = _given_layout(sampler, n), 0
    else:
        layout, cv, ev, n_heavy = _automatic_layout(
            sampler, model, cv, sums, (metric, factors), rng, mode,
            user_order=python and auto_order, can_stratify=can_stratify)
    n_evals += ev
    if distributed and layout.get("full_data", False):
        raise ValueError(
            f"HMC-ECS would need a subsample of more than half the data (m = {layout['m']} of "
            f"n = {n}): subsampling does not pay on this model, and full-data HMC "
            "on rows that live with Dask would make a cluster pass per leapfrog step. "
            "Bring X into memory (X.compute()) and fit again.")
    heavy = n_heavy if layout.get("exact_mask") is not None else 0
    layout["choice"] = choice(n, pass_cost, sampler.n_blocks, layout, signed, n_heavy=heavy,
                              overhead=overhead, inner=sampler.inner)
    if layout.get("stratify"):
        # what build runs where the warmup is too short for the stages: the
        # mode's layout, or full data where its subsample is more than half the rows
        fallback = {**layout, "stratify": False, "full_data": layout["m"] > n / 2}
        layout["fallback_choice"] = choice(n, pass_cost, sampler.n_blocks, fallback, signed,
                                           n_heavy=heavy, overhead=overhead,
                                           inner=sampler.inner)
    if python and not layout.get("full_data"):
        # the rows' Taylor constants at theta*, kept for every row where they fit
        cv.taylor_rows = TaylorRows(model, theta_star, cv.order,
                                    table=row_table_fits(model, cv.order))
        n_evals += cv.taylor_rows.n_evals
    # chains start around the mode (theta* plus its Newton step: no extra pass)
    return ECSPrepared(theta_init=mode, init_chol=factors.chol_cov, n_evals=n_evals, cv=cv,
                       hessian=sums[2], auto_theta_star=auto_ts,
                       theta_star_converged=converged, **layout)


def _check(sampler, model, order, diagonal, distributed):
    """The combinations of options the model allows: whether it can run a
    stratified warmup, and the signed variant's batch size (``None``: default)."""
    signed = sampler.signed
    can_stratify = not signed and not distributed and isinstance(model.compiled, SERVED)
    force_strata = strata_forced(sampler.stratify)
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
    batch_size = sampler.batch_size
    if not signed and batch_size is not None:
        # nothing a user sets is silently dropped
        raise ValueError(f"batch_size={batch_size} is the signed variant's block-Poisson "
                         "batch size; the perturbed variant's subsample size is "
                         "subsample_size")
    if signed and sampler.subsample_size is not None:
        # stacklevel: the caller of HMCECS.prepare (this, prepare_ecs, HMCECS.prepare)
        warnings.warn("HMCECS(variant='signed', subsample_size=...) is deprecated: the "
                      "size of each block-Poisson batch is now batch_size; "
                      "subsample_size will be the perturbed variant's only.",
                      FutureWarning, stacklevel=4)
        batch_size = sampler.subsample_size if batch_size is None else batch_size
    return can_stratify, batch_size


def _theta_star(sampler, model, rng, diagonal):
    """theta* (the given one, or the mode of a random subset refined on the full
    data), the full-data sums there, whether the refinement converged, the
    mode estimate and the evaluations: ``(theta*, auto, (ll, g, h), converged,
    mode, n_evals)``."""
    n_evals = 0
    if sampler.theta_star is not None:
        theta_star, auto_ts = model.check_theta(sampler.theta_star), False
    else:
        theta_star, ev = initial_theta_star(model, rng, sampler.subset_fraction,
                                            diagonal=diagonal)
        n_evals += ev
        auto_ts = True
    if diagonal:
        # a given theta*: its sums, no search (else diagonal_mode's iterations)
        search = {} if auto_ts else {"max_iter": 0}
        theta_star, sums, ev, converged = diagonal_mode(model, theta_star, **search)
        mode = theta_star
    else:
        theta_star, sums, ev, converged, mode = refine_theta_star(
            model, theta_star, max_steps=NEWTON_STEPS if auto_ts else 0)
    return theta_star, auto_ts, sums, converged, mode, n_evals + ev


def _signed_layout(sampler, model, cv, chol_cov, rng, mode, batch_size):
    """The signed variant's batches: ``batch_size`` rows (default
    ``SIGNED_BATCH_SIZE``), lambda products (given, or the fewest whose estimator
    is precise enough at draws of the Laplace approximation)."""
    n = model.n_data
    m = int(batch_size or SIGNED_BATCH_SIZE)
    if batch_size is not None and m > n:
        raise ValueError(f"batch_size={m} is larger than the data (n={n})")
    n_evals = 0
    if sampler.n_products is not None:
        lam = int(sampler.n_products)
    elif m <= n:
        pilot = rng.integers(0, n, size=min(n, PILOT_ROWS))
        thetas = typical_thetas(cv, chol_cov, rng, centre=mode)
        s2 = residual_variances(cv, thetas, pilot)
        n_evals += len(thetas) * pilot.shape[0]
        lam = choose_n_products(n * n * float(np.median(s2)) / m)
    else:
        lam = 1
    # lambda batches of m rows on average: does that undercut the data?
    return dict(m=m, block_size=m, n_products=lam, auto_m=False,
                full_data=batch_size is None and not subsample_pays(
                    m * lam, model.full_pass_cost, model.evaluation_overhead)), n_evals


def _given_layout(sampler, n):
    """The perturbed variant with the user's ``subsample_size``."""
    if strata_forced(sampler.stratify):
        raise ValueError("stratify=True chooses the subsample size: leave "
                         "subsample_size=None")
    m, G = int(sampler.subsample_size), sampler.n_blocks
    if m > n:
        raise ValueError(f"subsample_size={m} is larger than the data (n={n})")
    if m % G:
        raise ValueError(
            f"subsample_size={m} must be a multiple of n_blocks={G} (equal blocks)")
    return dict(m=m, block_size=m // G, n_products=1, auto_m=False)


def _automatic_layout(sampler, model, cv, sums, laplace, rng, mode, *, user_order,
                      can_stratify):
    """The perturbed variant's engine and layout chosen here: ``m`` from the
    residuals' variance at draws of the Laplace approximation, an exact stratum
    where a few rows carry it, a stratified warmup where the control variates
    at the mode are too poor, full-data HMC where subsampling does not pay.
    ``user_order``: a user model whose order was not given (order 2 kept only
    where it needs fewer rows). ``laplace``: the metric and its factors from
    the posterior precision at theta*. Returns ``(layout, cv, n_evals,
    n_heavy)``."""
    metric, factors = laplace
    n, G, tv = model.n_data, sampler.n_blocks, sampler.target_variance
    pass_cost, overhead = model.full_pass_cost, model.evaluation_overhead
    n_evals = 0
    m, exact, n_heavy = n, None, 0
    if G <= n and user_order and cv.order == 2:
        # user models: order 2 only where it needs fewer rows than order 1
        order, m, ev = choose_user_order(cv, factors.chol_cov, rng, n_blocks=G,
                                         target_variance=tv, centre=mode)
        n_evals += ev
        if order < cv.order:
            cv = TaylorControlVariate(model, cv.theta_star, order, sums=sums)
    elif G <= n:
        m, ev, (R, thetas) = choose_subsample_size(
            cv, factors.chol_cov, rng, n_blocks=G, target_variance=tv, centre=mode,
            return_residuals=True)
        n_evals += ev
        # a few rows carry the residuals' variance (the pilot saw some):
        # sum them exactly, subsample the rest (:ref:`algo-hmc-ecs-strata`)
        # or rows move far along directions few rows inform (heavy_rows);
        # only where full passes read the rows
        if (can_stratify and sampler.stratify is not False and pass_cost >= n
                and n >= MIN_ROWS_PER_BLOCK * G):
            heavy, passes = heavy_rows(model, factors.cov, mode, n / G)
            n_evals += n * passes
            n_heavy = 0 if heavy is None else int(heavy.sum())
            cost0, best = pilot_strata_gain(R, n, n_blocks=G, target_variance=tv)
            if heavy is not None or best < STRATA_GAIN * cost0:
                mask, m_s, cost, J = laplace_strata(cv, thetas, heavy, n_blocks=G,
                                                    target_variance=tv)
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
    # a stratified warmup may still subsample (compiled models in memory).
    # So are they where a few rows carry the residuals (an exact stratum): rows
    # a rare indicator sets, whose coefficient's posterior is skewed away from
    # the mode, where a chain around the mode is biased (covtype, class 2
    # against the rest, 54 attributes: ~5,300 exact rows and m = 100, the
    # largest mean error 0.035-0.191 reference sds over seeds 0-8, on 674- and
    # 1,545-row soil indicators; stratified, 0.035-0.059 over the same nine
    # seeds, in 1.7x the time): the warmup's stages move theta* to the draws' mean
    costly = poor or n_exact > 0 or m > STRATIFY_FRACTION * n
    stratify = can_stratify and (strata_forced(sampler.stratify) or (
        isinstance(sampler.stratify, str) and costly and pass_cost >= n
        and n >= MIN_ROWS_PER_BLOCK * G))
    exact = None if full else exact
    m_stage, stage_exact, pilot = m, None, None
    if stratify and pass_cost >= n:
        # the exact stratum the stages start from: where a short exact pilot
        # chain from the mode goes, once for all chains (_ecs_warmup.shared_pilot)
        from ._ecs_warmup import shared_pilot
        stage_exact, m_pilot, pilot, ev = shared_pilot(sampler, model, cv, metric, exact, mode,
                                                       rng)
        n_evals += ev
        if stage_exact is not None:
            m_stage = m_pilot
    # a stratified warmup's first stage: the rule's (or the pilot's) m, at most
    # one row in MIN_ROWS_PER_BLOCK, a multiple of the blocks
    m_stage = G * max(1, min(m_stage, n // MIN_ROWS_PER_BLOCK) // G) if stratify else 0
    layout = dict(m=m, block_size=m // G, n_products=1, auto_m=True,
                  full_data=full and not stratify, stratify=stratify, m_stage=m_stage,
                  exact_mask=exact, stage_exact=stage_exact, pilot=pilot)
    return layout, cv, n_evals, n_heavy
