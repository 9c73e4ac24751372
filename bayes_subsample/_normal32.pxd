# Float32 standard normals for the nogil kernels of float32 models (the MLP on
# float32 rows): a 256-layer ziggurat on 32-bit words, see _normal32.pyx.
from numpy.random cimport bitgen_t

# out[:n] = n standard normals (float32) from bg's stream (one fresh 32-bit
# stream per call: a half word left over at the end is dropped)
cdef void normal_fill_f(bitgen_t* bg, Py_ssize_t n, float* out) noexcept nogil
