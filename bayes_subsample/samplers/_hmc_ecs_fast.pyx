# cython: language_level=3
"""Compiled core of HMC with energy-conserving subsampling for GLMs
(ALGORITHMS.md §1.2-1.3, §4.1-4.2).

The subsample rows live in contiguous float64 buffers (``Xu``, ``yu`` and the
cached control-variate constants at theta*), organised in blocks of equal
size: the G blocks of the perturbed estimator, or the m-row batches of the
signed block-Poisson estimator. An evaluation at theta is three passes over
this cache-resident buffer: ``eta = Xu theta`` (BLAS dgemv), the per-row
residuals ``d_i, d'_i`` (a scalar loop; the Taylor-series path needs no
exp/log near theta*), and ``grad = Xu^T c`` (dgemv) with the per-row weights
``c_i`` of the estimator. Residuals are kept in two banks (the state's and
the trajectory's) so an accepted HMC move is a bank swap and a one-block
subsample update re-evaluates only that block. The u-update and the whole
HMC trajectory each run inside one ``nogil`` block; the cost per iteration
is ``m/G + L m`` per-datum evaluations whatever n is.
"""
import numpy as np
from libc.math cimport log, fabs, sqrt, exp, isfinite, INFINITY
from libc.stdint cimport int64_t
from bayes_subsample._rng cimport (bitgen_t, get_bitgen, rng_index, rng_normal,
                                   rng_uniform_open)
from bayes_subsample.models._glm_terms cimport cv_consts, cv_residual_cached
from scipy.linalg.cython_blas cimport dgemv

DEF MODE_PERTURBED = 0
DEF MODE_SIGNED = 1


cdef class ECSCore:
    # configuration
    cdef readonly int family, order, mode
    cdef readonly bint intercept
    cdef readonly double phi, n_data
    cdef readonly Py_ssize_t d, p
    cdef bint is32
    cdef const double[:, ::1] X64
    cdef const float[:, ::1] X32
    cdef const double[::1] y
    cdef double[::1] prior_prec
    # reference point and its full-data sums
    cdef double[::1] theta_star, A
    cdef double[:, ::1] B
    cdef double L_star
    cdef bint has_reference
    # metric
    cdef double[:, ::1] inv_mass, chol_mass
    # subsample rows
    cdef readonly Py_ssize_t n_blocks, block_size, m
    cdef int64_t[::1] idx
    cdef double[:, ::1] Xu
    cdef double[::1] yu, es, c0, c1, c2
    # residuals d_i and d'_i at the state's and the trajectory's theta (two banks)
    cdef double[:, ::1] D, DP      # (2, m)
    cdef readonly int sb           # index of the state's bank
    cdef double[::1] eta_buf, cw   # per-row linear predictor and gradient weights c_i
    # signed estimator constants
    cdef readonly double a_const, n_products
    # state
    cdef double[::1] theta, gradU
    cdef readonly double U, loglik_hat, sigma2, sign
    cdef double upart               # the u-dependent part n dbar - sigma2/2 (perturbed)
    # scratch
    cdef double[::1] delta, gq, tmp, mom, vel, z, theta_new, grad_new
    # proposal block (perturbed u-update)
    cdef int64_t[::1] pidx
    cdef double[:, ::1] pXu
    cdef double[::1] pyu, pes, pc0, pc1, pc2, pD, pDP

    def __init__(self, X, y, int family, int order, bint intercept, double phi,
                 prior_prec, int mode):
        if X.dtype == np.float32:
            self.is32 = True
            self.X32 = X
        else:
            self.is32 = False
            self.X64 = X
        self.y = y
        self.family = family
        self.order = order
        self.intercept = intercept
        self.phi = phi
        self.mode = mode
        self.n_data = X.shape[0]
        self.d = X.shape[1]
        self.p = self.d + (1 if intercept else 0)
        self.prior_prec = np.ascontiguousarray(prior_prec, dtype=np.float64).copy()
        p = self.p
        self.theta = np.zeros(p)
        self.gradU = np.zeros(p)
        self.delta = np.zeros(p); self.gq = np.zeros(p); self.tmp = np.zeros(p)
        self.mom = np.zeros(p); self.vel = np.zeros(p); self.z = np.zeros(p)
        self.theta_new = np.zeros(p); self.grad_new = np.zeros(p)
        self.inv_mass = np.eye(p)
        self.chol_mass = np.eye(p)
        self.a_const = 0.0
        self.n_products = 1.0
        self.sign = 1.0
        self.sb = 0

    # ---- configuration (with the GIL) -----------------------------------------------
    def set_reference(self, theta_star, double L_star, A, B):
        """New expansion point and its full-data sums; recomputes the cached
        constants of every buffered row (call ``evaluate_state`` afterwards)."""
        self.theta_star = np.ascontiguousarray(theta_star, dtype=np.float64).copy()
        self.L_star = L_star
        self.has_reference = True
        self.A = np.ascontiguousarray(A, dtype=np.float64).copy()
        self.B = np.ascontiguousarray(B, dtype=np.float64).copy()
        if self.m > 0:
            with nogil:
                self._cache_rows(self.Xu, self.yu, self.es, self.c0, self.c1, self.c2, self.m)

    def set_metric(self, inv_mass, chol_mass):
        self.inv_mass = np.ascontiguousarray(inv_mass, dtype=np.float64).copy()
        self.chol_mass = np.ascontiguousarray(chol_mass, dtype=np.float64).copy()

    def set_signed(self, double a_const, double n_products):
        self.a_const = a_const
        self.n_products = n_products

    def set_rows(self, idx, Py_ssize_t block_size):
        """Load the subsample rows ``idx`` (blocks of ``block_size`` consecutive entries)."""
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        if idx.shape[0] % block_size:
            raise ValueError("the number of rows must be a multiple of block_size")
        if idx.shape[0] and (idx.min() < 0 or idx.max() >= self.n_data):
            raise IndexError("subsample index out of range")
        cdef Py_ssize_t m = idx.shape[0], p = self.p
        self.m = m
        self.block_size = block_size
        self.n_blocks = m // block_size
        self.idx = idx.copy()
        self.Xu = np.empty((m, self.d))
        self.yu = np.empty(m); self.es = np.empty(m)
        self.c0 = np.empty(m); self.c1 = np.empty(m); self.c2 = np.empty(m)
        self.D = np.zeros((2, m))
        self.DP = np.zeros((2, m))
        self.eta_buf = np.zeros(m)
        self.cw = np.zeros(m)
        # proposal block buffers (one block)
        self.pidx = np.empty(block_size, dtype=np.int64)
        self.pXu = np.empty((block_size, self.d))
        self.pyu = np.empty(block_size); self.pes = np.empty(block_size)
        self.pc0 = np.empty(block_size); self.pc1 = np.empty(block_size)
        self.pc2 = np.empty(block_size); self.pD = np.empty(block_size)
        self.pDP = np.empty(block_size)
        with nogil:
            self._copy_rows(self.idx, self.Xu, self.yu, m)
            if self.has_reference:
                self._cache_rows(self.Xu, self.yu, self.es, self.c0, self.c1, self.c2, m)

    def evaluate_state(self, theta):
        """Set the state to ``theta`` and evaluate everything at it; returns U."""
        cdef double[::1] th = np.ascontiguousarray(theta, dtype=np.float64)
        cdef Py_ssize_t j
        cdef double U
        with nogil:
            for j in range(self.p):
                self.theta[j] = th[j]
            U = self._evaluate(&self.theta[0], self.sb, &self.gradU[0])
            self.U = U
        return U

    # ---- accessors --------------------------------------------------------------------
    @property
    def theta_state(self):
        return np.asarray(self.theta).copy()

    @property
    def grad_state(self):
        return np.asarray(self.gradU).copy()

    @property
    def indices(self):
        return np.asarray(self.idx).copy()

    def block_sums(self):
        """Per-block sums ``S_b`` of the state's residuals (a copy; for tests
        and the signed u-update)."""
        d = np.asarray(self.D[self.sb])
        return d.reshape(self.n_blocks, self.block_size).sum(axis=1) if self.m else np.zeros(0)

    def potential(self, theta):
        """U and grad U at ``theta`` for the current subsample, without
        changing the state (uses the trajectory bank)."""
        cdef double[::1] th = np.ascontiguousarray(theta, dtype=np.float64).copy()
        cdef double[::1] g = np.empty(self.p)
        cdef double U
        cdef double keep = self.loglik_hat, keep_s2 = self.sigma2, keep_sign = self.sign
        cdef double keep_upart = self.upart
        with nogil:
            U = self._evaluate(&th[0], 1 - self.sb, &g[0])
        self.loglik_hat, self.sigma2, self.sign = keep, keep_s2, keep_sign
        self.upart = keep_upart
        return U, np.asarray(g)

    # ---- nogil internals ----------------------------------------------------------------
    cdef void _copy_rows(self, const int64_t[::1] idx, double[:, ::1] Xdst, double[::1] ydst,
                         Py_ssize_t count) noexcept nogil:
        cdef Py_ssize_t i, j, k
        for i in range(count):
            k = idx[i]
            if self.is32:
                for j in range(self.d):
                    Xdst[i, j] = self.X32[k, j]
            else:
                for j in range(self.d):
                    Xdst[i, j] = self.X64[k, j]
            ydst[i] = self.y[k]

    cdef inline double _row_eta(self, const double* x, const double* th) noexcept nogil:
        cdef double s = 0.0
        cdef Py_ssize_t j
        for j in range(self.d):
            s += x[j] * th[j]
        if self.intercept:
            s += th[self.d]
        return s

    cdef void _cache_rows(self, double[:, ::1] Xs, double[::1] ys, double[::1] es,
                          double[::1] c0, double[::1] c1, double[::1] c2,
                          Py_ssize_t count) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(count):
            es[i] = self._row_eta(&Xs[i, 0], &self.theta_star[0])
            cv_consts(self.family, es[i], self.phi, &c0[i], &c1[i], &c2[i])

    cdef double _block_residuals(self, double[:, ::1] Xs, double[::1] ys, double[::1] es,
                                 double[::1] c0, double[::1] c1, double[::1] c2,
                                 Py_ssize_t start, Py_ssize_t stop, const double* th,
                                 double* Dout, double* DPout) noexcept nogil:
        """Residuals of rows [start, stop) at th (row-by-row dot products, for
        small blocks): d_i to Dout[i - start], d'_i to DPout; returns sum d_i."""
        cdef Py_ssize_t i
        cdef double s = 0.0
        for i in range(start, stop):
            cv_residual_cached(self.family, self.order, ys[i], self._row_eta(&Xs[i, 0], th),
                               es[i], c0[i], c1[i], c2[i], self.phi,
                               &Dout[i - start], &DPout[i - start])
            s += Dout[i - start]
        return s

    cdef double _evaluate(self, const double* th, int bank, double* gradU) noexcept nogil:
        """Evaluate every buffered row at th into ``bank``; returns U, writes grad U."""
        cdef Py_ssize_t i, m = self.m
        cdef int dd = <int> self.d, mm = <int> m, one = 1
        cdef double alpha = 1.0, beta = 0.0, icpt = th[self.d] if self.intercept else 0.0
        cdef char trans = b'T'
        if m == 0:
            return self._combine(th, bank, gradU)
        # eta = Xu theta: Xu (m x d, row-major) is a column-major d x m matrix
        dgemv(&trans, &dd, &mm, &alpha, &self.Xu[0, 0], &dd, <double*> th, &one, &beta,
              &self.eta_buf[0], &one)
        for i in range(m):
            cv_residual_cached(self.family, self.order, self.yu[i], self.eta_buf[i] + icpt,
                               self.es[i], self.c0[i], self.c1[i], self.c2[i], self.phi,
                               &self.D[bank, i], &self.DP[bank, i])
        return self._combine(th, bank, gradU)

    cdef double _combine(self, const double* th, int bank, double* gradU) noexcept nogil:
        """Log-likelihood estimate and gradient from a bank's residuals; returns
        U = -(estimate + log prior) and writes grad U. Sets loglik_hat / sigma2 /
        sign / upart as a side product (the caller decides whether they belong
        to the state)."""
        cdef Py_ssize_t j, l, b, i, p = self.p, m = self.m, bs = self.block_size
        cdef double n = self.n_data, Q, dbar, ssd, r, stot = 0.0, lp = 0.0, csum = 0.0
        cdef double est, dh, a = self.a_const, sgn = 1.0, cn, sb_sum
        cdef int dd = <int> self.d, mm = <int> m, one = 1
        cdef double alpha = 1.0, beta = 0.0
        cdef char notrans = b'N'
        # Q(theta) and its gradient
        for j in range(p):
            self.delta[j] = th[j] - self.theta_star[j]
        Q = self.L_star
        for j in range(p):
            r = self.A[j]
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
                self.cw[i] = self.DP[bank, i] * (n / m - cn * (self.D[bank, i] - dbar))
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
                for i in range(b * bs, (b + 1) * bs):
                    self.cw[i] = cn * self.DP[bank, i] / dh
            self.sign = sgn
            # variance of dhat (Gaussian approximation) over lambda: V[log|L|] ~ s2 / lambda
            self.sigma2 = (n * n / bs if bs > 0 else 0.0) * \
                (ssd / (m - 1.0) if m > 1 else 0.0) / self.n_products
        self.loglik_hat = est
        # grad = gq + Xu^T c (+ sum c for the intercept)
        for j in range(p):
            gradU[j] = 0.0
        if m > 0:
            dgemv(&notrans, &dd, &mm, &alpha, &self.Xu[0, 0], &dd, &self.cw[0], &one, &beta,
                  gradU, &one)
            if self.intercept:
                for i in range(m):
                    csum += self.cw[i]
                gradU[self.d] = csum
        for j in range(p):
            lp -= 0.5 * self.prior_prec[j] * th[j] * th[j]
            gradU[j] = -(self.gq[j] + gradU[j]) + self.prior_prec[j] * th[j]
        return -(est + lp)

    cdef double _kinetic(self, double[::1] pm) noexcept nogil:
        cdef Py_ssize_t j, l, p = self.p
        cdef double k = 0.0, r
        for j in range(p):
            r = 0.0
            for l in range(p):
                r += self.inv_mass[j, l] * pm[l]
            self.vel[j] = r
            k += pm[j] * r
        return 0.5 * k

    # ---- the two Gibbs steps ----------------------------------------------------------
    def u_step(self, generator):
        """Perturbed estimator: refresh one block of the subsample with a
        pseudo-marginal MH step at the current theta (§4.1).

        Returns ``(accepted, alpha_u, n_evals)``.
        """
        if self.mode != MODE_PERTURBED:
            raise RuntimeError("u_step is for the perturbed estimator")
        cdef bitgen_t* bg = get_bitgen(generator)
        cdef Py_ssize_t g, i, j, bs = self.block_size, m = self.m, p = self.p
        cdef Py_ssize_t sb = self.sb, start
        cdef double s_new, stot = 0.0, dbar_new, ssd = 0.0, r, n = self.n_data
        cdef double sigma2_new, est_new, log_ratio, log_u, alpha
        cdef bint accepted = False
        with generator.bit_generator.lock, nogil:
            g = rng_index(bg, self.n_blocks)
            for i in range(bs):
                self.pidx[i] = rng_index(bg, <int64_t> n)
            log_u = log(rng_uniform_open(bg))
            self._copy_rows(self.pidx, self.pXu, self.pyu, bs)
            self._cache_rows(self.pXu, self.pyu, self.pes, self.pc0, self.pc1, self.pc2, bs)
            s_new = self._block_residuals(self.pXu, self.pyu, self.pes, self.pc0, self.pc1,
                                          self.pc2, 0, bs, &self.theta[0], &self.pD[0],
                                          &self.pDP[0])
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
                    for j in range(self.d):
                        self.Xu[start + i, j] = self.pXu[i, j]
                    self.yu[start + i] = self.pyu[i]
                    self.es[start + i] = self.pes[i]
                    self.c0[start + i] = self.pc0[i]
                    self.c1[start + i] = self.pc1[i]
                    self.c2[start + i] = self.pc2[i]
                    self.D[sb, start + i] = self.pD[i]
                    self.DP[sb, start + i] = self.pDP[i]
                self.U = self._combine(&self.theta[0], sb, &self.gradU[0])
            if not isfinite(alpha):
                alpha = 0.0
        return accepted, alpha, bs

    def hmc_step(self, generator, double step_size, int n_leapfrog):
        """HMC move of theta given the current subsample (the same estimator in
        the dynamics and the acceptance), dense mass matrix.

        Returns ``(accepted, accept_prob, energy_error, n_evals)``.
        """
        cdef bitgen_t* bg = get_bitgen(generator)
        cdef Py_ssize_t j, l, it, p = self.p
        cdef int tb = 1 - self.sb
        cdef double K0, K1, U1 = INFINITY, H0, dE, log_u, r, alpha, eps = step_size
        cdef double keep_loglik = self.loglik_hat, keep_sigma2 = self.sigma2
        cdef double keep_sign = self.sign, keep_upart = self.upart
        cdef bint accepted = False, finite = True
        cdef int n_done = 0
        with generator.bit_generator.lock, nogil:
            for j in range(p):
                self.z[j] = rng_normal(bg)
            for j in range(p):
                r = 0.0
                for l in range(j + 1):
                    r += self.chol_mass[j, l] * self.z[l]
                self.mom[j] = r
            K0 = self._kinetic(self.mom)
            H0 = self.U + K0
            for j in range(p):
                self.theta_new[j] = self.theta[j]
                self.mom[j] -= 0.5 * eps * self.gradU[j]
            for it in range(n_leapfrog):
                self._kinetic(self.mom)          # vel = M^{-1} mom
                for j in range(p):
                    self.theta_new[j] += eps * self.vel[j]
                U1 = self._evaluate(&self.theta_new[0], tb, &self.grad_new[0])
                n_done += 1
                if not isfinite(U1):
                    finite = False
                    break
                r = eps if it < n_leapfrog - 1 else 0.5 * eps
                for j in range(p):
                    self.mom[j] -= r * self.grad_new[j]
                    if not isfinite(self.grad_new[j]):
                        finite = False
                if not finite:
                    break
            if finite:
                K1 = self._kinetic(self.mom)
                dE = (U1 + K1) - H0
            else:
                dE = INFINITY
            log_u = log(rng_uniform_open(bg))
            if isfinite(dE) and log_u < -dE:
                accepted = True
                for j in range(p):
                    self.theta[j] = self.theta_new[j]
                    self.gradU[j] = self.grad_new[j]
                self.U = U1
                self.sb = tb
            else:
                # the trajectory bank's side products do not belong to the state
                self.loglik_hat = keep_loglik
                self.sigma2 = keep_sigma2
                self.sign = keep_sign
                self.upart = keep_upart
            if isfinite(dE):
                alpha = 1.0 if dE <= 0 else exp(-dE)
            else:
                alpha = 0.0
        return accepted, alpha, dE, n_done * self.m

    # ---- signed estimator: batch statistics for the u-update (with the GIL) ------------
    def batch_stats(self, idx, Py_ssize_t batch_size):
        """Residual sums ``S_b`` of candidate batches of rows ``idx`` at the
        state's theta (signed u-update); returns ``(S (n_batches,), d (len(idx),))``."""
        idx = np.ascontiguousarray(idx, dtype=np.int64)
        cdef Py_ssize_t count = idx.shape[0], nb = count // batch_size, b
        cdef int64_t[::1] iv = idx
        cdef double[:, ::1] Xs = np.empty((max(count, 1), self.d))
        cdef double[::1] ys = np.empty(max(count, 1)), es = np.empty(max(count, 1))
        cdef double[::1] c0 = np.empty(max(count, 1)), c1 = np.empty(max(count, 1))
        cdef double[::1] c2 = np.empty(max(count, 1))
        cdef double[::1] Dtmp = np.empty(max(count, 1)), DPtmp = np.empty(max(count, 1))
        cdef double[::1] S = np.empty(nb)
        with nogil:
            self._copy_rows(iv, Xs, ys, count)
            self._cache_rows(Xs, ys, es, c0, c1, c2, count)
            for b in range(nb):
                S[b] = self._block_residuals(Xs, ys, es, c0, c1, c2, b * batch_size,
                                             (b + 1) * batch_size, &self.theta[0],
                                             &Dtmp[b * batch_size], &DPtmp[b * batch_size])
        return np.asarray(S), np.asarray(Dtmp)[:count]
