# ``CsrRows``: the rows of a canonical scipy.sparse CSR matrix behind the
# ``Rows`` interface of ``_rows.pxd`` (raw pointers into the matrix's arrays,
# no copy).
from libc.stdint cimport int32_t, int64_t
from bayes_subsample.models._rows cimport Rows


cdef class CsrRows(Rows):
    # raw pointers into the arrays of ``matrix`` (no copy); one of each pair is used
    cdef const float* data32
    cdef const double* data64
    cdef const int32_t* indices32
    cdef const int32_t* indptr32
    cdef const int64_t* indices64
    cdef const int64_t* indptr64
    cdef readonly bint is32          # float32 data
    cdef readonly bint index64       # int64 indices and indptr
    cdef readonly Py_ssize_t nnz
    cdef readonly object matrix      # the scipy.sparse CSR matrix (kept alive)
    cdef object _keep                # the arrays behind the pointers

    # sum of squares of row i's stored values
    cdef double _sq_norm(self, Py_ssize_t i) noexcept nogil
