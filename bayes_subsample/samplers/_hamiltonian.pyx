# cython: language_level=3
"""Compiled Hamiltonian dynamics (see ``_hamiltonian.pxd``): potentials, the
Euclidean metric and the leapfrog HMC transition, shared by full-data HMC
and HMC-ECS (whose subsampled potential lives in ``_hmc_ecs_fast.pyx``)."""
import numpy as np
from libc.math cimport exp, isfinite, log, INFINITY, NAN
from bayes_subsample._rng cimport get_bitgen, rng_normal, rng_uniform_open
from bayes_subsample.models._cymodel cimport CyModel
from bayes_subsample.models._rows cimport matvec, row_dot


cdef class Potential:
    """Abstract potential energy ``U = -log(target)`` holding the chain's position."""

    def __cinit__(self, *args, **kwargs):
        self.U = NAN
        self.stateful = True

    cdef void _alloc(self, Py_ssize_t dim):
        self.dim = dim
        self.theta = np.zeros(dim)
        self.grad = np.zeros(dim)
        self.work = np.zeros(5 * dim)

    cdef void begin(self) noexcept nogil:
        pass

    cdef double evaluate(self, const double* theta, double* grad) noexcept nogil:
        return NAN

    cdef void accept_last(self) noexcept nogil:
        pass

    cdef void reject_last(self) noexcept nogil:
        pass

    cdef void raise_failure(self) except *:
        self.failed = False
        raise RuntimeError(f"{type(self).__name__}: an evaluation failed")

    # ---- Python API --------------------------------------------------------------------
    def set_position(self, theta):
        """Move to ``theta`` and evaluate ``U`` and its gradient there; returns ``U``."""
        cdef double[::1] th = np.ascontiguousarray(theta, dtype=np.float64).copy()
        cdef Py_ssize_t j
        if th.shape[0] != self.dim:
            raise ValueError(f"theta must have length {self.dim}, got {th.shape[0]}")
        with nogil:
            self.begin()
            for j in range(self.dim):
                self.theta[j] = th[j]
            self.U = self.evaluate(&self.theta[0], &self.grad[0])
            self.accept_last()
        if self.failed:
            self.raise_failure()
        return self.U

    @property
    def position(self):
        """The current ``theta`` (a copy)."""
        return np.asarray(self.theta).copy()

    @property
    def gradient(self):
        """``grad U`` at the position (a copy)."""
        return np.asarray(self.grad).copy()

    def value_and_grad(self, theta):
        """``(U(theta), grad U(theta))`` without moving the position."""
        cdef double[::1] th = np.ascontiguousarray(theta, dtype=np.float64).copy()
        cdef double[::1] g = np.empty(self.dim)
        cdef double U
        if th.shape[0] != self.dim:
            raise ValueError(f"theta must have length {self.dim}")
        with nogil:
            self.begin()
            U = self.evaluate(&th[0], &g[0])
            self.reject_last()
        if self.failed:
            self.raise_failure()
        return U, np.asarray(g)

    def hmc_step(self, Metric metric, generator, double step_size, int n_leapfrog):
        """One HMC transition from the position (leapfrog, dense metric, MH accept).

        Returns ``(accepted, accept_prob, energy_error, n_grad)``.
        """
        if metric.dim != self.dim:
            raise ValueError("the metric and the potential have different dimensions")
        cdef bitgen_t* bg = get_bitgen(generator)
        cdef Transition t
        with generator.bit_generator.lock, nogil:
            hmc_transition(self, metric, bg, step_size, n_leapfrog, &t)
        if self.failed:
            self.raise_failure()
        return bool(t.accepted), t.accept_prob, t.energy_error, t.n_grad


cdef class FullPotential(Potential):
    """``U(theta) = -sum_k l_k(theta) - log p(theta)`` over all data (one fused
    full pass per evaluation, ``n_threads`` threads) with a Gaussian prior
    ``N(0, diag(1 / prior_precision))``."""

    cdef CyModel model
    cdef double[::1] prior_prec
    cdef int n_threads

    def __init__(self, CyModel model, prior_precision, int n_threads=1):
        self.model = model
        self._alloc(model.n_params)
        self.cost = model.n_data
        self.stateful = False
        self.prior_prec = np.ascontiguousarray(prior_precision, dtype=np.float64).copy()
        if self.prior_prec.shape[0] != self.dim:
            raise ValueError("prior_precision must have one entry per parameter")
        self.n_threads = max(1, n_threads)

    cdef double evaluate(self, const double* theta, double* grad) noexcept nogil:
        cdef double ll, lp = 0.0
        cdef Py_ssize_t j
        if self.model.full_sums(theta, &ll, grad, NULL, self.n_threads) != 0:
            self.failed = True
            return NAN
        for j in range(self.dim):
            lp -= 0.5 * self.prior_prec[j] * theta[j] * theta[j]
            grad[j] = -grad[j] + self.prior_prec[j] * theta[j]
        return -(ll + lp)

    cdef void raise_failure(self) except *:
        self.failed = False
        self.model.raise_error()


cdef class PythonPotential(Potential):
    """A potential written in Python, driven by the compiled transition: subclass
    it and implement ``_value_and_grad(theta) -> (U, grad)`` (and optionally
    ``_begin()``, ``_accept_last()``, ``_reject_last()``); they are called with
    the GIL. Exceptions raised there propagate out of the transition.

    Parameters
    ----------
    dim : int
        Dimension of theta.
    cost : int, default=0
        Per-datum evaluations of one ``_value_and_grad`` call.
    """

    cdef object _error

    def __init__(self, Py_ssize_t dim, long long cost=0):
        self._alloc(dim)
        self.cost = cost

    def _begin(self):
        pass

    def _accept_last(self):
        pass

    def _reject_last(self):
        pass

    def _value_and_grad(self, theta):
        raise NotImplementedError

    def _set_cost(self, long long cost):
        """Set the per-datum evaluations of one evaluation."""
        self.cost = cost

    def _set_state(self, U, grad):
        """Set ``U`` and ``grad U`` of the position (after a change of the
        target at the same theta, e.g. a new subsample)."""
        cdef double[::1] g = np.ascontiguousarray(grad, dtype=np.float64)
        self.U = U
        self.grad[:] = g

    cdef void _store(self) noexcept:
        import sys
        self._error = sys.exc_info()[1]
        self.failed = True

    cdef void _call(self, hook) noexcept:
        """``hook()``, an exception kept for ``raise_failure`` (GIL held)."""
        try:
            hook()
        except BaseException:
            self._store()

    cdef void begin(self) noexcept nogil:
        with gil:
            self._call(self._begin)

    cdef double evaluate(self, const double* theta, double* grad) noexcept nogil:
        cdef Py_ssize_t j
        cdef double[::1] g
        with gil:
            try:
                U, gr = self._value_and_grad(np.asarray(<double[:self.dim]> <double*> theta).copy())
                g = np.ascontiguousarray(gr, dtype=np.float64)
                for j in range(self.dim):
                    grad[j] = g[j]
                return float(U)
            except BaseException:
                self._store()
                return NAN

    cdef void accept_last(self) noexcept nogil:
        with gil:
            self._call(self._accept_last)

    cdef void reject_last(self) noexcept nogil:
        with gil:
            self._call(self._reject_last)

    cdef void raise_failure(self) except *:
        err, self._error = self._error, None
        self.failed = False
        if err is not None:
            raise err
        raise RuntimeError(f"{type(self).__name__}: an evaluation failed")


cdef class Metric:
    """The metric of a mass matrix ``M``: dense, diagonal or the identity.

    Parameters
    ----------
    chol_mass : array-like of shape (p, p) or None
        Lower Cholesky factor ``L`` of a dense ``M``.
    inv_mass : array-like of shape (p, p) or None
        ``M^-1`` (with ``chol_mass``).
    dim : int, optional
        Dimension (needed for the identity).
    diag_mass : array-like of shape (p,), optional
        The diagonal of a diagonal ``M`` (positive): ``O(p)`` memory and work per
        leapfrog step where a dense metric costs ``O(p^2)`` (wide models).
    """

    def __init__(self, chol_mass=None, inv_mass=None, dim=None, diag_mass=None):
        self.identity = False
        self.diagonal = False
        if diag_mass is not None:
            if chol_mass is not None:
                raise ValueError("give a dense or a diagonal mass matrix, not both")
            dm = np.ascontiguousarray(diag_mass, dtype=np.float64)
            if dm.ndim != 1 or not np.all(np.isfinite(dm)) or not np.all(dm > 0):
                raise ValueError("diag_mass must be a 1-d array of positive finite numbers")
            self.diagonal = True
            self.dim = dm.shape[0]
            self.dchol = np.sqrt(dm)
            self.dinv = 1.0 / dm
        elif chol_mass is None:
            if dim is None:
                raise ValueError("the identity metric needs dim")
            self.identity = True
            self.diagonal = True
            self.dim = int(dim)
            self.dchol = np.ones(self.dim)
            self.dinv = np.ones(self.dim)
        else:
            self.chol = np.ascontiguousarray(chol_mass, dtype=np.float64).copy()
            self.inv = np.ascontiguousarray(inv_mass, dtype=np.float64).copy()
            self.dim = self.chol.shape[0]

    @property
    def inv_mass(self):
        """``M^-1``: a (p, p) matrix, or its diagonal (p,) for a diagonal metric."""
        if self.diagonal:
            return np.asarray(self.dinv).copy()
        return np.asarray(self.inv).copy()

    @property
    def mass(self):
        """``M``: a (p, p) matrix, or its diagonal (p,) for a diagonal metric."""
        if self.diagonal:
            return 1.0 / np.asarray(self.dinv)
        L = np.asarray(self.chol)
        return L @ L.T

    cdef void sample_momentum(self, bitgen_t* bg, double* z, double* p) noexcept nogil:
        cdef Py_ssize_t j
        for j in range(self.dim):
            z[j] = rng_normal(bg)
        for j in range(self.dim):
            if self.diagonal:
                p[j] = self.dchol[j] * z[j]
            else:
                p[j] = row_dot(&self.chol[j, 0], z, j + 1, False)

    cdef double kinetic(self, const double* p, double* vel) noexcept nogil:
        cdef Py_ssize_t j
        cdef double k = 0.0
        if self.diagonal:
            for j in range(self.dim):
                vel[j] = self.dinv[j] * p[j]
        else:
            matvec(&self.inv[0, 0], self.dim, p, vel)
        for j in range(self.dim):
            k += p[j] * vel[j]
        return 0.5 * k


cdef void hmc_transition(Potential pot, Metric metric, bitgen_t* bg, double eps,
                         int n_leapfrog, Transition* out) noexcept nogil:
    cdef Py_ssize_t j, p = pot.dim
    cdef double* th = &pot.work[0]
    cdef double* g1 = th + p
    cdef double* mom = th + 2 * p
    cdef double* vel = th + 3 * p
    cdef double* z = th + 4 * p
    cdef double H0, U1 = INFINITY, dE, r, log_u
    cdef bint finite = True
    cdef int it, n_done = 0
    pot.begin()
    metric.sample_momentum(bg, z, mom)
    H0 = pot.U + metric.kinetic(mom, vel)
    for j in range(p):
        th[j] = pot.theta[j]
        mom[j] -= 0.5 * eps * pot.grad[j]
    for it in range(n_leapfrog):
        metric.kinetic(mom, vel)
        for j in range(p):
            th[j] += eps * vel[j]
        U1 = pot.evaluate(th, g1)
        n_done += 1
        if not isfinite(U1):
            finite = False
            break
        r = eps if it < n_leapfrog - 1 else 0.5 * eps
        for j in range(p):
            mom[j] -= r * g1[j]
            if not isfinite(g1[j]):
                finite = False
        if not finite:
            break
    dE = (U1 + metric.kinetic(mom, vel)) - H0 if finite else INFINITY
    # u is drawn whatever dE is, so the stream does not depend on divergences
    log_u = log(rng_uniform_open(bg))
    out.accepted = isfinite(dE) and log_u < -dE
    out.energy_error = dE
    out.accept_prob = (1.0 if dE <= 0 else exp(-dE)) if isfinite(dE) else 0.0
    out.n_grad = n_done
    if out.accepted:
        for j in range(p):
            pot.theta[j] = th[j]
            pot.grad[j] = g1[j]
        pot.U = U1
        pot.accept_last()
    else:
        pot.reject_last()
