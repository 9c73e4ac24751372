"""Bayesian linear regression with the Gaussian noise's scale sampled.

``theta = (beta, t)``: the coefficients (intercept last, a virtual column of
ones as for the GLMs), then ``t = log(sigma / s)``, the noise's log scale
relative to a fixed scale ``s`` of the data (``noise_reference``, by default
the standard deviation of ``y``). Every sampler requires a zero-mean
independent Gaussian prior (:class:`~bayes_subsample.models.GaussianPrior`);
on ``t`` it is a log-normal prior on ``sigma`` centred on the data's scale:
``log(sigma / s) ~ N(0, noise_prior_scale^2)``.

The per-datum terms (``l_k = -log sigma - log(2 pi) / 2 - (y_k - x_k beta)^2 /
(2 sigma^2)``), their Taylor control variates and the full-data sums run on the
compiled :class:`CyGaussianScale` (``_cylinear.pyx``, terms in
``_scale_terms.pxd``). Given beta, every full-data sum is a function of three
sums over the data (``sum r^2``, ``sum r x``, ``sum x x^T``, ``r = y - X
beta``), which follow exactly from sufficient statistics at a reference
``beta0``: the model computes them once (one pass with ``X^T X``, one with the
residuals at the least-squares ``beta0``) and its full passes then cost
``O(p^2)`` without reading the data (``full_pass_cost``).

Per-row weights (``weights``, ``sample_weight``) make the log-likelihood ``sum_k
w_k l_k``: every term, derivative (in the coefficients and in ``t``), curvature,
control-variate residual and full-data sum is weighted, the sufficient
statistics are weighted sums, and the number of rows in the full-data sums
(``-n log sigma``) is the sum of the weights, so integer weights are exactly
duplicated rows.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import linalg, optimize, sparse, special

from .._threads import available_cores
from ._base import GaussianPrior, RowsModel, coefficient_scales
from ._cylinear import CyGaussianScale
from ._glm import (check_design, check_targets, check_weights, data_fingerprint,
                   max_weight, normal_equations)
from ._rows import make_rows

__all__ = ["GaussianScaleRegressionModel", "NOISE_PRIOR_SCALE", "data_scale"]

#: the default prior sd of ``log(sigma / s)``: sigma within a factor ``exp(3.9)``
#: (50) of the data's scale with probability 0.95
NOISE_PRIOR_SCALE = 2.0

#: the most coefficients (intercept included) for which the model keeps the
#: sufficient statistics (a p x p matrix; beyond it, full passes read the rows)
STATISTICS_MAX = 2000

#: rows per chunk of the residual scans (bounded float64 temporaries)
_CHUNK = 1 << 16


def data_scale(y, weights=None):
    """The default scale ``s`` of the noise prior: the standard deviation of
    ``y``; for constant ``y`` its largest absolute value, or 1 for ``y = 0``.
    With per-row ``weights`` (>= 0, not all zero): the weighted standard
    deviation ``sqrt(sum w (y - ybar_w)^2 / sum w)`` (that of the rows repeated
    by integer weights), and the largest ``|y|`` over the rows of positive
    weight."""
    y = np.asarray(y, dtype=np.float64)
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        total = float(np.sum(w)) if w.size else 0.0
        if total > 0 and np.isfinite(total):
            mean = float(w @ y) / total
            sd = math.sqrt(max(float(w @ (y - mean) ** 2) / total, 0.0))
            if sd > 0 and np.isfinite(sd):
                return sd
            y = y[w > 0]
    sd = float(np.std(y)) if y.size else 0.0
    if sd > 0 and np.isfinite(sd):
        return sd
    big = float(np.max(np.abs(y))) if y.size else 0.0
    return big if big > 0 and np.isfinite(big) else 1.0


class GaussianScaleRegressionModel(RowsModel):
    """Bayesian linear regression posterior with the noise scale ``sigma``
    sampled: ``y_k ~ N(x_k^T beta, sigma^2)``, ``theta = (beta, log(sigma / s))``.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Design matrix (float32 or float64; kept in its dtype). A scipy.sparse
        matrix is read as CSR without densifying it (see
        :class:`~bayes_subsample.models.GLM`).
    y : array-like of shape (n_samples,)
        Targets.
    fit_intercept : bool, default=True
        Add an intercept, the entry of ``theta`` after the coefficients.
    prior_scale : float or array-like of shape (n_features,), default=10.0
        Prior standard deviation of every coefficient, or of each.
    intercept_prior_scale : float, default=10.0
        Prior standard deviation of the intercept.
    noise_prior_scale : float, default=2.0
        Prior standard deviation of ``t = log(sigma / s)`` (the last entry of
        ``theta``): a log-normal prior on ``sigma`` with median ``s``.
    noise_reference : float, optional
        ``s``, the scale the noise prior is centred on (default
        :func:`data_scale`: the standard deviation of ``y``).
    sufficient_statistics : {"auto", True, False}, default="auto"
        Keep ``X^T X`` and the residual sums at the least-squares fit so that
        full-data sums cost ``O(p^2)`` and read no data (two passes when the
        model is built). ``"auto"``: with at most 2,000 coefficients.
    n_threads : int, optional
        Threads for passes over the rows (default: all available cores).
        Results do not depend on it.
    weights : array-like of shape (n_samples,), optional
        Per-row weights ``w_k >= 0`` (``sample_weight``): the log-likelihood is
        ``sum_k w_k l_k``, so an integer weight counts its row that many times
        (the number of rows in the likelihood is ``weight_sum``). The default
        ``noise_reference`` is then the weighted standard deviation of ``y``.

    Attributes
    ----------
    noise_reference : float
        ``s``.
    weight_sum : float
        ``sum_k w_k`` (``n_data`` without weights): the number of observations
        the likelihood counts.
    full_pass_cost : int
        Per-datum evaluations a full-data pass is worth: ``n`` when it reads
        the rows, ``p + 1`` with the sufficient statistics (the ``O(p^2)`` work
        of ``p`` rows).

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample.models import GaussianScaleRegressionModel
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = X @ [1.0, -1.0] + 0.5 * rng.normal(size=200)
    >>> model = GaussianScaleRegressionModel(X, y)
    >>> model.n_params                      # two coefficients, intercept, log(sigma / s)
    4
    >>> post = model.exact_posterior()
    >>> bool(abs(post["sigma_mean"] - 0.5) < 0.1)
    True
    """

    family = "gaussian_scale"
    max_cv_order = 2
    #: the Hessian sum's diagonal in one pass (``full_pass(hessian="diag")``)
    diagonal_passes = True
    analytic_hessian = True

    def __init__(self, X, y, *, fit_intercept=True, prior_scale=10.0,
                 intercept_prior_scale=10.0, noise_prior_scale=NOISE_PRIOR_SCALE,
                 noise_reference=None, sufficient_statistics="auto", n_threads=None,
                 weights=None):
        self.X = check_design(X, accept_sparse=True)
        self.y = check_targets(y, self.X.shape[0], "gaussian")
        self.fit_intercept = bool(fit_intercept)
        self.n_data, self.n_features = self.X.shape
        self.n_cols = self.n_features + int(self.fit_intercept)
        self.n_params = self.n_cols + 1
        self.weights = check_weights(weights, self.n_data)
        s = (data_scale(self.y, self.weights) if noise_reference is None
             else float(noise_reference))
        if not (np.isfinite(s) and s > 0 and np.isfinite(math.log(s))):
            raise ValueError(f"noise_reference must be a finite float > 0, got {noise_reference!r}")
        self.noise_reference = s
        for name, v in (("intercept_prior_scale", intercept_prior_scale),
                        ("noise_prior_scale", noise_prior_scale)):
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite float > 0, got {v!r}")
        scales = np.empty(self.n_params)
        scales[:self.n_features] = coefficient_scales(prior_scale, self.n_features)
        if self.fit_intercept:
            scales[self.n_features] = float(intercept_prior_scale)
        scales[-1] = float(noise_prior_scale)
        self.prior = GaussianPrior(scales, self.n_params)
        if sufficient_statistics not in ("auto", True, False):
            raise ValueError("sufficient_statistics must be 'auto', True or False, got "
                             f"{sufficient_statistics!r}")
        self.sufficient_statistics = sufficient_statistics
        self.n_threads = available_cores() if n_threads is None else max(1, int(n_threads))
        self._cy = self._make_compiled()
        self._stats = None
        self._max_residual = {}
        if sufficient_statistics is True or (sufficient_statistics == "auto"
                                             and self.n_cols <= STATISTICS_MAX):
            self._stats = self.statistics()
            self._cy.set_statistics(*self._stats)

    def _make_compiled(self):
        cy = CyGaussianScale(make_rows(self.X, self.fit_intercept), self.y,
                             math.log(self.noise_reference),
                             weight=getattr(self, "weights", None))
        stats = self.__dict__.get("_stats")
        if stats is not None:          # unpickled: the statistics travel with the model
            cy.set_statistics(*stats)
        return cy

    @property
    def compiled(self):
        """The compiled model (:class:`CyGaussianScale`) that sampler kernels take."""
        return self._cy

    @property
    def weight_sum(self):
        """``sum_k w_k``: the number of observations in the likelihood (``n_data``
        without weights)."""
        return self._cy.weight_sum

    @property
    def full_pass_cost(self):
        return self.n_cols + 1 if self._stats is not None else self.n_data

    def fingerprint(self):
        fp = super().fingerprint()
        fp.update(family=self.family, fit_intercept=str(self.fit_intercept),
                  noise_reference=repr(self.noise_reference), **data_fingerprint(self))
        return fp

    # ---- the sufficient statistics ---------------------------------------------------
    def statistics(self):
        """``(beta0, S_rr, S_rx, S_xx)``: ``S_xx = [X 1]^T [X 1]``, ``beta0`` its
        least-squares coefficients (minimum norm: collinear columns allowed) and
        ``S_rr = sum r^2``, ``S_rx = sum r x`` of the residuals ``r = y - X
        beta0``, summed directly (not expanded from ``y^T y``, which would lose
        the digits a good fit leaves in ``S_rr``). Two passes over the data. With
        weights: the weighted sums (``[X 1]^T W [X 1]``, ``sum w r^2``, ``sum w r
        x``) and the weighted least-squares ``beta0``."""
        if self._stats is not None:
            return tuple(np.copy(a) if isinstance(a, np.ndarray) else a for a in self._stats)
        G, b = normal_equations(self.X, self.y, self.fit_intercept,
                                weights=getattr(self, "weights", None))
        self.count_passes(1)
        if not (np.isfinite(G).all() and np.isfinite(b).all()):
            raise self.overflow_error("in the sums X^T X, X^T y")
        beta0 = linalg.lstsq(G, b, cond=None, lapack_driver="gelsy")[0]
        srr, srx, _ = self._cy.raw_sums_at(beta0, n_threads=self.pass_threads())
        if not (np.isfinite(srr) and np.isfinite(srx).all()):
            raise self.overflow_error("in the residual sums at the least-squares fit")
        return beta0, float(srr), srx, G

    # ---- per-datum terms (compiled) ----------------------------------------------------
    def noise_scale(self, theta):
        """``sigma = s exp(t)`` of parameter vectors ``theta`` (..., n_params)."""
        return self.noise_reference * np.exp(np.asarray(theta, dtype=np.float64)[..., -1])

    def linear_predictor(self, theta, X=None):
        """``eta = X beta`` (intercept included) for ``X`` (default: the model's data)."""
        theta = self.check_theta(theta)
        if X is None:
            return self._cy.eta(theta)
        beta = theta[: self.n_features]
        eta = (np.asarray(X @ beta, dtype=np.float64).reshape(-1) if sparse.issparse(X)
               else np.asarray(X, dtype=np.float64) @ beta)
        return eta + theta[self.n_features] if self.fit_intercept else eta

    def cv_residuals_and_grads(self, theta, theta_star, idx, order):
        self._check_cv_order(order)
        idx = self.check_indices(idx)
        d, dt = self._cy.term_derivatives(order, self.check_theta(theta_star),
                                          self.check_theta(theta), idx)
        return d, np.column_stack([dt[:, :1] * self._cy.gather(idx), dt[:, 1]])

    def full_pass(self, theta, *, gradient=True, hessian=False, loglik=True):
        """``(sum l_k, sum grad l_k, sum Hessian l_k)``: from the sufficient
        statistics in ``O(p^2)`` (no data read, not counted as a pass), else one
        read of the rows. ``hessian="diag"``: the Hessian sum's diagonal."""
        diag = isinstance(hessian, str)
        if diag and hessian != "diag":
            raise ValueError(f"hessian must be a bool or 'diag', got {hessian!r}")
        ll, g, h = self._cy.full_pass(self.check_theta(theta), loglik, gradient,
                                      bool(hessian), self.pass_threads())
        return ll, g, (np.diag(h).copy() if diag else h)

    def neg_hessian_operator(self, theta):
        """The posterior precision at ``theta`` as a symmetric
        :class:`scipy.sparse.linalg.LinearOperator` without a ``p x p`` matrix
        (wide models: its largest eigenvalue by Lanczos). One pass for the raw
        sums at beta; each product ``P v`` then reads X twice (``X v``, ``X^T X
        v``), counted as one pass (with the statistics: ``S_xx v``, no pass)."""
        from scipy.sparse.linalg import LinearOperator

        theta = self.check_theta(theta)
        p1, n, cy = self.n_cols, self.n_data, self._cy
        wts = getattr(self, "weights", None)
        srr, srx, _ = cy.raw_sums_at(theta[:p1], n_threads=self.pass_threads())
        w = math.exp(-2.0 * (math.log(self.noise_reference) + theta[p1]))
        prec = np.asarray(self.prior.precision, dtype=np.float64)
        G = self._stats[3] if self._stats is not None else None

        def matvec(v):
            v = np.asarray(v, dtype=np.float64).reshape(-1)
            if G is not None:
                xx = G @ v[:p1]
            else:
                self.count_passes(1)
                xv = cy.rows.py_dot_range(0, n, v[:p1])
                xx = cy.rows.py_add_xt_range(0, n, xv if wts is None else wts * xv)
            out = prec * v
            out[:p1] += w * xx + 2.0 * w * srx * v[p1]
            out[p1] += 2.0 * w * (srx @ v[:p1]) + 2.0 * w * srr * v[p1]
            return out

        P = self.n_params
        return LinearOperator((P, P), matvec=matvec, rmatvec=matvec, dtype=np.float64)

    def subset(self, idx):
        """The model of the rows ``idx`` (copied, with their weights), with the same
        prior, noise reference and one thread."""
        return self._subset(idx, type(self), noise_reference=self.noise_reference)

    # ---- the exact posterior (quadrature over t) -----------------------------------------
    def exact_posterior(self, n_grid=801, width=12.0, noise_log_prior=None):
        """The exact posterior by quadrature over ``t = log(sigma / s)``.

        Given ``t``, ``beta`` is Gaussian under the independent Gaussian prior
        ``N(0, Lambda^-1)``: precision ``A = X^T X / sigma^2 + Lambda``, mean
        ``A^-1 X^T y / sigma^2``; and ``p(t | y)`` is proportional to ``p(t)
        N(y; 0, sigma^2 I + X Lambda^-1 X^T)``. With the eigendecomposition
        ``Lambda^-1/2 X^T X Lambda^-1/2 = V diag(d) V^T`` (once), ``A =
        Lambda^1/2 V diag(d / sigma^2 + 1) V^T Lambda^1/2`` at every ``t``, so
        both follow from the sufficient statistics in ``O(p^2)`` per point
        (around the least-squares ``beta0``, whose residual sums keep their
        digits). The moments are sums over ``n_grid`` points of ``t`` spanning
        ``width`` standard deviations of ``p(t | y)`` on either side of its
        mode (Simpson's rule; the density is smooth, so the error is far below
        any Monte Carlo error).

        ``noise_log_prior`` (a function of an array of ``t``, optional) replaces
        the model's ``-t^2 / (2 noise_prior_scale^2)`` by another log prior
        density of ``t`` (up to a constant; the Jacobian of ``sigma = s e^t``
        included), e.g. ``t - (s e^t)^2 / (2 c^2)`` for a half-normal prior of
        scale ``c`` on ``sigma``: the exact posterior under a prior the samplers
        cannot take, to measure what the choice of prior changes.

        Returns
        -------
        dict
            ``mean`` (n_params,), ``cov`` (n_params, n_params), ``sd``
            (n_params,) of ``theta``; ``sigma_mean``, ``sigma_sd`` of
            ``sigma``; ``t_grid``, ``t_density`` (normalised weights on the grid).
        """
        beta0, srr0, srx0, G = self._stats if self._stats is not None else self.statistics()
        n, p1 = self.weight_sum, self.n_cols      # (weighted: the sums are weighted)
        lam = self.prior.precision[:p1]
        prior_t = self.prior.precision[-1]
        log_s = math.log(self.noise_reference)
        root = 1.0 / np.sqrt(lam)
        d, V = linalg.eigh(root[:, None] * G * root[None, :])
        d = np.clip(d, 0.0, None)
        a = V.T @ (root * srx0)              # the residual sums, whitened by the prior
        b = V.T @ (np.sqrt(lam) * beta0)      # beta0, whitened
        base = -0.5 * float(beta0 @ (lam * beta0))

        def terms(t):
            """log p(t | y) (up to a constant) and the whitened ``z``, ``1 / (w d + 1)``."""
            t = np.atleast_1d(np.asarray(t, dtype=np.float64))
            w = np.exp(-2.0 * (log_s + t))[:, None]
            z = w * a - b
            inv = 1.0 / (w * d + 1.0)
            logp = (-n * (log_s + t) - 0.5 * w[:, 0] * srr0 + base
                    + 0.5 * np.sum(z * z * inv, axis=1) + 0.5 * np.sum(np.log(inv), axis=1))
            if noise_log_prior is None:
                logp -= 0.5 * prior_t * t * t
            else:
                logp += np.asarray(noise_log_prior(t), dtype=np.float64)
            return logp, z, inv

        t0 = 0.5 * math.log(max(srr0, 1e-300) / (n if n > 0 else 1.0)) - log_s
        res = optimize.minimize_scalar(lambda t: -float(terms(t)[0][0]),
                                       bracket=(t0 - 1.0, t0 + 1.0))
        t_mode, h = float(res.x), 1e-3
        lp = terms(np.array([t_mode - h, t_mode, t_mode + h]))[0]
        curv = -(lp[0] - 2 * lp[1] + lp[2]) / h**2
        sd_t = 1.0 / math.sqrt(curv) if curv > 0 else 1.0
        n_grid += (n_grid + 1) % 2            # odd: Simpson's rule
        grid = np.linspace(t_mode - width * sd_t, t_mode + width * sd_t, n_grid)
        logp, z, inv = terms(grid)
        wts = np.ones(n_grid)
        wts[1:-1:2], wts[2:-1:2] = 4.0, 2.0
        dens = wts * np.exp(logp - logp.max())
        dens /= dens.sum()
        # beta | t: mean beta0 + Lambda^-1/2 V (z inv), covariance Lambda^-1/2 V diag(inv) V^T
        # Lambda^-1/2; their mixture over the grid
        U = root[:, None] * V
        means = beta0 + (z * inv) @ U.T
        P = self.n_params
        mean = np.append(dens @ means, dens @ grid)
        cov = np.empty((P, P))
        dm = means - mean[:-1]
        cov[:-1, :-1] = (U * (dens @ inv)) @ U.T + (dm * dens[:, None]).T @ dm
        cov[-1, :-1] = cov[:-1, -1] = dens @ (dm * (grid - mean[-1])[:, None])
        cov[-1, -1] = dens @ (grid - mean[-1]) ** 2
        sig = self.noise_reference * np.exp(grid)
        sig_mean = float(dens @ sig)
        return {"mean": mean, "cov": cov, "sd": np.sqrt(np.diag(cov)), "sigma_mean": sig_mean,
                "sigma_sd": float(np.sqrt(max(dens @ (sig - sig_mean) ** 2, 0.0))),
                "t_grid": grid, "t_density": dens}

    def normal_inverse_gamma_posterior(self):
        """The closed-form posterior in the limit of flat priors (``prior_scale``,
        ``intercept_prior_scale`` and ``noise_prior_scale`` to infinity): flat on
        the coefficients and on ``log sigma`` (``p(sigma) ~ 1 / sigma``), the
        normal-inverse-gamma posterior of least squares, ``sigma^2 | y ~ IG((n -
        p) / 2, RSS / 2)`` and ``beta | sigma, y ~ N(beta_hat, sigma^2 (X^T
        X)^-1)``: the coefficients are Student-t with ``n - p`` degrees of freedom
        around the least-squares fit, with covariance ``RSS / (n - p - 2) (X^T
        X)^-1``. Needs ``n > p + 2`` and ``X^T X`` of full rank. With weights:
        ``n`` is the sum of the weights and the sums are weighted (frequency
        weights: integer weights give the posterior of the repeated rows).

        Returns
        -------
        dict
            ``mean``, ``sd`` (n_params,) of ``theta = (beta, log(sigma / s))``;
            ``sigma_mean``, ``sigma_sd``.
        """
        beta, rss, _, G = self._stats if self._stats is not None else self.statistics()
        n, p = self.weight_sum, self.n_cols
        if n <= p + 2:
            raise ValueError(f"the normal-inverse-gamma posterior needs n > p + 2 rows, got "
                             f"n = {n:g} for p = {p} coefficients"
                             + (" (n: the sum of the weights)"
                                if getattr(self, "weights", None) is not None else ""))
        a, b = 0.5 * (n - p), 0.5 * rss
        cov = rss / (n - p - 2) * linalg.inv(G, check_finite=True)
        mean_t = 0.5 * (math.log(b) - special.digamma(a)) - math.log(self.noise_reference)
        sd_t = 0.5 * math.sqrt(special.polygamma(1, a))
        sigma_mean = math.sqrt(b) * math.exp(special.gammaln(a - 0.5) - special.gammaln(a))
        return {"mean": np.append(beta, mean_t), "sd": np.append(np.sqrt(np.diag(cov)), sd_t),
                "sigma_mean": sigma_mean,
                "sigma_sd": math.sqrt(max(b / (a - 1) - sigma_mean**2, 0.0))}

    # ---- range bounds for the confidence sampler ------------------------------------------
    def max_abs_residual(self, beta):
        """``max_k |y_k - x_k beta|`` (one pass over the data, kept per ``beta``)."""
        beta = np.ascontiguousarray(beta, dtype=np.float64)
        key = beta.tobytes()
        if key not in self._max_residual:
            rows, best = self._cy.rows, 0.0
            for s in range(0, self.n_data, _CHUNK):
                e = min(s + _CHUNK, self.n_data)
                best = max(best, float(np.max(np.abs(self.y[s:e] - rows.py_dot_range(s, e, beta)))))
            self.count_passes(1)
            self._max_residual = {key: best}      # the latest point only
        return self._max_residual[key]

    def _reference_beta(self):
        return (self._stats[0] if self._stats is not None
                else np.zeros(self.n_cols))

    def range_bound(self, theta, theta_new):
        """``C >= max_k |l_k(theta') - l_k(theta)|``.

        Along the segment from ``theta`` to ``theta'``, ``dl_k/ds = dt (w r_k^2 -
        1) + w r_k x_k . dbeta`` (``w = exp(-2 tau)``, ``r_k = y_k - x_k beta``),
        with ``tau >= tau_min`` (the smaller end) and ``|r_k| <= M + R
        max(||beta - beta0||, ||beta' - beta0||)`` (``M = max_k |r_k(beta0)|`` at
        the least-squares ``beta0``, ``R = max_k ||x_k||``), so

        ``C = |dt| max(1, W Mr^2) + W Mr R ||dbeta||``, ``W = exp(-2 tau_min)``,
        times the largest weight (weighted models).
        """
        theta, theta_new = (self.check_theta(a) for a in (theta, theta_new))
        p1, R = self.n_cols, self.row_norm_max
        b0 = self._reference_beta()
        dt = abs(theta_new[p1] - theta[p1])
        db = float(np.linalg.norm(theta_new[:p1] - theta[:p1]))
        if dt == 0.0 and db == 0.0:
            return 0.0
        Mr = self.max_abs_residual(b0) + R * max(np.linalg.norm(theta[:p1] - b0),
                                                 np.linalg.norm(theta_new[:p1] - b0))
        with np.errstate(over="ignore"):
            W = np.exp(-2.0 * (math.log(self.noise_reference) + min(theta[p1], theta_new[p1])))
            return max_weight(self) * float(dt * max(1.0, W * Mr * Mr) + W * Mr * R * db)

    def cv_range_bound(self, theta, theta_new, theta_star, order):
        """``C >= max_k |d_k(theta') - d_k(theta)|`` for the second-order Taylor
        residuals (``_scale_terms.pxd``): ``d = -w* (E0 r*^2 - 2 E1 r* delta + E2
        delta^2) / 2`` with ``|E1(u)| <= 2 u^2 e^{2|u|}``, ``|E2(u)| <= 2 |u|
        e^{2|u|}`` (Taylor remainders of ``exp(-2u)``). Its derivatives bound the
        difference along the segment (mean value theorem): with ``U`` the larger
        ``|u|`` of the two ends, ``D = R max(||beta - beta*||, ||beta' -
        beta*||)`` the largest ``|delta|``, ``M* = max_k |r*_k|``,

        ``C = w* e^{2U} [R ||dbeta|| (2 U^2 M* + 2 U D) + |dt| (2 U^2 M*^2 + 4 U M* D
        + D^2)]``, times the largest weight (weighted models).
        """
        if order != 2:
            raise NotImplementedError(
                f"a range bound for order-{order} residual differences is derived for "
                "order 2 only")
        theta, theta_new, theta_star = (self.check_theta(a)
                                        for a in (theta, theta_new, theta_star))
        p1, R = self.n_cols, self.row_norm_max
        db = float(np.linalg.norm(theta_new[:p1] - theta[:p1]))
        dt = abs(theta_new[p1] - theta[p1])
        U = max(abs(theta[p1] - theta_star[p1]), abs(theta_new[p1] - theta_star[p1]))
        D = R * max(np.linalg.norm(theta[:p1] - theta_star[:p1]),
                    np.linalg.norm(theta_new[:p1] - theta_star[:p1]))
        if (db == 0.0 and dt == 0.0) or (U == 0.0 and D == 0.0):
            return 0.0                  # no move, or no residual: no difference
        M = self.max_abs_residual(theta_star[:p1])
        with np.errstate(over="ignore"):
            ws = np.exp(-2.0 * (math.log(self.noise_reference) + theta_star[p1]) + 2.0 * U)
            return max_weight(self) * float(
                ws * (R * db * (2 * U * U * M + 2 * U * D)
                      + dt * (2 * U * U * M * M + 4 * U * M * D + D * D)))

    def scale_problem(self):
        R = self.row_norm_max
        n = max(1.0, self.weight_sum)     # the sums count sum_k w_k rows
        if not (np.isfinite(R) and R * R * n < 1e300):
            return (f"X has rows of norm up to {R:.3g}: the sums X^T X overflow float64. "
                    "Standardise X (e.g. StandardScaler).")
        big = float(np.max(np.abs(self.y))) if self.y.size else 0.0
        if not (big * big * n < 1e300):
            return (f"y has values up to {big:.3g}: its squared residuals overflow float64. "
                    "Rescale y (e.g. divide by its standard deviation).")
        return None

    def __repr__(self):
        return (f"{type(self).__name__}(n_data={self.n_data}, n_features={self.n_features}, "
                f"fit_intercept={self.fit_intercept}, dtype={self.X.dtype})")
