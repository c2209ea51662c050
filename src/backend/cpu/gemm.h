/* backend/cpu/gemm: register-blocked kernels for prefill matmuls.
 *
 * A matrix-vector dot product re-unpacks every weight block for each token.
 * These kernels dot one weight row against 4 activation rows at once, so a
 * block's nibbles are unpacked and its scales converted once per 4 tokens.
 * The activations' fp16 block scales are converted to float once per matmul
 * (gemm_prep_scales) into a [n_blocks][8] table per group of 4 tokens:
 * d0..d3 then s0..s3 (s: Q8_1's d*sum(q); 0 for Q8_0). The integer sums
 * and per-block float scaling are the vec_dot kernels', so results agree
 * with them up to float summation order.
 * Owns nothing. Calls: quant block layouts. */
#ifndef TL_BACKEND_CPU_GEMM_H
#define TL_BACKEND_CPU_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "tensor/dtype.h"

/* s[t] = dot(w[0..n), y_t[0..n)) for t < 4; w in its type, y_t in its
 * vec_dot_type; ds is the scale table of these 4 activation rows. */
typedef void (*gemm_1x4_fn)(int64_t n, float *s, const void *w, const uint8_t *y, size_t y_stride,
                            const float *ds);

/* The 1x4 kernel for weight type t on this CPU, or NULL (use vec_dot). */
gemm_1x4_fn gemm_get_1x4(tl_type t);

/* Fill ds [n/32][8] for 4 activation rows y, y + y_stride, ... of type at
 * (Q8_0 or Q8_1) with n elements each. */
void gemm_prep_scales(tl_type at, int64_t n, const uint8_t *y, size_t y_stride, float *ds);

/* F16 weights (prefill): s[t] = dot(w, y + t*y_stride) for t < 4, and the
 * single-row form; y is f32 holding f16-rounded values. NULL if this CPU
 * has no kernel (then the F16 vec_dot path is used). */
typedef void (*gemm_f16_1x4_fn)(int64_t n, float *s, const uint16_t *w, const float *y, size_t y_stride);
typedef void (*gemm_f16_1x1_fn)(int64_t n, float *s, const uint16_t *w, const float *y);
gemm_f16_1x4_fn gemm_get_f16_1x4(void);
gemm_f16_1x1_fn gemm_get_f16_1x1(void);
/* y[i] = x[i] rounded to f16 and widened back (AVX2 only; see the getters) */
void gemm_round_f16_avx2(const float *x, float *y, int64_t n);

#endif
