# The stopping rules of the approximate MH decisions, over one Welford/Chan
# running mean: the sequential Student-t test of Korattikara, Chen & Welling
# and (at the end) the concentration-bound rule of Bardenet, Doucet & Holmes.
#
# The sequential Student-t test of Korattikara, Chen & Welling
# (doc/algorithms/austerity.rst, section "The sequential t-test").
# One implementation, shared by AusterityMH (doc/algorithms/austerity.rst) and
# approximate Gibbs (doc/algorithms/mrf.rst).
#
# Usage inside a nogil kernel (caller owns drawing without replacement):
#     cdef SeqTest t
#     seqtest_init(&t, N, mu0, eps)
#     while not t.done:
#         b = seqtest_next_batch(&t, first_batch, batch_size)
#         for each chunk of at most SEQTEST_CHUNK of the b terms:
#             buf[0..c) = l(next c indices without replacement)
#             seqtest_push_batch(&t, buf, c)
#         seqtest_check(&t)
#     accept = t.accept; examined = t.n
# eps == 0 gives the exact decision (all N terms are always examined).
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
from libc.stdint cimport int64_t
from scipy.special.cython_special cimport stdtr


cdef enum:
    # terms per batch-update chunk; also the size of the callers' term buffers
    # (2 KiB of doubles on the stack, stays in L1)
    SEQTEST_CHUNK = 256


cdef struct SeqTest:
    int64_t N          # population size
    int64_t n          # terms examined so far
    int64_t n_batches  # batches (= checks) so far
    double mean        # running mean of the l_i (Welford / Chan batch merge)
    double m2          # running sum of squared deviations (Welford / Chan)
    double mu0         # threshold: accept iff mean over all N exceeds mu0
    double eps         # p-value tolerance
    bint done
    bint accept


cdef inline void seqtest_init(SeqTest* t, int64_t N, double mu0, double eps) noexcept nogil:
    t[0] = SeqTest(N, 0, 0, 0.0, 0.0, mu0, eps, False, False)


cdef inline int64_t seqtest_next_batch(SeqTest* t, int64_t first_batch,
                                       int64_t batch_size) noexcept nogil:
    cdef int64_t b = first_batch if t.n == 0 else batch_size
    if b > t.N - t.n:
        b = t.N - t.n
    return b


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
    merges chunk by chunk gets bit-identical results to one call on the whole batch.
    Shared by SeqTest and the confidence sampler's ConfTest."""
    cdef Py_ssize_t m
    while b > 0:
        m = b if b < SEQTEST_CHUNK else SEQTEST_CHUNK
        _welford_merge_chunk(n, mean, m2, l, m)
        l += m
        b -= m


cdef inline void seqtest_push_batch(SeqTest* t, const double* l, Py_ssize_t b) noexcept nogil:
    """Add the b terms l[0..b) (see welford_merge_batch)."""
    welford_merge_batch(&t.n, &t.mean, &t.m2, l, b)


cdef inline bint seqtest_check(SeqTest* t) noexcept nogil:
    """Run the test on the terms pushed so far; sets done/accept; returns done."""
    cdef double s, tval, pval
    t.n_batches += 1
    if t.n >= t.N:
        t.done = True
        t.accept = t.mean > t.mu0
        return True
    if t.n < 2 or t.eps <= 0.0:
        return False
    # standard error of the mean with the finite-population correction
    s = sqrt(t.m2 / (t.n - 1)) / sqrt(<double> t.n) * sqrt(
        1.0 - (t.n - 1.0) / (t.N - 1.0))
    if s == 0.0:
        return False  # cannot judge yet [R]
    tval = (t.mean - t.mu0) / s
    pval = stdtr(<double> (t.n - 1), -fabs(tval))
    if pval < t.eps:
        t.done = True
        t.accept = t.mean > t.mu0
    return t.done


# ---------------------------------------------------------------------------
# The confidence sampler's stopping rule (doc/algorithms/confidence.rst)
# ---------------------------------------------------------------------------
# concentration bounds (doc/algorithms/confidence.rst)
cdef enum:
    BOUND_BERNSTEIN_SERFLING = 0
    BOUND_EMPIRICAL_BERNSTEIN = 1
    BOUND_HOEFFDING_SERFLING = 2

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
    c[0] = ConfTest(n, 0, 0, 0.0, 0.0, psi, C, delta, gamma, p, kind, NAN, False, False)


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
