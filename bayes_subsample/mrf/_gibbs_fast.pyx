# cython: language_level=3
"""nogil kernels for exact and approximate (austerity) Gibbs on a dense binary MRF.

The model is handed over in its *incidence* form (see ``BinaryMRF``): for every
variable ``i`` the incidences ``k`` in ``ptr[i] .. ptr[i+1]-1`` are the factors
that touch ``i``; ``other[k, 0]`` and ``other[k, 1]`` are the two other variables
of the factor (for a pair factor both hold the single other variable) and

    diff[k, 2 * x[other[k, 0]] + x[other[k, 1]]]
        = log psi_f(x_i = 1, rest) - log psi_f(x_i = 0, rest) = l_f.

So one term costs two byte loads and one table load, whatever the factor order.

Decision rule (doc/algorithms/mrf.rst): draw u ~ U(0, 1), mu0 = (log u - log1p(-u)) / N_i
and set x_i = 1 iff mean_f l_f > mu0.  With epsilon == 0 all N_i terms are summed in
storage order (the exact Gibbs update, no permutation draws are needed); with
epsilon > 0 the terms are drawn without replacement by a lazy Fisher-Yates shuffle of
the variable's incidence segment (persistent across updates) and fed to the shared
sequential t-test of ``bayes_subsample/_seqtest.pxd``, a batch at a time
(``seqtest_push_batch``).

The Fisher-Yates indices are drawn with Lemire's multiply-shift rejection method on
32-bit halves of the generator's 64-bit outputs (``u32_index``), not numpy's masked
rejection (``random_interval``, used by ``_rng.fisher_yates_step``): both are exactly
uniform, but the masked method rejects up to half of its draws here (N_i = 4851 gives
the mask 8191) and each rejection is a mispredicted branch plus another indirect call
into the bit generator; the multiply-shift draw costs one 64-bit output per two
indices and almost never rejects.  This halved the time per sweep for every epsilon
(and changed the random stream of approximate Gibbs: the same seed gives different,
equally valid, chains than before).
"""
from libc.math cimport log, log1p, exp, NAN, INFINITY
from libc.stdlib cimport malloc, free
from libc.stdint cimport int64_t, int32_t, uint8_t, uint64_t
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

import numpy as np

from bayes_subsample._typedefs cimport floating
from bayes_subsample._rng cimport (
    bitgen_t, get_bitgen, rng_uniform_open, rng_index, fisher_yates_step,
    U32Stream, u32_init, u32_next, u32_index, u32_fisher_yates_step,
)
from bayes_subsample._seqtest cimport (
    SeqTest, SEQTEST_CHUNK, seqtest_init, seqtest_next_batch, seqtest_push_batch,
    seqtest_check, seqtest_set_crit_cache,
)


cdef extern from *:
    """
    /* keep a value "used" so the cache-warming reads are not optimised away */
    #if defined(__GNUC__) || defined(__clang__)
    #define BS_KEEP(v) __asm__ __volatile__("" : : "r"(v))
    #else
    static volatile size_t bs_keep_sink;
    #define BS_KEEP(v) (bs_keep_sink = (v))
    #endif
    """
    void BS_KEEP(size_t v) noexcept nogil


cdef inline size_t _touch_range(const void* base, size_t nbytes) noexcept nogil:
    """Read one byte per cache line of a contiguous block (a sequential stream the
    hardware prefetcher follows), so that the random accesses of the sequential test
    that follow hit L1/L2 rather than L3/DRAM.  Returns a checksum so the reads
    are not optimised away."""
    cdef const unsigned char* p = <const unsigned char*> base
    cdef size_t off, acc = 0
    for off in range(0, nbytes, 64):
        acc += p[off]
    return acc


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define BS_PREFETCH(p) __builtin_prefetch((const void*)(p), 0, 3)
    #else
    #define BS_PREFETCH(p) ((void)(p))
    #endif
    """
    void BS_PREFETCH(const void* p) noexcept nogil


# blocks prefetched ahead of the one being summed
cdef enum:
    BLOCK_PREFETCH_AHEAD = 4


cdef inline void _prefetch_range(const void* base, size_t nbytes) noexcept nogil:
    """Prefetch every cache line of ``nbytes`` bytes at ``base`` (may run past the
    end of the variable's segment: prefetches do not fault)."""
    cdef const unsigned char* p = <const unsigned char*> base
    cdef size_t off
    for off in range(0, nbytes, 64):
        BS_PREFETCH(p + off)


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + 1e-9 * ts.tv_nsec


cdef inline double _sigmoid(double s) noexcept nogil:
    cdef double e
    if s >= 0.0:
        return 1.0 / (1.0 + exp(-s))
    e = exp(s)
    return e / (1.0 + e)


cdef inline double _full_sum(const floating* diff, const int32_t* other,
                             int64_t start, int64_t stop,
                             const uint8_t* x) noexcept nogil:
    """sum_f l_f over the incidences start..stop-1 (exact log-odds of x_i = 1).
    Four accumulators: one would chain every term on the latency of an add."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef int64_t k, stop4 = start + (stop - start) // 4 * 4
    for k in range(start, stop4, 4):
        s0 += diff[4 * k + 2 * x[other[2 * k]] + x[other[2 * k + 1]]]
        s1 += diff[4 * k + 4 + 2 * x[other[2 * k + 2]] + x[other[2 * k + 3]]]
        s2 += diff[4 * k + 8 + 2 * x[other[2 * k + 4]] + x[other[2 * k + 5]]]
        s3 += diff[4 * k + 12 + 2 * x[other[2 * k + 6]] + x[other[2 * k + 7]]]
    for k in range(stop4, stop):
        s0 += diff[4 * k + 2 * x[other[2 * k]] + x[other[2 * k + 1]]]
    return (s0 + s1) + (s2 + s3)


cdef inline bint _decide(const floating* diff, const int32_t* other,
                         int64_t start, int64_t stop, const uint8_t* x,
                         int64_t* perm, bitgen_t* bg, double eps,
                         int64_t first_batch, int64_t batch_size, int64_t block,
                         double* crit, int64_t crit_size,
                         int64_t* n_examined) noexcept nogil:
    """One Gibbs decision for a variable whose incidences are start..stop-1.

    The sampling units are blocks of ``block`` consecutive incidences (the last
    one shorter): ``perm[start .. start + n_blocks)`` holds the absolute first
    incidence of each block, shuffled lazily.  The test runs on the block sums:
    their mean over the n_blocks blocks exceeds logit(u) / n_blocks iff the sum
    of all terms exceeds logit(u).  ``first_batch`` and ``batch_size`` count
    blocks.  With ``block == 1`` the units are single terms (random gathers).

    Returns the new value of the variable (True = 1) and writes the number of
    factor terms examined to n_examined."""
    cdef int64_t N = stop - start
    cdef int64_t n_units = (N + block - 1) // block
    cdef double u = rng_uniform_open(bg)
    cdef double logit_u = log(u) - log1p(-u)
    cdef SeqTest t
    cdef U32Stream rs
    cdef int64_t b, c, j, k, pos, hi, terms, drawn
    cdef int64_t* seg
    cdef size_t touched
    cdef double buf[SEQTEST_CHUNK]
    if N == 0:
        n_examined[0] = 0
        return 0.0 > logit_u          # no factor: P(x_i = 1 | rest) = 1/2
    if eps <= 0.0:
        n_examined[0] = N
        # mean > mu0  <=>  sum > N * mu0 = logit(u)  <=>  u < sigmoid(sum)
        return _full_sum(diff, other, start, stop, x) > logit_u
    seg = perm + start
    if block == 1:
        # Stream the variable's whole segment (permutation, terms, other variables)
        # into cache first: the random accesses of the test then hit L1/L2 instead
        # of L3/DRAM (2-3x faster per sweep than without, on the D = 100 model).
        touched = (_touch_range(seg, N * sizeof(int64_t))
                   + _touch_range(diff + 4 * start, 4 * N * sizeof(floating))
                   + _touch_range(other + 2 * start, 2 * N * sizeof(int32_t)))
        BS_KEEP(touched)
    seqtest_init(&t, n_units, logit_u / n_units, eps, first_batch, batch_size)
    seqtest_set_crit_cache(&t, crit, crit_size)
    u32_init(&rs, bg)
    pos = 0
    terms = 0
    drawn = 0
    while not t.done:
        b = seqtest_next_batch(&t)
        while b > 0:
            c = b if b < SEQTEST_CHUNK else SEQTEST_CHUNK
            if block == 1:
                # draw the chunk's indices, then gather its terms in a loop free of
                # RNG calls and of the test's arithmetic, then update the test once
                for j in range(pos, pos + c):
                    u32_fisher_yates_step(&rs, seg, j, n_units)
                for j in range(c):
                    k = seg[pos + j]
                    buf[j] = diff[4 * k + 2 * x[other[2 * k]] + x[other[2 * k + 1]]]
                terms += c
            else:
                # draw the units up to BLOCK_PREFETCH_AHEAD beyond the chunk, so that
                # a later block's terms and partners can be prefetched while this one
                # is summed (the blocks lie at random places of a segment that is not
                # in cache); units drawn ahead and never used leave a valid
                # permutation, which is all the next decision needs
                hi = pos + c + BLOCK_PREFETCH_AHEAD
                if hi > n_units:
                    hi = n_units
                while drawn < hi:
                    u32_fisher_yates_step(&rs, seg, drawn, n_units)
                    if drawn < BLOCK_PREFETCH_AHEAD:
                        k = seg[drawn]
                        _prefetch_range(diff + 4 * k, 4 * block * sizeof(floating))
                        _prefetch_range(other + 2 * k, 2 * block * sizeof(int32_t))
                    drawn += 1
                for j in range(c):
                    if pos + j + BLOCK_PREFETCH_AHEAD < drawn:
                        k = seg[pos + j + BLOCK_PREFETCH_AHEAD]
                        _prefetch_range(diff + 4 * k, 4 * block * sizeof(floating))
                        _prefetch_range(other + 2 * k, 2 * block * sizeof(int32_t))
                    k = seg[pos + j]
                    hi = k + block if k + block < stop else stop
                    buf[j] = _full_sum(diff, other, k, hi, x)
                    terms += hi - k
            seqtest_push_batch(&t, buf, c)
            pos += c
            b -= c
        seqtest_check(&t)
    n_examined[0] = terms
    return t.accept


cdef int64_t _max_units(const int64_t[::1] ptr, int64_t block):
    """The largest number of sampling units of a variable."""
    cdef Py_ssize_t i
    cdef int64_t best = 0, nb
    for i in range(ptr.shape[0] - 1):
        nb = (ptr[i + 1] - ptr[i] + block - 1) // block
        if nb > best:
            best = nb
    return best


cdef double* _nan_array(int64_t size) except NULL:
    """A malloc'ed array of ``size`` NaNs (the t-test's critical-value cache)."""
    cdef double* a = <double*> malloc(size * sizeof(double))
    cdef int64_t j
    if a == NULL:
        raise MemoryError()
    for j in range(size):
        a[j] = NAN
    return a


def gibbs_run(const floating[:, ::1] diff, const int32_t[:, ::1] other,
              const int64_t[::1] ptr, uint8_t[::1] x, int64_t[::1] perm,
              generator, Py_ssize_t n_sweeps, double eps, int64_t first_batch,
              int64_t batch_size, bint random_scan,
              uint8_t[:, ::1] states_out, double[::1] frac_out, double[::1] time_out,
              bint record, double[::1] cond_out, uint8_t[::1] dec_out,
              int32_t[::1] var_out, int64_t block=1, double max_seconds=INFINITY):
    """Run ``n_sweeps`` Gibbs sweeps of one chain in place (GIL released), or
    fewer: the sweeps made when ``max_seconds`` of wall time have passed (at
    least one); returns the number of sweeps made.

    ``x`` (the current state) and ``perm`` (the per-variable Fisher-Yates
    permutations of the sampling units: for variable i, ``perm[ptr[i] ..
    ptr[i] + n_blocks_i)`` holds the absolute first incidence of each block of
    ``block`` incidences, see ``block_permutation``) are updated in place, so
    calling this again continues the same chain; ``first_batch`` and
    ``batch_size`` count blocks.  A sweep is D single-variable updates
    (variables 0..D-1 in order for the systematic scan, D uniform draws for the
    random scan); the state after each sweep goes to ``states_out[s]``,
    ``frac_out[s]`` receives (terms examined) / (terms of the exact updates) of the
    sweep and ``time_out[s]`` its wall time in seconds.  With ``record`` the exact
    conditional P(x_i = 1 | rest), the decision and the variable of each update go
    to ``cond_out``, ``dec_out``, ``var_out`` (length n_sweeps * D); computing the
    exact conditional costs a full pass over the variable's factors and is not
    included in ``time_out``. The caller runs a long chain in calls of a
    bounded time, so that it can be stopped between them (a sweep boundary).
    """
    cdef Py_ssize_t D = x.shape[0]
    if ptr.shape[0] != D + 1 or diff.shape[0] != other.shape[0] or diff.shape[1] != 4 \
            or other.shape[1] != 2 or perm.shape[0] != diff.shape[0]:
        raise ValueError("inconsistent incidence arrays")
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    if states_out.shape[0] < n_sweeps or states_out.shape[1] != D \
            or frac_out.shape[0] < n_sweeps or time_out.shape[0] < n_sweeps:
        raise ValueError("output buffers too small")
    if record and (cond_out.shape[0] < n_sweeps * D or dec_out.shape[0] < n_sweeps * D
                   or var_out.shape[0] < n_sweeps * D):
        raise ValueError("record buffers too small")
    if diff.shape[0] == 0:
        # keep valid pointers for the empty model (every variable has N_i = 0)
        diff = np.zeros((1, 4), dtype=np.asarray(diff).dtype)
        other = np.zeros((1, 2), dtype=np.int32)
        perm = np.zeros(1, dtype=np.int64)
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef const floating* dp = &diff[0, 0]
    cdef const int32_t* op = &other[0, 0]
    cdef int64_t* pp = &perm[0]
    cdef uint8_t* xp = &x[0]
    cdef Py_ssize_t s, r, i, d, upd
    cdef int64_t n_ex, tot_ex, tot_n
    cdef double t0, t_excl, t1, t_start
    cdef Py_ssize_t n_done = 0
    cdef bint new
    cdef int64_t crit_size = _max_units(ptr, block) + 1
    cdef double* crit = _nan_array(crit_size)
    with generator.bit_generator.lock, nogil:
        upd = 0
        t_start = _now()
        for s in range(n_sweeps):
            tot_ex = 0
            tot_n = 0
            t_excl = 0.0
            t0 = _now()
            for r in range(D):
                if random_scan:
                    i = rng_index(bg, D)
                else:
                    i = r
                if record:
                    t1 = _now()
                    cond_out[upd] = _sigmoid(_full_sum(dp, op, ptr[i], ptr[i + 1], xp))
                    var_out[upd] = <int32_t> i
                    t_excl += _now() - t1
                new = _decide(dp, op, ptr[i], ptr[i + 1], xp, pp, bg, eps,
                              first_batch, batch_size, block, crit, crit_size, &n_ex)
                xp[i] = 1 if new else 0
                if record:
                    dec_out[upd] = xp[i]
                upd += 1
                tot_ex += n_ex
                tot_n += ptr[i + 1] - ptr[i]
            time_out[s] = _now() - t0 - t_excl
            frac_out[s] = (<double> tot_ex) / tot_n if tot_n > 0 else 1.0
            for d in range(D):
                states_out[s, d] = xp[d]
            n_done = s + 1
            if _now() - t_start >= max_seconds:
                break
    free(crit)
    return n_done


def decide_repeated(const floating[:, ::1] diff, const int32_t[:, ::1] other,
                    const int64_t[::1] ptr, const uint8_t[::1] x, Py_ssize_t i,
                    int64_t[::1] perm, generator, Py_ssize_t n_repeats, double eps,
                    int64_t first_batch, int64_t batch_size, int64_t block=1):
    """Make the Gibbs decision for variable ``i`` at the fixed state ``x``
    ``n_repeats`` times (fresh u and fresh draws each time, GIL released).

    Returns ``(n_ones, n_examined_total)``: how often x_i was set to 1 and the
    total number of factor terms examined.
    """
    cdef Py_ssize_t D = x.shape[0]
    if i < 0 or i >= D or ptr.shape[0] != D + 1 or perm.shape[0] != diff.shape[0] \
            or block < 1:
        raise ValueError("inconsistent arguments")
    if ptr[i + 1] == ptr[i]:
        diff = np.zeros((1, 4), dtype=np.asarray(diff).dtype)
        other = np.zeros((1, 2), dtype=np.int32)
        perm = np.zeros(1, dtype=np.int64)
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef int64_t start = ptr[i], stop = ptr[i + 1]
    cdef int64_t n_ones = 0, n_ex_tot = 0, n_ex
    cdef Py_ssize_t r
    cdef int64_t crit_size = _max_units(ptr, block) + 1
    cdef double* crit = _nan_array(crit_size)
    with generator.bit_generator.lock, nogil:
        for r in range(n_repeats):
            if _decide(&diff[0, 0], &other[0, 0], start, stop, &x[0], &perm[0], bg,
                       eps, first_batch, batch_size, block, crit, crit_size, &n_ex):
                n_ones += 1
            n_ex_tot += n_ex
    free(crit)
    return n_ones, n_ex_tot


def block_permutation(const int64_t[::1] ptr, int64_t block):
    """The initial unit permutation for blocks of ``block`` incidences: for
    variable i, ``perm[ptr[i] + b] = ptr[i] + b * block`` for each of its
    ``ceil(N_i / block)`` blocks (the rest of the segment is unused). ``block = 1``
    gives ``arange(n_incidences)``, the per-term units."""
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    cdef Py_ssize_t D = ptr.shape[0] - 1, i
    cdef int64_t b, nb
    perm_arr = np.arange(ptr[D] if D >= 0 else 0, dtype=np.int64)
    cdef int64_t[::1] perm = perm_arr
    for i in range(D):
        nb = (ptr[i + 1] - ptr[i] + block - 1) // block
        for b in range(nb):
            perm[ptr[i] + b] = ptr[i] + b * block
    return perm_arr


def conditional_log_odds(const floating[:, ::1] diff, const int32_t[:, ::1] other,
                         const int64_t[::1] ptr, const uint8_t[:, ::1] states,
                         const int64_t[::1] variables, double[:, ::1] out):
    """out[r, j] = log P(x_v = 1 | rest) - log P(x_v = 0 | rest) at states[r] for
    v = variables[j] (exact: the sum of l_f over all factors touching v)."""
    cdef Py_ssize_t n = states.shape[0], m = variables.shape[0], r, j
    if out.shape[0] != n or out.shape[1] != m or ptr.shape[0] != states.shape[1] + 1:
        raise ValueError("inconsistent arguments")
    if diff.shape[0] == 0:
        out[:, :] = 0.0
        return
    with nogil:
        for r in range(n):
            for j in range(m):
                out[r, j] = _full_sum(&diff[0, 0], &other[0, 0], ptr[variables[j]],
                                      ptr[variables[j] + 1], &states[r, 0])


def log_prob_factors(const floating[:, ::1] tables, const int64_t[:, ::1] index,
                     const uint8_t[:, ::1] states, double[::1] out):
    """out[r] += sum_f tables[f, code_f(states[r])] where code_f is the binary
    number formed by the factor's variables (first variable = most significant)."""
    cdef Py_ssize_t n = states.shape[0], F = tables.shape[0], order = index.shape[1]
    cdef Py_ssize_t r, f, q
    cdef int64_t code
    cdef double acc
    if index.shape[0] != F or out.shape[0] != n or tables.shape[1] != (1 << order):
        raise ValueError("inconsistent arguments")
    with nogil:
        for r in range(n):
            acc = 0.0
            for f in range(F):
                code = 0
                for q in range(order):
                    code = 2 * code + states[r, index[f, q]]
                acc += tables[f, code]
            out[r] += acc
