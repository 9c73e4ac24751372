"""Exponentially weighted stochastic gradients (EWSG) for stochastic-gradient
underdamped Langevin dynamics (ALGORITHMS.md §5).

The minibatch used at each Euler-Maruyama step is chosen non-uniformly, by a
short Metropolis chain over minibatch indices whose target weights
``p_J ~ exp(h / (2 sigma^2) ||gamma r + n_b grad V_J(theta)||^2)`` make the
stochastic step's transition kernel match the full-gradient one. GLMs run the
whole step (block gradients, index chain, integrator) in the ``nogil`` loop of
``_sgmcmc_fast.pyx``; user models use a NumPy path with the same random draws.
"""
from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from . import _sgmcmc_fast as _fast
from ._base import BaseSampler, Info, Kernel, State
from .sgmcmc import _BIAS_NOTE, _diverged, _is_fast, _prepare_sg

__all__ = ["EWSG"]


class EWSGState(State):
    __slots__ = ("momentum", "index")

    def __init__(self, theta, momentum, index=-1):
        self.theta = theta
        self.momentum = momentum
        self.index = index          # current minibatch J (persistent index chain)


class EWSGKernel(Kernel):
    def __init__(self, model, shared, sampler):
        self.model = model
        self.n = model.n_data
        self.p = model.n_params
        self.fast = _is_fast(model)
        self.step_size = float(shared["step_size"])
        self.gamma = float(sampler.friction)
        self.batch_size = int(min(sampler.batch_size, self.n))
        self.n_blocks = -(-self.n // self.batch_size)
        self.M = int(sampler.index_chain_length)
        self.persistent = sampler.index_chain == "persistent"
        self.n_steps = int(sampler.n_steps)
        self._perm = None
        self._since = 0               # blocks evaluated since the last reshuffle
        self._evals = 0
        self._g_cur = np.empty(self.p)
        self._g_prop = np.empty(self.p)
        self._tmp = np.empty(self.p)
        if self.fast:
            self.glm_args = (model._fam, model.X, model.y, model.fit_intercept, model.phi,
                             np.ascontiguousarray(model.prior.precision, dtype=np.float64))

    def init(self, rng, theta0):
        theta = self.model.check_theta(theta0).copy()
        r = _fast.draw_normals(rng, self.p)             # r ~ N(0, I): its stationary law
        self._perm = np.arange(self.n, dtype=np.int64)
        _fast.shuffle_inplace(rng, self._perm)          # the first random partition
        self._since = 0
        return EWSGState(theta, r, -1)

    # ---- NumPy path --------------------------------------------------------------------
    def _block_grad(self, theta, J):
        """``n_b grad V_J(theta)`` and ``|B_J|``, ``V_J = sum_{i in B_J} (-l_i - log p / n)``."""
        b = self.batch_size
        idx = self._perm[J * b: min((J + 1) * b, self.n)]
        size = idx.shape[0]
        g = -self.model.grad_sum(theta, idx) - (size / self.n) * \
            self.model.prior.grad_log_prob(theta)
        return self.n_blocks * g, size

    def _energy(self, g, r):
        # h / (2 sigma^2) ||gamma r + g||^2 with sigma^2 = 2 gamma
        t = self.gamma * r + g
        return self.step_size / (4.0 * self.gamma) * float(t @ t)

    def _python_steps(self, rng, theta, r, J):
        h, gamma = self.step_size, self.gamma
        noise = math.sqrt(2.0 * gamma * h)
        n_acc = n_data = 0
        for s in range(self.n_steps):
            if self._since >= self.n_blocks:
                _fast.shuffle_inplace(rng, self._perm)
                self._since = 0
            if not self.persistent or J < 0:
                J = _fast.draw_index(rng, self.n_blocks)
            g_cur, size = self._block_grad(theta, J)
            n_data += size
            self._since += 1
            e_cur = self._energy(g_cur, r)
            for _ in range(self.M):
                Jp = _fast.draw_index(rng, self.n_blocks)
                g_prop, size = self._block_grad(theta, Jp)
                n_data += size
                self._since += 1
                e_prop = self._energy(g_prop, r)
                if _fast.draw_log_uniform(rng) < e_prop - e_cur:
                    J, g_cur, e_cur = Jp, g_prop, e_prop
                    n_acc += 1
            xi = _fast.draw_normals(rng, self.p)
            theta, r = theta + h * r, r - h * (g_cur + gamma * r) + noise * xi
            if not (np.all(np.isfinite(theta)) and np.all(np.isfinite(r))):
                raise _diverged("EWSG", h, f"step {s + 1} of an iteration")
        return theta, r, J, n_acc, n_data

    # ---- kernel ------------------------------------------------------------------------
    def step(self, rng, state):
        theta = state.theta.copy()
        r = state.momentum.copy()
        J = int(state.index)
        if self.fast:
            chain = np.array([J, self._since], dtype=np.int64)
            done, n_acc, n_data = _fast.ewsg_steps(
                *self.glm_args, theta, r, self._perm, chain, self.batch_size, self.M,
                self.persistent, self.step_size, self.gamma, self.n_steps, rng,
                self._g_cur, self._g_prop, self._tmp)
            J, self._since = int(chain[0]), int(chain[1])
            if done < self.n_steps:
                raise _diverged("EWSG", self.step_size, f"step {done + 1} of an iteration")
        else:
            theta, r, J, n_acc, n_data = self._python_steps(rng, theta, r, J)
        self._evals += n_data
        n_prop = self.M * self.n_steps
        info = Info(accept_prob=1.0, accepted=True, n_evals=int(n_data),
                    extra={"index_accept": n_acc / n_prop if n_prop else np.nan,
                           "data_passes": self._evals / self.n})
        return EWSGState(theta, r, J if self.persistent else -1), info

    def tuning(self):
        return {"step_size": self.step_size, "friction": self.gamma,
                "batch_size": self.batch_size, "n_blocks": self.n_blocks,
                "index_chain_length": self.M, "n_steps": self.n_steps,
                "data_passes": self._evals / self.n}


class EWSG(BaseSampler):
    """Exponentially weighted stochastic gradients for underdamped Langevin
    dynamics (ALGORITHMS.md §5, the EWSG paper's Algorithm 1).

    Euler-Maruyama steps of ``d theta = r dt``,
    ``dr = -(grad V(theta) + gamma r) dt + sigma dW`` with ``sigma = sqrt(2 gamma)``
    (unit mass, temperature 1)::

        theta_{k+1} = theta_k + h r_k
        r_{k+1}     = r_k - h (g_J + gamma r_k) + sigma sqrt(h) xi

    where ``V = sum_i V_i``, ``V_i = -l_i - log p(theta) / n``, the data are
    split into a random partition of ``n_b = ceil(n / b)`` minibatches ``B_J``
    (reshuffled after every ``n_b`` minibatch gradients, i.e. once per data
    pass) and ``g_J = n_b grad V_J(theta_k)``. The minibatch ``J`` is picked by
    an index Metropolis chain of ``index_chain_length`` uniform proposals with
    weights ``exp(h / (2 sigma^2) ||gamma r_k + g_J||^2)`` (the kernel-matching
    weights with ``x = sqrt(h) gamma r_k / sigma``); the chosen gradient is not
    reweighted. With ``index_chain_length=0`` this is plain uniform-minibatch
    underdamped Langevin (the EWSG paper's "SGHMC" baseline).
    Warmup iterations run the same dynamics; nothing is adapted. ``prepare``
    computes the MAP (chain starts) and, if ``step_size=None``, the suggested
    step size; its passes are counted in ``Trace.n_evals_prepare``.
    {bias}
    Parameters
    ----------
    step_size : float, optional
        ``h``; ``None`` uses :func:`suggest_step_size` (``sampler="ewsg"``).
    batch_size : int, default=100
        Minibatch size ``b`` (capped at ``n``).
    friction : float, default=10.0
        ``gamma`` (the paper uses 10 on its Gaussian example, 50 on covtype).
    index_chain_length : int, default=1
        ``M``, Metropolis steps of the index chain per iteration (0: uniform).
    index_chain : {"restart", "persistent"}, default="restart"
        ``"restart"`` starts each step's index chain from a uniform draw (as
        Algorithm 1 is written); ``"persistent"`` starts it from the previous
        step's minibatch, re-evaluated at the new ``theta`` (as the paper's
        text argues). Same cost either way.
    n_steps : int, default=1
        Euler-Maruyama steps per retained iteration (thinning).

    Notes
    -----
    Cost: ``(M + 1) b`` per-datum gradients per step (``Info.n_evals``, exact
    block sizes); ``K`` data passes are ``iterations_for_passes(K, n, b, M,
    n_steps)`` iterations. ``trace.stats["index_accept"]`` is the fraction of
    index proposals accepted in the iteration (nan when ``M = 0``) and
    ``trace.stats["data_passes"]`` the cumulative data passes of the chain's
    steps (warmup included).

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample import sample
    >>> from bayes_subsample.models import LogisticRegressionModel
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 3)); y = (rng.random(2000) < 0.5).astype(float)
    >>> trace = sample(LogisticRegressionModel(X, y), EWSG(batch_size=20), n_samples=200,
    ...                n_warmup=100, n_chains=1, random_state=0, check_convergence=False)
    >>> bool(0 <= np.nanmean(trace.stats["index_accept"]) <= 1)
    True
    """

    name = "ewsg"
    exact = False
    _parameter_constraints = {
        "step_size": [Interval(Real, 0, None, closed="neither"), None],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "friction": [Interval(Real, 0, None, closed="neither")],
        "index_chain_length": [Interval(Integral, 0, None, closed="left")],
        "index_chain": [StrOptions({"restart", "persistent"})],
        "n_steps": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, step_size=None, batch_size=100, friction=10.0, index_chain_length=1,
                 index_chain="restart", n_steps=1):
        self.step_size = step_size
        self.batch_size = batch_size
        self.friction = friction
        self.index_chain_length = index_chain_length
        self.index_chain = index_chain
        self.n_steps = n_steps

    def prepare(self, model, random_state):
        self._validate_params()
        return _prepare_sg(self, model, control_variates=False,
                           batch_size=min(self.batch_size, model.n_data),
                           friction=self.friction)

    def build(self, model, shared, n_warmup):
        return EWSGKernel(model, shared, self)


EWSG.__doc__ = EWSG.__doc__.replace("{bias}", _BIAS_NOTE)
