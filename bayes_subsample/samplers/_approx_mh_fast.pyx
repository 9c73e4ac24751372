# cython: language_level=3
"""Compiled decision loops of the approximate MH samplers
(doc/algorithms/austerity.rst, doc/algorithms/confidence.rst).

Both samplers decide an MH step ``accept iff mean_k t_k > threshold`` over all
``n`` data, with ``t_k = l_k(theta') - l_k(theta)`` or, with a Taylor proxy,
the differences of the control-variate residuals ``d_k(theta') - d_k(theta)``,
from data drawn *without replacement*: a lazy Fisher-Yates shuffle of a
persistent permutation ``perm`` (any permutation state is a valid start, so
``perm`` is never reset) with 32-bit Lemire index draws, the same primitive as
approximate Gibbs. The terms of each chunk of indices come from the compiled
model object (``CyModel.loglik_diff`` / ``cv_residual_diff``: one read of each
datum for both linear predictors), the same code for GLMs and user models.
The cost of a decision is proportional to the data examined, not to ``n``.

* :func:`austerity_decide` - the sequential Student-t test of Korattikara,
  Chen & Welling through the shared ``_seqtest.pxd``.
* :func:`confidence_decide` - the concentration-bound stopping rule of
  Bardenet, Doucet & Holmes (``ConfTest`` below).
* :class:`SequentialTest` / :class:`ConfidenceTest` - the two stopping rules
  driven from Python, for unit tests of the structs.
"""
import numpy as np
from libc.math cimport sqrt, log, fabs, ceil, pow, NAN
from libc.stdint cimport int64_t
from numpy.random cimport bitgen_t
from bayes_subsample._rng cimport get_bitgen, U32Stream, u32_init, u32_fisher_yates_step
from bayes_subsample._seqtest cimport (
    SeqTest, SEQTEST_CHUNK, seqtest_init, seqtest_next_batch, seqtest_push_batch,
    seqtest_check, welford_merge_batch)
from bayes_subsample.models._cymodel cimport CyModel

# concentration bounds (doc/algorithms/confidence.rst)
cdef enum:
    BOUND_BERNSTEIN_SERFLING = 0
    BOUND_EMPIRICAL_BERNSTEIN = 1
    BOUND_HOEFFDING_SERFLING = 2

BOUNDS = {"bernstein_serfling": BOUND_BERNSTEIN_SERFLING,
          "empirical_bernstein": BOUND_EMPIRICAL_BERNSTEIN,
          "hoeffding_serfling": BOUND_HOEFFDING_SERFLING}

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
# the terms of a decision: l_k(theta') - l_k(theta), or the differences of the
# Taylor control-variate residuals d_k(theta') - d_k(theta) (with a proxy)
# ---------------------------------------------------------------------------
cdef struct TermSource:
    int cv_order            # -1: log-likelihood differences
    const double* theta_star
    const double* eta_star  # the model's per-datum cache at theta_star, or NULL
    const double* theta
    const double* theta_new


cdef inline int _terms(CyModel model, TermSource* src, const int64_t* idx, Py_ssize_t c,
                       double* out) noexcept nogil:
    if src.cv_order < 0:
        return model.loglik_diff(src.theta, src.theta_new, idx, c, out)
    return model.cv_residual_diff(src.cv_order, src.theta_star, src.eta_star, src.theta,
                                  src.theta_new, idx, c, out)


cdef object _source(CyModel model, TermSource* src, const double[::1] theta,
                    const double[::1] theta_new, int cv_order, theta_star, eta_star):
    """Fill ``src``; returns the arrays it points into (keep them alive)."""
    cdef const double[::1] ts
    cdef const double[::1] es
    if theta.shape[0] != model.n_params or theta_new.shape[0] != model.n_params:
        raise ValueError(f"theta and theta_new must have length {model.n_params}")
    src.cv_order = cv_order
    src.theta = &theta[0]
    src.theta_new = &theta_new[0]
    src.theta_star = NULL
    src.eta_star = NULL
    keep = []
    if cv_order >= 0:
        ts = np.ascontiguousarray(theta_star, dtype=np.float64)
        if ts.shape[0] != model.n_params:
            raise ValueError(f"theta_star must have length {model.n_params}")
        src.theta_star = &ts[0]
        keep.append(ts)
        if eta_star is not None:
            es = eta_star
            if es.shape[0] != model.n_data:
                raise ValueError(f"eta_star must have length {model.n_data}")
            src.eta_star = &es[0]
            keep.append(es)
    return keep


def _check_perm(int64_t[::1] perm, Py_ssize_t n):
    if perm.shape[0] != n:
        raise ValueError(f"perm must have length n_data={n}, got {perm.shape[0]}")


def austerity_decide(generator, CyModel model, const double[::1] theta,
                     const double[::1] theta_new, int64_t[::1] perm, double mu0, double eps,
                     int64_t first_batch, int64_t batch_size, int cv_order=-1,
                     theta_star=None, eta_star=None):
    """Sequential t-test MH decision (doc/algorithms/austerity.rst).

    Draws data without replacement from ``generator`` (lazy Fisher-Yates on
    ``perm``, modified in place, 32-bit Lemire index draws) and tests
    ``mean_k t_k > mu0`` over all ``n`` terms ``t_k = l_k(theta') - l_k(theta)``
    (or, with ``cv_order >= 0``, the differences of the control-variate
    residuals around ``theta_star``).

    Returns
    -------
    accept : bool
    n_examined : int
    n_batches : int
        Number of tests (checks) made.
    mean : float
        Running mean of the examined terms.
    """
    cdef Py_ssize_t n = model.n_data
    cdef int64_t pos = 0, b, c, j
    cdef SeqTest t
    cdef U32Stream rs
    cdef TermSource src
    cdef double buf[SEQTEST_CHUNK]
    cdef bint failed = False
    _check_perm(perm, n)
    keep = _source(model, &src, theta, theta_new, cv_order, theta_star, eta_star)
    cdef bitgen_t* bg = get_bitgen(generator)
    with generator.bit_generator.lock, nogil:
        seqtest_init(&t, n, mu0, eps)
        u32_init(&rs, bg)
        while not t.done and not failed:
            b = seqtest_next_batch(&t, first_batch, batch_size)
            while b > 0:
                c = b if b < SEQTEST_CHUNK else SEQTEST_CHUNK
                for j in range(pos, pos + c):
                    u32_fisher_yates_step(&rs, &perm[0], j, n)
                if _terms(model, &src, &perm[pos], c, buf) != 0:
                    failed = True
                    break
                seqtest_push_batch(&t, buf, c)
                pos += c
                b -= c
            if not failed:
                seqtest_check(&t)
    if failed:
        model.raise_error()
    return bool(t.accept), int(t.n), int(t.n_batches), float(t.mean)


def confidence_decide(generator, CyModel model, const double[::1] theta,
                      const double[::1] theta_new, int64_t[::1] perm, double psi, double C,
                      double delta, int bound, double gamma, double p, int64_t first_batch,
                      int cv_order=-1, theta_star=None, eta_star=None):
    """Concentration-bound MH decision (doc/algorithms/confidence.rst).

    The terms are drawn as in :func:`austerity_decide`; ``psi`` and the range
    ``C`` must refer to them (with ``cv_order >= 0``: the residual differences).

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
    cdef Py_ssize_t n = model.n_data
    cdef int64_t pos = 0, b, m, j
    cdef ConfTest ct
    cdef U32Stream rs
    cdef TermSource src
    cdef double buf[SEQTEST_CHUNK]
    cdef bint failed = False
    _check_perm(perm, n)
    if bound not in (0, 1, 2):
        raise ValueError(f"unknown bound code {bound}")
    keep = _source(model, &src, theta, theta_new, cv_order, theta_star, eta_star)
    cdef bitgen_t* bg = get_bitgen(generator)
    with generator.bit_generator.lock, nogil:
        conftest_init(&ct, n, psi, C, delta, gamma, p, bound)
        u32_init(&rs, bg)
        while not ct.done and not failed:
            b = conftest_next_batch(&ct, first_batch)
            while b > 0:
                m = b if b < SEQTEST_CHUNK else SEQTEST_CHUNK
                for j in range(pos, pos + m):
                    u32_fisher_yates_step(&rs, &perm[0], j, n)
                if _terms(model, &src, &perm[pos], m, buf) != 0:
                    failed = True
                    break
                conftest_push_batch(&ct, buf, m)
                pos += m
                b -= m
            if not failed:
                conftest_check(&ct)
    if failed:
        model.raise_error()
    return bool(ct.accept), int(ct.t), int(ct.k), float(ct.mean), float(ct.last_bound)


def term_sum(CyModel model, const double[::1] theta, const double[::1] theta_new,
             int cv_order=-1, theta_star=None, eta_star=None):
    """``sum_k t_k`` over all data in storage order (the exact decision's statistic,
    for epsilon = 0 / delta = 0 and ``check_exact``)."""
    cdef Py_ssize_t n = model.n_data, s = 0, c, i
    cdef int64_t ib[SEQTEST_CHUNK]
    cdef double buf[SEQTEST_CHUNK]
    cdef double tot = 0.0
    cdef TermSource src
    cdef bint failed = False
    keep = _source(model, &src, theta, theta_new, cv_order, theta_star, eta_star)
    with nogil:
        while s < n:
            c = SEQTEST_CHUNK if n - s > SEQTEST_CHUNK else n - s
            for i in range(c):
                ib[i] = s + i
            if _terms(model, &src, ib, c, buf) != 0:
                failed = True
                break
            for i in range(c):
                tot += buf[i]
            s += c
    if failed:
        model.raise_error()
    return tot


def term_abs_max(CyModel model, const double[::1] theta, const double[::1] theta_new,
                 int cv_order=-1, theta_star=None, eta_star=None):
    """``max_k |t_k|`` over all data (checks range bounds by brute force)."""
    cdef Py_ssize_t n = model.n_data, s = 0, c, i
    cdef int64_t ib[SEQTEST_CHUNK]
    cdef double buf[SEQTEST_CHUNK]
    cdef double mx = 0.0
    cdef TermSource src
    cdef bint failed = False
    keep = _source(model, &src, theta, theta_new, cv_order, theta_star, eta_star)
    with nogil:
        while s < n:
            c = SEQTEST_CHUNK if n - s > SEQTEST_CHUNK else n - s
            for i in range(c):
                ib[i] = s + i
            if _terms(model, &src, ib, c, buf) != 0:
                failed = True
                break
            for i in range(c):
                if fabs(buf[i]) > mx:
                    mx = fabs(buf[i])
            s += c
    if failed:
        model.raise_error()
    return mx


# ---------------------------------------------------------------------------
# Python-callable stopping rules (unit tests of the structs)
# ---------------------------------------------------------------------------
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
