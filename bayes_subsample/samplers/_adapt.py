"""Step-size adaptation of the Hamiltonian samplers: dual averaging and the
trajectory tuner (:ref:`algo-dual-averaging`); the warmup windows whose draws'
marginal variances give a diagonal mass matrix (:class:`VarianceWindows`). Mass
matrices are factored by ``bayes_subsample._linalg``; proposals adapt
themselves (``_proposals``)."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["DualAveraging", "TrajectoryTuner", "VarianceWindows", "n_leapfrog_for",
           "rescaled_precision", "rescale_gain", "MIN_METRIC_WARMUP"]


#: draws a warmup window needs before a diagonal metric takes their variances (fewer:
#: the Hessian's diagonal at their mean; 50 draws estimate a variance to 20%, and
#: over thousands of coordinates the worst of them is far off)
MIN_VARIANCE_DRAWS = 100

#: the current metric's weight, in draws, when a window's variances replace it
VARIANCE_SHRINKAGE = 5.0

#: the least warmup whose draws adapt the mass matrix (shorter: the metric stays
#: the posterior precision at the start)
MIN_METRIC_WARMUP = 100


class VarianceWindows:
    """The draws' mean and marginal variances over fixed warmup windows.

    ``windows`` are ``(start, stop)`` iteration ranges; :meth:`update` takes each
    warmup draw and, at a window's last iteration, returns ``(k, mean, var)``
    of its ``k`` draws (``var`` unbiased), else None. :func:`diagonal_windows`
    gives the diagonal metric's two windows; :meth:`precision` turns a
    window's variances into the next diagonal mass matrix."""

    def __init__(self, windows, covariance=False):
        self.windows = list(windows)
        self._sum = self._sq = None
        self._n = 0
        #: also the draws' covariance (``rescaled_precision`` checks a rescaled
        #: dense metric against it): ``cov`` of the last window closed
        self.covariance = covariance
        self.cov = None
        self._origin = self._outer = None

    def update(self, iteration, theta):
        lo, hi = next(((a, b) for a, b in self.windows if iteration < b), (0, 0))
        if lo <= iteration < hi:
            if self._sum is None:
                self._sum = np.zeros_like(theta, dtype=np.float64)
                self._sq = np.zeros_like(theta, dtype=np.float64)
                if self.covariance:
                    self._origin = np.array(theta, dtype=np.float64)
                    self._outer = np.zeros((len(theta), len(theta)))
            self._sum += theta
            self._sq += theta * theta
            if self.covariance:
                x = theta - self._origin
                self._outer += np.outer(x, x)
            self._n += 1
        if iteration != hi - 1 or self._n == 0:
            return None
        k = self._n
        mean = self._sum / k
        var = np.maximum(self._sq / k - mean * mean, 0.0) * k / max(k - 1, 1)
        if self.covariance:
            c = mean - self._origin
            self.cov = (self._outer / k - np.outer(c, c)) * k / max(k - 1, 1)
        self._sum = self._sq = None
        self._n = 0
        return k, mean, var

    @staticmethod
    def precision(k, var, current_cov):
        """The diagonal mass matrix from a window's ``k`` draws' variances (as
        Stan's ``diag_e``: the Hessian's diagonal is the conditional precision,
        too large along correlated directions), shrunk towards the current
        metric's inverse ``current_cov`` with the weight of
        ``VARIANCE_SHRINKAGE`` draws; None below ``MIN_VARIANCE_DRAWS`` draws."""
        if k < MIN_VARIANCE_DRAWS:
            return None
        w = VARIANCE_SHRINKAGE
        return 1.0 / ((k * var + w * current_cov) / (k + w))


#: a dense metric's marginal variance is rescaled to a window's draws' only where
#: their ratio is further from 1 than this many standard errors of the log of a
#: variance from k draws (``sqrt(2 / k)``)
RESCALE_SIGNIFICANCE = 3.0


def rescaled_precision(factors, var, k, cov=None):
    """A dense mass matrix from the current one (``factors``: its
    ``PrecisionFactors``) and a window's ``k`` draws' marginal variances
    ``var``: the current metric's correlations, its marginal variances scaled
    to the draws' where they differ significantly (``|log ratio| >
    RESCALE_SIGNIFICANCE sqrt(2 / k)``), else kept. With the draws'
    covariance ``cov``, only where the rescaled metric, as a Gaussian's
    precision, gives the draws a higher likelihood than the current one
    (``rescale_gain``): else None, the current metric kept.

    A precision at the mode (or at a window's mean) is the curvature there;
    along a direction few rows inform, the posterior reaches far beyond it
    (where the likelihood saturates, only the prior bounds it) and a metric
    from that curvature is too narrow there. The draws' marginal variances
    see it, with a relative error of ``sqrt(2 / k)`` each (a full sample
    covariance would need many more draws than parameters); the correlations
    stay the curvature's. Returns the (p, p) precision, or None (below
    ``MIN_VARIANCE_DRAWS`` draws, no variance differs significantly, or the
    rescaling fits the draws worse: the metric and the step-size adaptation
    then go on as they are)."""
    if k < MIN_VARIANCE_DRAWS:
        return None
    log_ratio = np.log(np.maximum(var, 1e-300) / np.diag(factors.cov))
    log_ratio[np.abs(log_ratio) <= RESCALE_SIGNIFICANCE * math.sqrt(2.0 / k)] = 0.0
    if not log_ratio.any():
        return None
    d = np.exp(-0.5 * log_ratio)
    if cov is not None and rescale_gain(factors.precision, d, cov) <= 0.0:
        return None
    return factors.precision * d[:, None] * d[None, :]


def rescale_gain(precision, d, cov):
    """Twice the log-likelihood per draw gained by draws of covariance ``cov``
    when a Gaussian's precision ``P`` becomes ``D P D`` (``D = diag(d)``):
    ``log det(DPD) - log det P - tr((DPD - P) cov) = 2 sum log d - sum_ij
    P_ij cov_ij (d_i d_j - 1)``.

    Rescaling the marginal variances of a metric with strong correlations
    moves its narrow directions: where two coordinates are correlated 0.99999,
    scaling one by 10% widens their difference's variance by orders of
    magnitude, and a step size fitted to it collapses. The marginal variances
    of draws that follow the correlations then differ from the metric's by
    their sampling error, which autocorrelation makes larger than
    ``sqrt(2 / k)``; the draws' covariance along the moved directions shows
    that the current metric fits them better (the gain is negative)."""
    P = np.asarray(precision)
    return float(2.0 * np.sum(np.log(d)) - np.sum(P * cov * (np.outer(d, d) - 1.0)))


def diagonal_windows(n_warmup):
    """The diagonal metric's windows: the marginal variances twice, over
    ``[W/8, W/4)`` and ``[W/4, W/2)`` of ``W`` warmup iterations (a chain that
    mixed slowly in the first window under the Hessian's diagonal
    underestimates them)."""
    return [(n_warmup // 8, n_warmup // 4), (n_warmup // 4, n_warmup // 2)]


class DualAveraging:
    """Hoffman & Gelman (2014) dual averaging of ``log(step_size)``
    (gamma=0.05, t0=10, kappa=0.75, mu=log(10 eps0))."""

    def __init__(self, step_size0, target=0.8, gamma=0.05, t0=10.0, kappa=0.75):
        self.target, self.gamma, self.t0, self.kappa = target, gamma, t0, kappa
        self.restart(step_size0)

    def restart(self, step_size0):
        self.mu = math.log(10.0 * step_size0)
        self.h_bar = 0.0
        self.log_eps = math.log(step_size0)
        self.log_eps_bar = math.log(step_size0)
        self.t = 0

    def update(self, accept_prob):
        """Feed one acceptance probability; returns the next step size."""
        if not np.isfinite(accept_prob):
            accept_prob = 0.0
        self.t += 1
        t = self.t
        w = 1.0 / (t + self.t0)
        self.h_bar = (1.0 - w) * self.h_bar + w * (self.target - accept_prob)
        self.log_eps = self.mu - math.sqrt(t) / self.gamma * self.h_bar
        eta = t ** (-self.kappa)
        self.log_eps_bar = eta * self.log_eps + (1.0 - eta) * self.log_eps_bar
        return math.exp(self.log_eps)

    @property
    def step_size(self):
        return math.exp(self.log_eps)

    @property
    def final_step_size(self):
        return math.exp(self.log_eps_bar)


def n_leapfrog_for(step_size, trajectory_length, max_leapfrog):
    """``round(trajectory_length / step_size)`` clipped to ``[1, max_leapfrog]``."""
    return int(min(max_leapfrog, max(1, round(trajectory_length / step_size))))


class TrajectoryTuner:
    """Step size and number of leapfrog steps of an HMC-type kernel.

    During warmup ``update`` feeds acceptance probabilities to dual averaging
    (unless a step size was given) and keeps the trajectory length fixed:
    ``n_steps = round(trajectory_length / step_size)``;
    ``finalize`` freezes the averaged step size at the end of warmup. With
    ``jitter > 0`` each transition draws its length uniformly from
    ``trajectory_length * [1 - jitter, 1 + jitter]`` (:meth:`draw_steps`), which
    breaks the periodic orbits a fixed length can fall into.

    While dual averaging adapts, the steps are counted from the larger of its
    latest iterate and its running average (:meth:`counting_step`): after a
    start or a restart its iterates probe step sizes down to a fraction of the
    one it settles on, and a full-length trajectory at such a probe costs that
    many times the steps for an acceptance statistic a shorter one gives as
    well (those transitions' trajectories are shorter; the draws kept are made
    after ``finalize``, at the full length). On the 7-class covtype fit this
    cut the warmup's leapfrog steps by 28% and the preparation's full passes
    (mostly the shared exact pilot's) by 17-32% (seeds 0-2).
    """

    def __init__(self, step_size, trajectory_length, target_accept, n_leapfrog=None,
                 max_leapfrog=1000, initial_step_size=0.5, jitter=0.0):
        self.adapt = step_size is None
        self.step_size = float(step_size) if step_size is not None else initial_step_size
        self.trajectory_length = trajectory_length
        self.fixed_steps = n_leapfrog
        self.max_leapfrog = max_leapfrog
        self.jitter = float(jitter)
        self.da = DualAveraging(self.step_size, target=target_accept)
        self._update_steps()

    def counting_step(self):
        """The step size the leapfrog steps are counted from: the step size, but
        while dual averaging adapts (it has seen an acceptance probability since
        its last start) the larger of its iterate and running average."""
        if self.adapt and self.da.t > 0:
            return max(self.step_size, self.da.final_step_size)
        return self.step_size

    def _update_steps(self):
        self.n_steps = (int(self.fixed_steps) if self.fixed_steps is not None else
                        n_leapfrog_for(self.counting_step(), self.trajectory_length,
                                       self.max_leapfrog))

    def draw_steps(self, rng):
        """The leapfrog steps of one transition (drawn when jittered)."""
        if self.jitter == 0.0 or self.fixed_steps is not None:
            return self.n_steps
        length = self.trajectory_length * (1.0 + self.jitter * (2.0 * rng.random() - 1.0))
        return n_leapfrog_for(self.counting_step(), length, self.max_leapfrog)

    def update(self, accept_prob):
        if self.adapt:
            self.step_size = self.da.update(accept_prob)
            self._update_steps()

    def restart(self):
        """Restart dual averaging from the current step size (after the metric changed)."""
        if self.adapt:
            self.da.restart(self.step_size)

    def finalize(self):
        if self.adapt and self.da.t > 0:
            self.step_size = self.da.final_step_size
            self._update_steps()
