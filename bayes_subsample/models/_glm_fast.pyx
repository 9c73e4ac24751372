# cython: language_level=3
"""Compiled GLM kernels: per-datum terms over an index array, gradient sums,
the fused full-data pass (log-likelihood, gradient, Hessian in one read of X),
and Taylor control-variate residuals.

Conventions: X is C-contiguous (n, d) float32 or float64; y float64 (n,);
theta float64 (p,) with p = d + intercept, the intercept (if any) last and
treated as a virtual column of ones (X is never copied to add it). Every
accumulation is in double. The Python side validates shapes and indices.
"""
import numpy as np
from cython.parallel cimport prange
from libc.stdint cimport int64_t
from bayes_subsample._typedefs cimport floating
from bayes_subsample.models._glm_terms cimport glm_terms, cv_residual

# rows per chunk of the full pass: the reduction is over fixed chunks in a
# fixed order, so the result does not depend on the number of threads
DEF CHUNK = 4096


cdef inline double row_dot(const floating* x, const double* theta, Py_ssize_t d,
                           bint intercept) noexcept nogil:
    # four independent accumulators: the additions overlap instead of waiting
    # on each other (a fixed order, so results do not depend on threads)
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t j, d4 = d - d % 4
    for j in range(0, d4, 4):
        s0 += x[j] * theta[j]
        s1 += x[j + 1] * theta[j + 1]
        s2 += x[j + 2] * theta[j + 2]
        s3 += x[j + 3] * theta[j + 3]
    for j in range(d4, d):
        s0 += x[j] * theta[j]
    s0 = (s0 + s1) + (s2 + s3)
    if intercept:
        s0 += theta[d]
    return s0


def eta(const floating[:, ::1] X, const double[::1] theta, bint intercept,
        const int64_t[::1] idx, double[::1] out):
    """out[i] = x_{idx[i]} . theta (+ intercept)."""
    cdef Py_ssize_t m = idx.shape[0], d = X.shape[1], i
    with nogil:
        for i in range(m):
            out[i] = row_dot(&X[idx[i], 0], &theta[0], d, intercept)


def loglik_terms(int family, const floating[:, ::1] X, const double[::1] y,
                 const double[::1] theta, bint intercept, double phi,
                 const int64_t[::1] idx, double[::1] out):
    """out[i] = log-likelihood of datum idx[i]."""
    cdef Py_ssize_t m = idx.shape[0], d = X.shape[1], i, k
    cdef double e, ll, r, w
    with nogil:
        for i in range(m):
            k = idx[i]
            e = row_dot(&X[k, 0], &theta[0], d, intercept)
            glm_terms(family, y[k], e, phi, True, &ll, &r, &w)
            out[i] = ll
    return np.asarray(out)


def grad_sum(int family, const floating[:, ::1] X, const double[::1] y,
             const double[::1] theta, bint intercept, double phi,
             const int64_t[::1] idx, double[::1] grad, bint want_ll):
    """grad[:] = sum_i grad l_{idx[i]}(theta); returns sum_i l_{idx[i]} (0 if not want_ll)."""
    cdef Py_ssize_t m = idx.shape[0], d = X.shape[1], i, j, k
    cdef double e, ll = 0.0, llsum = 0.0, r, w
    cdef const floating* x
    with nogil:
        for j in range(grad.shape[0]):
            grad[j] = 0.0
        for i in range(m):
            k = idx[i]
            x = &X[k, 0]
            e = row_dot(x, &theta[0], d, intercept)
            glm_terms(family, y[k], e, phi, want_ll, &ll, &r, &w)
            llsum += ll
            for j in range(d):
                grad[j] += r * x[j]
            if intercept:
                grad[d] += r
    return llsum


def grad_terms(int family, const floating[:, ::1] X, const double[::1] y,
               const double[::1] theta, bint intercept, double phi,
               const int64_t[::1] idx, double[:, ::1] out):
    """out[i, :] = grad l_{idx[i]}(theta) (per-datum gradients)."""
    cdef Py_ssize_t m = idx.shape[0], d = X.shape[1], i, j, k
    cdef double e, ll, r, w
    with nogil:
        for i in range(m):
            k = idx[i]
            e = row_dot(&X[k, 0], &theta[0], d, intercept)
            glm_terms(family, y[k], e, phi, False, &ll, &r, &w)
            for j in range(d):
                out[i, j] = r * X[k, j]
            if intercept:
                out[i, d] = r


cdef void _chunk_pass(int family, const floating[:, ::1] X, const double[::1] y,
                      const double[::1] theta, bint intercept, double phi,
                      Py_ssize_t start, Py_ssize_t stop, bint want_ll, bint want_grad,
                      bint want_hess, double* ll_out, double* g, double* h,
                      Py_ssize_t p) noexcept nogil:
    cdef Py_ssize_t d = X.shape[1], i, j, l
    cdef double e, ll = 0.0, llsum = 0.0, r, w, xj
    cdef const floating* x
    for i in range(start, stop):
        x = &X[i, 0]
        e = row_dot(x, &theta[0], d, intercept)
        glm_terms(family, y[i], e, phi, want_ll, &ll, &r, &w)
        llsum += ll
        if want_grad:
            for j in range(d):
                g[j] += r * x[j]
            if intercept:
                g[d] += r
        if want_hess:
            # lower triangle of sum_k w_k x_k x_k^T
            for j in range(d):
                xj = w * x[j]
                for l in range(j + 1):
                    h[j * p + l] += xj * x[l]
            if intercept:
                for l in range(d):
                    h[d * p + l] += w * x[l]
                h[d * p + d] += w
    ll_out[0] = llsum


def full_pass(int family, const floating[:, ::1] X, const double[::1] y,
              const double[::1] theta, bint intercept, double phi,
              bint want_ll, double[::1] grad, double[:, ::1] hess, int n_threads):
    """One read of X: returns sum_k l_k; fills grad = sum_k grad l_k (if given)
    and hess = sum_k Hessian l_k (if given, symmetric, negative semi-definite).

    The reduction runs over fixed chunks of rows in a fixed order, so the
    result is bit-identical for any n_threads.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1]
    cdef Py_ssize_t p = d + (1 if intercept else 0)
    cdef Py_ssize_t n_chunks = (n + CHUNK - 1) // CHUNK, c, j, l
    cdef bint want_grad = grad is not None
    cdef bint want_hess = hess is not None
    cdef double[::1] ll_c = np.zeros(max(n_chunks, 1))
    cdef double[:, ::1] g_c = np.zeros((max(n_chunks, 1), p if want_grad else 1))
    cdef double[:, ::1] h_c = np.zeros((max(n_chunks, 1), p * p if want_hess else 1))
    cdef double total = 0.0
    if n_threads < 1:
        n_threads = 1
    with nogil:
        if n_threads > 1 and n_chunks > 1:
            for c in prange(n_chunks, schedule="static", num_threads=n_threads):
                _chunk_pass(family, X, y, theta, intercept, phi, c * CHUNK,
                            min((c + 1) * CHUNK, n), want_ll, want_grad, want_hess,
                            &ll_c[c], &g_c[c, 0], &h_c[c, 0], p)
        else:
            for c in range(n_chunks):
                _chunk_pass(family, X, y, theta, intercept, phi, c * CHUNK,
                            min((c + 1) * CHUNK, n), want_ll, want_grad, want_hess,
                            &ll_c[c], &g_c[c, 0], &h_c[c, 0], p)
        for c in range(n_chunks):
            total += ll_c[c]
        if want_grad:
            for j in range(p):
                grad[j] = 0.0
            for c in range(n_chunks):
                for j in range(p):
                    grad[j] += g_c[c, j]
        if want_hess:
            for j in range(p):
                for l in range(j + 1):
                    hess[j, l] = 0.0
            for c in range(n_chunks):
                for j in range(p):
                    for l in range(j + 1):
                        hess[j, l] -= h_c[c, j * p + l]
            for j in range(p):
                for l in range(j):
                    hess[l, j] = hess[j, l]
    return total


def cv_terms(int family, int order, const floating[:, ::1] X, const double[::1] y,
             const double[::1] theta, const double[::1] theta_star, bint intercept,
             double phi, const int64_t[::1] idx, double[::1] d_out, double[::1] dp_out):
    """Control-variate residuals d_k and d'_k = dd_k/deta_k for k = idx[i]."""
    cdef Py_ssize_t m = idx.shape[0], d = X.shape[1], i, k
    cdef double e, es
    with nogil:
        for i in range(m):
            k = idx[i]
            e = row_dot(&X[k, 0], &theta[0], d, intercept)
            es = row_dot(&X[k, 0], &theta_star[0], d, intercept)
            cv_residual(family, order, y[k], e, es, phi, &d_out[i], &dp_out[i])


def cv_grad_sum(int family, int order, const floating[:, ::1] X, const double[::1] y,
                const double[::1] theta, const double[::1] theta_star, bint intercept,
                double phi, const int64_t[::1] idx, double[::1] grad):
    """grad[:] = sum_i d'_{idx[i]} x_{idx[i]} (the subsample part of a
    control-variate gradient estimate); returns sum_i d_{idx[i]}."""
    cdef Py_ssize_t m = idx.shape[0], d = X.shape[1], i, j, k
    cdef double e, es, dk, dpk, dsum = 0.0
    cdef const floating* x
    with nogil:
        for j in range(grad.shape[0]):
            grad[j] = 0.0
        for i in range(m):
            k = idx[i]
            x = &X[k, 0]
            e = row_dot(x, &theta[0], d, intercept)
            es = row_dot(x, &theta_star[0], d, intercept)
            cv_residual(family, order, y[k], e, es, phi, &dk, &dpk)
            dsum += dk
            for j in range(d):
                grad[j] += dpk * x[j]
            if intercept:
                grad[d] += dpk
    return dsum


def cv_residual_scalar(int family, int order, double y, double eta, double eta_star,
                       double phi):
    """(d, d') for one datum from its linear predictors (test helper)."""
    cdef double dk, dpk
    cv_residual(family, order, y, eta, eta_star, phi, &dk, &dpk)
    return dk, dpk


def row_norm_max(const floating[:, ::1] X, bint intercept):
    """max_k ||x_k|| (with the virtual intercept column if any)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], i, j
    cdef double s, best = 0.0
    with nogil:
        for i in range(n):
            s = 1.0 if intercept else 0.0
            for j in range(d):
                s += (<double> X[i, j]) * X[i, j]   # in double also for float32 X
            if s > best:
                best = s
    return best ** 0.5
