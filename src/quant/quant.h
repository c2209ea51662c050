/* quant: GGUF block formats, bit-exact with the GGUF specification.
 *
 * For each tensor type: a scalar reference quantizer and dequantizer (the
 * oracle in tests) and the dot-product kernels matmul uses. Matmul does not
 * dot weights with float activations directly: the activation row is first
 * converted to the weight type's `vec_dot_type` (Q8_0 for Q4_0/Q8_0, Q8_1 for
 * Q4_1, F16 for F16, BF16 for BF16, F32 for F32, Q8_K for K-quants), as the
 * reference engine does, so results match it and the inner loop is integer.
 * quant_kernels_get picks AVX2/FMA (or AVX-512) kernels at run time when the
 * CPU has them, else the scalar ones; quant_kernels_ref always gives scalar.
 * Owns: block layouts and kernels. Calls: base (fp16, cpu), tensor/dtype. */
#ifndef TL_QUANT_QUANT_H
#define TL_QUANT_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "tensor/dtype.h"

/* n elements (multiple of the block size) */
typedef void (*quant_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*quant_from_float_fn)(const float *src, void *dst, int64_t n);
/* *s = dot(x[0..n), y[0..n)); x in the weight type, y in vec_dot_type */
typedef void (*quant_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);

typedef struct quant_kernels {
    tl_type type;
    tl_type vec_dot_type;
    quant_to_float_fn to_float;       /* dequantize */
    quant_from_float_fn from_float;   /* quantize (reference rounding) */
    quant_vec_dot_fn vec_dot;         /* weight row . activation row */
} quant_kernels;

/* Kernels of the level in use (base/cpu's tl_cpu_level()) for type t;
 * NULL if t has none. */
const quant_kernels *quant_kernels_get(tl_type t);
/* Kernels of a given level (TL_CPU_LEVEL_*) for type t; NULL if t has none
 * or this CPU cannot run that level (the twin tests walk every level). */
const quant_kernels *quant_kernels_at(int level, tl_type t);
/* Portable scalar kernels (the oracle); NULL if t has none. */
const quant_kernels *quant_kernels_ref(tl_type t);

/* Convenience: dequantize n elements of type t. TL_ERR_UNSUPPORTED if t has
 * no dequantizer (message names the type). */
tl_status quant_dequantize(tl_type t, const void *src, float *dst, int64_t n);
/* Convenience: quantize n elements to type t with the reference quantizer. */
tl_status quant_quantize(tl_type t, const float *src, void *dst, int64_t n);
/* The type a tensor of row length ne0 gets when t's block does not divide
 * ne0 (t itself when it does): the reference quantize tool's fallbacks
 * (K-quants to a 32-block type of about the same size, IQ4_XS/Q2_K/Q3_K to
 * IQ4_NL), F16 when nothing else fits. */
tl_type quant_row_fallback(tl_type t, int64_t ne0);
/* Scalar twins of the SIMD activation quantizers for Q8_0/Q8_1 (id =
 * 127/amax, halves rounded to even: the reference engine's SIMD rule, which
 * differs from from_float's in about 1 block in 10^4): the oracle the AVX2
 * from_float of those types is tested against. */
void quant_q8_0_act_from_float_ref(const float *src, void *dst, int64_t n);
void quant_q8_1_act_from_float_ref(const float *src, void *dst, int64_t n);

#endif
