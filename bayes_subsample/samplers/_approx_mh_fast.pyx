# cython: language_level=3
"""Compiled decision loops of the approximate MH samplers (ALGORITHMS.md §2, §3).

Both samplers decide an MH step ``accept iff mean_k l_k > mu0`` with
``l_k = l_k(theta') - l_k(theta)`` from data drawn *without replacement*, by
lazy Fisher-Yates on a persistent permutation array ``perm`` (any permutation
state is a valid starting point, so ``perm`` is never reset). The cost of a
decision is proportional to the data examined, not to ``n``.

* :func:`austerity_glm` - the sequential Student-t test of Korattikara, Chen &
  Welling through the shared ``_seqtest.pxd`` (one implementation for §2-2.2).
* :func:`confidence_glm` - the concentration-bound stopping rule of Bardenet,
  Doucet & Holmes (``ConfTest`` below), optionally on the differences of the
  second-order Taylor control-variate residuals ``d_k(theta') - d_k(theta)``.
* :class:`SequentialTest` / :class:`ConfidenceTest` - Python-callable wrappers
  around the same structs, used by the samplers on user (non-GLM) models, and
  :func:`draw_without_replacement` which advances the permutation exactly as
  the compiled loops do (same indices for the same generator state).

GLM conventions as in ``models/_glm_fast.pyx``: X C-contiguous float32/float64
(n, d), y float64, theta float64 (p,) with the intercept last (virtual column).
"""
import numpy as np
from libc.math cimport sqrt, log, fabs, ceil, pow, NAN
from libc.stdint cimport int64_t
from numpy.random cimport bitgen_t
from bayes_subsample._typedefs cimport floating
from bayes_subsample._rng cimport get_bitgen, fisher_yates_step
from bayes_subsample._seqtest cimport (
    SeqTest, SEQTEST_CHUNK, seqtest_init, seqtest_next_batch, seqtest_push_batch,
    seqtest_check, welford_merge_batch)
from bayes_subsample.models._glm_terms cimport glm_terms, cv_residual

# concentration bounds (ALGORITHMS.md §3)
cdef enum:
    BOUND_BERNSTEIN_SERFLING = 0
    BOUND_EMPIRICAL_BERNSTEIN = 1
    BOUND_HOEFFDING_SERFLING = 2

BOUNDS = {"bernstein_serfling": BOUND_BERNSTEIN_SERFLING,
          "empirical_bernstein": BOUND_EMPIRICAL_BERNSTEIN,
          "hoeffding_serfling": BOUND_HOEFFDING_SERFLING}

# per-datum statistic of the confidence loop
cdef enum:
    TERM_LOGLIK = 0        # l_k(theta') - l_k(theta)
    TERM_CV_RESIDUAL = 1   # d_k(theta') - d_k(theta), second-order Taylor residuals


# ---------------------------------------------------------------------------
# The confidence stopping rule (struct + inline nogil functions, as SeqTest)
# ---------------------------------------------------------------------------
cdef struct ConfTest:
    int64_t n          # population size
    int64_t t          # terms examined
    int64_t k          # checks made
    double mean        # Welford running mean of the terms
    double m2          # Welford sum of squared deviations
    double psi         # threshold: accept iff the mean over all n exceeds psi
    double C           # range constant: |term| <= C
    double delta       # total error budget (0: exact, every term examined)
    double gamma       # geometric batch growth
    double p           # delta_k = (p - 1) / (p k^p) delta
    int kind           # BOUND_*
    double last_bound  # c_t at the last check (nan before any)
    bint done
    bint accept


cdef inline void conftest_init(ConfTest* c, int64_t n, double psi, double C, double delta,
                               double gamma, double p, int kind) noexcept nogil:
    c.n = n
    c.t = 0
    c.k = 0
    c.mean = 0.0
    c.m2 = 0.0
    c.psi = psi
    c.C = C
    c.delta = delta
    c.gamma = gamma
    c.p = p
    c.kind = kind
    c.last_bound = NAN
    c.done = False
    c.accept = False


cdef inline int64_t conftest_next_batch(ConfTest* c, int64_t first_batch) noexcept nogil:
    """Number of new terms to draw before the next check (b_{k+1} - t)."""
    cdef int64_t target
    if c.t == 0:
        target = first_batch
    else:
        target = <int64_t> ceil(c.gamma * c.t)
        if target <= c.t:
            target = c.t + 1
    if target > c.n:
        target = c.n
    return target - c.t


cdef inline void conftest_push(ConfTest* c, double l) noexcept nogil:
    """Add one term (Welford).  Prefer conftest_push_batch in loops."""
    c.t += 1
    cdef double d = l - c.mean
    c.mean += d / c.t
    c.m2 += d * (l - c.mean)


cdef inline void conftest_push_batch(ConfTest* c, const double* l, Py_ssize_t b) noexcept nogil:
    """Add the b terms l[0..b) (Chan et al. merge in chunks, as seqtest_push_batch)."""
    welford_merge_batch(&c.t, &c.mean, &c.m2, l, b)


cdef inline double concentration_bound(int kind, int64_t t, int64_t n, double sd, double C,
                                       double dk) noexcept nogil:
    """Half-width c_t with P(|mean_t - mean_n| > c_t) <= dk, sampling without
    replacement; sd = sd of the t terms (divisor t), range 2C."""
    cdef double tt = <double> t, nn = <double> n, rho, lg
    cdef double kappa = 7.0 / 3.0 + 3.0 / sqrt(2.0)
    if kind == BOUND_HOEFFDING_SERFLING:
        return C * sqrt(2.0 * (1.0 - (tt - 1.0) / nn) * log(2.0 / dk) / tt)
    if kind == BOUND_EMPIRICAL_BERNSTEIN:
        lg = log(3.0 / dk)
        return sd * sqrt(2.0 * lg / tt) + 6.0 * C * lg / tt
    # Bernstein-Serfling
    if tt <= nn / 2.0:
        rho = 1.0 - (tt - 1.0) / nn
    else:
        rho = (1.0 - tt / nn) * (1.0 + 1.0 / tt)
    lg = log(5.0 / dk)
    return sd * sqrt(2.0 * rho * lg / tt) + 2.0 * kappa * C * lg / tt


cdef inline bint conftest_check(ConfTest* c) noexcept nogil:
    """Check k+1 on the terms pushed so far; sets done/accept; returns done."""
    cdef double dk, sd, bound
    c.k += 1
    if c.t >= c.n:
        c.done = True
        c.accept = c.mean > c.psi
        return True
    if c.delta <= 0.0:
        return False
    dk = (c.p - 1.0) / (c.p * pow(<double> c.k, c.p)) * c.delta
    sd = sqrt(c.m2 / c.t) if c.m2 > 0.0 else 0.0
    bound = concentration_bound(c.kind, c.t, c.n, sd, c.C, dk)
    c.last_bound = bound
    # non-finite C, bound or mean: the comparison is False, keep drawing
    if fabs(c.mean - c.psi) > bound:
        c.done = True
        c.accept = c.mean > c.psi
    return c.done


# ---------------------------------------------------------------------------
# per-datum differences for GLMs
# ---------------------------------------------------------------------------
cdef inline void row_dot2(const floating* x, const double* a, const double* b, Py_ssize_t d,
                          bint intercept, double* ea, double* eb) noexcept nogil:
    """Both linear predictors x.a and x.b in one read of the row."""
    cdef double sa = 0.0, sb = 0.0, xj
    cdef Py_ssize_t j
    for j in range(d):
        xj = x[j]
        sa += xj * a[j]
        sb += xj * b[j]
    if intercept:
        sa += a[d]
        sb += b[d]
    ea[0] = sa
    eb[0] = sb


cdef inline double loglik_diff(int family, const floating* x, double y, const double* th,
                               const double* th_new, Py_ssize_t d, bint intercept,
                               double phi) noexcept nogil:
    cdef double e0, e1, l0, l1, r, w
    row_dot2(x, th, th_new, d, intercept, &e0, &e1)
    glm_terms(family, y, e0, phi, True, &l0, &r, &w)
    glm_terms(family, y, e1, phi, True, &l1, &r, &w)
    return l1 - l0


cdef inline double residual_diff(int family, const floating* x, double y, const double* th,
                                 const double* th_new, double eta_star, Py_ssize_t d,
                                 bint intercept, double phi) noexcept nogil:
    cdef double e0, e1, d0, d1, dp
    row_dot2(x, th, th_new, d, intercept, &e0, &e1)
    cv_residual(family, 2, y, e0, eta_star, phi, &d0, &dp)
    cv_residual(family, 2, y, e1, eta_star, phi, &d1, &dp)
    return d1 - d0


def _check_perm(int64_t[::1] perm, Py_ssize_t n):
    if perm.shape[0] != n:
        raise ValueError(f"perm must have length n_data={n}, got {perm.shape[0]}")


def austerity_glm(generator, int family, const floating[:, ::1] X, const double[::1] y,
                  const double[::1] theta, const double[::1] theta_new, bint intercept,
                  double phi, int64_t[::1] perm, double mu0, double eps,
                  int64_t first_batch, int64_t batch_size):
    """Sequential t-test MH decision for a GLM (ALGORITHMS.md §2).

    Draws data without replacement from ``generator`` by lazy Fisher-Yates on
    ``perm`` (modified in place) and tests ``mean l_k > mu0``.

    Returns
    -------
    accept : bool
    n_examined : int
    n_batches : int
        Number of tests (checks) made.
    mean : float
        Running mean of the examined ``l_k``.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], i
    cdef int64_t pos = 0, b, c, k
    cdef SeqTest t
    cdef double buf[SEQTEST_CHUNK]
    _check_perm(perm, n)
    cdef bitgen_t* bg = get_bitgen(generator)
    with generator.bit_generator.lock, nogil:
        seqtest_init(&t, n, mu0, eps)
        while not t.done:
            b = seqtest_next_batch(&t, first_batch, batch_size)
            while b > 0:
                c = b if b < SEQTEST_CHUNK else SEQTEST_CHUNK
                for i in range(c):
                    fisher_yates_step(bg, &perm[0], pos, n)
                    k = perm[pos]
                    pos += 1
                    buf[i] = loglik_diff(family, &X[k, 0], y[k], &theta[0],
                                         &theta_new[0], d, intercept, phi)
                seqtest_push_batch(&t, buf, c)
                b -= c
            seqtest_check(&t)
    return bool(t.accept), int(t.n), int(t.n_batches), float(t.mean)


def confidence_glm(generator, int family, const floating[:, ::1] X, const double[::1] y,
                   const double[::1] theta, const double[::1] theta_new, bint intercept,
                   double phi, int64_t[::1] perm, double psi, double C, double delta,
                   int bound, double gamma, double p, int64_t first_batch,
                   const double[::1] eta_star=None):
    """Concentration-bound MH decision for a GLM (ALGORITHMS.md §3).

    With ``eta_star`` (the linear predictors at the Taylor centre) the terms
    are the differences of second-order control-variate residuals
    ``d_k(theta') - d_k(theta)`` and ``psi``/``C`` must refer to them.

    Returns
    -------
    accept : bool
    n_examined : int
    n_checks : int
    mean : float
        Running mean of the examined terms.
    bound : float
        The half-width ``c_t`` at the last check (nan if none was computed).
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], i
    cdef int64_t pos = 0, b, m, k
    cdef bint use_cv = eta_star is not None
    cdef ConfTest c
    cdef double buf[SEQTEST_CHUNK]
    _check_perm(perm, n)
    if use_cv and eta_star.shape[0] != n:
        raise ValueError(f"eta_star must have length {n}, got {eta_star.shape[0]}")
    if bound not in (0, 1, 2):
        raise ValueError(f"unknown bound code {bound}")
    cdef bitgen_t* bg = get_bitgen(generator)
    with generator.bit_generator.lock, nogil:
        conftest_init(&c, n, psi, C, delta, gamma, p, bound)
        while not c.done:
            b = conftest_next_batch(&c, first_batch)
            while b > 0:
                m = b if b < SEQTEST_CHUNK else SEQTEST_CHUNK
                for i in range(m):
                    fisher_yates_step(bg, &perm[0], pos, n)
                    k = perm[pos]
                    pos += 1
                    if use_cv:
                        buf[i] = residual_diff(family, &X[k, 0], y[k], &theta[0],
                                               &theta_new[0], eta_star[k], d, intercept, phi)
                    else:
                        buf[i] = loglik_diff(family, &X[k, 0], y[k], &theta[0],
                                             &theta_new[0], d, intercept, phi)
                conftest_push_batch(&c, buf, m)
                b -= m
            conftest_check(&c)
    return bool(c.accept), int(c.t), int(c.k), float(c.mean), float(c.last_bound)


def loglik_diff_sum(int family, const floating[:, ::1] X, const double[::1] y,
                    const double[::1] theta, const double[::1] theta_new, bint intercept,
                    double phi):
    """``sum_k l_k(theta') - l_k(theta)`` over all data (the exact decision's
    statistic, for ``check_exact``)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], k
    cdef double s = 0.0
    with nogil:
        for k in range(n):
            s += loglik_diff(family, &X[k, 0], y[k], &theta[0], &theta_new[0], d,
                             intercept, phi)
    return s


def residual_diff_max(int family, const floating[:, ::1] X, const double[::1] y,
                      const double[::1] theta, const double[::1] theta_new, bint intercept,
                      double phi, const double[::1] eta_star):
    """``max_k |d_k(theta') - d_k(theta)|`` over all data (test helper for the
    residual range bound)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], k
    cdef double m = 0.0, v
    with nogil:
        for k in range(n):
            v = fabs(residual_diff(family, &X[k, 0], y[k], &theta[0], &theta_new[0],
                                   eta_star[k], d, intercept, phi))
            if v > m:
                m = v
    return m


# ---------------------------------------------------------------------------
# Python-callable pieces for user (non-GLM) models
# ---------------------------------------------------------------------------
def draw_without_replacement(generator, int64_t[::1] perm, int64_t pos, int64_t count):
    """Advance the lazy Fisher-Yates shuffle: make ``perm[pos:pos+count]`` the
    next ``count`` draws without replacement and return a copy of them (the
    same indices the compiled loops would use for the same generator state)."""
    cdef int64_t n = perm.shape[0], i
    if pos < 0 or count < 0 or pos + count > n:
        raise ValueError(f"cannot draw {count} indices at position {pos} from {n}")
    cdef bitgen_t* bg = get_bitgen(generator)
    with generator.bit_generator.lock, nogil:
        for i in range(count):
            fisher_yates_step(bg, &perm[0], pos + i, n)
    return np.asarray(perm[pos:pos + count]).copy()


cdef class SequentialTest:
    """The shared sequential t-test (``_seqtest.pxd``) driven from Python.

    Parameters
    ----------
    n : int
        Population size ``N``.
    mu0 : float
        Threshold on the population mean.
    eps : float
        p-value tolerance (0: decide on all data).
    """

    cdef SeqTest t

    def __init__(self, int64_t n, double mu0, double eps):
        if n < 1:
            raise ValueError("n must be >= 1")
        seqtest_init(&self.t, n, mu0, eps)

    def next_batch(self, int64_t first_batch, int64_t batch_size):
        return int(seqtest_next_batch(&self.t, first_batch, batch_size))

    def push(self, const double[::1] terms):
        """Add a batch of terms (one batch update, as the compiled loops)."""
        if self.t.n + terms.shape[0] > self.t.N:
            raise ValueError("more terms than the population size")
        if terms.shape[0] > 0:
            seqtest_push_batch(&self.t, &terms[0], terms.shape[0])

    def check(self):
        return bool(seqtest_check(&self.t))

    @property
    def done(self):
        return bool(self.t.done)

    @property
    def accept(self):
        return bool(self.t.accept)

    @property
    def n_examined(self):
        return int(self.t.n)

    @property
    def n_batches(self):
        return int(self.t.n_batches)

    @property
    def mean(self):
        return float(self.t.mean)


cdef class ConfidenceTest:
    """The confidence sampler's stopping rule (``ConfTest``) driven from Python.

    Parameters
    ----------
    n : int
        Population size.
    psi : float
        Threshold on the population mean.
    C : float
        Range constant, ``|term| <= C``.
    delta : float
        Error budget (0: decide on all data).
    bound : {"bernstein_serfling", "empirical_bernstein", "hoeffding_serfling"}
    gamma, p : float
        Batch growth and the ``delta_k`` schedule exponent.
    """

    cdef ConfTest c

    def __init__(self, int64_t n, double psi, double C, double delta, str bound="bernstein_serfling",
                 double gamma=2.0, double p=2.0):
        if n < 1:
            raise ValueError("n must be >= 1")
        if bound not in BOUNDS:
            raise ValueError(f"bound must be one of {sorted(BOUNDS)}, got {bound!r}")
        conftest_init(&self.c, n, psi, C, delta, gamma, p, BOUNDS[bound])

    def next_batch(self, int64_t first_batch):
        return int(conftest_next_batch(&self.c, first_batch))

    def push(self, const double[::1] terms):
        """Add a batch of terms (one batch update, as the compiled loops)."""
        if self.c.t + terms.shape[0] > self.c.n:
            raise ValueError("more terms than the population size")
        if terms.shape[0] > 0:
            conftest_push_batch(&self.c, &terms[0], terms.shape[0])

    def check(self):
        return bool(conftest_check(&self.c))

    @property
    def done(self):
        return bool(self.c.done)

    @property
    def accept(self):
        return bool(self.c.accept)

    @property
    def n_examined(self):
        return int(self.c.t)

    @property
    def n_checks(self):
        return int(self.c.k)

    @property
    def mean(self):
        return float(self.c.mean)

    @property
    def last_bound(self):
        return float(self.c.last_bound)


def bound_value(str bound, int64_t t, int64_t n, double sd, double C, double delta_k):
    """The half-width ``c_t`` of a concentration bound (test helper)."""
    if bound not in BOUNDS:
        raise ValueError(f"bound must be one of {sorted(BOUNDS)}, got {bound!r}")
    return concentration_bound(BOUNDS[bound], t, n, sd, C, delta_k)
