# cython: language_level=3
"""Python entry points to the shared stopping rules (used by tests): each runs
a rule over terms already in (random) draw order."""
import numpy as np
from libc.stdint cimport int64_t
from bayes_subsample._seqtest cimport (
    SeqTest, seqtest_init, conftest_init, seqtest_next_batch, seqtest_push,
    seqtest_push_batch, seqtest_check, concentration_bound, welford_merge_batch,
    BOUND_BERNSTEIN_SERFLING, BOUND_EMPIRICAL_BERNSTEIN, BOUND_HOEFFDING_SERFLING)

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
