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
