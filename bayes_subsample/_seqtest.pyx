# cython: language_level=3
"""Python entry point to the shared sequential t-test (used by tests)."""
import numpy as np
from bayes_subsample._seqtest cimport (
    SeqTest, seqtest_init, seqtest_next_batch, seqtest_push, seqtest_push_batch,
    seqtest_check)


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
        seqtest_init(&t, N, mu0, eps)
        while not t.done:
            b = seqtest_next_batch(&t, first_batch, batch_size)
            if per_term:
                for j in range(b):
                    seqtest_push(&t, l[pos + j])
            else:
                seqtest_push_batch(&t, l + pos, b)
            pos += b
            seqtest_check(&t)
    return bool(t.accept), int(t.n), int(t.n_batches)
