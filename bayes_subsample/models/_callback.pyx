# cython: language_level=3
"""User models behind the compiled interface: ``CyCallbackModel`` implements
``CyModel`` by calling a Python :class:`~bayes_subsample.models.Model`'s NumPy
methods with the GIL, so user models run through the same kernels as the
compiled GLMs. An exception raised by the model is kept (``CyModel._fail``)
and re-raised by the kernel's caller."""
import numpy as np
from libc.stdint cimport int64_t
from bayes_subsample.models._cymodel cimport CyModel


cdef inline object _vec(const double* x, Py_ssize_t p):
    return np.asarray(<double[:p]> <double*> x).copy()


cdef inline object _ivec(const int64_t* idx, Py_ssize_t m):
    return np.asarray(<int64_t[:m]> <int64_t*> idx).copy()


cdef inline void _put(double* out, Py_ssize_t m, values, str what) except *:
    cdef double[::1] v = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    cdef Py_ssize_t i
    if v.shape[0] != m:
        raise ValueError(f"{what} returned {v.shape[0]} values, expected {m}")
    for i in range(m):
        out[i] = v[i]


cdef class CyCallbackModel(CyModel):
    """A Python :class:`~bayes_subsample.models.Model` behind the compiled
    interface: each method takes the GIL and calls the model's NumPy methods
    (``loglik_terms``, ``loglik_diff_terms``, ``grad_sum``, ``cv_residual_terms``,
    ``cv_grad_sum``, ``full_pass``)."""

    def __init__(self, model):
        self.model = model
        self.n_data = int(model.n_data)
        self.n_params = int(model.n_params)

    cdef int _into(self, double* out, Py_ssize_t m, str what, fn, tuple args) noexcept:
        """``out[:m] = fn(*args)``; 0, or -1 with the exception kept (GIL held)."""
        try:
            _put(out, m, fn(*args), what)
            return 0
        except BaseException:
            return self._fail()

    cdef int loglik(self, const double* theta, const int64_t* idx, Py_ssize_t m,
                    double* out) noexcept nogil:
        with gil:
            return self._into(out, m, "loglik_terms", self.model.loglik_terms,
                              (_vec(theta, self.n_params), _ivec(idx, m)))

    cdef int loglik_diff(self, const double* theta, const double* theta_new,
                         const int64_t* idx, Py_ssize_t m, double* out) noexcept nogil:
        with gil:
            return self._into(out, m, "loglik_diff_terms", self.model.loglik_diff_terms,
                              (_vec(theta, self.n_params), _vec(theta_new, self.n_params),
                               _ivec(idx, m)))

    cdef int grad_sum(self, const double* theta, const int64_t* idx, Py_ssize_t m,
                      double* grad, double* ll) noexcept nogil:
        cdef int rc
        with gil:
            args = (_vec(theta, self.n_params), _ivec(idx, m))
            rc = self._into(grad, self.n_params, "grad_sum", self.model.grad_sum, args)
            if rc == 0 and ll != NULL:
                rc = self._into(ll, 1, "loglik_terms",
                                lambda t, i: np.sum(self.model.loglik_terms(t, i)), args)
            return rc

    cdef int cv_residual_diff(self, int order, const double* theta_star,
                              const double* eta_star, const double* theta,
                              const double* theta_new, const int64_t* idx, Py_ssize_t m,
                              double* out) noexcept nogil:
        with gil:
            res = self.model.cv_residual_terms
            return self._into(out, m, "cv_residual_terms",
                              lambda t0, t1, ts, i: res(t1, ts, i, order) - res(t0, ts, i, order),
                              (_vec(theta, self.n_params), _vec(theta_new, self.n_params),
                               _vec(theta_star, self.n_params), _ivec(idx, m)))

    cdef int cv_grad_sum(self, int order, const double* theta_star, const double* eta_star,
                         const double* theta, const int64_t* idx, Py_ssize_t m,
                         double* grad, double* dsum) noexcept nogil:
        cdef int rc
        with gil:
            try:
                g, s = self.model.cv_grad_sum(_vec(theta, self.n_params),
                                              _vec(theta_star, self.n_params),
                                              _ivec(idx, m), order, want_sum=dsum != NULL)
            except BaseException:
                return self._fail()
            rc = self._into(grad, self.n_params, "cv_grad_sum", np.asarray, (g,))
            if rc == 0 and dsum != NULL:
                rc = self._into(dsum, 1, "cv_grad_sum", np.asarray, (s,))
            return rc

    cdef int cv_residuals(self, int order, const double* theta_star, const double* eta_star,
                          const double* theta, const int64_t* idx, Py_ssize_t m,
                          double* d) noexcept nogil:
        with gil:
            return self._into(d, m, "cv_residual_terms", self.model.cv_residual_terms,
                              (_vec(theta, self.n_params), _vec(theta_star, self.n_params),
                               _ivec(idx, m), order))

    cdef int full_sums(self, const double* theta, double* ll, double* grad, double* hess,
                       int n_threads) noexcept nogil:
        cdef Py_ssize_t p = self.n_params
        cdef int rc
        with gil:
            try:
                l, g, h = self.model.full_pass(_vec(theta, p), gradient=grad != NULL,
                                               hessian=hess != NULL)
            except BaseException:
                return self._fail()
            rc = 0
            if ll != NULL:
                rc = self._into(ll, 1, "full_pass", np.asarray, (l,))
            if rc == 0 and grad != NULL:
                rc = self._into(grad, p, "full_pass gradient", np.asarray, (g,))
            if rc == 0 and hess != NULL:
                rc = self._into(hess, p * p, "full_pass Hessian", np.asarray, (h,))
            return rc
