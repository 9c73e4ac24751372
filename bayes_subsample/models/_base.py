"""The model protocol every sampler runs on.

A model is a posterior ``log pi(theta) = sum_k l_k(theta) + log p(theta)`` over
``n_data`` per-datum log-likelihood terms ``l_k`` and a prior. Samplers only use
the methods of :class:`Model`, so a user-defined model (see
:class:`FunctionModel`) runs through every sampler; the GLMs in
:mod:`bayes_subsample.models` are its compiled implementations.
"""
from __future__ import annotations

import numbers
import threading

import numpy as np
from scipy import sparse

from .._hashing import array_digest
from .._threads import threads_for_pass

__all__ = ["Model", "GaussianPrior", "FunctionModel"]


class GaussianPrior:
    """Independent Gaussian prior ``N(0, diag(scale**2))`` on the parameters.

    Parameters
    ----------
    scale : float or array-like of shape (n_params,)
        Prior standard deviation of each parameter.
    n_params : int, optional
        Number of parameters (needed when ``scale`` is a scalar).

    Examples
    --------
    >>> prior = GaussianPrior([1.0, 10.0])
    >>> float(prior.log_prob(np.array([1.0, 10.0])))    # up to a constant
    -1.0
    """

    def __init__(self, scale, n_params=None):
        scale = np.asarray(scale, dtype=np.float64)
        if scale.ndim == 0:
            if n_params is None:
                raise ValueError("n_params is required with a scalar prior scale")
            scale = np.full(int(n_params), float(scale))
        if scale.ndim != 1 or (n_params is not None and scale.shape[0] != n_params):
            raise ValueError(f"prior scale must have shape ({n_params},), got {scale.shape}")
        if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise ValueError("prior scales must be finite and > 0")
        with np.errstate(over="ignore", under="ignore", divide="ignore"):
            precision = 1.0 / scale**2
        if not (np.all(np.isfinite(precision)) and np.all(precision > 0)):
            raise ValueError(
                f"prior scales must lie in [1e-150, 1e150] (the prior precision 1 / scale^2 "
                f"must be a finite float64 > 0), got {float(np.min(scale)):.3g}"
                f"..{float(np.max(scale)):.3g}")
        self.scale = scale
        self.precision = precision

    @property
    def n_params(self):
        return self.scale.shape[0]

    def log_prob(self, theta):
        """Log density up to an additive constant (0 at theta = 0)."""
        return -0.5 * float(np.dot(self.precision * theta, theta))

    def grad_log_prob(self, theta):
        return -self.precision * theta

    def neg_hessian(self):
        """``-d^2 log p / d theta^2`` (a diagonal matrix)."""
        return np.diag(self.precision)


def coefficient_scales(prior_scale, n_features, name="prior_scale"):
    """The prior standard deviations of ``n_features`` coefficients: a float
    (the same for every coefficient) or an array of shape (n_features,), one
    per column (e.g. scaled to the columns, as the estimators'
    ``prior_scale="auto"``); each finite and > 0."""
    scales = np.asarray(prior_scale, dtype=np.float64)
    if scales.ndim == 0:
        scales = np.full(int(n_features), float(scales))
    if scales.shape != (int(n_features),):
        raise ValueError(f"{name} must be a float or an array of shape ({n_features},) "
                         f"(one per column of X), got shape {scales.shape}")
    if not (np.all(np.isfinite(scales)) and np.all(scales > 0)):
        raise ValueError(f"{name} must be finite and > 0, got values "
                         f"{float(np.min(scales)):.3g}..{float(np.max(scales)):.3g}")
    return scales


def _digest(*arrays):
    """A short content hash of arrays (their dtypes, shapes and every byte)."""
    return array_digest(*arrays)


_PASS_LOCK = threading.Lock()


def show_theta(theta, limit=8):
    """``theta`` for a message: its values, the first ``limit`` of a long one."""
    t = np.asarray(theta, dtype=np.float64).ravel()
    shown = np.array2string(t[:limit], precision=4, separator=", ")
    return shown if t.size <= limit else f"{shown[:-1]}, ... ({t.size} values)]"


def python_terms(model):
    """Whether ``model``'s per-datum terms are Python code that kernels call back
    (``CyCallbackModel``: :class:`FunctionModel` and other Python models), not
    compiled passes (the GLMs, also when their rows live with Dask)."""
    if model.distributed:
        return False
    from ._callback import CyCallbackModel
    return isinstance(model.compiled, CyCallbackModel)


def fd_steps(theta):
    """The central-difference steps of the numerical Hessians, ``h_j = 1e-5
    max(1, |theta_j|)``."""
    return 1e-5 * np.maximum(1.0, np.abs(np.asarray(theta, dtype=np.float64)))


def _fd_points(theta):
    """``(theta + h_j e_j, theta - h_j e_j, 2 h_j)`` for each coordinate ``j``."""
    for j, h in enumerate(fd_steps(theta)):
        tp, tm = theta.copy(), theta.copy()
        tp[j] += h
        tm[j] -= h
        yield tp, tm, 2 * h


def taylor_residuals(delta, l, g, l0, g0=None, H0=None):
    """Residuals of Taylor control variates from their definition: ``d_k = l_k -
    l0_k - g0_k . delta - delta^T H0_k delta / 2`` and ``grad d_k = g_k - g0_k -
    H0_k delta``, the terms of order 1 and 2 only where ``g0`` and ``H0`` are
    given (the expansion's order), ``delta = theta - theta*``.

    Parameters
    ----------
    delta : ndarray (p,)
    l, g : ndarray (m,), ndarray (m, p) or None
        The rows' log-likelihoods and gradients at theta (``g`` None: no
        gradients returned).
    l0, g0, H0 : ndarray (m,), (m, p), (m, p, p)
        Their values and Hessians at theta* (``taylor_terms``).

    Returns
    -------
    d : ndarray (m,)
    grad_d : ndarray (m, p) or None
    """
    d = l - l0
    grad_d = g
    if g0 is not None:
        d = d - g0 @ delta
        if g is not None:
            grad_d = g - g0
    if H0 is not None:
        # batched (m small products): one BLAS product over the stacked rows
        # runs in OpenBLAS's threads, 100x slower on a loaded machine
        Hd = H0 @ delta
        d = d - 0.5 * (Hd @ delta)
        if g is not None:
            grad_d = grad_d - Hd
    return d, grad_d


def design_size(X):
    """Values a full pass reads: n x d (dense) or the stored entries + n (CSR)."""
    return X.nnz + X.shape[0] if sparse.issparse(X) else X.shape[0] * X.shape[1]


class Model:
    """Base class / protocol of a posterior over per-datum terms.

    Subclasses must set ``n_data``, ``n_params`` and ``prior`` and implement
    :meth:`loglik_terms` and :meth:`grad_terms` (NumPy-vectorised over an index
    array). Everything else has generic implementations that the compiled GLMs
    override with fused Cython passes.

    Attributes
    ----------
    n_data : int
        Number of data terms ``n``.
    n_params : int
        Dimension of ``theta``.
    prior : GaussianPrior
        The prior (anything with ``log_prob``, ``grad_log_prob``, ``neg_hessian``).
    """

    n_data: int
    n_params: int
    prior: GaussianPrior
    #: the model's rows live with Dask (:class:`DaskGLM`): its passes run where
    #: the chunks are, and only samplers declaring ``serves_distributed`` take it
    distributed = False
    #: the model computes the diagonal of its Hessian sum in one pass, without a
    #: ``p x p`` matrix (the compiled GLMs and linear regression, rows in memory):
    #: what the Hamiltonian samplers' diagonal metric on wide models needs
    diagonal_passes = False
    #: the Taylor order of the control variates that samplers drawing new rows
    #: at every step (stochastic gradients, approximate MH) use by default: 2
    #: where the model computes per-datum Hessians in its compiled passes (the
    #: GLMs), 1 for Python models, whose order-2 residuals need
    #: :meth:`hess_terms` for every row of every batch. Every model computes
    #: residuals of orders 0 to 2; HMC-ECS, which keeps its rows' Taylor
    #: constants at theta*, uses order 2 on Python models too.
    max_cv_order = 1
    #: the fixed cost of one evaluation of the model's terms (any number of
    #: rows), in per-datum evaluations: a Python model is called back through
    #: NumPy, whose overhead per call is worth hundreds of rows (HMC-ECS's
    #: choice between subsample and full data counts it, :ref:`algo-hmc-ecs-choice`);
    #: 0 for the compiled models
    evaluation_overhead = 1000
    #: name of the GLM family (None for other models)
    family = None
    #: ``full_pass(hessian=True)`` is analytic and cheap (else numerical)
    analytic_hessian = False
    #: the model gives the Hessian of its log-likelihood (analytic, or numerical
    #: from its gradients), so samplers may find the posterior's mode and its
    #: Laplace approximation (chain starts, metrics, control variates, step
    #: sizes). False (:class:`MLPModel`: tens of thousands of parameters and a
    #: multimodal posterior): the stochastic-gradient samplers start each chain
    #: from :meth:`init_params` and set their step from the curvature there
    #: (:ref:`algo-sg-no-hessian`); the other samplers refuse the model.
    has_hessian = True
    #: the stochastic-gradient samplers may draw this model's Gaussian noise as
    #: float32 normals: it computes in float32 (an :class:`MLPModel` on float32
    #: inputs), so float64 noise would add cost and no accuracy. False where
    #: draws are made in float64 (every model with a Hessian, whatever its
    #: rows' dtype: their draws do not depend on it)
    float32_noise = False

    @property
    def full_pass_cost(self):
        """Per-datum evaluations a full-data pass (:meth:`full_pass`) is worth: the
        number of data ``n``, unless the model's full-data sums do not read every
        datum (linear regression's sufficient statistics). The samplers' cost
        figures count it, and HMC-ECS compares its subsample size with it."""
        return self.n_data

    # ---- full passes made (diagnostics_["data_passes"]) -------------------------
    @property
    def n_full_passes(self):
        """Full-data passes over this model's data made so far: the compiled
        models' fused passes (:meth:`full_pass`, full-data HMC's gradients), or for
        other models each generic :meth:`full_pass` and each pass of its numerical
        Hessian."""
        return self.__dict__.get("_n_full_passes", 0)

    def count_passes(self, k=1):
        """Count ``k`` full-data passes made outside the model's own pass methods
        (a table of every row's terms, residuals of every row at a few points):
        ``n_full_passes`` and the cost reports include them."""
        with _PASS_LOCK:     # chains running in threads share the model
            self.__dict__["_n_full_passes"] = self.__dict__.get("_n_full_passes", 0) + k

    @property
    def nan_evaluations(self):
        """``(count, function name, theta)``: how many calls of this model's
        own functions returned NaN, and the first of them (for a
        :class:`FunctionModel`; ``(0, None, None)`` for others). The driver
        warns when a run adds to the count."""
        return self.__dict__.get("_nan_evaluations", (0, None, None))

    def _note_nan(self, name, theta, out):
        """Count a call of the function ``name`` at ``theta`` if ``out`` holds NaN."""
        if np.isnan(out).any():
            with _PASS_LOCK:
                n, first, at = self.nan_evaluations
                self.__dict__["_nan_evaluations"] = (
                    n + 1, first or name, at if at is not None else np.array(theta, copy=True))

    # ---- pickling (chains on a Dask cluster ship the model to the workers) ----
    def __getstate__(self):
        """The model without its compiled object (rebuilt where it is unpickled:
        compiled objects hold C pointers into the data and do not pickle)."""
        state = self.__dict__.copy()
        state.pop("_compiled", None)
        return state

    # ---- to implement -------------------------------------------------------
    def loglik_terms(self, theta, idx):
        """Per-datum log-likelihoods ``l_k(theta)`` for ``k in idx``, shape (len(idx),)."""
        raise NotImplementedError

    def grad_terms(self, theta, idx):
        """Per-datum gradients ``grad l_k(theta)`` for ``k in idx``, shape (len(idx), n_params)."""
        raise NotImplementedError

    # ---- the compiled object kernels take ---------------------------------------
    @property
    def compiled(self):
        """The compiled model object (:class:`~bayes_subsample.models.CyModel`) that
        sampler kernels take as a typed argument. For a Python model it is a
        ``CyCallbackModel`` that calls this model's NumPy methods with the GIL, so
        every kernel runs on user models too; the GLMs override it with their
        compiled family objects."""
        cy = self.__dict__.get("_compiled")
        if cy is None:
            from ._callback import CyCallbackModel
            cy = CyCallbackModel(self)
            self.__dict__["_compiled"] = cy
        return cy

    def fingerprint(self):
        """What identifies this posterior, as a dict of strings: two models with
        equal fingerprints have the same likelihood, data and prior (used to
        check that a run is resumed on the model it was sampled on). Python
        models are identified by their class and attributes' identities."""
        return {"class": type(self).__qualname__, "n_data": str(self.n_data),
                "n_params": str(self.n_params),
                "prior": _digest(np.asarray(self.prior.scale, dtype=np.float64)),
                "terms": f"{id(self):x}"}

    def scale_problem(self):
        """A message naming the input whose scale makes this posterior's sums
        overflow float64, or None. Called to explain non-finite values."""
        return None

    def overflow_error(self, where, theta=None):
        """A ValueError for non-finite log-posterior values at ``where`` (at the
        point ``theta`` if given), naming the input at fault when the model can
        tell: for a Python model (:class:`FunctionModel`, a user's subclass)
        its own functions, else the scale of the data or of the prior."""
        at = "" if theta is None else f" (theta = {show_theta(theta)})"
        problem = self.scale_problem()
        if problem is None and python_terms(self):
            problem = (f"The model's own functions ({type(self).__name__}: loglik, grad, hess) "
                       "returned NaN or infinity there: check them at that theta.")
        if problem is None:
            problem = ("Check the scale of the data (standardise X) and of the prior "
                       "(prior_scale).")
        return ValueError(f"the log-posterior or its derivatives are not finite {where}{at}. "
                          + problem)

    def range_bound_degree(self, order=None):
        """How the model's range bounds given a ``RowGeometry`` grow with its
        radius (``C ~ radius^degree``; see :meth:`GLM.range_bound_degree`), or
        None: its bounds do not take the data's geometry (the default)."""
        return None

    # ---- generic implementations --------------------------------------------
    def grad_sum(self, theta, idx):
        """``sum_{k in idx} grad l_k(theta)``."""
        return self.grad_terms(theta, idx).sum(axis=0)

    def loglik_diff_terms(self, theta, theta_new, idx):
        """``l_k(theta_new) - l_k(theta)`` for ``k in idx`` (the terms of an MH decision)."""
        return self.loglik_terms(theta_new, idx) - self.loglik_terms(theta, idx)

    def hess_terms(self, theta, idx):
        """Per-datum Hessians ``d^2 l_k / d theta^2`` for ``k in idx``, shape
        (len(idx), n_params, n_params). The generic version differentiates
        :meth:`grad_terms` by central differences with the steps of the
        full-data numerical Hessian (``fd_steps``): ``2 p`` gradient
        evaluations per row, and the rows' Hessians sum to that Hessian to
        rounding."""
        theta = np.asarray(theta, dtype=np.float64)
        H = np.empty((len(idx), self.n_params, self.n_params))
        for j, (tp, tm, width) in enumerate(_fd_points(theta)):
            H[:, :, j] = (self.grad_terms(tp, idx) - self.grad_terms(tm, idx)) / width
        return 0.5 * (H + H.transpose(0, 2, 1))

    #: :meth:`hess_terms` (and the full-data Hessian of :meth:`full_pass`) come
    #: from central differences of the gradients (2 p gradient calls)
    numerical_hess_terms = True

    def taylor_terms(self, theta_star, idx, order):
        """The Taylor constants at ``theta_star`` of the rows ``idx`` for control
        variates of order ``order``: ``(l_k(theta*), grad l_k(theta*) or None,
        Hessian l_k(theta*) or None)``, shapes (m,), (m, p), (m, p, p)."""
        return (self.loglik_terms(theta_star, idx),
                self.grad_terms(theta_star, idx) if order >= 1 else None,
                self.hess_terms(theta_star, idx) if order == 2 else None)

    # ---- Taylor control-variate residuals (orders 0 to 2 for any model) --------
    def _check_cv_order(self, order):
        if order not in (0, 1, 2):
            raise ValueError(f"control variates have order 0, 1 or 2, got {order!r}")

    def cv_residual_terms(self, theta, theta_star, idx, order):
        """Residuals ``d_k(theta) = l_k(theta) - q_k(theta)`` of the order-``order``
        Taylor expansion ``q_k`` of ``l_k`` at ``theta_star``, for ``k in idx``."""
        self._check_cv_order(order)
        l0, g0, H0 = self.taylor_terms(theta_star, idx, order)
        return taylor_residuals(np.asarray(theta) - theta_star, self.loglik_terms(theta, idx),
                                None, l0, g0, H0)[0]

    def cv_residuals_and_grads(self, theta, theta_star, idx, order):
        """``(d_k(theta), grad d_k(theta))`` for ``k in idx``: shapes (m,), (m, p)."""
        self._check_cv_order(order)
        l0, g0, H0 = self.taylor_terms(theta_star, idx, order)
        return taylor_residuals(np.asarray(theta) - theta_star, self.loglik_terms(theta, idx),
                                self.grad_terms(theta, idx), l0, g0, H0)

    def cv_grad_sum(self, theta, theta_star, idx, order, want_sum=False):
        """``(sum_k grad d_k(theta), sum_k d_k(theta))`` over ``idx`` (the sum is
        NaN unless ``want_sum``): the subsample part of a control-variate gradient."""
        self._check_cv_order(order)
        g = self.grad_sum(theta, idx)
        if order >= 1:
            g = g - self.grad_sum(theta_star, idx)
        if order == 2:
            delta = np.asarray(theta) - theta_star
            g = g - self.hess_terms(theta_star, idx).sum(axis=0) @ delta
        dsum = (float(np.sum(self.cv_residual_terms(theta, theta_star, idx, order)))
                if want_sum else np.nan)
        return g, dsum

    def subset(self, idx):
        """The model of the data ``idx`` alone (same prior)."""
        from ._views import SubsetModel         # (it subclasses Model)
        return SubsetModel(self, idx)

    def full_pass(self, theta, *, gradient=True, hessian=False):
        """Full-data ``(sum_k l_k, sum_k grad l_k, sum_k Hessian l_k)``.

        Entries not asked for are ``None``. The generic version evaluates in
        chunks and, for the Hessian, differentiates the gradient numerically
        (central differences); compiled models do all in one read of the data.
        """
        theta = np.asarray(theta, dtype=np.float64)
        self.count_passes(1 + ((2 * self.n_params if self.numerical_hess_terms else 1)
                                if hessian else 0))
        ll = 0.0
        grad = np.zeros(self.n_params) if gradient else None
        chunk = 65536
        for start in range(0, self.n_data, chunk):
            idx = np.arange(start, min(start + chunk, self.n_data), dtype=np.int64)
            ll += float(np.sum(self.loglik_terms(theta, idx)))
            if gradient:
                grad += self.grad_sum(theta, idx)
        hess = None
        if hessian and self.numerical_hess_terms:
            hess = self._numerical_hessian(theta)
        elif hessian:
            hess = np.zeros((self.n_params, self.n_params))
            for start in range(0, self.n_data, chunk):
                idx = np.arange(start, min(start + chunk, self.n_data), dtype=np.int64)
                hess += self.hess_terms(theta, idx).sum(axis=0)
        return ll, grad, hess

    def _numerical_hessian(self, theta):
        p = self.n_params
        hess = np.empty((p, p))
        all_idx = np.arange(self.n_data, dtype=np.int64)
        for j, (tp, tm, width) in enumerate(_fd_points(theta)):
            hess[:, j] = (self.grad_sum(tp, all_idx) - self.grad_sum(tm, all_idx)) / width
        return 0.5 * (hess + hess.T)

    def pass_threads(self, rows=None):
        """Threads a pass over ``rows`` of this model's rows (default: all of
        them) uses in the calling thread (1 here; the compiled models over rows
        use the thread budget on large data)."""
        return 1

    def log_likelihood(self, theta):
        return self.full_pass(theta, gradient=False)[0]

    def log_posterior(self, theta):
        """Full-data log posterior (up to a constant)."""
        return self.log_likelihood(theta) + self.prior.log_prob(theta)

    def log_posterior_and_grad(self, theta):
        ll, g, _ = self.full_pass(theta, gradient=True)
        return ll + self.prior.log_prob(theta), g + self.prior.grad_log_prob(theta)

    def neg_hessian_log_posterior(self, theta, diagonal=False):
        """``-d^2 log pi / d theta^2`` at theta (the posterior precision at the
        mode); ``diagonal``: its diagonal only, a (p,) vector from one pass
        (models whose ``full_pass`` takes ``hessian="diag"``: the GLMs)."""
        if diagonal:
            _, _, h = self.full_pass(theta, gradient=False, hessian="diag")
            return -h + self.prior.precision
        _, _, h = self.full_pass(theta, gradient=False, hessian=True)
        return -h + self.prior.neg_hessian()

    def range_bound(self, theta, theta_new):
        """``C >= max_k |l_k(theta_new) - l_k(theta)|`` (needed by the confidence sampler)."""
        raise NotImplementedError(
            f"{type(self).__name__} provides no range bound C(theta, theta'); the confidence "
            "sampler needs one: implement Model.range_bound(theta, theta_new)"
        )

    def cv_range_bound(self, theta, theta_new, theta_star, order):
        """``C >= max_k |d_k(theta_new) - d_k(theta)|`` for the control-variate
        residuals of order ``order`` around ``theta_star`` (the confidence
        sampler with a Taylor proxy)."""
        raise NotImplementedError(
            f"{type(self).__name__} provides no range bound for control-variate residual "
            "differences (cv_range_bound)")

    # ---- helpers ---------------------------------------------------------------
    def check_indices(self, idx):
        """Validate an index array (int, 1-D, in range) and return it as int64."""
        idx = np.asarray(idx)
        if idx.ndim != 1:
            raise ValueError(f"indices must be 1-D, got shape {idx.shape}")
        if idx.size and not np.issubdtype(idx.dtype, np.integer):
            raise TypeError(f"indices must be integers, got dtype {idx.dtype}")
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= self.n_data):
            raise IndexError(
                f"index out of range: indices must lie in [0, {self.n_data}), got "
                f"min {idx.min()}, max {idx.max()}"
            )
        return idx

    def init_params(self, rng=None):
        """A chain's starting point where no Laplace approximation is made
        (``has_hessian = False``): the prior's mean, zeros, here;
        :meth:`MLPModel.init_params` draws random weights (a network started
        at zero has the same gradient for every hidden unit of a layer).

        Parameters
        ----------
        rng : numpy.random.Generator, int or None
            The random generator (or a seed for one); not used here.
        """
        return np.zeros(self.n_params)

    def check_theta(self, theta):
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        if theta.shape != (self.n_params,):
            raise ValueError(f"theta must have shape ({self.n_params},), got {theta.shape}")
        return theta


class CompiledModel(Model):
    """A model whose per-datum methods are those of its compiled object
    ``self._cy`` (a :class:`CyModel` subclass set by ``__init__``): the NumPy-level
    API (validation, then one call) shared by the GLMs and the multinomial
    model."""

    evaluation_overhead = 0

    @property
    def n_full_passes(self):
        return self._cy.n_full_passes

    def _make_compiled(self):
        """The compiled object over ``self.X`` and ``self.y`` (set as ``_cy``)."""
        raise NotImplementedError

    def __getstate__(self):
        state = super().__getstate__()
        del state["_cy"]
        state["_n_full_passes"] = self._cy.n_full_passes
        return state

    def __setstate__(self, state):
        passes = state.pop("_n_full_passes")
        self.__dict__.update(state)
        self._cy = self._make_compiled()
        self._cy.note_passes(passes)

    def count_passes(self, k=1):
        """Count ``k`` full-data passes made outside the compiled passes."""
        self._cy.note_passes(k)

    @property
    def compiled(self):
        """The compiled model object sampler kernels take."""
        return self._cy

    def loglik_terms(self, theta, idx):
        return self._cy.loglik_terms(self.check_theta(theta), self.check_indices(idx))

    def loglik_diff_terms(self, theta, theta_new, idx):
        return self._cy.loglik_diff_terms(self.check_theta(theta), self.check_theta(theta_new),
                                          self.check_indices(idx))

    def grad_terms(self, theta, idx):
        return self._cy.grad_terms(self.check_theta(theta), self.check_indices(idx))

    def grad_sum(self, theta, idx):
        return self._cy.grad_sum_terms(self.check_theta(theta), self.check_indices(idx))[0]

    def cv_residual_terms(self, theta, theta_star, idx, order):
        self._check_cv_order(order)
        return self._cy.cv_residual_terms(order, self.check_theta(theta_star),
                                          self.check_theta(theta), self.check_indices(idx))

    def cv_grad_sum(self, theta, theta_star, idx, order, want_sum=False):
        self._check_cv_order(order)
        return self._cy.cv_grad_sum_terms(order, self.check_theta(theta_star),
                                          self.check_theta(theta), self.check_indices(idx))


class RowsModel(CompiledModel):
    """A compiled model over rows ``X`` (its compiled object's ``rows``): the
    GLMs, the multinomial model and linear regression with the noise sampled."""

    @property
    def row_norm_max(self):
        """``max_k ||x_k||`` including the intercept column (computed once; the
        confidence sampler's range bounds)."""
        if self.__dict__.get("_row_norm_max") is None:
            self._row_norm_max = float(self._cy.rows.row_norm_max())
        return self._row_norm_max

    def pass_values(self):
        """Values a full pass reads (the measure of its work the thread budget
        is given by): ``design_size(X)``; more where a row costs more."""
        return design_size(self.X)

    def pass_threads(self, rows=None):
        """Threads of a pass over ``rows`` of the rows (default: all of them; an
        exact stratum is a partial pass) in the calling thread: the thread
        budget (``n_threads``, capped by the driver's per-chain share) on large
        data, where they pay off, else 1. Results do not depend on it."""
        values = self.pass_values()
        if rows is not None:
            values = values * rows / max(self.n_data, 1)
        return threads_for_pass(values, self.n_threads)

    #: the per-row arrays (attributes, None where absent) a subset takes its rows of
    _per_row = ("weights",)

    def _subset(self, idx, make, **options):
        """``make(X[idx], y[idx], **options)`` with the same intercept, the rows of
        the per-row arrays and one thread, given the same prior: the model of the
        rows ``idx`` (sorted, copied)."""
        idx = np.sort(self.check_indices(idx))
        for name in self._per_row:
            values = getattr(self, name, None)
            options[name] = None if values is None else values[idx]
        sub = make(self.X[idx], self.y[idx], fit_intercept=self.fit_intercept, n_threads=1,
                   **options)
        sub.prior = self.prior
        return sub


class FunctionModel(Model):
    """A user model from NumPy-vectorised per-datum functions.

    Parameters
    ----------
    loglik : callable ``(theta, idx) -> ndarray (len(idx),)``
        Per-datum log-likelihoods for the data indexed by ``idx``.
    grad : callable ``(theta, idx) -> ndarray (len(idx), n_params)``
        Per-datum gradients.
    n_data : int
        Number of data terms.
    n_params : int
        Number of parameters.
    prior_scale : float or array-like, default=10.0
        Standard deviation(s) of the Gaussian prior.
    range_bound : callable ``(theta, theta_new) -> float``, optional
        Bound on ``max_k |l_k(theta_new) - l_k(theta)|`` (confidence sampler).
    hess : callable ``(theta, idx) -> ndarray (len(idx), n_params, n_params)``, optional
        Per-datum Hessians. HMC-ECS uses second-order Taylor control variates
        on user models (:ref:`algo-hmc-ecs-user-models`); without ``hess``
        their per-datum Hessians at the expansion point come from central
        differences of ``grad`` (``2 n_params`` calls of ``grad`` on the rows
        concerned), and the full-data Hessian (the mass matrix, Newton's
        method for the mode) too. With it, one call replaces those ``2
        n_params``, and the mode is found by Newton's method.

    Notes
    -----
    Samplers call ``loglik``, ``grad`` and ``hess`` with the GIL held, so chains
    in threads do not evaluate them in parallel; each call has a fixed cost
    (about 20-30 microseconds through NumPy) besides its rows, which HMC-ECS
    weighs when it chooses between a subsample and the full data
    (:ref:`algo-hmc-ecs-user-models`).

    Examples
    --------
    A 1-D Gaussian with unknown mean and log-scale, ``theta = (mu, log_sigma)``:

    >>> x = np.random.default_rng(0).normal(1.0, 2.0, size=500)
    >>> def loglik(theta, idx):
    ...     mu, log_s = theta
    ...     z = (x[idx] - mu) / np.exp(log_s)
    ...     return -0.5 * z**2 - log_s - 0.5 * np.log(2 * np.pi)
    >>> def grad(theta, idx):
    ...     mu, log_s = theta
    ...     z = (x[idx] - mu) / np.exp(log_s)
    ...     return np.column_stack([z / np.exp(log_s), z**2 - 1.0])
    >>> model = FunctionModel(loglik, grad, n_data=500, n_params=2)
    >>> model.loglik_terms(np.zeros(2), np.arange(3)).shape
    (3,)

    Per-datum Hessians of the same model (``mu`` and ``log_s`` mix in the
    cross term):

    >>> def hess(theta, idx):
    ...     mu, log_s = theta
    ...     s = np.exp(log_s)
    ...     z = (x[idx] - mu) / s
    ...     H = np.empty((len(idx), 2, 2))
    ...     H[:, 0, 0] = -1.0 / s**2
    ...     H[:, 0, 1] = H[:, 1, 0] = -2.0 * z / s
    ...     H[:, 1, 1] = -2.0 * z**2
    ...     return H
    >>> model = FunctionModel(loglik, grad, n_data=500, n_params=2, hess=hess)
    >>> model.hess_terms(np.zeros(2), np.arange(3)).shape
    (3, 2, 2)
    """

    def __init__(self, loglik, grad, n_data, n_params, prior_scale=10.0, range_bound=None,
                 hess=None):
        if not callable(loglik) or not callable(grad):
            raise TypeError("loglik and grad must be callables (theta, idx) -> array")
        if hess is not None and not callable(hess):
            raise TypeError("hess must be a callable (theta, idx) -> array "
                            "(len(idx), n_params, n_params), or None")
        for name, v in (("n_data", n_data), ("n_params", n_params)):
            if not isinstance(v, numbers.Integral) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        self._loglik = loglik
        self._grad = grad
        self._hess = hess
        self._range_bound = range_bound
        # analytic per-datum Hessians: Newton's method for the mode, one call
        # per full-data Hessian instead of 2 n_params gradient calls
        self.numerical_hess_terms = hess is None
        self.analytic_hessian = hess is not None
        self.n_data = int(n_data)
        self.n_params = int(n_params)
        self.prior = GaussianPrior(prior_scale, self.n_params)

    def fingerprint(self):
        fp = super().fingerprint()
        fp["terms"] = f"{id(self._loglik):x}:{id(self._grad):x}:{id(self._hess):x}"
        return fp

    def overflow_error(self, where, theta=None):
        """As :meth:`Model.overflow_error`, saying which of the user's functions
        returned NaN or infinity at ``theta`` and for how many data (found by
        calling each once on all the data, only to write this message)."""
        if theta is None:
            return super().overflow_error(where)
        idx = np.arange(self.n_data)
        bad = []
        funcs = [("loglik", self._loglik), ("grad", self._grad)]
        funcs += [("hess", self._hess)] if self._hess is not None else []
        for name, f in funcs:
            try:
                out = np.asarray(f(np.array(theta, dtype=np.float64), idx), dtype=np.float64)
            except Exception:  # noqa: BLE001 - the original problem is the one to report
                continue
            out = out.reshape(len(idx), -1) if out.size else out
            rows = ~np.isfinite(out).reshape(len(idx), -1).all(axis=1) if out.size else []
            if np.any(rows):
                what = "NaN" if np.isnan(out).any() else "infinity"
                bad.append(f"{name} returned {what} for {int(np.sum(rows)):,} of "
                           f"{self.n_data:,} data")
        if not bad:
            return super().overflow_error(where, theta)
        return ValueError(f"the log-posterior or its derivatives are not finite {where} "
                          f"(theta = {show_theta(theta)}): the model's {'; '.join(bad)}. "
                          "Check the FunctionModel's functions at that theta.")

    def loglik_terms(self, theta, idx):
        out = np.asarray(self._loglik(theta, idx), dtype=np.float64)
        if out.shape != (len(idx),):
            raise ValueError(
                f"loglik returned shape {out.shape}, expected ({len(idx)},) for {len(idx)} indices"
            )
        self._note_nan("loglik", theta, out)
        return out

    def grad_terms(self, theta, idx):
        out = np.asarray(self._grad(theta, idx), dtype=np.float64)
        if out.shape != (len(idx), self.n_params):
            raise ValueError(
                f"grad returned shape {out.shape}, expected ({len(idx)}, {self.n_params})"
            )
        self._note_nan("grad", theta, out)
        return out

    def hess_terms(self, theta, idx):
        if self._hess is None:
            return super().hess_terms(theta, idx)
        p = self.n_params
        out = np.asarray(self._hess(theta, idx), dtype=np.float64)
        if out.shape != (len(idx), p, p):
            raise ValueError(
                f"hess returned shape {out.shape}, expected ({len(idx)}, {p}, {p})")
        self._note_nan("hess", theta, out)
        return out

    def range_bound(self, theta, theta_new):
        if self._range_bound is None:
            return super().range_bound(theta, theta_new)
        return float(self._range_bound(theta, theta_new))
