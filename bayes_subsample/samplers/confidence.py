"""The confidence sampler MHSubLhd (Bardenet, Doucet & Holmes 2014;
ALGORITHMS.md §3): approximate MH whose subsampled decision is stopped by a
concentration inequality valid for sampling without replacement, so each
decision agrees with the exact MH decision with probability at least
``1 - delta``.

Optionally (``proxy="taylor"``, Bardenet, Doucet & Holmes 2017) the bound is
applied to the differences of second-order Taylor control-variate residuals
``d_k = l_k - q_k`` while the proxies' full sum ``Q(theta') - Q(theta)`` is
computed exactly in O(d^2); near the mode these differences are tiny, so far
fewer data are needed.
"""
from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ..control_variates import TaylorControlVariate
from ..models import _glm_fast
from ..models._glm import GLM
from . import _approx_mh_fast as _fast
from ._base import BaseSampler
from ._common import laplace_shared
from .austerity import ApproxMHKernel, build_proposal, resolve_first_batch

__all__ = ["ConfidenceMH", "logistic_residual_range_bound"]

#: max over eta of |b'''(eta)| for b = softplus: sigma (1 - sigma) (1 - 2 sigma)
#: peaks at sigma = (3 - sqrt 3) / 6 with value 1 / (6 sqrt 3)
LOGISTIC_B3_MAX = 1.0 / (6.0 * math.sqrt(3.0))


def logistic_residual_range_bound(theta, theta_new, theta_star, row_norm_max):
    """Bound on ``max_k |d_k(theta') - d_k(theta)|`` for the second-order
    Taylor residuals of logistic regression.

    With ``delta_k(theta) = x_k^T (theta - theta*)`` the residual is
    ``d_k = -R(eta_k)``, ``R(eta) = b(eta) - b(eta*) - b'(eta*) delta -
    b''(eta*) delta^2 / 2``, and ``R'(s) = b'(s) - b'(eta*) - b''(eta*) (s - eta*)
    = b'''(xi) (s - eta*)^2 / 2`` (Taylor with Lagrange remainder). By the mean
    value theorem on the segment between ``eta_k`` and ``eta'_k`` (on which
    ``|s - eta*| <= max(|delta_k|, |delta'_k|)``),

    ``|d_k(theta') - d_k(theta)| <= |eta'_k - eta_k| * max|b'''| / 2 *
    max(delta_k^2, delta'_k^2)``,

    and Cauchy-Schwarz gives ``|eta'_k - eta_k| <= ||x_k|| ||theta' - theta||``,
    ``|delta_k| <= ||x_k|| ||theta - theta*||``. With ``max|b'''| = 1/(6 sqrt 3)``
    and ``R_x = max_k ||x_k||`` (intercept column included):

    ``C = R_x^3 ||theta' - theta|| max(||theta - theta*||, ||theta' - theta*||)^2 / (12 sqrt 3)``.
    """
    theta, theta_new, theta_star = (np.asarray(a, dtype=np.float64)
                                    for a in (theta, theta_new, theta_star))
    r = max(float(np.linalg.norm(theta - theta_star)), float(np.linalg.norm(theta_new - theta_star)))
    return (row_norm_max ** 3 * float(np.linalg.norm(theta_new - theta)) * r * r
            * LOGISTIC_B3_MAX / 2.0)


class ConfidenceKernel(ApproxMHKernel):
    def __init__(self, model, proposal, check_exact, sampler, first_batch, cv=None,
                 eta_star=None):
        super().__init__(model, proposal, check_exact)
        self.delta = float(sampler.delta)
        self.bound = sampler.bound
        self.bound_code = _fast.BOUNDS[sampler.bound]
        self.gamma = float(sampler.gamma)
        self.p = float(sampler.p)
        self.first_batch = int(first_batch)
        self.cv = cv
        self.eta_star = eta_star

    def _range(self, theta, theta_new):
        C = float(self.model.range_bound(theta, theta_new))
        if not C >= 0.0:
            raise ValueError(f"model.range_bound returned {C!r}; it must be a float >= 0")
        return C

    def decide(self, theta, theta_new, threshold_sum):
        m, n = self.model, self.n
        if self.delta == 0.0:
            # exact MH: every datum, in storage order (one check)
            return self.exact_sum(theta, theta_new) > threshold_sum, n, 1
        psi = threshold_sum / n
        if self.cv is not None:
            # sum_k l_k = [Q(theta') - Q(theta)] + sum_k [d_k(theta') - d_k(theta)]
            h = theta_new - theta
            cv = self.cv
            dq = float(cv.A @ h + 0.5 * h @ (cv.B @ (theta + theta_new - 2.0 * cv.theta_star)))
            psi = psi - dq / n
            if m.family == "gaussian":
                C = 0.0  # second-order residuals vanish identically
            else:
                C = logistic_residual_range_bound(theta, theta_new, cv.theta_star,
                                                  m.row_norm_max)
            acc, t, k, _, _ = _fast.confidence_glm(
                self.sub_rng, m._fam, m.X, m.y, theta, theta_new, m.fit_intercept, m.phi,
                self.perm, psi, C, self.delta, self.bound_code, self.gamma, self.p,
                self.first_batch, self.eta_star)
            return acc, t, k
        C = self._range(theta, theta_new)
        if self.is_glm:
            acc, t, k, _, _ = _fast.confidence_glm(
                self.sub_rng, m._fam, m.X, m.y, theta, theta_new, m.fit_intercept, m.phi,
                self.perm, psi, C, self.delta, self.bound_code, self.gamma, self.p,
                self.first_batch)
            return acc, t, k
        test = _fast.ConfidenceTest(n, psi, C, self.delta, self.bound, self.gamma, self.p)
        pos = 0
        while not test.done:
            b = test.next_batch(self.first_batch)
            idx = _fast.draw_without_replacement(self.sub_rng, self.perm, pos, b)
            pos += b
            terms = m.loglik_terms(theta_new, idx) - m.loglik_terms(theta, idx)
            test.push(np.ascontiguousarray(terms, dtype=np.float64))
            test.check()
        return test.accept, test.n_examined, test.n_checks


class ConfidenceMH(BaseSampler):
    """The confidence sampler (MHSubLhd): approximate MH with a
    concentration-bound stopping rule.

    Each MH decision compares ``Lambda_t``, the mean of ``t`` terms
    ``l_k = l_k(theta') - l_k(theta)`` drawn without replacement, with
    ``psi = log[u p(theta) q(theta'|theta) / (p(theta') q(theta|theta'))] / n``.
    Batches grow geometrically (``b_{k+1} = ceil(gamma t)``) and check ``k``
    stops when ``|Lambda_t - psi| > c_t(delta_k)`` with
    ``delta_k = (p - 1) / (p k^p) delta``, so that the decision equals the
    full-data one with probability at least ``1 - delta``. ``c_t`` is a
    concentration bound for sampling without replacement using the range
    ``C(theta, theta') >= max_k |l_k(theta') - l_k(theta)|`` from
    ``model.range_bound`` (the GLMs implement it; user models must provide
    one). See ALGORITHMS.md §3 and Bardenet, Doucet & Holmes (2014).

    Parameters
    ----------
    delta : float in [0, 1), default=0.01
        Bound on the probability that a decision differs from exact MH
        (0: every datum is examined; exact MH, draw for draw
        :class:`~bayes_subsample.samplers.MH` with the same ``random_state``).
    bound : {"bernstein_serfling", "empirical_bernstein", "hoeffding_serfling"}, \
default="bernstein_serfling"
        Concentration inequality.
    gamma : float > 1, default=2.0
        Geometric growth of the number of data examined between checks.
    p : float > 1, default=2.0
        Exponent of the error schedule ``delta_k``.
    first_batch : int, default=1
        Data examined before the first check (must not exceed the data size).
    proxy : {None, "taylor"}, default=None
        ``"taylor"``: test the differences of second-order Taylor
        control-variate residuals around the posterior mode (Bardenet,
        Doucet & Holmes 2017), with the proxies' sum exact. Needs a logistic
        (range bound: :func:`logistic_residual_range_bound`) or Gaussian
        (residuals vanish) GLM.
    step_size : float, optional
        Initial random-walk scale (default ``2.38/sqrt(d)``).
    adapt : bool, default=True
        Adapt the random-walk proposal during warmup (as :class:`MH`).
    target_accept : float, optional
        Adaptation target (0.25 for d > 2, else 0.5, as in the paper).
    check_exact : bool, default=False
        Also compute the full-data decision with the same ``u`` each step and
        record ``wrong_decision`` and ``exact_accept`` in the trace stats (not
        counted in ``n_evals``).

    Notes
    -----
    Per-iteration statistics: ``data_fraction`` (``t/n``), ``n_batches``
    (checks), and with ``check_exact`` ``wrong_decision``, ``exact_accept``.
    ``n_evals`` counts 2 per examined datum (break-even with exact MH, which
    caches ``l(theta)``, at a data fraction of 0.5).

    Examples
    --------
    >>> from bayes_subsample import BayesianLogisticRegression
    >>> from bayes_subsample.samplers.confidence import ConfidenceMH
    >>> clf = BayesianLogisticRegression(sampler=ConfidenceMH(delta=0.05),
    ...                                  n_samples=200, n_warmup=200)
    """

    name = "confidence"
    exact = False
    _parameter_constraints = {
        "delta": [Interval(Real, 0, 1, closed="left")],
        "bound": [StrOptions({"bernstein_serfling", "empirical_bernstein",
                              "hoeffding_serfling"})],
        "gamma": [Interval(Real, 1, None, closed="neither")],
        "p": [Interval(Real, 1, None, closed="neither")],
        "first_batch": [Interval(Integral, 1, None, closed="left")],
        "proxy": [StrOptions({"taylor"}), None],
        "step_size": [Interval(Real, 0, None, closed="neither"), None],
        "adapt": ["boolean"],
        "target_accept": [Interval(Real, 0, 1, closed="neither"), None],
        "check_exact": ["boolean"],
    }

    def __init__(self, delta=0.01, bound="bernstein_serfling", gamma=2.0, p=2.0, first_batch=1,
                 proxy=None, step_size=None, adapt=True, target_accept=None, check_exact=False):
        self.delta = delta
        self.bound = bound
        self.gamma = gamma
        self.p = p
        self.first_batch = first_batch
        self.proxy = proxy
        self.step_size = step_size
        self.adapt = adapt
        self.target_accept = target_accept
        self.check_exact = check_exact

    def prepare(self, model, random_state):
        self._validate_params()
        name = type(self).__name__
        first = resolve_first_batch(self.first_batch, 1, model.n_data, name)
        if self.proxy == "taylor":
            if not isinstance(model, GLM) or model.family not in ("logistic", "gaussian"):
                raise ValueError(
                    f"{name}(proxy='taylor') needs a logistic or Gaussian GLM (a range bound "
                    f"for the Taylor residual differences is derived for those); got "
                    f"{type(model).__name__}{'' if not isinstance(model, GLM) else ' (' + model.family + ')'}"
                    ". Use proxy=None."
                )
        else:
            # surface a missing range bound now, not at the first step
            z = np.zeros(model.n_params)
            try:
                C = model.range_bound(z, z)
            except NotImplementedError as e:
                raise NotImplementedError(
                    f"{name} needs the range constant C(theta, theta') >= max_k "
                    f"|l_k(theta') - l_k(theta)| of the model: implement "
                    f"{type(model).__name__}.range_bound(theta, theta_new) (for FunctionModel "
                    "pass range_bound=callable). Original message: " + str(e)
                ) from e
            if not (np.isscalar(C) and float(C) >= 0.0):
                raise ValueError(f"model.range_bound must return a float >= 0, got {C!r}")
        shared = laplace_shared(model)
        shared["first_batch"] = first
        if self.proxy == "taylor":
            cv = TaylorControlVariate(model, shared["theta_init"], order=2)
            eta_star = np.empty(model.n_data)
            _glm_fast.eta(model.X, cv.theta_star, model.fit_intercept,
                          np.arange(model.n_data, dtype=np.int64), eta_star)
            _ = model.row_norm_max  # computed once, before chains run in threads
            shared["cv"] = cv
            shared["eta_star"] = eta_star
            shared["n_evals"] = shared["n_evals"] + cv.n_evals
        return shared

    def build(self, model, shared, n_warmup):
        return ConfidenceKernel(model, build_proposal(self, shared, model), self.check_exact,
                                self, shared["first_batch"], cv=shared.get("cv"),
                                eta_star=shared.get("eta_star"))
