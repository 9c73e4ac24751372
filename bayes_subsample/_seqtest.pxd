# The sequential Student-t test of Korattikara, Chen & Welling (ALGORITHMS.md §2).
# One implementation, shared by AusterityMH (§2, §2.1) and approximate Gibbs (§2.2).
#
# Usage inside a nogil kernel (caller owns drawing without replacement):
#     cdef SeqTest t
#     seqtest_init(&t, N, mu0, eps)
#     while not t.done:
#         b = seqtest_next_batch(&t, first_batch, batch_size)
#         for j in range(b):  seqtest_push(&t, l(next index without replacement))
#         seqtest_check(&t)
#     accept = t.accept; examined = t.n
# eps == 0 gives the exact decision (all N terms are always examined).
from libc.math cimport sqrt, fabs
from libc.stdint cimport int64_t
from scipy.special.cython_special cimport stdtr


cdef struct SeqTest:
    int64_t N          # population size
    int64_t n          # terms examined so far
    int64_t n_batches  # batches (= checks) so far
    double mean        # running mean of the l_i (Welford)
    double m2          # running sum of squared deviations (Welford)
    double mu0         # threshold: accept iff mean over all N exceeds mu0
    double eps         # p-value tolerance
    bint done
    bint accept


cdef inline void seqtest_init(SeqTest* t, int64_t N, double mu0, double eps) noexcept nogil:
    t.N = N
    t.n = 0
    t.n_batches = 0
    t.mean = 0.0
    t.m2 = 0.0
    t.mu0 = mu0
    t.eps = eps
    t.done = False
    t.accept = False


cdef inline int64_t seqtest_next_batch(SeqTest* t, int64_t first_batch,
                                       int64_t batch_size) noexcept nogil:
    cdef int64_t b = first_batch if t.n == 0 else batch_size
    if b > t.N - t.n:
        b = t.N - t.n
    return b


cdef inline void seqtest_push(SeqTest* t, double l) noexcept nogil:
    t.n += 1
    cdef double delta = l - t.mean
    t.mean += delta / t.n
    t.m2 += delta * (l - t.mean)


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
