# cython: language_level=3, auto_pickle=False
# auto_pickle=False: as for the other compiled models (their memoryviews do not
# pickle); MLPModel pickles by rebuilding its compiled object (models/_base.py)
"""The compiled multilayer perceptron (see ``_cymlp.pxd`` for the layout of
``theta``).

One pass over a chunk of ``c`` rows (``A_0``: the rows, ``c x n_0``,
row-major)::

    Z_l = A_l W_l + b_l            (c x n_{l+1}; BLAS gemm, b_l written first)
    A_{l+1} = act(Z_l)             (hidden layers; the last Z is the output)
    D_{L-1} = dl / dZ_{L-1}        (per row: softmax_terms, or (y - mu) / s^2)
    grad W_l = A_l^T D_l,  grad b_l = column sums of D_l
    D_{l-1} = (D_l W_l^T) * act'(A_l)   (act' from the activations: relu
                                          [a > 0], tanh 1 - a^2, logistic a (1 - a))

Row-major matrices are BLAS's column-major transposes, so ``Z_l^T = W_l^T
A_l^T`` is ``gemm("N", "N")`` on the arrays as stored, ``grad W_l^T = D_l^T
A_l`` is ``gemm("N", "T")`` and ``D_{l-1}^T = W_l D_l^T`` is ``gemm("T", "N")``.

Precision: the passes compute in the rows' dtype. On float64 rows everything
is float64 (``dgemm``; the weight gradients accumulate across chunks in the
output through ``beta = 1``). On float32 rows ``theta`` is rounded to float32
once per call and the layers run in ``sgemm``: each activation carries a
relative error of a few float32 ulps times the layer's conditioning (on a
784-100-10 network the per-datum log-likelihoods and minibatch gradients are
within 5e-7 of their largest entry, measured against float64); the output layer's
values are widened to float64 before the per-datum log-likelihood (softmax or
Gaussian), whose sum over the data is accumulated in float64, as are the bias
gradients; the weight gradients are summed over a chunk (at most
``MODEL_CHUNK`` rows, ``FULL_CHUNK`` in the full pass) by ``sgemm`` in float32
and across chunks in float64.

Control variates (Taylor expansions of the per-datum terms around a point,
``cv_*`` methods) and Hessians (``full_sums`` with ``hess``) are not provided:
a network's per-datum Hessian is ``p x p`` with ``p`` in the tens of thousands,
and a second-order Taylor expansion around a mode describes a multimodal
posterior poorly. Those methods return -1 with a ``NotImplementedError`` kept
(``raise_error`` re-raises it). Only dense rows (``DenseRows`` without the
intercept column: the biases are layer parameters) are read.
"""
import numpy as np
from libc.math cimport exp, log, tanh, M_PI
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from scipy.linalg.cython_blas cimport sgemm, dgemm
from bayes_subsample._typedefs cimport floating
from bayes_subsample.models._checks cimport check_indices, check_theta
from bayes_subsample.models._cymodel cimport CyModel, MODEL_CHUNK
from bayes_subsample.models._rows cimport DenseRows
from bayes_subsample.models._softmax_terms cimport softmax_terms

cdef enum:
    # rows per chunk of the full-data pass (larger products for BLAS)
    FULL_CHUNK = 1024

ACTIVATIONS = {"relu": ACT_RELU, "tanh": ACT_TANH, "logistic": ACT_LOGISTIC}
OUTPUTS = {"softmax": OUT_SOFTMAX, "gaussian": OUT_GAUSSIAN}


cdef inline Py_ssize_t _imin(Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    return a if a < b else b


cdef inline void _gemm(char ta, char tb, int M, int N, int Kd, const floating* A, int lda,
                       const floating* B, int ldb, floating beta, floating* C,
                       int ldc) noexcept nogil:
    """``C = op(A) op(B) + beta C`` (column-major BLAS, alpha = 1)."""
    cdef floating alpha = 1.0
    if floating is float:
        sgemm(&ta, &tb, &M, &N, &Kd, &alpha, <float*> A, &lda, <float*> B, &ldb, &beta, C,
              &ldc)
    else:
        dgemm(&ta, &tb, &M, &N, &Kd, &alpha, <double*> A, &lda, <double*> B, &ldb, &beta, C,
              &ldc)


cdef inline void _activate(int act, floating* Z, Py_ssize_t size) noexcept nogil:
    """The hidden layers' activation in place."""
    cdef Py_ssize_t i
    cdef double z, e
    cdef floating v
    if act == ACT_RELU:
        # a select, not a branch (the signs are as random as coin flips: a
        # branch is mispredicted half the time), which the compiler vectorises
        for i in range(size):
            v = Z[i]
            Z[i] = 0 if v < 0 else v            # NaN stays NaN
    elif act == ACT_TANH:
        for i in range(size):
            Z[i] = <floating> tanh(Z[i])
    else:
        for i in range(size):
            z = Z[i]
            if z >= 0:
                Z[i] = <floating> (1.0 / (1.0 + exp(-z)))
            else:
                e = exp(z)
                Z[i] = <floating> (e / (1.0 + e))


cdef inline void _activate_grad(int act, const floating* A, floating* D,
                                Py_ssize_t size) noexcept nogil:
    """``D *= act'(z)``, from the activations ``A = act(z)``."""
    cdef Py_ssize_t i
    if act == ACT_RELU:
        for i in range(size):               # a select, as in _activate
            D[i] = D[i] if A[i] > 0 else 0
    elif act == ACT_TANH:
        for i in range(size):
            D[i] = D[i] * (1 - A[i] * A[i])
    else:
        for i in range(size):
            D[i] = D[i] * (A[i] * (1 - A[i]))


cdef inline double _output_terms(const Net* net, Py_ssize_t K, const double* y, Py_ssize_t k,
                                 const double* e, double* r, double* p) noexcept nogil:
    """The log-likelihood of datum ``k`` from its output values ``e`` (K), and
    ``r[j] = dl / de_j``."""
    cdef Py_ssize_t j
    cdef double v = 0.0, t
    if net.output == OUT_SOFTMAX:
        return softmax_terms(K, <int> y[k], e, r, p)
    for j in range(K):
        t = y[k * K + j] - e[j]
        r[j] = t * net.inv_var
        v += -0.5 * t * t * net.inv_var + net.log_norm
    return v


cdef int _run(const Net* net, const floating* X, const double* y, const double* theta,
              const int64_t* idx, Py_ssize_t start, Py_ssize_t m, Py_ssize_t chunk,
              double* terms, double* total, double* grad, double* grad_terms,
              double* outputs) noexcept nogil:
    """The passes of ``CyMLP._pass`` on rows ``X`` (``n x n_0``, C order) and
    targets ``y`` (NULL: no log-likelihood, e.g. outputs of new rows), in chunks
    of at most ``chunk`` rows. ``grad`` is added to (the caller zeroes it).
    Returns -1 if out of memory."""
    cdef Py_ssize_t L = net.L, d = net.sizes[0], K = net.sizes[net.L]
    cdef Py_ssize_t p = net.offsets[net.L], width = net.zoff[net.L]
    cdef Py_ssize_t cap = _imin(chunk, m), s, c, i, j, l, k, n_in, n_out
    cdef bint want_grad = y != NULL and (grad != NULL or grad_terms != NULL)
    cdef bint want_terms = y != NULL
    cdef size_t n_t = cap * d + cap * width * (2 if want_grad else 1)
    cdef floating* mem
    cdef double* dmem
    cdef floating* Xb
    cdef floating* Z
    cdef floating* D = NULL
    cdef floating* Wt
    cdef floating* Gt = NULL
    cdef const floating* A0
    cdef const floating* Ain
    cdef floating* Zl
    cdef floating* Dl = NULL
    cdef double* e
    cdef double* r
    cdef double* pr
    cdef double llsum = 0.0, v
    cdef double* go
    if floating is float:
        n_t += p * (2 if want_grad else 1)
    if m <= 0:
        if total != NULL:
            total[0] = 0.0
        return 0
    mem = <floating*> malloc(n_t * sizeof(floating))
    dmem = <double*> malloc(3 * K * sizeof(double))
    if mem == NULL or dmem == NULL:
        free(mem)
        free(dmem)
        return -1
    e, r, pr = dmem, dmem + K, dmem + 2 * K
    Xb = mem
    Z = Xb + cap * d
    Wt = Z + cap * width
    if want_grad:
        D = Z + cap * width
        Wt = D + cap * width
    if floating is float:
        for j in range(p):
            Wt[j] = <float> theta[j]
        if want_grad:
            Gt = Wt + p
    else:
        Wt = <double*> theta
    s = 0
    while s < m:
        c = _imin(chunk, m - s)
        if idx != NULL:
            for i in range(c):
                memcpy(Xb + i * d, X + idx[s + i] * d, d * sizeof(floating))
            A0 = Xb
        else:
            A0 = X + (start + s) * d
        # ---- forward -----------------------------------------------------------------
        Ain = A0
        for l in range(L):
            n_in, n_out = net.sizes[l], net.sizes[l + 1]
            Zl = Z + c * net.zoff[l]
            for i in range(c):
                memcpy(Zl + i * n_out, Wt + net.offsets[l] + n_in * n_out,
                       n_out * sizeof(floating))
            _gemm(c'N', c'N', <int> n_out, <int> c, <int> n_in, Wt + net.offsets[l],
                  <int> n_out, Ain, <int> n_in, 1.0, Zl, <int> n_out)
            if l < L - 1:
                _activate(net.activation, Zl, c * n_out)
            Ain = Zl
        # ---- output terms --------------------------------------------------------------
        Zl = Z + c * net.zoff[L - 1]
        if want_grad:
            Dl = D + c * net.zoff[L - 1]
        for i in range(c):
            for j in range(K):
                e[j] = Zl[i * K + j]
            if outputs != NULL:
                memcpy(outputs + (s + i) * K, e, K * sizeof(double))
            if not want_terms:
                continue
            k = idx[s + i] if idx != NULL else start + s + i
            v = _output_terms(net, K, y, k, e, r, pr)
            llsum += v
            if terms != NULL:
                terms[s + i] = v
            if want_grad:
                for j in range(K):
                    Dl[i * K + j] = <floating> r[j]
        if not want_grad:
            s += c
            continue
        # ---- backward --------------------------------------------------------------------
        for l in range(L - 1, -1, -1):
            n_in, n_out = net.sizes[l], net.sizes[l + 1]
            Dl = D + c * net.zoff[l]
            Ain = A0 if l == 0 else Z + c * net.zoff[l - 1]
            if grad_terms != NULL:
                for i in range(c):
                    go = grad_terms + (s + i) * p + net.offsets[l]
                    for j in range(n_in):
                        v = Ain[i * n_in + j]
                        for k in range(n_out):
                            go[j * n_out + k] = v * Dl[i * n_out + k]
                    for k in range(n_out):
                        go[n_in * n_out + k] = Dl[i * n_out + k]
            if grad != NULL:
                if floating is float:
                    _gemm(c'N', c'T', <int> n_out, <int> n_in, <int> c, Dl, <int> n_out, Ain,
                          <int> n_in, 0.0, Gt, <int> n_out)
                    go = grad + net.offsets[l]
                    for j in range(n_in * n_out):
                        go[j] += Gt[j]
                else:
                    _gemm(c'N', c'T', <int> n_out, <int> n_in, <int> c, Dl, <int> n_out, Ain,
                          <int> n_in, 1.0, grad + net.offsets[l], <int> n_out)
                go = grad + net.offsets[l] + n_in * n_out
                for i in range(c):
                    for k in range(n_out):
                        go[k] += Dl[i * n_out + k]
            if l > 0:
                _gemm(c'T', c'N', <int> n_in, <int> c, <int> n_out, Wt + net.offsets[l],
                      <int> n_out, Dl, <int> n_out, 0.0, D + c * net.zoff[l - 1], <int> n_in)
                _activate_grad(net.activation, Z + c * net.zoff[l - 1],
                               D + c * net.zoff[l - 1], c * n_in)
        s += c
    free(mem)
    free(dmem)
    if total != NULL:
        total[0] = llsum
    return 0


def layer_offsets(sizes):
    """``offsets`` of the layout of ``theta`` (``_cymlp.pxd``) for layer sizes
    ``(n_0, ..., n_L)``: ``W_l`` starts at ``offsets[l]``, ``b_l`` at
    ``offsets[l] + n_l n_{l+1}``, and ``offsets[L]`` is the number of parameters."""
    sizes = [int(s) for s in sizes]
    off = [0]
    for l in range(len(sizes) - 1):
        off.append(off[l] + sizes[l] * sizes[l + 1] + sizes[l + 1])
    return off


cdef class CyMLP(CyModel):
    """Compiled multilayer perceptron over dense rows (see ``_cymlp.pxd`` for the
    layout of ``theta``).

    Parameters
    ----------
    rows : DenseRows
        The inputs, float32 or float64, without the intercept column.
    y : array-like
        Class indices ``0 .. K - 1`` of shape (n,) (``output="softmax"``), or
        targets of shape (n, K) (``output="gaussian"``; (n,) when K = 1).
    sizes : sequence of int
        Layer sizes ``(n_features, h_1, ..., h_H, K)``, at least two.
    activation : {"relu", "tanh", "logistic"}, default="relu"
        The hidden layers' activation.
    output : {"softmax", "gaussian"}, default="softmax"
    noise_scale : float, default=1.0
        Standard deviation of the Gaussian output (ignored for softmax).
    """

    def __init__(self, DenseRows rows, y, sizes, str activation="relu",
                 str output="softmax", double noise_scale=1.0):
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}: use one of "
                             f"{sorted(ACTIVATIONS)}")
        if output not in OUTPUTS:
            raise ValueError(f"unknown output {output!r}: use one of {sorted(OUTPUTS)}")
        if rows.intercept:
            raise ValueError("CyMLP reads rows without the intercept column (the biases "
                             "are layer parameters)")
        sz = np.asarray([int(s) for s in sizes], dtype=np.intp)
        if sz.shape[0] < 2 or np.any(sz < 1):
            raise ValueError(f"sizes must hold at least two layer sizes, each >= 1, got "
                             f"{tuple(int(s) for s in sz)}")
        if sz[0] != rows.n_features:
            raise ValueError(f"sizes[0] = {sz[0]} must equal the number of features "
                             f"{rows.n_features}")
        n, K = rows.n_rows, int(sz[sz.shape[0] - 1])
        if output == "softmax":
            if K < 2:
                raise ValueError(f"a softmax output needs K >= 2 classes, got {K}")
            yy = np.ascontiguousarray(y, dtype=np.float64)
            if yy.shape != (n,):
                raise ValueError(f"y must have shape ({n},), got {yy.shape}")
            if yy.size and not (np.isfinite(yy).all() and yy.min() >= 0 and yy.max() < K
                                and np.all(yy == np.round(yy))):
                raise ValueError(f"y must hold class indices 0, 1, ..., {K - 1}")
        else:
            if not (noise_scale > 0 and np.isfinite(noise_scale)):
                raise ValueError(f"noise_scale must be finite and > 0, got {noise_scale}")
            yy = np.asarray(y, dtype=np.float64)
            if yy.ndim == 1 and K == 1:
                yy = yy[:, None]
            if yy.shape != (n, K):
                raise ValueError(f"y must have shape ({n}, {K})"
                                 + (f" or ({n},)" if K == 1 else "") + f", got {yy.shape}")
            if not np.isfinite(yy).all():
                raise ValueError("y contains NaN or infinity")
            yy = np.ascontiguousarray(yy).reshape(-1)
        off = np.asarray(layer_offsets(sz), dtype=np.intp)
        zoff = np.concatenate([[0], np.cumsum(sz[1:])]).astype(np.intp)
        self._keep = (sz, off, zoff)
        cdef const Py_ssize_t[::1] vs = sz, vo = off, vz = zoff
        self.net.L = sz.shape[0] - 1
        self.net.sizes = &vs[0]
        self.net.offsets = &vo[0]
        self.net.zoff = &vz[0]
        self.net.activation = ACTIVATIONS[activation]
        self.net.output = OUTPUTS[output]
        self.net.inv_var = 1.0 / (noise_scale * noise_scale)
        self.net.log_norm = -0.5 * log(2.0 * M_PI * noise_scale * noise_scale)
        self.rows = rows
        self.y = yy
        self.n_data = n
        self.n_params = int(off[off.shape[0] - 1])
        self.n_features = rows.n_features
        self.n_outputs = K
        self.activation = activation
        self.output = output
        self.noise_scale = noise_scale
        self.cv_cost = 1

    @property
    def sizes(self):
        """The layer sizes ``(n_0, ..., n_L)``."""
        return tuple(int(s) for s in self._keep[0])

    @property
    def offsets(self):
        """Where each layer's ``W`` starts in ``theta`` (last entry: ``n_params``)."""
        return tuple(int(s) for s in self._keep[1])

    cdef int _unsupported(self, const char* what) noexcept with gil:
        try:
            raise NotImplementedError(
                f"the MLP model has no {what.decode()}: Taylor control variates and "
                "Hessians are not provided for neural networks (run the samplers without "
                "control variates)")
        except NotImplementedError:
            return self._fail()

    cdef int _pass(self, const double* theta, const int64_t* idx, Py_ssize_t start,
                   Py_ssize_t m, double* terms, double* total, double* grad,
                   double* grad_terms, double* outputs) noexcept nogil:
        cdef Py_ssize_t chunk = MODEL_CHUNK if idx != NULL else FULL_CHUNK
        cdef int rc
        if self.rows.is32:
            rc = _run(&self.net, &self.rows.X32[0, 0], &self.y[0], theta, idx, start, m,
                      chunk, terms, total, grad, grad_terms, outputs)
        else:
            rc = _run(&self.net, &self.rows.X64[0, 0], &self.y[0], theta, idx, start, m,
                      chunk, terms, total, grad, grad_terms, outputs)
        if rc:
            return self._nomem("pass")
        return 0

    # ---- the CyModel methods -------------------------------------------------------------
    cdef int loglik(self, const double* theta, const int64_t* idx, Py_ssize_t m,
                    double* out) noexcept nogil:
        return self._pass(theta, idx, 0, m, out, NULL, NULL, NULL, NULL)

    cdef int loglik_diff(self, const double* theta, const double* theta_new,
                         const int64_t* idx, Py_ssize_t m, double* out) noexcept nogil:
        cdef double* tmp
        cdef Py_ssize_t i
        if m <= 0:
            return 0
        tmp = <double*> malloc(m * sizeof(double))
        if tmp == NULL:
            return self._nomem("loglik_diff")
        if (self._pass(theta_new, idx, 0, m, out, NULL, NULL, NULL, NULL)
                or self._pass(theta, idx, 0, m, tmp, NULL, NULL, NULL, NULL)):
            free(tmp)
            return -1
        for i in range(m):
            out[i] = out[i] - tmp[i]
        free(tmp)
        return 0

    cdef int grad_sum(self, const double* theta, const int64_t* idx, Py_ssize_t m,
                      double* grad, double* ll) noexcept nogil:
        memset(grad, 0, self.n_params * sizeof(double))
        return self._pass(theta, idx, 0, m, NULL, ll, grad, NULL, NULL)

    cdef int full_sums(self, const double* theta, double* ll, double* grad, double* hess,
                       int n_threads) noexcept nogil:
        """One pass over all rows in order, in chunks of FULL_CHUNK rows (threads:
        BLAS's own; ``n_threads`` is not used). No Hessian."""
        if hess != NULL:
            return self._unsupported(b"Hessian (full_pass with hessian=True)")
        self._count_pass()
        if grad != NULL:
            memset(grad, 0, self.n_params * sizeof(double))
        return self._pass(theta, NULL, 0, self.n_data, NULL, ll, grad, NULL, NULL)

    cdef int cv_residual_diff(self, int order, const double* theta_star,
                              const double* eta_star, const double* theta,
                              const double* theta_new, const int64_t* idx, Py_ssize_t m,
                              double* out) noexcept nogil:
        return self._unsupported(b"control-variate residuals")

    cdef int cv_grad_sum(self, int order, const double* theta_star, const double* eta_star,
                         const double* theta, const int64_t* idx, Py_ssize_t m,
                         double* grad, double* dsum) noexcept nogil:
        return self._unsupported(b"control-variate residuals")

    cdef int cv_residuals(self, int order, const double* theta_star, const double* eta_star,
                          const double* theta, const int64_t* idx, Py_ssize_t m,
                          double* d) noexcept nogil:
        return self._unsupported(b"control-variate residuals")

    # ---- Python-callable extras ------------------------------------------------------------
    def grad_terms(self, theta, idx=None):
        """Per-datum gradients ``grad l_k(theta)``, shape (len(idx), n_params), in
        the layout of ``theta`` (from the same forward and backward pass as
        ``grad_sum``, the weights' products per datum instead of per chunk)."""
        cdef double[::1] th = check_theta(self, theta)
        cdef int64_t[::1] ix = check_indices(self, idx)
        cdef Py_ssize_t m = ix.shape[0]
        cdef double[:, ::1] out = np.empty((m, self.n_params))
        cdef int rc = 0
        if m:
            with nogil:
                rc = self._pass(&th[0], &ix[0], 0, m, NULL, NULL, NULL, &out[0, 0], NULL)
        if rc:
            self.raise_error()
        return np.asarray(out)

    def outputs(self, theta, X=None, idx=None):
        """The last layer's values (softmax logits or Gaussian means), shape (m, K),
        float64: of the rows ``idx`` of the model's data (``X`` None), or of every
        row of ``X`` (a 2-D float32/float64 array of ``n_features`` columns,
        computed in its dtype; ``idx`` must then be None)."""
        cdef double[::1] th = check_theta(self, theta)
        cdef int64_t[::1] ix
        cdef Py_ssize_t m, K = self.n_outputs
        cdef double[:, ::1] out
        cdef const float[:, ::1] x32
        cdef const double[:, ::1] x64
        cdef int rc = 0
        if X is None:
            ix = check_indices(self, idx)
            m = ix.shape[0]
            out = np.empty((m, K))
            if m:
                with nogil:
                    rc = self._pass(&th[0], &ix[0], 0, m, NULL, NULL, NULL, NULL, &out[0, 0])
            if rc:
                self.raise_error()
            return np.asarray(out)
        if idx is not None:
            raise ValueError("outputs: give either X or idx, not both")
        X = np.asarray(X)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        X = np.ascontiguousarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"X must have shape (n, {self.n_features}), got {X.shape}")
        m = X.shape[0]
        out = np.empty((m, K))
        if m == 0:
            return np.asarray(out)
        if X.dtype == np.float32:
            x32 = X
            with nogil:
                rc = _run(&self.net, &x32[0, 0], NULL, &th[0], NULL, 0, m, FULL_CHUNK, NULL,
                          NULL, NULL, NULL, &out[0, 0])
        else:
            x64 = X
            with nogil:
                rc = _run(&self.net, &x64[0, 0], NULL, &th[0], NULL, 0, m, FULL_CHUNK, NULL,
                          NULL, NULL, NULL, &out[0, 0])
        if rc:
            raise MemoryError("CyMLP.outputs: cannot allocate scratch buffers")
        return np.asarray(out)

    def targets(self, idx=None):
        """``y_k`` for ``k`` in ``idx``: class indices (float64, shape (m,)) or
        Gaussian targets (shape (m, K)); a copy."""
        ix = check_indices(self, idx)
        y = np.asarray(self.y)
        if self.net.output == OUT_SOFTMAX:
            return y[ix]
        return y.reshape(self.n_data, self.n_outputs)[ix]
