# Every datum's terms at several points in one read of the data: the residual
# scans that choose HMC-ECS's exact stratum (samplers/_ecs_tuning.py). Generic
# over the compiled models: it calls their ``term_values`` on chunks of
# consecutive rows, each chunk at every point while its rows are in cache.
import numpy as np
from cython.parallel cimport prange
from libc.stdint cimport int64_t

from bayes_subsample.models._cymodel cimport CyModel, MODEL_CHUNK


cdef int _scan_chunk(CyModel cy, int order, const double* theta_star, const double* eta_star,
                     const double* thetas, Py_ssize_t J, Py_ssize_t p, Py_ssize_t start,
                     Py_ssize_t stop, double* out, Py_ssize_t n) noexcept nogil:
    cdef int64_t idx[MODEL_CHUNK]
    cdef Py_ssize_t i, j, c = stop - start
    for i in range(c):
        idx[i] = start + i
    for j in range(J):
        if cy.term_values(order, theta_star, eta_star, thetas + j * p, idx, c,
                          out + j * n + start):
            return -1
    return 0


def term_scan(CyModel cy, int order, theta_star, thetas, eta_star=None, int n_threads=1):
    """``out[j, k] = t_k(thetas[j])`` for every datum ``k``: the terms of
    ``term_values`` (the log-likelihood for a negative ``order``, else the
    control-variate residuals of that order at ``theta_star``; ``eta_star``:
    the model's ``cv_cache(theta_star)`` or None) at each of the ``J`` rows of
    ``thetas`` (J, p). The data are read once: each chunk of ``MODEL_CHUNK``
    rows is evaluated at every point while it is in cache, chunks shared out
    over ``n_threads`` threads. Counted as ``J`` full passes (the work of
    ``J`` passes, the memory traffic of one). Returns an array (J, n)."""
    cdef Py_ssize_t n = cy.n_data, p = cy.n_params
    cdef double[:, ::1] th = np.ascontiguousarray(thetas, dtype=np.float64)
    if th.ndim != 2 or th.shape[1] != p:
        raise ValueError(f"thetas must have shape (J, {p}), got {np.shape(thetas)}")
    if not np.all(np.isfinite(th)):
        raise ValueError("thetas contain NaN or infinity")
    cdef Py_ssize_t J = th.shape[0]
    cdef double[::1] ts = None
    if order >= 0:
        ts = np.ascontiguousarray(theta_star, dtype=np.float64)
        if ts.shape[0] != p:
            raise ValueError(f"theta_star must have shape ({p},), got {np.shape(theta_star)}")
    cdef const double[::1] es = None
    if eta_star is not None:
        es = np.ascontiguousarray(eta_star, dtype=np.float64)
        if es.shape[0] != n * cy.cache_width:
            raise ValueError(f"eta_star must hold {n * cy.cache_width} values (the model's "
                             f"cv_cache), got {es.shape[0]}")
    cdef double[:, ::1] out = np.empty((J, n))
    cdef Py_ssize_t n_chunks = (n + MODEL_CHUNK - 1) // MODEL_CHUNK, c
    cdef const double* tsp = NULL if ts is None else &ts[0]
    cdef const double* esp = NULL if es is None else &es[0]
    # chunks that failed (a user callback raised; compiled models never fail)
    cdef int[::1] failed = np.zeros(n_chunks + 1, dtype=np.intc)
    if J == 0 or n == 0:
        return np.asarray(out)
    with nogil:
        for c in prange(n_chunks, schedule="static", num_threads=max(1, n_threads)):
            failed[c] = _scan_chunk(cy, order, tsp, esp, &th[0, 0], J, p, c * MODEL_CHUNK,
                                    min((c + 1) * MODEL_CHUNK, n), &out[0, 0], n)
    if np.any(np.asarray(failed)):
        cy.raise_error()
    cy.note_passes(J)
    return np.asarray(out)
