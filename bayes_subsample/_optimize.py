"""Posterior mode (MAP) and Laplace approximation from the compiled full-data passes."""
from __future__ import annotations

import warnings

import numpy as np
from scipy import optimize

from ._linalg import factor_diagonal, factor_precision

__all__ = ["find_map", "laplace", "diagonal_mode"]


def find_map(model, theta0=None, *, method=None, tol=1e-8, max_iter=200, scale=None,
             gtol=None):
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
        Gradient tolerance (relative: times ``n``).
    scale : array-like of shape (n_params,), optional
        ``"lbfgs"``: search in ``z`` with ``theta = theta0 + scale * z`` (a
        diagonal preconditioner, e.g. ``1 / sqrt(diag(P))`` for the posterior
        precision ``P``: wide models whose coordinates differ in scale by
        orders of magnitude).
    gtol : float, optional
        Absolute tolerance on ``max |gradient|`` in the search's variables
        (``z`` with ``scale``), instead of ``tol n``.

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
    if scale is not None:
        if method != "lbfgs":
            raise ValueError("scale is for method='lbfgs'")
        scale = np.asarray(scale, dtype=np.float64)
        if scale.shape != (p,) or not np.all(np.isfinite(scale) & (scale > 0)):
            raise ValueError("scale must be a positive finite vector of one entry per "
                             "parameter")
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
            start_error.append(model.overflow_error("at the starting point of the MAP search",
                                                    t))
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
    if gtol is None:
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
    if res is None and scale is not None:
        origin = theta

        def fg_z(z):
            f, g = fg(origin + scale * z)
            return f, g * scale

        res = optimize.minimize(fg_z, np.zeros(p), jac=True, method="L-BFGS-B",
                                options={"gtol": gtol, "ftol": 1e-15,
                                         "maxiter": max_iter * 10})
        res.x = origin + scale * res.x
    elif res is None:
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


def laplace(model, theta0=None, diagonal=False):
    """MAP and Gaussian (Laplace) approximation of the posterior.

    Returns a dict with ``theta_map``, ``precision`` (``-Hessian`` of the log
    posterior at the mode), ``cov``, ``chol_cov`` (lower Cholesky factor of
    ``cov``) and ``n_evals``. With ``diagonal`` (wide models: no ``p x p``
    matrix), the precision is the Hessian's diagonal and every entry a (p,)
    vector: see :func:`diagonal_mode`.
    """
    if diagonal:
        theta, (ll, g, hd), n_evals, converged = diagonal_mode(model, theta0)
        f = factor_diagonal(-hd + model.prior.precision, regulariser=model.prior.precision)
        return {"theta_map": theta, "precision": f.precision, "cov": f.cov,
                "chol_cov": f.chol_cov, "n_evals": n_evals,
                "map_info": {"n_evals": n_evals, "success": converged}}
    theta, info = find_map(model, theta0)
    precision = model.neg_hessian_log_posterior(theta)
    if not np.isfinite(precision).all():
        # (SciPy's Cholesky would only say "array must not contain infs or NaNs")
        raise model.overflow_error("in the Hessian at the posterior mode", theta)
    n_evals = info["n_evals"] + model.n_data
    # not positive definite (flat directions): regularised by the prior precision
    f = factor_precision(precision, regulariser=model.prior.precision)
    return {"theta_map": theta, "precision": f.precision, "cov": f.cov,
            "chol_cov": f.chol_cov, "n_evals": n_evals, "map_info": info}


def diagonal_mode(model, theta0=None, tol=None, max_iter=200):
    """The posterior mode of a wide model without ``p x p`` matrices: L-BFGS in
    the coordinates whitened by the diagonal of the posterior precision at
    ``theta0`` (one pass with the Hessian's diagonal, ``model.full_pass(...,
    hessian="diag")``), then one more such pass at the mode.

    It stops when the diagonal Newton decrement ``g^T D^-1 g`` (``D`` the
    precision's diagonal at ``theta0``) is below ``tol``, by default
    ``max(0.01, 0.05 p)``, the tolerance of HMC-ECS's Newton refinement: each
    coordinate of the scaled gradient is then at most ``sqrt(tol / p)``.

    Returns ``(theta, (ll, grad, hess_diag) at theta, n_evals, converged)``;
    ``converged`` tells whether the decrement with the precision's diagonal at
    the returned theta is below ``tol``. ``max_iter=0``: no search, the sums at
    ``theta0`` (one pass).
    """
    p = model.n_params
    prec = model.prior.precision
    if tol is None:
        tol = max(0.01, 0.05 * p)
    theta = np.zeros(p) if theta0 is None else model.check_theta(theta0).copy()
    ll, g, hd = model.full_pass(theta, gradient=True, hessian="diag")
    n_evals = model.n_data
    P = -hd + prec
    if not (np.isfinite(ll) and np.all(np.isfinite(g)) and np.all(np.isfinite(P))):
        raise model.overflow_error("at the starting point of the MAP search", theta)
    grad = g - prec * theta
    P = np.where(P > 0, P, prec)
    if max_iter > 0 and float(grad @ (grad / P)) >= tol:
        theta, info = find_map(model, theta, method="lbfgs", scale=1.0 / np.sqrt(P),
                               gtol=float(np.sqrt(tol / p)), max_iter=max_iter)
        n_evals += info["n_evals"]
        ll, g, hd = model.full_pass(theta, gradient=True, hessian="diag")
        n_evals += model.n_data
    grad = g - prec * theta
    P = -hd + prec
    converged = bool(np.all(P > 0) and float(grad @ (grad / P)) < tol)
    return theta, (ll, g, hd), n_evals, converged
