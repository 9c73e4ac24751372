# cython: language_level=3, auto_pickle=False
# auto_pickle=False: the pickling Cython generated for these classes crashed the
# interpreter (it reads their memoryviews); pickle now raises TypeError, and the
# models pickle by rebuilding their compiled objects (models/_base.py)
"""The subsampled potential of HMC with energy-conserving subsampling
(doc/algorithms/hmc_ecs.rst): the Taylor control-variate proxy plus the
difference estimator on a subsample, and the block update of the subsample.
The inner Hamiltonian kernel is the shared one of ``_hamiltonian.pyx``.

Three kinds of compiled model are served: the scalar GLMs (``CyGLM``),
multinomial logistic regression (``CyMultinomial``) and linear regression with
the noise's log scale sampled (``CyGaussianScale``). Their rows are read,
cached and evaluated by ``ECSRows`` (``_ecs_rows.pyx``), the one part that
knows which kind it reads; this module holds what is common: the estimator
(the residual sums, their variance, the per-row weights ``c_i`` of the
gradient) and the subsample update. A row has K residual derivatives (1 for
the GLMs, K classes for the multinomial model, 2 for the noise-scale model:
in eta and in the log scale), so the weights are an (m, K) matrix.

The subsample rows live in a ``RowBlock`` (their contiguous float64 copies,
targets and the cached control-variate constants at theta*), organised in
blocks of equal size: the G blocks of the perturbed estimator, or the m-row
batches of the signed block-Poisson estimator. Residuals are kept in two banks
(the position's and the trajectory's) so an accepted HMC move is a bank swap
and a one-block subsample update re-evaluates only that block. The cost per
iteration is ``m/G + L m`` per-datum evaluations whatever n is.

An exact stratum (rows summed exactly at every evaluation) of more than
``EXACT_CHUNK`` rows is summed in chunks of that many rows, in threads (the
chain's share of the cores, ``set_exact_threads``), the chunks' sums added in
their order: the sums, and so the draws, do not depend on the number of threads.

Rows read in place (``direct``): the subsample is kept as row indices only and
every evaluation reads the model's rows through its ``Rows``; the layout for
wide sparse data. Below order 2 the core keeps no ``p x p`` Hessian sum ``B``.
"""
cimport cython
import numpy as np
from libc.math cimport log, fabs, exp, isfinite
from libc.stdint cimport int64_t
from cython.parallel cimport prange
from bayes_subsample._rng cimport bitgen_t, get_bitgen, rng_index, rng_uniform_open
from bayes_subsample.models._cymodel cimport CyModel
from bayes_subsample.models._cyglm import CyGLM
from bayes_subsample.models._cymultinomial import CyMultinomial
from bayes_subsample.models._cylinear import CyGaussianScale
from bayes_subsample.samplers._ecs_rows cimport ECSRows, RowBlock
from bayes_subsample.models._rows cimport matvec
from bayes_subsample.samplers._hamiltonian cimport Potential


DEF MODE_PERTURBED = 0
DEF MODE_SIGNED = 1

MODES = {"perturbed": MODE_PERTURBED, "signed": MODE_SIGNED}

cdef enum:
    CHUNK = 1024

#: rows of the exact stratum summed as one chunk: a stratum of more rows is summed
#: chunk by chunk (in threads, ``set_exact_threads``), the chunks' sums added in
#: their order, so that the sums do not depend on the number of threads
EXACT_CHUNK = CHUNK

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
    cdef ECSRows src               # the model's rows (the kind of model behind them)
    cdef bint multi                # multinomial (the gradient is a K x p1 matrix)
    cdef readonly bint direct      # rows read in place (no gathered copy)
    cdef bint has_B                # the Hessian sum B is kept (order 2)
    cdef readonly int order, mode
    cdef readonly double n_data
    # linear predictors per row (1 for GLMs), columns per row (intercept
    # included), doubles of a row's multinomial cache (eta*, p*, lse*)
    cdef readonly Py_ssize_t K, p1, W
    cdef double[::1] prior_prec
    # reference point and its full-data sums
    cdef double[::1] theta_star, A
    cdef double[:, ::1] B
    cdef double L_star
    cdef bint has_reference
    # subsample rows and their cached constants
    cdef readonly Py_ssize_t n_blocks, block_size, m
    cdef int64_t[::1] idx
    cdef RowBlock sub
    # the model's row weights (sample_weight), copied with each buffered row
    cdef readonly bint weighted
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
    cdef RowBlock ex
    cdef double[::1] eD, eDP, eeta
    cdef double esum[2]
    cdef double[:, ::1] egrad      # (2, p): the exact rows' gradient per bank
    # the stratum's chunks of EXACT_CHUNK rows: their residual sums and gradients,
    # and the threads that evaluate them
    cdef readonly Py_ssize_t n_echunks
    cdef readonly int exact_threads
    cdef double[::1] csum
    cdef double[:, ::1] cgrad
    # proposal block (perturbed u-update)
    cdef int64_t[::1] pidx
    cdef RowBlock prop
    cdef double[::1] pD, pDP, peta

    def __init__(self, CyModel model, int order, prior_precision, mode="perturbed",
                 bint direct=False):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
        if order not in (0, 1, 2):
            raise ValueError(f"order must be 0, 1 or 2, got {order}")
        self.src = ECSRows(model, order, direct)
        self.multi = self.src.multi
        self.K = self.src.K
        self.weighted = self.src.weighted
        self.direct = direct
        self.p1 = self.src.p1
        self.W = self.src.W
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
        self.n_echunks = 0
        self.exact_threads = 1

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
        self.src.theta_star = self.theta_star
        with nogil:
            if self.m > 0:
                self.src.cache_rows(&self.idx[0], self.sub, self.m)
            if self.n_exact > 0:
                self.src.cache_rows(&self.eidx[0], self.ex, self.n_exact)

    cdef void _load_rows(self, const int64_t* idx, RowBlock b, Py_ssize_t count) noexcept nogil:
        """The rows ``idx[:count]`` into ``b``, with their constants at the reference
        point once there is one."""
        self.src.copy_rows(idx, b, count)
        if self.has_reference:
            self.src.cache_rows(idx, b, count)

    cdef Py_ssize_t _rows_available(self):
        return self.src.n_data

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
        self.ex = self.src.block(e)
        self.eD = np.empty(ec)
        self.eDP = np.empty(ec * K)
        self.eeta = np.empty(ec * K)
        self.cost = self.m + e
        self.esum[0] = 0.0
        self.esum[1] = 0.0
        self.egrad = np.zeros((2, self.dim))
        self.n_echunks = (e + CHUNK - 1) // CHUNK
        self.csum = np.zeros(max(self.n_echunks, 1))
        self.cgrad = np.zeros((max(self.n_echunks, 1), self.dim))
        if e:
            with nogil:
                self._load_rows(&self.eidx[0], self.ex, e)

    def set_exact_threads(self, int n_threads):
        """Evaluate the exact stratum's chunks of ``EXACT_CHUNK`` rows in
        ``n_threads`` threads (the sums do not depend on it)."""
        if n_threads < 1:
            raise ValueError(f"n_threads must be >= 1, got {n_threads}")
        self.exact_threads = n_threads

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
        """Read later rows from ``model`` (the same kind, width and weighting as
        before; the buffered subsample is kept) through the index stream ``idx``."""
        self.src.set_model(model)
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
        cdef Py_ssize_t m = idx.shape[0], K = self.K, mc = max(m, 1), bs = block_size
        self.m = m
        self.cost = m + self.n_exact
        self.block_size = block_size
        self.n_blocks = m // block_size
        self.idx = idx.copy()
        self.sub = self.src.block(m)
        self.D = np.zeros((2, mc))
        self.DP = np.zeros((2, mc * K))
        self.eta_buf = np.zeros(mc * K)
        self.cw = np.zeros(mc * K)
        # proposal block buffers (one block)
        self.pidx = np.empty(bs, dtype=np.int64)
        self.prop = self.src.block(bs)
        self.pD = np.empty(bs)
        self.pDP = np.empty(bs * K)
        self.peta = np.empty(bs * K)
        if m:
            with nogil:
                self._load_rows(&self.idx[0], self.sub, m)

    # ---- accessors --------------------------------------------------------------------
    @property
    def indices(self):
        return np.asarray(self.idx).copy()

    def block_sums(self):
        """Per-block sums ``S_b`` of the position's residuals (a copy)."""
        d = np.asarray(self.D[self.sb])[:self.m]
        return d.reshape(self.n_blocks, self.block_size).sum(axis=1) if self.m else np.zeros(0)

    # ---- nogil internals ----------------------------------------------------------------
    cdef double _evaluate(self, const double* th, int bank, double* gradU) noexcept nogil:
        """Evaluate every buffered row at th into ``bank``; returns U, writes grad U."""
        if self.n_exact > 0:
            # the subsample's residuals in the same threads as the stratum's chunks
            self._evaluate_exact(th, bank)
        elif self.m > 0:
            self._evaluate_sub(th, bank)
        return self._combine(th, bank, gradU)

    cdef void _evaluate_sub(self, const double* th, int bank) noexcept nogil:
        """The subsample's residuals at th to ``D[bank]``, ``DP[bank]``."""
        self.src.evaluate(&self.idx[0], self.sub, self.m, th, &self.eta_buf[0],
                          &self.D[bank, 0], &self.DP[bank, 0])

    cdef void _evaluate_exact(self, const double* th, int bank) noexcept nogil:
        """The exact stratum at th: the sum of its residuals to ``esum[bank]``,
        their gradient (weight 1 per row) to ``egrad[bank]``: each chunk's sums
        (in threads), added in the chunks' order; and the subsample's residuals
        (``_evaluate_sub``), the first of the threads' tasks (every task writes
        its own buffers: the same results in any thread)."""
        cdef Py_ssize_t c, j, nc = self.n_echunks, first = 0 if self.m > 0 else 1
        cdef double tot = 0.0
        if nc + 1 - first > 1 and self.exact_threads > 1:
            for c in prange(first, nc + 1, num_threads=self.exact_threads,
                            schedule="dynamic"):
                if c == 0:
                    self._evaluate_sub(th, bank)
                else:
                    self._exact_chunk(th, c - 1)
        else:
            if self.m > 0:
                self._evaluate_sub(th, bank)
            for c in range(nc):
                self._exact_chunk(th, c)
        for j in range(self.dim):
            self.egrad[bank, j] = 0.0
        for c in range(nc):
            tot += self.csum[c]
            for j in range(self.dim):
                self.egrad[bank, j] += self.cgrad[c, j]
        self.esum[bank] = tot

    cdef void _exact_chunk(self, const double* th, Py_ssize_t c) noexcept nogil:
        """Chunk ``c`` of the exact stratum at th: its residual sum to ``csum[c]``,
        its gradient to ``cgrad[c]`` (disjoint buffers: chunks run in threads)."""
        cdef Py_ssize_t s = c * CHUNK, K = self.K
        cdef Py_ssize_t cnt = min(<Py_ssize_t> CHUNK, self.n_exact - s)
        self.csum[c] = self.src.evaluate_part(&self.eidx[0], self.ex, s, cnt, th,
                                              &self.eeta[s * K], &self.eD[s],
                                              &self.eDP[s * K])
        self.src.grad_part(&self.eidx[0], self.ex, s, cnt, &self.eDP[s * K],
                           &self.cgrad[c, 0])

    cdef double _combine(self, const double* th, int bank, double* gradU) noexcept nogil:
        """Log-likelihood estimate and gradient from a bank's residuals; returns
        U = -(estimate + log prior) and writes grad U. Sets loglik_hat / sigma2 /
        sign / upart as a side product (``accept_last`` / ``reject_last`` decide
        whether they belong to the position)."""
        cdef Py_ssize_t j, l, b, i, k, p = self.dim, m = self.m, bs = self.block_size
        cdef Py_ssize_t K = self.K
        cdef double n = self.n_data, Q, dbar, ssd, r, stot = 0.0, lp = 0.0
        cdef double est, dh, a = self.a_const, sgn = 1.0, cn, sb_sum, f
        # Q(theta) and its gradient
        for j in range(p):
            self.delta[j] = th[j] - self.theta_star[j]
        Q = self.L_star
        if self.has_B:
            # gq = B delta first (row dots in a fixed order), then A + B delta
            matvec(&self.B[0, 0], p, &self.delta[0], &self.gq[0])
        else:
            for j in range(p):
                self.gq[j] = 0.0
        for j in range(p):
            r = self.gq[j]
            self.gq[j] = self.A[j] + r
            Q += self.delta[j] * (self.A[j] + 0.5 * r)
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
        # grad = gq + sum_i c_i (x) x_i (the rows' gradient with the weights c)
        for j in range(p):
            gradU[j] = 0.0
        if m > 0:
            self.src.grad(&self.idx[0], self.sub, m, &self.cw[0], gradU)
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
        cdef Py_ssize_t g, i, j, bs = self.block_size, m = self.m, K = self.K
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
            self.src.copy_rows(&self.pidx[0], self.prop, bs)
            self.src.cache_rows(&self.pidx[0], self.prop, bs)
            s_new = self.src.block_residuals(&self.pidx[0], self.prop, 0, bs, &self.theta[0],
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
                self.src.move_rows(self.sub, start, self.prop, bs)
                for i in range(bs):
                    self.idx[start + i] = self.pidx[i]
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
        cdef RowBlock rows = self.src.block(count)
        cdef double[::1] eta = np.empty(k * K)
        cdef double[::1] Dtmp = np.empty(k), DPtmp = np.empty(k * K)
        cdef double[::1] S = np.empty(nb)
        with nogil:
            if count:
                self.src.copy_rows(&iv[0], rows, count)
                self.src.cache_rows(&iv[0], rows, count)
            for b in range(nb):
                S[b] = self.src.block_residuals(&iv[0], rows, b * batch_size,
                                                (b + 1) * batch_size, &self.theta[0],
                                                &eta[b * batch_size * K], &Dtmp[b * batch_size],
                                                &DPtmp[b * batch_size * K])
        return np.asarray(S), np.asarray(Dtmp)[:count]
