# cython: language_level=3
"""Access to a numpy Generator's bit generator from Cython, and small
Python-callable wrappers used by tests."""
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
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
