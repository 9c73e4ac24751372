# The stopping rules of the approximate MH decisions and of approximate Gibbs,
# over one Welford/Chan running mean of the terms examined so far: the
# sequential Student-t test of Korattikara, Chen & Welling
# (doc/algorithms/austerity.rst, section "The sequential t-test"; AusterityMH
# and approximate Gibbs, doc/algorithms/mrf.rst) and the concentration-bound
# rule of Bardenet, Doucet & Holmes (doc/algorithms/confidence.rst). Both
# decide "mean of all N terms > mu0" and differ only in the batch sizes and in
# when they stop, so one struct and one loop serve both.
#
# Usage inside a nogil kernel (caller owns drawing without replacement):
#     cdef SeqTest t
#     seqtest_init(&t, N, mu0, eps, first_batch, batch_size)    # t-test, or
#     conftest_init(&t, N, psi, C, delta, gamma, p, bound, first_batch)
#     while not t.done:
#         b = seqtest_next_batch(&t)
#         for each chunk of at most SEQTEST_CHUNK of the b terms:
#             buf[0..c) = l(next c indices without replacement)
#             seqtest_push_batch(&t, buf, c)
#         seqtest_check(&t)
#     accept = t.accept; examined = t.n
# eps == 0 (delta == 0) gives the exact decision (all N terms are always examined).
#
# seqtest_push_batch is the update to use in loops: it merges a whole batch with
# Chan et al.'s parallel formula (one division per batch, independent adds per term),
# whereas the per-term Welford update seqtest_push has a division on the loop-carried
# dependency chain (~20 cycles per term).  The two give the same mean and M2 up to
# floating-point rounding, so decisions can differ only when the p-value or the final
# mean is within rounding of its threshold (tests/test_rng.py: ~1 random problem in
# 10^4, on data with a large common offset where per-term Welford loses ~1e-4 of the
# p-value; there the batch update is the one that agrees with exact arithmetic).
from libc.math cimport sqrt, fabs, log, ceil, pow, NAN
from libc.string cimport memset
from libc.stdint cimport int64_t
from scipy.special.cython_special cimport stdtr, stdtrit


cdef enum:
    # terms per batch-update chunk; also the size of the callers' term buffers
    # (2 KiB of doubles on the stack, stays in L1)
    SEQTEST_CHUNK = 256


# the rule of a SeqTest: the sequential t-test, or the concentration-bound rule
# with one of these bounds (doc/algorithms/confidence.rst)
cdef enum:
    TTEST = -1
    BOUND_BERNSTEIN_SERFLING = 0
    BOUND_EMPIRICAL_BERNSTEIN = 1
    BOUND_HOEFFDING_SERFLING = 2


cdef struct SeqTest:
    int64_t N           # population size
    int64_t n           # terms examined so far
    int64_t n_checks    # checks (= batches) so far
    double mean         # running mean of the terms (Welford / Chan batch merge)
    double m2           # running sum of squared deviations (Welford / Chan)
    double mu0          # threshold: accept iff the mean over all N exceeds mu0
    double tol          # t-test: p-value tolerance eps; bounds: error budget delta
    int rule            # TTEST or a BOUND_*
    int64_t first_batch # terms before the first check
    int64_t batch_size  # t-test: terms added per later check
    double gamma        # bounds: n grows to ceil(gamma n) at each later check
    double C            # bounds: range constant, |term| <= C
    double p            # bounds: delta_k = (p - 1) / (p k^p) delta
    double last_bound   # bounds: c_t at the last check (nan before any)
    double* crit        # t-test: optional cache of critical values by dof (NaN: unknown)
    int64_t crit_size   # entries of crit
    bint done
    bint accept


cdef inline void _seqtest_start(SeqTest* t, int rule, int64_t N, double mu0, double tol,
                                int64_t first_batch) noexcept nogil:
    memset(t, 0, sizeof(SeqTest))
    t.rule = rule
    t.N = N
    t.mu0 = mu0
    t.tol = tol
    t.first_batch = first_batch
    t.last_bound = NAN


cdef inline void seqtest_init(SeqTest* t, int64_t N, double mu0, double eps,
                              int64_t first_batch, int64_t batch_size) noexcept nogil:
    """The sequential t-test: batches of first_batch, then batch_size terms."""
    _seqtest_start(t, TTEST, N, mu0, eps, first_batch)
    t.batch_size = batch_size


cdef inline void conftest_init(SeqTest* t, int64_t N, double psi, double C, double delta,
                               double gamma, double p, int bound,
                               int64_t first_batch) noexcept nogil:
    """The concentration-bound rule: first_batch terms, then geometric growth."""
    _seqtest_start(t, bound, N, psi, delta, first_batch)
    t.C = C
    t.gamma = gamma
    t.p = p


cdef inline void seqtest_set_crit_cache(SeqTest* t, double* cache,
                                        int64_t size) noexcept nogil:
    """Let the t-test read and fill ``cache[dof]`` (NaN-initialised by the owner,
    for one eps) with the critical value -stdtrit(dof, eps): a check then costs a
    comparison instead of a Student-t CDF (~170 ns), with the same decisions."""
    t.crit = cache
    t.crit_size = size


cdef inline int64_t seqtest_next_batch(SeqTest* t) noexcept nogil:
    """Number of new terms to draw before the next check."""
    cdef int64_t target
    if t.n == 0:
        target = t.first_batch
    elif t.rule == TTEST:
        target = t.n + t.batch_size
    else:
        target = <int64_t> ceil(t.gamma * t.n)
        if target <= t.n:
            target = t.n + 1
    if target > t.N:
        target = t.N
    return target - t.n


cdef inline void seqtest_push(SeqTest* t, double l) noexcept nogil:
    """Add one term (Welford).  Prefer seqtest_push_batch in loops."""
    t.n += 1
    cdef double delta = l - t.mean
    t.mean += delta / t.n
    t.m2 += delta * (l - t.mean)


cdef inline void _welford_merge_chunk(int64_t* n, double* mean, double* m2,
                                     const double* l, Py_ssize_t b) noexcept nogil:
    """Merge l[0..b) into (n, mean, M2): two-pass mean and centred sum of squares
    of the chunk, combined by Chan et al.'s formula
        mean += delta * b / (n + b),   M2 += M2_b + delta^2 * n * b / (n + b),
    delta = mean_b - mean.  Four accumulators per pass keep the adds independent
    (the compiler vectorises them)."""
    cdef Py_ssize_t j, b4 = b - b % 4
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef double K, mb, m2b, d0, d1, d2, d3, delta, nb, nn
    if b <= 0:
        return
    # pass 1 sums l - K with K = l[0]: when all terms are equal the mean is then
    # exactly l[0] and M2 exactly 0, as with Welford, so the test's "s == 0: cannot
    # judge yet" rule still applies (a plain sum / b can round to a value != l[0]
    # and leave a spurious M2 ~ 1e-33 that makes the test stop at once)
    K = l[0]
    for j in range(0, b4, 4):
        s0 += l[j] - K
        s1 += l[j + 1] - K
        s2 += l[j + 2] - K
        s3 += l[j + 3] - K
    for j in range(b4, b):
        s0 += l[j] - K
    mb = K + ((s0 + s1) + (s2 + s3)) / b
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    for j in range(0, b4, 4):
        d0 = l[j] - mb
        d1 = l[j + 1] - mb
        d2 = l[j + 2] - mb
        d3 = l[j + 3] - mb
        s0 += d0 * d0
        s1 += d1 * d1
        s2 += d2 * d2
        s3 += d3 * d3
    for j in range(b4, b):
        d0 = l[j] - mb
        s0 += d0 * d0
    m2b = (s0 + s1) + (s2 + s3)
    if n[0] == 0:
        mean[0] = mb
        m2[0] = m2b
    else:
        nb = <double> b
        nn = <double> n[0] + nb
        delta = mb - mean[0]
        mean[0] += delta * (nb / nn)
        m2[0] += m2b + delta * delta * (<double> n[0] * (nb / nn))
    n[0] += b


cdef inline void welford_merge_batch(int64_t* n, double* mean, double* m2,
                                     const double* l, Py_ssize_t b) noexcept nogil:
    """Merge the b terms l[0..b) into a running (count n, mean, M2), SEQTEST_CHUNK
    terms at a time.  A caller that computes a batch into a SEQTEST_CHUNK buffer and
    merges chunk by chunk gets bit-identical results to one call on the whole batch."""
    cdef Py_ssize_t m
    while b > 0:
        m = b if b < SEQTEST_CHUNK else SEQTEST_CHUNK
        _welford_merge_chunk(n, mean, m2, l, m)
        l += m
        b -= m


cdef inline void seqtest_push_batch(SeqTest* t, const double* l, Py_ssize_t b) noexcept nogil:
    """Add the b terms l[0..b) (see welford_merge_batch)."""
    welford_merge_batch(&t.n, &t.mean, &t.m2, l, b)


cdef inline bint _ttest_stops(SeqTest* t) noexcept nogil:
    """The t-test on the terms so far: is the p-value below eps?"""
    cdef double s, tval, pval, crit
    if t.n < 2:
        return False
    # standard error of the mean with the finite-population correction
    s = sqrt(t.m2 / (t.n - 1)) / sqrt(<double> t.n) * sqrt(
        1.0 - (t.n - 1.0) / (t.N - 1.0))
    if s == 0.0:
        return False  # cannot judge yet [R]
    tval = (t.mean - t.mu0) / s
    if t.crit != NULL and t.n - 1 < t.crit_size:
        # p < eps  <=>  |T| > -stdtrit(dof, eps); within rounding of the critical
        # value the CDF decides, so the decisions are those of the p-value rule
        crit = t.crit[t.n - 1]
        if crit != crit:
            crit = -stdtrit(<double> (t.n - 1), t.tol)
            t.crit[t.n - 1] = crit
        if fabs(tval) > crit * (1.0 + 1e-9):
            return True
        if fabs(tval) < crit * (1.0 - 1e-9):
            return False
    pval = stdtr(<double> (t.n - 1), -fabs(tval))
    return pval < t.tol


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


cdef inline bint _bound_stops(SeqTest* t) noexcept nogil:
    """Check k of the concentration-bound rule: is |mean - psi| above c_t?"""
    cdef double dk, sd
    dk = (t.p - 1.0) / (t.p * pow(<double> t.n_checks, t.p)) * t.tol
    sd = sqrt(t.m2 / t.n) if t.m2 > 0.0 else 0.0
    t.last_bound = concentration_bound(t.rule, t.n, t.N, sd, t.C, dk)
    # non-finite C, bound or mean: the comparison is False, keep drawing
    return fabs(t.mean - t.mu0) > t.last_bound


cdef inline bint seqtest_check(SeqTest* t) noexcept nogil:
    """Check the terms pushed so far; sets done/accept; returns done."""
    t.n_checks += 1
    if t.n >= t.N:
        t.done = True           # every term examined: the exact decision
    elif t.tol <= 0.0:
        t.done = False          # the exact rule examines every term
    elif t.rule == TTEST:
        t.done = _ttest_stops(t)
    else:
        t.done = _bound_stops(t)
    if t.done:
        t.accept = t.mean > t.mu0
    return t.done
