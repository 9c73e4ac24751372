# Per-datum terms of the canonical GLMs (ALGORITHMS.md §1.1) and the Taylor
# control-variate residuals d_k, d'_k (§1.2), as inline nogil functions that
# every kernel (full passes, subsample loops, HMC-ECS, SG samplers) shares.
#
# family: 0 logistic (y in {0,1}), 1 Poisson (y in N), 2 Gaussian (phi = noise variance)
from libc.math cimport exp, log, log1p, expm1, fabs, lgamma, M_PI

cdef enum:
    FAMILY_LOGISTIC = 0
    FAMILY_POISSON = 1
    FAMILY_GAUSSIAN = 2

# Below |delta| < 2e-3 (logistic) / 1e-2 (Poisson) the residuals use their
# Taylor series (5th / 6th order), avoiding cancellation in the direct form.


cdef inline double softplus(double eta) noexcept nogil:
    if eta > 0:
        return eta + log1p(exp(-eta))
    return log1p(exp(eta))


cdef inline double sigmoid(double eta) noexcept nogil:
    cdef double e
    if eta >= 0:
        e = exp(-eta)
        return 1.0 / (1.0 + e)
    e = exp(eta)
    return e / (1.0 + e)


cdef inline void glm_terms(int family, double y, double eta, double phi,
                           bint want_ll, double* ll, double* r, double* w) noexcept nogil:
    """ll = log-likelihood term, r = d ll / d eta, w = -d^2 ll / d eta^2."""
    cdef double e, p, mu
    if family == FAMILY_LOGISTIC:
        e = exp(-fabs(eta))              # one exp serves softplus and sigmoid
        if eta >= 0:
            p = 1.0 / (1.0 + e)
            w[0] = e / ((1.0 + e) * (1.0 + e))
        else:
            p = e / (1.0 + e)
            w[0] = e / ((1.0 + e) * (1.0 + e))
        r[0] = y - p
        if want_ll:
            ll[0] = y * eta - ((eta if eta > 0 else 0.0) + log1p(e))
    elif family == FAMILY_POISSON:
        mu = exp(eta)
        r[0] = y - mu
        w[0] = mu
        if want_ll:
            ll[0] = y * eta - mu - lgamma(y + 1.0)
    else:
        r[0] = (y - eta) / phi
        w[0] = 1.0 / phi
        if want_ll:
            ll[0] = -0.5 * (y - eta) * (y - eta) / phi - 0.5 * log(2.0 * M_PI * phi)


cdef inline double glm_loglik(int family, double y, double eta, double phi) noexcept nogil:
    cdef double ll, r, w
    glm_terms(family, y, eta, phi, True, &ll, &r, &w)
    return ll


cdef inline void cv_residual(int family, int order, double y, double eta, double eta_star,
                             double phi, double* d, double* dp) noexcept nogil:
    """Taylor control-variate residual d = l(eta) - q(eta) and d' = dd/deta.

    Orders 1 and 2 are computed as minus the Taylor remainder of b (the y terms
    cancel), with series expansions for small delta = eta - eta_star.
    """
    cdef double delta = eta - eta_star
    cdef double ps, ws, d2, d2p, t, mu_s, e1
    if order == 0:
        if family == FAMILY_LOGISTIC:
            d[0] = y * delta - (softplus(eta) - softplus(eta_star))
            dp[0] = y - sigmoid(eta)
        elif family == FAMILY_POISSON:
            mu_s = exp(eta_star)
            d[0] = y * delta - mu_s * expm1(delta)
            dp[0] = y - exp(eta)
        else:
            d[0] = (y * delta - 0.5 * delta * (eta + eta_star)) / phi
            dp[0] = (y - eta) / phi
        return
    # second-order residual d2 = -(b(eta) - b(eta*) - b'(eta*) delta - b''(eta*) delta^2 / 2) / phi
    if family == FAMILY_LOGISTIC:
        ps = sigmoid(eta_star)
        ws = sigmoid(eta_star) * sigmoid(-eta_star)   # p(1-p) without cancellation
        if fabs(delta) < 2e-3:
            t = (1.0 - 2.0 * ps)
            d2 = -ws * delta * delta * delta * (
                t / 6.0 + delta * ((1.0 - 6.0 * ws) / 24.0
                                   + delta * t * (1.0 - 12.0 * ws) / 120.0))
            d2p = -ws * delta * delta * (
                t / 2.0 + delta * ((1.0 - 6.0 * ws) / 6.0
                                   + delta * t * (1.0 - 12.0 * ws) / 24.0))
        else:
            d2 = -(softplus(eta) - softplus(eta_star) - ps * delta - 0.5 * ws * delta * delta)
            d2p = -(sigmoid(eta) - ps - ws * delta)
    elif family == FAMILY_POISSON:
        mu_s = exp(eta_star)
        if fabs(delta) < 1e-2:
            d2 = -mu_s * delta * delta * delta * (
                1.0 / 6.0 + delta * (1.0 / 24.0 + delta * (1.0 / 120.0 + delta / 720.0)))
            d2p = -mu_s * delta * delta * (
                0.5 + delta * (1.0 / 6.0 + delta * (1.0 / 24.0 + delta / 120.0)))
        else:
            e1 = expm1(delta)
            d2 = -mu_s * (e1 - delta - 0.5 * delta * delta)
            d2p = -mu_s * (e1 - delta)
        ws = mu_s
    else:
        d2 = 0.0
        d2p = 0.0
        ws = 1.0 / phi
    if order == 2:
        d[0] = d2
        dp[0] = d2p
    else:
        # first order: the quadratic term is no longer subtracted
        d[0] = d2 - 0.5 * ws * delta * delta
        dp[0] = d2p - ws * delta
