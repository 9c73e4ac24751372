# cython: language_level=3, auto_pickle=False
# auto_pickle=False: the pickling Cython generated for these classes crashed the
# interpreter (it reads their memoryviews); pickle now raises TypeError, and the
# models pickle by rebuilding their compiled objects (models/_base.py)
"""The subsampled potential of HMC with energy-conserving subsampling for GLMs
(doc/algorithms/hmc_ecs.rst): the Taylor control-variate proxy plus the
difference estimator on a subsample, and the block update of the subsample.
The inner Hamiltonian kernel is the shared one of ``_hamiltonian.pyx``.

Three kinds of compiled model are served: the scalar GLMs (``CyGLM``: one linear
predictor per row), multinomial logistic regression (``CyMultinomial``: K
linear predictors per row, ``theta`` of shape (K, p1)) and linear regression
with the noise's log scale sampled (``CyGaussianScale``: one linear predictor
per row and the log scale, ``theta = (beta, t)``). The estimator (the
residual sums, their variance, the per-row weights ``c_i``) is common; a row's
residual derivative is then a K-vector and the weights a (m, K) matrix, and
the BLAS calls become matrix products (``eta = Xu Theta^T``, ``grad = C^T Xu``).
The noise-scale model has the GLMs' rows and products, with K = 2 derivatives
per row (in eta and in the log scale): the gradient's coefficients are
``Xu^T c_eta`` (the weights' even entries, a strided BLAS vector) and its last
entry ``sum c_tau``.

The subsample rows live in a contiguous float64 buffer ``Xu`` (intercept
column included, gathered by the model's ``Rows``), with their targets and
the cached control-variate constants at theta*, organised in blocks of equal
size: the G blocks of the perturbed estimator, or the m-row batches of the
signed block-Poisson estimator. An evaluation at theta is three passes over
this cache-resident buffer: ``eta = Xu theta`` (BLAS dgemv), the per-row
residuals ``d_i, d'_i`` (the model family's ``cv_terms``; the Taylor-series
path needs no exp/log near theta*), and ``grad = Xu^T c`` (dgemv) with the
per-row weights ``c_i`` of the estimator. Residuals are kept in two banks
(the position's and the trajectory's) so an accepted HMC move is a bank swap
and a one-block subsample update re-evaluates only that block. The cost per
iteration is ``m/G + L m`` per-datum evaluations whatever n is.

Rows read in place (``direct``): the subsample is kept as row indices only and
every evaluation reads the model's rows through its ``Rows`` (``dot``,
``add_xt``). A sparse (CSR) row then costs its stored entries instead of the
``p`` of a dense copy, and no ``m x p`` buffer exists: the layout for wide
sparse data. Below order 2 the core keeps no ``p x p`` Hessian sum ``B``.
"""
cimport cython
import numpy as np
from libc.math cimport log, fabs, exp, isfinite
from libc.stdint cimport int64_t
from bayes_subsample._rng cimport bitgen_t, get_bitgen, rng_index, rng_uniform_open
from bayes_subsample.models._cymodel cimport CyModel
from bayes_subsample.models._cyglm cimport CyGLM
from bayes_subsample.models._cymultinomial cimport CyMultinomial
from bayes_subsample.models._cylinear cimport CyGaussianScale
from bayes_subsample.models._scale_terms cimport ScaleConsts, scale_terms_block
from bayes_subsample.models._softmax_terms cimport softmax_cache, softmax_residual
from bayes_subsample.models._rows cimport Rows, row_dot
from bayes_subsample.samplers._hamiltonian cimport Potential
from scipy.linalg.cython_blas cimport dgemv, dgemm

DEF MODE_PERTURBED = 0
DEF MODE_SIGNED = 1

MODES = {"perturbed": MODE_PERTURBED, "signed": MODE_SIGNED}

#: the compiled models ECSCore serves (``model.compiled`` of the GLMs, the
#: multinomial model and the noise-scale linear regression)
SERVED = (CyGLM, CyMultinomial, CyGaussianScale)


@cython.final
cdef class ECSCore(Potential):
    """Subsampled potential ``U(theta) = -(lambda_hat(theta) + log p(theta))`` of a
    GLM, of multinomial logistic regression or of linear regression with the
    noise sampled (perturbed: ``lambda_hat = ell_hat - sigma2_hat / 2``; signed:
    ``log |L_hat|`` of the block-Poisson estimator, with its sign kept).

    Parameters
    ----------
    model : CyGLM, CyMultinomial or CyGaussianScale
        The compiled model (``model.compiled``).
    order : {0, 1, 2}
        Taylor order of the control variates.
    prior_precision : array-like of shape (p,)
    mode : {"perturbed", "signed"}
    direct : bool, default=False
        Read the subsample's rows in place through the model's ``Rows`` (GLMs and
        the noise-scale model; for sparse rows) instead of copying them into a
        dense buffer (BLAS).
    """

    # configuration
    cdef CyGLM glm                 # the model: one of these three
    cdef CyMultinomial mult
    cdef CyGaussianScale lin
    cdef Rows rows                 # the model's rows
    cdef bint multi
    cdef bint scale                # the noise-scale model (lin)
    cdef readonly bint direct      # rows read in place (no gathered copy)
    cdef bint has_B                # the Hessian sum B is kept (order 2)
    cdef readonly int order, mode
    cdef readonly double n_data
    cdef Py_ssize_t n_features
    cdef bint intercept
    # linear predictors per row (1 for GLMs), columns per row (intercept
    # included), doubles of a row's multinomial cache (eta*, p*, lse*)
    cdef readonly Py_ssize_t K, p1, W
    cdef double[::1] prior_prec
    # reference point and its full-data sums
    cdef double[::1] theta_star, A
    cdef double[:, ::1] B
    cdef double L_star
    cdef bint has_reference
    # subsample rows
    cdef readonly Py_ssize_t n_blocks, block_size, m
    cdef int64_t[::1] idx
    cdef double[:, ::1] Xu
    cdef double[::1] yu, es, c0, c1, c2       # GLMs: eta* and Taylor constants per row
    # the model's row weights (sample_weight), copied with each buffered row
    cdef readonly bint weighted
    cdef double[::1] wu, ewu, pwu
    cdef double[:, ::1] MC                    # multinomial: the cache per row (m, W)
    # residuals d_i and their derivatives d'_i in the row's K linear predictors, at
    # the position's and the trajectory's theta (two banks)
    cdef double[:, ::1] D, DP      # (2, m), (2, m K)
    cdef readonly int sb           # index of the position's bank
    cdef double[::1] eta_buf, cw   # per-row linear predictors and gradient weights (m K)
    # signed estimator constants
    cdef readonly double a_const, n_products
    # side products of the last evaluation, and those saved at ``begin``
    cdef readonly double loglik_hat, sigma2, sign
    cdef double upart              # the u-dependent part n dbar - sigma2/2 (perturbed)
    cdef double keep_loglik, keep_sigma2, keep_sign, keep_upart
    # scratch
    cdef double[::1] delta, gq
    # rows from a stream of indices drawn ahead (set_index_stream) instead of the RNG
    cdef int64_t[::1] stream
    cdef Py_ssize_t stream_pos
    cdef bint has_stream
    # the exact stratum: rows summed exactly at every evaluation (weight 1), the
    # subsample drawn from the other rows (``smap``) and scaled to their number
    cdef readonly Py_ssize_t n_exact
    cdef int64_t[::1] eidx, smap
    cdef bint has_map
    cdef double[:, ::1] eXu, eMC
    cdef double[::1] eyu, ees, ec0, ec1, ec2, eD, eDP, eeta
    cdef double esum[2]
    cdef double[:, ::1] egrad      # (2, p): the exact rows' gradient per bank
    # proposal block (perturbed u-update)
    cdef int64_t[::1] pidx
    cdef double[:, ::1] pXu, pMC
    cdef double[::1] pyu, pes, pc0, pc1, pc2, pD, pDP, peta

    def __init__(self, CyModel model, int order, prior_precision, mode="perturbed",
                 bint direct=False):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
        if order not in (0, 1, 2):
            raise ValueError(f"order must be 0, 1 or 2, got {order}")
        if isinstance(model, CyGLM):
            self.glm = model
            self.multi = False
            self.n_features = self.glm.n_features
            self.intercept = self.glm.intercept
            self.K = 1
        elif isinstance(model, CyGaussianScale):
            self.lin = model
            self.multi = False
            self.scale = True
            self.n_features = self.lin.n_features
            self.intercept = self.lin.intercept
            self.K = 2           # derivatives per row: in eta and in the log scale
        elif isinstance(model, CyMultinomial):
            self.mult = model
            self.multi = True
            self.n_features = self.mult.n_features
            self.intercept = self.mult.intercept
            self.K = self.mult.n_classes
        else:
            raise TypeError("ECSCore serves the compiled GLMs, multinomial regression and the "
                            f"noise-scale linear regression, got {type(model).__name__}")
        self.rows = model.rows
        self.weighted = model.has_weight
        if direct and self.multi:
            raise ValueError("direct row access serves the models with one linear predictor "
                             "per row (GLMs, the noise-scale linear regression)")
        self.direct = direct
        self.p1 = self.n_features + self.intercept
        self.W = 2 * self.K + 1
        self.order = order
        self.mode = MODES[mode]
        self.n_data = model.n_data
        self._alloc(model.n_params)
        self.prior_prec = np.ascontiguousarray(prior_precision, dtype=np.float64).copy()
        if self.prior_prec.shape[0] != self.dim:
            raise ValueError("prior_precision must have one entry per parameter")
        p = self.dim
        self.delta = np.zeros(p)
        self.gq = np.zeros(p)
        self.a_const = 0.0
        self.n_products = 1.0
        self.sign = 1.0
        self.sb = 0
        self.m = 0
        self.n_exact = 0
        self.esum[0] = 0.0
        self.esum[1] = 0.0
        self.egrad = np.zeros((2, p))

    # ---- configuration (with the GIL) -----------------------------------------------
    def set_reference(self, theta_star, double L_star, A, B=None):
        """New expansion point and its full-data sums (``B``, the Hessian sum, only
        at order 2; None below); recomputes the cached constants of every buffered
        row (call ``set_position`` afterwards)."""
        if B is None and self.order == 2:
            raise ValueError("order-2 control variates need the Hessian sum B")
        self.theta_star = np.ascontiguousarray(theta_star, dtype=np.float64).copy()
        self.L_star = L_star
        self.has_reference = True
        self.A = np.ascontiguousarray(A, dtype=np.float64).copy()
        self.has_B = self.order == 2
        self.B = np.ascontiguousarray(B, dtype=np.float64).copy() if self.has_B else None
        with nogil:
            if self.m > 0:
                self._cache_rows(&self.idx[0], self.Xu, self.es, self.c0, self.c1, self.c2,
                                 self.MC, self.m)
            if self.n_exact > 0:
                self._cache_rows(&self.eidx[0], self.eXu, self.ees, self.ec0, self.ec1,
                                 self.ec2, self.eMC, self.n_exact)

    cdef Py_ssize_t _rows_available(self):
        if self.scale:
            return self.lin.n_data
        return self.mult.n_data if self.multi else self.glm.n_data

    def set_population(self, double n):
        """The number of data ``n`` the estimator scales to, when the model this
        core reads rows from holds only some of them (rows fetched from a Dask
        array); default: all of the model's rows."""
        if not n >= self._rows_available():
            raise ValueError(f"the population ({n}) cannot be smaller than the rows held "
                             f"({self._rows_available()})")
        self.n_data = n

    def set_strata(self, exact, sampled):
        """Sum the rows ``exact`` exactly at every evaluation and draw the
        subsample from the rows ``sampled`` (the two disjoint, covering the data):
        ``ell_hat = Q + sum_{exact} d_k + (n_s / m) sum_{u} d_k`` with ``n_s =
        len(sampled)``, ``sigma2_hat`` from the sampled rows only. Later
        subsample rows (``set_rows``, the block updates) must come from
        ``sampled``; ``PerturbedUpdate`` / ``SignedUpdate`` draw them so."""
        if self.has_stream:
            raise ValueError("an exact stratum and an index stream do not combine")
        exact = np.ascontiguousarray(exact, dtype=np.int64)
        sampled = np.ascontiguousarray(sampled, dtype=np.int64)
        n = self._rows_available()
        if exact.ndim != 1 or sampled.ndim != 1:
            raise ValueError("exact and sampled must be 1-d arrays of row indices")
        if sampled.shape[0] == 0:
            raise ValueError("the sampled stratum is empty: nothing to subsample")
        if exact.shape[0] + sampled.shape[0] != n:
            raise ValueError(f"exact ({exact.shape[0]}) and sampled ({sampled.shape[0]}) "
                             f"rows must cover the {n} rows of the model once")
        seen = np.zeros(n, dtype=np.int8)
        for part in (exact, sampled):
            if part.shape[0] and (part.min() < 0 or part.max() >= n):
                raise IndexError("stratum index out of range of the model's rows")
            np.add.at(seen, part, 1)
        if not np.all(seen == 1):
            raise ValueError("exact and sampled must be disjoint and cover every row once")
        cdef Py_ssize_t e = exact.shape[0], ec = max(e, 1), K = self.K
        self.n_exact = e
        self.eidx = exact.copy() if e else np.zeros(1, dtype=np.int64)
        self.smap = sampled.copy()
        self.has_map = True
        self.n_data = sampled.shape[0]
        self.eXu = np.empty((1 if self.direct else ec, self.p1))
        self.eyu = np.empty(ec)
        self.ewu = np.empty(ec)
        g = 1 if self.multi else ec
        self.ees = np.empty(g)
        self.ec0 = np.empty(g)
        self.ec1 = np.empty(g)
        self.ec2 = np.empty(g)
        self.eMC = np.empty((ec if self.multi else 1, self.W if self.multi else 1))
        self.eD = np.empty(ec)
        self.eDP = np.empty(ec * K)
        self.eeta = np.empty(ec * K)
        self.cost = self.m + e
        self.esum[0] = 0.0
        self.esum[1] = 0.0
        self.egrad = np.zeros((2, self.dim))
        if e:
            with nogil:
                self._copy_rows(&self.eidx[0], self.eXu, self.eyu, self.ewu, e)
                if self.has_reference:
                    self._cache_rows(&self.eidx[0], self.eXu, self.ees, self.ec0, self.ec1,
                                     self.ec2, self.eMC, e)

    @property
    def exact_rows(self):
        """The rows summed exactly (a copy; empty without strata)."""
        return np.asarray(self.eidx)[:self.n_exact].copy() if self.n_exact else \
            np.zeros(0, dtype=np.int64)

    def set_index_stream(self, idx):
        """Take the rows of later block updates, in order, from ``idx`` (rows of
        the model, drawn ahead independently of the chain) instead of drawing them
        uniformly from ``[0, n)``."""
        if self.has_map:
            raise ValueError("an index stream and an exact stratum do not combine")
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        if idx.ndim != 1 or (idx.shape[0] and (idx.min() < 0
                                               or idx.max() >= self._rows_available())):
            raise IndexError("index stream out of range of the model's rows")
        self.stream = idx.copy()
        self.stream_pos = 0
        self.has_stream = True

    def set_source(self, CyModel model, idx):
        """Read later rows from ``model`` (the same kind and width as before; the
        buffered subsample is kept) through the index stream ``idx``."""
        if self.multi:
            if not (isinstance(model, CyMultinomial) and model.n_params == self.dim
                    and model.n_classes == self.K):
                raise TypeError("set_source needs a model of the same kind and width")
            self.mult = model
            self.rows = model.rows
        elif self.scale:
            if not (isinstance(model, CyGaussianScale) and model.n_params == self.dim):
                raise TypeError("set_source needs a model of the same kind and width")
            self.lin = model
            self.rows = model.rows
        else:
            if not (isinstance(model, CyGLM) and model.n_params == self.dim
                    and type(model) is type(self.glm)):
                raise TypeError("set_source needs a model of the same kind and width")
            self.glm = model
            self.rows = model.rows
        if model.has_weight != self.weighted:
            raise TypeError("set_source needs a model weighted as the first one was")
        self.set_index_stream(idx)

    @property
    def stream_left(self):
        """Indices left in the stream (-1 without a stream)."""
        return self.stream.shape[0] - self.stream_pos if self.has_stream else -1

    def set_signed(self, double a_const, double n_products):
        self.a_const = a_const
        self.n_products = n_products

    def set_rows(self, idx, Py_ssize_t block_size):
        """Load the subsample rows ``idx`` (blocks of ``block_size`` consecutive entries)."""
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        if block_size < 1 or idx.shape[0] % block_size:
            raise ValueError("the number of rows must be a multiple of block_size")
        if idx.shape[0] and (idx.min() < 0 or idx.max() >= self._rows_available()):
            raise IndexError("subsample index out of range")
        cdef Py_ssize_t m = idx.shape[0], p = self.p1, K = self.K
        cdef Py_ssize_t mc = max(m, 1), w = self.W if self.multi else 1
        cdef Py_ssize_t g = 1 if self.multi else mc   # GLM-only buffers: dummies for multinomial
        self.m = m
        self.cost = m + self.n_exact
        self.block_size = block_size
        self.n_blocks = m // block_size
        self.idx = idx.copy()
        cdef Py_ssize_t bs = block_size, bg = 1 if self.multi else bs
        self.Xu = np.empty((1 if self.direct else mc, p))
        self.yu = np.empty(mc)
        self.wu = np.empty(mc)
        self.es = np.empty(g)
        self.c0 = np.empty(g)
        self.c1 = np.empty(g)
        self.c2 = np.empty(g)
        self.MC = np.empty((mc if self.multi else 1, w))
        self.D = np.zeros((2, mc))
        self.DP = np.zeros((2, mc * K))
        self.eta_buf = np.zeros(mc * K)
        self.cw = np.zeros(mc * K)
        # proposal block buffers (one block)
        self.pidx = np.empty(bs, dtype=np.int64)
        self.pXu = np.empty((1 if self.direct else bs, p))
        self.pyu = np.empty(bs)
        self.pwu = np.empty(bs)
        self.pes = np.empty(bg)
        self.pc0 = np.empty(bg)
        self.pc1 = np.empty(bg)
        self.pc2 = np.empty(bg)
        self.pMC = np.empty((bs if self.multi else 1, w))
        self.pD = np.empty(bs)
        self.pDP = np.empty(bs * K)
        self.peta = np.empty(bs * K)
        if m:
            with nogil:
                self._copy_rows(&self.idx[0], self.Xu, self.yu, self.wu, m)
                if self.has_reference:
                    self._cache_rows(&self.idx[0], self.Xu, self.es, self.c0, self.c1, self.c2,
                                     self.MC, m)

    # ---- accessors --------------------------------------------------------------------
    @property
    def indices(self):
        return np.asarray(self.idx).copy()

    def block_sums(self):
        """Per-block sums ``S_b`` of the position's residuals (a copy)."""
        d = np.asarray(self.D[self.sb])[:self.m]
        return d.reshape(self.n_blocks, self.block_size).sum(axis=1) if self.m else np.zeros(0)

    # ---- nogil internals ----------------------------------------------------------------
    cdef void _copy_rows(self, const int64_t* idx, double[:, ::1] Xdst, double[::1] ydst,
                         double[::1] wdst, Py_ssize_t count) noexcept nogil:
        """The rows' targets to ``ydst``, their weights to ``wdst`` (weighted
        models) and (unless ``direct``) the rows to ``Xdst``."""
        cdef Py_ssize_t i
        if self.weighted:
            for i in range(count):
                wdst[i] = self._source_weight(idx[i])
        if self.direct:
            for i in range(count):
                ydst[i] = self.lin.y[idx[i]] if self.scale else self.glm.target(idx[i])
        elif self.multi:
            self.mult.gather_rows(idx, count, &Xdst[0, 0], &ydst[0])
        elif self.scale:
            self.lin.gather_rows(idx, count, &Xdst[0, 0], &ydst[0])
        else:
            self.glm.gather_rows(idx, count, &Xdst[0, 0], &ydst[0])

    cdef void _cache_rows(self, const int64_t* idx, double[:, ::1] Xs, double[::1] es,
                          double[::1] c0, double[::1] c1, double[::1] c2, double[:, ::1] MC,
                          Py_ssize_t count) noexcept nogil:
        """The rows' constants at theta* (GLMs: eta*, c0, c1, c2; multinomial: the
        cache eta*, p*, lse* of ``_softmax_terms``; the noise-scale model: eta*);
        ``idx``: the rows (read in place when ``direct``), ``Xs`` their copies
        otherwise."""
        cdef Py_ssize_t i, k, p1 = self.p1, K = self.K
        if self.multi:
            for i in range(count):
                for k in range(K):
                    MC[i, k] = row_dot(&Xs[i, 0], &self.theta_star[k * p1], p1, False)
                softmax_cache(K, &MC[i, 0], &MC[i, 0])
            return
        if self.direct:
            self.rows.dot(idx, count, &self.theta_star[0], &es[0])
        else:
            for i in range(count):
                es[i] = row_dot(&Xs[i, 0], &self.theta_star[0], p1, False)
        if not self.scale:
            self.glm.add_offset(idx, count, &es[0])
            self.glm.cv_consts(count, &es[0], &c0[0], &c1[0], &c2[0])

    # ---- rows with one linear predictor (the GLMs, the noise-scale model) ----------------
    cdef void _row_eta(self, const int64_t* idx, double[:, ::1] Xs, Py_ssize_t count,
                       const double* th, double* eta) noexcept nogil:
        """``eta[i] = x_i . theta`` of ``count`` rows: read in place (``direct``), or
        from their copies ``Xs`` by BLAS (``Xs`` (count x p, row-major) is a
        column-major p x count matrix; BLAS reads its first d rows, the features,
        and the intercept is added here)."""
        cdef int pp = <int> self.p1, dd = <int> self.n_features, cc = <int> count, one = 1
        cdef double alpha = 1.0, beta = 0.0
        cdef char trans = b'T'
        cdef Py_ssize_t i
        if self.direct:
            self.rows.dot(idx, count, th, eta)
        else:
            dgemv(&trans, &dd, &cc, &alpha, &Xs[0, 0], &pp, <double*> th, &one, &beta, eta,
                  &one)
            if self.intercept:
                for i in range(count):
                    eta[i] += th[dd]
        if not self.scale:
            self.glm.add_offset(idx, count, eta)

    cdef inline double _source_weight(self, int64_t k) noexcept nogil:
        if self.scale:
            return self.lin.row_weight(k)
        return self.mult.row_weight(k) if self.multi else self.glm.row_weight(k)

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

    cdef void _row_grad(self, const int64_t* idx, double[:, ::1] Xs, Py_ssize_t count,
                        double* c, double* out) noexcept nogil:
        """``out[:dim] = sum_i (c[i K] x_i, c[i K + 1])``: the gradient of ``count`` rows
        with weights ``c`` (K per row; the second, the noise-scale model's weight in
        its log scale, is the last entry). Direct rows compact ``c`` in place."""
        cdef int pp = <int> self.p1, dd = <int> self.n_features, cc = <int> count, one = 1
        cdef int kk = <int> self.K
        cdef double alpha = 1.0, beta = 0.0, csum = 0.0
        cdef char notrans = b'N'
        cdef Py_ssize_t i, K = self.K
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
            self.rows.add_xt(idx, count, c, out)
            return
        dgemv(&notrans, &dd, &cc, &alpha, &Xs[0, 0], &pp, c, &kk, &beta, out, &one)
        if self.intercept:
            for i in range(count):
                csum += c[i * K]
            out[dd] = csum

    cdef double _block_residuals(self, const int64_t* idx, double[:, ::1] Xs, double[::1] ys,
                                 double[::1] ws, double[::1] es,
                                 double[::1] c0, double[::1] c1, double[::1] c2,
                                 double[:, ::1] MC, Py_ssize_t start, Py_ssize_t stop,
                                 const double* th, double* eta, double* Dout,
                                 double* DPout) noexcept nogil:
        """Residuals of rows [start, stop) at th (row-by-row dot products, for
        small blocks): d_i to Dout[i - start], d'_i (K values) to DPout[(i -
        start) K:]; returns sum d_i."""
        cdef Py_ssize_t i, k, p1 = self.p1, K = self.K
        cdef double s = 0.0
        if not self.multi:
            if self.direct:
                self.rows.dot(idx + start, stop - start, th, eta)
            else:
                for i in range(start, stop):
                    eta[i - start] = row_dot(&Xs[i, 0], th, p1, False)
            if not self.scale:
                self.glm.add_offset(idx + start, stop - start, eta)
            return self._row_terms(th, stop - start, &ys[start], &ws[start], eta, &es[start],
                                   &c0[start], &c1[start], &c2[start], Dout, DPout)
        for i in range(start, stop):
            for k in range(K):
                eta[(i - start) * K + k] = row_dot(&Xs[i, 0], th + k * p1, p1, False)
            Dout[i - start] = softmax_residual(self.order, K, <int> ys[i],
                                               &eta[(i - start) * K], &MC[i, 0],
                                               &DPout[(i - start) * K])
        return self._weigh_rows(stop - start, &ws[start], Dout, DPout)

    cdef double _evaluate(self, const double* th, int bank, double* gradU) noexcept nogil:
        """Evaluate every buffered row at th into ``bank``; returns U, writes grad U."""
        cdef int pp = <int> self.p1, mm = <int> self.m
        cdef int kk = <int> self.K
        cdef double alpha = 1.0, beta = 0.0
        cdef char trans = b'T', notrans = b'N'
        cdef Py_ssize_t i, K = self.K
        if self.n_exact > 0:
            self._evaluate_exact(th, bank)
        if self.m == 0:
            return self._combine(th, bank, gradU)
        if self.multi:
            # eta (m x K, row-major) = Xu Theta^T: in BLAS's column-major terms the
            # K x m matrix Theta (p1 x K) ^T Xu^T (p1 x m), intercept column included
            dgemm(&trans, &notrans, &kk, &mm, &pp, &alpha, <double*> th, &pp, &self.Xu[0, 0],
                  &pp, &beta, &self.eta_buf[0], &kk)
            for i in range(self.m):
                self.D[bank, i] = softmax_residual(self.order, K, <int> self.yu[i],
                                                   &self.eta_buf[i * K], &self.MC[i, 0],
                                                   &self.DP[bank, i * K])
            if self.weighted:
                self._weigh_rows(self.m, &self.wu[0], &self.D[bank, 0], &self.DP[bank, 0])
            return self._combine(th, bank, gradU)
        self._row_eta(&self.idx[0], self.Xu, self.m, th, &self.eta_buf[0])
        self._row_terms(th, self.m, &self.yu[0], &self.wu[0], &self.eta_buf[0], &self.es[0],
                        &self.c0[0],
                        &self.c1[0], &self.c2[0], &self.D[bank, 0], &self.DP[bank, 0])
        return self._combine(th, bank, gradU)

    cdef void _evaluate_exact(self, const double* th, int bank) noexcept nogil:
        """The exact stratum at th: the sum of its residuals to ``esum[bank]``,
        their gradient (weight 1 per row) to ``egrad[bank]``."""
        cdef int pp = <int> self.p1, ee = <int> self.n_exact
        cdef int kk = <int> self.K
        cdef double alpha = 1.0, beta = 0.0, s = 0.0
        cdef char trans = b'T', notrans = b'N'
        cdef Py_ssize_t i, e = self.n_exact
        if not self.multi:
            self._row_eta(&self.eidx[0], self.eXu, e, th, &self.eeta[0])
            self.esum[bank] = self._row_terms(th, e, &self.eyu[0], &self.ewu[0], &self.eeta[0],
                                              &self.ees[0],
                                              &self.ec0[0], &self.ec1[0], &self.ec2[0],
                                              &self.eD[0], &self.eDP[0])
            self._row_grad(&self.eidx[0], self.eXu, e, &self.eDP[0], &self.egrad[bank, 0])
            return
        dgemm(&trans, &notrans, &kk, &ee, &pp, &alpha, <double*> th, &pp,
              &self.eXu[0, 0], &pp, &beta, &self.eeta[0], &kk)
        for i in range(e):
            self.eD[i] = softmax_residual(self.order, self.K, <int> self.eyu[i],
                                          &self.eeta[i * self.K], &self.eMC[i, 0],
                                          &self.eDP[i * self.K])
        s = self._weigh_rows(e, &self.ewu[0], &self.eD[0], &self.eDP[0])
        # gradient: the K x p1 matrix eDP^T eXu
        dgemm(&notrans, &trans, &pp, &kk, &ee, &alpha, &self.eXu[0, 0], &pp,
              &self.eDP[0], &kk, &beta, &self.egrad[bank, 0], &pp)
        self.esum[bank] = s

    cdef double _combine(self, const double* th, int bank, double* gradU) noexcept nogil:
        """Log-likelihood estimate and gradient from a bank's residuals; returns
        U = -(estimate + log prior) and writes grad U. Sets loglik_hat / sigma2 /
        sign / upart as a side product (``accept_last`` / ``reject_last`` decide
        whether they belong to the position)."""
        cdef Py_ssize_t j, l, b, i, k, p = self.dim, m = self.m, bs = self.block_size
        cdef Py_ssize_t K = self.K
        cdef double n = self.n_data, Q, dbar, ssd, r, stot = 0.0, lp = 0.0
        cdef double est, dh, a = self.a_const, sgn = 1.0, cn, sb_sum, f
        cdef int pp = <int> self.p1, mm = <int> m, kk = <int> K
        cdef double alpha = 1.0, beta = 0.0
        cdef char notrans = b'N', trans = b'T'
        # Q(theta) and its gradient
        for j in range(p):
            self.delta[j] = th[j] - self.theta_star[j]
        Q = self.L_star
        for j in range(p):
            r = self.A[j]
            if self.has_B:
                for l in range(p):
                    r += self.B[j, l] * self.delta[l]
            self.gq[j] = r
            Q += self.delta[j] * (self.A[j] + 0.5 * (r - self.A[j]))
        for i in range(m):
            stot += self.D[bank, i]
        dbar = stot / m if m > 0 else 0.0
        ssd = 0.0
        for i in range(m):
            r = self.D[bank, i] - dbar
            ssd += r * r
        if self.mode == MODE_PERTURBED:
            self.sigma2 = (n / m) * (n / m) * ssd
            self.upart = n * dbar - 0.5 * self.sigma2
            est = Q + self.upart
            cn = (n / m) * (n / m)
            for i in range(m):
                f = n / m - cn * (self.D[bank, i] - dbar)
                for k in range(K):
                    self.cw[i * K + k] = self.DP[bank, i * K + k] * f
        else:
            # block-Poisson: log|L| = Q + a + lambda + sum_b [log|dhat_b - a| - log lambda]
            est = Q + a + self.n_products
            cn = n / bs if bs > 0 else 0.0
            for b in range(self.n_blocks):
                sb_sum = 0.0
                for i in range(b * bs, (b + 1) * bs):
                    sb_sum += self.D[bank, i]
                dh = cn * sb_sum - a
                if dh < 0:
                    sgn = -sgn
                est += log(fabs(dh)) - log(self.n_products)
                for i in range(b * bs * K, (b + 1) * bs * K):
                    self.cw[i] = cn * self.DP[bank, i] / dh
            self.sign = sgn
            # variance of dhat (Gaussian approximation) over lambda: V[log|L|] ~ s2 / lambda
            self.sigma2 = (n * n / bs if bs > 0 else 0.0) * \
                (ssd / (m - 1.0) if m > 1 else 0.0) / self.n_products
        if self.n_exact > 0:
            est += self.esum[bank]
        self.loglik_hat = est
        # grad = gq + Xu^T c (features by BLAS, the intercept's entry is sum c;
        # multinomial: the K x p1 matrix C^T Xu, in BLAS's terms Xu^T (p1 x m) C (m x K))
        for j in range(p):
            gradU[j] = 0.0
        if m > 0 and self.multi:
            dgemm(&notrans, &trans, &pp, &kk, &mm, &alpha, &self.Xu[0, 0], &pp, &self.cw[0],
                  &kk, &beta, gradU, &pp)
        elif m > 0:
            self._row_grad(&self.idx[0], self.Xu, m, &self.cw[0], gradU)
        if self.n_exact > 0:
            for j in range(p):
                gradU[j] += self.egrad[bank, j]
        for j in range(p):
            lp -= 0.5 * self.prior_prec[j] * th[j] * th[j]
            gradU[j] = -(self.gq[j] + gradU[j]) + self.prior_prec[j] * th[j]
        return -(est + lp)

    # ---- the Potential interface (the inner Hamiltonian kernel) ---------------------------
    cdef void begin(self) noexcept nogil:
        self.keep_loglik = self.loglik_hat
        self.keep_sigma2 = self.sigma2
        self.keep_sign = self.sign
        self.keep_upart = self.upart

    cdef double evaluate(self, const double* theta, double* grad) noexcept nogil:
        return self._evaluate(theta, 1 - self.sb, grad)

    cdef void accept_last(self) noexcept nogil:
        self.sb = 1 - self.sb

    cdef void reject_last(self) noexcept nogil:
        # the trajectory bank's side products do not belong to the position
        self.loglik_hat = self.keep_loglik
        self.sigma2 = self.keep_sigma2
        self.sign = self.keep_sign
        self.upart = self.keep_upart

    # ---- the block update of the subsample (perturbed) -----------------------------------
    def u_step(self, generator):
        """Refresh one block of the subsample with a pseudo-marginal MH step at
        the position (perturbed estimator).

        Returns ``(accepted, alpha_u, n_evals)``.
        """
        if self.mode != MODE_PERTURBED:
            raise RuntimeError("u_step is for the perturbed estimator")
        if self.m == 0:
            raise RuntimeError("no subsample rows: call set_rows first")
        cdef bitgen_t* bg = get_bitgen(generator)
        cdef Py_ssize_t g, i, j, bs = self.block_size, m = self.m, p = self.p1, K = self.K
        cdef Py_ssize_t sb = self.sb, start
        cdef double s_new, stot = 0.0, dbar_new, ssd = 0.0, r, n = self.n_data
        cdef double sigma2_new, est_new, log_ratio, log_u, alpha
        cdef bint accepted = False
        cdef bint from_stream = self.has_stream
        if from_stream and self.stream.shape[0] - self.stream_pos < bs:
            raise RuntimeError("the index stream is exhausted: set_source with more rows")
        with generator.bit_generator.lock, nogil:
            g = rng_index(bg, self.n_blocks)
            if from_stream:
                for i in range(bs):
                    self.pidx[i] = self.stream[self.stream_pos + i]
                self.stream_pos += bs
            elif self.has_map:
                for i in range(bs):
                    self.pidx[i] = self.smap[rng_index(bg, <int64_t> self.smap.shape[0])]
            else:
                for i in range(bs):
                    self.pidx[i] = rng_index(bg, <int64_t> n)
            log_u = log(rng_uniform_open(bg))
            self._copy_rows(&self.pidx[0], self.pXu, self.pyu, self.pwu, bs)
            self._cache_rows(&self.pidx[0], self.pXu, self.pes, self.pc0, self.pc1, self.pc2,
                             self.pMC, bs)
            s_new = self._block_residuals(&self.pidx[0], self.pXu, self.pyu, self.pwu,
                                          self.pes, self.pc0, self.pc1, self.pc2, self.pMC, 0, bs, &self.theta[0],
                                          &self.peta[0], &self.pD[0], &self.pDP[0])
            start = g * bs
            for i in range(m):
                if i < start or i >= start + bs:
                    stot += self.D[sb, i]
            stot += s_new
            dbar_new = stot / m
            for i in range(m):
                if start <= i < start + bs:
                    r = self.pD[i - start] - dbar_new
                else:
                    r = self.D[sb, i] - dbar_new
                ssd += r * r
            sigma2_new = (n / m) * (n / m) * ssd
            # only n*dbar - sigma2/2 changes with u (Q(theta) is common)
            est_new = n * dbar_new - 0.5 * sigma2_new
            log_ratio = est_new - self.upart
            alpha = 1.0 if log_ratio >= 0 else exp(log_ratio)
            if isfinite(log_ratio) and log_u < log_ratio:
                accepted = True
                for i in range(bs):
                    self.idx[start + i] = self.pidx[i]
                    if not self.direct:
                        for j in range(p):
                            self.Xu[start + i, j] = self.pXu[i, j]
                    self.yu[start + i] = self.pyu[i]
                    if self.weighted:
                        self.wu[start + i] = self.pwu[i]
                    if self.multi:
                        for j in range(self.W):
                            self.MC[start + i, j] = self.pMC[i, j]
                    else:
                        self.es[start + i] = self.pes[i]
                        self.c0[start + i] = self.pc0[i]
                        self.c1[start + i] = self.pc1[i]
                        self.c2[start + i] = self.pc2[i]
                    self.D[sb, start + i] = self.pD[i]
                    for j in range(K):
                        self.DP[sb, (start + i) * K + j] = self.pDP[i * K + j]
                self.U = self._combine(&self.theta[0], sb, &self.grad[0])
            if not isfinite(alpha):
                alpha = 0.0
        return accepted, alpha, bs

    # ---- signed estimator: batch statistics for the u-update (with the GIL) ------------
    def batch_stats(self, idx, Py_ssize_t batch_size):
        """Residual sums ``S_b`` of candidate batches of rows ``idx`` at the
        position (signed u-update); returns ``(S (n_batches,), d (len(idx),))``."""
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        cdef Py_ssize_t count = idx.shape[0], nb = count // batch_size, b
        cdef int64_t[::1] iv = idx if count else np.zeros(1, dtype=np.int64)
        cdef Py_ssize_t k = max(count, 1), K = self.K
        cdef double[:, ::1] Xs = np.empty((1 if self.direct else k, self.p1))
        cdef double[::1] ys = np.empty(k), ws = np.empty(k), es = np.empty(k)
        cdef double[::1] eta = np.empty(k * K)
        cdef double[::1] c0 = np.empty(k), c1 = np.empty(k), c2 = np.empty(k)
        cdef double[:, ::1] MC = np.empty((k if self.multi else 1, self.W))
        cdef double[::1] Dtmp = np.empty(k), DPtmp = np.empty(k * K)
        cdef double[::1] S = np.empty(nb)
        with nogil:
            if count:
                self._copy_rows(&iv[0], Xs, ys, ws, count)
                self._cache_rows(&iv[0], Xs, es, c0, c1, c2, MC, count)
            for b in range(nb):
                S[b] = self._block_residuals(&iv[0], Xs, ys, ws, es, c0, c1, c2, MC,
                                             b * batch_size,
                                             (b + 1) * batch_size, &self.theta[0],
                                             &eta[b * batch_size * K], &Dtmp[b * batch_size],
                                             &DPtmp[b * batch_size * K])
        return np.asarray(S), np.asarray(Dtmp)[:count]
