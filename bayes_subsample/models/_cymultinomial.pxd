# The compiled multinomial (softmax) logistic regression model.
#
# ``theta`` is (K, p1) row-major, p1 = n_features + intercept (see
# ``_multinomial.py``); the per-datum terms are those of ``_softmax_terms.pxd``
# of the K linear predictors eta_k = x . theta_k. The cache of the
# control-variate methods (``cv_cache``, passed back as ``eta_star``) holds
# ``2K + 1`` doubles per datum (eta*, p*, lse(eta*)).
from libc.stdint cimport int64_t
from bayes_subsample.models._cymodel cimport CyModel
from bayes_subsample.models._rows cimport Rows


cdef class CyMultinomial(CyModel):
    cdef readonly Rows rows
    cdef const double[::1] y            # class indices as float64
    cdef readonly Py_ssize_t n_classes  # K
    cdef readonly Py_ssize_t n_cols     # p1 = n_features + intercept
    cdef readonly Py_ssize_t n_features
    cdef readonly bint intercept

    # X[i, :p1] = x_{idx[i]} (float64, intercept column included), y[i] = y_{idx[i]}
    cdef void gather_rows(self, const int64_t* idx, Py_ssize_t m, double* X,
                          double* y) noexcept nogil
