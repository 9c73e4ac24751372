# Fixed-width names and the fused floating type shared by every kernel.
from libc.stdint cimport int64_t, uint64_t, int32_t, uint8_t

ctypedef double float64_t
ctypedef float float32_t
ctypedef int64_t intp_t

ctypedef fused floating:
    float
    double
