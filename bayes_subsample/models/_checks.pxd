# Validation of the arguments of the compiled models' Python-callable methods,
# shared by _cymodel, _cyglm, _cymultinomial and _cylinear. ``model`` is any compiled
# model (its readonly n_params, n_data and cache_width are read).
from bayes_subsample.models._rows cimport Rows

# theta as a C-contiguous float64 copy of shape (n_params,)
cdef object check_theta(object model, object theta, str name=*)
# the indices as 1-D int64 within [0, n_data) (None: every datum)
cdef object check_indices(object model, object idx)
# the control-variate cache as cv_cache returns it (None passes through)
cdef object check_cache(object model, object eta_star)
# the rows x_k (k in idx, checked) of ``rows`` as a float64 (len(idx), n_cols) array
cdef object gather_rows(Rows rows, object model, object idx, Py_ssize_t n_cols)
