/* Branch-free exp, expm1 and log1p as plain C arithmetic, so that a loop over them
 * compiles to SIMD code (the block functions of _simd.h, _simd_glm.h and
 * _simd_softmax.h). Included by _simd.h only.
 *
 * Accuracy (tested against NumPy in tests/test_simd.py): bs_exp within 2 ulp of exp on
 * [-708, 709.78] (0 below -708, +inf above log(DBL_MAX), NaN for NaN); bs_log1p01 within
 * 2 ulp of log1p on [0, 1]; bs_expm1 within 2 ulp of expm1; bs_log1p within 2 ulp of
 * log1p on [-0.5, inf). No fused multiply-add is formed (the package builds with
 * -ffp-contract=off), so a SIMD lane and the scalar tail give the same bits. */
#ifndef BS_SIMD_MATH_H
#define BS_SIMD_MATH_H

/* exp(r) - 1 for xc = k ln2 + r with |r| <= ln2/2 (Cody-Waite, ln2 split so k ln2_hi is
 * exact), by the Taylor polynomial of degree 13 (truncation below 5e-18 relative; the
 * leading r added last, so the relative accuracy near r = 0 is kept); *kd receives
 * k + 1.5 * 2^52: k is rounded by that shifter, whose low mantissa bits are k itself
 * (no double -> int conversion, which AVX2 lacks). xc within [-708, 709.78]. */
static inline double bs_exp_reduced(double xc, double* kd_out)
{
    const double shifter = 6755399441055744.0;         /* 1.5 * 2^52 */
    const double log2e = 1.4426950408889634074;
    const double ln2_hi = 6.93147180369123816490e-01;  /* 32 significant bits */
    const double ln2_lo = 1.90821492927058770002e-10;
    double kd = xc * log2e + shifter;
    double k = kd - shifter;
    double r = (xc - k * ln2_hi) - k * ln2_lo;
    double p = 1.0 / 6227020800.0;                     /* 1/13! */
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    *kd_out = kd;
    return p * r * r + r;                              /* exp(r) - 1 */
}

/* 2^(k-1) from bs_exp_reduced's kd, k in [-1021, 1024] (a normal number) */
static inline double bs_exp_half_scale(double kd)
{
    uint64_t kb, sb;
    double half;
    memcpy(&kb, &kd, sizeof kb);
    sb = (kb + 1022u) << 52;
    memcpy(&half, &sb, sizeof half);
    return half;
}

/* exp(x) = 2^k (1 + p), put together as 2 (2^(k-1) + 2^(k-1) p) so that k = 1024 does
 * not overflow before log(DBL_MAX) */
static inline double bs_exp(double x)
{
    double kd;
    double xc = x < -708.0 ? -708.0 : (x > 709.78 ? 709.78 : x);
    double p = bs_exp_reduced(xc, &kd);
    double scale = bs_exp_half_scale(kd);
    double res = 2.0 * (scale + scale * p);
    /* beyond the clamps: 0 below -708 (where libm returns numbers below 3.3e-308,
     * subnormal from -708.40), +inf above log(DBL_MAX), as libm */
    res = x < -708.0 ? 0.0 : res;
    res = x > 709.782712893384 ? HUGE_VAL : res;
    return res;
}

/* expm1(x) = (2^k - 1) + 2^k p, where 2^k - 1 is exact for |k| <= 53 and the tiny p of
 * k = 0 is returned as it is. -1 below -708 (the true value rounds to -1 from -38),
 * +inf above log(DBL_MAX), NaN for NaN. */
static inline double bs_expm1(double x)
{
    const double shifter = 6755399441055744.0;
    double kd;
    double xc = x < -708.0 ? -708.0 : (x > 709.78 ? 709.78 : x);
    double p = bs_exp_reduced(xc, &kd);
    double k = kd - shifter;
    double half = bs_exp_half_scale(kd);
    double t = 2.0 * half;                   /* 2^k: +inf for k = 1024 */
    double res = (t - 1.0) + t * p;
    /* k = 1024 (x above 709.43): 2^k overflows alone, the product 2^(k-1) (1 + p) 2
     * only past log(DBL_MAX) (and 1 is below its ulp) */
    res = k > 1000.0 ? 2.0 * (half + half * p) : res;
    res = x < -708.0 ? -1.0 : res;
    res = x > 709.782712893384 ? HUGE_VAL : res;
    return res;
}

/* log m for m in [sqrt(1/2), sqrt(2)): log m = 2 atanh(s), s = f / (2 + f), f = m - 1
 * (exact: Sterbenz), |s| < 0.1716, by its series to s^21 (truncation below 3e-18
 * relative), written as fdlibm's k_log: f - (hfsq - s (hfsq + R)), hfsq = f^2 / 2, R =
 * 2 s^2 q, so that the leading f stays exact */
static inline double bs_log_mantissa(double m)
{
    double f = m - 1.0;
    double s = f / (2.0 + f);
    double z = s * s;
    double q = 1.0 / 21.0;
    q = q * z + 1.0 / 19.0;
    q = q * z + 1.0 / 17.0;
    q = q * z + 1.0 / 15.0;
    q = q * z + 1.0 / 13.0;
    q = q * z + 1.0 / 11.0;
    q = q * z + 1.0 / 9.0;
    q = q * z + 1.0 / 7.0;
    q = q * z + 1.0 / 5.0;
    q = q * z + 1.0 / 3.0;
    double hfsq = 0.5 * f * f;
    double R = 2.0 * z * q;
    return f - (hfsq - s * (hfsq + R));
}

/* log1p(x) for x in [0, 1]: u = 1 + x, with the rounding error c of that sum carried
 * (as fdlibm's log1p does; c = (x - (u - 1)) inv_u with inv_u = 1 / u, which the
 * logistic terms have already: one division less); u = 2^k m with m in
 * [sqrt(1/2), sqrt(2)), k in {0, 1}; log m by bs_log_mantissa. */
static inline double bs_log1p01_q(double x, double u, double inv_u)
{
    const double ln2_hi = 6.93147180369123816490e-01;
    const double ln2_lo = 1.90821492927058770002e-10;
    double c = (x - (u - 1.0)) * inv_u;                  /* log(1 + x) = log(u) + c */
    double m = u > 1.4142135623730951 ? 0.5 * u : u;
    double k = u > 1.4142135623730951 ? 1.0 : 0.0;
    double logm = bs_log_mantissa(m);
    return k * ln2_hi + ((logm + c) + k * ln2_lo);
}

/* log1p(x) for x in [0, 1], the same bits as bs_log1p01_q(x, 1 + x, 1 / (1 + x)) */
static inline double bs_log1p01(double x)
{
    double u = 1.0 + x;
    return bs_log1p01_q(x, u, 1.0 / u);
}

/* log1p(x) for x >= -0.5 (and +inf, NaN): u = 1 + x with the rounding error of that sum
 * carried as in bs_log1p01_q (c = (x - (u - 1)) inv_u, inv_u = 1 / u given: the
 * softmax residuals need it too; u - 1 is exact for u >= 1/2); u = 2^k m with m in
 * [sqrt(1/2), sqrt(2)), k from the exponent field (put in a double by the 2^52
 * shifter, as bs_exp takes k out: no int -> double conversion, which AVX2 lacks),
 * log m by bs_log_mantissa. */
static inline double bs_log1p_q(double x, double u, double inv_u)
{
    const double ln2_hi = 6.93147180369123816490e-01;
    const double ln2_lo = 1.90821492927058770002e-10;
    double c = (x - (u - 1.0)) * inv_u;
    uint64_t ub, mb, kb;
    memcpy(&ub, &u, sizeof ub);
    /* m in [1, 2) (exponent field 1023), then halved above sqrt(2) */
    mb = (ub & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    kb = ((ub >> 52) & 0x7ffu) | 0x4330000000000000ull;   /* 2^52 + biased exponent */
    double m, kd;
    memcpy(&m, &mb, sizeof m);
    memcpy(&kd, &kb, sizeof kd);
    double k = (kd - 4503599627370496.0) - 1023.0;
    k = m > 1.4142135623730951 ? k + 1.0 : k;
    m = m > 1.4142135623730951 ? 0.5 * m : m;
    double logm = bs_log_mantissa(m);
    double res = k * ln2_hi + ((logm + c) + k * ln2_lo);
    res = u == HUGE_VAL ? HUGE_VAL : res;
    res = x != x ? x : res;
    return res;
}

/* log1p(x) for x >= -0.5, the same bits as bs_log1p_q(x, 1 + x, 1 / (1 + x)) */
static inline double bs_log1p(double x)
{
    double u = 1.0 + x;
    return bs_log1p_q(x, u, 1.0 / u);
}

#endif /* BS_SIMD_MATH_H */
