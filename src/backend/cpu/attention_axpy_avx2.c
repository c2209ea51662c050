/* AVX2 + F16C body of attn_axpy_f16 (compiled with -mavx2 -mfma -mf16c). */
#include <immintrin.h>
#include <stdint.h>

void attn_axpy_f16_avx2(float *acc, float a, const uint16_t *v, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    for (int64_t i = 0; i < n; i += 8) {
        __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + i)));
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(va, x, _mm256_loadu_ps(acc + i)));
    }
}
