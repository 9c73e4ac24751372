"""HMC with energy-conserving subsampling (Dang, Quiroz, Kohn, Tran, Villani 2019).

ALGORITHMS.md §1.2-1.3 (control variates, estimators), §4.1 (perturbed),
§4.2 (signed, block-Poisson), §4.3 (tuning). The compiled core for GLMs is
``_hmc_ecs_fast.ECSCore``; user models run through a NumPy core with the
generic first-order control variates.
"""
from __future__ import annotations

import math
import warnings
from numbers import Integral, Real

import numpy as np
from scipy import linalg, stats

from sklearn.utils._param_validation import Interval, StrOptions

from .._linalg import inv_lower

from ..control_variates import TaylorControlVariate
from ..models._glm import GLM
from ._adapt import TrajectoryTuner
from ._base import BaseSampler, Info, Kernel, State
from ._common import DIVERGENCE_THRESHOLD, log_uniform_open

__all__ = ["HMCECS", "choose_subsample_size", "choose_n_products"]


# ----------------------------------------------------------------------------------------
# tuning helpers (§4.3)
# ----------------------------------------------------------------------------------------
def _residual_variances(cv, thetas, pilot_idx):
    """Sample variance S_D^2(theta) of the residuals d_k over a pilot subsample."""
    out = np.empty(len(thetas))
    for i, th in enumerate(thetas):
        d = cv._d_only(th, pilot_idx)[0]
        out[i] = np.var(d, ddof=1)
    return out


def _typical_thetas(cv, chol_cov, rng, n_theta=50):
    z = rng.standard_normal((n_theta, len(cv.theta_star)))
    return cv.theta_star[None, :] + z @ chol_cov.T


def choose_subsample_size(cv, chol_cov, rng, *, n_blocks=100, target_variance=1.0,
                          n_theta=50, pilot_size=2000, min_size=100):
    """Subsample size m with ``Var[ell_hat_m] ~= target_variance`` at typical theta.

    Draws ``n_theta`` points from ``N(theta*, M^-1)`` (``chol_cov`` is the
    Cholesky factor of ``M^-1``), estimates ``S_D^2(theta)`` on a pilot
    subsample and sets ``m = ceil(n^2 median(S_D^2) / target_variance)``,
    rounded up to a multiple of ``n_blocks`` and clipped to
    ``[max(n_blocks, min_size), n]`` (the floor guards against an optimistic
    pilot while theta* is still off the mode).

    Returns ``(m, n_evals)``.
    """
    n = cv.n_data
    pilot = rng.integers(0, n, size=min(n, pilot_size))
    s2 = _residual_variances(cv, _typical_thetas(cv, chol_cov, rng, n_theta), pilot)
    med = float(np.median(s2))
    m = math.ceil(n * n * med / target_variance) if med > 0 else n_blocks
    m = int(math.ceil(max(m, n_blocks, min_size) / n_blocks) * n_blocks)
    m_max = max(n_blocks, (n // n_blocks) * n_blocks)
    if m > m_max:
        warnings.warn(
            f"the control variates are too poor for Var[ell_hat] <= {target_variance} with a "
            f"subsample smaller than the data (m = {m:,} needed, n = {n:,}); using m = {m_max:,}. "
            "Subsampling does not pay here: recentre theta* (longer warmup) or use full HMC.",
            RuntimeWarning, stacklevel=3)
        m = m_max
    return m, n_theta * pilot.shape[0]


def signed_tau(n_products, sigma):
    """Probability of a positive sign, ``tau = [1 + exp(-2 lambda Phi(-lambda/sigma))]/2``
    for ``a = -lambda`` and Gaussian ``d_hat ~ N(0, sigma^2)`` (§4.2)."""
    if sigma <= 0:
        return 1.0
    return 0.5 * (1.0 + math.exp(-2.0 * n_products * stats.norm.cdf(-n_products / sigma)))


def choose_n_products(sigma2_dhat, *, max_variance=1.0, min_tau=0.99, max_products=100000):
    """Smallest lambda with ``Var[log|L_hat|] ~= sigma2 / lambda <= max_variance``
    and ``tau >= min_tau`` (§4.2, simplification of the CT-optimal rule)."""
    sigma = math.sqrt(max(sigma2_dhat, 0.0))
    lam = max(1, math.ceil(sigma2_dhat / max_variance))
    while lam < max_products and signed_tau(lam, sigma) < min_tau:
        lam = max(lam + 1, int(lam * 1.1))
    return int(lam)


def _refine_theta_star(model, theta, max_steps=3, tol=0.01):
    """Full-data Newton steps on the log posterior from ``theta`` until the
    Newton decrement ``g^T P^-1 g`` is below ``tol`` (theta within ~0.1
    posterior sd of the mode, in the Mahalanobis metric). Each step reuses the
    sums of the pass the control variates need anyway, so one step costs one
    extra full pass. Returns ``(theta, (ll, grad, hess) at theta, n_evals)``.

    A subset mode can be far from the full-data mode (rare categories are
    prior-dominated in a 1% subset); the control variates, the mass matrix and
    the subsample size all depend on theta* being near the mode.
    """
    prec = model.prior.precision
    ll, g, h = model.full_pass(theta, gradient=True, hessian=True)
    n_evals = model.n_data
    lp = ll + model.prior.log_prob(theta)
    for _ in range(max_steps):
        grad = g - prec * theta
        P = -h + np.diag(prec)
        try:
            step = linalg.solve(0.5 * (P + P.T), grad, assume_a="pos")
        except (linalg.LinAlgError, ValueError):
            break
        if not np.all(np.isfinite(step)) or float(step @ grad) < tol:
            break
        t = 1.0
        while t > 1e-3:   # backtracking keeps every accepted step an ascent
            cand = theta + t * step
            ll_c, g_c, h_c = model.full_pass(cand, gradient=True, hessian=True)
            n_evals += model.n_data
            lp_c = ll_c + model.prior.log_prob(cand)
            if np.isfinite(lp_c) and lp_c >= lp:
                theta, ll, g, h, lp = cand, ll_c, g_c, h_c, lp_c
                break
            t *= 0.5
        else:
            break
    return theta, (ll, g, h), n_evals


class _ScaledModel:
    """A subset model whose log-likelihood is scaled by n / n_sub (for theta*)."""

    def __init__(self, sub, scale, prior):
        self.sub, self.scale, self.prior = sub, scale, prior
        self.n_params, self.n_data = sub.n_params, sub.n_data

    def check_theta(self, theta):
        return self.sub.check_theta(theta)

    def full_pass(self, theta, *, gradient=True, hessian=False):
        ll, g, h = self.sub.full_pass(theta, gradient=gradient, hessian=hessian)
        s = self.scale
        return ll * s, (g * s if g is not None else None), (h * s if h is not None else None)

    def neg_hessian_log_posterior(self, theta):
        _, _, h = self.full_pass(theta, gradient=False, hessian=True)
        return -h + self.prior.neg_hessian()


def _subset_model(model, idx):
    if isinstance(model, GLM):
        sub = GLM(model.X[np.sort(idx)], model.y[np.sort(idx)], model.family,
                  fit_intercept=model.fit_intercept, noise_scale=model.noise_scale or 1.0,
                  n_threads=1)
        sub.prior = model.prior
        return sub
    return None


# ----------------------------------------------------------------------------------------
# NumPy core for user models (perturbed estimator, orders 0/1)
# ----------------------------------------------------------------------------------------
class _PyPerturbedCore:
    """Same interface as the compiled ``ECSCore`` (perturbed mode), for any Model."""

    def __init__(self, model, order):
        self.model = model
        self.order = order
        self.n = float(model.n_data)
        self.p = model.n_params
        self.prec = model.prior.precision
        self.inv_mass = np.eye(self.p)
        self.chol_mass = np.eye(self.p)
        self.sign = 1.0

    def set_reference(self, theta_star, L_star, A, B):
        self.theta_star = np.asarray(theta_star, dtype=np.float64).copy()
        self.L_star, self.A, self.B = float(L_star), np.asarray(A), np.asarray(B)
        if hasattr(self, "idx"):
            self._cache()

    def _cache(self):
        m = self.model
        self.l_star = m.loglik_terms(self.theta_star, self.idx)
        self.g_star = m.grad_terms(self.theta_star, self.idx) if self.order >= 1 else None

    def set_metric(self, inv_mass, chol_mass):
        self.inv_mass, self.chol_mass = np.asarray(inv_mass), np.asarray(chol_mass)

    def set_rows(self, idx, block_size):
        self.idx = np.asarray(idx, dtype=np.int64).copy()
        self.m = len(self.idx)
        self.block_size = block_size
        self.n_blocks = self.m // block_size
        if hasattr(self, "theta_star"):
            self._cache()

    def _residuals(self, theta, rows=None):
        m = self.model
        idx = self.idx if rows is None else self.idx[rows]
        l_star = self.l_star if rows is None else self.l_star[rows]
        l = m.loglik_terms(theta, idx)
        g = m.grad_terms(theta, idx)
        if self.order == 0:
            return l - l_star, g
        g_star = self.g_star if rows is None else self.g_star[rows]
        delta = theta - self.theta_star
        return l - l_star - g_star @ delta, g - g_star

    def _combine(self, theta, d, gd):
        n, mm = self.n, len(d)
        delta = theta - self.theta_star
        Q = self.L_star + self.A @ delta + 0.5 * delta @ (self.B @ delta)
        dbar = d.mean()
        sigma2 = (n / mm) ** 2 * float(np.sum((d - dbar) ** 2))
        est = Q + n * dbar - 0.5 * sigma2
        c = n / mm - (n / mm) ** 2 * (d - dbar)
        grad = self.A + self.B @ delta + c @ gd
        U = -(est - 0.5 * float(self.prec @ (theta * theta)))
        return U, -(grad - self.prec * theta), est, sigma2

    def potential(self, theta):
        theta = np.asarray(theta, dtype=np.float64)
        d, gd = self._residuals(theta)
        U, g, _, _ = self._combine(theta, d, gd)
        return U, g

    def evaluate_state(self, theta):
        self.theta = np.asarray(theta, dtype=np.float64).copy()
        self.d, self.gd = self._residuals(self.theta)
        self.U, self.gradU, self.loglik_hat, self.sigma2 = self._combine(self.theta, self.d,
                                                                         self.gd)
        return self.U

    @property
    def theta_state(self):
        return self.theta.copy()

    @property
    def indices(self):
        return self.idx.copy()

    def u_step(self, rng):
        g = int(rng.integers(self.n_blocks))
        bs = self.block_size
        new = rng.integers(0, int(self.n), size=bs)
        log_u = log_uniform_open(rng)
        sl = slice(g * bs, (g + 1) * bs)
        old_idx, old_l, old_g = self.idx[sl].copy(), self.l_star[sl].copy(), None
        self.idx[sl] = new
        self.l_star[sl] = self.model.loglik_terms(self.theta_star, new)
        if self.order >= 1:
            old_g = self.g_star[sl].copy()
            self.g_star[sl] = self.model.grad_terms(self.theta_star, new)
        rows = np.arange(g * bs, (g + 1) * bs)
        d_new, gd_new = self._residuals(self.theta, rows)
        d, gd = self.d.copy(), self.gd.copy()
        d[sl], gd[sl] = d_new, gd_new
        U, grad, est, sigma2 = self._combine(self.theta, d, gd)
        log_ratio = est - self.loglik_hat
        alpha = 1.0 if log_ratio >= 0 else (math.exp(log_ratio) if np.isfinite(log_ratio) else 0.0)
        if np.isfinite(log_ratio) and log_u < log_ratio:
            self.d, self.gd, self.U, self.gradU = d, gd, U, grad
            self.loglik_hat, self.sigma2 = est, sigma2
            return True, alpha, bs
        self.idx[sl], self.l_star[sl] = old_idx, old_l
        if old_g is not None:
            self.g_star[sl] = old_g
        return False, alpha, bs

    def hmc_step(self, rng, step_size, n_leapfrog):
        p0 = self.chol_mass @ rng.standard_normal(self.p)
        K = lambda mom: 0.5 * float(mom @ (self.inv_mass @ mom))  # noqa: E731
        H0 = self.U + K(p0)
        theta, mom = self.theta.copy(), p0 - 0.5 * step_size * self.gradU
        U1, n_done, finite = np.inf, 0, True
        for it in range(n_leapfrog):
            theta = theta + step_size * (self.inv_mass @ mom)
            d, gd = self._residuals(theta)
            U1, g1, est, sigma2 = self._combine(theta, d, gd)
            n_done += 1
            if not (np.isfinite(U1) and np.all(np.isfinite(g1))):
                finite = False
                break
            mom = mom - (step_size if it < n_leapfrog - 1 else 0.5 * step_size) * g1
        dE = (U1 + K(mom)) - H0 if finite else np.inf
        log_u = log_uniform_open(rng)
        accepted = bool(np.isfinite(dE) and log_u < -dE)
        if accepted:
            self.theta, self.U, self.gradU = theta, U1, g1
            self.d, self.gd, self.loglik_hat, self.sigma2 = d, gd, est, sigma2
        alpha = (1.0 if dE <= 0 else math.exp(-dE)) if np.isfinite(dE) else 0.0
        return accepted, alpha, dE, n_done * self.m


# ----------------------------------------------------------------------------------------
# the kernel
# ----------------------------------------------------------------------------------------
class HMCECSState(State):
    __slots__ = ()


class HMCECSKernel(Kernel):
    def __init__(self, model, sampler, shared, n_warmup):
        self.model = model
        self.s = sampler
        self.signed = sampler.variant == "signed"
        self.n = model.n_data
        self.order = shared["order"]
        self.m = shared["m"]
        self.block_size = shared["block_size"]
        self.n_products = shared.get("n_products", 1)
        self.prec_prior = model.prior.precision
        self.n_warmup = n_warmup
        self.tuner = TrajectoryTuner(sampler.step_size, sampler.trajectory_length,
                                     sampler.target_accept, sampler.n_leapfrog,
                                     sampler.max_leapfrog)
        self.auto_m = shared["auto_m"]
        self.recentre = sampler.recentre_every is not None and shared["auto_theta_star"]
        self._window = []
        self.n_recentre_declined = 0
        if shared["compiled"]:
            from ._hmc_ecs_fast import ECSCore
            self.core = ECSCore(model.X, model.y, model._fam, self.order, model.fit_intercept,
                                model.phi, self.prec_prior, 1 if self.signed else 0)
        else:
            self.core = _PyPerturbedCore(model, self.order)
        self._load_reference(shared["theta_star"], shared["L_star"], shared["A"], shared["B"],
                             shared["hessian"])

    def _metric(self, hessian):
        """Mass matrix = posterior precision ``-hessian + prior precision`` and
        its factors ``(mass, chol(mass), mass^-1, chol(mass^-1))``."""
        mass = -np.asarray(hessian) + np.diag(self.prec_prior)
        mass = 0.5 * (mass + mass.T)
        try:
            chol = linalg.cholesky(mass, lower=True)
        except linalg.LinAlgError:
            mass = mass + np.diag(self.prec_prior) + 1e-8 * np.eye(len(mass))
            chol = linalg.cholesky(mass, lower=True)
        inv_chol = inv_lower(chol)
        inv_mass = inv_chol.T @ inv_chol
        return mass, chol, inv_mass, linalg.cholesky(inv_mass, lower=True)

    def _load_reference(self, theta_star, L_star, A, B, hessian, metric=None):
        """Control-variate sums at theta*, and the mass matrix from the Hessian
        (whatever the CV order)."""
        self.theta_star = np.asarray(theta_star).copy()
        self.core.set_reference(theta_star, L_star, A, B)
        self.mass, chol, self.inv_mass, self.chol_cov = metric or self._metric(hessian)
        self.core.set_metric(self.inv_mass, chol)

    # -- subsample structure ---------------------------------------------------------------
    def _fresh_rows(self, rng):
        if not self.signed:
            return rng.integers(0, self.n, size=self.m)
        chi = rng.poisson(1.0, size=self.n_products)
        self.product_of_batch = np.repeat(np.arange(self.n_products), chi)
        return rng.integers(0, self.n, size=int(chi.sum()) * self.m)

    def init(self, rng, theta0):
        self.core.set_rows(self._fresh_rows(rng), self.block_size)
        if self.signed:
            self.core.set_signed(-float(self.n_products), float(self.n_products))
        U = self.core.evaluate_state(theta0)
        self.n_evals_setup += self.core.m
        if not np.isfinite(U):
            raise ValueError("the subsampled log posterior is not finite at the initial point")
        return HMCECSState(self.core.theta_state)

    def _signed_u_step(self, rng):
        """Regenerate kappa = max(1, round(lambda (1 - rho))) products (§4.2)."""
        lam, m = self.n_products, self.m
        kappa = max(1, int(round(lam * (1.0 - self.s.correlation))))
        chosen = rng.choice(lam, size=min(kappa, lam), replace=False)
        chi_new = rng.poisson(1.0, size=chosen.shape[0])
        new_idx = rng.integers(0, self.n, size=int(chi_new.sum()) * m)
        log_u = log_uniform_open(rng)
        a = -float(lam)
        cn = self.n / m
        S_new, _ = self.core.batch_stats(new_idx, m)
        S_old = self.core.block_sums()
        old_mask = np.isin(self.product_of_batch, chosen)
        with np.errstate(divide="ignore"):
            new_term = np.sum(np.log(np.abs(cn * S_new - a)) - math.log(lam))
            old_term = np.sum(np.log(np.abs(cn * S_old[old_mask] - a)) - math.log(lam))
        log_ratio = float(new_term - old_term)
        alpha = 1.0 if log_ratio >= 0 else (math.exp(log_ratio) if np.isfinite(log_ratio) else 0.0)
        n_evals = new_idx.shape[0]
        if np.isfinite(log_ratio) and log_u < log_ratio:
            keep_rows = np.repeat(~old_mask, m)
            idx = np.concatenate([self.core.indices[keep_rows], new_idx])
            self.product_of_batch = np.concatenate(
                [self.product_of_batch[~old_mask], np.repeat(chosen, chi_new)])
            theta = self.core.theta_state
            self.core.set_rows(idx, m)
            self.core.evaluate_state(theta)
            n_evals += idx.shape[0]
            return True, alpha, n_evals
        return False, alpha, n_evals

    def _step(self, rng):
        if self.signed:
            acc_u, alpha_u, ev_u = self._signed_u_step(rng)
        else:
            acc_u, alpha_u, ev_u = self.core.u_step(rng)
        accepted, alpha, dE, ev = self.core.hmc_step(rng, self.tuner.step_size,
                                                     self.tuner.n_steps)
        diverging = (not np.isfinite(dE)) or abs(dE) > DIVERGENCE_THRESHOLD
        extra = {"alpha_u": alpha_u, "sigma2": self.core.sigma2,
                 "step_size": self.tuner.step_size, "n_leapfrog": self.tuner.n_steps,
                 "subsample_rows": self.core.m,
                 "data_fraction": (ev + ev_u) / self.n}
        if self.signed:
            extra["sign"] = self.core.sign
        info = Info(accept_prob=alpha, accepted=accepted, diverging=diverging, energy_error=dE,
                    n_evals=int(ev + ev_u), extra=extra)
        return HMCECSState(self.core.theta_state), info

    def step(self, rng, state):
        return self._step(rng)

    def warmup_step(self, rng, state, iteration):
        state, info = self._step(rng)
        self.tuner.update(info.accept_prob)
        if self.recentre:
            self._window.append(state.theta)
            every = int(self.s.recentre_every)
            last_ok = self.n_warmup - min(100, self.n_warmup // 4)
            if (iteration + 1) % every == 0 and iteration + 1 <= last_ok:
                self._recentre(rng, np.mean(self._window, axis=0))
                self._window = []
        return state, info

    def _recentre(self, rng, theta_star):
        """§4.3: new theta*, full-data sums recomputed (one pass, counted), mass
        matrix from the Hessian, subsample size recalibrated, caches rebuilt.

        A recentring that would need a larger subsample than the current one
        (the mean of early, skewed or unconverged draws can sit further from the
        mode than theta* already is) is declined: the current reference stays.
        """
        model = self.model
        ll, g, h = model.full_pass(theta_star, gradient=True, hessian=True)
        self.n_evals_setup += self.n
        if not (np.isfinite(ll) and np.all(np.isfinite(g)) and np.all(np.isfinite(h))):
            return
        cv = TaylorControlVariate(model, theta_star, self.order, sums=(ll, g, h))
        metric = self._metric(h)
        m = self.m
        if self.auto_m and not self.signed:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                m, ev = choose_subsample_size(cv, metric[3], rng, n_blocks=self.s.n_blocks,
                                              target_variance=self.s.target_variance)
            self.n_evals_setup += ev
            if m > self.m:
                self.n_recentre_declined += 1
                return
        theta = self.core.theta_state
        self._load_reference(theta_star, ll, cv.A, cv.B, h, metric)
        if m != self.m:
            self.m = m
            self.block_size = m // self.s.n_blocks
            self.core.set_rows(self._fresh_rows(rng), self.block_size)
        self.core.evaluate_state(theta)
        self.n_evals_setup += self.core.m
        self.tuner.restart()

    def end_warmup(self, state):
        self.tuner.finalize()
        return state

    def tuning(self):
        return {"step_size": self.tuner.step_size, "n_leapfrog": self.tuner.n_steps,
                "m": self.m,
                "block_size": self.block_size, "n_products": self.n_products if self.signed
                else None, "theta_star": self.theta_star.copy(), "mass_matrix": self.mass.copy(),
                "cv_order": self.order, "recentre_declined": self.n_recentre_declined}


# ----------------------------------------------------------------------------------------
# the sampler object
# ----------------------------------------------------------------------------------------
class HMCECS(BaseSampler):
    """HMC with energy-conserving subsampling (perturbed or signed).

    Each iteration is a Gibbs sweep (§4): (1) the subsample ``u`` is refreshed
    in part by a pseudo-marginal MH step at fixed theta (perturbed: one of
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

    Tuning (§4.3, automatic unless given): ``theta*`` is the posterior mode of
    a random 1% subset (likelihood scaled by ``n / n_sub``), recentred every
    ``recentre_every`` warmup iterations at the mean of the recent draws with
    the full-data sums, the mass matrix (the posterior precision ``-B + prior
    precision``) and, for the perturbed variant, the subsample size ``m``
    recomputed; dual averaging of the step size to ``target_accept`` with
    ``n_leapfrog = round(trajectory_length / step_size)``. Every full-data pass
    is counted in the per-datum evaluations.

    Parameters
    ----------
    variant : {"perturbed", "signed"}, default="perturbed"
    subsample_size : int, optional
        ``m``. Perturbed: total subsample size (a multiple of ``n_blocks``;
        default chosen so that ``Var[ell_hat] ~= target_variance``). Signed:
        the batch size of each block-Poisson factor (default 30).
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
    step_size : float, optional
        Leapfrog step (``None``: dual averaging during warmup).
    trajectory_length : float, default=1.2
    target_accept : float, default=0.8
    n_leapfrog : int, optional
        Fix ``L`` instead of ``round(trajectory_length / step_size)``.
    max_leapfrog : int, default=100
    theta_star : array-like, optional
        Fix the expansion point (disables recentring).
    recentre_every : int or None, default=200
        Recentre ``theta*`` every so many warmup iterations (None: never).
    target_variance : float, default=1.0
        Perturbed: target ``Var[ell_hat_m]`` for choosing ``m``.
    subset_fraction : float, default=0.01
        Fraction of the data (at least 1,000 rows) for the initial ``theta*``.

    Examples
    --------
    >>> from bayes_subsample import BayesianLogisticRegression
    >>> from bayes_subsample.samplers import HMCECS
    >>> clf = BayesianLogisticRegression(sampler=HMCECS(n_blocks=50))
    >>> signed = BayesianLogisticRegression(sampler="hmc_ecs_signed")
    """

    name = "hmc_ecs"
    exact = False
    _parameter_constraints = {
        "variant": [StrOptions({"perturbed", "signed"})],
        "subsample_size": [Interval(Integral, 1, None, closed="left"), None],
        "n_blocks": [Interval(Integral, 1, None, closed="left")],
        "n_products": [Interval(Integral, 1, None, closed="left"), None],
        "correlation": [Interval(Real, 0, 1, closed="left")],
        "cv_order": [StrOptions({"auto"}), Interval(Integral, 0, 2, closed="both"), None],
        "step_size": [Interval(Real, 0, None, closed="neither"), None],
        "trajectory_length": [Interval(Real, 0, None, closed="neither")],
        "target_accept": [Interval(Real, 0, 1, closed="neither")],
        "n_leapfrog": [Interval(Integral, 1, None, closed="left"), None],
        "max_leapfrog": [Interval(Integral, 1, None, closed="left")],
        "theta_star": ["array-like", None],
        "recentre_every": [Interval(Integral, 1, None, closed="left"), None],
        "target_variance": [Interval(Real, 0, None, closed="neither")],
        "subset_fraction": [Interval(Real, 0, 1, closed="right")],
    }

    def __init__(self, variant="perturbed", subsample_size=None, n_blocks=100, n_products=None,
                 correlation=0.99, cv_order=None, step_size=None, trajectory_length=1.2,
                 target_accept=0.8, n_leapfrog=None, max_leapfrog=100, theta_star=None,
                 recentre_every=200, target_variance=1.0, subset_fraction=0.01):
        self.variant = variant
        self.subsample_size = subsample_size
        self.n_blocks = n_blocks
        self.n_products = n_products
        self.correlation = correlation
        self.cv_order = cv_order
        self.step_size = step_size
        self.trajectory_length = trajectory_length
        self.target_accept = target_accept
        self.n_leapfrog = n_leapfrog
        self.max_leapfrog = max_leapfrog
        self.theta_star = theta_star
        self.recentre_every = recentre_every
        self.target_variance = target_variance
        self.subset_fraction = subset_fraction

    def _initial_theta_star(self, model, rng):
        from .._optimize import find_map
        n = model.n_data
        n_sub = int(min(n, max(1000, math.ceil(self.subset_fraction * n))))
        if 10 * n_sub >= n:
            # small data: the full-data mode costs little more than the subset's
            theta, info = find_map(model)
            return theta, info["n_evals"]
        idx = rng.choice(n, size=n_sub, replace=False)
        sub = _subset_model(model, idx)
        if sub is None:
            # user model: MAP of the full model (generic path)
            theta, info = find_map(model)
            return theta, info["n_evals"]
        scaled = _ScaledModel(sub, n / n_sub, model.prior)
        theta, info = find_map(scaled, method="newton")
        return theta, info["n_evals"]

    def prepare(self, model, random_state):
        self._validate_params()
        rng = random_state
        is_glm = isinstance(model, GLM)
        order = self.cv_order if self.cv_order not in (None, "auto") else (2 if is_glm else 1)
        if order == 2 and not is_glm:
            raise ValueError("cv_order=2 needs a compiled GLM; use cv_order=1 for user models")
        signed = self.variant == "signed"
        if signed and not is_glm:
            raise TypeError("the signed HMC-ECS variant is implemented for the compiled GLMs; "
                            "use variant='perturbed' for user models")
        n = model.n_data
        n_evals = 0
        if self.theta_star is not None:
            theta_star = model.check_theta(self.theta_star)
            auto_ts = False
        else:
            theta_star, ev = self._initial_theta_star(model, rng)
            n_evals += ev
            auto_ts = True
        theta_star, (ll, g, h), ev = _refine_theta_star(model, theta_star,
                                                       max_steps=10 if auto_ts else 0)
        n_evals += ev
        mass = -h + np.diag(model.prior.precision)
        mass = 0.5 * (mass + mass.T)
        try:
            cov = linalg.inv(mass)
            chol_cov = linalg.cholesky(0.5 * (cov + cov.T), lower=True)
        except (linalg.LinAlgError, ValueError):
            cov = np.diag(1.0 / model.prior.precision)
            chol_cov = np.sqrt(cov)
        cv = TaylorControlVariate(model, theta_star, order, sums=(ll, g, h))
        A, B = cv.A, cv.B
        shared = {"order": order, "theta_star": theta_star, "L_star": ll, "A": A, "B": B,
                  "hessian": h,
                  "theta_init": theta_star, "chol_cov": chol_cov, "auto_theta_star": auto_ts,
                  "compiled": is_glm}
        G = self.n_blocks
        if signed:
            m = int(self.subsample_size or 30)
            if m > n:
                raise ValueError(f"subsample_size={m} is larger than the data (n={n})")
            if self.n_products is None:
                pilot = rng.integers(0, n, size=min(n, 2000))
                s2 = _residual_variances(cv, _typical_thetas(cv, chol_cov, rng), pilot)
                n_evals += 50 * pilot.shape[0]
                lam = choose_n_products(n * n * float(np.median(s2)) / m)
            else:
                lam = int(self.n_products)
            shared.update(m=m, block_size=m, n_products=lam, auto_m=False)
        else:
            if self.subsample_size is not None:
                m = int(self.subsample_size)
                if m > n:
                    raise ValueError(f"subsample_size={m} is larger than the data (n={n})")
                if m % G:
                    raise ValueError(
                        f"subsample_size={m} must be a multiple of n_blocks={G} (equal blocks)")
                auto_m = False
            else:
                if G > n:
                    raise ValueError(f"n_blocks={G} is larger than the data (n={n})")
                m, ev = choose_subsample_size(cv, chol_cov, rng, n_blocks=G,
                                              target_variance=self.target_variance)
                n_evals += ev
                auto_m = True
            shared.update(m=m, block_size=m // G, auto_m=auto_m)
        shared["n_evals"] = n_evals
        return shared

    def build(self, model, shared, n_warmup):
        return HMCECSKernel(model, self, shared, n_warmup)
