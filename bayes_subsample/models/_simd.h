/* The models' innermost loops as plain C that compiles to SIMD code: branch-free exp,
 * expm1 and log1p (_simd_math.h, included below), the GLM link terms and control variates over a block of data built on them
 * (_simd_glm.h, included below), the softmax control variates' residuals over a block
 * (_simd_softmax.h, included below), and the dense row loops of a full pass (dot products,
 * gradient sums, Hessian sums).
 *
 * A full pass over the data computes, per row, a dot product (memory-bound), the
 * family's terms (exp, log1p, divisions) and a gradient update. With libm's scalar
 * exp/log1p the terms cost about 30 ns per row, three times the two row loops, so a
 * float32 pass ran no faster than a float64 one. The functions here are plain C
 * arithmetic without branches or calls, so a loop over them compiles to SIMD code
 * (4 or 8 lanes in the AVX2 / AVX-512 clones of the block functions, chosen once at
 * load time on x86-64 Linux with GCC; the baseline clone stays scalar).
 *
 * The exp, expm1 and log1p (_simd_math.h, included below) are within 2 ulp of libm's
 * (tests/test_simd.py). No fused multiply-add is formed (the package builds with
 * -ffp-contract=off), so a SIMD lane and the scalar tail give the same bits: a datum's
 * terms do not depend on its place in a block.
 */
#ifndef BS_SIMD_H
#define BS_SIMD_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) \
    && (__GNUC__ >= 11)
#define BS_CLONES __attribute__((unused, target_clones("arch=x86-64-v4", "arch=x86-64-v3", \
                                                             "default")))
#elif defined(__GNUC__) || defined(__clang__)
#define BS_CLONES __attribute__((unused))
#else
#define BS_CLONES
#endif

#if defined(__GNUC__) || defined(__clang__)
#define BS_RESTRICT __restrict__
#define BS_UNUSED __attribute__((unused))
#else
#define BS_RESTRICT
#define BS_UNUSED
#endif

/* exp, expm1 and log1p as branch-free arithmetic */
#include "_simd_math.h"

/* sum of x[0..m) in eight partial sums (x[i] into s[i mod 8]) added pairwise at the end:
 * a SIMD loop without the latency chain of one running sum; the order depends on m alone */
BS_CLONES
static double bs_sum(ptrdiff_t m, const double* BS_RESTRICT x)
{
    double s[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    ptrdiff_t i, l, m8 = m - m % 8;
    for (i = 0; i < m8; i += 8)
        for (l = 0; l < 8; l++)
            s[l] += x[i + l];
    for (l = 0; l < m - m8; l++)
        s[l] += x[m8 + l];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* the GLM families' terms over blocks (built on bs_exp and bs_log1p01) */
#include "_simd_glm.h"
#include "_simd_softmax.h"

/* Prefetch (into L2) the nrows rows of d values that start BS_PREFETCH_ROWS rows after
 * the row x. A full pass reads X in chunks of 256 rows (MODEL_CHUNK): the chunk's dot
 * products, the family's terms, then its gradient (and Hessian) sums. The dot
 * products, the first read of each row, prefetch the same rows of the next chunk, so
 * that the memory stays busy during the arithmetic (hardware prefetchers follow the
 * demand loads only, and the terms make none). Prefetches never fault, also past the
 * end of X; the arithmetic, hence every result, is unchanged. */
#define BS_PREFETCH_ROWS 256
#if defined(__GNUC__) || defined(__clang__)
#define BS_PREFETCH_AHEAD(x, d, nrows)                                                   \
    do {                                                                                 \
        const char* pf_ = (const char*) ((x) + BS_PREFETCH_ROWS * (d));                  \
        ptrdiff_t b_, nb_ = (nrows) * (d) * (ptrdiff_t) sizeof(*(x));                    \
        for (b_ = 0; b_ < nb_; b_ += 64)                                                 \
            __builtin_prefetch(pf_ + b_, 0, 2);                                          \
    } while (0)
#else
#define BS_PREFETCH_AHEAD(x, d, nrows) ((void) 0)
#endif

/* ---- dense rows ---------------------------------------------------------------------- */
/* x . theta[:d] (+ theta[d]), the one row dot product of the package, in double: four
 * partial sums s_l over j = l mod 4 (the row padded with zeros to a multiple of 4),
 * added as (s0 + s1) + (s2 + s3). The same arithmetic in every SIMD form (the AVX2
 * kernel below computes four rows' s_l in four registers), so the result depends on
 * the row alone, never on the instruction set, the block or the thread. */
#define BS_ROW_DOT(S, T)                                                                  \
    static inline double bs_row_dot_##S(const T* BS_RESTRICT x,                         \
                                        const double* BS_RESTRICT theta, ptrdiff_t d,   \
                                        int icpt)                                       \
    {                                                                                   \
        double s[4] = {0.0, 0.0, 0.0, 0.0};                                             \
        ptrdiff_t j, l, d4 = d - d % 4;                                                 \
        for (j = 0; j < d4; j += 4)                                                     \
            for (l = 0; l < 4; l++)                                                     \
                s[l] += (double) x[j + l] * theta[j + l];                               \
        if (d4 < d)                                                                     \
            for (l = 0; l < 4; l++) /* constant lanes: s stays in registers */          \
                s[l] += (d4 + l < d ? (double) x[d4 + l] : 0.0)                         \
                        * (d4 + l < d ? theta[d4 + l] : 0.0);                           \
        double t = (s[0] + s[1]) + (s[2] + s[3]);                                       \
        return icpt ? t + theta[d] : t;                                                 \
    }

/* out[i - start] = x_i . theta for the rows i of [start, stop) of the row-major X (d
 * stored columns): the portable loop */
#define BS_DOT_RANGE_PORTABLE(S, T)                                                       \
    BS_UNUSED static void bs_dot_range_portable_##S(const T* X, ptrdiff_t d, int icpt,              \
                                          ptrdiff_t start, ptrdiff_t stop,                \
                                          const double* BS_RESTRICT theta,                \
                                          double* BS_RESTRICT out)                        \
    {                                                                                     \
        ptrdiff_t i;                                                                      \
        for (i = start; i < stop; i++) {                                                  \
            BS_PREFETCH_AHEAD(X + i * d, d, 1);                                           \
            out[i - start] = bs_row_dot_##S(X + i * d, theta, d, icpt);                   \
        }                                                                                 \
    }

/* With AVX2 (x86-64, GCC or clang; chosen at run time): four rows at a time, each
 * row's four partial sums in one register, theta's loads shared, the four rows' sums
 * reduced together (two horizontal adds and a lane swap) into one register of four
 * results: bs_row_dot's arithmetic, twice as fast as compiled from it (1e6 rows of 28
 * float32 values in cache, one thread: 2.2 ms against 4.9 ms). LOAD4 loads four
 * values of X as doubles. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>
#define BS_HAVE_AVX2_DOT 1
#define BS_LOAD4_f32(p) _mm256_cvtps_pd(_mm_loadu_ps(p))
#define BS_LOAD4_f64(p) _mm256_loadu_pd(p)
#define BS_DOT_RANGE_AVX2(S, T)                                                           \
    __attribute__((target("avx2"), unused))                                               \
    static void bs_dot_range_avx2_##S(const T* X, ptrdiff_t d, int icpt,                  \
                                      ptrdiff_t start, ptrdiff_t stop,                    \
                                      const double* BS_RESTRICT theta,                    \
                                      double* BS_RESTRICT out)                            \
    {                                                                                     \
        ptrdiff_t i, j, l, d4 = d - d % 4;                                                \
        double xt[4][4], tt[4];                                                           \
        for (l = 0; l < 4; l++) /* the zero-padded tail of theta */                       \
            tt[l] = d4 + l < d ? theta[d4 + l] : 0.0;                                     \
        __m256d tail_t = _mm256_loadu_pd(tt);                                             \
        for (i = start; i + 4 <= stop; i += 4) {                                          \
            const T* x0 = X + i * d;                                                      \
            const T* x1 = x0 + d;                                                         \
            const T* x2 = x1 + d;                                                         \
            const T* x3 = x2 + d;                                                         \
            BS_PREFETCH_AHEAD(x0, d, 4);                                                  \
            __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;                  \
            for (j = 0; j < d4; j += 4) {                                                 \
                __m256d t = _mm256_loadu_pd(theta + j);                                   \
                a0 = _mm256_add_pd(a0, _mm256_mul_pd(BS_LOAD4_##S(x0 + j), t));           \
                a1 = _mm256_add_pd(a1, _mm256_mul_pd(BS_LOAD4_##S(x1 + j), t));           \
                a2 = _mm256_add_pd(a2, _mm256_mul_pd(BS_LOAD4_##S(x2 + j), t));           \
                a3 = _mm256_add_pd(a3, _mm256_mul_pd(BS_LOAD4_##S(x3 + j), t));           \
            }                                                                             \
            if (d4 < d) {                                                                 \
                for (l = 0; l < 4; l++) {                                                 \
                    xt[0][l] = d4 + l < d ? (double) x0[d4 + l] : 0.0;                    \
                    xt[1][l] = d4 + l < d ? (double) x1[d4 + l] : 0.0;                    \
                    xt[2][l] = d4 + l < d ? (double) x2[d4 + l] : 0.0;                    \
                    xt[3][l] = d4 + l < d ? (double) x3[d4 + l] : 0.0;                    \
                }                                                                         \
                a0 = _mm256_add_pd(a0, _mm256_mul_pd(_mm256_loadu_pd(xt[0]), tail_t));    \
                a1 = _mm256_add_pd(a1, _mm256_mul_pd(_mm256_loadu_pd(xt[1]), tail_t));    \
                a2 = _mm256_add_pd(a2, _mm256_mul_pd(_mm256_loadu_pd(xt[2]), tail_t));    \
                a3 = _mm256_add_pd(a3, _mm256_mul_pd(_mm256_loadu_pd(xt[3]), tail_t));    \
            }                                                                             \
            /* [a0_0+a0_1, a1_0+a1_1, a0_2+a0_3, a1_2+a1_3] and the same for a2, a3 */   \
            __m256d h01 = _mm256_hadd_pd(a0, a1);                                         \
            __m256d h23 = _mm256_hadd_pd(a2, a3);                                         \
            __m256d r = _mm256_add_pd(_mm256_permute2f128_pd(h01, h23, 0x20),             \
                                      _mm256_permute2f128_pd(h01, h23, 0x31));            \
            if (icpt)                                                                     \
                r = _mm256_add_pd(r, _mm256_set1_pd(theta[d]));                           \
            _mm256_storeu_pd(out + (i - start), r);                                       \
        }                                                                                 \
        for (; i < stop; i++)                                                             \
            out[i - start] = bs_row_dot_##S(X + i * d, theta, d, icpt);                   \
    }

/* the processor's features that choose the kernels, probed once */
#define BS_CPU_AVX2 1
#define BS_CPU_FMA 2
BS_UNUSED static int bs_cpu_features(void)
{
    static int flags = -1;   /* a benign race: every thread finds the same answer */
    if (flags < 0) {
        __builtin_cpu_init();
        flags = (__builtin_cpu_supports("avx2") ? BS_CPU_AVX2 : 0)
                | (__builtin_cpu_supports("fma") ? BS_CPU_FMA : 0);
    }
    return flags;
}

BS_UNUSED static int bs_avx2(void)
{
    return (bs_cpu_features() & BS_CPU_AVX2) != 0;
}
#else
#define BS_HAVE_AVX2_DOT 0
#endif

/* NAME_S(X, d, icpt, start, stop, v, out): the row loop NAME over the rows of [start,
 * stop), by its AVX2 kernel NAME_avx2_S where the processor has AVX2, else by its
 * portable loop NAME_portable_S (the same arithmetic, the same bits) */
#if BS_HAVE_AVX2_DOT
#define BS_RANGE_DISPATCH(NAME, S, T)                                                     \
    BS_UNUSED static void NAME##_##S(const T* X, ptrdiff_t d, int icpt, ptrdiff_t start,   \
                                     ptrdiff_t stop, const double* v, double* out)        \
    {                                                                                     \
        if (bs_avx2())                                                                    \
            NAME##_avx2_##S(X, d, icpt, start, stop, v, out);                             \
        else                                                                              \
            NAME##_portable_##S(X, d, icpt, start, stop, v, out);                         \
    }
#else
#define BS_RANGE_DISPATCH(NAME, S, T)                                                     \
    BS_UNUSED static void NAME##_##S(const T* X, ptrdiff_t d, int icpt, ptrdiff_t start,   \
                                     ptrdiff_t stop, const double* v, double* out)        \
    {                                                                                     \
        NAME##_portable_##S(X, d, icpt, start, stop, v, out);                             \
    }
#define BS_DOT_RANGE_AVX2(S, T)
#define BS_ADD_XT_RANGE_AVX2(S, T)
#endif

#define BS_DOT_RANGE(S, T)                                                                \
    BS_DOT_RANGE_PORTABLE(S, T)                                                           \
    BS_DOT_RANGE_AVX2(S, T)                                                               \
    BS_RANGE_DISPATCH(bs_dot_range, S, T)

/* out += sum_i c[i - start] x_i over the rows of [start, stop), four rows at a time
 * (out[j] += (c0 x0j + c1 x1j) + (c2 x2j + c3 x3j): a quarter of the loads and stores
 * of out), then row by row; the order depends on start and stop alone */
#define BS_ADD_XT_RANGE_PORTABLE(S, T)                                                    \
    BS_UNUSED static void bs_add_xt_range_portable_##S(const T* X, ptrdiff_t d, int icpt,  \
                                                       ptrdiff_t start, ptrdiff_t stop,   \
                                                       const double* BS_RESTRICT c,       \
                                                       double* BS_RESTRICT out)           \
    {                                                                                     \
        ptrdiff_t i, j;                                                                   \
        for (i = start; i + 4 <= stop; i += 4) {                                          \
            const T* BS_RESTRICT x0 = X + i * d;                                          \
            const T* BS_RESTRICT x1 = x0 + d;                                             \
            const T* BS_RESTRICT x2 = x1 + d;                                             \
            const T* BS_RESTRICT x3 = x2 + d;                                             \
            const double* ci = c + (i - start);                                           \
            double c0 = ci[0], c1 = ci[1], c2 = ci[2], c3 = ci[3];                        \
            for (j = 0; j < d; j++)                                                       \
                out[j] += (c0 * (double) x0[j] + c1 * (double) x1[j])                     \
                          + (c2 * (double) x2[j] + c3 * (double) x3[j]);                  \
            if (icpt)                                                                     \
                out[d] += (c0 + c1) + (c2 + c3);                                          \
        }                                                                                 \
        BS_ADD_XT_ROWS_LEFT(S, T)                                                         \
    }

/* the rows of [i, stop) that are left after the groups of four, one by one */
#define BS_ADD_XT_ROWS_LEFT(S, T)                                                         \
        for (; i < stop; i++) {                                                           \
            const T* BS_RESTRICT x = X + i * d;                                           \
            double ci = c[i - start];                                                     \
            for (j = 0; j < d; j++)                                                       \
                out[j] += ci * (double) x[j];                                             \
            if (icpt)                                                                     \
                out[d] += ci;                                                             \
        }

#if BS_HAVE_AVX2_DOT
/* With AVX2: the same sums, in the same order for each column, with the columns in
 * blocks of four doubles whose running sums stay in registers while the groups of
 * four rows go by (16 columns per sweep over the rows, then 4, then the d mod 4 left
 * by masked loads): no loads and stores of out per group, and no compiler epilogue
 * for d not a multiple of the vector width. */
#define BS_TAIL4_f32(p) _mm256_cvtps_pd(_mm_maskload_ps((p), m32))
#define BS_TAIL4_f64(p) _mm256_maskload_pd((p), m64)
/* acc += (c0 x0 + c1 x1) + (c2 x2 + c3 x3) in the columns [j, j + 4) */
#define BS_XT_GROUP(acc, LOAD, j)                                                         \
    acc = _mm256_add_pd(acc, _mm256_add_pd(                                               \
              _mm256_add_pd(_mm256_mul_pd(vc0, LOAD(x0 + (j))),                           \
                            _mm256_mul_pd(vc1, LOAD(x1 + (j)))),                          \
              _mm256_add_pd(_mm256_mul_pd(vc2, LOAD(x2 + (j))),                           \
                            _mm256_mul_pd(vc3, LOAD(x3 + (j))))))
/* a sweep over the groups of four rows of [start, i4) */
#define BS_XT_SWEEP(T, BODY)                                                              \
    for (i = start; i < i4; i += 4) {                                                     \
        const T* x0 = X + i * d;                                                          \
        const T* x1 = x0 + d;                                                             \
        const T* x2 = x1 + d;                                                             \
        const T* x3 = x2 + d;                                                             \
        const double* ci = c + (i - start);                                               \
        __m256d vc0 = _mm256_set1_pd(ci[0]), vc1 = _mm256_set1_pd(ci[1]);                 \
        __m256d vc2 = _mm256_set1_pd(ci[2]), vc3 = _mm256_set1_pd(ci[3]);                 \
        BODY;                                                                             \
    }
#define BS_ADD_XT_RANGE_AVX2(S, T)                                                        \
    __attribute__((target("avx2"), unused))                                               \
    static void bs_add_xt_range_avx2_##S(const T* X, ptrdiff_t d, int icpt,               \
                                         ptrdiff_t start, ptrdiff_t stop,                 \
                                         const double* BS_RESTRICT c,                     \
                                         double* BS_RESTRICT out)                         \
    {                                                                                     \
        ptrdiff_t i, j, l, i4 = start + (stop - start) / 4 * 4, d4 = d - d % 4;           \
        int32_t k32[4];                                                                   \
        int64_t k64[4];                                                                   \
        for (l = 0; l < 4; l++) {                                                         \
            k32[l] = d4 + l < d ? -1 : 0;                                                 \
            k64[l] = d4 + l < d ? -1 : 0;                                                 \
        }                                                                                 \
        __m128i m32 = _mm_loadu_si128((const __m128i*) k32);                              \
        __m256i m64 = _mm256_loadu_si256((const __m256i*) k64);                           \
        (void) m32;                                                                       \
        for (j = 0; j + 16 <= d4; j += 16) {                                              \
            __m256d a0 = _mm256_loadu_pd(out + j), a1 = _mm256_loadu_pd(out + j + 4);     \
            __m256d a2 = _mm256_loadu_pd(out + j + 8), a3 = _mm256_loadu_pd(out + j + 12);\
            BS_XT_SWEEP(T, BS_XT_GROUP(a0, BS_LOAD4_##S, j);                              \
                           BS_XT_GROUP(a1, BS_LOAD4_##S, j + 4);                          \
                           BS_XT_GROUP(a2, BS_LOAD4_##S, j + 8);                          \
                           BS_XT_GROUP(a3, BS_LOAD4_##S, j + 12));                        \
            _mm256_storeu_pd(out + j, a0);                                                \
            _mm256_storeu_pd(out + j + 4, a1);                                            \
            _mm256_storeu_pd(out + j + 8, a2);                                            \
            _mm256_storeu_pd(out + j + 12, a3);                                           \
        }                                                                                 \
        for (; j < d4; j += 4) {                                                          \
            __m256d a0 = _mm256_loadu_pd(out + j);                                        \
            BS_XT_SWEEP(T, BS_XT_GROUP(a0, BS_LOAD4_##S, j));                             \
            _mm256_storeu_pd(out + j, a0);                                                \
        }                                                                                 \
        if (d4 < d) {                                                                     \
            __m256d a0 = _mm256_maskload_pd(out + d4, m64);                               \
            BS_XT_SWEEP(T, BS_XT_GROUP(a0, BS_TAIL4_##S, d4));                            \
            _mm256_maskstore_pd(out + d4, m64, a0);                                       \
        }                                                                                 \
        if (icpt)                                                                         \
            for (i = start; i < i4; i += 4) {                                             \
                const double* ci = c + (i - start);                                       \
                out[d] += (ci[0] + ci[1]) + (ci[2] + ci[3]);                              \
            }                                                                             \
        i = i4;                                                                           \
        BS_ADD_XT_ROWS_LEFT(S, T)                                                         \
    }
#endif

#define BS_ADD_XT_RANGE(S, T)                                                             \
    BS_ADD_XT_RANGE_PORTABLE(S, T)                                                        \
    BS_ADD_XT_RANGE_AVX2(S, T)                                                            \
    BS_RANGE_DISPATCH(bs_add_xt_range, S, T)

/* H[j p + k] += sum_i w_i x_ij x_ik for k <= j: the lower triangle of X^T W X (row-major,
 * leading dimension p = d + icpt, the intercept's column of ones last) over the rows of
 * [start, stop). Eight rows at a time, converted to double once, their contributions
 * added as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)) (a short block padded
 * with zero rows and weights): each load and store of H serves eight rows. Any
 * weights (no square roots). 1e6 x 28 float32 rows, one thread: about 21 ms, where
 * BLAS dsyrk on sqrt(w)-scaled chunks of 256 rows took about 40 ms. A row j of the
 * triangle to which all eight rows add zeros (x_ij w_i = 0: one-hot indicators) is
 * skipped: the same sums for finite X (but the sign of a zero), and on covtype's 44
 * indicators of 54 columns about a quarter of the work. */
#define BS_XWX_ROWS 8
#define BS_ADD_XWX_RANGE(S, T)                                                            \
    BS_CLONES static void bs_add_xwx_range_##S(const T* X, ptrdiff_t d, int icpt,         \
                                               ptrdiff_t start, ptrdiff_t stop,           \
                                               const double* BS_RESTRICT w,               \
                                               double* BS_RESTRICT H)                     \
    {                                                                                     \
        ptrdiff_t p = d + (icpt != 0), i, j, k, r;                                        \
        double stack[BS_XWX_ROWS * 512];                                                  \
        double* z = p <= 512 ? stack                                                      \
                             : (double*) malloc(BS_XWX_ROWS * p * sizeof(double));        \
        if (z == NULL) { /* no scratch: one row at a time */                             \
            for (i = start; i < stop; i++) {                                              \
                const T* x = X + i * d;                                                   \
                double wi = w[i - start];                                                 \
                for (j = 0; j < d; j++) {                                                 \
                    double xj = wi * (double) x[j];                                       \
                    for (k = 0; k <= j; k++)                                              \
                        H[j * p + k] += xj * (double) x[k];                               \
                }                                                                         \
                if (icpt) {                                                               \
                    for (k = 0; k < d; k++)                                               \
                        H[d * p + k] += wi * (double) x[k];                               \
                    H[d * p + d] += wi;                                                   \
                }                                                                         \
            }                                                                             \
            return;                                                                       \
        }                                                                                 \
        for (i = start; i < stop; i += BS_XWX_ROWS) {                                     \
            ptrdiff_t b = stop - i < BS_XWX_ROWS ? stop - i : BS_XWX_ROWS;                \
            double a[BS_XWX_ROWS];                                                        \
            for (r = 0; r < BS_XWX_ROWS; r++) {                                           \
                double* zr = z + r * p;                                                   \
                if (r < b) {                                                              \
                    const T* x = X + (i + r) * d;                                         \
                    for (k = 0; k < d; k++)                                               \
                        zr[k] = (double) x[k];                                            \
                    if (icpt)                                                             \
                        zr[d] = 1.0;                                                      \
                    a[r] = w[i - start + r];                                              \
                } else {                                                                  \
                    for (k = 0; k < p; k++)                                               \
                        zr[k] = 0.0;                                                      \
                    a[r] = 0.0;                                                           \
                }                                                                         \
            }                                                                             \
            const double* BS_RESTRICT z0 = z;                                             \
            const double* BS_RESTRICT z1 = z + p;                                         \
            const double* BS_RESTRICT z2 = z + 2 * p;                                     \
            const double* BS_RESTRICT z3 = z + 3 * p;                                     \
            const double* BS_RESTRICT z4 = z + 4 * p;                                     \
            const double* BS_RESTRICT z5 = z + 5 * p;                                     \
            const double* BS_RESTRICT z6 = z + 6 * p;                                     \
            const double* BS_RESTRICT z7 = z + 7 * p;                                     \
            for (j = 0; j < p; j++) {                                                     \
                double c0 = a[0] * z0[j], c1 = a[1] * z1[j], c2 = a[2] * z2[j];           \
                double c3 = a[3] * z3[j], c4 = a[4] * z4[j], c5 = a[5] * z5[j];           \
                double c6 = a[6] * z6[j], c7 = a[7] * z7[j];                              \
                /* a row of the triangle the eight rows add only zeros to (finite X:  \
                 * column j zero in all of them, as one-hot indicators mostly are) */    \
                if (c0 == 0.0 && c1 == 0.0 && c2 == 0.0 && c3 == 0.0 && c4 == 0.0         \
                    && c5 == 0.0 && c6 == 0.0 && c7 == 0.0)                               \
                    continue;                                                             \
                double* BS_RESTRICT h = H + j * p;                                        \
                for (k = 0; k <= j; k++)                                                  \
                    h[k] += ((c0 * z0[k] + c1 * z1[k]) + (c2 * z2[k] + c3 * z3[k]))       \
                            + ((c4 * z4[k] + c5 * z5[k]) + (c6 * z6[k] + c7 * z7[k]));    \
            }                                                                             \
        }                                                                                 \
        if (z != stack)                                                                   \
            free(z);                                                                      \
    }

BS_ROW_DOT(f32, float)
BS_ROW_DOT(f64, double)
BS_DOT_RANGE(f32, float)
BS_DOT_RANGE(f64, double)
BS_ADD_XT_RANGE(f32, float)
BS_ADD_XT_RANGE(f64, double)
BS_ADD_XWX_RANGE(f32_portable, float)
BS_ADD_XWX_RANGE(f64, double)

/* out[i K + k] = x_i . theta_k (+ theta_k[d] with icpt) for the `count` rows x_i of the
 * row-major X (d stored columns) and the K rows theta_k of theta (row stride ts >= d +
 * icpt): each by bs_row_dot's arithmetic, so the same bits as row_dot and
 * bs_dot_range. With AVX2 four classes of a row at a time (the row's loads shared, the
 * four sums reduced together as in bs_dot_range_avx2). The multinomial predictors of
 * HMC-ECS's rows (where BLAS dgemm spent as long packing the rows as multiplying them)
 * and of a full pass (where K passes of bs_dot_range read each chunk K times). */
BS_UNUSED static void bs_dot_classes_portable(const double* X, ptrdiff_t d, int icpt,
                                              ptrdiff_t count, const double* theta,
                                              ptrdiff_t ts, ptrdiff_t K, double* out)
{
    ptrdiff_t i, k;
    for (i = 0; i < count; i++)
        for (k = 0; k < K; k++)
            out[i * K + k] = bs_row_dot_f64(X + i * d, theta + k * ts, d, icpt);
}

#if BS_HAVE_AVX2_DOT
__attribute__((target("avx2"), unused))
static void bs_dot_classes_avx2(const double* X, ptrdiff_t d, int icpt, ptrdiff_t count,
                                const double* theta, ptrdiff_t ts, ptrdiff_t K, double* out)
{
    ptrdiff_t i, j, k, l, d4 = d - d % 4;
    long long k64[4];
    double res[4];
    for (l = 0; l < 4; l++)
        k64[l] = d4 + l < d ? -1 : 0;
    __m256i m64 = _mm256_loadu_si256((const __m256i*) k64);
    for (i = 0; i < count; i++) {
        const double* x = X + i * d;
        __m256d xtail = _mm256_maskload_pd(x + d4, m64);   /* zeros past d */
        for (k = 0; k < K; k += 4) {
            /* a last group of fewer than four classes repeats its last class */
            const double* t0 = theta + k * ts;
            const double* t1 = theta + (k + 1 < K ? k + 1 : K - 1) * ts;
            const double* t2 = theta + (k + 2 < K ? k + 2 : K - 1) * ts;
            const double* t3 = theta + (k + 3 < K ? k + 3 : K - 1) * ts;
            __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
            for (j = 0; j < d4; j += 4) {
                __m256d xv = _mm256_loadu_pd(x + j);
                a0 = _mm256_add_pd(a0, _mm256_mul_pd(xv, _mm256_loadu_pd(t0 + j)));
                a1 = _mm256_add_pd(a1, _mm256_mul_pd(xv, _mm256_loadu_pd(t1 + j)));
                a2 = _mm256_add_pd(a2, _mm256_mul_pd(xv, _mm256_loadu_pd(t2 + j)));
                a3 = _mm256_add_pd(a3, _mm256_mul_pd(xv, _mm256_loadu_pd(t3 + j)));
            }
            if (d4 < d) {
                a0 = _mm256_add_pd(a0, _mm256_mul_pd(xtail, _mm256_maskload_pd(t0 + d4, m64)));
                a1 = _mm256_add_pd(a1, _mm256_mul_pd(xtail, _mm256_maskload_pd(t1 + d4, m64)));
                a2 = _mm256_add_pd(a2, _mm256_mul_pd(xtail, _mm256_maskload_pd(t2 + d4, m64)));
                a3 = _mm256_add_pd(a3, _mm256_mul_pd(xtail, _mm256_maskload_pd(t3 + d4, m64)));
            }
            __m256d h01 = _mm256_hadd_pd(a0, a1);
            __m256d h23 = _mm256_hadd_pd(a2, a3);
            __m256d r = _mm256_add_pd(_mm256_permute2f128_pd(h01, h23, 0x20),
                                      _mm256_permute2f128_pd(h01, h23, 0x31));
            if (icpt)
                r = _mm256_add_pd(r, _mm256_setr_pd(t0[d], t1[d], t2[d], t3[d]));
            if (k + 4 <= K) {
                _mm256_storeu_pd(out + i * K + k, r);
            } else {
                _mm256_storeu_pd(res, r);
                for (l = 0; k + l < K; l++)
                    out[i * K + k + l] = res[l];
            }
        }
    }
}
#endif

BS_UNUSED static void bs_dot_classes(const double* X, ptrdiff_t d, int icpt, ptrdiff_t count,
                                     const double* theta, ptrdiff_t ts, ptrdiff_t K,
                                     double* out)
{
#if BS_HAVE_AVX2_DOT
    if (bs_avx2()) {
        bs_dot_classes_avx2(X, d, icpt, count, theta, ts, K, out);
        return;
    }
#endif
    bs_dot_classes_portable(X, d, icpt, count, theta, ts, K, out);
}

/* The Hessian sum of float32 rows with AVX2 and FMA (chosen at run time): the
 * compute-bound part of a full pass, p(p+1)/2 multiply-adds per row against p for the
 * gradient. The rows of [start, stop) are taken in blocks of BS_XWX32_ROWS, copied
 * into a zero-padded scratch Z (P = p rounded up to 8 columns, the intercept's ones
 * last) beside C = w Z (w rounded to float, each product rounded once). For each band
 * of 8 rows of H and its 8-column tiles at or left of the diagonal (in groups of up to
 * four), the block's sums sum_i c_ij z_ik are accumulated in eight-lane float32
 * registers by fused multiply-adds and added to H in double once per block. A block's
 * float32 sum of 32 products has a relative error below 34 * 2^-24 (2e-6) of
 * sum_i |w_i x_ij x_ik|, about the precision of the float32 data themselves; the
 * blocks are added in double in row order, so the result depends on start and stop
 * alone (not on the thread; it does depend on whether the CPU has AVX2 and FMA). 1e6 x
 * 28 float32 rows, one thread: about 15 ms, against 31 ms for the double loop above
 * (both reading X from memory). */
#if BS_HAVE_AVX2_DOT
#define BS_XWX32_ROWS 32   /* Z and C in 8 KB (p <= 32): in L1 */
#define BS_XWX32_STACK_P 32
/* rows j0 .. j0+J-1 of H, columns k0 .. k0+8T-1, over the b rows of the block: J T
 * accumulators (at least 8 fused multiply-adds in flight, the latency of one times
 * the two issued per cycle), T tiles of the row and one broadcast: at most 13 of the
 * 16 registers. J and T are constants in each expansion, so the compiler keeps the
 * accumulators in registers. */
#define BS_XWX32_KERNEL(J, T)                                                             \
    __attribute__((target("avx2,fma"), unused)) static void                              \
    bs_xwx32_kernel_##J##_##T(const float* BS_RESTRICT Z, const float* BS_RESTRICT C,    \
                              ptrdiff_t P, ptrdiff_t b, ptrdiff_t j0, ptrdiff_t k0,       \
                              double* BS_RESTRICT H, ptrdiff_t p)                         \
    {                                                                                     \
        __m256 acc[J][T];                                                                 \
        ptrdiff_t r;                                                                      \
        int jj, t;                                                                        \
        for (jj = 0; jj < J; jj++)                                                        \
            for (t = 0; t < T; t++)                                                       \
                acc[jj][t] = _mm256_setzero_ps();                                         \
        for (r = 0; r < b; r++) {                                                         \
            const float* z = Z + r * P + k0;                                              \
            const float* c = C + r * P + j0;                                              \
            __m256 zt[T];                                                                 \
            _Pragma("GCC unroll 4")                                                       \
            for (t = 0; t < T; t++)                                                       \
                zt[t] = _mm256_loadu_ps(z + 8 * t);                                       \
            _Pragma("GCC unroll 8")                                                       \
            for (jj = 0; jj < J; jj++) {                                                  \
                __m256 cj = _mm256_broadcast_ss(c + jj);                                  \
                _Pragma("GCC unroll 4")                                                   \
                for (t = 0; t < T; t++)                                                   \
                    acc[jj][t] = _mm256_fmadd_ps(cj, zt[t], acc[jj][t]);                  \
            }                                                                             \
        }                                                                                 \
        float out[J * T * 8];                                                             \
        _Pragma("GCC unroll 8")                                                           \
        for (jj = 0; jj < J; jj++)                                                        \
            _Pragma("GCC unroll 4")                                                       \
            for (t = 0; t < T; t++)                                                       \
                _mm256_storeu_ps(out + (jj * T + t) * 8, acc[jj][t]);                     \
        for (jj = 0; jj < J; jj++)                                                        \
            for (t = 0; t < T; t++)                                                       \
                bs_xwx32_flush(H, p, j0 + jj, k0 + 8 * t, out + (jj * T + t) * 8);        \
    }

/* H[j p + k] += acc[k - k0] (double) for the k <= j, k < p of one 8-column tile */
__attribute__((target("avx2,fma"), always_inline)) static inline void
bs_xwx32_flush(double* BS_RESTRICT H, ptrdiff_t p, ptrdiff_t j, ptrdiff_t k0,
               const float* BS_RESTRICT v)
{
    double* h = H + j * p + k0;
    ptrdiff_t k;
    if (j >= p || k0 > j)
        return;
    if (k0 + 8 <= j + 1) {          /* the whole tile in the lower triangle (and k < p) */
        _mm256_storeu_pd(h, _mm256_add_pd(_mm256_loadu_pd(h),
                                          _mm256_cvtps_pd(_mm_loadu_ps(v))));
        _mm256_storeu_pd(h + 4, _mm256_add_pd(_mm256_loadu_pd(h + 4),
                                              _mm256_cvtps_pd(_mm_loadu_ps(v + 4))));
    } else {
        for (k = 0; k < 8 && k0 + k <= j; k++)
            h[k] += (double) v[k];
    }
}

BS_XWX32_KERNEL(8, 1)
BS_XWX32_KERNEL(4, 2)
BS_XWX32_KERNEL(2, 3)
BS_XWX32_KERNEL(2, 4)

__attribute__((target("avx2,fma"), unused))
static void bs_add_xwx_range_f32_fma(const float* X, ptrdiff_t d, int icpt,
                                     ptrdiff_t start, ptrdiff_t stop,
                                     const double* BS_RESTRICT w, double* BS_RESTRICT H)
{
    ptrdiff_t p = d + (icpt != 0), P = (p + 7) & ~(ptrdiff_t) 7, i, r, k, q, k0, j;
    float stack[2 * BS_XWX32_ROWS * BS_XWX32_STACK_P];
    float* Z = P <= BS_XWX32_STACK_P ? stack
                                     : (float*) malloc(2 * BS_XWX32_ROWS * P * sizeof(float));
    if (Z == NULL) {                /* no scratch: the double loop */
        bs_add_xwx_range_f32_portable(X, d, icpt, start, stop, w, H);
        return;
    }
    float* C = Z + BS_XWX32_ROWS * P;
    ptrdiff_t d8 = d - d % 8;
    int lanes[8], one[8];
    for (k = 0; k < 8; k++) {
        lanes[k] = d8 + k < d ? -1 : 0;              /* x's values in the tail tile */
        one[k] = icpt && d8 + k == d ? -1 : 0;       /* the intercept's 1 */
    }
    __m256i tail_mask = _mm256_loadu_si256((const __m256i*) lanes);
    __m256i icpt_lane = _mm256_loadu_si256((const __m256i*) one);
    for (i = start; i < stop; i += BS_XWX32_ROWS) {
        ptrdiff_t b = stop - i < BS_XWX32_ROWS ? stop - i : BS_XWX32_ROWS;
        for (r = 0; r < b; r++) {
            const float* x = X + (i + r) * d;
            float* zr = Z + r * P;
            float* cr = C + r * P;
            __m256 wr = _mm256_set1_ps((float) w[i - start + r]), v;
            /* from registers to both scratches (a copy then a reload would stall on
             * store forwarding) */
            for (k = 0; k < d8; k += 8) {
                v = _mm256_loadu_ps(x + k);
                _mm256_storeu_ps(zr + k, v);
                _mm256_storeu_ps(cr + k, _mm256_mul_ps(wr, v));
            }
            if (d8 < P) {           /* one tail tile: x's last d - d8 values, the 1 */
                v = _mm256_blendv_ps(_mm256_maskload_ps(x + d8, tail_mask),
                                     _mm256_set1_ps(1.0f), _mm256_castsi256_ps(icpt_lane));
                _mm256_storeu_ps(zr + d8, v);
                _mm256_storeu_ps(cr + d8, _mm256_mul_ps(wr, v));
            }
        }
        /* band q: rows 8q .. 8q+7 of H, tiles 0 .. q (at and left of the diagonal), in
         * groups of up to four tiles */
        for (q = 0; 8 * q < p; q++) {
            for (k0 = 0; k0 <= 8 * q; k0 += 32) {
                ptrdiff_t T = q + 1 - k0 / 8;
                if (T > 4)
                    T = 4;
                if (T == 1)
                    bs_xwx32_kernel_8_1(Z, C, P, b, 8 * q, k0, H, p);
                else if (T == 2)
                    for (j = 8 * q; j < 8 * q + 8 && j < p; j += 4)
                        bs_xwx32_kernel_4_2(Z, C, P, b, j, k0, H, p);
                else if (T == 3)
                    for (j = 8 * q; j < 8 * q + 8 && j < p; j += 2)
                        bs_xwx32_kernel_2_3(Z, C, P, b, j, k0, H, p);
                else
                    for (j = 8 * q; j < 8 * q + 8 && j < p; j += 2)
                        bs_xwx32_kernel_2_4(Z, C, P, b, j, k0, H, p);
            }
        }
    }
    if (Z != stack)
        free(Z);
}

BS_UNUSED static int bs_avx2_fma(void)
{
    return (bs_cpu_features() & (BS_CPU_AVX2 | BS_CPU_FMA)) == (BS_CPU_AVX2 | BS_CPU_FMA);
}

BS_UNUSED static void bs_add_xwx_range_f32(const float* X, ptrdiff_t d, int icpt,
                                           ptrdiff_t start, ptrdiff_t stop, const double* w,
                                           double* H)
{
    if (bs_avx2_fma())
        bs_add_xwx_range_f32_fma(X, d, icpt, start, stop, w, H);
    else
        bs_add_xwx_range_f32_portable(X, d, icpt, start, stop, w, H);
}
#else
BS_UNUSED static void bs_add_xwx_range_f32(const float* X, ptrdiff_t d, int icpt,
                                           ptrdiff_t start, ptrdiff_t stop, const double* w,
                                           double* H)
{
    bs_add_xwx_range_f32_portable(X, d, icpt, start, stop, w, H);
}
#endif

/* 1 if every value of x[0:m] is finite, else 0: v - v is 0 for a finite v and NaN for
 * an infinity or a NaN; the flags are OR-reduced (an integer reduction, so the loop
 * compiles to SIMD code without reassociating floating-point sums). Blocks of 4096
 * values, so a non-finite value stops the scan early. */
#define BS_ALL_FINITE(S, T)                                                               \
    BS_CLONES static int bs_all_finite_##S(const T* BS_RESTRICT x, ptrdiff_t m)          \
    {                                                                                     \
        ptrdiff_t s, i, e;                                                                \
        for (s = 0; s < m; s += 4096) {                                                   \
            int bad = 0;                                                                  \
            e = m - s < 4096 ? m : s + 4096;                                              \
            for (i = s; i < e; i++)                                                       \
                bad |= !(x[i] - x[i] == (T) 0);                                           \
            if (bad)                                                                      \
                return 0;                                                                 \
        }                                                                                 \
        return 1;                                                                         \
    }

BS_ALL_FINITE(f32, float)
BS_ALL_FINITE(f64, double)

#endif /* BS_SIMD_H */
