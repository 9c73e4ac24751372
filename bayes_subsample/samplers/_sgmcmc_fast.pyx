# cython: language_level=3
"""Compiled loops of the stochastic-gradient samplers (ALGORITHMS.md §4.4, §5).

Each ``*_steps`` function runs ``n_steps`` steps of one sampler for a GLM in a
single ``nogil`` block, drawing every random number from the chain's numpy
Generator through its ``bitgen_t`` (so the Generator's state reflects all
draws and runs can be resumed). The NumPy fallback in ``sgmcmc.py`` /
``ewsg.py`` (user models) draws the same numbers in the same order through
the small ``draw_*`` / ``shuffle_inplace`` helpers below, so both paths give
the same chain for a seed (up to floating-point summation order).

Conventions as in ``models/_glm_fast.pyx``: X C-contiguous (n, d) float32 or
float64, y float64, theta float64 (p,) with the intercept last (a virtual
column of ones). ``order`` is the Taylor control-variate order (0, 1, 2) or
-1 for plain minibatch gradients. Returned step counts smaller than
``n_steps`` mean the state became non-finite at that step (the caller raises).
"""
import numpy as np
from libc.math cimport sqrt, log, isfinite
from libc.stdint cimport int64_t
from numpy.random cimport bitgen_t
from bayes_subsample._typedefs cimport floating
from bayes_subsample._rng cimport (get_bitgen, rng_index, rng_normal, rng_uniform_open,
                                   fisher_yates_step)
from bayes_subsample.models._glm_terms cimport glm_terms, cv_residual


cdef inline double _row_dot(const floating* x, const double* theta, Py_ssize_t d,
                            bint intercept) noexcept nogil:
    cdef double s = 0.0
    cdef Py_ssize_t j
    for j in range(d):
        s += x[j] * theta[j]
    if intercept:
        s += theta[d]
    return s


cdef void _lik_grad(int family, int order, const floating[:, ::1] X, const double[::1] y,
                    bint intercept, double phi, const double[::1] eta_star,
                    const double* theta, const int64_t* idx, Py_ssize_t m,
                    double* out, Py_ssize_t p) noexcept nogil:
    """out = sum_i c_i x_{idx[i]} with c = dl/deta (order < 0) or the CV residual
    derivative d' (order >= 0)."""
    cdef Py_ssize_t d = X.shape[1], i, j, k
    cdef double e, ll, c, w, dk
    cdef const floating* x
    for j in range(p):
        out[j] = 0.0
    for i in range(m):
        k = idx[i]
        x = &X[k, 0]
        e = _row_dot(x, theta, d, intercept)
        if order < 0:
            glm_terms(family, y[k], e, phi, False, &ll, &c, &w)
        else:
            cv_residual(family, order, y[k], e, eta_star[k], phi, &dk, &c)
        for j in range(d):
            out[j] += c * x[j]
        if intercept:
            out[d] += c


cdef void _sg_gradient(int family, int order, const floating[:, ::1] X, const double[::1] y,
                       bint intercept, double phi, const double[::1] prior_prec,
                       const double[::1] eta_star, const double[::1] theta_star,
                       const double[::1] A, const double[:, ::1] B,
                       const double* theta, const int64_t* idx, Py_ssize_t m, double scale,
                       double* g, double* tmp, Py_ssize_t p) noexcept nogil:
    """g = grad log prior + [A + B (theta - theta*)] + scale * sum_i c_i x_{idx[i]}
    (the bracket only with control variates, order >= 0)."""
    cdef Py_ssize_t j, l
    cdef double s
    _lik_grad(family, order, X, y, intercept, phi, eta_star, theta, idx, m, tmp, p)
    for j in range(p):
        g[j] = -prior_prec[j] * theta[j] + scale * tmp[j]
    if order >= 0:
        for j in range(p):
            s = A[j]
            for l in range(p):
                s += B[j, l] * (theta[l] - theta_star[l])
            g[j] += s


cdef inline bint _all_finite(const double* a, Py_ssize_t p) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(p):
        if not isfinite(a[j]):
            return False
    return True


def sgld_steps(int family, int order, const floating[:, ::1] X, const double[::1] y,
               bint intercept, double phi, const double[::1] prior_prec,
               const double[::1] eta_star, const double[::1] theta_star,
               const double[::1] A, const double[:, ::1] B, double[::1] theta,
               double step_size, Py_ssize_t batch_size, Py_ssize_t n_steps, generator,
               int64_t[::1] idx, double[::1] g, double[::1] tmp):
    """``n_steps`` SGLD steps ``theta += eps/2 g_hat(theta) + N(0, eps I)`` in place
    (each with ``batch_size`` fresh iid indices). Returns the steps completed."""
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef Py_ssize_t n = X.shape[0], p = theta.shape[0], s, i, j
    cdef double scale = <double> n / <double> batch_size
    cdef double half = 0.5 * step_size, noise = sqrt(step_size)
    cdef Py_ssize_t done = n_steps
    with generator.bit_generator.lock, nogil:
        for s in range(n_steps):
            for i in range(batch_size):
                idx[i] = rng_index(bg, n)
            _sg_gradient(family, order, X, y, intercept, phi, prior_prec, eta_star,
                         theta_star, A, B, &theta[0], &idx[0], batch_size, scale,
                         &g[0], &tmp[0], p)
            for j in range(p):
                theta[j] += half * g[j] + noise * rng_normal(bg)
            if not _all_finite(&theta[0], p):
                done = s
                break
    return done


def sghmc_steps(int family, int order, const floating[:, ::1] X, const double[::1] y,
                bint intercept, double phi, const double[::1] prior_prec,
                const double[::1] eta_star, const double[::1] theta_star,
                const double[::1] A, const double[:, ::1] B, double[::1] theta,
                double[::1] mom, bint refresh, bint identity_mass,
                const double[:, ::1] chol_mass, const double[:, ::1] inv_mass,
                double step_size, double friction, Py_ssize_t batch_size, Py_ssize_t n_steps,
                generator, int64_t[::1] idx, double[::1] g, double[::1] tmp, double[::1] v):
    """One SGHMC iteration (ALGORITHMS.md §4.4) in place: optionally refresh
    ``mom ~ N(0, M)``, then ``n_steps`` steps
    ``theta += eps M^-1 p; p += eps g_hat(theta) - eps C M^-1 p_old + N(0, 2 C eps)``
    with ``C = friction * M`` (so ``C M^-1 p = friction p``, noise ``chol(M) N(0, 2 friction eps)``).
    Returns the steps completed."""
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef Py_ssize_t n = X.shape[0], p = theta.shape[0], s, i, j, l
    cdef double scale = <double> n / <double> batch_size
    cdef double noise = sqrt(2.0 * friction * step_size), acc
    cdef Py_ssize_t done = n_steps
    with generator.bit_generator.lock, nogil:
        if refresh:
            for j in range(p):
                tmp[j] = rng_normal(bg)
            for j in range(p):
                if identity_mass:
                    mom[j] = tmp[j]
                else:
                    acc = 0.0
                    for l in range(j + 1):
                        acc += chol_mass[j, l] * tmp[l]
                    mom[j] = acc
        for s in range(n_steps):
            for j in range(p):
                if identity_mass:
                    v[j] = mom[j]
                else:
                    acc = 0.0
                    for l in range(p):
                        acc += inv_mass[j, l] * mom[l]
                    v[j] = acc
            for j in range(p):
                theta[j] += step_size * v[j]
            for i in range(batch_size):
                idx[i] = rng_index(bg, n)
            _sg_gradient(family, order, X, y, intercept, phi, prior_prec, eta_star,
                         theta_star, A, B, &theta[0], &idx[0], batch_size, scale,
                         &g[0], &tmp[0], p)
            for j in range(p):
                tmp[j] = rng_normal(bg)
            for j in range(p):
                if identity_mass:
                    acc = tmp[j]
                else:
                    acc = 0.0
                    for l in range(j + 1):
                        acc += chol_mass[j, l] * tmp[l]
                # C M^-1 p_old with C = friction * M is friction * p_old
                mom[j] += step_size * (g[j] - friction * mom[j]) + noise * acc
            if not (_all_finite(&theta[0], p) and _all_finite(&mom[0], p)):
                done = s
                break
    return done


cdef inline Py_ssize_t _block_grad(int family, const floating[:, ::1] X, const double[::1] y,
                               bint intercept, double phi, const double[::1] prior_prec,
                               const double[::1] dummy, const double* theta,
                               const int64_t* perm, Py_ssize_t n, Py_ssize_t n_blocks,
                               Py_ssize_t batch_size, Py_ssize_t J, double* out,
                               double* tmp, Py_ssize_t p) noexcept nogil:
    """out = n_b grad V_J(theta), V_J = sum_{i in B_J} (-l_i - log p / n);
    returns |B_J| (the data points evaluated)."""
    cdef Py_ssize_t start = J * batch_size, size, j
    size = batch_size if start + batch_size <= n else n - start
    _lik_grad(family, -1, X, y, intercept, phi, dummy, theta, perm + start, size, tmp, p)
    for j in range(p):
        out[j] = n_blocks * (-tmp[j] + (<double> size / <double> n) * prior_prec[j] * theta[j])
    return size


cdef inline double _ewsg_energy(const double* g, const double* r, double gamma, double coef,
                                Py_ssize_t p) noexcept nogil:
    """h / (2 sigma^2) * ||gamma r + g||^2 (coef = h / (2 sigma^2))."""
    cdef double s = 0.0, t
    cdef Py_ssize_t j
    for j in range(p):
        t = gamma * r[j] + g[j]
        s += t * t
    return coef * s


def ewsg_steps(int family, const floating[:, ::1] X, const double[::1] y, bint intercept,
               double phi, const double[::1] prior_prec, double[::1] theta, double[::1] r,
               int64_t[::1] perm, int64_t[::1] chain, Py_ssize_t batch_size,
               Py_ssize_t index_chain_length, bint persistent, double step_size, double gamma,
               Py_ssize_t n_steps, generator, double[::1] g_cur, double[::1] g_prop,
               double[::1] tmp):
    """``n_steps`` EWSG steps (ALGORITHMS.md §5) in place.

    ``perm`` holds the current random partition (block J = perm[J b : (J+1) b]);
    ``chain = [J, blocks evaluated since the last reshuffle]`` (J = -1: none).
    The partition is reshuffled at the start of a step once ``n_b`` blocks
    (one data pass) have been evaluated. Returns ``(steps completed, index
    proposals accepted, data points evaluated)``.
    """
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef Py_ssize_t n = X.shape[0], p = theta.shape[0], s, i, j
    cdef Py_ssize_t n_blocks = (n + batch_size - 1) // batch_size
    cdef Py_ssize_t J = chain[0], Jp
    cdef int64_t since = chain[1]
    cdef double sigma = sqrt(2.0 * gamma), coef = step_size / (2.0 * sigma * sigma)
    cdef double noise = sigma * sqrt(step_size), e_cur, e_prop, th
    cdef double[::1] dummy = np.zeros(1)
    cdef Py_ssize_t done = n_steps, n_acc = 0, n_data = 0
    with generator.bit_generator.lock, nogil:
        for s in range(n_steps):
            if since >= n_blocks:
                for i in range(n - 1):
                    fisher_yates_step(bg, &perm[0], i, n)
                since = 0
            if not persistent or J < 0:
                J = rng_index(bg, n_blocks)
            n_data += _block_grad(family, X, y, intercept, phi, prior_prec, dummy,
                                              &theta[0], &perm[0], n, n_blocks, batch_size, J,
                                              &g_cur[0], &tmp[0], p)
            since += 1
            e_cur = _ewsg_energy(&g_cur[0], &r[0], gamma, coef, p)
            for i in range(index_chain_length):
                Jp = rng_index(bg, n_blocks)
                n_data += _block_grad(family, X, y, intercept, phi, prior_prec,
                                      dummy, &theta[0], &perm[0], n, n_blocks,
                                                  batch_size, Jp, &g_prop[0], &tmp[0], p)
                since += 1
                e_prop = _ewsg_energy(&g_prop[0], &r[0], gamma, coef, p)
                if log(rng_uniform_open(bg)) < e_prop - e_cur:
                    J = Jp
                    e_cur = e_prop
                    for j in range(p):
                        g_cur[j] = g_prop[j]
                    n_acc += 1
            # Euler-Maruyama: theta uses r_k, r uses grad at theta_k
            for j in range(p):
                th = theta[j] + step_size * r[j]
                r[j] = r[j] - step_size * (g_cur[j] + gamma * r[j]) + noise * rng_normal(bg)
                theta[j] = th
            if not (_all_finite(&theta[0], p) and _all_finite(&r[0], p)):
                done = s
                break
    chain[0] = J
    chain[1] = since
    return done, n_acc, n_data


# ---- helpers shared with the NumPy path (same draws, same order) --------------------
def eta_all(const floating[:, ::1] X, const double[::1] theta, bint intercept,
            double[::1] out):
    """out[k] = x_k . theta (+ intercept) for every row (the eta*_k of §1.2)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], k
    with nogil:
        for k in range(n):
            out[k] = _row_dot(&X[k, 0], &theta[0], d, intercept)
    return np.asarray(out)


def draw_index(generator, int64_t n):
    """One uniform index in [0, n)."""
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef int64_t out
    with generator.bit_generator.lock, nogil:
        out = rng_index(bg, n)
    return out


def draw_normals(generator, Py_ssize_t k):
    """k standard normals (the kernels' ``rng_normal`` stream)."""
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef double[::1] out = np.empty(k)
    cdef Py_ssize_t i
    with generator.bit_generator.lock, nogil:
        for i in range(k):
            out[i] = rng_normal(bg)
    return np.asarray(out)


def draw_log_uniform(generator):
    """log u, u uniform on the open interval (0, 1)."""
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef double u
    with generator.bit_generator.lock, nogil:
        u = rng_uniform_open(bg)
    return log(u)


def shuffle_inplace(generator, int64_t[::1] perm):
    """Uniform Fisher-Yates reshuffle of ``perm`` in place."""
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef Py_ssize_t n = perm.shape[0], i
    with generator.bit_generator.lock, nogil:
        for i in range(n - 1):
            fisher_yates_step(bg, &perm[0], i, n)
