/* The GLM families' per-datum terms over blocks of data, as plain C that compiles to SIMD
 * code (the exp and log1p of _simd.h, which includes this file after them): the link
 * terms of the logistic and Poisson families, and the logistic Taylor control
 * variates' constants and residuals. Included by _simd.h only. */
#ifndef BS_SIMD_GLM_H
#define BS_SIMD_GLM_H

/* ---- GLM terms: ll = log-likelihood, r = dl/deta, w = -d2l/deta2 -------------------- */
/* logistic: b(eta) = softplus(eta); one exp of -|eta| serves softplus and sigmoid.
 * In blocks of BS_TERMS_BLOCK data, one loop per polynomial (exp; the sigmoid and
 * its derivative; log1p only when the log-likelihood is wanted): the long dependency
 * chains of Horner's rule are then the loop's only work, and the processor overlaps
 * many iterations of each (one loop holding both chains ran at about half the speed).
 * The arithmetic of each datum is the same in any block, lane or tail. */
#define BS_TERMS_BLOCK 256
BS_CLONES
static void bs_logistic_terms(ptrdiff_t m, const double* BS_RESTRICT y,
                              const double* BS_RESTRICT eta, int want_ll,
                              double* BS_RESTRICT ll, double* BS_RESTRICT r,
                              double* BS_RESTRICT w)
{
    double eb[BS_TERMS_BLOCK], qb[BS_TERMS_BLOCK];
    ptrdiff_t s, i, c;
    for (s = 0; s < m; s += c) {
        c = m - s < BS_TERMS_BLOCK ? m - s : BS_TERMS_BLOCK;
        const double* BS_RESTRICT a = eta + s;
        const double* BS_RESTRICT yb = y + s;
        for (i = 0; i < c; i++)
            eb[i] = bs_exp(-fabs(a[i]));
        for (i = 0; i < c; i++) {
            double e = eb[i], q = 1.0 / (1.0 + e);
            r[s + i] = yb[i] - (a[i] >= 0.0 ? 1.0 : e) * q;
            w[s + i] = (e * q) * q;
            qb[i] = q;
        }
        if (want_ll)
            for (i = 0; i < c; i++) {
                double e = eb[i];
                ll[s + i] = yb[i] * a[i]
                            - ((a[i] > 0.0 ? a[i] : 0.0) + bs_log1p01_q(e, 1.0 + e, qb[i]));
            }
    }
}

/* ---- logistic Taylor control variates (doc/algorithms/building_blocks.rst) ---------- */
/* The constants at eta*: c0 = softplus(eta*), c1 = sigmoid(eta*), c2 = sigmoid(eta*)
 * sigmoid(-eta*) (p (1 - p) without cancellation), from one exp of -|eta*| (sigmoid(-a)
 * has the same e = exp(-|a|)). Before these block functions each constant was a scalar
 * call with its own exp; a subsampled decision or gradient spends a third of its time
 * here on rows far from eta*. */
BS_CLONES
static void bs_logistic_cv_consts(ptrdiff_t m, const double* BS_RESTRICT eta_star,
                                  double* BS_RESTRICT c0, double* BS_RESTRICT c1,
                                  double* BS_RESTRICT c2)
{
    double eb[BS_TERMS_BLOCK];
    ptrdiff_t s, i, c;
    for (s = 0; s < m; s += c) {
        c = m - s < BS_TERMS_BLOCK ? m - s : BS_TERMS_BLOCK;
        const double* BS_RESTRICT a = eta_star + s;
        for (i = 0; i < c; i++)
            eb[i] = bs_exp(-fabs(a[i]));
        for (i = 0; i < c; i++) {
            double e = eb[i], q = 1.0 / (1.0 + e);
            double s1 = (a[i] >= 0.0 ? 1.0 : e) * q, s2 = (-a[i] >= 0.0 ? 1.0 : e) * q;
            c1[s + i] = s1;
            c2[s + i] = s1 * s2;
        }
        for (i = 0; i < c; i++)
            c0[s + i] = (a[i] > 0.0 ? a[i] : 0.0) + bs_log1p01(eb[i]);
    }
}

/* The residuals d = l - q and d' = dd/deta of the logistic term at eta against its
 * Taylor expansion of order 0, 1 or 2 at eta* (minus the Taylor remainder of b =
 * softplus; the y terms cancel from order 1 on). For |delta| = |eta - eta*| < 0.1 by
 * the remainder's series to order 8 from the derivatives of b at eta* (s = sigmoid,
 * w = s(1-s), t = 1-2s): b3 = w t, b4 = w(1-6w), b5 = w t (1-12w), b6 = w(1-30w+120w^2),
 * b7 = w t (1-60w+360w^2), b8 = w(1-126w+1680w^2-5040w^3); k_j = b_j / j!. Its
 * truncation error is below 1e-14 in absolute value there, where the direct form
 * b(eta) - c0 - c1 delta - c2 delta^2 / 2 loses every digit to cancellation as theta
 * -> theta*. Beyond, directly. Both forms are computed for every datum and one is
 * selected (no branch: a SIMD loop), each with the arithmetic of the scalar form, so a
 * datum's residual does not depend on its place in a block. The first order's
 * residual is the second's with the quadratic term added back. */
BS_CLONES
static void bs_logistic_cv_residuals(ptrdiff_t m, int order, const double* BS_RESTRICT y,
                                     const double* BS_RESTRICT eta,
                                     const double* BS_RESTRICT eta_star,
                                     const double* BS_RESTRICT c0,
                                     const double* BS_RESTRICT c1,
                                     const double* BS_RESTRICT c2, double* BS_RESTRICT d,
                                     double* BS_RESTRICT dp)
{
    double eb[BS_TERMS_BLOCK], lb[BS_TERMS_BLOCK];
    ptrdiff_t s, i, c;
    for (s = 0; s < m; s += c) {
        c = m - s < BS_TERMS_BLOCK ? m - s : BS_TERMS_BLOCK;
        const double* BS_RESTRICT a = eta + s;
        for (i = 0; i < c; i++)
            eb[i] = bs_exp(-fabs(a[i]));
        for (i = 0; i < c; i++)
            lb[i] = bs_log1p01(eb[i]);
        if (order == 0) {
            for (i = 0; i < c; i++) {
                double e = eb[i], delta = a[i] - eta_star[s + i];
                double sp = (a[i] > 0.0 ? a[i] : 0.0) + lb[i];
                double sg = (a[i] >= 0.0 ? 1.0 : e) * (1.0 / (1.0 + e));
                d[s + i] = y[s + i] * delta - (sp - c0[s + i]);
                dp[s + i] = y[s + i] - sg;
            }
            continue;
        }
        for (i = 0; i < c; i++) {
            double e = eb[i], delta = a[i] - eta_star[s + i];
            double C0 = c0[s + i], C1 = c1[s + i], C2 = c2[s + i];
            /* the series */
            double t = 1.0 - 2.0 * C1;
            double k3 = C2 * t / 6.0;
            double k4 = C2 * (1.0 - 6.0 * C2) / 24.0;
            double k5 = C2 * t * (1.0 - 12.0 * C2) / 120.0;
            double k6 = C2 * (1.0 + C2 * (-30.0 + 120.0 * C2)) / 720.0;
            double k7 = C2 * t * (1.0 + C2 * (-60.0 + 360.0 * C2)) / 5040.0;
            double k8 = C2 * (1.0 + C2 * (-126.0 + C2 * (1680.0 - 5040.0 * C2))) / 40320.0;
            double s2 = -delta * delta * delta * (
                k3 + delta * (k4 + delta * (k5 + delta * (k6 + delta * (k7 + delta * k8)))));
            double s2p = -delta * delta * (
                3.0 * k3 + delta * (4.0 * k4 + delta * (5.0 * k5 + delta * (
                    6.0 * k6 + delta * (7.0 * k7 + delta * 8.0 * k8)))));
            /* the direct form */
            double sp = (a[i] > 0.0 ? a[i] : 0.0) + lb[i];
            double sg = (a[i] >= 0.0 ? 1.0 : e) * (1.0 / (1.0 + e));
            double r2 = -(sp - C0 - C1 * delta - 0.5 * C2 * delta * delta);
            double r2p = -(sg - C1 - C2 * delta);
            int near = fabs(delta) < 0.1;
            double d2 = near ? s2 : r2, d2p = near ? s2p : r2p;
            if (order == 2) {
                d[s + i] = d2;
                dp[s + i] = d2p;
            } else {
                d[s + i] = d2 - 0.5 * C2 * delta * delta;
                dp[s + i] = d2p - C2 * delta;
            }
        }
    }
}

/* Poisson: b = exp; log y! (lgamma, scalar) only when the log-likelihood is wanted */
BS_CLONES
static void bs_poisson_terms(ptrdiff_t m, const double* BS_RESTRICT y,
                             const double* BS_RESTRICT eta, int want_ll,
                             double* BS_RESTRICT ll, double* BS_RESTRICT r,
                             double* BS_RESTRICT w)
{
    ptrdiff_t i;
    for (i = 0; i < m; i++) {
        double mu = bs_exp(eta[i]);
        r[i] = y[i] - mu;
        w[i] = mu;
        if (want_ll)
            ll[i] = y[i] * eta[i] - mu;
    }
    if (want_ll)
        for (i = 0; i < m; i++)
            ll[i] -= lgamma(y[i] + 1.0);
}

#endif /* BS_SIMD_GLM_H */
