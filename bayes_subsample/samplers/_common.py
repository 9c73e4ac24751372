"""Small pieces shared by several kernels."""
from __future__ import annotations

import math

import numpy as np

DIVERGENCE_THRESHOLD = 1000.0


def log_uniform_open(rng):
    """``log u`` for ``u`` uniform on the open interval (0, 1)."""
    u = rng.random()
    while u == 0.0:
        u = rng.random()
    return math.log(u)


def accept_prob_from_log_ratio(log_ratio):
    if not np.isfinite(log_ratio):
        return 0.0 if (np.isnan(log_ratio) or log_ratio < 0) else 1.0
    return 1.0 if log_ratio >= 0 else math.exp(log_ratio)


def laplace_shared(model):
    """The ``prepare`` result most kernels start from: MAP, Laplace covariance,
    posterior precision (one Newton / L-BFGS run plus one Hessian pass)."""
    from .._optimize import laplace

    lap = laplace(model)
    return {
        "theta_init": lap["theta_map"],
        "init_cov": lap["cov"],
        "precision": lap["precision"],
        "chol_cov": lap["chol_cov"],
        "n_evals": lap["n_evals"],
    }


def leapfrog(theta, p, grad, step_size, n_steps, velocity, logp_and_grad):
    """Leapfrog for ``H = -logp(theta) + K(p)``; ``grad`` is grad logp at theta.

    Returns ``(theta, p, logp, grad, n_grad_evals)``; stops early (returning
    non-finite logp) if the log density becomes non-finite.
    """
    p = p + 0.5 * step_size * grad
    logp = np.nan
    for i in range(n_steps):
        theta = theta + step_size * velocity(p)
        logp, grad = logp_and_grad(theta)
        if not np.isfinite(logp) or not np.all(np.isfinite(grad)):
            return theta, p, -np.inf, grad, i + 1
        p = p + (step_size if i < n_steps - 1 else 0.5 * step_size) * grad
    return theta, p, logp, grad, n_steps
