/* backend/cpu/attention_f16: the two inner loops of CPU attention over f16
 * K/V rows, per kernel level: scores s[i] = dot(k_i, q) and the weighted
 * sum o += sum_i p[i] v_i, for n rows (n <= 16) at rows[0..n), and the
 * exponentials of a tile's scores (AVX-512: base/vmath_avx2's e^x, 16 at
 * once; otherwise libm's expf). q is f32 holding f16-rounded values. The
 * AVX2 (F16C) forms need hd % 8 == 0, the AVX-512 ones hd % 16 == 0. */
#ifndef TL_BACKEND_CPU_ATTENTION_F16_H
#define TL_BACKEND_CPU_ATTENTION_F16_H

#include <stdint.h>

typedef void (*attn_scores_fn)(const uint16_t *const *k, int n, const float *q, int64_t hd, float *s);
typedef void (*attn_accum_fn)(float *o, const float *p, const uint16_t *const *v, int n, int64_t hd);
/* s[i] = e^(s[i] - mx) for i < n (n <= 16); returns their sum */
typedef float (*attn_exp_fn)(float *s, int n, float mx);

void attn_scores_avx2(const uint16_t *const *k, int n, const float *q, int64_t hd, float *s);
void attn_accum_avx2(float *o, const float *p, const uint16_t *const *v, int n, int64_t hd);
void attn_scores_avx512(const uint16_t *const *k, int n, const float *q, int64_t hd, float *s);
void attn_accum_avx512(float *o, const float *p, const uint16_t *const *v, int n, int64_t hd);
float attn_exp_avx512(float *s, int n, float mx);

#endif
