# cython: language_level=3
"""Python entry point to the shared sequential t-test (used by tests)."""
import numpy as np
from bayes_subsample._seqtest cimport (
    SeqTest, seqtest_init, seqtest_next_batch, seqtest_push, seqtest_check)


def seq_ttest(const double[::1] l_in_draw_order, double mu0, double eps,
              Py_ssize_t first_batch, Py_ssize_t batch_size):
    """Run the sequential test over terms already in (random) draw order.

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
    with nogil:
        seqtest_init(&t, N, mu0, eps)
        while not t.done:
            b = seqtest_next_batch(&t, first_batch, batch_size)
            for j in range(b):
                seqtest_push(&t, l_in_draw_order[pos])
                pos += 1
            seqtest_check(&t)
    return bool(t.accept), int(t.n), int(t.n_batches)
