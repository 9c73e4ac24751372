# Random draws for nogil kernels, from a numpy Generator's bitgen_t.
#
# Python side:   bg = get_bitgen(generator)          # a bitgen_t*, valid while generator lives
#                with generator.bit_generator.lock, nogil:
#                    x = rng_normal(bg)
# All helpers are ``noexcept nogil`` and consume the generator's stream, so the
# generator's state after a kernel call reflects every draw made (runs resume).
from libc.stdint cimport uint64_t, int64_t
from numpy.random cimport bitgen_t
from numpy.random.c_distributions cimport (
    random_standard_normal, random_standard_uniform, random_interval, random_poisson,
    random_standard_exponential,
)

cdef bitgen_t* get_bitgen(object generator) except NULL

cdef inline double rng_uniform(bitgen_t* bg) noexcept nogil:
    """Uniform on [0, 1)."""
    return random_standard_uniform(bg)

cdef inline double rng_uniform_open(bitgen_t* bg) noexcept nogil:
    """Uniform on the open interval (0, 1): safe inside log."""
    cdef double u = random_standard_uniform(bg)
    while u == 0.0:
        u = random_standard_uniform(bg)
    return u

cdef inline double rng_normal(bitgen_t* bg) noexcept nogil:
    return random_standard_normal(bg)

cdef inline int64_t rng_index(bitgen_t* bg, int64_t n) noexcept nogil:
    """Uniform integer in [0, n), n >= 1 (unbiased: masked rejection)."""
    return <int64_t> random_interval(bg, <uint64_t> (n - 1))

cdef inline int64_t rng_poisson(bitgen_t* bg, double lam) noexcept nogil:
    return random_poisson(bg, lam)

cdef inline void fisher_yates_step(bitgen_t* bg, int64_t* perm, int64_t pos,
                                   int64_t n) noexcept nogil:
    """Lazy Fisher-Yates: make perm[pos] a uniform draw from perm[pos:n]
    (sampling without replacement). perm must hold a permutation of 0..n-1."""
    cdef int64_t j = pos + rng_index(bg, n - pos)
    cdef int64_t tmp = perm[pos]
    perm[pos] = perm[j]
    perm[j] = tmp


# ---- 32-bit index draws (Lemire) -------------------------------------------------
# Two 32-bit values per 64-bit generator output; exact uniform integers in
# [0, r) by multiply-shift with rejection (Lemire 2019), one generator call per
# two draws and almost no rejections: the fast path for long runs of draws
# without replacement (approximate Gibbs). A different stream from rng_index.
cdef struct U32Stream:
    # 32-bit values from a bit generator's 64-bit outputs, low half first
    bitgen_t* bg
    uint64_t buf
    bint have


cdef inline void u32_init(U32Stream* s, bitgen_t* bg) noexcept nogil:
    s.bg = bg
    s.buf = 0
    s.have = False


cdef inline uint64_t u32_next(U32Stream* s) noexcept nogil:
    if s.have:
        s.have = False
        return s.buf >> 32
    s.buf = s.bg.next_uint64(s.bg.state)
    s.have = True
    return s.buf & 0xffffffffUL


cdef inline uint64_t u32_index(U32Stream* s, uint64_t r) noexcept nogil:
    """Uniform integer in [0, r) for 1 <= r <= 2**32 (Lemire 2019, "Fast random
    integer generation in an interval": multiply-shift, rejection makes it exact)."""
    cdef uint64_t m = u32_next(s) * r
    cdef uint64_t thr
    if (m & 0xffffffffUL) < r:
        thr = (0x100000000UL - r) % r        # 2**32 mod r
        while (m & 0xffffffffUL) < thr:
            m = u32_next(s) * r
    return m >> 32


cdef inline void u32_fisher_yates_step(U32Stream* s, int64_t* perm, int64_t pos,
                          int64_t n) noexcept nogil:
    """Lazy Fisher-Yates: make perm[pos] a uniform draw from perm[pos:n]."""
    cdef uint64_t r = <uint64_t> (n - pos)
    cdef int64_t j, tmp
    if r <= 1:
        return
    if r > 0x100000000UL:                    # not reachable in practice (> 2**32 terms)
        fisher_yates_step(s.bg, perm, pos, n)
        return
    j = pos + <int64_t> u32_index(s, r)
    tmp = perm[pos]
    perm[pos] = perm[j]
    perm[j] = tmp
