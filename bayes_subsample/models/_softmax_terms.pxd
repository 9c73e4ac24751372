# Per-datum terms of multinomial (softmax) logistic regression as functions of
# the K linear predictors eta_k = x . theta_k of one datum, and the Taylor
# control-variate residuals around eta* (doc/algorithms/multinomial.rst).
# ``CyMultinomial`` (``_cymultinomial.pyx``) and the HMC-ECS core call these;
# nothing else computes these terms.
#
#   l(eta) = eta_y - lse(eta),   lse(eta) = log sum_k exp(eta_k)
#   dl/deta_k = [k == y] - p_k,  -d2l/deta deta^T = diag(p) - p p^T,  p = softmax(eta)
#
# Residuals of the order-0/1/2 expansion at eta* (delta = eta - eta*; the y
# terms cancel as for the scalar GLMs):
#   order 0: d = delta_y - D,                      D = lse(eta) - lse(eta*)
#   order 1: d = -(D - p*.delta)
#   order 2: d = -(D - p*.delta - (sum_k p*_k delta_k^2 - (p*.delta)^2) / 2)
# With the centred deviations c_k = delta_k - p*.delta (the residuals do not
# change under a shift common to all classes), D - p*.delta is computed as
# log1p(sum_k p*_k expm1(c_k)) while |c| is moderate, so the cancellation in the
# residuals costs an error relative to |c|, not to |lse| or to a common shift;
# beyond, as a direct difference of log-sum-exps.
#
# The cache of one datum at eta* (``2K + 1`` doubles, ``SOFTMAX_CACHE(K)``):
# eta*_0..K-1, p*_0..K-1, lse(eta*).
from libc.math cimport exp, log, log1p, expm1, fabs


cdef inline Py_ssize_t softmax_cache_width(Py_ssize_t K) noexcept nogil:
    return 2 * K + 1


cdef inline double softmax_lse(Py_ssize_t K, const double* eta, double* p) noexcept nogil:
    """``lse(eta)``; ``p`` (if not NULL) receives ``softmax(eta)``."""
    cdef Py_ssize_t k
    cdef double mx = eta[0], s = 0.0, e
    for k in range(1, K):
        if eta[k] > mx:
            mx = eta[k]
    for k in range(K):
        e = exp(eta[k] - mx)
        s += e
        if p != NULL:
            p[k] = e
    if p != NULL:
        for k in range(K):
            p[k] /= s
    return mx + log(s)


cdef inline double softmax_terms(Py_ssize_t K, int y, const double* eta, double* r,
                                 double* p) noexcept nogil:
    """Returns ``l = eta_y - lse``; ``r[k] = [k == y] - p_k`` and ``p = softmax(eta)``
    (``p`` is scratch of length K the caller owns; ``r`` may be NULL)."""
    cdef double lse = softmax_lse(K, eta, p)
    cdef Py_ssize_t k
    if r != NULL:
        for k in range(K):
            r[k] = -p[k]
        r[y] += 1.0
    return eta[y] - lse


cdef inline void softmax_cache(Py_ssize_t K, const double* eta_star, double* cache) noexcept nogil:
    """The cache of one datum at ``eta*``: ``[eta*, p*, lse(eta*)]``."""
    cdef Py_ssize_t k
    for k in range(K):
        cache[k] = eta_star[k]
    cache[2 * K] = softmax_lse(K, eta_star, cache + K)


cdef inline double softmax_residual(int order, Py_ssize_t K, int y, const double* eta,
                                    const double* cache, double* dp) noexcept nogil:
    """Residual ``d`` of the order-0/1/2 Taylor expansion at the cached ``eta*``
    (``cache``: see above); ``dp[k] = dd/deta_k`` when ``dp`` is not NULL.

    The residuals do not change when the same number is added to every
    ``delta_k`` (a shift common to all classes, which the posterior leaves to the
    prior), and neither does anything computed here: the deviations are centred
    first, ``c_k = delta_k - p*.delta``, so that ``D - p*.delta = log sum_k p*_k
    e^{c_k}`` and the quadratic term ``sum_k p*_k c_k^2`` are computed without
    cancelling large shifts."""
    cdef const double* es = cache
    cdef const double* ps = cache + K
    cdef double u = 0.0, pd = 0.0, var = 0.0, Dc, c, e, t
    cdef Py_ssize_t k
    cdef bint small = True
    for k in range(K):
        pd += ps[k] * (eta[k] - es[k])
    for k in range(K):
        c = (eta[k] - es[k]) - pd
        var += ps[k] * c * c
        if fabs(c) > 30.0:
            small = False
    if small:
        # Dc = D - p*.delta = log sum_k p*_k e^{c_k}; p_k = p*_k e^{c_k} / (1 + u)
        for k in range(K):
            e = expm1((eta[k] - es[k]) - pd)
            u += ps[k] * e
            if dp != NULL:
                dp[k] = ps[k] * (1.0 + e)
        Dc = log1p(u)
        if dp != NULL:
            t = 1.0 / (1.0 + u)
            for k in range(K):
                dp[k] *= t
    else:
        Dc = (softmax_lse(K, eta, dp) - cache[2 * K]) - pd
    # dp holds p = softmax(eta) here
    if order == 0:
        if dp != NULL:
            for k in range(K):
                dp[k] = -dp[k]
            dp[y] += 1.0
        return ((eta[y] - es[y]) - pd) - Dc
    if order == 1:
        if dp != NULL:
            for k in range(K):
                dp[k] = -(dp[k] - ps[k])
        return -Dc
    if dp != NULL:
        for k in range(K):
            dp[k] = -(dp[k] - ps[k] - ps[k] * ((eta[k] - es[k]) - pd))
    return -(Dc - 0.5 * var)
