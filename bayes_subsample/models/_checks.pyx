# cython: language_level=3
"""Validation of the compiled models' Python-callable arguments (see _checks.pxd)."""
from libc.stdint cimport int64_t

import numpy as np
from bayes_subsample.models._rows import checked_indices


cdef object check_theta(object model, object theta, str name="theta"):
    t = np.ascontiguousarray(theta, dtype=np.float64)
    if t.shape != (model.n_params,):
        raise ValueError(f"{name} must have shape ({model.n_params},), got {t.shape}")
    return t


cdef object check_indices(object model, object idx):
    if idx is None:
        return np.arange(model.n_data, dtype=np.int64)
    return checked_indices(idx, model.n_data)


cdef object check_cache(object model, object eta_star):
    if eta_star is None:
        return None
    e = np.asarray(eta_star)
    if e.dtype != np.float64 or e.ndim != 1 or not e.flags.c_contiguous:
        raise ValueError("the cache (eta_star) must be a 1-D C-contiguous float64 array, "
                         "as cv_cache returns it")
    if e.shape[0] != model.n_data * model.cache_width:
        raise ValueError(f"the cache (eta_star) must hold {model.cache_width} value(s) per "
                         f"datum, {model.n_data * model.cache_width} in all; got {e.shape[0]}")
    return e


cdef object gather_rows(Rows rows, object model, object idx, Py_ssize_t n_cols):
    cdef int64_t[::1] ix = check_indices(model, idx)
    cdef double[:, ::1] out = np.empty((ix.shape[0], n_cols))
    if ix.shape[0]:
        with nogil:
            rows.gather(&ix[0], ix.shape[0], &out[0, 0])
    return np.asarray(out)
