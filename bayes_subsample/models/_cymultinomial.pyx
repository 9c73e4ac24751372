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
from bayes_subsample.models._checks cimport check_cache, check_indices, check_theta, gather_rows
from bayes_subsample.models._cymodel cimport CyModel, MODEL_CHUNK, LOGLIK
from bayes_subsample.models._rows cimport Rows
from bayes_subsample.models._softmax_terms cimport (
    softmax_cache_width, softmax_terms, softmax_cache, softmax_residual)

cdef enum:
    # rows per task of cv_cache; a full pass has one slot (task) per PASS_CHUNK rows,
    # up to MAX_SLOTS slots of equal size
    PASS_CHUNK = 4096
    MAX_SLOTS = 64
    # rows per step of the pass with the Hessian: the class pairs' threads share
    # each step (1024 rows of 54 float64 values, 432 KB, stay in L2 for the pairs)
    HESS_CHUNK = 1024


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


cdef inline double _term(int order, Py_ssize_t K, int y, const double* e,
                         const double* cache, double* dt, double* p) noexcept nogil:
    """The term of one datum by order (log-likelihood for a negative order, else
    the residual); ``dt`` (if not NULL) its derivatives in eta."""
    if order < 0:
        return softmax_terms(K, y, e, dt, p)
    return softmax_residual(order, K, y, e, cache, dt)


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

    cdef int _nomem(self, const char* where) noexcept with gil:
        try:
            raise MemoryError(f"CyMultinomial.{where.decode()}: cannot allocate scratch "
                              "buffers")
        except MemoryError:
            return self._fail()

    # ---- the loops over chunks of indices ------------------------------------------------
    cdef void _eta(self, const int64_t* idx, Py_ssize_t c, const double* theta,
                   double* E) noexcept nogil:
        """``E[k, i] = x_{idx[i]} . theta_k`` (class-major, K x c)."""
        cdef Py_ssize_t k, p1 = self.n_cols
        for k in range(self.n_classes):
            self.rows.dot(idx, c, theta + k * p1, E + k * c)

    cdef void _caches(self, Scratch* b, const double* theta_star, const int64_t* idx,
                      Py_ssize_t c) noexcept nogil:
        """``b.C[i]`` = the cache of datum ``idx[i]`` at theta_star (one more read)."""
        cdef Py_ssize_t i, K = self.n_classes, W = self.cache_width
        self._eta(idx, c, theta_star, b.E2)
        for i in range(c):
            _col(b.E2, K, c, i, b.e2)
            softmax_cache(K, b.e2, b.C + i * W)

    cdef int _values(self, int order, const double* theta_star, const double* eta_star,
                     const double* theta, const int64_t* idx, Py_ssize_t m, double* t,
                     double* dt) noexcept nogil:
        """``t[i]`` = the terms (by order) of ``idx[i]`` at theta; ``dt[i * K + k]``
        (if not NULL) their derivatives in ``eta_k`` (both times the datum's weight
        for a weighted model)."""
        cdef Scratch b
        cdef Py_ssize_t K = self.n_classes, W = self.cache_width, s, c, i, k
        cdef double* mem
        cdef double w
        if m <= 0:
            return 0
        mem = _scratch(&b, K, _imin(m, MODEL_CHUNK))
        if mem == NULL:
            return self._nomem("term_values")
        s = 0
        while s < m:
            c = _imin(MODEL_CHUNK, m - s)
            if order >= 0 and eta_star == NULL:
                self._caches(&b, theta_star, idx + s, c)
            self._eta(idx + s, c, theta, b.E)
            for i in range(c):
                _col(b.E, K, c, i, b.e)
                t[s + i] = _term(order, K, <int> self.y[idx[s + i]], b.e,
                                 _cache_of(&b, W, eta_star, idx + s, i),
                                 NULL if dt == NULL else dt + (s + i) * K, b.p)
            if self.has_weight:
                self.weigh(idx + s, c, t + s)
                if dt != NULL:
                    for i in range(c):
                        w = self.weight[idx[s + i]]
                        for k in range(K):
                            dt[(s + i) * K + k] *= w
            s += c
        free(mem)
        return 0

    cdef int term_diffs(self, int order, const double* theta_star, const double* eta_star,
                        const double* theta, const double* theta_new, const int64_t* idx,
                        Py_ssize_t m, double* out) noexcept nogil:
        cdef Scratch b
        cdef Py_ssize_t K = self.n_classes, p1 = self.n_cols, W = self.cache_width, s, c, i, k
        cdef const double* cache
        cdef double* mem
        cdef int y
        if m <= 0:
            return 0
        mem = _scratch(&b, K, _imin(m, MODEL_CHUNK))
        if mem == NULL:
            return self._nomem("term_diffs")
        s = 0
        while s < m:
            c = _imin(MODEL_CHUNK, m - s)
            if order >= 0 and eta_star == NULL:
                self._caches(&b, theta_star, idx + s, c)
            # both sets of K predictors from one read of each row per class
            for k in range(K):
                self.rows.dot2(idx + s, c, theta + k * p1, theta_new + k * p1, b.E + k * c,
                               b.E2 + k * c)
            for i in range(c):
                _col(b.E, K, c, i, b.e)
                _col(b.E2, K, c, i, b.e2)
                y = <int> self.y[idx[s + i]]
                cache = _cache_of(&b, W, eta_star, idx + s, i)
                out[s + i] = (_term(order, K, y, b.e2, cache, NULL, b.p)
                              - _term(order, K, y, b.e, cache, NULL, b.p))
            self.weigh(idx + s, c, out + s)
            s += c
        free(mem)
        return 0

    cdef int term_grad_sum(self, int order, const double* theta_star, const double* eta_star,
                           const double* theta, const int64_t* idx, Py_ssize_t m,
                           double* grad, double* total) noexcept nogil:
        cdef Scratch b
        cdef Py_ssize_t K = self.n_classes, p1 = self.n_cols, W = self.cache_width, s, c, i, k
        cdef double tsum = 0.0, v, w
        cdef double* mem
        memset(grad, 0, self.n_params * sizeof(double))
        if m <= 0:
            if total != NULL:
                total[0] = 0.0
            return 0
        mem = _scratch(&b, K, _imin(m, MODEL_CHUNK))
        if mem == NULL:
            return self._nomem("term_grad_sum")
        s = 0
        while s < m:
            c = _imin(MODEL_CHUNK, m - s)
            if order >= 0 and eta_star == NULL:
                self._caches(&b, theta_star, idx + s, c)
            self._eta(idx + s, c, theta, b.E)
            for i in range(c):
                _col(b.E, K, c, i, b.e)
                v = _term(order, K, <int> self.y[idx[s + i]], b.e,
                          _cache_of(&b, W, eta_star, idx + s, i), b.dt, b.p)
                if self.has_weight:
                    # the weighted term and its derivatives
                    w = self.weight[idx[s + i]]
                    v *= w
                    for k in range(K):
                        b.dt[k] *= w
                tsum += v
                for k in range(K):
                    b.R[k * c + i] = b.dt[k]
            for k in range(K):
                self.rows.add_xt(idx + s, c, b.R + k * c, grad + k * p1)
            s += c
        free(mem)
        if total != NULL:
            total[0] = tsum
        return 0

    cdef void gather_rows(self, const int64_t* idx, Py_ssize_t m, double* X,
                          double* y) noexcept nogil:
        cdef Py_ssize_t i
        self.rows.gather(idx, m, X)
        for i in range(m):
            y[i] = self.y[idx[i]]

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
        cdef double llsum = 0.0, v, w
        cdef Scratch b
        mem = <double*> malloc((c0 * (2 * K + Q) + 3 * K) * sizeof(double))
        if mem == NULL:
            return -1
        b.E = mem
        b.R = b.E + K * c0
        b.e = b.R + K * c0
        b.dt = b.e + K
        b.p = b.dt + K
        Wq = b.p + K
        s = start
        while s < stop:
            c = _imin(step, stop - s)
            for k in range(K):
                self.rows.dot_range(s, s + c, theta + k * p1, b.E + k * c)
            for i in range(c):
                _col(b.E, K, c, i, b.e)
                v = softmax_terms(K, <int> self.y[s + i], b.e, b.dt, b.p)
                if self.has_weight:
                    # the weighted term and its derivatives (the pair weights: below)
                    w = self.weight[s + i]
                    v *= w
                    for k in range(K):
                        b.dt[k] *= w
                llsum += v
                for k in range(K):
                    b.R[k * c + i] = b.dt[k]
                if Q:
                    q = 0
                    for a in range(1, K):
                        for bb in range(a):
                            Wq[q * c + i] = b.p[a] * b.p[bb]
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
        cdef double total = 0.0, v
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
                for s in range(S):
                    total += ll_s[s]
                ll[0] = total
            if want_g:
                memset(grad, 0, P * sizeof(double))
                for s in range(S):
                    for j in range(P):
                        grad[j] += g_s[s * gp + j]
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
        cdef Py_ssize_t K = self.n_classes, p1 = self.n_cols, W = self.cache_width, s, c, i, k
        cdef double* mem = _scratch(&b, K, _imin(MODEL_CHUNK, stop - start))
        if mem == NULL:
            return -1
        s = start
        while s < stop:
            c = _imin(MODEL_CHUNK, stop - s)
            for k in range(K):
                self.rows.dot_range(s, s + c, theta_star + k * p1, b.E + k * c)
            for i in range(c):
                _col(b.E, K, c, i, b.e)
                softmax_cache(K, b.e, out + (s + i) * W)
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

    def gather(self, idx):
        """Rows ``x_k`` for ``k`` in ``idx`` as float64 (intercept column included)."""
        return gather_rows(self.rows, self, idx, self.n_cols)

    def targets(self, idx=None):
        """Class indices ``y_k`` for ``k`` in ``idx`` (float64, a copy)."""
        return np.asarray(self.y)[check_indices(self, idx)]

    def term_derivatives(self, int order, theta_star, theta, idx=None, eta_star=None):
        """``(t, dt)``: the terms ``t_k`` (log-likelihood for a negative order, else the
        residuals of that order at ``theta_star``) and ``dt[i, c] = d t_{idx[i]} /
        d eta_c``, shape (m, K). The gradient of ``t_k`` is ``dt_k (x) x_k``. A
        weighted model's terms and derivatives are ``w_k`` times the unweighted."""
        cdef double[::1] ts = None if order < 0 else check_theta(self, theta_star, "theta_star")
        cdef double[::1] th = check_theta(self, theta)
        cdef int64_t[::1] ix = check_indices(self, idx)
        cdef double[::1] es = check_cache(self, eta_star) if order >= 0 else None
        cdef Py_ssize_t m = ix.shape[0]
        cdef double[::1] t = np.empty(m)
        cdef double[:, ::1] dt = np.empty((m, self.n_classes))
        cdef int rc = 0
        if m:
            with nogil:
                rc = self._values(order, NULL if ts is None else &ts[0],
                                  NULL if es is None else &es[0], &th[0], &ix[0], m,
                                  &t[0], &dt[0, 0])
        if rc:
            self.raise_error()
        return np.asarray(t), np.asarray(dt)

    def grad_terms(self, theta, idx=None):
        """Per-datum gradients ``grad l_k(theta)``, shape (m, K * p1), class-major
        (weighted: ``w_k grad l_k``, from the weighted derivatives of
        :meth:`term_derivatives`)."""
        ix = check_indices(self, idx)
        _, r = self.term_derivatives(LOGLIK, None, theta, ix)
        X = self.gather(ix)
        return (r[:, :, None] * X[:, None, :]).reshape(len(ix), self.n_params)
