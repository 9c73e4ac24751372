/* The multinomial (softmax) Taylor control variates' residuals over a block of data, as
 * plain C that compiles to SIMD code (bs_expm1 and bs_log1p_q of _simd.h, which includes
 * this file after them). The derivation and the per-datum form are in
 * _softmax_terms.pxd (softmax_residual, which calls this function for one datum, so a
 * datum's residual has the same bits in a block or alone). Included by _simd.h only.
 *
 * Per datum with K classes: K expm1 and one log1p. Called per datum, these are K + 1
 * dependent libm calls (about 60 ns a datum at K = 7, half a 7-class HMC-ECS fit);
 * here each of the block's loops is one polynomial over many independent values. */
#ifndef BS_SIMD_SOFTMAX_H
#define BS_SIMD_SOFTMAX_H

/* doubles of scratch for the centred deviations c_k of a block's data, and the most
 * data in a block */
#define BS_SOFTMAX_SCRATCH 2048
#define BS_SOFTMAX_ROWS 256

/* lse_i = log sum_k exp(eta_ik) for `count` data (eta row-major, count x K), the largest
 * eta_ik taken out first; P (count x K, if not NULL) receives softmax(eta_i). The exps
 * of a block of data run as one loop (bs_exp, SIMD code), then each datum's sum in
 * class order and its log (bs_log1p_q of s - 1, exact for s in [1, K]): a datum's
 * results have the same bits in any block. The C library's exp and log, called datum
 * by datum, took about a third of a 7-class full pass. */
BS_CLONES
static void bs_softmax_lse_block(ptrdiff_t count, ptrdiff_t K, const double* BS_RESTRICT eta,
                                 double* BS_RESTRICT lse, double* BS_RESTRICT P)
{
    double cb[BS_SOFTMAX_SCRATCH], mb[BS_SOFTMAX_ROWS], sb[BS_SOFTMAX_ROWS];
    ptrdiff_t nb = BS_SOFTMAX_SCRATCH / K, s, i, j, k, c;
    nb = nb > BS_SOFTMAX_ROWS ? BS_SOFTMAX_ROWS : nb;
    for (s = 0; s < count; s += c) {
        c = count - s < nb ? count - s : nb;
        if (c < 1)
            c = 1;              /* K > BS_SOFTMAX_SCRATCH: one datum at a time */
        /* e = exp(eta - max), in P's rows or the scratch */
        double* e = P != NULL ? P + s * K : cb;
        for (i = 0; i < c; i++) {
            const double* x = eta + (s + i) * K;
            double mx = x[0];
            for (k = 1; k < K; k++)
                if (x[k] > mx)
                    mx = x[k];
            mb[i] = mx;
        }
        if (P != NULL || nb >= 1) {
            for (i = 0; i < c; i++)
                for (k = 0; k < K; k++)
                    e[i * K + k] = eta[(s + i) * K + k] - mb[i];
            for (j = 0; j < c * K; j++)
                e[j] = bs_exp(e[j]);
            for (i = 0; i < c; i++) {
                double sum = 0.0;
                for (k = 0; k < K; k++)
                    sum += e[i * K + k];
                sb[i] = sum;
            }
        } else {
            double sum = 0.0;
            for (k = 0; k < K; k++)
                sum += bs_exp(eta[s * K + k] - mb[0]);
            sb[0] = sum;
        }
        for (i = 0; i < c; i++)
            lse[s + i] = mb[i] + bs_log1p_q(sb[i] - 1.0, sb[i], 1.0 / sb[i]);
        if (P != NULL)
            for (i = 0; i < c; i++)
                for (k = 0; k < K; k++)
                    e[i * K + k] /= sb[i];
    }
}

/* lse(eta) of one datum: bs_softmax_lse_block's block of one (p: softmax(eta) if not
 * NULL) */
static inline double bs_softmax_lse(ptrdiff_t K, const double* BS_RESTRICT eta,
                                    double* BS_RESTRICT p)
{
    double lse;
    bs_softmax_lse_block(1, K, eta, &lse, p);
    return lse;
}

/* l_i = eta_{i y_i} - lse_i and (if R is not NULL) r_ik = [k == y_i] - p_ik for `count`
 * data; P (count x K, if not NULL) receives the probabilities p_ik (R needs them: with R
 * and without P, R's rows hold them first) */
BS_CLONES
static void bs_softmax_terms_block(ptrdiff_t count, ptrdiff_t K, const double* BS_RESTRICT y,
                                   const double* BS_RESTRICT eta, double* BS_RESTRICT L,
                                   double* BS_RESTRICT R, double* BS_RESTRICT P)
{
    ptrdiff_t i, k;
    double* p = P != NULL ? P : R;
    bs_softmax_lse_block(count, K, eta, L, p);
    for (i = 0; i < count; i++) {
        ptrdiff_t yi = (ptrdiff_t) y[i];
        L[i] = eta[i * K + yi] - L[i];
        if (R != NULL) {
            for (k = 0; k < K; k++)
                R[i * K + k] = -p[i * K + k];
            R[i * K + yi] += 1.0;
        }
    }
}

/* The end of one datum's residual (eta, cache: the datum's K predictors and its cache
 * [eta*, p*, lse(eta*)]; pd = p*.delta; var = sum_k p*_k c_k^2; Dc = log1p(u); t = 1 /
 * (1 + u); dp, if not NULL, holds p*_k (1 + expm1(c_k)) and receives dd/deta_k). */
static inline double bs_softmax_finish(int order, ptrdiff_t K, ptrdiff_t y,
                                       const double* BS_RESTRICT eta,
                                       const double* BS_RESTRICT cache, double pd,
                                       double var, double Dc, double t,
                                       double* BS_RESTRICT dp)
{
    const double* es = cache;
    const double* ps = cache + K;
    ptrdiff_t k;
    if (dp != NULL)
        for (k = 0; k < K; k++)
            dp[k] *= t;                                  /* p = softmax(eta) */
    if (order == 0) {
        if (dp != NULL) {
            for (k = 0; k < K; k++)
                dp[k] = -dp[k];
            dp[y] += 1.0;
        }
        return ((eta[y] - es[y]) - pd) - Dc;
    }
    if (order == 1) {
        if (dp != NULL)
            for (k = 0; k < K; k++)
                dp[k] = -(dp[k] - ps[k]);
        return -Dc;
    }
    if (dp != NULL)
        for (k = 0; k < K; k++)
            dp[k] = -(dp[k] - ps[k] - ps[k] * ((eta[k] - es[k]) - pd));
    return -(Dc - 0.5 * var);
}

/* The residual of a datum with some |c_k| > 30 (or infinite): D - p*.delta as the direct
 * difference of log-sum-exps, where log1p(u) would overflow or lose the small terms */
static inline double bs_softmax_direct(int order, ptrdiff_t K, ptrdiff_t y,
                                       const double* BS_RESTRICT eta,
                                       const double* BS_RESTRICT cache, double pd,
                                       double var, double* BS_RESTRICT dp)
{
    double Dc = (bs_softmax_lse(K, eta, dp) - cache[2 * K]) - pd;
    /* dp holds p = softmax(eta): the finish's scaling by t = 1 leaves it */
    return bs_softmax_finish(order, K, y, eta, cache, pd, var, Dc, 1.0, dp);
}

/* The order-0/1/2 residuals D[i] (and DP[i K + k] = dD_i/deta_k if DP is not NULL) of
 * `count` data: class y[i], predictors eta[i K .. i K + K), cache at cache + i W. A
 * datum with some centred deviation |c_k| > 30 (or an infinite one) takes the direct
 * difference of log-sum-exps (bs_softmax_direct). */
BS_CLONES
static void bs_softmax_residuals(int order, ptrdiff_t count, ptrdiff_t K,
                                 const double* BS_RESTRICT y, const double* BS_RESTRICT eta,
                                 const double* BS_RESTRICT cache, ptrdiff_t W,
                                 double* BS_RESTRICT D, double* BS_RESTRICT DP)
{
    double cb[BS_SOFTMAX_SCRATCH];
    double pdb[BS_SOFTMAX_ROWS], varb[BS_SOFTMAX_ROWS], ub[BS_SOFTMAX_ROWS];
    double lb[BS_SOFTMAX_ROWS], tb[BS_SOFTMAX_ROWS];
    unsigned char big[BS_SOFTMAX_ROWS];
    ptrdiff_t nb = K > 0 ? BS_SOFTMAX_SCRATCH / K : BS_SOFTMAX_ROWS;
    ptrdiff_t s, i, j, k, c;
    nb = nb > BS_SOFTMAX_ROWS ? BS_SOFTMAX_ROWS : nb;
    for (s = 0; s < count; s += c) {
        c = count - s < nb ? count - s : nb;
        if (c < 1)
            c = 1;              /* K > BS_SOFTMAX_SCRATCH: one datum, no scratch */
        /* the centred deviations c_k = delta_k - p*.delta, their weighted variance */
        for (i = 0; i < c; i++) {
            const double* e = eta + (s + i) * K;
            const double* es = cache + (s + i) * W;
            const double* ps = es + K;
            double pd = 0.0, var = 0.0, ck;
            int small = 1;
            for (k = 0; k < K; k++)
                pd += ps[k] * (e[k] - es[k]);
            for (k = 0; k < K; k++) {
                ck = (e[k] - es[k]) - pd;
                var += ps[k] * ck * ck;
                small &= !(fabs(ck) > 30.0);
                if (nb >= 1)
                    cb[i * K + k] = ck;
            }
            pdb[i] = pd;
            varb[i] = var;
            big[i] = (unsigned char) !small;
        }
        /* u = sum_k p*_k expm1(c_k) (>= 0 up to rounding, by Jensen) and p*_k (1 + e_k) */
        if (nb >= 1) {
            for (j = 0; j < c * K; j++)
                cb[j] = bs_expm1(cb[j]);
            for (i = 0; i < c; i++) {
                const double* ps = cache + (s + i) * W + K;
                double u = 0.0;
                for (k = 0; k < K; k++)
                    u += ps[k] * cb[i * K + k];
                ub[i] = u;
                if (DP != NULL)
                    for (k = 0; k < K; k++)
                        DP[(s + i) * K + k] = ps[k] * (1.0 + cb[i * K + k]);
            }
        } else {
            const double* e = eta + s * K;
            const double* es = cache + s * W;
            const double* ps = es + K;
            double u = 0.0, ek;
            for (k = 0; k < K; k++) {
                ek = bs_expm1((e[k] - es[k]) - pdb[0]);
                u += ps[k] * ek;
                if (DP != NULL)
                    DP[s * K + k] = ps[k] * (1.0 + ek);
            }
            ub[0] = u;
        }
        /* D - p*.delta = log1p(u); p_k = p*_k e^{c_k} / (1 + u) */
        for (i = 0; i < c; i++) {
            double v = 1.0 + ub[i], t = 1.0 / v;
            tb[i] = t;
            lb[i] = bs_log1p_q(ub[i], v, t);
        }
        for (i = 0; i < c; i++) {
            const double* e = eta + (s + i) * K;
            const double* ch = cache + (s + i) * W;
            double* dp = DP == NULL ? NULL : DP + (s + i) * K;
            ptrdiff_t yi = (ptrdiff_t) y[s + i];
            D[s + i] = big[i] ? bs_softmax_direct(order, K, yi, e, ch, pdb[i], varb[i], dp)
                              : bs_softmax_finish(order, K, yi, e, ch, pdb[i], varb[i], lb[i],
                                                  tb[i], dp);
        }
    }
}

#endif /* BS_SIMD_SOFTMAX_H */
