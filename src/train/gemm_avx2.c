/* train/gemm_avx2: the 6x16 AVX2/FMA micro-kernel of the training matmul
 * (compiled with -mavx2 -mfma; called only when the CPU has them).
 * a: A k-major, (r, k) at a[k * lda + r] (a packed [kc][6] panel: lda 6),
 * b: (k, j) at b[k * ldb + j] (a packed [kc][16] panel: ldb 16); writes (or adds to) a 6x16 block of C.
 * Owns: nothing. Calls: nothing. */
#include <immintrin.h>
#include <stdint.h>

void tt__ukr_6x16_avx2(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                       int64_t ldc, int acc, int mr, int nr) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        __m256 av;
        av = _mm256_broadcast_ss(a + 0); c00 = _mm256_fmadd_ps(av, b0, c00); c01 = _mm256_fmadd_ps(av, b1, c01);
        av = _mm256_broadcast_ss(a + 1); c10 = _mm256_fmadd_ps(av, b0, c10); c11 = _mm256_fmadd_ps(av, b1, c11);
        av = _mm256_broadcast_ss(a + 2); c20 = _mm256_fmadd_ps(av, b0, c20); c21 = _mm256_fmadd_ps(av, b1, c21);
        av = _mm256_broadcast_ss(a + 3); c30 = _mm256_fmadd_ps(av, b0, c30); c31 = _mm256_fmadd_ps(av, b1, c31);
        av = _mm256_broadcast_ss(a + 4); c40 = _mm256_fmadd_ps(av, b0, c40); c41 = _mm256_fmadd_ps(av, b1, c41);
        av = _mm256_broadcast_ss(a + 5); c50 = _mm256_fmadd_ps(av, b0, c50); c51 = _mm256_fmadd_ps(av, b1, c51);
        a += lda;
        b += ldb;
    }
    float tmp[6 * 16] __attribute__((aligned(32)));
    _mm256_store_ps(tmp + 0, c00);  _mm256_store_ps(tmp + 8, c01);
    _mm256_store_ps(tmp + 16, c10); _mm256_store_ps(tmp + 24, c11);
    _mm256_store_ps(tmp + 32, c20); _mm256_store_ps(tmp + 40, c21);
    _mm256_store_ps(tmp + 48, c30); _mm256_store_ps(tmp + 56, c31);
    _mm256_store_ps(tmp + 64, c40); _mm256_store_ps(tmp + 72, c41);
    _mm256_store_ps(tmp + 80, c50); _mm256_store_ps(tmp + 88, c51);
    if (mr == 6 && nr == 16) {
        for (int r = 0; r < 6; r++) {
            float *cr = c + r * ldc;
            __m256 v0 = _mm256_load_ps(tmp + r * 16), v1 = _mm256_load_ps(tmp + r * 16 + 8);
            if (acc) {
                v0 = _mm256_add_ps(v0, _mm256_loadu_ps(cr));
                v1 = _mm256_add_ps(v1, _mm256_loadu_ps(cr + 8));
            }
            _mm256_storeu_ps(cr, v0);
            _mm256_storeu_ps(cr + 8, v1);
        }
        return;
    }
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < nr; j++) c[r * ldc + j] = acc ? c[r * ldc + j] + tmp[r * 16 + j] : tmp[r * 16 + j];
}
