/* train/gemm_avx512: the 12x32 AVX-512 micro-kernels of the training matmul
 * (compiled with -mavx512f; called only when the CPU has it), and the
 * k-major packer of its B panels. One kernel reads A k-major (a packed
 * panel, or A^T in place), one reads A's rows in place, so full 12-row
 * panels are never copied; b: a packed [kc][32] panel or 32 columns of B's
 * rows in place (row stride ldb). Both write (or add to) an mr x nr
 * (<= 12 x 32) block of C. 24 zmm accumulators, two B vectors and a
 * broadcast operand per k: 24 FMAs per 2 vector loads.
 * Each C element is one FMA chain over k = 0..kc-1 from zero, then added to
 * C: the order of the AVX2 kernel, so both give the same bits.
 * Owns: nothing. Calls: base/transpose_avx2.h (the 8x8 transpose the engine shares). */
#include <immintrin.h>
#include <stdint.h>

#include "base/transpose_avx2.h"

/* one k step of row r: a broadcast of A[r][k] times the two B vectors */
#define ROW(r, x)                                 \
    av = _mm512_set1_ps(x);                       \
    c##r##0 = _mm512_fmadd_ps(av, b0, c##r##0);   \
    c##r##1 = _mm512_fmadd_ps(av, b1, c##r##1)

/* A element (r, k): arow ? a[r * lda + k] (rows of A read in place) :
 * a[k * lda + r] (a packed micro-panel, lda 12, or A read through a
 * transpose). Rows read in place go through four base pointers (rows 0, 3,
 * 6, 9) plus lda and 2 lda, which address modes scale for free. */
static inline __attribute__((always_inline)) void ukr_body(int64_t kc, const float *a, int64_t lda, int arow,
                                                           const float *b, int64_t ldb, float *c, int64_t ldc,
                                                           int acc, int mr, int nr) {
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    __m512 c60 = c00, c61 = c00, c70 = c00, c71 = c00, c80 = c00, c81 = c00;
    __m512 c90 = c00, c91 = c00, c100 = c00, c101 = c00, c110 = c00, c111 = c00;
    if (arow) {
        const float *a0 = a, *a3 = a + 3 * lda, *a6 = a + 6 * lda, *a9 = a + 9 * lda;
        for (int64_t k = 0; k < kc; k++) {
            __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16), av;
            ROW(0, a0[0]); ROW(1, a0[lda]); ROW(2, a0[2 * lda]);
            ROW(3, a3[0]); ROW(4, a3[lda]); ROW(5, a3[2 * lda]);
            ROW(6, a6[0]); ROW(7, a6[lda]); ROW(8, a6[2 * lda]);
            ROW(9, a9[0]); ROW(10, a9[lda]); ROW(11, a9[2 * lda]);
            a0++, a3++, a6++, a9++;
            b += ldb;
        }
    } else {
        for (int64_t k = 0; k < kc; k++) {
            __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16), av;
            ROW(0, a[0]); ROW(1, a[1]); ROW(2, a[2]); ROW(3, a[3]); ROW(4, a[4]); ROW(5, a[5]);
            ROW(6, a[6]); ROW(7, a[7]); ROW(8, a[8]); ROW(9, a[9]); ROW(10, a[10]); ROW(11, a[11]);
            a += lda;
            b += ldb;
        }
    }
    __m512 t[24] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51,
                    c60, c61, c70, c71, c80, c81, c90, c91, c100, c101, c110, c111};
    /* column masks of the two 16-wide halves (nr < 32 only at the right edge) */
    __mmask16 m0 = nr >= 16 ? 0xFFFF : (__mmask16)((1u << nr) - 1);
    __mmask16 m1 = nr >= 32 ? 0xFFFF : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
    for (int r = 0; r < mr; r++) {
        float *cr = c + r * ldc;
        __m512 v0 = t[2 * r], v1 = t[2 * r + 1];
        if (acc) {
            v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, cr));
            v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, cr + 16));
        }
        _mm512_mask_storeu_ps(cr, m0, v0);
        _mm512_mask_storeu_ps(cr + 16, m1, v1);
    }
}

/* a: A k-major with leading dimension lda (a packed panel: lda 12) */
void tt__ukr_12x32_avx512(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                          int64_t ldc, int acc, int mr, int nr) {
    ukr_body(kc, a, lda, 0, b, ldb, c, ldc, acc, mr, nr);
}

/* a: 12 rows of A in place, row stride lda, k contiguous */
void tt__ukr_12x32_rows_avx512(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                               int64_t ldc, int acc, int mr, int nr) {
    ukr_body(kc, a, lda, 1, b, ldb, c, ldc, acc, mr, nr);
}

/* dst[k * R + r] = src[r * ld + k] for r < rows, 0 for rows <= r < R
 * (R a multiple of 8), k < kc: rows that run along k, packed k-major (the
 * rows of W into a 32-wide B panel when B is W^T), 8 x 8 blocks through
 * registers. */
void tt__pack_kmajor_avx512(const float *src, int64_t ld, int rows, int R, int64_t kc, float *dst) {
    int full = rows / 8 * 8;
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
        for (int r0 = 0; r0 < full; r0 += 8) {
            __m256i v[8];
            for (int i = 0; i < 8; i++) v[i] = _mm256_castps_si256(_mm256_loadu_ps(src + (r0 + i) * ld + k));
            cpu_transpose8x32(v);
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + (k + i) * R + r0, _mm256_castsi256_ps(v[i]));
        }
    }
    for (; k < kc; k++)
        for (int r = 0; r < full; r++) dst[k * R + r] = src[r * ld + k];
    for (k = 0; k < kc; k++)
        for (int r = full; r < R; r++) dst[k * R + r] = r < rows ? src[r * ld + k] : 0.0f;
}
