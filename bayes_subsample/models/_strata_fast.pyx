# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled per-stratum range bounds of the logistic GLM (the twin of
``_strata.logistic_stratum_range_bounds``, its NumPy reference): one call per
MH decision of the stratified confidence sampler, O(n_strata * n_params)."""
import numpy as np
from libc.math cimport fabs, sqrt, exp, log, INFINITY
from libc.stdint cimport int64_t


cdef double _nu(const double* w, const int64_t* varying, Py_ssize_t nv, const double* chol,
                bint diagonal) noexcept nogil:
    """``||M^T w_V||`` with ``M`` lower triangular (or diagonal)."""
    cdef Py_ssize_t i, j
    cdef double acc, tot = 0.0
    for i in range(nv):
        if diagonal:
            acc = chol[i] * w[varying[i]]
        else:
            acc = 0.0
            for j in range(i, nv):          # (M^T w)_i = sum_{j >= i} M[j, i] w_j
                acc += chol[j * nv + i] * w[varying[j]]
        tot += acc * acc
    return sqrt(tot)


cdef inline double _quad_max(double lo1, double hi1, double lo2, double hi2) noexcept nogil:
    """max of a^2 + a b + b^2 over the box [lo1, hi1] x [lo2, hi2] (at a corner)."""
    cdef double best = lo1 * lo1 + lo1 * lo2 + lo2 * lo2, q
    q = lo1 * lo1 + lo1 * hi2 + hi2 * hi2
    if q > best:
        best = q
    q = hi1 * hi1 + hi1 * lo2 + lo2 * lo2
    if q > best:
        best = q
    q = hi1 * hi1 + hi1 * hi2 + hi2 * hi2
    if q > best:
        best = q
    return best


cdef double B3_MAX = 1.0 / (6.0 * sqrt(3.0))
cdef double B3_PEAK = log((3.0 + sqrt(3.0)) / (3.0 - sqrt(3.0)))


cdef inline double _abs_b3(double eta) noexcept nogil:
    cdef double e = exp(-fabs(eta))
    return e / ((1.0 + e) * (1.0 + e)) * (1.0 - e) / (1.0 + e)


cdef inline double _b3_sup(double lo, double hi) noexcept nogil:
    """max |b'''| of the softplus over [lo, hi]."""
    cdef double x, y
    if (lo <= B3_PEAK and hi >= B3_PEAK) or (lo <= -B3_PEAK and hi >= -B3_PEAK):
        return B3_MAX
    x = _abs_b3(lo)
    y = _abs_b3(hi)
    return x if x > y else y


def logistic_bounds(const double[:, ::1] centers, const double[::1] radius,
                    const int64_t[::1] varying, chol, const double[::1] theta,
                    const double[::1] theta_new, theta_star, eta_star_range,
                    double[::1] out):
    """Fill ``out`` (n_strata,) with the logistic GLM's per-stratum range bounds
    (``theta_star`` None: log-likelihood differences; else second-order residual
    differences around it; ``eta_star_range`` (n_strata, 2) or None), as
    ``_strata.logistic_stratum_range_bounds``."""
    cdef Py_ssize_t S = centers.shape[0], p = centers.shape[1], nv = varying.shape[0]
    cdef Py_ssize_t s, j
    cdef const double[::1] ch = np.ascontiguousarray(chol, dtype=np.float64).reshape(-1)
    cdef bint diagonal = np.ndim(chol) == 1
    cdef const double[::1] ts
    cdef const double[:, ::1] er
    cdef bint ranged = eta_star_range is not None
    cdef double lo, hi, b3
    cdef double[::1] h = np.empty(p), u = np.empty(p), v = np.empty(p), w = np.empty(p)
    cdef bint residual = theta_star is not None
    cdef double nh, nu_, nv_, nw, dh, du, dv, dw, r, H, Hm, quad, cubes, mh, a_lo, a_hi
    cdef double b_lo, b_hi, c1, c2, m_abs
    cdef const double* chp = &ch[0] if ch.shape[0] else NULL
    if theta.shape[0] != p or theta_new.shape[0] != p or out.shape[0] != S \
            or radius.shape[0] != S:
        raise ValueError("shapes of theta, theta_new, radius or out do not match the centers")
    if ch.shape[0] != (nv if diagonal else nv * nv):
        raise ValueError(f"chol must hold the metric of the {nv} varying columns")
    if nv and (np.min(varying) < 0 or np.max(varying) >= p):
        raise ValueError(f"varying columns must lie in [0, {p})")
    if residual:
        ts = np.ascontiguousarray(theta_star, dtype=np.float64)
        if ts.shape[0] != p:
            raise ValueError(f"theta_star must have length {p}")
    if ranged:
        er = np.ascontiguousarray(eta_star_range, dtype=np.float64)
        if er.shape[0] != S or er.shape[1] != 2:
            raise ValueError(f"eta_star_range must have shape ({S}, 2)")
    with nogil:
        for j in range(p):
            h[j] = theta_new[j] - theta[j]
            if residual:
                u[j] = theta[j] - ts[j]
                v[j] = theta_new[j] - ts[j]
                w[j] = 0.5 * (u[j] + v[j])
        nh = _nu(&h[0], &varying[0] if nv else NULL, nv, chp, diagonal)
        if residual:
            nu_ = _nu(&u[0], &varying[0] if nv else NULL, nv, chp, diagonal)
            nv_ = _nu(&v[0], &varying[0] if nv else NULL, nv, chp, diagonal)
            nw = _nu(&w[0], &varying[0] if nv else NULL, nv, chp, diagonal)
        for s in range(S):
            dh = 0.0
            du = 0.0
            dv = 0.0
            for j in range(p):
                dh += centers[s, j] * h[j]
                if residual:
                    du += centers[s, j] * u[j]
                    dv += centers[s, j] * v[j]
            r = radius[s]
            H = fabs(dh) + r * nh
            if not residual or H == 0.0:
                out[s] = H
                continue
            a_lo = du - r * nu_
            a_hi = du + r * nu_
            b_lo = dv - r * nv_
            b_hi = dv + r * nv_
            quad = _quad_max(a_lo, a_hi, b_lo, b_hi)
            # |b^3 - a^3| = |h| (3 m^2 + h^2 / 4), m = x . ((theta + theta') / 2 - theta*)
            dw = 0.5 * (du + dv)
            m_abs = fabs(dw) + r * nw
            mh = H * (3.0 * m_abs * m_abs + 0.25 * H * H)
            c1 = fabs(b_hi * b_hi * b_hi - a_lo * a_lo * a_lo)
            c2 = fabs(b_lo * b_lo * b_lo - a_hi * a_hi * a_hi)
            cubes = c1 if c1 > c2 else c2
            if H * quad < cubes:
                cubes = H * quad
            if mh < cubes:
                cubes = mh
            b3 = B3_MAX
            if ranged:
                # the linear predictors eta*_k + delta the remainder visits, delta
                # between 0 and the intervals A, B
                lo = a_lo if a_lo < b_lo else b_lo
                hi = a_hi if a_hi > b_hi else b_hi
                b3 = _b3_sup(er[s, 0] + (lo if lo < 0.0 else 0.0),
                             er[s, 1] + (hi if hi > 0.0 else 0.0))
            out[s] = cubes * b3 / 6.0 if cubes == cubes else INFINITY
    return np.asarray(out)
