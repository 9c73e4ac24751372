# cython: language_level=3
"""Python entry points to the shared stopping rules (used by tests): each runs
a rule over terms already in (random) draw order."""
import numpy as np
from libc.stdint cimport int64_t
from bayes_subsample._seqtest cimport (
    SeqTest, seqtest_init, conftest_init, seqtest_next_batch, seqtest_push,
    seqtest_push_batch, seqtest_check, concentration_bound, welford_merge_batch,
    BOUND_BERNSTEIN_SERFLING, BOUND_EMPIRICAL_BERNSTEIN, BOUND_HOEFFDING_SERFLING,
    StratTest, STRAT_PENDING, STRAT_SAMPLED, STRAT_MIN_SAMPLED, strat_init, strat_plan,
    strat_add_exact, strat_push, strat_check)

#: the concentration bounds of the confidence sampler, by name
BOUNDS = {"bernstein_serfling": BOUND_BERNSTEIN_SERFLING,
          "empirical_bernstein": BOUND_EMPIRICAL_BERNSTEIN,
          "hoeffding_serfling": BOUND_HOEFFDING_SERFLING}


def _bound_code(str bound):
    if bound not in BOUNDS:
        raise ValueError(f"bound must be one of {sorted(BOUNDS)}, got {bound!r}")
    return BOUNDS[bound]


def seq_ttest(const double[::1] l_in_draw_order, double mu0, double eps,
              Py_ssize_t first_batch, Py_ssize_t batch_size, bint per_term=False):
    """Run the sequential test over terms already in (random) draw order.

    With ``per_term`` the running mean and variance are updated term by term
    (Welford, ``seqtest_push``) instead of batch by batch (``seqtest_push_batch``,
    what the compiled samplers use); the two differ only by rounding.

    Returns ``(accept, n_examined, n_batches)``.
    """
    cdef Py_ssize_t N = l_in_draw_order.shape[0]
    if N < 1:
        raise ValueError("need at least one term")
    if first_batch < 2 or batch_size < 1:
        raise ValueError("first_batch must be >= 2 and batch_size >= 1")
    if eps < 0 or eps >= 1:
        raise ValueError("eps must be in [0, 1)")
    cdef SeqTest t
    cdef Py_ssize_t pos = 0, b, j
    cdef const double* l = &l_in_draw_order[0]
    with nogil:
        seqtest_init(&t, N, mu0, eps, first_batch, batch_size)
        while not t.done:
            b = seqtest_next_batch(&t)
            if per_term:
                for j in range(b):
                    seqtest_push(&t, l[pos + j])
            else:
                seqtest_push_batch(&t, l + pos, b)
            pos += b
            seqtest_check(&t)
    return bool(t.accept), int(t.n), int(t.n_checks)


def conf_test(const double[::1] l_in_draw_order, double psi, double C, double delta,
              str bound="bernstein_serfling", double gamma=2.0, double p=2.0,
              int64_t first_batch=1):
    """Run the confidence sampler's stopping rule over terms in draw order.

    Returns ``(accept, n_examined, n_checks, last_bound)``.
    """
    cdef Py_ssize_t n = l_in_draw_order.shape[0]
    if n < 1:
        raise ValueError("need at least one term")
    cdef int kind = _bound_code(bound)
    cdef SeqTest c
    cdef int64_t b
    cdef const double* l = &l_in_draw_order[0]
    with nogil:
        conftest_init(&c, n, psi, C, delta, gamma, p, kind, first_batch)
        while not c.done:
            b = seqtest_next_batch(&c)
            seqtest_push_batch(&c, l + c.n, b)
            seqtest_check(&c)
    return bool(c.accept), int(c.n), int(c.n_checks), float(c.last_bound)


def bound_value(str bound, int64_t t, int64_t n, double sd, double C, double delta_k):
    """The half-width ``c_t`` of a concentration bound."""
    return concentration_bound(_bound_code(bound), t, n, sd, C, delta_k)


def running_means(const double[::1] terms, sizes):
    """The running mean after merging ``terms`` batch by batch (batch sizes ``sizes``)
    with the batch (Chan et al.) update of the stopping rules."""
    cdef int64_t n = 0
    cdef double mean = 0.0, m2 = 0.0
    cdef Py_ssize_t pos = 0, b
    out = []
    for b in sizes:
        if b < 0 or pos + b > terms.shape[0]:
            raise ValueError("the batch sizes exceed the terms")
        if b:
            welford_merge_batch(&n, &mean, &m2, &terms[pos], b)
        pos += b
        out.append(mean)
    return np.asarray(out)


def strat_test(const double[::1] terms, const int64_t[::1] offsets, const double[::1] C,
               const int64_t[::1] positions, double target, double delta, double gamma=2.0,
               double p=2.0, int64_t first_batch=1):
    """Run the stratified rule (``_seqtest.pxd``) over given terms: stratum ``s``
    holds ``terms[offsets[s]:offsets[s + 1]]``, its ``i``-th draw (with replacement)
    is the term at position ``positions[offsets[s] + i]`` of the stratum (a stratum
    is sampled fewer times than it has terms).

    Returns ``(accept, n_read, n_checks, estimate, last_bound)``.
    """
    cdef Py_ssize_t n = terms.shape[0], S = offsets.shape[0] - 1
    off = np.asarray(offsets)
    if S < 1 or off[0] != 0 or off[S] != n or np.any(np.diff(off) < 1) \
            or C.shape[0] != S or positions.shape[0] != n:
        raise ValueError("offsets must split the terms into non-empty strata, with one C "
                         "per stratum and one position per term")
    sizes = np.diff(off)
    if np.any(np.asarray(positions) < 0) or np.any(
            np.asarray(positions) >= np.repeat(sizes, sizes)):
        raise ValueError("positions must lie within their stratum")
    Ca = np.asarray(C)
    ok = np.flatnonzero(np.isfinite(Ca) & (Ca > 0) & (sizes >= STRAT_MIN_SAMPLED))
    cdef int64_t[::1] order = np.ascontiguousarray(ok[np.argsort(-Ca[ok], kind="stable")],
                                                   dtype=np.int64)
    cdef int64_t[::1] N = np.ascontiguousarray(sizes, dtype=np.int64)
    cdef int64_t[::1] t = np.zeros(S, dtype=np.int64)
    cdef int64_t[::1] want = np.zeros(S, dtype=np.int64)
    cdef double[::1] mean = np.zeros(S)
    cdef double[::1] m2 = np.zeros(S)
    cdef signed char[::1] state = np.zeros(S, dtype=np.int8)
    cdef double[::1] buf = np.zeros(n)
    cdef StratTest st
    cdef Py_ssize_t s, j, m
    cdef double tot
    cdef const int64_t* order_p = &order[0] if order.shape[0] else NULL
    strat_init(&st, S, &N[0], &C[0], order_p, order.shape[0], &state[0], &t[0], &mean[0],
               &m2[0], &want[0], target, delta, gamma, p, first_batch)
    with nogil:
        while not st.done:
            strat_plan(&st)
            for s in range(S):
                if st.state[s] == STRAT_PENDING:
                    tot = 0.0
                    for j in range(offsets[s], offsets[s + 1]):
                        tot += terms[j]
                    strat_add_exact(&st, s, tot)
                elif st.state[s] == STRAT_SAMPLED and st.want[s] > st.t[s]:
                    m = st.want[s] - st.t[s]
                    for j in range(m):
                        buf[j] = terms[offsets[s] + positions[offsets[s] + st.t[s] + j]]
                    strat_push(&st, s, &buf[0], m)
            strat_check(&st)
    return bool(st.accept), int(st.n_read), int(st.n_checks), float(st.estimate), \
        float(st.last_bound)
