# The compiled multilayer perceptron (dense layers) as a ``CyModel``.
#
# Layer sizes ``n_0 = d, n_1, ..., n_L = K``; weight layer ``l`` (0-based, ``l <
# L``) maps ``n_l`` inputs to ``n_{l+1}`` outputs. ``theta`` is one flat float64
# vector, layer after layer: ``W_l`` (``n_l x n_{l+1}``, row-major: inputs by
# outputs), then ``b_l`` (``n_{l+1}``); ``offsets[l]`` is where ``W_l`` starts,
# ``b_l`` follows at ``offsets[l] + n_l n_{l+1}``, ``offsets[L] = p``. The hidden
# layers apply the activation, the last one none: its ``K`` values are the
# logits of a softmax (classification) or the means of independent Gaussians
# of a fixed standard deviation (regression). Forward and backward passes run
# per chunk of rows through BLAS (``sgemm`` on float32 rows, ``dgemm`` on
# float64), with no Python object touched (see ``_cymlp.pyx``).
from libc.stdint cimport int64_t
from bayes_subsample.models._cymodel cimport CyModel
from bayes_subsample.models._rows cimport DenseRows

cdef enum:
    ACT_RELU = 0
    ACT_TANH = 1
    ACT_LOGISTIC = 2
    OUT_SOFTMAX = 0
    OUT_GAUSSIAN = 1


# the architecture, as the nogil passes read it (pointers into arrays the
# CyMLP keeps alive)
cdef struct Net:
    Py_ssize_t L                # weight layers
    const Py_ssize_t* sizes     # n_0 .. n_L
    const Py_ssize_t* offsets   # start of W_l in theta, l = 0 .. L (offsets[L] = p)
    const Py_ssize_t* zoff      # start of layer l's values in a row of the activations,
                                # l = 0 .. L (zoff[L] = n_1 + ... + n_L)
    int activation              # ACT_*
    int output                  # OUT_*
    double inv_var              # Gaussian output: 1 / noise_scale^2
    double log_norm             # Gaussian output: -log(2 pi noise_scale^2) / 2


cdef class CyMLP(CyModel):
    cdef readonly DenseRows rows
    cdef const double[::1] y            # labels (softmax) or targets, n x K row-major
    cdef Net net
    cdef object _keep                   # the arrays behind net's pointers
    cdef readonly Py_ssize_t n_features
    cdef readonly Py_ssize_t n_outputs  # K
    cdef readonly str activation
    cdef readonly str output
    cdef readonly double noise_scale

    # the pass over the rows idx[:m] (or rows start .. start + m - 1 when idx is
    # NULL): terms[i] = l_i, total[0] = sum_i l_i, grad[:p] += sum_i grad l_i,
    # grad_terms[i * p:] = grad l_i, outputs[i * K:] = the last layer's values
    # (each output may be NULL); returns 0, or -1 with a MemoryError kept
    cdef int _pass(self, const double* theta, const int64_t* idx, Py_ssize_t start,
                   Py_ssize_t m, double* terms, double* total, double* grad,
                   double* grad_terms, double* outputs) noexcept nogil
    # keep a NotImplementedError (an unsupported method); -1
    cdef int _unsupported(self, const char* what) noexcept with gil
