# cython: language_level=3
"""Float32 standard normals from a numpy bit generator: a ziggurat of 256
layers (Marsaglia and Tsang 2000) on 32-bit words, for the noise of the
stochastic-gradient samplers on float32 models (tens of thousands of normals
per step on a network).

numpy's normals cost 2-3 times more per draw, its float32 fill too
(``random_standard_normal_fill_f``: 1.1 ms per 80,000 against 0.48 ms here,
which made an MNIST pass of SGHMC 1.23-1.44 s against 0.83-0.90 s): a call per
draw and a branch on the sign bit that is mispredicted half the time. Here
the common case (99.3% of the draws) is inlined with a branch-free sign, and
the bits come two draws to a 64-bit output (``U32Stream`` of ``_rng.pxd``:
low half first; one fresh stream per call, a half word left at the end is
dropped). The stream is its own (not numpy's float32 normals):
:func:`reference_normals` is its plain-Python definition, and the tests check
the compiled fill against it and the draws against the normal law.

Each word ``w``: ``i = w & 255`` the layer, bit 8 the sign, ``a = w >> 9``
(23 bits) the position; ``x = a X_i / 2**23``. Accepted at once if ``a <
K_i`` (``x < X_{i+1}``, inside the layer's rectangle below the density);
otherwise layer 0 draws from the tail ``x > r`` (Marsaglia's exponential
method) and the other layers accept ``x`` if a uniform height in the layer's
wedge is below ``exp(-x^2/2)``, else a fresh word starts over. Uniforms of
the slow path are ``(w >> 8 + 1) / 2**24`` in (0, 1].
"""
import math

import numpy as np
from libc.math cimport exp, log
from libc.stdint cimport uint32_t
from numpy.random cimport bitgen_t
from bayes_subsample._rng cimport U32Stream, u32_init, u32_next, get_bitgen

#: layers, the base layer's right edge ``r`` and every layer's area ``v``
#: (Marsaglia and Tsang's constants for 256 layers)
N_LAYERS = 256
R = 3.6541528853610088
V = 4.92867323399e-3
_M = float(1 << 23)


def _tables():
    """``(W, K, F)``: ``W_i = X_i / 2**23`` (float32), ``K_i = floor(2**23
    X_{i+1} / X_i)`` and ``F_i = exp(-X_i^2 / 2)`` (float64), with ``X_0 = v /
    f(r)`` (the base layer and the tail as one block), ``X_1 = r``, ``X_{i+1}
    = f^-1(f(X_i) + v / X_i)``, ``X_256 = 0``."""
    f = lambda x: math.exp(-0.5 * x * x)                 # noqa: E731
    X = [V / f(R), R]
    for i in range(1, N_LAYERS - 1):
        X.append(math.sqrt(-2.0 * math.log(f(X[i]) + V / X[i])))
    X.append(0.0)
    W = np.array([x / _M for x in X[:N_LAYERS]], dtype=np.float32)
    K = np.array([math.floor(_M * X[i + 1] / X[i]) for i in range(N_LAYERS)], dtype=np.uint32)
    F = np.array([f(x) for x in X], dtype=np.float64)    # N_LAYERS + 1 entries
    return W, K, F


W_TABLE, K_TABLE, F_TABLE = _tables()
cdef float _W[256]
cdef uint32_t _K[256]
cdef double _F[257]
for _i in range(N_LAYERS):
    _W[_i] = W_TABLE[_i]
    _K[_i] = K_TABLE[_i]
for _i in range(N_LAYERS + 1):
    _F[_i] = F_TABLE[_i]
cdef double _R = R


cdef inline double _unit(U32Stream* s) noexcept nogil:
    """A uniform in (0, 1] from one word (24 bits)."""
    return (<double> (u32_next(s) >> 8) + 1.0) * (1.0 / 16777216.0)


cdef float _slow(U32Stream* s, uint32_t w) noexcept nogil:
    """The draw after word ``w`` was not accepted at once (and any words after)."""
    cdef uint32_t i, a
    cdef double x, xx, yy, sgn
    while True:
        i = w & 255
        a = w >> 9
        sgn = -1.0 if (w >> 8) & 1 else 1.0
        x = <double> (<float> a * _W[i])
        if a < _K[i]:
            return <float> (sgn * x)
        if i == 0:
            if x < _R:                       # the base rectangle (K_0 rounded down)
                return <float> (sgn * x)
            while True:                      # the tail beyond r
                xx = -log(_unit(s)) / _R
                yy = -log(_unit(s))
                if yy + yy > xx * xx:
                    return <float> (sgn * (_R + xx))
        if _F[i] + _unit(s) * (_F[i + 1] - _F[i]) < exp(-0.5 * x * x):
            return <float> (sgn * x)
        w = <uint32_t> u32_next(s)


cdef void normal_fill_f(bitgen_t* bg, Py_ssize_t n, float* out) noexcept nogil:
    cdef U32Stream s
    cdef Py_ssize_t j
    cdef uint32_t w, i, a
    u32_init(&s, bg)
    for j in range(n):
        w = <uint32_t> u32_next(&s)
        i = w & 255
        a = w >> 9
        if a < _K[i]:
            # the sign without a branch: bit 8 of w, as 0 or 2
            out[j] = (<float> 1.0 - <float> ((w >> 7) & 2)) * (<float> a * _W[i])
        else:
            out[j] = _slow(&s, w)


def standard_normals_f32(generator, Py_ssize_t k):
    """``k`` float32 standard normals of :c:func:`normal_fill_f` (one call)."""
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef float[::1] out = np.empty(k, dtype=np.float32)
    if k:
        with generator.bit_generator.lock, nogil:
            normal_fill_f(bg, k, &out[0])
    return np.asarray(out)


def reference_normals(generator, k):
    """The definition of :func:`standard_normals_f32` in plain Python (slow: for
    the tests), the same draws and the same generator state after."""
    words = []

    def word():
        if not words:
            r = int(generator.bit_generator.random_raw())
            words.extend([r >> 32, r & 0xFFFFFFFF])
        return words.pop()

    def unit():
        return ((word() >> 8) + 1.0) / 16777216.0

    out = np.empty(k, dtype=np.float32)
    for j in range(k):
        w = word()
        while True:
            i, a = w & 255, w >> 9
            sgn = -1.0 if (w >> 8) & 1 else 1.0
            x = float(np.float32(a) * W_TABLE[i])
            if a < K_TABLE[i] or (i == 0 and x < R):
                out[j] = sgn * x
                break
            if i == 0:
                while True:
                    xx = -math.log(unit()) / R
                    yy = -math.log(unit())
                    if yy + yy > xx * xx:
                        break
                out[j] = sgn * (R + xx)
                break
            if F_TABLE[i] + unit() * (F_TABLE[i + 1] - F_TABLE[i]) < math.exp(-0.5 * x * x):
                out[j] = sgn * x
                break
            w = word()
    return out
