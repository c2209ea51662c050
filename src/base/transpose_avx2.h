/* base/transpose_avx2: the 8 x 8 transposes of 32-bit and 16-bit elements
 * that the engine's AVX-512 weight packers and the training framework's
 * AVX-512 GEMM packer share (256-bit AVX2 and 128-bit SSE2 instructions;
 * include only from files built with AVX2 or wider). */
#ifndef TL_BASE_TRANSPOSE_AVX2_H
#define TL_BASE_TRANSPOSE_AVX2_H

#include <immintrin.h>

/* r[j] (row j, 8 elements) -> r[g] (element g of the 8 rows) */
static inline void cpu_transpose8x32(__m256i r[8]) {
    __m256i a[8], b[8];
    for (int j = 0; j < 8; j += 2) {
        a[j] = _mm256_unpacklo_epi32(r[j], r[j + 1]);
        a[j + 1] = _mm256_unpackhi_epi32(r[j], r[j + 1]);
    }
    for (int j = 0; j < 8; j += 4) {
        b[j] = _mm256_unpacklo_epi64(a[j], a[j + 2]);
        b[j + 1] = _mm256_unpackhi_epi64(a[j], a[j + 2]);
        b[j + 2] = _mm256_unpacklo_epi64(a[j + 1], a[j + 3]);
        b[j + 3] = _mm256_unpackhi_epi64(a[j + 1], a[j + 3]);
    }
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2x128_si256(b[j], b[j + 4], 0x20);
        r[j + 4] = _mm256_permute2x128_si256(b[j], b[j + 4], 0x31);
    }
}

/* r[j] (row j, 8 16-bit elements) -> r[g] (element g of the 8 rows) */
static inline void cpu_transpose8x16(__m128i r[8]) {
    __m128i a[8], b[8];
    for (int j = 0; j < 8; j += 2) {
        a[j] = _mm_unpacklo_epi16(r[j], r[j + 1]);
        a[j + 1] = _mm_unpackhi_epi16(r[j], r[j + 1]);
    }
    for (int j = 0; j < 8; j += 4) {
        b[j] = _mm_unpacklo_epi32(a[j], a[j + 2]);
        b[j + 1] = _mm_unpackhi_epi32(a[j], a[j + 2]);
        b[j + 2] = _mm_unpacklo_epi32(a[j + 1], a[j + 3]);
        b[j + 3] = _mm_unpackhi_epi32(a[j + 1], a[j + 3]);
    }
    for (int j = 0; j < 4; j++) {
        r[2 * j] = _mm_unpacklo_epi64(b[j], b[j + 4]);
        r[2 * j + 1] = _mm_unpackhi_epi64(b[j], b[j + 4]);
    }
}

#endif
