"""Posterior mode (MAP) and Laplace approximation from the compiled full-data passes."""
from __future__ import annotations

import warnings

import numpy as np
from scipy import optimize

from ._linalg import factor_precision

__all__ = ["find_map", "laplace"]


def find_map(model, theta0=None, *, method=None, tol=1e-8, max_iter=200):
    """Posterior mode of ``model``.

    Parameters
    ----------
    model : Model
    theta0 : array-like, optional
        Starting point (default zeros).
    method : {"newton", "lbfgs"}, optional
        ``"newton"`` (trust-region Newton with the analytic Hessian; default for
        GLMs, one fused pass per iteration) or ``"lbfgs"`` (gradient only;
        default for user models).
    tol : float
        Gradient tolerance.

    Returns
    -------
    theta : ndarray (n_params,)
    info : dict
        ``n_evals`` (per-datum evaluations = n x passes), ``n_iter``, ``success``.
    """
    p = model.n_params
    theta = np.zeros(p) if theta0 is None else model.check_theta(theta0).copy()
    if method is None:
        method = "newton" if model.analytic_hessian else "lbfgs"
    if method not in ("newton", "lbfgs"):
        raise ValueError(f"method must be 'newton' or 'lbfgs', got {method!r}")
    n_passes = [0]
    cache = {}
    start_error = []       # the model's own error at the starting point (not scipy's)
    # Hessians only while the Newton search runs (not in its L-BFGS fallback)
    with_hessian = [method == "newton"]

    def fg(t):
        if with_hessian[0] and "fg" in cache and np.array_equal(cache["t"], t):
            f, g = cache["fg"]      # this point's pass was made for the Hessian
            return f, g.copy()
        n_passes[0] += 1
        want_h = with_hessian[0]
        with np.errstate(over="ignore", invalid="ignore"):
            ll, g, h = model.full_pass(t, gradient=True, hessian=want_h)
            lp = ll + model.prior.log_prob(t)
            gp = g + model.prior.grad_log_prob(t)
        finite = np.isfinite(lp) and np.isfinite(gp).all() and (
            not want_h or np.isfinite(h).all())
        if n_passes[0] == 1 and not finite:
            # at the start (theta = 0 unless given): the data's or the prior's scale
            start_error.append(model.overflow_error("at the starting point of the MAP search"))
            raise start_error[0]
        out = (-lp, -gp) if finite else (np.inf, np.zeros_like(t))
        if want_h:
            cache["t"] = t.copy()
            cache["h"] = -h + model.prior.neg_hessian()
            cache["fg"] = out
        return out

    def hess(t):
        # scipy may ask for a new point's Hessian before its value and gradient:
        # one pass gives all three (two passes per iteration otherwise)
        if not ("t" in cache and np.array_equal(cache["t"], t)):
            fg(t)
        return cache["h"]

    # scale the tolerance with n: gradients of sums grow like n
    gtol = tol * max(1.0, float(model.n_data))
    res = None
    fell_back = False
    if method == "newton":
        try:
            res = optimize.minimize(fg, theta, jac=True, hess=hess, method="trust-exact",
                                    options={"gtol": gtol, "maxiter": max_iter})
        except (np.linalg.LinAlgError, UnboundLocalError, ZeroDivisionError):
            # scipy's trust-exact can fail inside its subproblem on nearly
            # singular, badly scaled Hessians: the gradient-only search follows
            res, fell_back = None, True
            with_hessian[0] = False
        except ValueError as e:
            if start_error:
                raise
            # scipy's own check of the Hessian ("array must not contain infs or
            # NaNs"): it overflowed at a trial point. L-BFGS-B does not get further
            # on such scales (it stops at the start, reporting success), so this
            # is the data's or the prior's scale, said as such.
            raise model.overflow_error(f"in the MAP search (scipy: {e})") from e
    if res is None:
        # ftol ~ eps: stop on the gradient tolerance, not on L-BFGS-B's default
        # relative-reduction test (which stops with max |grad| >> gtol on large n)
        res = optimize.minimize(fg, theta, jac=True, method="L-BFGS-B",
                                options={"gtol": gtol, "ftol": 1e-15,
                                         "maxiter": max_iter * 10})
    grad_norm = float(np.max(np.abs(res.jac))) if res.jac is not None else np.nan
    # after trust-exact failed, L-BFGS-B can stop at a badly scaled start and
    # report success: there only the gradient counts
    success = (bool(res.success) and not fell_back) or grad_norm <= gtol * 10
    if not success:
        warnings.warn(f"MAP search did not converge ({res.message}); max |grad| = {grad_norm:.3g}",
                      RuntimeWarning, stacklevel=2)
    return res.x, {"n_evals": n_passes[0] * model.n_data, "n_iter": int(res.nit),
                   "success": success}


def laplace(model, theta0=None):
    """MAP and Gaussian (Laplace) approximation of the posterior.

    Returns a dict with ``theta_map``, ``precision`` (``-Hessian`` of the log
    posterior at the mode), ``cov``, ``chol_cov`` (lower Cholesky factor of
    ``cov``) and ``n_evals``.
    """
    theta, info = find_map(model, theta0)
    precision = model.neg_hessian_log_posterior(theta)
    n_evals = info["n_evals"] + model.n_data
    # not positive definite (flat directions): regularised by the prior precision
    f = factor_precision(precision, regulariser=model.prior.precision)
    return {"theta_map": theta, "precision": f.precision, "cov": f.cov,
            "chol_cov": f.chol_cov, "n_evals": n_evals, "map_info": info}
