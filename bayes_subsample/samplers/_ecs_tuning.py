"""Tuning of HMC-ECS (:ref:`algo-hmc-ecs-tuning`): the expansion point theta*,
the subsample size m of the perturbed estimator and the number of products
lambda of the signed one."""
from __future__ import annotations

import math

import numpy as np
from scipy import linalg, stats

from .._linalg import scale_draws
from ..models._views import WeightedModel
from ..models._scan import term_scan

__all__ = ["choose_subsample_size", "subsample_size_for", "signed_tau", "choose_n_products",
           "refine_theta_star", "initial_theta_star", "residual_variances", "typical_thetas",
           "residual_scan", "choose_strata", "astray_strata", "pilot_strata_gain",
           "laplace_strata", "heavy_rows", "choice", "PILOT_ROWS"]

#: rows of the random pilot subsample whose residuals at draws of the Laplace
#: approximation estimate the estimator's variance (m, lambda, the order of a
#: user model's control variates)
PILOT_ROWS = 2000


def residual_variances(cv, thetas, pilot_idx):
    """Sample variance S_D^2(theta) of the residuals d_k over a pilot subsample."""
    return np.array([np.var(d, ddof=1) for d in cv.residuals_at(thetas, pilot_idx)])


def typical_thetas(cv, chol_cov, rng, n_theta=50, centre=None):
    """Draws from ``N(centre, M^-1)`` (``centre`` defaults to theta*)."""
    centre = cv.theta_star if centre is None else np.asarray(centre, dtype=np.float64)
    z = rng.standard_normal((n_theta, len(cv.theta_star)))
    return centre[None, :] + scale_draws(chol_cov, z)


def choose_subsample_size(cv, chol_cov, rng, *, n_blocks=100, target_variance=1.0,
                          n_theta=50, pilot_size=PILOT_ROWS, min_size=100, centre=None,
                          return_residuals=False):
    """Subsample size m with ``Var[ell_hat_m] ~= target_variance`` at typical theta.

    Draws ``n_theta`` points from ``N(centre, M^-1)`` (``centre``: the mode
    estimate, default theta*) (``chol_cov`` is the
    Cholesky factor of ``M^-1``), estimates ``S_D^2(theta)`` on a pilot
    subsample and sets ``m = ceil(n^2 median(S_D^2) / target_variance)``,
    rounded up to a multiple of ``n_blocks`` and at least
    ``max(n_blocks, min_size)`` (the floor guards against an optimistic pilot
    while theta* is still off the mode). It may exceed ``n``: then
    subsampling does not pay (the caller decides what to do).

    Returns ``(m, n_evals)``, with ``return_residuals`` ``(m, n_evals, R)``:
    the pilot's residuals ``R`` (n_theta, pilot rows) and the points
    (``pilot_strata_gain`` reads them).
    """
    n = cv.n_data
    pilot = rng.integers(0, n, size=min(n, pilot_size))
    thetas = typical_thetas(cv, chol_cov, rng, n_theta, centre)
    R = cv.residuals_at(thetas, pilot)
    m = subsample_size_for(R, n, n_blocks=n_blocks, target_variance=target_variance,
                           min_size=min_size)
    n_evals = n_theta * pilot.shape[0]
    return (m, n_evals, (R, thetas)) if return_residuals else (m, n_evals)


def subsample_size_for(R, n, *, n_blocks=100, target_variance=1.0, min_size=100):
    """``choose_subsample_size``'s rule on a pilot's residuals ``R`` (n_theta,
    k) of a model with ``n`` rows: ``ceil(n^2 median_theta S_D^2 /
    target_variance)`` rounded up to a multiple of ``n_blocks``, at least
    ``max(n_blocks, min_size)``."""
    med = float(np.median(np.var(R, axis=1, ddof=1)))
    m = math.ceil(n * n * med / target_variance) if med > 0 else n_blocks
    return int(math.ceil(max(m, n_blocks, min_size) / n_blocks) * n_blocks)


#: an exact stratum is looked for (a residual scan of every row) when the pilot
#: predicts that one would cut the rows per evaluation below this fraction of m
STRATA_GAIN = 0.8
#: points of the residual scan that chooses the exact stratum at preparation
STRATA_SCAN_POINTS = 16
#: the residual scan holds at most this many bytes of residuals (fewer points
#: on very tall data, at least 4)
STRATA_SCAN_BYTES = 1 << 28


def pilot_strata_gain(R, n, *, n_blocks=100, target_variance=1.0,
                      max_fraction=None):
    """The rows per evaluation an exact stratum would save, predicted from a
    uniform pilot's residuals ``R`` (n_theta, k) of a model with ``n`` rows.

    Each pilot row stands for ``n / k`` rows. Rows join the exact stratum in
    decreasing order of their mean squared centred residual (as
    ``choose_strata`` does on every row); for the first ``j`` pilot rows
    joined, the exact stratum holds ``j n / k`` rows and the rest needs ``m_j =
    (n (k - j) / k)^2 mean_theta Var_rest / target_variance`` (the mean over the
    points, as ``choose_strata``: where a few rows carry the variance it spikes
    at the points that move them, which the median of ``choose_subsample_size``
    does not see, and where the chain sticks). Returns ``(cost_0, cost_best)``,
    the rows per evaluation without and with the best stratum: on data whose
    residuals are all alike the best is no stratum (the ratio is 1); where a few
    rows carry the variance (rare indicators, prior-bounded directions) the
    pilot sees some of them and the ratio falls.
    """
    max_fraction = MAX_EXACT_FRACTION if max_fraction is None else max_fraction
    R = np.asarray(R, dtype=np.float64)
    J, k = R.shape
    Rc = R - R.mean(axis=1, keepdims=True)
    order = np.argsort(-np.mean(Rc * Rc, axis=0), kind="stable")
    Rs = Rc[:, order]
    s1 = np.cumsum(Rs[:, ::-1], axis=1)[:, ::-1]
    s2 = np.cumsum((Rs * Rs)[:, ::-1], axis=1)[:, ::-1]
    j = np.arange(max(1, int(max_fraction * k)))
    left = (k - j).astype(np.float64)
    var = np.maximum(s2[:, j] / left - (s1[:, j] / left) ** 2, 0.0).mean(axis=0)
    m = np.maximum((n * left / k) ** 2 * var / target_variance, n_blocks)
    cost = j * (n / k) + m
    return float(cost[0]), float(cost.min())


#: rows whose linear predictor moves by at least this standard deviation under the
#: Laplace approximation start in the exact stratum (``heavy_rows``)
ETA_SD = 0.5
#: ``heavy_rows`` looks at the rows only when some parameter's Laplace variance is
#: at least this fraction of its prior variance (a direction the data barely bound)
WEAK_PRIOR_SHARE = 1e-4
#: rows whose curvature, scaled by the largest subsample weight ``n / G``, reaches
#: this multiple of the posterior's along their direction start in the exact
#: stratum (``heavy_rows``): drawn into the subsample, one of them can bend the
#: estimated potential (covtype binary, all 54 attributes: 7-24 divergent
#: transitions in 4,000 and, on one seed of three, a rare indicator's posterior
#: mean 0.38 sd off; with them exact, 1-3 and every mean within 0.055 sd of a fit
#: with twice the exact rows, ``benchmarks/bench_ecs_divergences.py``)
LEVERAGE = 10.0


def heavy_rows(model, cov, mode=None, scale=None, max_fraction=None):
    """The rows whose linear predictor(s) move far under the Laplace
    approximation ``N(mode, cov)``: a standard deviation of at least ``ETA_SD``
    (``model.linear_predictor_sd``); and, given the ``mode`` and the largest
    subsample weight ``scale`` (``n / G``) on a model with
    ``linear_predictor_curvature``, the rows of large scaled leverage,
    ``scale * w_k(mode) * x_k^T cov x_k >= LEVERAGE`` (a subsampled row's
    curvature, weighted, against the posterior's along ``x_k``; kept only
    while the mask fits in ``max_fraction``). Returns ``(mask, passes)``: a
    bool mask, or None (no such row; more than ``max_fraction`` of the data, where
    summing them exactly does not pay; a model without linear predictors; or
    no parameter whose Laplace variance reaches ``WEAK_PRIOR_SHARE`` of its
    prior's: then no row can move that far, and the leverage is not looked
    at either, which keeps tall data whose every coefficient is well
    determined as they were), and the full passes it made (counted on the
    model: 0, 1, or 2 with the leverage).

    These are the rows of directions that few rows inform (rare 0/1
    indicators, separating ones among them, extreme values): along such a
    direction the posterior can reach far beyond the Laplace approximation
    (only the prior bounds it when the rows separate), where their Taylor
    control variates at the mode fail (a quadratic where the likelihood
    saturates). Residuals at Laplace draws do not show it: a subsampled chain
    whose proxy misses them stays confined near the mode (:ref:`algo-hmc-ecs-strata`).
    Counted as one full pass when the rows are read.
    """
    sd_fn = getattr(model, "linear_predictor_sd", None)
    if sd_fn is None:
        return None, 0
    cov = np.asarray(cov, dtype=np.float64)
    if np.max(np.diag(cov) * model.prior.precision) < WEAK_PRIOR_SHARE:
        return None, 0
    s = sd_fn(cov)
    model.compiled.note_passes(1)
    mask = s >= ETA_SD
    room = int((MAX_EXACT_FRACTION if max_fraction is None else max_fraction) * len(s))
    passes = 1
    curvature = getattr(model, "linear_predictor_curvature", None)
    if mode is not None and scale is not None and curvature is not None:
        wide = mask | (scale * curvature(mode) * s * s >= LEVERAGE)
        passes += 1
        if wide.sum() <= room:
            mask = wide
    return (mask if 0 < mask.sum() <= room else None), passes


def laplace_strata(cv, thetas, exact=None, *, n_blocks=100, target_variance=1.0):
    """The exact stratum and subsample size chosen from every row's residuals at
    ``thetas`` (draws of the Laplace approximation; :ref:`algo-hmc-ecs-strata`):
    ``choose_strata`` on a residual scan (a full pass per point, at most
    ``STRATA_SCAN_BYTES`` of residuals: on very tall data fewer points, at least
    4), the rows of ``exact`` (a bool mask, e.g. ``heavy_rows``; None: none)
    exact from the start. Returns ``(exact_mask, m, cost, n_points)``."""
    n = cv.n_data
    J = int(min(len(thetas), max(4, STRATA_SCAN_BYTES // (8 * n))))
    R = residual_scan(cv, np.asarray(thetas)[:J])
    start = np.zeros(n, dtype=bool) if exact is None else np.asarray(exact, dtype=bool)
    mask, m, cost = choose_strata(R, start, n_blocks=n_blocks, target_variance=target_variance)
    return mask, m, cost, J


def signed_tau(n_products, sigma):
    """Probability of a positive sign, ``tau = [1 + exp(-2 lambda Phi(-lambda/sigma))]/2``
    for ``a = -lambda`` and Gaussian ``d_hat ~ N(0, sigma^2)``."""
    if sigma <= 0:
        return 1.0
    return 0.5 * (1.0 + math.exp(-2.0 * n_products * stats.norm.cdf(-n_products / sigma)))


def choose_n_products(sigma2_dhat, *, max_variance=1.0, min_tau=0.99, max_products=100000):
    """Smallest lambda with ``Var[log|L_hat|] ~= sigma2 / lambda <= max_variance``
    and ``tau >= min_tau`` (a simplification of the CT-optimal rule)."""
    sigma = math.sqrt(max(sigma2_dhat, 0.0))
    lam = max(1, math.ceil(sigma2_dhat / max_variance))
    while lam < max_products and signed_tau(lam, sigma) < min_tau:
        lam = max(lam + 1, int(lam * 1.1))
    return int(lam)


def refine_theta_star(model, theta, max_steps=3, tol=None):
    """Full-data Newton steps on the log posterior from ``theta`` until the
    Newton decrement ``g^T P^-1 g`` (the squared Mahalanobis distance to the
    mode, to second order) is below ``tol``, by default ``max(0.01, 0.05 p)``:
    posterior draws are at squared distance ~p from the mode, so a centre that
    close adds at most 5% to their mean squared distance from it (and the
    order-2 residuals grow like its cube). Each step reuses the sums of the
    pass the control variates need anyway, so one step costs one extra full
    pass. Returns ``(theta, (ll, grad, hess) at theta, n_evals, converged,
    mode)``: ``converged`` tells whether the decrement at the returned theta is
    below ``tol``, ``mode`` is then theta plus its Newton step (the mode to
    second order, at no extra pass), else theta.

    The first step needs only an estimate of the Hessian: on models that offer
    one (``model.full_pass_hessian_estimate``: the in-memory GLMs sum it over
    a systematic sample of about 2 million rows) the first pass computes the
    exact log-likelihood and gradient with that estimate (the Hessian is the
    compute-bound part of a pass, p(p+1)/2 multiply-adds per row against p
    for the gradient), so on tall data the two passes cost about a gradient
    pass plus one with the Hessian. The guarantees are the same: every
    accepted step raises the log posterior (backtracking), and the
    decrement test, ``converged`` and ``mode`` use the full-data Hessian at
    the returned theta, whose sums every later pass computes. When that
    first step is not taken (not positive definite, rejected by the
    backtracking, or already below ``tol`` by the estimate), a pass with
    the full-data Hessian at ``theta`` follows.

    A subset mode can be far from the full-data mode (rare categories are
    prior-dominated in a 1% subset); the control variates, the mass matrix and
    the subsample size all depend on theta* being near the mode.
    """
    prec = model.prior.precision
    if tol is None:
        tol = max(0.01, 0.05 * model.n_params)
    n_evals = 0
    steps = 0
    h = None
    estimate = getattr(model, "full_pass_hessian_estimate", None)
    if estimate is not None and max_steps > 0:
        ll, g, h_est, exact = estimate(theta)
        n_evals += model.n_data
        if exact:
            h = h_est
        else:
            lp = ll + model.prior.log_prob(theta)
            grad = g - prec * theta
            step = _newton_step(-h_est + np.diag(prec), grad)
            if step is not None and float(step @ grad) >= tol:
                steps = 1
                accepted, ev = _ascent(model, theta, step, lp)
                n_evals += ev
                if accepted is not None:
                    theta, (ll, g, h), lp = accepted
    if h is None:
        # the full-data Hessian at theta (the first pass, or after a first step
        # with the estimated Hessian that was not taken)
        ll, g, h = model.full_pass(theta, gradient=True, hessian=True)
        n_evals += model.n_data
    lp = ll + model.prior.log_prob(theta)
    while True:
        grad = g - prec * theta
        step = _newton_step(-h + np.diag(prec), grad)
        if step is None:
            return theta, (ll, g, h), n_evals, False, theta
        if float(step @ grad) < tol:
            return theta, (ll, g, h), n_evals, True, theta + step
        if steps >= max_steps:
            return theta, (ll, g, h), n_evals, False, theta
        steps += 1
        accepted, ev = _ascent(model, theta, step, lp)
        n_evals += ev
        if accepted is None:
            return theta, (ll, g, h), n_evals, False, theta
        theta, (ll, g, h), lp = accepted


def _newton_step(P, grad):
    """``P^-1 grad`` for the symmetrised precision ``P``, None when ``P`` is not
    positive definite or the step is not finite."""
    try:
        step = linalg.solve(0.5 * (P + P.T), grad, assume_a="pos")
    except (linalg.LinAlgError, ValueError):
        return None
    return step if np.all(np.isfinite(step)) else None


def _ascent(model, theta, step, lp):
    """Backtracking along ``step`` from ``theta`` (log posterior ``lp``): the first
    of ``theta + t step``, ``t = 1, 1/2, ...`` (down to 1e-3) whose log posterior
    is at least ``lp``, with its full-data sums. The full step is tried with a
    pass that sums the Hessian too (near the mode it is taken); the shorter
    ones by the log-likelihood alone (a pass without the gradient and the
    Hessian, their compute-bound part), and the sums at the one taken follow.
    Returns ``((theta, (ll, g, h), lp) or None, n_evals)``."""
    n_evals = 0
    t = 1.0
    while t > 1e-3:   # backtracking keeps every accepted step an ascent
        cand = theta + t * step
        if t == 1.0:
            ll_c, g_c, h_c = model.full_pass(cand, gradient=True, hessian=True)
        else:
            ll_c, g_c, h_c = model.full_pass(cand, gradient=False)[0], None, None
        n_evals += model.n_data
        lp_c = ll_c + model.prior.log_prob(cand)
        if np.isfinite(lp_c) and lp_c >= lp:
            if h_c is None:
                ll_c, g_c, h_c = model.full_pass(cand, gradient=True, hessian=True)
                n_evals += model.n_data
            return (cand, (ll_c, g_c, h_c), lp_c), n_evals
        t *= 0.5
    return None, n_evals


#: a subset with fewer rows per parameter than this has a mode far from the
#: full data's (rare categories, classes only the prior separates there): a
#: tenth of the data refines it before the full-data Newton steps
SUBSET_ROWS_PER_PARAM = 100


def initial_theta_star(model, rng, subset_fraction, diagonal=False):
    """The posterior mode of a random subset of ``max(1000, subset_fraction n)``
    rows with its likelihood weighted by ``n / n_sub`` (the full-data mode when
    the subset would be a tenth of the data or more). Where the subset has
    fewer than ``SUBSET_ROWS_PER_PARAM`` rows per parameter and a tenth of the
    data is at least twice as large, the mode of a random tenth of the data
    (weighted by ``n / tenth``) follows from it, by Newton steps whose passes
    cost a tenth of a full pass each: the full-data refinement
    (``refine_theta_star``) then starts closer to the mode and needs fewer full
    passes (covtype, 7 classes, 464,809 rows, 385 parameters: 5 full passes
    instead of 18). ``diagonal``: found without ``p x p`` matrices
    (``diagonal_mode``: wide models), from the first subset alone. Returns
    ``(theta, n_evals)``."""
    from .._optimize import diagonal_mode, find_map
    n = model.n_data
    n_sub = int(min(n, max(1000, math.ceil(subset_fraction * n))))
    if 10 * n_sub >= n:
        # small data: the full-data mode costs little more than the subset's
        target, method = model, None
    else:
        idx = rng.choice(n, size=n_sub, replace=False)
        target, method = WeightedModel(model.subset(idx), n / n_sub), "newton"
    if diagonal:
        theta, _, ev, _ = diagonal_mode(target)
        return theta, ev
    theta, info = find_map(target, method=method)
    n_evals = info["n_evals"]
    tenth = n // 10
    if (method == "newton" and n_sub < SUBSET_ROWS_PER_PARAM * model.n_params
            and tenth >= 2 * n_sub):
        idx = rng.choice(n, size=tenth, replace=False)
        theta, info = find_map(WeightedModel(model.subset(idx), n / tenth), theta,
                               method="newton")
        n_evals += info["n_evals"]
    return theta, n_evals


def residual_scan(cv, thetas):
    """Residuals ``d_k(theta)`` of every datum at each of ``thetas``: an array of
    shape (len(thetas), n), in one read of the data (``term_scan``: each chunk
    of rows at every point while it is in cache, in the model's threads for a
    full pass), counted as one full pass per theta. The control variates'
    per-datum cache (the GLMs' linear predictors at theta*) is built first if
    it is not (one more pass) and kept."""
    model = cv.model
    cv.build_cache()        # the linear predictors at theta* (GLMs: one pass, kept)
    return term_scan(model.compiled, cv.order, cv.theta_star, np.atleast_2d(thetas),
                     eta_star=cv.cache, n_threads=model.pass_threads())


#: the largest fraction of the data an exact stratum holds (beyond half the data,
#: subsampling the rest does not pay)
MAX_EXACT_FRACTION = 0.5


def choose_strata(R, exact, *, n_blocks=100, target_variance=1.0,
                  max_fraction=MAX_EXACT_FRACTION):
    """The exact stratum and subsample size that minimise the rows read per
    evaluation, ``|exact| + m``, given residuals ``R`` (J, n) of every datum at
    J points where the chain went (:ref:`algo-hmc-ecs-strata`).

    ``exact`` (bool mask (n,)) is the current stratum; rows join it in
    decreasing order of their mean squared centred residual over the J points,
    never leave it (a row that formed a wall stays exact, or the chain would
    walk into the wall again). For a stratum E, the rest (``n_s`` rows) needs
    ``m(E) = n_s^2 Var_rest(d) / target_variance`` (averaged over the points) for
    ``Var[ell_hat] ~= target_variance``; ``m`` is rounded up to a multiple of
    ``n_blocks``. At most ``max_fraction`` of the data join.

    Returns ``(exact_mask, m, cost)`` with ``cost = |E| + m`` (rows per
    evaluation; above ``n / 2`` subsampling does not pay).
    """
    R = np.asarray(R, dtype=np.float64)
    J, n = R.shape
    exact = np.asarray(exact, dtype=bool)
    cand = np.flatnonzero(~exact)
    c = cand.shape[0]
    kmax = int(min(c - 1, max(0, max_fraction * n - exact.sum())))
    # the candidates' residuals centred at each point, their totals and scores
    Rc = np.empty((J, c))
    for j in range(J):
        Rc[j] = R[j, cand]
        Rc[j] -= Rc[j].mean()
    score = np.einsum("jk,jk->k", Rc, Rc) / J
    # the rest after the top k joined, k = 0..K: the sums over the rows outside
    # the top K plus the suffix sums of the top K (no cancellation against the
    # heavy rows); K grows until the best k lies inside (rows that join are few)
    K = min(kmax, max(1024, c // 64))
    while True:
        top = np.argpartition(-score, K)[:K] if K < c else np.arange(c)
        top = top[np.argsort(-score[top], kind="stable")]
        out = np.ones(c)
        out[top] = 0.0
        Rt = Rc[:, top]
        zero = np.zeros((J, 1))
        s1 = (Rc @ out)[:, None] + np.concatenate(
            [np.cumsum(Rt[:, ::-1], axis=1)[:, ::-1], zero], axis=1)
        s2 = np.einsum("jk,jk,k->j", Rc, Rc, out)[:, None] + np.concatenate(
            [np.cumsum((Rt * Rt)[:, ::-1], axis=1)[:, ::-1], zero], axis=1)
        k = np.arange(K + 1)
        left = (c - k).astype(np.float64)
        var = np.maximum(s2 / left - (s1 / left) ** 2, 0.0).mean(axis=0)
        m = left * left * var / target_variance
        m = np.maximum(np.ceil(m / n_blocks), 1.0) * n_blocks
        cost = exact.sum() + k + m
        best = int(np.argmin(cost))
        if best < K or K >= kmax:
            break
        K = min(kmax, 4 * K)
    new = exact.copy()
    new[cand[top[:best]]] = True
    return new, int(m[best]), int(cost[best])


#: a stratified warmup's stage gone astray: rows whose residual at its draws
#: exceeds this many nats join the exact stratum
ASTRAY_RESIDUAL = 1.0


def astray_strata(R, exact, *, max_fraction=MAX_EXACT_FRACTION):
    """The exact stratum after a stage that went astray: a new mask, ``exact``
    (bool mask (n,), not modified) joined by the rows whose residual at any of
    the points of ``R`` (J, n) exceeds ``ASTRAY_RESIDUAL`` nats in magnitude
    (each, drawn into the subsample, moved the estimator by ``n_s / m`` times
    that), largest first, with at most ``max_fraction`` of the data exact (as
    ``choose_strata``)."""
    score = np.max(np.abs(R), axis=0)
    score[exact] = 0.0
    room = max(0, int(max_fraction * exact.shape[0]) - int(exact.sum()))
    cand = np.flatnonzero(score > ASTRAY_RESIDUAL)
    cand = cand[np.argsort(-score[cand], kind="stable")[:room]]
    new = exact.copy()
    new[cand] = True
    return new


def choice(n, pass_cost, n_blocks, layout, signed, n_heavy=0, overhead=0, inner="hmc"):
    """What HMC-ECS's preparation chose, in the terms of its cost rule
    (:ref:`algo-hmc-ecs-choice`): subsample where an evaluation of the
    estimator costs at most half what a full-data gradient costs (the
    Hamiltonian moves are the same, so the draws' efficiency per gradient is
    too), else run the inner kernel on the full data. Both are counted in
    rows read, plus ``overhead`` (``model.evaluation_overhead``: the rows'
    worth of an evaluation through a Python model) on each side; ``inner``
    names the exact kernel of the full-data fallback. Returns ``{"engine":
    "subsampled" | "stratified warmup" | "full data", "rows_per_evaluation",
    "n_data", "n_exact", "m", "evaluation_overhead", "reason"}``; the reason
    in words a user can act on (``diagnostics_["choice"]``,
    ``trace_.summary()``)."""
    m = int(layout["m"])
    mask = layout.get("exact_mask")
    n_exact = 0 if mask is None else int(mask.sum())
    rows = (m * int(layout["n_products"]) if signed else m) + n_exact
    out = {"n_data": int(n), "n_exact": n_exact, "m": m, "rows_per_evaluation": int(rows),
           "evaluation_overhead": int(overhead)}
    pct = f"{100.0 * rows / n:.2g}%"
    if layout.get("stratify"):
        share = f"{pct} of the {n:,} rows" if rows <= n else f"more than all {n:,} rows"
        why = (f"the control variates at the mode would need {rows:,} rows per evaluation "
               f"({share})")
        if n_exact:
            why += (f", {n_exact:,} of them summed exactly: a few rows carry the residuals "
                    "there (rare indicators whose coefficients' posteriors are skewed away "
                    "from the mode)")
        out.update(engine="stratified warmup", reason=(
            f"stratified warmup: {why}; theta* moves to the mean of the chain's draws and "
            "the warmup chooses the rows to sum exactly from them"))
    elif layout.get("full_data"):
        if pass_cost < n:
            why = (f"a full-data gradient costs {pass_cost:,} evaluations (sufficient "
                   f"statistics), less than twice the {rows:,} rows of the subsample")
        elif n_blocks > n:
            why = f"the {n:,} rows are fewer than the n_blocks={n_blocks} blocks"
        elif rows > n / 2 or not overhead:
            why = (f"the control variates would need {rows:,} rows per evaluation, more than "
                   f"half of the {n:,} rows")
        else:
            why = (f"an evaluation through the model's Python functions has a fixed cost of "
                   f"about {overhead:,} rows' worth besides its rows, so one on the {rows:,} "
                   f"rows of the subsample would cost more than half of one on all {n:,} rows")
        out.update(engine="full data", reason=f"full data (exact {inner.upper()}): {why}")
    else:
        what = f"{rows:,} rows per evaluation ({pct} of the {n:,} rows)"
        if n_exact:
            heavy = (f"rows whose linear predictor moves by at least {ETA_SD} sd under the "
                     "Laplace approximation")
            resid = "the largest residuals at draws of the Laplace approximation"
            which = (heavy if n_heavy == n_exact else resid if n_heavy == 0 else
                     f"{n_heavy:,} {heavy}, {n_exact - n_heavy:,} of {resid}")
            what += f": {n_exact:,} summed exactly ({which}) and {m:,} drawn from the others"
        out.update(engine="subsampled", reason=f"subsampled: {what}; a full-data gradient "
                   f"reads all {n:,} rows")
    return out
