"""The check of a stochastic-gradient chain's spread at the end of warmup
(:ref:`algo-sg-safety`).

Under the posterior ``pi``, integration by parts gives, for every coordinate
``j`` of any parametrisation and whatever the posterior's shape,

    ``E_pi[g_j (z_j - E z_j)] = -1``  and  ``E_pi[g_j] = 0``,

with ``g = grad_z log pi(z)`` (Stein's identity). A chain of SGLD, SGHMC or
EWSG has another stationary law; on a Gaussian posterior whitened to unit
curvature, ``-E[g_j (z_j - E z_j)]`` is the chain's variance over the
posterior's in coordinate ``j`` and ``E[g_j]`` the error of its mean in
posterior standard deviations (with the opposite sign). Every step already
computes an unbiased estimate of ``g`` at the chain's position (a fresh
minibatch, independent of the position), so the sums over the second half of
warmup (``_sgmcmc_fast._stein_add``) cost ``O(p)`` a step and no gradient
evaluation. The check compares them with their values under the posterior,
with standard errors from the autocorrelation of their batch means, and
raises a :class:`~bayes_subsample.exceptions.SamplingError` where they
disagree beyond the step size's documented bias, or where the chain mixes too
slowly for the comparison to mean anything.
"""
from __future__ import annotations

import numpy as np

from ..diagnostics import integrated_autocorr_time
from ..exceptions import SamplingError
from ._sgmcmc_fast import STEIN_FIELDS

__all__ = ["SteinCheck", "RATIO_BOUNDS", "MEAN_BOUND", "CHECK_Z", "MIN_ITERATIONS", "MIN_ESS"]

#: the chain's variance over the posterior's (the Stein ratio) may lie in this
#: range (sds within a factor 1.22; the default step's documented bias is a few
#: percent of the variance)
RATIO_BOUNDS = (1 / 1.5, 1.5)
#: the chain's mean may be this many posterior sds (in the whitened coordinates)
#: from the posterior's
MEAN_BOUND = 0.3
#: a statistic fails when it is outside its bounds by more than this many
#: standard errors
CHECK_Z = 4.0
#: the check runs when the second half of warmup has at least this many iterations
MIN_ITERATIONS = 100
#: the second half of warmup must hold at least this many effective draws in every
#: coordinate: a chain that mixes more slowly cannot be checked, nor trusted
MIN_ESS = 20.0
#: at most this many batches (consecutive iterations summed together)
N_BATCHES = 100


def _mean_and_se(x, w):
    """Weighted mean over the batches (axis 0) of ``x`` and its standard error,
    the batches' autocorrelation counted (Geyer's initial monotone sequence)."""
    k = len(x)
    m = (w * x).sum(0) / k
    var = (w * (x - m) ** 2).sum(0) / (k - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.nan_to_num(integrated_autocorr_time(x, axis=0), nan=1.0)
    return m, np.sqrt(var * np.maximum(tau, 1.0) / k)


class SteinCheck:
    """Sums of (position, gradient estimate) pairs over iterations
    ``[n_warmup // 2, n_warmup)`` of a chain's warmup, in up to
    ``N_BATCHES`` batches of consecutive iterations, and the check of
    :ref:`algo-sg-safety` at its end.

    Parameters
    ----------
    n_params : int
    n_warmup : int
        The chain's warmup iterations; with fewer than ``2 MIN_ITERATIONS``
        there is no check (:meth:`accumulator` returns None).
    chol : ndarray of shape (p, p) or (p,), optional
        The Laplace approximation's Cholesky factor ``L`` when the dynamics
        move ``theta`` itself (not preconditioned): the mean gradient is then
        mapped to the whitened coordinates (``L^T g``), where it is the mean's
        error in posterior sds. None: the dynamics move the whitened
        coordinates already.
    """

    def __init__(self, n_params, n_warmup, chol=None):
        self.p = int(n_params)
        self.chol = None if chol is None else np.asarray(chol, dtype=np.float64)
        self.start, self.stop = int(n_warmup) // 2, int(n_warmup)
        n_iter = self.stop - self.start
        self.enabled = n_iter >= MIN_ITERATIONS
        self.n_batches = min(N_BATCHES, n_iter) if self.enabled else 0
        self.sums = np.zeros((self.n_batches, STEIN_FIELDS * self.p + 1))
        self.summary = {"checked": False}

    def accumulator(self, iteration):
        """The sums warmup iteration ``iteration`` adds to (a row of
        ``sums``), or None outside the checked half."""
        if not self.enabled or not self.start <= iteration < self.stop:
            return None
        return self.sums[(iteration - self.start) * self.n_batches // (self.stop - self.start)]

    def statistics(self):
        """Per coordinate, as a dict of (p,) arrays: the Stein ratio
        ``-mean(g (z - zbar))`` and its standard error, the mean gradient
        ``mean(g)`` (``L^T g`` when not preconditioned) and its standard error,
        the chain's variance of ``z`` (its spread in the coordinates the
        dynamics move) and its effective sample size in the checked half
        (from the batch means' variance and autocorrelation); None with fewer
        than 4 batches."""
        p, S = self.p, self.sums
        cnt = S[:, STEIN_FIELDS * p]
        keep = cnt > 0
        if keep.sum() < 4:
            return None
        S, cnt = S[keep], cnt[keep][:, None]
        n = float(cnt.sum())
        gz, g, z, zz = (S[:, k * p:(k + 1) * p] for k in range(STEIN_FIELDS))
        gbar, zbar = g.sum(0) / n, z.sum(0) / n
        # per batch, linearised about the overall means (their weighted mean is the ratio)
        ratio_b = -(gz - gbar * z - zbar * g) / cnt - gbar * zbar
        mean_b = g / cnt
        if self.chol is not None:
            mean_b = mean_b * self.chol if self.chol.ndim == 1 else mean_b @ self.chol
        w = cnt / cnt.mean()
        ratio, ratio_se = _mean_and_se(ratio_b, w)
        mean, mean_se = _mean_and_se(mean_b, w)
        spread = np.maximum(zz.sum(0) / n - zbar ** 2, 0.0)
        # effective draws of z: Var(zbar) = spread / ess = se(batch means)^2
        _, zbar_se = _mean_and_se(z / cnt, w)
        with np.errstate(invalid="ignore", divide="ignore"):
            ess = np.where(zbar_se > 0, spread / zbar_se ** 2, 0.0)
        return {"ratio": ratio, "ratio_se": ratio_se, "mean": mean, "mean_se": mean_se,
                "spread": spread, "ess": np.minimum(ess, n)}

    def verdict(self, name, step_size):
        """Check the sums: raise a :class:`SamplingError` saying what is wrong
        and what to change, else record the summary (``self.summary``)."""
        if not self.enabled:
            self.summary = {"checked": False}
            return self.summary
        st = self.statistics()
        n_iter = self.stop - self.start
        if st is None or not all(np.all(np.isfinite(v)) for v in st.values()):
            raise SamplingError(
                f"{name}: the chain's position or gradient was not finite in the second half "
                f"of warmup (step_size={step_size:g}); use 'nuts' or 'hmc', or a smaller "
                "step_size")
        r, rse, m, mse, ess = (st[k] for k in ("ratio", "ratio_se", "mean", "mean_se", "ess"))
        self.summary = {"checked": True, "ratio_min": float(r.min()),
                        "ratio_max": float(r.max()), "mean_max": float(np.max(np.abs(m))),
                        "ess_min": float(ess.min())}
        if ess.min() < MIN_ESS:
            j = int(np.argmin(ess))
            needed = 2 * n_iter * MIN_ESS / max(ess[j], 1.0)
            raise SamplingError(
                f"{name} mixes too slowly for its draws to be trusted: in the second half of "
                f"warmup ({n_iter} iterations) the chain holds about {ess[j]:.3g} independent "
                f"draws in coordinate {j} of the {self.p} it moves (at least {MIN_ESS:g} are "
                "needed to check its spread against the posterior's gradient), at "
                f"step_size={step_size:g}, and its draws would hold as few. Use 'nuts' or "
                f"'hmc' (exact), or n_warmup of about {needed:.3g} or more (or more n_steps per "
                "iteration) and as many draws.")
        lo, hi = RATIO_BOUNDS
        wide = (r - CHECK_Z * rse) > hi
        narrow = (r + CHECK_Z * rse) < lo
        off = (np.abs(m) - CHECK_Z * mse) > MEAN_BOUND
        if not (wide.any() or narrow.any() or off.any()):
            return self.summary
        found = []
        if wide.any():
            j = int(np.argmax(np.where(wide, r, -np.inf)))
            found.append(f"its variance in {int(wide.sum())} of the {self.p} whitened "
                         f"coordinates is up to {r[j]:.3g} times the posterior's (+-{rse[j]:.2g}; "
                         f"at most {hi:.3g} is within the step size's bias)")
        if narrow.any():
            j = int(np.argmin(np.where(narrow, r, np.inf)))
            found.append(f"its variance in {int(narrow.sum())} of them is down to {r[j]:.3g} "
                         f"times the posterior's (+-{rse[j]:.2g}): the chain has not explored the "
                         "posterior")
        if off.any():
            j = int(np.argmax(np.where(off, np.abs(m), -np.inf)))
            found.append(f"its mean is {abs(m[j]):.3g} posterior standard deviations "
                         f"(+-{mse[j]:.2g}) from the posterior's in {int(off.sum())} of them")
        raise SamplingError(
            f"{name}: at the end of warmup the chain disagrees with the posterior's gradient "
            f"(Stein's identity, checked on the second half of warmup): {'; '.join(found)}. "
            f"The draws at step_size={step_size:g} would not be within the sampler's documented "
            "bias. Use 'nuts' or 'hmc' (exact), or a smaller step_size with a longer warmup.")
