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
* :func:`stratified_decide` - that rule on strata of rows, each with its own
  range bound, drawn with replacement within each stratum;

one decision loop (``_decide``) with either rule of the shared ``_seqtest.pxd``,
and one (``_decide_strata``) with its stratified rule.
"""
import numpy as np
from cython.parallel cimport prange
cimport cython
from libc.math cimport fabs, INFINITY
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport malloc, free, qsort
from libc.string cimport memset
from numpy.random cimport bitgen_t
from bayes_subsample._rng cimport (get_bitgen, U32Stream, u32_init, u32_fisher_yates_step,
                                   u32_index, rng_index)
from bayes_subsample._seqtest cimport (
    SeqTest, SEQTEST_CHUNK, seqtest_init, conftest_init, seqtest_next_batch,
    seqtest_push_batch, seqtest_check, StratTest, STRAT_PENDING, STRAT_SAMPLED,
    STRAT_MIN_SAMPLED, strat_init, strat_plan, strat_add_exact, strat_push, strat_check)
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



cdef inline int64_t _draw_index(U32Stream* rs, int64_t n) noexcept nogil:
    """A uniform index in [0, n) (n >= 1)."""
    if n <= <int64_t> 4294967296LL:
        return <int64_t> u32_index(rs, <uint64_t> n)
    return rng_index(rs.bg, n)


cdef int _terms_of(CyModel model, TermSource* src, const int64_t* idx, Py_ssize_t m,
                   double* out, int n_threads) noexcept nogil:
    """The terms of ``idx[0..m)`` into ``out``: by ``n_threads`` threads for
    PARALLEL_MIN_BATCH terms or more, else SEQTEST_CHUNK at a time; the values do
    not depend on the threads. Returns the number of failed chunks."""
    cdef Py_ssize_t s = 0, c
    cdef int failed = 0
    if n_threads > 1 and m >= PARALLEL_MIN_BATCH:
        return _parallel_terms(model, src, idx, m, out, n_threads)
    while s < m:
        c = m - s if m - s < SEQTEST_CHUNK else SEQTEST_CHUNK
        failed += _terms(model, src, idx + s, c, out + s) != 0
        s += c
    return failed


cdef struct _Buffers:
    # growable work buffers of a stratified decision
    int64_t cap
    int64_t* rows       # the rows of this check's draws, sorted by row
    int64_t* slot       # where each sorted draw's term goes in the stratum-grouped order
    int64_t* tmp_rows
    int64_t* tmp_slot
    double* out         # the terms in sorted-row order
    double* grouped     # the terms grouped by stratum, in draw order


cdef void _free_buffers(_Buffers* b) noexcept nogil:
    free(b.rows)
    free(b.slot)
    free(b.tmp_rows)
    free(b.tmp_slot)
    free(b.out)
    free(b.grouped)


cdef bint _reserve(_Buffers* b, int64_t m) noexcept nogil:
    """Room for m draws; False when memory runs out."""
    if m <= b.cap:
        return True
    _free_buffers(b)
    b.rows = <int64_t*> malloc(m * sizeof(int64_t))
    b.slot = <int64_t*> malloc(m * sizeof(int64_t))
    b.tmp_rows = <int64_t*> malloc(m * sizeof(int64_t))
    b.tmp_slot = <int64_t*> malloc(m * sizeof(int64_t))
    b.out = <double*> malloc(m * sizeof(double))
    b.grouped = <double*> malloc(m * sizeof(double))
    b.cap = m
    if (b.rows == NULL or b.slot == NULL or b.tmp_rows == NULL or b.tmp_slot == NULL
            or b.out == NULL or b.grouped == NULL):
        b.cap = -1
        return False
    return True


cdef enum:
    RADIX_BITS = 11


cdef void _radix_sort(_Buffers* b, int64_t m, int64_t n_data) noexcept nogil:
    """Sort ``b.rows[0..m)`` ascending (stable, LSD radix on 11-bit digits of the row
    index), ``b.slot`` along: the rows are then read in storage order."""
    cdef int64_t count[1 << RADIX_BITS]
    cdef int64_t j, d, pos, c
    cdef int shift = 0
    cdef int64_t* r
    cdef int64_t* t
    while shift < 63 and (n_data - 1) >> shift > 0:
        memset(count, 0, sizeof(count))
        for j in range(m):
            count[(b.rows[j] >> shift) & ((1 << RADIX_BITS) - 1)] += 1
        pos = 0
        for d in range(1 << RADIX_BITS):
            c = count[d]
            count[d] = pos
            pos += c
        for j in range(m):
            d = (b.rows[j] >> shift) & ((1 << RADIX_BITS) - 1)
            b.tmp_rows[count[d]] = b.rows[j]
            b.tmp_slot[count[d]] = b.slot[j]
            count[d] += 1
        r = b.rows
        b.rows = b.tmp_rows
        b.tmp_rows = r
        t = b.slot
        b.slot = b.tmp_slot
        b.tmp_slot = t
        shift += RADIX_BITS


cdef int _decide_strata(generator, CyModel model, TermSource* src,
                        const int64_t[::1] members, const int64_t[::1] offsets,
                        StratTest* st, int n_threads) except -1:
    """Run the stratified rule ``st`` to its decision: exact strata summed in
    storage order; the draws of the sampled strata (with replacement, 32-bit
    Lemire index draws, stratum by stratum in index order) evaluated together,
    sorted by row (each row read in storage order), and merged stratum by stratum
    in draw order. The decision, the terms read and the random stream do not
    depend on ``n_threads``."""
    cdef int64_t S = st.S, s, j, m, lo, n_s, total
    cdef _Buffers b
    cdef double tot
    cdef bint failed = False
    cdef U32Stream rs
    cdef bitgen_t* bg = get_bitgen(generator)
    memset(&b, 0, sizeof(_Buffers))
    with generator.bit_generator.lock, nogil:
        u32_init(&rs, bg)
        while not st.done and not failed:
            strat_plan(st)
            total = 0
            for s in range(S):
                lo = offsets[s]
                n_s = offsets[s + 1] - lo
                if st.state[s] == STRAT_PENDING:
                    # the stratum's members are ascending: a read in storage order
                    if not _reserve(&b, n_s) or \
                            _terms_of(model, src, &members[lo], n_s, b.out, n_threads) != 0:
                        failed = True
                        break
                    tot = 0.0
                    for j in range(n_s):
                        tot += b.out[j]
                    strat_add_exact(st, s, tot)
                elif st.state[s] == STRAT_SAMPLED and st.want[s] > st.t[s]:
                    total += st.want[s] - st.t[s]
            if failed or not _reserve(&b, total):
                failed = True
                break
            # this check's draws, grouped by stratum in draw order
            m = 0
            for s in range(S):
                if st.state[s] == STRAT_SAMPLED and st.want[s] > st.t[s]:
                    lo = offsets[s]
                    n_s = offsets[s + 1] - lo
                    for j in range(st.want[s] - st.t[s]):
                        b.rows[m] = members[lo + _draw_index(&rs, n_s)]
                        b.slot[m] = m
                        m += 1
            _radix_sort(&b, m, model.n_data)
            if _terms_of(model, src, b.rows, m, b.out, n_threads) != 0:
                failed = True
                break
            for j in range(m):
                b.grouped[b.slot[j]] = b.out[j]
            m = 0
            for s in range(S):
                if st.state[s] == STRAT_SAMPLED and st.want[s] > st.t[s]:
                    j = st.want[s] - st.t[s]
                    strat_push(st, s, b.grouped + m, j)
                    m += j
            strat_check(st)
        _free_buffers(&b)
    if failed:
        if b.cap < 0:
            raise MemoryError("no memory for a stratified decision's terms")
        model.raise_error()
    return 0


cdef struct _Keyed:
    double c
    int64_t s


cdef int _by_c_descending(const void* a, const void* b) noexcept nogil:
    cdef const _Keyed* x = <const _Keyed*> a
    cdef const _Keyed* y = <const _Keyed*> b
    if x.c > y.c:
        return -1
    if x.c < y.c:
        return 1
    return -1 if x.s < y.s else (1 if x.s > y.s else 0)


@cython.final
cdef class StrataIndex:
    """The strata of a stratified decision, checked once: stratum ``s`` holds the
    data ``members[offsets[s]:offsets[s + 1]]`` (distinct indices in ``[0,
    n_data)``), with the work arrays of a decision (one object per chain)."""
    cdef readonly object members
    cdef readonly object offsets
    cdef readonly Py_ssize_t n_data
    cdef const int64_t[::1] _members
    cdef const int64_t[::1] _offsets
    cdef int64_t[::1] _N
    cdef int64_t[::1] _t
    cdef int64_t[::1] _want
    cdef int64_t[::1] _order
    cdef double[::1] _mean
    cdef double[::1] _m2
    cdef signed char[::1] _state
    cdef _Keyed* _keys

    def __cinit__(self, members, offsets, Py_ssize_t n_data):
        m = np.ascontiguousarray(members, dtype=np.int64)
        off = np.ascontiguousarray(offsets, dtype=np.int64)
        if off.ndim != 1 or off.shape[0] < 2 or off[0] != 0 or off[off.shape[0] - 1] != m.shape[0] \
                or np.any(np.diff(off) < 1):
            raise ValueError("offsets must rise from 0 to len(members), each stratum non-empty")
        if m.shape[0] and (m.min() < 0 or m.max() >= n_data
                           or np.bincount(m, minlength=n_data).max() > 1):
            raise ValueError(f"members must be distinct indices in [0, {n_data})")
        S = off.shape[0] - 1
        self.members, self.offsets, self.n_data = m, off, n_data
        self._members, self._offsets = m, off
        self._N = np.ascontiguousarray(np.diff(off))
        self._t = np.zeros(S, dtype=np.int64)
        self._want = np.zeros(S, dtype=np.int64)
        self._order = np.zeros(S, dtype=np.int64)
        self._mean = np.zeros(S)
        self._m2 = np.zeros(S)
        self._state = np.zeros(S, dtype=np.int8)
        self._keys = <_Keyed*> malloc(S * sizeof(_Keyed))
        if self._keys == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self._keys)

    @property
    def n_strata(self):
        return self._N.shape[0]

    cdef int64_t order_strata(self, const double* C) noexcept nogil:
        """Fill ``_order`` with the strata that may be sampled (finite C > 0, at
        least STRAT_MIN_SAMPLED data), by C descending (ties by index); returns
        their number."""
        cdef int64_t S = self._N.shape[0], s, k = 0
        for s in range(S):
            if C[s] > 0.0 and C[s] < INFINITY and self._N[s] >= STRAT_MIN_SAMPLED:
                self._keys[k].c = C[s]
                self._keys[k].s = s
                k += 1
        qsort(self._keys, k, sizeof(_Keyed), _by_c_descending)
        for s in range(k):
            self._order[s] = self._keys[s].s
        return k


def stratified_decide(generator, CyModel model, const double[::1] theta,
                      const double[::1] theta_new, StrataIndex strata, const double[::1] C,
                      double target, double delta, double gamma, double p, int64_t first_batch,
                      int cv_order=-1, theta_star=None, eta_star=None, int n_threads=1):
    """Stratified concentration-bound MH decision (doc/algorithms/confidence.rst,
    "Strata of rows"): is the sum of the terms (as in :func:`confidence_decide`) of
    the data in ``strata`` above ``target``, when those of stratum ``s`` are at most
    ``C[s]`` in absolute value?

    Returns
    -------
    accept : bool
    n_examined : int
        Terms read: draws (with replacement) and exactly summed terms.
    n_checks : int
    estimate : float
        The estimated sum at the last check (exact when every stratum was summed).
    bound : float
        Its half-width (nan for an exact decision).
    """
    cdef StratTest st
    cdef TermSource src
    cdef int64_t S = strata._N.shape[0], n_order, s
    if C.shape[0] != S:
        raise ValueError(f"C must hold one range bound per stratum ({S}), got {C.shape[0]}")
    if strata.n_data != model.n_data:
        raise ValueError(f"the strata index data of {strata.n_data} data, the model has "
                         f"{model.n_data}")
    for s in range(S):
        if not C[s] >= 0.0:
            raise ValueError("the range bounds C must be >= 0")
    keep = _source(model, &src, theta, theta_new, cv_order, theta_star, eta_star)
    n_order = strata.order_strata(&C[0])
    strat_init(&st, S, &strata._N[0], &C[0], &strata._order[0], n_order, &strata._state[0],
               &strata._t[0], &strata._mean[0], &strata._m2[0], &strata._want[0], target,
               delta, gamma, p, first_batch)
    _decide_strata(generator, model, &src, strata._members, strata._offsets, &st,
                   max(1, n_threads))
    return bool(st.accept), int(st.n_read), int(st.n_checks), float(st.estimate), \
        float(st.last_bound)

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


def term_sum_abs_max(CyModel model, const double[::1] theta, const double[::1] theta_new,
                     int cv_order=-1, theta_star=None, eta_star=None):
    """``(sum_k t_k, max_k |t_k|)`` over all data in one sweep (a decision checked
    against the exact one, and the range bound it used against the data)."""
    cdef TermSource src
    cdef double total, abs_max
    keep = _source(model, &src, theta, theta_new, cv_order, theta_star, eta_star)
    _sweep(model, &src, &total, &abs_max)
    return total, abs_max


def term_abs_max(CyModel model, const double[::1] theta, const double[::1] theta_new,
                 int cv_order=-1, theta_star=None, eta_star=None):
    """``max_k |t_k|`` over all data (checks range bounds by brute force)."""
    cdef TermSource src
    cdef double total, abs_max
    keep = _source(model, &src, theta, theta_new, cv_order, theta_star, eta_star)
    _sweep(model, &src, &total, &abs_max)
    return abs_max
