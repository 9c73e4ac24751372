# cython: language_level=3
"""Access to a numpy Generator's bit generator from Cython, and small
Python-callable wrappers used by tests."""
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from libc.math cimport log
import numpy as np

cdef const char* CAPSULE_NAME = "BitGenerator"


cdef bitgen_t* get_bitgen(object generator) except NULL:
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"expected a numpy.random.Generator, got {type(generator).__name__}")
    capsule = generator.bit_generator.capsule
    if not PyCapsule_IsValid(capsule, CAPSULE_NAME):
        raise ValueError("invalid bit generator capsule")
    return <bitgen_t*> PyCapsule_GetPointer(capsule, CAPSULE_NAME)


def sample_without_replacement(generator, Py_ssize_t n, Py_ssize_t k):
    """k distinct indices from range(n) by lazy Fisher-Yates (test helper)."""
    if k < 0 or k > n:
        raise ValueError(f"cannot draw {k} distinct indices from {n}")
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef int64_t[::1] perm = np.arange(n, dtype=np.int64)
    cdef Py_ssize_t i
    with generator.bit_generator.lock, nogil:
        for i in range(k):
            fisher_yates_step(bg, &perm[0], i, n)
    return np.asarray(perm[:k]).copy()


def uniform_indices(generator, Py_ssize_t n, Py_ssize_t k):
    """k iid uniform indices from range(n) (test helper)."""
    if n < 1:
        raise ValueError("n must be >= 1")
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef int64_t[::1] out = np.empty(k, dtype=np.int64)
    cdef Py_ssize_t i
    with generator.bit_generator.lock, nogil:
        for i in range(k):
            out[i] = rng_index(bg, n)
    return np.asarray(out)


def standard_normals(generator, Py_ssize_t k):
    """k standard normals through the C API (equal to generator.standard_normal(k))."""
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef double[::1] out = np.empty(k)
    cdef Py_ssize_t i
    with generator.bit_generator.lock, nogil:
        for i in range(k):
            out[i] = rng_normal(bg)
    return np.asarray(out)


def draw_without_replacement(generator, int64_t[::1] perm, int64_t pos, int64_t count):
    """Advance a lazy Fisher-Yates shuffle: make ``perm[pos:pos+count]`` the next
    ``count`` draws without replacement from ``perm[pos:]`` and return a copy.

    The draws are those of the compiled subsampling loops (32-bit Lemire index
    draws, ``u32_fisher_yates_step``, one stream per call)."""
    cdef int64_t n = perm.shape[0], j
    cdef U32Stream rs
    if pos < 0 or count < 0 or pos + count > n:
        raise ValueError(f"cannot draw {count} indices at position {pos} from {n}")
    cdef bitgen_t* bg = get_bitgen(generator)
    with generator.bit_generator.lock, nogil:
        u32_init(&rs, bg)
        for j in range(pos, pos + count):
            u32_fisher_yates_step(&rs, &perm[0], j, n)
    return np.asarray(perm[pos:pos + count]).copy()


def shuffle(generator, int64_t[::1] perm):
    """Uniform Fisher-Yates reshuffle of ``perm`` in place (``fisher_yates_step``)."""
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef Py_ssize_t n = perm.shape[0], i
    with generator.bit_generator.lock, nogil:
        for i in range(n - 1):
            fisher_yates_step(bg, &perm[0], i, n)


def log_uniform(generator):
    """``log u`` for ``u`` uniform on the open interval (0, 1) (``rng_uniform_open``)."""
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef double u
    with generator.bit_generator.lock, nogil:
        u = rng_uniform_open(bg)
    return log(u)
