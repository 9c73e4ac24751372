# Per-datum terms of the canonical GLMs as functions of the linear predictor
# eta, and the Taylor control-variate residuals d, d' (doc/algorithms/building_blocks.rst),
# one set of inline nogil functions per family, and at the end the three
# functions ``glm_terms``, ``glm_cv_consts``, ``glm_cv_residual`` that call the
# set of a ``Family``. ``CyGLM`` (``_cyglm.pyx``) loops over chunks of data
# with those; nothing else computes these terms.
#
# Log-likelihood l(eta) = (y eta - b(eta)) / phi + c(y):
#   logistic  b = softplus, phi = 1       Poisson  b = exp, phi = 1, c = -log y!
#   Gaussian  b = eta^2 / 2, phi = noise variance, c = -y^2/(2 phi) - log(2 pi phi) / 2
from libc.math cimport log, expm1, fabs, lgamma, M_PI


# exp and log1p on [0, 1] as branch-free arithmetic (within 1 ulp of libm's, measured
# in tests/test_simd.py), and the logistic and Poisson terms over a block of data
# with them, compiled to SIMD code (``_simd.h``): the per-datum terms of a full
# pass cost about 14 ns a row with libm's scalar exp and log1p, 3 ns with these
cdef extern from "_simd.h" nogil:
    double bs_exp(double x)
    double bs_log1p01(double x)
    double bs_sum(Py_ssize_t m, const double* x)
    void bs_logistic_terms(Py_ssize_t m, const double* y, const double* eta, int want_ll,
                           double* ll, double* r, double* w)
    void bs_poisson_terms(Py_ssize_t m, const double* y, const double* eta, int want_ll,
                          double* ll, double* r, double* w)


cdef inline double softplus(double eta) noexcept nogil:
    return (eta if eta > 0 else 0.0) + bs_log1p01(bs_exp(-fabs(eta)))


cdef inline double sigmoid(double eta) noexcept nogil:
    # the bits of bs_logistic_terms' (r = y - sigmoid): times the reciprocal
    cdef double e = bs_exp(-fabs(eta))
    return (1.0 if eta >= 0 else e) * (1.0 / (1.0 + e))


# ---- ll, r = dl/deta, w = -d2l/deta2 ------------------------------------------------------
# logistic and Poisson: bs_logistic_terms, bs_poisson_terms over a block (_simd.h)
cdef inline void gaussian_terms(double y, double eta, double phi, bint want_ll, double* ll,
                                double* r, double* w) noexcept nogil:
    r[0] = (y - eta) / phi
    w[0] = 1.0 / phi
    if want_ll:
        ll[0] = -0.5 * (y - eta) * (y - eta) / phi - 0.5 * log(2.0 * M_PI * phi)


# ---- control variates: constants at eta* ---------------------------------------------------
# c0 = b(eta*), c1 = b'(eta*), c2 = b''(eta*) / phi
cdef inline void logistic_cv_consts(double eta_star, double* c0, double* c1,
                                    double* c2) noexcept nogil:
    c0[0] = softplus(eta_star)
    c1[0] = sigmoid(eta_star)
    c2[0] = sigmoid(eta_star) * sigmoid(-eta_star)   # p(1-p) without cancellation


cdef inline void poisson_cv_consts(double eta_star, double* c0, double* c1,
                                   double* c2) noexcept nogil:
    c1[0] = bs_exp(eta_star)
    c0[0] = c1[0]
    c2[0] = c1[0]


cdef inline void gaussian_cv_consts(double eta_star, double phi, double* c0, double* c1,
                                    double* c2) noexcept nogil:
    c0[0] = 0.5 * eta_star * eta_star
    c1[0] = eta_star
    c2[0] = 1.0 / phi


# ---- control variates: residuals -------------------------------------------------------------
# Orders 1 and 2 are computed as minus the Taylor remainder of b (the y terms
# cancel), by its order-8 series for |delta| = |eta - eta*| < 0.1 (accurate as
# theta -> theta*, and free of exp/log) and directly beyond; ``finish_order``
# turns the second-order remainder into the order-1 residual.
cdef inline void finish_order(int order, double delta, double c2, double d2, double d2p,
                              double* d, double* dp) noexcept nogil:
    if order == 2:
        d[0] = d2
        dp[0] = d2p
    else:
        # first order: the quadratic term is no longer subtracted
        d[0] = d2 - 0.5 * c2 * delta * delta
        dp[0] = d2p - c2 * delta


cdef inline void logistic_cv_residual(int order, double y, double eta, double eta_star,
                                      double c0, double c1, double c2, double* d,
                                      double* dp) noexcept nogil:
    cdef double delta = eta - eta_star
    cdef double d2, d2p, t, e, sp, sg, k3, k4, k5, k6, k7, k8
    if order == 0:
        d[0] = y * delta - (softplus(eta) - c0)
        dp[0] = y - sigmoid(eta)
        return
    if fabs(delta) < 0.1:
        # Taylor remainder to order 8 from the derivatives of b = softplus at eta*
        # (s = sigmoid, w = s(1-s), t = 1-2s): b3 = w t, b4 = w(1-6w),
        # b5 = w t (1-12w), b6 = w(1-30w+120w^2), b7 = w t (1-60w+360w^2),
        # b8 = w(1-126w+1680w^2-5040w^3); k_j = b_j / j!. The truncation error
        # is below 1e-14 in absolute value for |delta| < 0.1, and no exp/log is
        # evaluated: near theta* (most subsample rows) this is the fast path.
        t = 1.0 - 2.0 * c1
        k3 = c2 * t / 6.0
        k4 = c2 * (1.0 - 6.0 * c2) / 24.0
        k5 = c2 * t * (1.0 - 12.0 * c2) / 120.0
        k6 = c2 * (1.0 + c2 * (-30.0 + 120.0 * c2)) / 720.0
        k7 = c2 * t * (1.0 + c2 * (-60.0 + 360.0 * c2)) / 5040.0
        k8 = c2 * (1.0 + c2 * (-126.0 + c2 * (1680.0 - 5040.0 * c2))) / 40320.0
        d2 = -delta * delta * delta * (
            k3 + delta * (k4 + delta * (k5 + delta * (k6 + delta * (k7 + delta * k8)))))
        d2p = -delta * delta * (
            3.0 * k3 + delta * (4.0 * k4 + delta * (5.0 * k5 + delta * (
                6.0 * k6 + delta * (7.0 * k7 + delta * 8.0 * k8)))))
    else:
        e = bs_exp(-fabs(eta))        # one exp serves softplus and sigmoid
        sp = (eta if eta > 0 else 0.0) + bs_log1p01(e)
        sg = (1.0 if eta >= 0 else e) * (1.0 / (1.0 + e))
        d2 = -(sp - c0 - c1 * delta - 0.5 * c2 * delta * delta)
        d2p = -(sg - c1 - c2 * delta)
    finish_order(order, delta, c2, d2, d2p, d, dp)


cdef inline void poisson_cv_residual(int order, double y, double eta, double eta_star,
                                     double c0, double c1, double c2, double* d,
                                     double* dp) noexcept nogil:
    cdef double delta = eta - eta_star
    cdef double d2, d2p, e1
    if order == 0:
        d[0] = y * delta - c1 * expm1(delta)
        dp[0] = y - bs_exp(eta)
        return
    if fabs(delta) < 0.1:
        # every derivative of b = exp is exp(eta*) = c1; series to order 8
        d2 = -c1 * delta * delta * delta * (1.0 / 6.0 + delta * (1.0 / 24.0 + delta * (
            1.0 / 120.0 + delta * (1.0 / 720.0 + delta * (1.0 / 5040.0 + delta / 40320.0)))))
        d2p = -c1 * delta * delta * (0.5 + delta * (1.0 / 6.0 + delta * (1.0 / 24.0 + delta * (
            1.0 / 120.0 + delta * (1.0 / 720.0 + delta / 5040.0)))))
    else:
        e1 = expm1(delta)
        d2 = -c1 * (e1 - delta - 0.5 * delta * delta)
        d2p = -c1 * (e1 - delta)
    finish_order(order, delta, c2, d2, d2p, d, dp)


cdef inline void gaussian_cv_residual(int order, double y, double eta, double eta_star,
                                      double c0, double c1, double c2, double phi, double* d,
                                      double* dp) noexcept nogil:
    cdef double delta = eta - eta_star
    if order == 0:
        d[0] = (y * delta - 0.5 * delta * (eta + eta_star)) / phi
        dp[0] = (y - eta) / phi
        return
    # the second-order expansion of a quadratic is exact
    finish_order(order, delta, c2, 0.0, 0.0, d, dp)


# ---- the families as types ---------------------------------------------------------------
# ``glm_terms``, ``glm_cv_consts`` and ``glm_cv_residual`` call the function of
# the family ``Family`` (a fused type: ``if Family is Logistic`` is decided at
# compile time). A loop written once with them is compiled once per family,
# with the family's math inlined; ``GLMFamily`` names the family at run time.
cdef enum GLMFamily:
    GLM_LOGISTIC
    GLM_POISSON
    GLM_GAUSSIAN


cdef struct Logistic:
    double phi      # 1
cdef struct Poisson:
    double phi      # 1
cdef struct Gaussian:
    double phi      # the noise variance

ctypedef fused Family:
    Logistic
    Poisson
    Gaussian


cdef inline void glm_terms(Family f, Py_ssize_t m, const double* y, const double* eta,
                           bint want_ll, double* ll, double* r, double* w) noexcept nogil:
    """The terms of ``m`` data (a block: the logistic and Poisson loops are SIMD)."""
    cdef Py_ssize_t i
    if Family is Logistic:
        bs_logistic_terms(m, y, eta, want_ll, ll, r, w)
    elif Family is Poisson:
        bs_poisson_terms(m, y, eta, want_ll, ll, r, w)
    else:
        for i in range(m):
            gaussian_terms(y[i], eta[i], f.phi, want_ll, &ll[i], &r[i], &w[i])


cdef inline void glm_cv_consts(Family f, double eta_star, double* c0, double* c1,
                               double* c2) noexcept nogil:
    if Family is Logistic:
        logistic_cv_consts(eta_star, c0, c1, c2)
    elif Family is Poisson:
        poisson_cv_consts(eta_star, c0, c1, c2)
    else:
        gaussian_cv_consts(eta_star, f.phi, c0, c1, c2)


cdef inline void glm_cv_residual(Family f, int order, double y, double eta, double eta_star,
                                 double c0, double c1, double c2, double* d,
                                 double* dp) noexcept nogil:
    if Family is Logistic:
        logistic_cv_residual(order, y, eta, eta_star, c0, c1, c2, d, dp)
    elif Family is Poisson:
        poisson_cv_residual(order, y, eta, eta_star, c0, c1, c2, d, dp)
    else:
        gaussian_cv_residual(order, y, eta, eta_star, c0, c1, c2, f.phi, d, dp)
