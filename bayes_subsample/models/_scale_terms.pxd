# Per-datum terms of linear regression with Gaussian noise whose log scale is a
# parameter, as functions of the linear predictor eta = x . beta and of
# tau = log sigma, and their Taylor control-variate residuals
# (doc/algorithms/building_blocks.rst, "Linear regression with the noise
# sampled"). ``CyGaussianScale`` (``_cylinear.pyx``) and the HMC-ECS core call
# these; nothing else computes these terms.
#
#   l = -tau - log(2 pi) / 2 - w r^2 / 2,   r = y - eta,  w = exp(-2 tau)
#   dl/deta = w r,  dl/dtau = w r^2 - 1
#   -d2l/deta2 = w,  -d2l/deta dtau = 2 w r,  -d2l/dtau2 = 2 w r^2
#
# Control variates: the order-0/1/2 Taylor expansion of l in (eta, tau) at
# (eta*, tau*). With r* = y - eta*, w* = exp(-2 tau*), delta = eta - eta* and
# u = tau - tau*, so that w r^2 = w* e (r* - delta)^2 with e = exp(-2u), the
# residual d = l - q of order k is
#
#   d = -w* (A r*^2 - 2 B r* delta + C delta^2) / 2        (order 0: also - u)
#
# with (A, B, C) = (E0, E1, E2) at order 2, (E1, E2, e) at order 1 and
# (E2, e, e) at order 0, where
#
#   E2 = e - 1,  E1 = e - 1 + 2u,  E0 = e - 1 + 2u - 2u^2
#
# (the exponential's Taylor remainders of orders 1, 2, 3 in v = -2u; expanding
# to order 2 subtracts from l exactly the terms of total degree <= 2 in delta
# and u). Their derivatives follow from dE0/du = -2 E1, dE1/du = -2 E2,
# dE2/du = de/du = -2e:
#
#   dd/deta = w* (B r* - C delta)
#   dd/dtau = w* (A' r*^2 - 2 B' r* delta + C' delta^2)     (order 0: also - 1)
#
# with (A', B', C') the next coefficients, (E1, E2, e), (E2, e, e) and (e, e, e).
# The coefficients depend on u alone, which is the same for every datum of a
# call: ``scale_consts`` computes them once, E0 and E1 by their series in v
# while |v| < 1 (no cancellation as theta -> theta*), and each datum then costs
# a few multiply-adds.
from libc.math cimport exp, expm1, log, M_PI, fabs

cdef extern from *:
    """
    /* log(2 pi) / 2 */
    #define BS_HALF_LOG_2PI 0.91893853320467274178
    """
    double HALF_LOG_2PI "BS_HALF_LOG_2PI"


# everything the terms of one call need besides the data: tau, w = exp(-2 tau)
# (log-likelihood terms) and, for residuals of ``order``, w* and the coefficients
cdef struct ScaleConsts:
    int order          # the Taylor order, or negative for the log-likelihood
    double tau         # log sigma at theta
    double w           # exp(-2 tau)
    double u           # tau - tau*
    double ws          # w* = exp(-2 tau*)
    double A, B, C     # the residual's coefficients
    double Au, Bu, Cu  # those of its tau-derivative
    double off         # order 0: the residual's -u
    double offu        # order 0: its derivative's -1


cdef inline void exp_remainders(double u, double* E0, double* E1, double* E2,
                                double* e) noexcept nogil:
    """``e = exp(-2u)`` and its Taylor remainders ``E2 = e - 1``, ``E1 = e - 1 + 2u``,
    ``E0 = E1 - 2u^2``: for ``|v| = |2u| < 1`` the series of ``E0`` in ``v`` (terms
    to ``v^20 / 20!``: the rest is below 1e-18 of the sum), else directly."""
    cdef double v = -2.0 * u, s, t
    cdef int j
    e[0] = exp(v)
    E2[0] = expm1(v)
    if fabs(v) < 1.0:
        # E0 = sum_{j >= 3} v^j / j!, summed forward (decreasing terms)
        t = v * v * v / 6.0
        s = t
        for j in range(4, 21):
            t = t * v / j
            s += t
        E0[0] = s
        E1[0] = s + 0.5 * v * v
    else:
        E1[0] = E2[0] - v
        E0[0] = E1[0] - 0.5 * v * v


cdef inline void scale_consts(int order, double tau, double tau_star,
                              ScaleConsts* k) noexcept nogil:
    """The constants of a call at ``tau`` (and ``tau_star`` for residuals: ``order``
    0, 1 or 2; a negative order is the log-likelihood, ``tau_star`` unused)."""
    cdef double E0, E1, E2, e
    k.order = order
    k.tau = tau
    k.w = exp(-2.0 * tau)
    k.off = 0.0
    k.offu = 0.0
    if order < 0:
        return
    k.u = tau - tau_star
    k.ws = exp(-2.0 * tau_star)
    exp_remainders(k.u, &E0, &E1, &E2, &e)
    # (A, B, C) and (A', B', C') slide along (E0, E1, E2, e, e, e) with the order
    if order == 2:
        _set(k, E0, E1, E2, E1, E2, e)
    elif order == 1:
        _set(k, E1, E2, e, E2, e, e)
    else:
        _set(k, E2, e, e, e, e, e)
        k.off = -k.u
        k.offu = -1.0


cdef inline void _set(ScaleConsts* k, double A, double B, double C, double Au, double Bu,
                      double Cu) noexcept nogil:
    k.A = A
    k.B = B
    k.C = C
    k.Au = Au
    k.Bu = Bu
    k.Cu = Cu


cdef inline double scale_loglik(const ScaleConsts* k, double y, double eta, double* d_eta,
                                double* d_tau) noexcept nogil:
    """``l`` of one datum; ``d_eta``, ``d_tau`` (if not NULL) its derivatives."""
    cdef double r = y - eta, wr = k.w * r
    if d_eta != NULL:
        d_eta[0] = wr
    if d_tau != NULL:
        d_tau[0] = wr * r - 1.0
    return -k.tau - HALF_LOG_2PI - 0.5 * wr * r


cdef inline double scale_residual(const ScaleConsts* k, double y, double eta,
                                  double eta_star, double* d_eta,
                                  double* d_tau) noexcept nogil:
    """The residual ``d`` of one datum (order ``k.order``); ``d_eta``, ``d_tau`` (if
    not NULL) its derivatives."""
    cdef double rs = y - eta_star, dl = eta - eta_star
    if d_eta != NULL:
        d_eta[0] = k.ws * (k.B * rs - k.C * dl)
    if d_tau != NULL:
        d_tau[0] = k.ws * (rs * (k.Au * rs - 2.0 * k.Bu * dl) + k.Cu * dl * dl) + k.offu
    return -0.5 * k.ws * (rs * (k.A * rs - 2.0 * k.B * dl) + k.C * dl * dl) + k.off


cdef inline double scale_term(const ScaleConsts* k, double y, double eta, double eta_star,
                              double* d_eta, double* d_tau) noexcept nogil:
    """The term of one datum by ``k.order``: the log-likelihood (negative) or the
    residual of that order."""
    if k.order < 0:
        return scale_loglik(k, y, eta, d_eta, d_tau)
    return scale_residual(k, y, eta, eta_star, d_eta, d_tau)


cdef inline double scale_terms_block(const ScaleConsts* k, Py_ssize_t m, const double* y,
                                     const double* eta, const double* eta_star, double* t,
                                     double* dt) noexcept nogil:
    """The terms of ``m`` data (``eta_star`` unused for the log-likelihood) into ``t``
    and, if ``dt`` is not NULL, their derivatives ``dt[2i] = dt_i / deta_i``,
    ``dt[2i + 1] = dt_i / dtau``; returns the sum of the terms."""
    cdef Py_ssize_t i
    cdef double s = 0.0
    for i in range(m):
        t[i] = scale_term(k, y[i], eta[i], 0.0 if eta_star == NULL else eta_star[i],
                          NULL if dt == NULL else dt + 2 * i,
                          NULL if dt == NULL else dt + 2 * i + 1)
        s += t[i]
    return s
