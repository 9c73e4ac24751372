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


# exp, expm1 and log1p as branch-free arithmetic (``_simd_math.h``: within 2 ulp of
# libm's, measured in tests/test_simd.py), and the logistic and Poisson terms over a block of data
# with them, compiled to SIMD code (``_simd_glm.h``): the per-datum terms of a full
# pass cost about 14 ns a row with libm's scalar exp and log1p, 3 ns with these
cdef extern from "_simd.h" nogil:
    double bs_exp(double x)
    double bs_log1p01(double x)
    double bs_expm1(double x)
    double bs_log1p(double x)
    double bs_sum(Py_ssize_t m, const double* x)
    void bs_logistic_terms(Py_ssize_t m, const double* y, const double* eta, int want_ll,
                           double* ll, double* r, double* w)
    void bs_poisson_terms(Py_ssize_t m, const double* y, const double* eta, int want_ll,
                          double* ll, double* r, double* w)
    void bs_logistic_cv_consts(Py_ssize_t m, const double* eta_star, double* c0, double* c1,
                               double* c2)
    void bs_logistic_cv_residuals(Py_ssize_t m, int order, const double* y, const double* eta,
                                  const double* eta_star, const double* c0, const double* c1,
                                  const double* c2, double* d, double* dp)


# ---- ll, r = dl/deta, w = -d2l/deta2 ------------------------------------------------------
# logistic and Poisson: bs_logistic_terms, bs_poisson_terms over a block (_simd_glm.h)
cdef inline void gaussian_terms(double y, double eta, double phi, bint want_ll, double* ll,
                                double* r, double* w) noexcept nogil:
    r[0] = (y - eta) / phi
    w[0] = 1.0 / phi
    if want_ll:
        ll[0] = -0.5 * (y - eta) * (y - eta) / phi - 0.5 * log(2.0 * M_PI * phi)


# ---- control variates: constants at eta* ---------------------------------------------------
# c0 = b(eta*), c1 = b'(eta*), c2 = b''(eta*) / phi
# logistic: bs_logistic_cv_consts over a block (_simd_glm.h)
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
# turns the second-order remainder into the order-1 residual (the logistic
# block function in _simd_glm.h does the same in its own loop).
cdef inline void finish_order(int order, double delta, double c2, double d2, double d2p,
                              double* d, double* dp) noexcept nogil:
    if order == 2:
        d[0] = d2
        dp[0] = d2p
    else:
        # first order: the quadratic term is no longer subtracted
        d[0] = d2 - 0.5 * c2 * delta * delta
        dp[0] = d2p - c2 * delta


# logistic: bs_logistic_cv_residuals over a block (_simd_glm.h)
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


cdef inline void glm_cv_consts(Family f, Py_ssize_t m, const double* eta_star, double* c0,
                               double* c1, double* c2) noexcept nogil:
    """The Taylor constants of ``m`` data (a block: the logistic loop is SIMD)."""
    cdef Py_ssize_t i
    if Family is Logistic:
        bs_logistic_cv_consts(m, eta_star, c0, c1, c2)
    elif Family is Poisson:
        for i in range(m):
            poisson_cv_consts(eta_star[i], &c0[i], &c1[i], &c2[i])
    else:
        for i in range(m):
            gaussian_cv_consts(eta_star[i], f.phi, &c0[i], &c1[i], &c2[i])


cdef inline void glm_cv_residuals(Family f, int order, Py_ssize_t m, const double* y,
                                  const double* eta, const double* eta_star, const double* c0,
                                  const double* c1, const double* c2, double* d,
                                  double* dp) noexcept nogil:
    """The residuals of ``m`` data (a block: the logistic loop is SIMD)."""
    cdef Py_ssize_t i
    if Family is Logistic:
        bs_logistic_cv_residuals(m, order, y, eta, eta_star, c0, c1, c2, d, dp)
    elif Family is Poisson:
        for i in range(m):
            poisson_cv_residual(order, y[i], eta[i], eta_star[i], c0[i], c1[i], c2[i], &d[i],
                                &dp[i])
    else:
        for i in range(m):
            gaussian_cv_residual(order, y[i], eta[i], eta_star[i], c0[i], c1[i], c2[i], f.phi,
                                 &d[i], &dp[i])
