/* backend/cpu/attention_f16: the two inner loops of CPU attention over f16
 * K/V rows, per kernel level: scores s[i] = dot(k_i, q) and the weighted
 * sum o += sum_i p[i] v_i, for n rows (n <= 16, one KV cache block) that
 * lie stride elements apart. q is f32 holding f16-rounded values. The
 * AVX2 (F16C) forms need hd % 8 == 0, the AVX-512 ones hd % 16 == 0. */
#ifndef TL_BACKEND_CPU_ATTENTION_F16_H
#define TL_BACKEND_CPU_ATTENTION_F16_H

#include <stdint.h>

typedef void (*attn_scores_fn)(const uint16_t *k, int64_t stride, int n, const float *q, int64_t hd, float *s);
typedef void (*attn_accum_fn)(float *o, const float *p, const uint16_t *v, int64_t stride, int n, int64_t hd);

void attn_scores_avx2(const uint16_t *k, int64_t stride, int n, const float *q, int64_t hd, float *s);
void attn_accum_avx2(float *o, const float *p, const uint16_t *v, int64_t stride, int n, int64_t hd);
void attn_scores_avx512(const uint16_t *k, int64_t stride, int n, const float *q, int64_t hd, float *s);
void attn_accum_avx512(float *o, const float *p, const uint16_t *v, int64_t stride, int n, int64_t hd);

#endif
