"""The default step size of the stochastic-gradient samplers and their refusal
before any draw (:ref:`algo-sg-step-size`, :ref:`algo-sg-safety`).

The step comes from the largest curvature of the posterior in the coordinates
the dynamics move, taken at the mode *and* at draws of the Laplace
approximation (where the chains will go; on separable or otherwise
non-Gaussian posteriors the curvature there is many times the mode's), and
from the control variates' gradient noise at the same draws. When the step
this gives is so much smaller than on a Gaussian posterior that the chains
cannot mix (:data:`MAX_SLOWDOWN`), the samplers refuse before any draw.
:func:`iterations_for_passes` turns a budget in data passes into iterations.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np

from .._linalg import scale_draws
from ..exceptions import SamplingError

__all__ = ["iterations_for_passes", "step_from_curvature", "gradient_noise",
           "curvature_and_noise", "max_curvature", "curvature_at", "step_rule",
           "refuse_if_too_slow", "laplace_points", "noise_rows",
           "StepRule", "NOISE_ROWS", "NOISE_POINTS", "MAX_SLOWDOWN", "CURVATURE_SLACK",
           "start_curvature", "step_at_start", "rmsprop_scale", "psgld_rule", "START_STEP",
           "START_FRICTION", "START_BATCH", "START_SEED"]

#: rows and points of the gradient-noise and curvature estimates (:func:`gradient_noise`,
#: :func:`step_rule`)
NOISE_ROWS, NOISE_POINTS = 2048, 4
#: curvature at the Laplace draws up to this many times the mode's leaves the step
#: as it is: the rule's constant ``c = 0.3`` was measured on posteriors (covtype, the
#: HIGGS sample) whose curvature there is 1.01 to 1.08 times the mode's (measured on
#: all rows; 1.00 to 1.02 by the estimate of :func:`step_rule`)
CURVATURE_SLACK = 1.25
#: the default step may be at most this many times smaller than the step of the
#: same rule on a Gaussian posterior with the mode's curvature and exact
#: gradients; beyond it the samplers refuse before any draw: at the default
#: ``n_steps`` a chain would need more than about 25 iterations per independent
#: draw (SGLD: about 1.3 at the Gaussian step), so the second half of a
#: 1,000-iteration warmup would hold fewer than the ``_sg_check.MIN_ESS`` = 20
#: effective draws that the check at its end needs
MAX_SLOWDOWN = 20.0
#: with a dense metric, a model without per-datum Hessians up to this many
#: parameters gets its curvature from the full numerical Hessian (2 p gradient
#: passes), beyond it by Lanczos on finite-difference products
DENSE_CURVATURE_MAX = 64

_DEFAULT_FRICTION = {"sghmc": 1.0, "ewsg": 2.0}

# ---- models without a Hessian (:ref:`algo-sg-no-hessian`) ------------------------------
#: SGHMC's and EWSG's friction on models without a Hessian, per unit time of the
#: dynamics in ``z = sqrt(n) theta`` (the EWSG paper's gamma = 0.1 for its MLP on MNIST,
#: whose potential is the average of the per-datum terms: the same dynamics)
START_FRICTION = 0.1
#: the minibatch size of the stochastic-gradient samplers on models without a Hessian
#: (the EWSG paper's, section 5.3)
START_BATCH = 100
#: the seed of the point (``model.init_params``) where the default step's curvature
#: is measured on models without a Hessian
START_SEED = 0
#: the constants of the default steps on models without a Hessian, with ``lam_z`` the
#: largest curvature of the posterior at :data:`START_SEED`'s ``init_params`` in
#: ``z = sqrt(n) theta`` (:func:`start_curvature` / ``n``): SGLD ``eps_z = C / lam_z``
#: (``eps = C / lam`` in ``theta``; 2 is half the linear stability bound there),
#: SGHMC and EWSG ``h_z = C min(lam_z^-1/2, 1 / gamma)``, and pSGLD ``eps = C / n`` in
#: ``theta`` (an RMSprop learning rate of ``C / 2`` on the average per-datum
#: gradient; no curvature needed). Measured with ``benchmarks/bench_sg_mlp_steps.py``
#: (the posterior predictive's test accuracy from 100 thinned draws; load_digits
#: 64-50-10 with inputs / 16 and raw, 200 passes, 3 seeds; MNIST 784-100-10, 20
#: passes): at these constants each sampler's mean accuracy is within about 0.02 of
#: that of the best of its steps times 1/10 to 10, and steps 10 times larger (3 times
#: for EWSG, whose explicit Euler step is the least stable) lose accuracy or collapse
#: on at least one of the data sets (``benchmarks/results/sg_mlp_steps.json``)
START_STEP = {"sgld": 2.0, "sghmc": 0.3, "ewsg": 0.2, "psgld": 0.01}


def step_from_curvature(sampler, lam, q, *, friction=None, c=0.3):
    """The rule of :func:`~bayes_subsample.samplers.suggest_step_size` given
    ``lam`` and ``q`` (pSGLD's in the coordinates of its preconditioner: SGLD's)."""
    if friction is None:
        friction = _DEFAULT_FRICTION.get(sampler, 1.0)
    if sampler in ("sgld", "psgld"):
        return c * q / lam
    return c * min(lam ** -0.5, 1.0 / friction, q * friction / lam)


def start_curvature(model, theta):
    """``(lam, n_evals)``: the largest eigenvalue of the posterior precision
    (``-d^2 log pi / d theta^2``) at ``theta``, from the :func:`noise_rows`
    (their Hessian scaled by ``n / m``, as :func:`step_rule` does at the Laplace
    draws) by Lanczos on central differences of the gradient (two gradient
    passes over those rows a product; no Hessian needed): the default step on
    models without a Hessian. On MLPs the curvature at the starting weights
    is 1 to 6 times that at the end of a chain (measured on load_digits and
    MNIST), so the step set from it is conservative where the chains go."""
    rows = noise_rows(model.n_data)
    sub = model if len(rows) == model.n_data else _RowsModel(model, rows)
    before = model.n_full_passes
    lam = curvature_at(sub, theta, None, False, True)
    n_evals = (model.n_full_passes - before) * model.n_data + getattr(sub, "n_evals", 0)
    if not (np.isfinite(lam) and lam > 0):
        raise SamplingError(
            f"the posterior's curvature at the starting point is not a positive finite "
            f"number ({lam:.3g}): check the scale of the data and of the prior, or pass "
            "step_size")
    return lam, n_evals


def step_at_start(sampler, lam, n_data, friction=None):
    """The default step on a model without a Hessian (:data:`START_STEP`) given
    the curvature ``lam`` at the start (in ``theta``; unused by pSGLD)."""
    c = START_STEP[sampler]
    if sampler == "psgld":
        return c / n_data
    lam_z = lam / n_data
    if sampler == "sgld":
        return c / lam_z
    friction = START_FRICTION if friction is None else friction
    return c * min(lam_z ** -0.5, 1.0 / friction)


def rmsprop_scale(model, points, rows, batch_size, damping):
    """``(G, n_evals)``: pSGLD's preconditioner ``G = 1 / (damping + sqrt(V))``
    at its stationary value around ``points``: ``V_j`` the mean over the
    points of ``E[gbar_j^2]``, ``gbar`` the average per-datum gradient of the
    log posterior on a minibatch of ``batch_size`` iid rows (its mean squared
    plus its variance, from the per-datum gradients on ``rows``, in chunks of
    at most 2^18 entries)."""
    V = np.zeros(model.n_params)
    for theta in points:
        mean, var = _row_moments(lambda idx: model.grad_terms(theta, idx), rows,
                                 model.n_params)
        gbar = mean + model.prior.grad_log_prob(theta) / model.n_data
        V += gbar * gbar + var / batch_size
    V /= len(points)
    return 1.0 / (damping + np.sqrt(V)), len(points) * len(rows)


def _row_moments(per_row, rows, p):
    """The mean and variance over ``rows`` of the per-row ``p``-vectors
    ``per_row(idx)`` returns for a chunk ``idx`` of them (an ``(len(idx), p)``
    array), in chunks of at most 2^18 entries (no ``rows x p`` array on wide
    models)."""
    m = len(rows)
    chunk = max(1, (1 << 18) // p)
    s1, s2 = np.zeros(p), np.zeros(p)
    for start in range(0, m, chunk):
        G = per_row(rows[start:start + chunk])
        s1 += G.sum(axis=0)
        s2 += np.einsum("ij,ij->j", G, G)
    mean = s1 / m
    return mean, np.maximum(s2 / m - mean * mean, 0.0)


def psgld_rule(model, theta_map, chol_cov, precision, diagonal, batch_size, damping):
    """``(rule, G)``: pSGLD's default step on a model with a Laplace
    approximation: SGLD's rule (:func:`step_from_curvature`, ``q = min(1, b /
    n)`` for uniform minibatches) in the coordinates of its preconditioner at
    its stationary value ``G`` (:func:`rmsprop_scale` at the
    :func:`laplace_points`, on the :func:`noise_rows`). The curvature there is
    ``lambda_max(G^1/2 P G^1/2)``, at the mode (``P`` the posterior precision:
    dense, or by Lanczos on the GLMs' Hessian products with a diagonal metric)
    and, as in :func:`step_rule`, at the Laplace draws (the ratio of their
    curvature to the mode's on the rows): ``lam = max(lam_mode, lam_draws /
    CURVATURE_SLACK)``, so that :func:`refuse_if_too_slow` refuses the same
    posteriors far from Gaussian as for the other samplers."""
    points = laplace_points(theta_map, chol_cov)
    rows = noise_rows(model.n_data)
    G, n_evals = rmsprop_scale(model, points, rows, batch_size, damping)
    s = np.sqrt(G)
    if diagonal:
        lam_mode = _largest_eigenvalue(
            _whitened(model.neg_hessian_operator(theta_map), s, True), 1e-3)
    else:
        P = np.asarray(precision, dtype=np.float64)
        lam_mode = float(np.max(np.linalg.eigvalsh(s[:, None] * (0.5 * (P + P.T))
                                                   * s[None, :])))
    if not (np.isfinite(lam_mode) and lam_mode > 0):
        raise ValueError("the posterior precision at the mode is not positive definite")
    passes = model.n_full_passes
    sub = model if len(rows) == model.n_data else _RowsModel(model, rows)
    at_mode = curvature_at(sub, theta_map, s, True, diagonal)
    lam_draws = lam_mode * max(curvature_at(sub, t, s, True, diagonal) for t in points) / at_mode
    n_evals += (model.n_full_passes - passes) * model.n_data + getattr(sub, "n_evals", 0)
    lam = max(lam_mode, lam_draws / CURVATURE_SLACK)
    q = min(1.0, batch_size / model.n_data)
    return StepRule(lam, q, lam_mode, float("nan"), n_evals, lam_draws), G


def laplace_points(theta_map, chol, n_points=NOISE_POINTS):
    """``n_points`` draws ``theta_map + L z`` of the Laplace approximation
    (``L = chol``, dense or diagonal), from a fixed seed: the points where the
    gradient noise and the curvature are measured (the same for the samplers'
    default and :func:`~bayes_subsample.samplers.suggest_step_size`)."""
    rng = np.random.default_rng(0)
    p = len(theta_map)
    return [theta_map + scale_draws(chol, rng.standard_normal(p)) for _ in range(n_points)]


def noise_rows(n_data):
    """The ``min(n, NOISE_ROWS)`` rows (sorted, drawn without replacement from a
    fixed seed) on which the gradient noise and the curvature at the Laplace
    draws are measured."""
    rng = np.random.default_rng(1)
    return np.sort(rng.choice(n_data, size=int(min(n_data, NOISE_ROWS)), replace=False))


def gradient_noise(model, cv, chol, precondition, batch_size, points=None, rows=None):
    """``(v, n_evals)``: ``v`` the largest variance, over the coordinates the
    dynamics move, of the control-variate gradient estimate's noise on a
    minibatch of ``batch_size`` iid rows, ``n^2 / b Var_k(grad d_k)``
    (``L^T grad d_k`` when ``precondition``), averaged over ``points``
    (default :func:`laplace_points` around ``cv.theta_star``), the variance
    over ``rows`` (default :func:`noise_rows`). The residual gradients are
    taken in chunks of at most 2^18 entries (no ``rows x p`` array on wide
    models). Deterministic (fixed seeds).

    Near the mode with order-2 control variates on tall data ``v`` is tiny;
    it grows as ``p / b`` with order 1 (wide models: each residual gradient
    is ``O(|theta - theta*|)``), which the curvature rule alone ignores."""
    if points is None:
        points = laplace_points(cv.theta_star, chol)
    n, p = model.n_data, model.n_params
    idx = noise_rows(n) if rows is None else rows

    def residual_gradients(theta, chunk):
        G = cv.residuals(theta, chunk)[1]
        if precondition:
            G = G * chol if np.ndim(chol) == 1 else G @ chol
        return G

    var = np.zeros(p)
    for theta in points:
        var += _row_moments(lambda chunk: residual_gradients(theta, chunk), idx, p)[1]
    v = float(np.max(var)) / len(points) * n * (n / batch_size)
    return v, len(points) * len(idx) * model.compiled.cv_cost


class StepRule(NamedTuple):
    """The ingredients of the default step (:func:`step_rule`)."""

    #: the curvature the step is set by: ``max(lam_mode, lam_draws / CURVATURE_SLACK)``
    lam: float
    #: ``min(1, lam / v)`` (``min(1, b / n)`` without control variates)
    q: float
    #: the largest curvature at the mode (in the dynamics' coordinates)
    lam_mode: float
    #: the control variates' gradient noise ``v`` (nan without them)
    noise: float
    #: per-datum evaluations spent
    n_evals: int
    #: the largest curvature at the Laplace draws
    lam_draws: float = float("nan")


def step_rule(model, theta_map, chol_cov, precision, diagonal, precondition, cv, batch_size):
    """The curvature and noise behind the SG step size at the Laplace
    approximation ``N(theta_map, chol_cov chol_cov^T)``: the largest curvature
    at the mode (:func:`max_curvature`), ``lam_mode``, and at the
    :func:`laplace_points`, ``lam_draws``: ``lam_mode`` times the largest
    ratio of the curvature there to the curvature at the mode, both on the
    :func:`noise_rows` (:func:`curvature_at`; the ratio cancels the upward
    bias of the largest eigenvalue of a subsample's Hessian, 1.2 to 1.4 at the
    mode on 2,048 rows of covtype or of 29-parameter synthetic data).
    ``lam = max(lam_mode, lam_draws / CURVATURE_SLACK)``; ``q = min(1, lam /
    v)`` with ``v`` the control variates' ``cv`` gradient noise at the same
    points and rows (:func:`gradient_noise`), ``min(1, b / n)`` without them
    (``cv`` None; 1 without a ``batch_size``)."""
    passes = model.n_full_passes
    lam_mode = max_curvature(model, theta_map, chol_cov if diagonal else None, precondition,
                             precision)
    points = laplace_points(theta_map, chol_cov)
    rows = noise_rows(model.n_data)
    sub = model if len(rows) == model.n_data else _RowsModel(model, rows)
    at_mode = curvature_at(sub, theta_map, chol_cov, precondition, diagonal)
    lam_draws = lam_mode * max(curvature_at(sub, t, chol_cov, precondition, diagonal)
                               for t in points) / at_mode
    lam = max(lam_mode, lam_draws / CURVATURE_SLACK)
    n_evals = (model.n_full_passes - passes) * model.n_data + getattr(sub, "n_evals", 0)
    if cv is None:
        q = min(1.0, batch_size / model.n_data) if batch_size else 1.0
        return StepRule(lam, q, lam_mode, float("nan"), n_evals, lam_draws)
    v, ev = gradient_noise(model, cv, chol_cov, precondition, batch_size, points, rows)
    q = 1.0 if not (np.isfinite(v) and v > lam) else lam / v
    return StepRule(lam, q, lam_mode, v, n_evals + ev, lam_draws)


def curvature_and_noise(model, theta_map, chol_cov, precision, diagonal, precondition, cv,
                        batch_size):
    """``(lam, q, n_evals)`` of :func:`step_rule`."""
    rule = step_rule(model, theta_map, chol_cov, precision, diagonal, precondition, cv,
                     batch_size)
    return rule.lam, rule.q, rule.n_evals


def _largest_eigenvalue(op, tol):
    """The largest eigenvalue of a symmetric operator (Lanczos, ARPACK; dense
    below 3 parameters)."""
    from scipy.sparse.linalg import ArpackNoConvergence, eigsh

    p = op.shape[0]
    if p <= 2:
        return float(np.max(np.linalg.eigvalsh(op.matmat(np.eye(p)))))
    try:
        return float(eigsh(op, k=1, which="LA", tol=tol, v0=np.ones(p),
                           return_eigenvectors=False)[0])
    except ArpackNoConvergence as e:
        if len(e.eigenvalues) == 0:
            raise ValueError("the largest curvature of the posterior was not found (Lanczos "
                             "did not converge)") from e
        return float(np.max(e.eigenvalues))


def _whitened(op, chol, precondition):
    """``L^T P L`` as an operator (``L = chol``, dense or diagonal), or ``P``."""
    from scipy.sparse.linalg import LinearOperator

    if not precondition:
        return op
    L = np.asarray(chol, dtype=np.float64)
    if L.ndim == 1:
        mv = lambda v: L * op.matvec(L * np.ravel(v))            # noqa: E731
    else:
        mv = lambda v: L.T @ op.matvec(L @ np.ravel(v))         # noqa: E731
    return LinearOperator(op.shape, matvec=mv, rmatvec=mv, dtype=np.float64)


def _finite_difference_operator(model, theta):
    """The posterior precision at ``theta`` as an operator: central differences
    of the full-data gradient of the log posterior (two passes a product)."""
    from scipy.sparse.linalg import LinearOperator

    theta = np.asarray(theta, dtype=np.float64)
    scale = 1e-5 * max(1.0, float(np.max(np.abs(theta))))

    def mv(v):
        v = np.ravel(v)
        norm = float(np.linalg.norm(v))
        if norm == 0.0:
            return np.zeros_like(v)
        h = scale / norm
        gp = model.log_posterior_and_grad(theta + h * v)[1]
        gm = model.log_posterior_and_grad(theta - h * v)[1]
        return -(gp - gm) / (2 * h)

    p = model.n_params
    return LinearOperator((p, p), matvec=mv, rmatvec=mv, dtype=np.float64)


class _RowsModel:
    """The posterior precision of a model estimated from some of its rows: the
    rows' Hessian sum scaled by ``n / m`` plus the prior's precision (what
    :func:`curvature_at` needs: ``neg_hessian_log_posterior`` and, for the
    GLMs, ``neg_hessian_operator``). ``n_evals`` counts the rows' evaluations."""

    def __init__(self, model, rows):
        self.sub = model.subset(rows)
        self.scale = model.n_data / len(rows)
        self.prior = model.prior
        self.n_params = model.n_params
        self.max_cv_order = model.max_cv_order
        self.n_evals = 0
        if hasattr(self.sub, "neg_hessian_operator"):
            self.neg_hessian_operator = self._operator

    def _count(self):
        return self.sub.n_full_passes

    def neg_hessian_log_posterior(self, theta):
        before = self._count()
        P = self.sub.neg_hessian_log_posterior(theta)
        self.n_evals += (self._count() - before) * self.sub.n_data
        prior = self.prior.neg_hessian()
        return prior + self.scale * (P - prior)

    def log_posterior_and_grad(self, theta):
        before = self._count()
        ll, g, _ = self.sub.full_pass(theta, gradient=True)
        self.n_evals += (self._count() - before) * self.sub.n_data
        return (self.scale * ll + self.prior.log_prob(theta),
                self.scale * g + self.prior.grad_log_prob(theta))

    def _operator(self, theta):
        from scipy.sparse.linalg import LinearOperator

        op = self.sub.neg_hessian_operator(theta)
        prec = np.asarray(self.prior.precision, dtype=np.float64)
        scale = self.scale

        def mv(v):
            v = np.ravel(v)
            return prec * v + scale * (op.matvec(v) - prec * v)

        return LinearOperator(op.shape, matvec=mv, rmatvec=mv, dtype=np.float64)


def curvature_at(model, theta, chol, precondition, diagonal, tol=1e-2):
    """The largest eigenvalue of the posterior precision at ``theta``
    (``-d^2 log pi / d theta^2``) in the coordinates the dynamics move: ``P``,
    or ``L^T P L`` when ``precondition`` (``L = chol``). From the dense matrix
    for models with per-datum Hessians (one pass) and small models (the
    numerical Hessian), else by Lanczos on products with ``P`` (the GLMs'
    operator, two reads of X a product, or finite differences of the
    gradient, two passes); clipped below at a tiny positive value (a draw where
    the posterior is locally flat does not bound the step)."""
    if not diagonal and (model.max_cv_order >= 2 or model.n_params <= DENSE_CURVATURE_MAX):
        P = model.neg_hessian_log_posterior(theta)
        if precondition:
            L = np.asarray(chol)
            P = L.T @ P @ L if L.ndim == 2 else L[:, None] * P * L[None, :]
        lam = float(np.max(np.linalg.eigvalsh(0.5 * (P + P.T))))
    else:
        op = (model.neg_hessian_operator(theta) if hasattr(model, "neg_hessian_operator")
              else _finite_difference_operator(model, theta))
        lam = _largest_eigenvalue(_whitened(op, chol, precondition), tol)
    return lam if np.isfinite(lam) else float("inf")


def max_curvature(model, theta, chol, precondition, precision):
    """``lambda_max`` of the posterior precision ``P`` at the mode ``theta``
    in the coordinates the dynamics move: ``theta`` itself, or ``z`` with
    ``theta = theta_map + L z`` when ``precondition``.

    ``chol`` None: ``precision`` is the dense ``P`` and ``L`` its Cholesky
    factor's inverse transpose, so preconditioned ``lam = 1``. ``chol`` a
    ``(p,)`` vector (the diagonal Laplace approximation: ``L = diag(chol)``,
    ``chol = diag(P)^-1/2``): ``lambda_max(L P L)`` (or of ``P``) by Lanczos
    (ARPACK) on ``model.neg_hessian_operator(theta)``, tolerance ``1e-3``;
    it is at least 1 when preconditioned, more where features correlate."""
    if chol is None:
        lam = 1.0 if precondition else \
            float(np.max(np.linalg.eigvalsh(0.5 * (precision + precision.T))))
    else:
        lam = _largest_eigenvalue(_whitened(model.neg_hessian_operator(theta), chol,
                                            precondition), 1e-3)
    if not (np.isfinite(lam) and lam > 0):
        raise ValueError("the posterior precision at the mode is not positive definite")
    return lam


def refuse_if_too_slow(sampler, model, rule, batch_size, step, control_variates,
                       friction=None):
    """Raise a :class:`~bayes_subsample.exceptions.SamplingError` before any
    draw when the default ``step`` is more than :data:`MAX_SLOWDOWN` times
    smaller than the same rule's step on a Gaussian posterior with the mode's
    curvature and exact gradients (the curvature at the Laplace draws,
    ``rule.lam / rule.lam_mode``, and the gradient noise, ``1 / rule.q``, make
    it so small that the chains cannot mix), or when that curvature ratio
    alone exceeds :data:`MAX_SLOWDOWN` (EWSG's step, bounded by its friction,
    shrinks less, but a step set from a few draws' curvature cannot be trusted
    where the curvature varies that much: on iris setosa against the rest its
    chains ran away at it). The message names the causes, the batch size that
    would remove the noise where one below half the data does, and the
    samplers to use instead. Returns the slowdown otherwise."""
    name = type(sampler).__name__
    if friction is None:
        friction = getattr(sampler, "friction", None)
    gaussian_step = step_from_curvature(sampler.name, rule.lam_mode, 1.0, friction=friction)
    # a zero step (the curvature at a Laplace draw overflowed) is an infinite slowdown
    slowdown = gaussian_step / step if step > 0 else np.inf
    curved = rule.lam / rule.lam_mode
    if not (slowdown > MAX_SLOWDOWN or curved > MAX_SLOWDOWN):
        return slowdown
    causes = []
    if rule.lam > 2 * rule.lam_mode:
        causes.append(
            f"the posterior's curvature at draws of its Laplace approximation reaches "
            f"{rule.lam_draws / rule.lam_mode:.3g} times that at the mode (the posterior is far "
            "from Gaussian: separable data, or parameters only the prior bounds)")
    if rule.q < 1:
        needed = batch_size / rule.q
        what = "control variates'" if control_variates else "minibatch"
        causes.append(
            f"the {what} gradient noise on minibatches of {batch_size} rows is "
            f"{1 / rule.q:.3g} times what that curvature allows"
            + (f" (a batch_size of about {needed:.3g} of the {model.n_data} rows would remove "
               "this part)" if needed < 0.5 * model.n_data else
               f" (no batch smaller than the data, {model.n_data} rows, removes it)"))
    if not np.isfinite(slowdown):
        effect = ("the default step size would be zero (the curvature overflowed at a draw "
                  "of the Laplace approximation)")
    elif slowdown > MAX_SLOWDOWN:
        effect = (f"the default step size would be {slowdown:.3g} times smaller than on a "
                  f"Gaussian posterior and each chain would need about {slowdown:.3g} times as "
                  "many iterations per independent draw")
    else:
        effect = ("a step set from the curvature at a few draws would not hold where the "
                  "chains go (they meet steeper regions)")
    raise SamplingError(
        f"{name} refuses this posterior at these settings: {' and '.join(causes)}, so "
        f"{effect}, and its draws could not be trusted. Use 'nuts' or 'hmc' (exact, full "
        "data), or pass step_size explicitly to run anyway (the check at the end of warmup "
        "still applies).")


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
