/* train/gemm_avx512: the 12x32 AVX-512 micro-kernel of the training matmul
 * (compiled with -mavx512f; called only when the CPU has it).
 * a: packed [kc][12], b: packed [kc][32] (64-byte aligned); writes (or adds
 * to) an mr x nr (<= 12 x 32) block of C. 24 zmm accumulators, two B
 * vectors and a broadcast operand per k: 24 FMAs per 2 vector loads.
 * Each C element is one FMA chain over k = 0..kc-1 from zero, then added to
 * C: the order of the AVX2 kernel, so both give the same bits.
 * Also the k-major packer of its panels.
 * Owns: nothing. Calls: backend/cpu/transpose_avx2.h (the engine's 8x8 transpose). */
#include <immintrin.h>
#include <stdint.h>

#include "backend/cpu/transpose_avx2.h"

#define ROW(r) \
    av = _mm512_set1_ps(a[r]); \
    c##r##0 = _mm512_fmadd_ps(av, b0, c##r##0); \
    c##r##1 = _mm512_fmadd_ps(av, b1, c##r##1)

void tt__ukr_12x32_avx512(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int acc,
                          int mr, int nr) {
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    __m512 c60 = c00, c61 = c00, c70 = c00, c71 = c00, c80 = c00, c81 = c00;
    __m512 c90 = c00, c91 = c00, c100 = c00, c101 = c00, c110 = c00, c111 = c00;
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16), av;
        ROW(0); ROW(1); ROW(2); ROW(3); ROW(4); ROW(5);
        ROW(6); ROW(7); ROW(8); ROW(9); ROW(10); ROW(11);
        a += 12;
        b += 32;
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

/* dst[k * R + r] = src[r * ld + k] for r < R (a multiple of 4, <= 32),
 * k < kc: R rows that run along k, packed k-major (A rows into a 12-row
 * micro-panel, W rows into a 32-wide B panel when B is W^T). 8 x 8 blocks
 * go through registers; the last 4 rows of R = 12 ride in a block whose
 * upper rows repeat them. */
void tt__pack_kmajor_avx512(const float *src, int64_t ld, int R, int64_t kc, float *dst) {
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
        for (int r0 = 0; r0 < R; r0 += 8) {
            int n = R - r0 < 8 ? R - r0 : 8;
            __m256i v[8];
            for (int i = 0; i < 8; i++)
                v[i] = _mm256_castps_si256(_mm256_loadu_ps(src + (r0 + (i < n ? i : i - 4)) * ld + k));
            cpu_transpose8x32(v);
            for (int i = 0; i < 8; i++) {
                float *d = dst + (k + i) * R + r0;
                if (n == 8)
                    _mm256_storeu_ps(d, _mm256_castsi256_ps(v[i]));
                else
                    _mm_storeu_ps(d, _mm256_castps256_ps128(_mm256_castsi256_ps(v[i])));
            }
        }
    }
    for (; k < kc; k++)
        for (int r = 0; r < R; r++) dst[k * R + r] = src[r * ld + k];
}

/* dst[k * 12 + r] = src[k * ld + r]: 12 rows of A read through a transpose
 * (each k's 12 values contiguous) into a micro-panel. */
void tt__pack_a12_strided_avx512(const float *src, int64_t ld, int64_t kc, float *dst) {
    for (int64_t k = 0; k < kc; k++) _mm512_mask_storeu_ps(dst + k * 12, 0xFFF, _mm512_maskz_loadu_ps(0xFFF, src + k * ld));
}
