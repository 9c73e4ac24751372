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


cdef inline Py_ssize_t softmax_cache_width(Py_ssize_t K) noexcept nogil:
    return 2 * K + 1


cdef extern from "_simd.h" nogil:
    double bs_softmax_lse(Py_ssize_t K, const double* eta, double* p)
    void bs_softmax_terms_block(Py_ssize_t count, Py_ssize_t K, const double* y,
                                const double* eta, double* L, double* R, double* P)
    void bs_softmax_residuals(int order, Py_ssize_t count, Py_ssize_t K, const double* y,
                              const double* eta, const double* cache, Py_ssize_t W,
                              double* D, double* DP)


cdef inline double softmax_lse(Py_ssize_t K, const double* eta, double* p) noexcept nogil:
    """``lse(eta)``; ``p`` (if not NULL) receives ``softmax(eta)`` (``_simd_softmax.h``)."""
    return bs_softmax_lse(K, eta, p)


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


cdef inline void softmax_terms_block(Py_ssize_t count, Py_ssize_t K, const double* y,
                                     const double* eta, double* L, double* R,
                                     double* P) noexcept nogil:
    """``softmax_terms`` of ``count`` data (``y[i]``, ``eta[i K:(i + 1) K]``), with
    the same bits: ``L[i]`` the terms, ``R`` (count x K, if not NULL) their
    derivatives, ``P`` (count x K, if not NULL) the probabilities; the block's
    exps in one SIMD loop (``_simd_softmax.h``)."""
    bs_softmax_terms_block(count, K, y, eta, L, R, P)


cdef inline void softmax_cache(Py_ssize_t K, const double* eta_star, double* cache) noexcept nogil:
    """The cache of one datum at ``eta*``: ``[eta*, p*, lse(eta*)]``."""
    cdef Py_ssize_t k
    for k in range(K):
        cache[k] = eta_star[k]
    cache[2 * K] = softmax_lse(K, eta_star, cache + K)


cdef inline void softmax_residuals(int order, Py_ssize_t K, Py_ssize_t count, const double* y,
                                   const double* eta, const double* cache, Py_ssize_t W,
                                   double* D, double* dp) noexcept nogil:
    """``D[i]`` = the residual of datum ``i`` of a block (class ``y[i]``, predictors
    ``eta[i K:(i + 1) K]``, cache ``cache[i W:]``) and ``dp[i K + k]`` (if not NULL)
    its derivatives: ``softmax_residual`` of each, with the same bits, its
    polynomials computed over the block (``_simd_softmax.h``)."""
    bs_softmax_residuals(order, count, K, y, eta, cache, W, D, dp)


cdef inline double softmax_residual(int order, Py_ssize_t K, int y, const double* eta,
                                    const double* cache, double* dp) noexcept nogil:
    """Residual ``d`` of the order-0/1/2 Taylor expansion at the cached ``eta*``
    (``cache``: see above); ``dp[k] = dd/deta_k`` when ``dp`` is not NULL.
    The residuals do not change when the same number is added to every
    ``delta_k`` (a shift common to all classes, which the posterior leaves to the
    prior), and neither does anything computed here: the deviations are centred
    first, ``c_k = delta_k - p*.delta``, so that ``D - p*.delta = log sum_k p*_k
    e^{c_k}`` (``log1p(sum_k p*_k expm1(c_k))`` while every ``|c_k| <= 30``, else
    the direct difference of log-sum-exps) and the quadratic term ``sum_k p*_k
    c_k^2`` are computed without cancelling large shifts. A block of one datum of
    ``softmax_residuals``: the same bits as in any block."""
    cdef double yd = y, d = 0.0
    bs_softmax_residuals(order, 1, K, &yd, eta, cache, 2 * K + 1, &d, dp)
    return d
