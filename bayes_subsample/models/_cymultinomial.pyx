# cython: language_level=3, auto_pickle=False
# auto_pickle=False: the pickling Cython generated for these classes crashed the
# interpreter (it reads their memoryviews); pickle now raises TypeError, and the
# models pickle by rebuilding their compiled objects (models/_base.py)
"""The compiled multinomial (softmax) logistic regression model (see
``_cymultinomial.pxd``).

``theta`` is ``(K, p1)`` row-major, ``p1 = n_features + intercept``; the K
linear predictors of datum ``k`` are ``eta_kc = x_k . theta_c``, computed per
class with the ``Rows`` methods on a chunk of data (``dot`` at ``theta + c *
p1``, so the chunk's rows stay in cache across the K products and a sparse
``Rows`` works unchanged); the per-datum terms are those of
``_softmax_terms.pxd``. The gradient of a datum's term ``t(eta)`` is ``dt/deta
(x) x`` (class-major), accumulated per class with ``add_xt``.

Control variates: the cache of a datum (``2K + 1`` doubles: ``eta*, p*,
lse(eta*)``) comes from ``cv_cache(theta_star)`` (passed back to the methods
as ``eta_star``, datum ``k``'s cache at offset ``k * (2K + 1)``), or, when
``eta_star`` is NULL, is computed on the fly from ``theta_star`` (a second
read of the datum). ``cv_cost`` is 1: samplers build the cache
(``TaylorControlVariate.build_cache``), and a cached residual with its
gradient reads the datum once, at ``theta`` (the GLMs report 1 on the same
footing).

Full-data pass: the rows are split into at most ``MAX_SLOTS`` contiguous
slots (a number fixed by ``n`` alone), each summed in row order by one task
into its own buffers, and the slots are added in slot order: the result is
bit-identical for any ``n_threads``. The Hessian uses

    sum_k Hessian l_k = -sum_k (diag(p_k) - p_k p_k^T) (x) x_k x_k^T,

whose block ``(a, b)`` is ``G_ab`` for ``a != b`` and ``-sum_{b != a} G_ab`` for
``a = b``, with ``G_ab = sum_k p_ka p_kb x_k x_k^T`` (as ``p_a (1 - p_a) = p_a
sum_{b != a} p_b``): the diagonal blocks come without the cancellation of ``p_a
- p_a^2`` when ``p_a`` is near 1. Only the ``K (K - 1) / 2`` blocks ``G_ab``,
``a > b``, are summed, each a symmetric ``p1 x p1`` matrix: the weighted sum
of the rows' outer products ``sum_k c_k x_k x_k^T`` with ``c_k = p_ka p_kb``
(times the row's weight ``w_k`` for a weighted model, below), which the rows' Hessian kernel (``Rows.add_xwx_range``, the one the GLMs use)
computes in place, without copying the rows, the pairs of each chunk of rows
in threads. That is ``K (K - 1) / 2 x p1 (p1 + 1) / 2`` multiply-adds per row,
against ``P (P + 1) / 2`` for the whole ``P x P`` matrix (``P = K p1``): 2.3
times fewer for K = 7 (``benchmarks/bench_multinomial.py``).

Per-datum weights (``weight``, ``sample_weight``; ``CyModel.has_weight``): the
log-likelihood is ``sum_k w_k l_k``. Every term the methods compute (values,
differences, residuals), its derivatives in the predictors and, in the full
pass, the pair weights ``p_ka p_kb`` of each row are multiplied by ``w_k``
(after the unweighted value is computed, so integer weights give duplicated
rows to rounding); an unweighted model does the same arithmetic as before,
bit for bit. The control-variate cache holds values at ``theta*``
and is not weighted.
"""
import numpy as np
from cython.parallel cimport prange
from libc.stdint cimport int64_t
from libc.string cimport memset
from libc.stdlib cimport malloc, calloc, free
from bayes_subsample.models._checks cimport check_indices, check_theta
from bayes_subsample.models._cymodel cimport CyModel, MODEL_CHUNK, LOGLIK, sum_slots
from bayes_subsample.models._rows cimport Rows
from bayes_subsample.models._softmax_terms cimport (
    softmax_cache_width, softmax_terms, softmax_terms_block, softmax_cache, softmax_residual,
    softmax_residuals)

cdef enum:
    # rows per task of cv_cache; a full pass has one slot (task) per PASS_CHUNK rows,
    # up to MAX_SLOTS slots of equal size
    PASS_CHUNK = 4096
    MAX_SLOTS = 64
    # rows per step of the pass with the Hessian: the class pairs' threads share
    # each step (1024 rows of 54 float64 values, 432 KB, stay in L2 for the pairs)
    HESS_CHUNK = 1024
    # what a loop over chunks of indices computes (CyMultinomial._chunks)
    VALUES = 0
    DIFFS = 1
    GRAD = 2


cdef inline Py_ssize_t _imin(Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    return a if a < b else b


cdef inline double* _scratch(Scratch* b, Py_ssize_t K, Py_ssize_t c) noexcept nogil:
    """Allocate ``b``'s buffers in one block (returned, for ``free``; NULL if
    out of memory)."""
    cdef Py_ssize_t W = softmax_cache_width(K)
    cdef double* mem = <double*> malloc((c * (3 * K + W) + 4 * K) * sizeof(double))
    if mem == NULL:
        return NULL
    b.E = mem
    b.E2 = b.E + K * c
    b.R = b.E2 + K * c
    b.C = b.R + K * c
    b.e = b.C + W * c
    b.e2 = b.e + K
    b.dt = b.e2 + K
    b.p = b.dt + K
    return mem


cdef inline void _col(const double* E, Py_ssize_t K, Py_ssize_t c, Py_ssize_t i,
                      double* e) noexcept nogil:
    """``e = E[:, i]``: datum i's predictors out of a class-major chunk buffer."""
    cdef Py_ssize_t k
    for k in range(K):
        e[k] = E[k * c + i]


cdef inline const double* _cache_of(const Scratch* b, Py_ssize_t W, const double* eta_star,
                                   const int64_t* idx, Py_ssize_t i) noexcept nogil:
    """Datum ``idx[i]``'s cache: in the caller's cache ``eta_star``, else computed
    into the chunk's ``b.C``."""
    if eta_star != NULL:
        return eta_star + idx[i] * W
    return b.C + i * W


cdef inline double _weigh_row(double* dt, double* R, Py_ssize_t K, Py_ssize_t c, Py_ssize_t i,
                              double v, bint weighted, double w) noexcept nogil:
    """Datum i of a chunk of c: its term ``v`` and its K derivatives ``dt`` times
    its weight ``w`` (weighted models, ``dt`` in place), the derivatives into
    column i of the class-major ``R`` (K x c); returns the term."""
    cdef Py_ssize_t k
    if weighted:
        v *= w
        for k in range(K):
            dt[k] *= w
    for k in range(K):
        R[k * c + i] = dt[k]
    return v


cdef inline double _term(int order, Py_ssize_t K, int y, const double* e,
                         const double* cache, double* dt, double* p) noexcept nogil:
    """The term of one datum by order (log-likelihood for a negative order, else
    the residual); ``dt`` (if not NULL) its derivatives in eta."""
    if order < 0:
        return softmax_terms(K, y, e, dt, p)
    return softmax_residual(order, K, y, e, cache, dt)


def _softmax_residual_blocks(int order, y, eta, cache, Py_ssize_t block, bint want_dp=True):
    """``(D, DP)``: the residuals of the data (class ``y`` (n,), predictors ``eta``
    (n, K), caches ``cache`` (n, 2K + 1)) by ``softmax_residuals`` over blocks of
    ``block`` data, or datum by datum by ``softmax_residual`` (``block=0``); ``DP``
    is None without ``want_dp`` (tests)."""
    cdef double[::1] yv = np.ascontiguousarray(y, dtype=np.float64)
    cdef double[:, ::1] E = np.ascontiguousarray(eta, dtype=np.float64)
    cdef double[:, ::1] C = np.ascontiguousarray(cache, dtype=np.float64)
    cdef Py_ssize_t n = E.shape[0], K = E.shape[1], W = softmax_cache_width(K), s, c, i
    if yv.shape[0] != n or C.shape[0] != n or C.shape[1] != W or block < 0:
        raise ValueError("y (n,), eta (n, K) and cache (n, 2K + 1), block >= 0")
    cdef double[::1] D = np.zeros(n)
    cdef double[:, ::1] DP = np.zeros((n, K))
    cdef double* dp = &DP[0, 0] if want_dp and n else NULL
    with nogil:
        if block == 0:
            for i in range(n):
                D[i] = softmax_residual(order, K, <int> yv[i], &E[i, 0], &C[i, 0],
                                        NULL if dp == NULL else dp + i * K)
        else:
            s = 0
            while s < n:
                c = _imin(block, n - s)
                softmax_residuals(order, K, c, &yv[s], &E[s, 0], &C[s, 0], W, &D[s],
                                  NULL if dp == NULL else dp + s * K)
                s += c
    return np.asarray(D), (np.asarray(DP) if want_dp else None)


def _softmax_terms_blocks(y, eta, Py_ssize_t block):
    """``(L, R, P)``: the terms, derivatives and probabilities of the data (class
    ``y`` (n,), predictors ``eta`` (n, K)) by ``softmax_terms_block`` over blocks of
    ``block`` data, or datum by datum by ``softmax_terms`` (``block=0``) (tests)."""
    cdef double[::1] yv = np.ascontiguousarray(y, dtype=np.float64)
    cdef double[:, ::1] E = np.ascontiguousarray(eta, dtype=np.float64)
    cdef Py_ssize_t n = E.shape[0], K = E.shape[1], s, c, i
    if yv.shape[0] != n or block < 0:
        raise ValueError("y (n,) and eta (n, K), block >= 0")
    cdef double[::1] L = np.zeros(n)
    cdef double[:, ::1] R = np.zeros((n, K))
    cdef double[:, ::1] P = np.zeros((n, K))
    with nogil:
        if block == 0:
            for i in range(n):
                L[i] = softmax_terms(K, <int> yv[i], &E[i, 0], &R[i, 0], &P[i, 0])
        else:
            s = 0
            while s < n:
                c = _imin(block, n - s)
                softmax_terms_block(c, K, &yv[s], &E[s, 0], &L[s], &R[s, 0], &P[s, 0])
                s += c
    return np.asarray(L), np.asarray(R), np.asarray(P)


cdef class CyMultinomial(CyTermModel):
    """Compiled multinomial logistic regression over a :class:`Rows` object.

    Parameters
    ----------
    rows : Rows
        The design (``DenseRows(X, intercept)``).
    y : array-like of shape (n,)
        Class indices ``0 .. n_classes - 1``.
    n_classes : int
        ``K >= 2``.
    weight : array-like of shape (n,), optional
        Per-datum weights ``w_k >= 0`` (``sample_weight``): every term ``l_k``,
        residual, derivative in the predictors and curvature (the full pass's
        pair weights ``p_ka p_kb``) is ``w_k`` times the unweighted one, so an
        integer weight counts its row that many times. The control-variate
        cache (``cv_cache``: values at ``theta*``) is not weighted; the residuals
        computed from it are.
    """

    def __init__(self, Rows rows, y, Py_ssize_t n_classes, weight=None):
        if n_classes < 2:
            raise ValueError(f"multinomial regression needs n_classes >= 2, got {n_classes}")
        y = np.ascontiguousarray(y, dtype=np.float64)
        if y.shape != (rows.n_rows,):
            raise ValueError(f"y must have shape ({rows.n_rows},), got {y.shape}")
        if y.size and not (np.isfinite(y).all() and y.min() >= 0 and y.max() < n_classes
                           and np.all(y == np.round(y))):
            raise ValueError(f"y must hold class indices 0, 1, ..., {n_classes - 1}")
        self.rows = rows
        self.y = y
        self.n_classes = n_classes
        self.n_cols = rows.n_cols
        self.n_features = rows.n_features
        self.intercept = rows.intercept
        self.n_data = rows.n_rows
        self.n_params = n_classes * rows.n_cols
        self.cache_width = softmax_cache_width(n_classes)
        self.cv_cost = 1
        self._set_weight(weight)

    # ---- the loops over chunks of indices ------------------------------------------------
    cdef void _eta(self, const int64_t* idx, Py_ssize_t c, const double* theta,
                   double* E) noexcept nogil:
        """``E[k, i] = x_{idx[i]} . theta_k`` (class-major, K x c)."""
        cdef Py_ssize_t k, p1 = self.n_cols
        for k in range(self.n_classes):
            self.rows.dot(idx, c, theta + k * p1, E + k * c)

    cdef void _eta_range(self, Py_ssize_t s, Py_ssize_t c, const double* theta,
                         double* E) noexcept nogil:
        """``E[k, i] = x_{s + i} . theta_k`` (class-major, K x c)."""
        cdef Py_ssize_t k, p1 = self.n_cols
        for k in range(self.n_classes):
            self.rows.dot_range(s, s + c, theta + k * p1, E + k * c)

    cdef void _softmax_caches(self, const double* E, Py_ssize_t c, double* e,
                              double* out) noexcept nogil:
        """``out[i * W :]`` = the cache of the predictors ``E[:, i]`` (e: scratch)."""
        cdef Py_ssize_t i, K = self.n_classes, W = self.cache_width
        for i in range(c):
            _col(E, K, c, i, e)
            softmax_cache(K, e, out + i * W)

    cdef void _caches(self, Scratch* b, const double* theta_star, const int64_t* idx,
                      Py_ssize_t c) noexcept nogil:
        """``b.C[i]`` = the cache of datum ``idx[i]`` at theta_star (one more read)."""
        self._eta(idx, c, theta_star, b.E2)
        self._softmax_caches(b.E2, c, b.e2, b.C)

    cdef int _chunks(self, int kind, int order, const double* theta_star,
                     const double* eta_star, const double* theta, const double* theta_new,
                     const int64_t* idx, Py_ssize_t m, double* out, double* dt, double* grad,
                     double* total, const char* where) noexcept nogil:
        """The loop of ``_values`` (kind VALUES: out, dt), ``term_diffs`` (DIFFS: out)
        and ``term_grad_sum`` (GRAD: grad, total[0]) over chunks of at most
        MODEL_CHUNK indices in order, with one scratch block; a chunk's caches at
        theta_star are computed first when residuals need them and the caller has
        none. -1 (a MemoryError naming ``where``) if out of memory."""
        cdef Scratch b
        cdef Py_ssize_t K = self.n_classes, s = 0, c
        cdef double tsum = 0.0
        cdef double* mem
        if m > 0:
            mem = _scratch(&b, K, _imin(m, MODEL_CHUNK))
            if mem == NULL:
                return self._nomem(where)
            while s < m:
                c = _imin(MODEL_CHUNK, m - s)
                if order >= 0 and eta_star == NULL:
                    self._caches(&b, theta_star, idx + s, c)
                if kind == VALUES:
                    self._values_chunk(&b, order, eta_star, theta, idx + s, c, out + s,
                                       NULL if dt == NULL else dt + s * K)
                elif kind == DIFFS:
                    self._diffs_chunk(&b, order, eta_star, theta, theta_new, idx + s, c,
                                      out + s)
                else:
                    tsum = self._grad_chunk(&b, order, eta_star, theta, idx + s, c, grad,
                                            tsum)
                s += c
            free(mem)
        if total != NULL:
            total[0] = tsum
        return 0

    cdef void _values_chunk(self, Scratch* b, int order, const double* eta_star,
                            const double* theta, const int64_t* idx, Py_ssize_t c, double* t,
                            double* dt) noexcept nogil:
        """``_values`` of one chunk (caches in ``b.C`` if ``eta_star`` is NULL)."""
        cdef Py_ssize_t K = self.n_classes, W = self.cache_width, i, k
        cdef double w
        self._eta(idx, c, theta, b.E)
        for i in range(c):
            _col(b.E, K, c, i, b.e)
            t[i] = _term(order, K, <int> self.y[idx[i]], b.e, _cache_of(b, W, eta_star, idx, i),
                         NULL if dt == NULL else dt + i * K, b.p)
        if self.has_weight:
            self.weigh(idx, c, t)
            if dt != NULL:
                for i in range(c):
                    w = self.weight[idx[i]]
                    for k in range(K):
                        dt[i * K + k] *= w

    cdef void _diffs_chunk(self, Scratch* b, int order, const double* eta_star,
                           const double* theta, const double* theta_new, const int64_t* idx,
                           Py_ssize_t c, double* out) noexcept nogil:
        """``term_diffs`` of one chunk."""
        cdef Py_ssize_t K = self.n_classes, p1 = self.n_cols, W = self.cache_width, i, k
        cdef const double* cache
        cdef int y
        # both sets of K predictors from one read of each row per class
        for k in range(K):
            self.rows.dot2(idx, c, theta + k * p1, theta_new + k * p1, b.E + k * c,
                           b.E2 + k * c)
        for i in range(c):
            _col(b.E, K, c, i, b.e)
            _col(b.E2, K, c, i, b.e2)
            y = <int> self.y[idx[i]]
            cache = _cache_of(b, W, eta_star, idx, i)
            out[i] = (_term(order, K, y, b.e2, cache, NULL, b.p)
                      - _term(order, K, y, b.e, cache, NULL, b.p))
        self.weigh(idx, c, out)

    cdef double _grad_chunk(self, Scratch* b, int order, const double* eta_star,
                            const double* theta, const int64_t* idx, Py_ssize_t c,
                            double* grad, double tsum) noexcept nogil:
        """``term_grad_sum`` of one chunk: adds to ``grad``; returns ``tsum`` plus the
        chunk's terms (added one by one, in order)."""
        cdef Py_ssize_t K = self.n_classes, p1 = self.n_cols, W = self.cache_width, i, k
        cdef double v
        self._eta(idx, c, theta, b.E)
        for i in range(c):
            _col(b.E, K, c, i, b.e)
            v = _term(order, K, <int> self.y[idx[i]], b.e, _cache_of(b, W, eta_star, idx, i),
                      b.dt, b.p)
            tsum += _weigh_row(b.dt, b.R, K, c, i, v, self.has_weight,
                               self.row_weight(idx[i]))
        for k in range(K):
            self.rows.add_xt(idx, c, b.R + k * c, grad + k * p1)
        return tsum

    cdef int _values(self, int order, const double* theta_star, const double* eta_star,
                     const double* theta, const int64_t* idx, Py_ssize_t m, double* t,
                     double* dt) noexcept nogil:
        """``t[i]`` = the terms (by order) of ``idx[i]`` at theta; ``dt[i * K + k]``
        (if not NULL) their derivatives in ``eta_k`` (both times the datum's weight
        for a weighted model)."""
        return self._chunks(VALUES, order, theta_star, eta_star, theta, NULL, idx, m, t, dt,
                            NULL, NULL, "term_values")

    cdef int term_diffs(self, int order, const double* theta_star, const double* eta_star,
                        const double* theta, const double* theta_new, const int64_t* idx,
                        Py_ssize_t m, double* out) noexcept nogil:
        return self._chunks(DIFFS, order, theta_star, eta_star, theta, theta_new, idx, m, out,
                            NULL, NULL, NULL, "term_diffs")

    cdef int term_grad_sum(self, int order, const double* theta_star, const double* eta_star,
                           const double* theta, const int64_t* idx, Py_ssize_t m,
                           double* grad, double* total) noexcept nogil:
        memset(grad, 0, self.n_params * sizeof(double))
        return self._chunks(GRAD, order, theta_star, eta_star, theta, NULL, idx, m, NULL, NULL,
                            grad, total, "term_grad_sum")

    # ---- the full-data pass ---------------------------------------------------------------
    cdef Py_ssize_t _n_slots(self) noexcept nogil:
        """Slots of the full pass: a function of n alone (never of threads)."""
        return max(1, _imin(MAX_SLOTS, (self.n_data + PASS_CHUNK - 1) // PASS_CHUNK))

    cdef int _pass_range(self, Py_ssize_t start, Py_ssize_t stop, const double* theta,
                         double* ll, double* grad, double* G, int n_threads) noexcept nogil:
        """Rows ``[start, stop)`` in order: ``ll[0] = sum l``, ``grad += sum grad l``
        (if not NULL), and (if ``G`` is not NULL) for each pair of classes ``a > b``
        (pair ``q = a (a - 1) / 2 + b``) the lower triangle of ``G_q`` (row-major
        ``p1 x p1`` at ``G + q p1^2``) ``+= sum_k p_ka p_kb x_k x_k^T``, the pairs in
        up to ``n_threads`` threads (each pair's sum in row order: the same bits
        for any number). A weighted model multiplies each row's term, derivatives
        and pair weights by ``w_k``. Returns -1 if out of memory."""
        cdef Py_ssize_t K = self.n_classes, p1 = self.n_cols
        cdef Py_ssize_t Q = K * (K - 1) // 2 if G != NULL else 0
        # rows per step (the sums run over rows in order whatever it is)
        cdef Py_ssize_t step = HESS_CHUNK if G != NULL else MODEL_CHUNK
        cdef Py_ssize_t c0 = _imin(step, stop - start), s, c, i, k, a, bb, q
        cdef double* mem
        cdef double* Wq       # (Q, c): the pairs' weights p_ka p_kb, pair-major
        cdef double* ER       # (c, K) row-major: the predictors, then (c, K) derivatives,
        cdef double* RR       # (c, K) probabilities and (c,) terms of the chunk's rows
        cdef double* PP
        cdef double* LL
        cdef double llsum = 0.0, w
        cdef Scratch b
        mem = <double*> malloc((c0 * (5 * K + Q + 1)) * sizeof(double))
        if mem == NULL:
            return -1
        b.E = mem
        b.R = b.E + K * c0
        ER = b.R + K * c0
        RR = ER + K * c0
        PP = RR + K * c0
        LL = PP + K * c0
        Wq = LL + c0
        s = start
        while s < stop:
            c = _imin(step, stop - s)
            if not self.rows.dot_classes_range(s, s + c, theta, K, ER):
                self._eta_range(s, c, theta, b.E)
                for i in range(c):
                    for k in range(K):
                        ER[i * K + k] = b.E[k * c + i]
            # the chunk's terms, derivatives and probabilities (_simd_softmax.h)
            softmax_terms_block(c, K, &self.y[s], ER, LL, RR, PP)
            for i in range(c):
                w = self.row_weight(s + i) if self.has_weight else 1.0
                llsum += _weigh_row(RR + i * K, b.R, K, c, i, LL[i], self.has_weight, w)
                # (the pair weights: below)
                if Q:
                    q = 0
                    for a in range(1, K):
                        for bb in range(a):
                            Wq[q * c + i] = PP[i * K + a] * PP[i * K + bb]
                            q += 1
            if Q and self.has_weight:
                for q in range(Q):
                    self.weigh_range(s, c, Wq + q * c)
            if grad != NULL:
                for k in range(K):
                    self.rows.add_xt_range(s, s + c, b.R + k * c, grad + k * p1)
            if Q > 1 and n_threads > 1:
                for q in prange(Q, num_threads=n_threads, schedule="dynamic"):
                    self.rows.add_xwx_range(s, s + c, Wq + q * c, G + q * p1 * p1)
            else:
                for q in range(Q):
                    self.rows.add_xwx_range(s, s + c, Wq + q * c, G + q * p1 * p1)
            s += c
        free(mem)
        ll[0] = llsum
        return 0

    cdef int full_sums(self, const double* theta, double* ll, double* grad, double* hess,
                       int n_threads) noexcept nogil:
        """The fused pass over a fixed partition of the rows into slots, reduced in slot
        order (bit-identical for any n_threads); see the module notes for the Hessian.

        With the Hessian, the slots run one after the other, adding to one set of
        pair sums ``G_q`` (``K (K - 1) / 2`` matrices of ``p1 x p1``): the threads
        share each chunk's pairs, each pair summed by one thread in row order."""
        cdef Py_ssize_t n = self.n_data, P = self.n_params, K = self.n_classes
        cdef Py_ssize_t p1 = self.n_cols, Q = K * (K - 1) // 2
        cdef Py_ssize_t S = self._n_slots(), s, j, l, a, bb
        cdef bint want_g = grad != NULL, want_h = hess != NULL
        cdef Py_ssize_t gp = P if want_g else 0
        cdef double* ll_s = <double*> calloc(S, sizeof(double))
        cdef int* rc = <int*> calloc(S, sizeof(int))
        cdef double* g_s = <double*> calloc(S * gp + 1, sizeof(double))
        cdef double* G = <double*> calloc(Q * p1 * p1 if want_h else 1, sizeof(double))
        cdef double* Gq
        cdef double v
        cdef int failed = 0
        self._count_pass()
        if ll_s == NULL or rc == NULL or g_s == NULL or G == NULL:
            free(ll_s)
            free(rc)
            free(g_s)
            free(G)
            return self._nomem("full_sums")
        if n_threads > 1 and S > 1 and not want_h:
            for s in prange(S, schedule="dynamic", num_threads=n_threads):
                rc[s] = self._pass_range(s * n // S, (s + 1) * n // S, theta, ll_s + s,
                                         g_s + s * gp if want_g else NULL, NULL, 1)
        else:
            for s in range(S):
                rc[s] = self._pass_range(s * n // S, (s + 1) * n // S, theta, ll_s + s,
                                         g_s + s * gp if want_g else NULL,
                                         G if want_h else NULL, n_threads)
        for s in range(S):
            failed = failed | rc[s]
        if not failed:
            if ll != NULL:
                sum_slots(S, ll_s, 1, 1, ll)
            if want_g:
                sum_slots(S, g_s, gp, P, grad)
            if want_h:
                # the Hessian is minus the curvature: off-diagonal blocks (a, b) are
                # G_ab (pair a (a - 1) / 2 + b for a > b; symmetric, its lower triangle
                # stored)
                for a in range(1, K):
                    for bb in range(a):
                        Gq = G + (a * (a - 1) // 2 + bb) * p1 * p1
                        for j in range(p1):
                            for l in range(p1):
                                v = Gq[j * p1 + l] if l <= j else Gq[l * p1 + j]
                                hess[(a * p1 + j) * P + bb * p1 + l] = v
                                hess[(bb * p1 + l) * P + a * p1 + j] = v
                # diagonal blocks: -sum_{b != a} G_ab, in the order of b
                for a in range(K):
                    for j in range(p1):
                        for l in range(j + 1):
                            v = 0.0
                            for bb in range(K):
                                if bb < a:
                                    v += G[(a * (a - 1) // 2 + bb) * p1 * p1 + j * p1 + l]
                                elif bb > a:
                                    v += G[(bb * (bb - 1) // 2 + a) * p1 * p1 + j * p1 + l]
                            hess[(a * p1 + j) * P + a * p1 + l] = -v
                            hess[(a * p1 + l) * P + a * p1 + j] = -v
        free(ll_s)
        free(rc)
        free(g_s)
        free(G)
        if failed:
            return self._nomem("full_sums")
        return 0

    # ---- the control-variate cache ----------------------------------------------------------
    cdef int _cache_range(self, Py_ssize_t start, Py_ssize_t stop, const double* theta_star,
                          double* out) noexcept nogil:
        """``out[k * W : (k + 1) * W]`` = the cache of datum k, for k in [start, stop)
        (values at theta_star: never weighted; the residuals computed from it are)."""
        cdef Scratch b
        cdef Py_ssize_t s, c
        cdef double* mem = _scratch(&b, self.n_classes, _imin(MODEL_CHUNK, stop - start))
        if mem == NULL:
            return -1
        s = start
        while s < stop:
            c = _imin(MODEL_CHUNK, stop - s)
            self._eta_range(s, c, theta_star, b.E)
            self._softmax_caches(b.E, c, b.e, out + s * self.cache_width)
            s += c
        free(mem)
        return 0

    # ---- Python-callable extras ----------------------------------------------------------------
    def cv_cache(self, theta_star, n_threads=None):
        """The per-datum cache at ``theta_star`` (``2K + 1`` doubles per datum: the
        predictors, their softmax and its log-normaliser), flat, datum-major: the
        residual methods then read each datum once, at ``theta``. One pass over the
        data, in threads (default: the thread budget on large data; the values do not
        depend on it)."""
        cdef double[::1] ts = check_theta(self, theta_star, "theta_star")
        cdef Py_ssize_t n = self.n_data, n_chunks = (n + PASS_CHUNK - 1) // PASS_CHUNK, c
        cdef double[::1] out = np.empty(n * self.cache_width)
        cdef int nt, failed = 0
        if n_threads is None:
            from .._threads import available_cores, thread_budget
            nt = (thread_budget(available_cores())
                  if n * self.n_params >= 1_000_000 else 1)
        else:
            nt = max(1, int(n_threads))
        with nogil:
            if nt > 1 and n_chunks > 1:
                for c in prange(n_chunks, schedule="static", num_threads=nt):
                    failed += self._cache_range(c * PASS_CHUNK, _imin((c + 1) * PASS_CHUNK, n),
                                                &ts[0], &out[0]) != 0
            else:
                for c in range(n_chunks):
                    failed += self._cache_range(c * PASS_CHUNK, _imin((c + 1) * PASS_CHUNK, n),
                                                &ts[0], &out[0]) != 0
        if failed:
            raise MemoryError("CyMultinomial.cv_cache: cannot allocate scratch buffers")
        return np.asarray(out)

    def eta(self, theta, idx=None):
        """Linear predictors ``eta[i, c] = x_{idx[i]} . theta_c``, shape (m, K)."""
        cdef double[::1] th = check_theta(self, theta)
        cdef int64_t[::1] ix = check_indices(self, idx)
        cdef Py_ssize_t m = ix.shape[0]
        cdef double[:, ::1] E = np.empty((self.n_classes, m))
        if m:
            with nogil:
                self._eta(&ix[0], m, &th[0], &E[0, 0])
        return np.ascontiguousarray(np.asarray(E).T)

    def targets(self, idx=None):
        """Class indices ``y_k`` for ``k`` in ``idx`` (float64, a copy)."""
        return np.asarray(self.y)[check_indices(self, idx)]

    def term_derivatives(self, int order, theta_star, theta, idx=None, eta_star=None):
        """``(t, dt)``: the terms ``t_k`` (log-likelihood for a negative order, else the
        residuals of that order at ``theta_star``) and ``dt[i, c] = d t_{idx[i]} /
        d eta_c``, shape (m, K). The gradient of ``t_k`` is ``dt_k (x) x_k``. A
        weighted model's terms and derivatives are ``w_k`` times the unweighted."""
        return self._term_derivatives(order, theta_star, theta, idx, eta_star, self.n_classes)

    def grad_terms(self, theta, idx=None):
        """Per-datum gradients ``grad l_k(theta)``, shape (m, K * p1), class-major
        (weighted: ``w_k grad l_k``, from the weighted derivatives of
        :meth:`term_derivatives`)."""
        ix = check_indices(self, idx)
        _, r = self.term_derivatives(LOGLIK, None, theta, ix)
        X = self.gather(ix)
        return (r[:, :, None] * X[:, None, :]).reshape(len(ix), self.n_params)
