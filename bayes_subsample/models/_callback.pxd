# A Python Model behind the compiled interface (see _callback.pyx).
from bayes_subsample.models._cymodel cimport CyModel


cdef class CyCallbackModel(CyModel):
    cdef readonly object model       # the Python Model
    cdef int _into(self, double* out, Py_ssize_t m, str what, fn, tuple args) noexcept
