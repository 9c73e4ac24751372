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


# ---------------------------------------------------------------------------------
# The stratified concentration rule (doc/algorithms/confidence.rst, "Strata of rows"):
# decide "sum of all terms > target" when the population is split into strata s of
# N[s] terms with |term| <= C[s]. Strata are summed exactly, ignored (C[s] == 0: every
# term is 0) or sampled *with* replacement; at each check a budget T of terms is shared
# by water-filling: the sampled strata get N[s] C[s] / lam draws (equal ranges
# 2 C[s] N[s] / t[s] of the scaled draws), a stratum that would get N[s] / 2 or more is
# summed exactly instead, and every stratum once the budget reaches half the terms. The half-width is Bernstein's for the independent scaled draws
# with the variance bounded from the sample (Maurer & Pontil's self-bounding argument,
# with the largest range of any draw):
#     eps = sqrt(2 lg1) (sqrt(W) + b sqrt(2 kt lg2)) + 2/3 b lg1,
#     W = sum_s N_s^2 v_s / t_s (v_s the unbiased sample variance), b_s = 2 C_s N_s / t_s,
#     b = max_s b_s, kt = max_s (b_s / b)^2 t_s / (t_s - 1), lg1 = log(4 / delta_k),
#     lg2 = log(2 / delta_k),
# at check k with delta_k = (p - 1) / (p k^p) delta as for the unstratified rule.
#
# Usage (the caller owns the data and the draws):
#     strat_init(&st, ...)
#     while not st.done:
#         strat_plan(&st)
#         for s in range(S):
#             if st.state[s] == STRAT_PENDING:  strat_add_exact(&st, s, sum of stratum s's terms)
#             elif st.want[s] > st.t[s]:        draw st.want[s] - st.t[s] terms of stratum s with
#                                                replacement; strat_push(&st, s, buf, c) per chunk
#         strat_check(&st)
# ---------------------------------------------------------------------------------
cdef enum:
    STRAT_SAMPLED = 0       # sampled (or not yet read)
    STRAT_EXACT = 1         # summed exactly (in st.known)
    STRAT_PENDING = 2       # to be summed exactly before this check
    STRAT_ZERO = 3          # C[s] == 0: every term is 0, never read
    STRAT_MIN_SAMPLED = 4   # strata of fewer terms are summed exactly


cdef struct StratTest:
    int64_t S
    const int64_t* N        # terms per stratum
    const double* C         # |term| <= C[s]
    const int64_t* order    # the strata that may be sampled, by C descending
    int64_t n_order
    int64_t j_exact         # order[0 .. j_exact) are exact
    signed char* state      # STRAT_* per stratum
    int64_t* t              # draws so far per sampled stratum
    double* mean            # running mean of those draws (Chan batch merge)
    double* m2              # running sum of squared deviations
    int64_t* want           # draws wanted at this check
    double known            # the exact strata's sum
    double target
    double delta
    double gamma
    double p
    double T                # terms budget of this check
    int64_t n_read          # terms read: draws and exactly summed terms
    int64_t n_checks
    double estimate         # the estimated sum at the last check
    double last_bound       # its half-width (nan for an exact decision)
    bint done
    bint accept


cdef inline void strat_init(StratTest* st, int64_t S, const int64_t* N, const double* C,
                            const int64_t* order, int64_t n_order, signed char* state, int64_t* t,
                            double* mean, double* m2, int64_t* want, double target,
                            double delta, double gamma, double p,
                            int64_t first_batch) noexcept nogil:
    """``order``: the strata of finite C > 0 and at least STRAT_MIN_SAMPLED terms, by C
    descending; the other strata of C > 0 are summed exactly at the first check. The
    work arrays (length S) are the caller's."""
    cdef int64_t s
    memset(st, 0, sizeof(StratTest))
    st.S = S
    st.N = N
    st.C = C
    st.order = order
    st.n_order = n_order
    st.state = state
    st.t = t
    st.mean = mean
    st.m2 = m2
    st.want = want
    st.target = target
    st.delta = delta
    st.gamma = gamma
    st.p = p
    st.last_bound = NAN
    for s in range(S):
        t[s] = 0
        mean[s] = 0.0
        m2[s] = 0.0
        want[s] = 0
        state[s] = STRAT_ZERO if C[s] == 0.0 else STRAT_PENDING
    for s in range(n_order):
        state[order[s]] = STRAT_SAMPLED
    st.T = <double> (2 * n_order if 2 * n_order > first_batch else first_batch)


cdef inline void strat_plan(StratTest* st) noexcept nogil:
    """The strata to sum exactly and the draws of the others for this check's budget."""
    cdef int64_t i, s
    cdef double W = 0.0, n_exact = 0.0, n_all = 0.0, lam, w
    for s in range(st.S):
        n_all += <double> st.N[s]
        if st.state[s] == STRAT_EXACT or st.state[s] == STRAT_PENDING:
            n_exact += <double> st.N[s]
    for i in range(st.j_exact, st.n_order):
        s = st.order[i]
        W += <double> st.N[s] * st.C[s]
    lam = 0.0
    while st.j_exact < st.n_order:
        # a budget of half the terms or more: cheaper to sum them all
        if st.T - n_exact <= 0.0 or not W > 0.0 or 2.0 * st.T >= n_all:
            lam = 0.0
            break
        lam = W / (st.T - n_exact)
        s = st.order[st.j_exact]
        if st.C[s] < 0.5 * lam:
            break
        # N[s] C[s] / lam >= N[s] / 2 draws: cheaper to sum it
        st.state[s] = STRAT_PENDING
        n_exact += <double> st.N[s]
        W -= <double> st.N[s] * st.C[s]
        st.j_exact += 1
    if not lam > 0.0:
        for i in range(st.j_exact, st.n_order):
            st.state[st.order[i]] = STRAT_PENDING
        st.j_exact = st.n_order
        return
    for i in range(st.j_exact, st.n_order):
        s = st.order[i]
        w = ceil(<double> st.N[s] * st.C[s] / lam)
        st.want[s] = st.t[s] if <double> st.t[s] > w else <int64_t> w
        if st.want[s] < 2:
            st.want[s] = 2


cdef inline void strat_add_exact(StratTest* st, int64_t s, double total) noexcept nogil:
    st.state[s] = STRAT_EXACT
    st.known += total
    st.n_read += st.N[s]


cdef inline void strat_push(StratTest* st, int64_t s, const double* l,
                            Py_ssize_t b) noexcept nogil:
    """Add the b draws l[0..b) of stratum s."""
    welford_merge_batch(&st.t[s], &st.mean[s], &st.m2[s], l, b)
    st.n_read += b


cdef inline bint strat_check(StratTest* st) noexcept nogil:
    """Check the draws and sums so far; sets done/accept; returns done."""
    cdef int64_t i, s
    cdef double est = st.known, W = 0.0, b = 0.0, kt, tt, r, dk, lg1, lg2
    st.n_checks += 1
    if st.j_exact == st.n_order:
        st.estimate = st.known
        st.last_bound = NAN
        st.done = True           # every stratum summed: the exact decision
        st.accept = st.known > st.target
        return True
    for i in range(st.j_exact, st.n_order):
        s = st.order[i]
        tt = <double> st.t[s]
        est += <double> st.N[s] * st.mean[s]
        W += <double> st.N[s] * <double> st.N[s] * (st.m2[s] / (tt - 1.0)) / tt
        r = 2.0 * st.C[s] * <double> st.N[s] / tt
        if r > b:
            b = r
    kt = 0.0
    for i in range(st.j_exact, st.n_order):
        s = st.order[i]
        tt = <double> st.t[s]
        r = 2.0 * st.C[s] * <double> st.N[s] / tt / b
        if r * r * tt / (tt - 1.0) > kt:
            kt = r * r * tt / (tt - 1.0)
    dk = (st.p - 1.0) / (st.p * pow(<double> st.n_checks, st.p)) * st.delta
    lg1 = log(4.0 / dk)
    lg2 = log(2.0 / dk)
    st.estimate = est
    st.last_bound = sqrt(2.0 * lg1) * (sqrt(W) + b * sqrt(2.0 * kt * lg2)) + 2.0 / 3.0 * b * lg1
    # a non-finite estimate or bound: the comparison is False, keep reading
    st.done = fabs(est - st.target) > st.last_bound
    if st.done:
        st.accept = est > st.target
    else:
        st.T = ceil(st.gamma * st.T)
    return st.done
