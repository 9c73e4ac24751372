# cython: language_level=3
"""Compiled loops of the stochastic-gradient samplers (doc/algorithms/sgmcmc.rst,
doc/algorithms/sgmcmc.rst).

One stochastic-gradient estimator (:class:`GradientEstimator`, with or
without Taylor control variates) serves SGLD, pSGLD, SGHMC, EWSG and the SGLD
proposal of austerity MH. Each ``*_steps`` function runs ``n_steps`` steps of
one sampler in a single ``nogil`` block on any compiled model object (GLMs,
or user models through their callback object), drawing every random number
from the chain's numpy Generator through its ``bitgen_t`` (so the
Generator's state reflects all draws and runs can be resumed). A returned
step count smaller than ``n_steps`` means the state became non-finite at that
step (the caller raises).
"""
import numpy as np
from libc.math cimport sqrt, log, isfinite, fabs, NAN
from bayes_subsample._typedefs cimport floating
from libc.stdint cimport int64_t
from numpy.random cimport bitgen_t
from numpy.random.c_distributions cimport random_standard_normal_fill
from bayes_subsample._normal32 cimport normal_fill_f
from bayes_subsample._rng cimport (get_bitgen, rng_index, rng_uniform_open,
                                   fisher_yates_step)
from bayes_subsample.models._cymodel cimport CyModel
from bayes_subsample.models._rows cimport matvec
from bayes_subsample.samplers._hamiltonian cimport Metric


cdef class GradientEstimator:
    """Unbiased stochastic gradient of the log posterior on a minibatch ``u``:

    ``g(theta; u) = s_p grad log p(theta) + s_l sum_{i in u} grad l_i(theta)``

    or, with Taylor control variates ``q`` around ``theta*`` (``cv``),

    ``g(theta; u) = s_p grad log p(theta) + grad Q(theta) + s_l sum_{i in u} grad d_i(theta)``

    with ``d_i = l_i - q_i`` and ``Q = sum_k q_k`` (exact, from the full-data sums
    at ``theta*``). The scales are ``s_l = n / |u|``, ``s_p = 1`` for SGLD/SGHMC;
    EWSG passes its own.

    After :meth:`whiten` the estimator works in whitened coordinates ``z`` with
    ``theta = shift + L z`` (``L`` lower triangular, or diagonal, given as its
    ``(p,)`` diagonal: wide models): it takes ``z`` and returns the gradient in
    ``z``, ``L^T g(theta)``. With ``L`` the Cholesky factor of
    the Laplace covariance the posterior is close to ``N(0, I)`` in ``z``, so
    the samplers' identity-metric dynamics are preconditioned by the posterior
    precision at the mode.

    Parameters
    ----------
    model : CyModel
        The compiled model object (``model.compiled``).
    prior_precision : array-like of shape (p,)
        Precision of the Gaussian prior.
    cv : TaylorControlVariate, optional
        Control variates (``order``, ``theta_star``, ``A``, ``B``, ``cache``).
    """

    cdef CyModel model
    cdef double[::1] prior_prec
    cdef readonly int cv_order
    cdef double[::1] theta_star, A
    cdef double[:, ::1] B
    cdef object cache
    cdef const double* eta_star
    cdef double[::1] tmp, tmp2
    cdef readonly Py_ssize_t dim, n_data
    # whitening theta = shift + L z
    cdef readonly bint whitened
    cdef bint diag_whiten
    cdef double[::1] shift, th_buf, g_buf, L_diag
    # diagonal whitening with one L, one shift and one prior precision for every
    # coordinate (networks: z = sqrt(n) theta under an N(0, s^2 I) prior): their
    # values as scalars, three vectors fewer read per gradient
    cdef bint uniform
    cdef double L0, shift0, prec0
    cdef double[:, ::1] L
    #: per-datum evaluations of one minibatch term (2 for user models with control
    #: variates, which evaluate gradients at theta and theta*)
    cdef readonly int evals_per_datum
    #: the samplers draw their noise as float32 normals (``_normal32``, a stream of
    #: its own): set by the kernels for models that compute in float32 (the
    #: MLP on float32 rows), whose noise needs no more; False keeps numpy's
    #: float64 normals (the GLMs' draws)
    cdef public bint noise32

    def __init__(self, CyModel model, prior_precision, cv=None):
        cdef const double[::1] es
        self.model = model
        self.dim = model.n_params
        self.n_data = model.n_data
        self.prior_prec = np.ascontiguousarray(prior_precision, dtype=np.float64).copy()
        if self.prior_prec.shape[0] != self.dim:
            raise ValueError("prior_precision must have one entry per parameter")
        self.tmp = np.zeros(self.dim)
        self.tmp2 = np.zeros(self.dim)
        self.th_buf = np.zeros(self.dim)
        self.g_buf = np.zeros(self.dim)
        self.whitened = False
        self.uniform = False
        self.noise32 = False
        self.eta_star = NULL
        if cv is None:
            self.cv_order = -1
            self.evals_per_datum = 1
            return
        self.cv_order = int(cv.order)
        self.theta_star = np.ascontiguousarray(cv.theta_star, dtype=np.float64).copy()
        self.A = np.ascontiguousarray(cv.A, dtype=np.float64).copy()
        if self.cv_order == 2:
            # the p x p Hessian sum (below order 2 it is zero: no matrix, no product)
            self.B = np.ascontiguousarray(cv.B, dtype=np.float64).copy()
        self.cache = cv.cache
        if self.cache is not None:
            es = self.cache
            if es.shape[0] != self.n_data * model.cache_width:
                raise ValueError("the control variates' cache does not match the model")
            self.eta_star = &es[0]
        self.evals_per_datum = model.cv_cost

    def whiten(self, shift, L):
        """Work in ``z`` with ``theta = shift + L z``: ``L`` lower triangular
        ``(p, p)``, or a ``(p,)`` vector for a diagonal ``L`` (``O(p)`` per
        gradient: wide models)."""
        shift = np.ascontiguousarray(shift, dtype=np.float64)
        L = np.ascontiguousarray(L, dtype=np.float64)
        if shift.shape != (self.dim,) or L.shape not in ((self.dim, self.dim), (self.dim,)):
            raise ValueError(f"shift and L must have shapes ({self.dim},) and "
                             f"({self.dim}, {self.dim}) or ({self.dim},)")
        self.diag_whiten = L.ndim == 1
        prec = np.asarray(self.prior_prec)
        self.uniform = (self.diag_whiten and self.dim > 0 and bool(np.all(L == L[0]))
                        and bool(np.all(shift == shift[0])) and bool(np.all(prec == prec[0])))
        if self.uniform:
            self.L0, self.shift0, self.prec0 = float(L[0]), float(shift[0]), float(prec[0])
        if self.diag_whiten:
            self.shift, self.L_diag = shift.copy(), L.copy()
        else:
            self.shift, self.L = shift.copy(), np.tril(L)
        self.whitened = True
        return self

    cdef int estimate(self, const double* x, const int64_t* idx, Py_ssize_t m,
                      double lik_scale, double prior_scale, double* out) noexcept nogil:
        """Write ``g(x; idx)`` to ``out`` (``x = theta``, or ``z`` once whitened,
        with the gradient in ``z``); returns 0, or -1 if the model failed."""
        cdef Py_ssize_t j, l, p = self.dim
        cdef double s
        cdef int rc
        cdef double* th
        cdef const double* Ld
        cdef const double* sh
        cdef const double* pr
        cdef const double* gl
        cdef double l0 = self.L0, shift0 = self.shift0, prec0 = self.prec0
        if not self.whitened:
            return self._estimate(x, idx, m, lik_scale, prior_scale, out)
        if self.diag_whiten:
            th, Ld, sh = &self.th_buf[0], &self.L_diag[0], &self.shift[0]
            if self.uniform:
                for j in range(p):
                    th[j] = shift0 + l0 * x[j]
            else:
                for j in range(p):
                    th[j] = sh[j] + Ld[j] * x[j]
            if self.cv_order >= 0:
                rc = self._estimate(th, idx, m, lik_scale, prior_scale, &self.g_buf[0])
                for j in range(p):
                    out[j] = Ld[j] * self.g_buf[j]
                return rc
            # without control variates (networks): _estimate's prior term and the
            # map back to z in one pass, the same operations in the same order
            rc = self.model.grad_sum(th, idx, m, &self.tmp[0], NULL)
            if rc != 0:
                return rc
            pr, gl = &self.prior_prec[0], &self.tmp[0]
            if self.uniform:
                for j in range(p):
                    out[j] = l0 * (-prior_scale * prec0 * th[j] + lik_scale * gl[j])
            else:
                for j in range(p):
                    out[j] = Ld[j] * (-prior_scale * pr[j] * th[j] + lik_scale * gl[j])
            return 0
        for j in range(p):
            s = self.shift[j]
            for l in range(j + 1):
                s += self.L[j, l] * x[l]
            self.th_buf[j] = s
        rc = self._estimate(&self.th_buf[0], idx, m, lik_scale, prior_scale, &self.g_buf[0])
        for l in range(p):
            s = 0.0
            for j in range(l, p):
                s += self.L[j, l] * self.g_buf[j]
            out[l] = s
        return rc

    cdef int _estimate(self, const double* theta, const int64_t* idx, Py_ssize_t m,
                       double lik_scale, double prior_scale, double* g) noexcept nogil:
        cdef Py_ssize_t j, p = self.dim
        cdef int rc
        if self.cv_order < 0:
            rc = self.model.grad_sum(theta, idx, m, &self.tmp[0], NULL)
        else:
            rc = self.model.cv_grad_sum(self.cv_order, &self.theta_star[0], self.eta_star,
                                        theta, idx, m, &self.tmp[0], NULL)
        if rc != 0:
            return rc
        for j in range(p):
            g[j] = -prior_scale * self.prior_prec[j] * theta[j] + lik_scale * self.tmp[j]
        if self.cv_order == 2:
            # A + B (theta - theta*), B's product by row dots (matvec)
            for j in range(p):
                self.tmp[j] = theta[j] - self.theta_star[j]
            matvec(&self.B[0, 0], p, &self.tmp[0], &self.tmp2[0])
            for j in range(p):
                g[j] += self.A[j] + self.tmp2[j]
        elif self.cv_order >= 0:
            for j in range(p):
                g[j] += self.A[j]
        return 0

    def __call__(self, theta, idx, lik_scale=None, double prior_scale=1.0):
        """The estimate at ``theta`` (``z`` once whitened) on the minibatch ``idx``
        (``lik_scale`` defaults to ``n / len(idx)``)."""
        cdef double[::1] th = np.ascontiguousarray(theta, dtype=np.float64)
        cdef int64_t[::1] ix = np.ascontiguousarray(idx, dtype=np.int64)
        cdef double[::1] g = np.empty(self.dim)
        cdef double ls
        cdef int rc
        if th.shape[0] != self.dim:
            raise ValueError(f"theta must have length {self.dim}")
        if ix.shape[0] < 1:
            raise ValueError("the minibatch must not be empty")
        if np.min(ix) < 0 or np.max(ix) >= self.n_data:
            raise IndexError(f"minibatch index out of range [0, {self.n_data})")
        ls = <double> self.n_data / ix.shape[0] if lik_scale is None else float(lik_scale)
        with nogil:
            rc = self.estimate(&th[0], &ix[0], ix.shape[0], ls, prior_scale, &g[0])
        if rc:
            self.model.raise_error()
        return np.asarray(g)

    cdef void raise_error(self) except *:
        self.model.raise_error()


cdef inline bint _all_finite(const double* a, Py_ssize_t p) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(p):
        if not isfinite(a[j]):
            return False
    return True


def whitened_draw(const double[::1] z, const double[::1] shift, chol, double[::1] out):
    """``out = shift + L z`` (``chol`` = ``L``: lower triangular ``(p, p)``,
    C-contiguous, or its ``(p,)`` diagonal) and ``max_j |z_j|`` (NaN if a
    ``z_j`` is NaN): an SG iteration's draw and its distance from the mode in
    posterior standard deviations, in one call (four NumPy calls cost 4 us
    of a 60 us SGLD iteration on 29 parameters)."""
    cdef Py_ssize_t p = z.shape[0], i, j
    cdef const double[:, ::1] L
    cdef const double[::1] diag
    cdef double acc, dist = 0.0, a
    if shift.shape[0] != p or out.shape[0] != p:
        raise ValueError("z, shift and out must have one length")
    if np.ndim(chol) == 2:
        L = chol
        if L.shape[0] != p or L.shape[1] != p:
            raise ValueError(f"chol must be ({p}, {p})")
        with nogil:
            for i in range(p):
                acc = 0.0
                for j in range(i + 1):
                    acc = acc + L[i, j] * z[j]
                out[i] = shift[i] + acc
    else:
        diag = chol
        if diag.shape[0] != p:
            raise ValueError(f"chol must have length {p}")
        for i in range(p):
            out[i] = shift[i] + diag[i] * z[i]
    for i in range(p):
        a = fabs(z[i])
        if a != a:
            return NAN
        if a > dist:
            dist = a
    return dist


cdef class Noise:
    """One step's standard normals for the ``p`` coordinates, drawn at once
    (``fill``) into ``xi`` (float64: numpy's normals, the numbers the loops
    drew one at a time before, in the same order) or ``xi32`` (float32,
    ``_normal32``: when the estimator's ``noise32``). Drawing them in one call
    and then updating in a loop without calls lets the compiler vectorise the
    update, and is the fast path of the float32 normals."""
    cdef double[::1] xi
    cdef float[::1] xi32
    cdef bint single
    cdef Py_ssize_t p

    def __init__(self, GradientEstimator est):
        self.p = est.dim
        self.single = est.noise32
        if self.single:
            self.xi32 = np.empty(max(self.p, 1), dtype=np.float32)
        else:
            self.xi = np.empty(max(self.p, 1))

    cdef inline void fill(self, bitgen_t* bg) noexcept nogil:
        if self.single:
            normal_fill_f(bg, self.p, &self.xi32[0])
        else:
            random_standard_normal_fill(bg, self.p, &self.xi[0])


cdef extern from *:
    """
    #include <stddef.h>
    /* SGHMC's and EWSG's updates (see _sghmc_update, _ewsg_update) as plain C with
     * restrict pointers and an OpenMP simd reduction, so that they compile to SIMD
     * code; the finiteness check sums x * 0 (NaN for an infinity or a NaN, a zero
     * otherwise: the order of the sum does not matter). Element-wise the same
     * operations as a scalar loop (no contraction: -ffp-contract=off). */
    #define BS_SG_UPDATES(NAME, T) \
    static int bs_sghmc_update_##NAME(double* __restrict__ theta, double* __restrict__ mom, \\
            const double* __restrict__ g, const T* __restrict__ xi, double eps, \\
            double friction, double noise, int advance, ptrdiff_t p) { \\
        double chk = 0.0; \\
        ptrdiff_t j; \\
        if (advance) { \\
            _Pragma("omp simd reduction(+:chk)") \\
            for (j = 0; j < p; j++) { \\
                double m = mom[j] + (eps * (g[j] - friction * mom[j]) + noise * (double) xi[j]); \\
                mom[j] = m; \\
                chk += theta[j] * 0.0 + m * 0.0; \\
                theta[j] = theta[j] + eps * m; \\
            } \\
        } else { \\
            _Pragma("omp simd reduction(+:chk)") \\
            for (j = 0; j < p; j++) { \\
                double m = mom[j] + (eps * (g[j] - friction * mom[j]) + noise * (double) xi[j]); \\
                mom[j] = m; \\
                chk += theta[j] * 0.0 + m * 0.0; \\
            } \\
        } \\
        return chk == 0.0; \\
    } \\
    static int bs_ewsg_update_##NAME(double* __restrict__ theta, double* __restrict__ r, \\
            const double* __restrict__ g, const T* __restrict__ xi, double eps, \\
            double gamma, double noise, ptrdiff_t p) { \\
        double chk = 0.0; \\
        ptrdiff_t j; \\
        _Pragma("omp simd reduction(+:chk)") \\
        for (j = 0; j < p; j++) { \\
            double th = theta[j] + eps * r[j]; \\
            double rj = r[j] - eps * (g[j] + gamma * r[j]) + noise * (double) xi[j]; \\
            r[j] = rj; \\
            theta[j] = th; \\
            chk += th * 0.0 + rj * 0.0; \\
        } \\
        return chk == 0.0; \\
    }
    BS_SG_UPDATES(f32, float)
    BS_SG_UPDATES(f64, double)
    """
    int bs_sghmc_update_f32(double* theta, double* mom, const double* g, const float* xi,
                            double eps, double friction, double noise, int advance,
                            Py_ssize_t p) noexcept nogil
    int bs_sghmc_update_f64(double* theta, double* mom, const double* g, const double* xi,
                            double eps, double friction, double noise, int advance,
                            Py_ssize_t p) noexcept nogil
    int bs_ewsg_update_f32(double* theta, double* r, const double* g, const float* xi,
                           double eps, double gamma, double noise, Py_ssize_t p) noexcept nogil
    int bs_ewsg_update_f64(double* theta, double* r, const double* g, const double* xi,
                           double eps, double gamma, double noise, Py_ssize_t p) noexcept nogil



cdef inline bint _sghmc_update(double* theta, double* mom, const double* g,
                               const floating* xi, double step_size, double friction,
                               double noise, bint advance, Py_ssize_t p) noexcept nogil:
    """The end of an SGHMC step (identity metric) in one pass:
    ``mom += eps (g - friction mom) + noise xi``; whether ``theta`` and the new
    ``mom`` are all finite (returned); then, with ``advance``, the next step's
    position ``theta += eps mom`` (the same operations as separate loops; C
    above)."""
    if floating is float:
        return bs_sghmc_update_f32(theta, mom, g, xi, step_size, friction, noise, advance, p)
    else:
        return bs_sghmc_update_f64(theta, mom, g, xi, step_size, friction, noise, advance, p)


cdef inline void _sgld_update(double* theta, const double* g, const floating* xi, double half,
                              double noise, Py_ssize_t p) noexcept nogil:
    """``theta += eps/2 g + noise xi``."""
    cdef Py_ssize_t j
    for j in range(p):
        theta[j] = theta[j] + (half * g[j] + noise * <double> xi[j])


cdef inline bint _ewsg_update(double* theta, double* r, const double* g, const floating* xi,
                              double step_size, double gamma, double noise,
                              Py_ssize_t p) noexcept nogil:
    """EWSG's Euler-Maruyama step in one pass (``theta += eps r`` with the old
    ``r``; ``r += -eps (g + gamma r) + noise xi``); whether both are finite (C
    above)."""
    if floating is float:
        return bs_ewsg_update_f32(theta, r, g, xi, step_size, gamma, noise, p)
    else:
        return bs_ewsg_update_f64(theta, r, g, xi, step_size, gamma, noise, p)


#: entries of a Stein accumulator per parameter (sum g z, sum g, sum z, sum z^2),
#: plus one for the count
STEIN_FIELDS = 4


cdef double* _stein_buffer(double[::1] stein, Py_ssize_t p) except? NULL:
    """The accumulator's data (NULL for None), its length checked."""
    if stein is None:
        return NULL
    if stein.shape[0] != STEIN_FIELDS * p + 1:
        raise ValueError(f"the Stein accumulator must have length {STEIN_FIELDS * p + 1}")
    return &stein[0]


cdef inline void _stein_add(double* acc, const double* g, const double* z, double sign,
                            Py_ssize_t p) noexcept nogil:
    """Add one pair (``z``, an unbiased estimate ``sign * g`` of the gradient of
    the log posterior at ``z``) to the sums ``acc`` = [sum g z | sum g | sum z |
    sum z^2 | count] (per coordinate): the check of the samplers' spread
    (``_sg_check.SteinCheck``)."""
    cdef Py_ssize_t j
    cdef double gj
    for j in range(p):
        gj = sign * g[j]
        acc[j] += gj * z[j]
        acc[p + j] += gj
        acc[2 * p + j] += z[j]
        acc[3 * p + j] += z[j] * z[j]
    acc[4 * p] += 1.0


cdef inline int _minibatch_gradient(GradientEstimator est, bitgen_t* bg, const double* theta,
                                    int64_t* idx, Py_ssize_t batch_size, double scale,
                                    double* g, double* acc) noexcept nogil:
    """One step's gradient estimate ``g`` at ``theta`` on ``batch_size`` fresh iid
    indices (drawn into ``idx``) and, with a Stein buffer ``acc``, the pair
    ``(theta, g)`` added to it; returns the estimator's code (0, or -1 after an
    error it keeps)."""
    cdef Py_ssize_t i
    for i in range(batch_size):
        idx[i] = rng_index(bg, est.n_data)
    if est.estimate(theta, idx, batch_size, scale, 1.0, g) != 0:
        return -1
    if acc != NULL:
        _stein_add(acc, g, theta, 1.0, est.dim)
    return 0


cdef Py_ssize_t _langevin_steps(GradientEstimator est, double[::1] theta, double[::1] v,
                                double alpha, double damping, double step_size,
                                Py_ssize_t batch_size, Py_ssize_t n_steps, generator,
                                int64_t[::1] idx, double[::1] g, double[::1] stein) except -1:
    """The loop of :func:`sgld_steps` (``v`` None) and :func:`psgld_steps` (``v``
    the running mean of the squared per-datum gradients): ``n_steps`` steps on
    ``batch_size`` fresh iid indices each, stopped at the first non-finite
    ``theta``. Returns the steps completed."""
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef Py_ssize_t n = est.n_data, p = est.dim, s, j
    cdef double scale = <double> n / <double> batch_size, inv_n = 1.0 / <double> n
    cdef double half = 0.5 * step_size, noise = sqrt(step_size), keep = 1.0 - alpha, gb, G
    cdef bint precondition = v is not None
    cdef Py_ssize_t done = n_steps
    cdef int rc = 0
    cdef double* acc = _stein_buffer(stein, p)
    if precondition and v.shape[0] != p:
        raise ValueError(f"v must have length {p}")
    cdef Noise nz = Noise(est)
    with generator.bit_generator.lock, nogil:
        for s in range(n_steps):
            rc = _minibatch_gradient(est, bg, &theta[0], &idx[0], batch_size, scale, &g[0], acc)
            if rc != 0:
                break
            nz.fill(bg)
            if precondition:
                for j in range(p):
                    gb = g[j] * inv_n
                    v[j] = alpha * v[j] + keep * gb * gb
                    G = 1.0 / (damping + sqrt(v[j]))
                    theta[j] += half * G * g[j] + sqrt(step_size * G) * (
                        <double> nz.xi32[j] if nz.single else nz.xi[j])
            elif nz.single:
                _sgld_update(&theta[0], &g[0], &nz.xi32[0], half, noise, p)
            else:
                _sgld_update(&theta[0], &g[0], &nz.xi[0], half, noise, p)
            if not _all_finite(&theta[0], p):
                done = s
                break
    if rc != 0:
        est.raise_error()
    return done


def sgld_steps(GradientEstimator est, double[::1] theta, double step_size,
               Py_ssize_t batch_size, Py_ssize_t n_steps, generator, int64_t[::1] idx,
               double[::1] g, double[::1] stein=None):
    """``n_steps`` SGLD steps ``theta += eps/2 g(theta) + N(0, eps I)`` in place
    (each with ``batch_size`` fresh iid indices). ``stein``: sums of the pairs
    (position, gradient estimate) of every step are added to it
    (``_stein_add``). Returns the steps completed."""
    return _langevin_steps(est, theta, None, 0.0, 0.0, step_size, batch_size, n_steps,
                           generator, idx, g, stein)


def psgld_steps(GradientEstimator est, double[::1] theta, double[::1] v, double alpha,
                double damping, double step_size, Py_ssize_t batch_size, Py_ssize_t n_steps,
                generator, int64_t[::1] idx, double[::1] g, double[::1] stein=None):
    """``n_steps`` pSGLD steps in place (Li et al. 2016, Algorithm 1 without its
    ``Gamma`` term): with ``g`` the estimate on ``batch_size`` fresh iid indices
    and ``gbar = g / n`` its per-datum average,
    ``v <- alpha v + (1 - alpha) gbar^2``, ``G = 1 / (damping + sqrt(v))`` and
    ``theta += eps/2 G g + sqrt(eps G) N(0, I)`` (coordinate-wise). ``stein`` as
    for :func:`sgld_steps`. Returns the steps completed."""
    return _langevin_steps(est, theta, v, alpha, damping, step_size, batch_size, n_steps,
                           generator, idx, g, stein)


def sghmc_steps(GradientEstimator est, double[::1] theta, double[::1] mom, bint refresh,
                Metric metric, double step_size, double friction, Py_ssize_t batch_size,
                Py_ssize_t n_steps, generator, int64_t[::1] idx, double[::1] g,
                double[::1] v, double[::1] z, double[::1] xi, double[::1] stein=None):
    """One SGHMC iteration in place: optionally refresh ``mom ~ N(0, M)``, then
    ``n_steps`` steps
    ``theta += eps M^-1 p; p += eps g(theta) - eps C M^-1 p_old + N(0, 2 C eps)``
    with ``C = friction * M`` (so ``C M^-1 p = friction p``, noise
    ``chol(M) N(0, 2 friction eps)``). ``stein`` as for :func:`sgld_steps`.
    Returns the steps completed."""
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef Py_ssize_t n = est.n_data, p = est.dim, s, i, j
    cdef double scale = <double> n / <double> batch_size
    cdef double noise = sqrt(2.0 * friction * step_size)
    cdef Py_ssize_t done = n_steps
    cdef int rc = 0
    cdef double* acc = _stein_buffer(stein, p)
    # the identity metric (SGHMC's, in the coordinates it moves): M^-1 p is p, the
    # noise is a step's normals drawn at once (Noise) and the passes over the
    # parameters are fused (on a network of 80,000 weights they cost as much as
    # the gradient)
    cdef bint unit = metric.identity, ok
    cdef Noise nz = Noise(est) if unit else None
    with generator.bit_generator.lock, nogil:
        if refresh:
            metric.sample_momentum(bg, &z[0], &mom[0])
        if unit:
            # each step's momentum update, finiteness check and the next step's
            # position in one pass (_sghmc_update): the first position here
            for j in range(p):
                theta[j] += step_size * mom[j]
            for s in range(n_steps):
                rc = _minibatch_gradient(est, bg, &theta[0], &idx[0], batch_size, scale,
                                         &g[0], acc)
                if rc != 0:
                    break
                nz.fill(bg)
                if nz.single:
                    ok = _sghmc_update(&theta[0], &mom[0], &g[0], &nz.xi32[0], step_size,
                                       friction, noise, s + 1 < n_steps, p)
                else:
                    ok = _sghmc_update(&theta[0], &mom[0], &g[0], &nz.xi[0], step_size,
                                       friction, noise, s + 1 < n_steps, p)
                if not ok:
                    done = s
                    break
        for s in range(0 if unit else n_steps):
            metric.kinetic(&mom[0], &v[0])
            for j in range(p):
                theta[j] += step_size * v[j]
            rc = _minibatch_gradient(est, bg, &theta[0], &idx[0], batch_size, scale, &g[0], acc)
            if rc != 0:
                break
            metric.sample_momentum(bg, &z[0], &xi[0])
            for j in range(p):
                # C M^-1 p_old with C = friction * M is friction * p_old
                mom[j] += step_size * (g[j] - friction * mom[j]) + noise * xi[j]
            if not (_all_finite(&theta[0], p) and _all_finite(&mom[0], p)):
                done = s
                break
    if rc != 0:
        est.raise_error()
    return done


cdef struct Partition:
    # EWSG's random partition of the data: block J = perm[J b : (J+1) b]
    int64_t* perm
    Py_ssize_t n, n_blocks, batch_size
    int64_t since           # blocks evaluated since the last reshuffle
    Py_ssize_t n_data       # data points evaluated


cdef inline int _block_grad(GradientEstimator est, const double* theta, Partition* part,
                            Py_ssize_t J, double* out) noexcept nogil:
    """out = n_b grad V_J(theta), V_J = sum_{i in B_J} (-l_i - log p / n); counts
    the block and its data points in ``part``."""
    cdef Py_ssize_t start = J * part.batch_size, size, j
    cdef int rc
    size = part.batch_size if start + part.batch_size <= part.n else part.n - start
    rc = est.estimate(theta, part.perm + start, size, <double> part.n_blocks,
                      <double> part.n_blocks * size / <double> part.n, out)
    for j in range(est.dim):
        out[j] = -out[j]
    part.since += 1
    part.n_data += size
    return rc


cdef inline double _ewsg_energy(const double* g, const double* r, double gamma, double coef,
                                Py_ssize_t p) noexcept nogil:
    """h / (2 sigma^2) * ||gamma r + g||^2 (coef = h / (2 sigma^2))."""
    cdef double s = 0.0, t
    cdef Py_ssize_t j
    for j in range(p):
        t = gamma * r[j] + g[j]
        s += t * t
    return coef * s


def ewsg_steps(GradientEstimator est, double[::1] theta, double[::1] r, int64_t[::1] perm,
               int64_t[::1] chain, Py_ssize_t batch_size, Py_ssize_t index_chain_length,
               bint persistent, double step_size, double gamma, Py_ssize_t n_steps, generator,
               double[::1] g_cur, double[::1] g_prop, double[::1] stein=None):
    """``n_steps`` EWSG steps in place.

    ``perm`` holds the current random partition (block J = perm[J b : (J+1) b]);
    ``chain = [J, blocks evaluated since the last reshuffle]`` (J = -1: none).
    The partition is reshuffled at the start of a step once ``n_b`` blocks
    (one data pass) have been evaluated. ``stein`` as for :func:`sgld_steps`,
    with the gradient of a block drawn uniformly (the index chain's start,
    or with ``persistent`` its first proposal; the selected block's is biased).
    Returns ``(steps completed, index proposals accepted, data points
    evaluated)``.
    """
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef Py_ssize_t n = est.n_data, p = est.dim, s, i, j
    cdef Partition part
    cdef Py_ssize_t J = chain[0], Jp
    cdef double sigma = sqrt(2.0 * gamma), coef = step_size / (2.0 * sigma * sigma)
    cdef double noise = sigma * sqrt(step_size), e_cur, e_prop, th
    cdef Py_ssize_t done = n_steps, n_acc = 0
    cdef int rc = 0
    cdef bint fresh, ok
    cdef double* acc = _stein_buffer(stein, p)
    cdef Noise nz = Noise(est)
    if perm.shape[0] != n:
        raise ValueError(f"perm must have length {n}")
    part = Partition(&perm[0], n, (n + batch_size - 1) // batch_size, batch_size, chain[1], 0)
    with generator.bit_generator.lock, nogil:
        for s in range(n_steps):
            if part.since >= part.n_blocks:
                for i in range(n - 1):
                    fisher_yates_step(bg, &perm[0], i, n)
                part.since = 0
            fresh = not persistent or J < 0
            if fresh:
                J = rng_index(bg, part.n_blocks)
            rc = _block_grad(est, &theta[0], &part, J, &g_cur[0])
            if rc != 0:
                break
            if acc != NULL and fresh:
                # g_cur = n_b grad V_J: minus the gradient of the log posterior
                _stein_add(acc, &g_cur[0], &theta[0], -1.0, p)
            e_cur = _ewsg_energy(&g_cur[0], &r[0], gamma, coef, p)
            for i in range(index_chain_length):
                Jp = rng_index(bg, part.n_blocks)
                rc = _block_grad(est, &theta[0], &part, Jp, &g_prop[0])
                if rc != 0:
                    break
                if acc != NULL and not fresh and i == 0:
                    _stein_add(acc, &g_prop[0], &theta[0], -1.0, p)
                e_prop = _ewsg_energy(&g_prop[0], &r[0], gamma, coef, p)
                if log(rng_uniform_open(bg)) < e_prop - e_cur:
                    J = Jp
                    e_cur = e_prop
                    for j in range(p):
                        g_cur[j] = g_prop[j]
                    n_acc += 1
            if rc != 0:
                break
            # Euler-Maruyama: theta uses r_k, r uses grad at theta_k
            nz.fill(bg)
            if nz.single:
                ok = _ewsg_update(&theta[0], &r[0], &g_cur[0], &nz.xi32[0], step_size, gamma,
                                  noise, p)
            else:
                ok = _ewsg_update(&theta[0], &r[0], &g_cur[0], &nz.xi[0], step_size, gamma,
                                  noise, p)
            if not ok:
                done = s
                break
    if rc != 0:
        est.raise_error()
    chain[0] = J
    chain[1] = part.since
    return done, n_acc, part.n_data
