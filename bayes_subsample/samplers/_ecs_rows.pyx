# cython: language_level=3, auto_pickle=False
# auto_pickle=False: the pickling Cython generated for these classes crashed the
# interpreter (it reads their memoryviews); pickle raises TypeError instead
"""The rows of HMC-ECS's subsampled potential, for each kind of compiled model
it serves (see ``_ecs_rows.pxd``).

A block of rows lives in a ``RowBlock``: a contiguous float64 copy ``X`` of
the rows (intercept column included, gathered by the model's ``Rows``), their
targets and weights, and the cached constants at theta*. Evaluating a block at
theta is three passes over this cache-resident buffer: ``eta = X theta`` (BLAS
dgemv; multinomial: ``X Theta^T`` by ``dot_classes``, row_dot's sums four classes
at a time), the per-row residuals ``d_i,
d'_i`` (the GLM family's ``cv_terms``, ``_scale_terms`` or
``_softmax_terms``; the Taylor-series path needs no exp/log near theta*), and,
for the gradient, ``X^T c`` (dgemv; multinomial: the K x p1 matrix ``C^T X``).
The noise-scale model has the GLMs' rows and products with K = 2 derivatives
per row (in eta and in the log scale): the gradient's coefficients are ``X^T
c_eta`` (the weights' even entries, a strided BLAS vector) and its last entry
``sum c_tau``.

Rows read in place (``direct``, one predictor per row only): a block keeps no
copy, and every evaluation reads the model's rows through its ``Rows``
(``dot``, ``add_xt``). A sparse (CSR) row then costs its stored entries
instead of the ``p`` of a dense copy, and no ``m x p`` buffer exists.
"""
import numpy as np
from libc.stdint cimport int64_t
from bayes_subsample.models._cymodel cimport CyModel
from bayes_subsample.models._scale_terms cimport ScaleConsts, scale_terms_block
from bayes_subsample.models._softmax_terms cimport softmax_cache, softmax_residuals
from bayes_subsample.models._rows cimport dot_classes, row_dot
from scipy.linalg.cython_blas cimport dgemv, dgemm


cdef class RowBlock:
    """The buffers of ``count`` rows (made by :meth:`ECSRows.block`)."""


cdef class ECSRows:
    """The rows of a compiled model as HMC-ECS reads them.

    Parameters
    ----------
    model : CyGLM, CyMultinomial or CyGaussianScale
    order : {0, 1, 2}
        Taylor order of the control variates.
    direct : bool
        Read the rows in place (not for the multinomial model).
    """

    def __init__(self, CyModel model, int order, bint direct):
        if isinstance(model, CyGLM):
            self.glm = model
            self.K = 1
        elif isinstance(model, CyGaussianScale):
            self.lin = model
            self.scale = True
            self.K = 2           # derivatives per row: in eta and in the log scale
        elif isinstance(model, CyMultinomial):
            self.mult = model
            self.multi = True
            self.K = self.mult.n_classes
        else:
            raise TypeError("ECSCore serves the compiled GLMs, multinomial regression and the "
                            f"noise-scale linear regression, got {type(model).__name__}")
        if direct and self.multi:
            raise ValueError("direct row access serves the models with one linear predictor "
                             "per row (GLMs, the noise-scale linear regression)")
        self.rows = model.rows
        self.n_features = model.rows.n_features
        self.intercept = model.rows.intercept
        self.weighted = model.has_weight
        self.direct = direct
        self.order = order
        self.p1 = self.n_features + self.intercept
        self.W = 2 * self.K + 1
        self.dim = model.n_params
        self.n_data = model.n_data

    def set_model(self, CyModel model):
        """Read later rows from ``model``: the same kind, width and weighting."""
        if self.multi:
            same = (isinstance(model, CyMultinomial) and model.n_params == self.dim
                    and model.n_classes == self.K)
        elif self.scale:
            same = isinstance(model, CyGaussianScale) and model.n_params == self.dim
        else:
            same = (isinstance(model, CyGLM) and model.n_params == self.dim
                    and type(model) is type(self.glm))
        if not same:
            raise TypeError("set_source needs a model of the same kind and width")
        if model.has_weight != self.weighted:
            raise TypeError("set_source needs a model weighted as the first one was")
        if self.multi:
            self.mult = model
        elif self.scale:
            self.lin = model
        else:
            self.glm = model
        self.rows = model.rows
        self.n_data = model.n_data

    cdef RowBlock block(self, Py_ssize_t count):
        cdef RowBlock b = RowBlock.__new__(RowBlock)
        cdef Py_ssize_t c = max(count, 1), g = 1 if self.multi else c
        b.count = count
        b.X = np.empty((1 if self.direct else c, self.p1))
        b.y = np.empty(c)
        b.w = np.empty(c)
        b.es = np.empty(g)      # one-predictor buffers: dummies for the multinomial model
        b.c0 = np.empty(g)
        b.c1 = np.empty(g)
        b.c2 = np.empty(g)
        b.MC = np.empty((c if self.multi else 1, self.W if self.multi else 1))
        return b

    # ---- nogil ------------------------------------------------------------------------
    cdef void copy_rows(self, const int64_t* idx, RowBlock b, Py_ssize_t count) noexcept nogil:
        cdef Py_ssize_t i
        if self.weighted:
            for i in range(count):
                b.w[i] = self._source_weight(idx[i])
        if self.direct:
            for i in range(count):
                b.y[i] = self.lin.y[idx[i]] if self.scale else self.glm.target(idx[i])
        elif self.multi:
            self.mult.gather_rows(idx, count, &b.X[0, 0], &b.y[0])
        elif self.scale:
            self.lin.gather_rows(idx, count, &b.X[0, 0], &b.y[0])
        else:
            self.glm.gather_rows(idx, count, &b.X[0, 0], &b.y[0])

    cdef void cache_rows(self, const int64_t* idx, RowBlock b, Py_ssize_t count) noexcept nogil:
        cdef Py_ssize_t i, k, p1 = self.p1, K = self.K
        if self.multi:
            for i in range(count):
                dot_classes(&b.X[i, 0], p1, 1, &self.theta_star[0], K, &b.MC[i, 0])
                softmax_cache(K, &b.MC[i, 0], &b.MC[i, 0])
            return
        if self.direct:
            self.rows.dot(idx, count, &self.theta_star[0], &b.es[0])
        else:
            for i in range(count):
                b.es[i] = row_dot(&b.X[i, 0], &self.theta_star[0], p1, False)
        if not self.scale:
            self.glm.add_offset(idx, count, &b.es[0])
            self.glm.cv_consts(count, &b.es[0], &b.c0[0], &b.c1[0], &b.c2[0])

    cdef void move_rows(self, RowBlock dst, Py_ssize_t at, RowBlock frm,
                        Py_ssize_t count) noexcept nogil:
        cdef Py_ssize_t i, j
        for i in range(count):
            if not self.direct:
                for j in range(self.p1):
                    dst.X[at + i, j] = frm.X[i, j]
            dst.y[at + i] = frm.y[i]
            if self.weighted:
                dst.w[at + i] = frm.w[i]
            if self.multi:
                for j in range(self.W):
                    dst.MC[at + i, j] = frm.MC[i, j]
            else:
                dst.es[at + i] = frm.es[i]
                dst.c0[at + i] = frm.c0[i]
                dst.c1[at + i] = frm.c1[i]
                dst.c2[at + i] = frm.c2[i]

    cdef double evaluate(self, const int64_t* idx, RowBlock b, Py_ssize_t count,
                         const double* th, double* eta, double* D, double* DP) noexcept nogil:
        return self.evaluate_part(idx, b, 0, count, th, eta, D, DP)

    cdef double evaluate_part(self, const int64_t* idx, RowBlock b, Py_ssize_t start,
                              Py_ssize_t count, const double* th, double* eta, double* D,
                              double* DP) noexcept nogil:
        cdef Py_ssize_t K = self.K
        if count <= 0:
            return 0.0
        if not self.multi:
            self._row_eta(idx + start, b, start, count, th, eta)
            return self._row_terms(th, count, &b.y[start], &b.w[start], eta, &b.es[start],
                                   &b.c0[start], &b.c1[start], &b.c2[start], D, DP)
        # eta (count x K, row-major) = X Theta^T, intercept column included: row_dot's
        # sums (dgemm spent as long packing the rows as multiplying them)
        dot_classes(&b.X[start, 0], self.p1, count, th, K, eta)
        softmax_residuals(self.order, K, count, &b.y[start], eta, &b.MC[start, 0], self.W, D,
                          DP)
        return self._weigh_rows(count, &b.w[start], D, DP)

    cdef double block_residuals(self, const int64_t* idx, RowBlock b, Py_ssize_t start,
                                Py_ssize_t stop, const double* th, double* eta, double* D,
                                double* DP) noexcept nogil:
        cdef Py_ssize_t i, p1 = self.p1, K = self.K
        if not self.multi:
            if self.direct:
                self.rows.dot(idx + start, stop - start, th, eta)
            else:
                for i in range(start, stop):
                    eta[i - start] = row_dot(&b.X[i, 0], th, p1, False)
            if not self.scale:
                self.glm.add_offset(idx + start, stop - start, eta)
            return self._row_terms(th, stop - start, &b.y[start], &b.w[start], eta,
                                   &b.es[start], &b.c0[start], &b.c1[start], &b.c2[start], D,
                                   DP)
        dot_classes(&b.X[start, 0], p1, stop - start, th, K, eta)
        softmax_residuals(self.order, K, stop - start, &b.y[start], eta, &b.MC[start, 0],
                          self.W, D, DP)
        return self._weigh_rows(stop - start, &b.w[start], D, DP)

    cdef void grad(self, const int64_t* idx, RowBlock b, Py_ssize_t count, double* c,
                   double* out) noexcept nogil:
        self.grad_part(idx, b, 0, count, c, out)

    cdef void grad_part(self, const int64_t* idx, RowBlock b, Py_ssize_t start,
                        Py_ssize_t count, double* c, double* out) noexcept nogil:
        """Multinomial: the K x p1 matrix C^T X, in BLAS's terms X^T (p1 x count) C
        (count x K). One predictor per row: ``out[:dim] = sum_i (c[i K] x_i, c[i K +
        1])`` (the features by BLAS, the intercept's entry ``sum c``; the second
        weight, the noise-scale model's in its log scale, to the last entry);
        direct rows compact ``c`` in place. Rows ``[start, start + count)`` of
        ``b`` (``idx`` and ``c`` from their starts for these rows)."""
        cdef int pp = <int> self.p1, dd = <int> self.n_features, cc = <int> count, one = 1
        cdef int kk = <int> self.K
        cdef double alpha = 1.0, beta = 0.0, csum = 0.0
        cdef char notrans = b'N', trans = b'T'
        cdef Py_ssize_t i, K = self.K
        if count <= 0:
            for i in range(self.dim):
                out[i] = 0.0
            return
        if self.multi:
            dgemm(&notrans, &trans, &pp, &kk, &cc, &alpha, &b.X[start, 0], &pp, c, &kk, &beta,
                  out, &pp)
            return
        for i in range(self.dim):
            out[i] = 0.0
        if self.scale:
            for i in range(count):
                csum += c[i * K + 1]
            out[self.p1] = csum
            csum = 0.0
        if self.direct:
            for i in range(1, count):
                c[i] = c[i * K]              # forward: i K >= i
            self.rows.add_xt(idx + start, count, c, out)
            return
        dgemv(&notrans, &dd, &cc, &alpha, &b.X[start, 0], &pp, c, &kk, &beta, out, &one)
        if self.intercept:
            for i in range(count):
                csum += c[i * K]
            out[dd] = csum

    # ---- internals ------------------------------------------------------------------------
    cdef double _source_weight(self, int64_t k) noexcept nogil:
        if self.scale:
            return self.lin.row_weight(k)
        return self.mult.row_weight(k) if self.multi else self.glm.row_weight(k)

    cdef void _row_eta(self, const int64_t* idx, RowBlock b, Py_ssize_t start,
                       Py_ssize_t count, const double* th, double* eta) noexcept nogil:
        """``eta[i] = x_i . theta`` of rows ``[start, start + count)`` of ``b``
        (``idx`` from their start): read in place (``direct``), or
        from their copies by BLAS (``b.X`` (count x p, row-major) is a column-major
        p x count matrix; BLAS reads its first d rows, the features, and the
        intercept is added here)."""
        cdef int pp = <int> self.p1, dd = <int> self.n_features, cc = <int> count, one = 1
        cdef double alpha = 1.0, beta = 0.0
        cdef char trans = b'T'
        cdef Py_ssize_t i
        if self.direct:
            self.rows.dot(idx, count, th, eta)
        else:
            dgemv(&trans, &dd, &cc, &alpha, &b.X[start, 0], &pp, <double*> th, &one, &beta, eta,
                  &one)
            if self.intercept:
                for i in range(count):
                    eta[i] += th[dd]
        if not self.scale:
            self.glm.add_offset(idx, count, eta)

    cdef double _weigh_rows(self, Py_ssize_t count, const double* w, double* D,
                            double* DP) noexcept nogil:
        """Scale each row's residual and its K derivatives by the row's weight
        (weighted models; nothing otherwise); returns the sum of the residuals."""
        cdef Py_ssize_t i, k, K = self.K
        cdef double s = 0.0
        if self.weighted:
            for i in range(count):
                D[i] *= w[i]
                for k in range(K):
                    DP[i * K + k] *= w[i]
        for i in range(count):
            s += D[i]
        return s

    cdef double _row_terms(self, const double* th, Py_ssize_t count, const double* y,
                           const double* w, const double* eta, const double* es,
                           const double* c0, const double* c1, const double* c2, double* D,
                           double* DP) noexcept nogil:
        """The residuals ``D`` of ``count`` rows at th and their derivatives ``DP``
        (K per row: in eta, and for the noise-scale model in its log scale),
        times the rows' weights ``w`` (weighted models); returns their sum."""
        cdef ScaleConsts kc
        cdef double s
        if self.scale:
            self.lin.consts(self.order, th, &self.theta_star[0], &kc)
            s = scale_terms_block(&kc, count, y, eta, es, D, DP)
            return self._weigh_rows(count, w, D, DP) if self.weighted else s
        self.glm.cv_terms(self.order, count, y, eta, es, c0, c1, c2, D, DP)
        return self._weigh_rows(count, w, D, DP)
