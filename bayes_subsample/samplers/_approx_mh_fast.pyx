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
  Chen & Welling;
* :func:`confidence_decide` - the concentration-bound stopping rule of
  Bardenet, Doucet & Holmes;

one decision loop (``_decide``) with either rule of the shared ``_seqtest.pxd``.
"""
import numpy as np
from cython.parallel cimport prange
from libc.math cimport fabs
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, free
from numpy.random cimport bitgen_t
from bayes_subsample._rng cimport get_bitgen, U32Stream, u32_init, u32_fisher_yates_step
from bayes_subsample._seqtest cimport (
    SeqTest, SEQTEST_CHUNK, seqtest_init, conftest_init, seqtest_next_batch,
    seqtest_push_batch, seqtest_check)
from bayes_subsample.models._cymodel cimport CyModel

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
    return model.term_diffs(src.cv_order, src.theta_star, src.eta_star, src.theta,
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
            if es.shape[0] != model.n_data * model.cache_width:
                raise ValueError(f"the control variates' cache (eta_star) must hold "
                                 f"{model.cache_width} value(s) per datum, "
                                 f"{model.n_data * model.cache_width} in all")
            src.eta_star = &es[0]
            keep.append(es)
    return keep


def _check_perm(int64_t[::1] perm, Py_ssize_t n):
    if not 1 <= perm.shape[0] <= n:
        raise ValueError(f"perm must hold between 1 and n_data={n} indices, got "
                         f"{perm.shape[0]}")


# batches of at least this many terms are evaluated by n_threads threads (below it a
# parallel region costs more than it saves)
cdef enum:
    PARALLEL_MIN_BATCH = 8192


cdef int _parallel_terms(CyModel model, TermSource* src, const int64_t* idx, Py_ssize_t b,
                         double* out, int n_threads) noexcept nogil:
    """The terms of ``idx[0..b)`` into ``out``, SEQTEST_CHUNK at a time by
    ``n_threads`` threads; each term depends on its datum only, so ``out`` is the
    same for any number of threads. Returns the number of failed chunks."""
    cdef Py_ssize_t n_chunks = (b + SEQTEST_CHUNK - 1) // SEQTEST_CHUNK, k, s, c
    cdef int failed = 0
    for k in prange(n_chunks, num_threads=n_threads, schedule="static"):
        s = k * SEQTEST_CHUNK
        c = b - s
        if c > SEQTEST_CHUNK:
            c = SEQTEST_CHUNK
        failed += _terms(model, src, idx + s, c, out + s) != 0
    return failed


cdef int _decide(generator, CyModel model, TermSource* src, int64_t[::1] perm,
                 SeqTest* t, int n_threads) except -1:
    """Run the stopping rule ``t`` to its decision on terms drawn without
    replacement from ``generator`` (lazy Fisher-Yates on ``perm``, modified in
    place, 32-bit Lemire index draws). The population is the data whose indices
    ``perm`` holds (all of them, or the sampled stratum).

    Batches of at least PARALLEL_MIN_BATCH terms are evaluated by ``n_threads``
    threads: their indices are drawn first (the same draws in the same order),
    their terms computed in parallel, then merged into the test in the same
    SEQTEST_CHUNK pieces as the serial loop, so the decision, the data examined
    and the random stream are identical for any ``n_threads``."""
    cdef Py_ssize_t n = perm.shape[0]
    cdef int64_t pos = 0, b, c, j, s
    cdef U32Stream rs
    cdef double buf[SEQTEST_CHUNK]
    cdef double* big = NULL
    cdef int64_t big_size = 0
    cdef bint failed = False
    cdef bitgen_t* bg = get_bitgen(generator)
    with generator.bit_generator.lock, nogil:
        u32_init(&rs, bg)
        while not t.done and not failed:
            b = seqtest_next_batch(t)
            if n_threads > 1 and b >= PARALLEL_MIN_BATCH:
                if b > big_size:
                    free(big)
                    big = <double*> malloc(b * sizeof(double))
                    big_size = b if big != NULL else 0
                if big != NULL:
                    for j in range(pos, pos + b):
                        u32_fisher_yates_step(&rs, &perm[0], j, n)
                    if _parallel_terms(model, src, &perm[pos], b, big, n_threads) != 0:
                        failed = True
                        break
                    s = 0
                    while s < b:
                        c = b - s if b - s < SEQTEST_CHUNK else SEQTEST_CHUNK
                        seqtest_push_batch(t, big + s, c)
                        s += c
                    pos += b
                    b = 0
            while b > 0:
                c = b if b < SEQTEST_CHUNK else SEQTEST_CHUNK
                for j in range(pos, pos + c):
                    u32_fisher_yates_step(&rs, &perm[0], j, n)
                if _terms(model, src, &perm[pos], c, buf) != 0:
                    failed = True
                    break
                seqtest_push_batch(t, buf, c)
                pos += c
                b -= c
            if not failed:
                seqtest_check(t)
        free(big)
    if failed:
        model.raise_error()
    return 0


def austerity_decide(generator, CyModel model, const double[::1] theta,
                     const double[::1] theta_new, int64_t[::1] perm, double mu0, double eps,
                     int64_t first_batch, int64_t batch_size, int cv_order=-1,
                     theta_star=None, eta_star=None, int n_threads=1):
    """Sequential t-test MH decision (doc/algorithms/austerity.rst).

    Draws data without replacement from ``generator`` (lazy Fisher-Yates on
    ``perm``, modified in place, 32-bit Lemire index draws) and tests
    ``mean_k t_k > mu0`` over the ``N = len(perm)`` terms
    ``t_k = l_k(theta') - l_k(theta)`` of the data whose indices ``perm`` holds
    (all ``n``, or a stratum: distinct valid indices, the caller's duty), or,
    with ``cv_order >= 0``, the differences of the control-variate residuals
    around ``theta_star``. Batches of 8192 terms or more are evaluated by
    ``n_threads`` threads; the result does not depend on ``n_threads``.

    Returns
    -------
    accept : bool
    n_examined : int
    n_batches : int
        Number of tests (checks) made.
    mean : float
        Running mean of the examined terms.
    """
    cdef SeqTest t
    cdef TermSource src
    _check_perm(perm, model.n_data)
    keep = _source(model, &src, theta, theta_new, cv_order, theta_star, eta_star)
    seqtest_init(&t, perm.shape[0], mu0, eps, first_batch, batch_size)
    _decide(generator, model, &src, perm, &t, max(1, n_threads))
    return bool(t.accept), int(t.n), int(t.n_checks), float(t.mean)


def confidence_decide(generator, CyModel model, const double[::1] theta,
                      const double[::1] theta_new, int64_t[::1] perm, double psi, double C,
                      double delta, int bound, double gamma, double p, int64_t first_batch,
                      int cv_order=-1, theta_star=None, eta_star=None, int n_threads=1):
    """Concentration-bound MH decision (doc/algorithms/confidence.rst).

    The terms are drawn as in :func:`austerity_decide` (from the data whose
    indices ``perm`` holds); ``psi`` and the range ``C`` must refer to them
    (with ``cv_order >= 0``: the residual differences).

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
    cdef SeqTest t
    cdef TermSource src
    _check_perm(perm, model.n_data)
    if bound not in (0, 1, 2):
        raise ValueError(f"unknown bound code {bound}")
    keep = _source(model, &src, theta, theta_new, cv_order, theta_star, eta_star)
    conftest_init(&t, perm.shape[0], psi, C, delta, gamma, p, bound, first_batch)
    _decide(generator, model, &src, perm, &t, max(1, n_threads))
    return bool(t.accept), int(t.n), int(t.n_checks), float(t.mean), float(t.last_bound)


cdef int _sweep(CyModel model, TermSource* src, double* total, double* abs_max) except -1:
    """``total = sum_k t_k`` (in storage order) and ``abs_max = max_k |t_k|`` over
    all data."""
    cdef Py_ssize_t n = model.n_data, s = 0, c, i
    cdef int64_t ib[SEQTEST_CHUNK]
    cdef double buf[SEQTEST_CHUNK]
    cdef double tot = 0.0, mx = 0.0
    cdef bint failed = False
    with nogil:
        while s < n:
            c = SEQTEST_CHUNK if n - s > SEQTEST_CHUNK else n - s
            for i in range(c):
                ib[i] = s + i
            if _terms(model, src, ib, c, buf) != 0:
                failed = True
                break
            for i in range(c):
                tot += buf[i]
                if fabs(buf[i]) > mx:
                    mx = fabs(buf[i])
            s += c
    if failed:
        model.raise_error()
    total[0] = tot
    abs_max[0] = mx
    return 0


def term_sum_at(CyModel model, const double[::1] theta, const double[::1] theta_new,
                const int64_t[::1] idx, int cv_order=-1, theta_star=None, eta_star=None):
    """``sum_k t_k`` over the data ``idx`` in that order (the exactly summed
    stratum of a decision)."""
    cdef TermSource src
    cdef Py_ssize_t m = idx.shape[0], s = 0, c, i
    cdef double buf[SEQTEST_CHUNK]
    cdef double tot = 0.0
    cdef bint failed = False
    keep = _source(model, &src, theta, theta_new, cv_order, theta_star, eta_star)
    if m and (np.min(idx) < 0 or np.max(idx) >= model.n_data):
        raise ValueError(f"indices must lie in [0, {model.n_data})")
    with nogil:
        while s < m:
            c = SEQTEST_CHUNK if m - s > SEQTEST_CHUNK else m - s
            if _terms(model, &src, &idx[s], c, buf) != 0:
                failed = True
                break
            for i in range(c):
                tot += buf[i]
            s += c
    if failed:
        model.raise_error()
    return tot


def term_sum(CyModel model, const double[::1] theta, const double[::1] theta_new,
             int cv_order=-1, theta_star=None, eta_star=None):
    """``sum_k t_k`` over all data in storage order (the exact decision's statistic,
    for epsilon = 0 / delta = 0 and ``check_exact``)."""
    cdef TermSource src
    cdef double total, abs_max
    keep = _source(model, &src, theta, theta_new, cv_order, theta_star, eta_star)
    _sweep(model, &src, &total, &abs_max)
    return total


def term_abs_max(CyModel model, const double[::1] theta, const double[::1] theta_new,
                 int cv_order=-1, theta_star=None, eta_star=None):
    """``max_k |t_k|`` over all data (checks range bounds by brute force)."""
    cdef TermSource src
    cdef double total, abs_max
    keep = _source(model, &src, theta, theta_new, cv_order, theta_star, eta_star)
    _sweep(model, &src, &total, &abs_max)
    return abs_max
