# Hamiltonian building blocks shared by full-data HMC and HMC-ECS: a potential
# energy U(theta) = -log(target) with its gradient, a Euclidean metric, and the
# compiled leapfrog transition that runs on any potential (doc/algorithms/full_data.rst).
#
# A ``Potential`` holds the chain's position (theta, U, grad U) and evaluates U
# and grad U at trajectory points; an MH decision then tells it whether the
# last point evaluated becomes the position (``accept_last``) or not
# (``reject_last``), so a potential that keeps per-position work (HMC-ECS keeps
# the subsample residuals at the position) swaps instead of recomputing.
# ``begin`` is called once before a trajectory.
from numpy.random cimport bitgen_t


cdef class Potential:
    cdef readonly Py_ssize_t dim
    # the position: theta, U(theta), grad U(theta)
    cdef double[::1] theta
    cdef double[::1] grad
    cdef readonly double U
    cdef double[::1] work          # scratch of the transition (5 * dim)
    # per-datum evaluations of one ``evaluate`` call
    cdef readonly long long cost
    # set when an evaluation failed for a reason other than numerics (an exception
    # in user code, kept by the model): the caller re-raises it
    cdef bint failed
    # the potential keeps work tied to its position (HMC-ECS's residual banks), so a
    # transition that ends elsewhere than at the last point evaluated must
    # evaluate it again there (NUTS); False when the position is theta, U, grad only
    cdef readonly bint stateful

    cdef void _alloc(self, Py_ssize_t dim)
    cdef void begin(self) noexcept nogil
    cdef double evaluate(self, const double* theta, double* grad) noexcept nogil
    cdef void accept_last(self) noexcept nogil
    cdef void reject_last(self) noexcept nogil
    cdef void raise_failure(self) except *


cdef class Metric:
    """Euclidean metric ``K(p) = p^T M^-1 p / 2`` with ``M = L L^T`` dense, diagonal or
    the identity (a diagonal of ones)."""
    cdef readonly Py_ssize_t dim
    cdef readonly bint identity
    cdef readonly bint diagonal    # M diagonal (the identity included): the vectors below
    cdef double[:, ::1] chol       # dense: L (lower)
    cdef double[:, ::1] inv        # dense: M^-1
    cdef double[::1] dchol         # diagonal: sqrt(M_jj)
    cdef double[::1] dinv          # diagonal: 1 / M_jj

    # p = L z with z ~ N(0, I) drawn from bg (z: scratch of dim)
    cdef void sample_momentum(self, bitgen_t* bg, double* z, double* p) noexcept nogil
    # vel = M^-1 p; returns p . vel / 2
    cdef double kinetic(self, const double* p, double* vel) noexcept nogil


cdef struct Transition:
    bint accepted
    double accept_prob
    double energy_error
    int n_grad


# One HMC transition of ``n_leapfrog`` leapfrog steps of size ``eps`` from the
# potential's position; on acceptance the end point becomes the position.
cdef void hmc_transition(Potential pot, Metric metric, bitgen_t* bg, double eps,
                         int n_leapfrog, Transition* out) noexcept nogil
