/* backend/cpu/gemm: register-blocked kernels for prefill matmuls.
 *
 * A matrix-vector dot product re-unpacks every weight block for each token.
 * These kernels dot one weight row against 4 activation rows at once, so a
 * block's nibbles are unpacked and its scales converted once per 4 tokens.
 * The activations' fp16 block scales are converted to float once per matmul
 * (gemm_prep_scales) into a [n_blocks][8] table per group of 4 tokens:
 * d0..d3 then s0..s3 (s: Q8_1's d*sum(q) as stored in fp16; for Q8_0,
 * d*sum(q) in float, which lets Q4_0 / Q5_0 use their weights unsigned).
 * Weight types with Q8_K activations (K-quants, IQ4_XS) read the float
 * scale and per-16 sums from the Q8_K blocks themselves and take no table
 * (ds is NULL). Integer sums are exact and the per-block float scaling is
 * the vec_dot kernels', so results agree with them up to float rounding
 * (summation order; Q4_0 / Q5_0 add their -8 / -16 offset term in float);
 * tests/test_ops.c checks every type against float64.
 * Owns nothing. Calls: quant block layouts. */
#ifndef TL_BACKEND_CPU_GEMM_H
#define TL_BACKEND_CPU_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor/dtype.h"

/* s[t] = dot(w[0..n), y_t[0..n)) for t < 4; w in its type, y_t in its
 * vec_dot_type; ds is the scale table of these 4 activation rows (Q8_0 /
 * Q8_1 activations; unused for Q8_K). */
typedef void (*gemm_1x4_fn)(int64_t n, float *s, const void *w, const uint8_t *y, size_t y_stride,
                            const float *ds);

/* The 1x4 kernel for weight type t on this CPU, or NULL (use vec_dot). */
gemm_1x4_fn gemm_get_1x4(tl_type t);

/* Fill ds [n/32][8] for 4 activation rows y, y + y_stride, ... of type at
 * (Q8_0 or Q8_1) with n elements each. */
void gemm_prep_scales(tl_type at, int64_t n, const uint8_t *y, size_t y_stride, float *ds);

/* One token (decode, or prefill of fewer than 4 tokens): s = dot(w, y)
 * with ds1 this row's [n/32][2] table (d, s as in the 4-token table). */
typedef void (*gemm_1x1_fn)(int64_t n, float *s, const void *w, const uint8_t *y, const float *ds1);

/* The 1x1 kernel for weight type t on this CPU, or NULL (use vec_dot). */
gemm_1x1_fn gemm_get_1x1(tl_type t);

/* One token over 4 weight rows w, w + rb, w + 2 rb, w + 3 rb (decode):
 * s[r] = dot(row r, y), ds1 as for gemm_1x1_fn. */
typedef void (*gemm_4x1_fn)(int64_t n, float *s, const void *w, size_t rb, const uint8_t *y, const float *ds1);

/* The 4-row kernel for weight type t on this CPU, or NULL (rows one by one). */
gemm_4x1_fn gemm_get_4x1(tl_type t);

/* Fill ds1 [n/32][2] for one activation row y of type at (Q8_0 / Q8_1). */
void gemm_prep_scales1(tl_type at, int64_t n, const uint8_t *y, float *ds1);

/* F16 weights (prefill): s[t] = dot(w, y + t*y_stride) for t < 4, and the
 * single-row form; y is f32 holding f16-rounded values. NULL if this CPU
 * has no kernel (then the F16 vec_dot path is used). */
typedef void (*gemm_f16_1x4_fn)(int64_t n, float *s, const uint16_t *w, const float *y, size_t y_stride);
typedef void (*gemm_f16_1x1_fn)(int64_t n, float *s, const uint16_t *w, const float *y);
gemm_f16_1x4_fn gemm_get_f16_1x4(void);
gemm_f16_1x1_fn gemm_get_f16_1x1(void);
/* y[i] = x[i] rounded to f16 and widened back (AVX2 only; see the getters) */
void gemm_round_f16_avx2(const float *x, float *y, int64_t n);

/* F16 weights on AVX-512 (prefill). GEMM_F16_ROWS rows are packed
 * element-major, panel[e * GEMM_F16_ROWS + r] = row r's element e (rows
 * past the end zero; panel 64-byte aligned), so one load gives an element
 * of 16 rows; the activations, rounded to f16 and kept as f32, are stored
 * in groups of up to GEMM_F16_TOK tokens, a group of nt tokens holding
 * token t's element e at e * nt + t, so a token's element is one broadcast
 * from an address fixed per tile. */
#define GEMM_F16_ROWS 32
#define GEMM_F16_TOK 12
/* whether this CPU runs the F16 panel kernel */
bool gemm_f16_panel_ok(void);
size_t gemm_f16_panel_bytes(int64_t k);
void gemm_f16_panel_pack_avx512(const uint16_t *w, size_t row_bytes, int nrows, int64_t k, uint16_t *panel);
/* one group: nt token rows of x (k apart) rounded into y */
void gemm_f16_round_group_avx512(const float *x, float *y, int64_t k, int nt);
/* out[t * ldo + r] = dot(row r, token t) for t < nt (<= GEMM_F16_TOK) of
 * group y and r < nrows (<= GEMM_F16_ROWS) */
void gemm_f16_panel_run_avx512(int64_t k, const uint16_t *panel, const float *y, int nt, int nrows, float *out,
                               int64_t ldo);

/* BF16 weights on AVX-512 BF16 (prefill): the F16 layout on element
 * pairs. panel[(p * GEMM_F16_ROWS + r) * 2 + h] = row r's element 2p + h
 * (zero past the row's end or the last row), and a group of nt tokens
 * holds token t's elements 2p, 2p + 1 as bf16 at (p * nt + t) * 2. */
bool gemm_bf16_panel_ok(void);
size_t gemm_bf16_panel_bytes(int64_t k);
void gemm_bf16_panel_pack_avx512(const uint16_t *w, size_t row_bytes, int nrows, int64_t k, uint16_t *panel);
void gemm_bf16_round_group_avx512(const float *x, uint16_t *y, int64_t k, int nt);
void gemm_bf16_panel_run_avx512(int64_t k, const uint16_t *panel, const uint16_t *y, int nt, int nrows, float *out,
                                int64_t ldo);

/* Few tokens (2..GEMM_FEW_MAX) on AVX-512 VNNI, 32-element block types
 * (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL): the weight rows are read as
 * stored, the activations rearranged once per matmul into a table of
 * 4-token groups (block-major: block i's slot for group g at
 * (i * ng + g) * 256 bytes, ng = ceil(m / 4)) so that one vpdpbusd
 * multiplies a weight block's 16 elements into 4 tokens at once. */
#define GEMM_FEW_MAX 16
#define GEMM_FEW_GROUPS 4 /* GEMM_FEW_MAX / 4 */
#define GEMM_FEW_SLOT 256 /* table bytes per block and group: 4 vectors */
/* whether weight type t has a few-token kernel on this CPU */
bool gemm_few_ok(tl_type t);
/* table bytes for rows of k elements and up to GEMM_FEW_MAX tokens */
size_t gemm_few_bytes(int64_t k);
/* fill group g (of ng) of the table tab (64-byte aligned) from nt (1..4)
 * activation rows y, y + ys, ... of type at (Q8_0 or Q8_1), k elements */
void gemm_few_prep_avx512(tl_type at, int64_t k, const uint8_t *y, size_t ys, int nt, int ng, int g, uint8_t *tab);
/* out[j * ldo + r] = dot(row r, token j) for j < m (2..GEMM_FEW_MAX), r <
 * nrows; rows of type t at w, rb bytes apart; tab filled for these m tokens */
void gemm_few_run_avx512(tl_type t, int64_t k, const uint8_t *w, size_t rb, int nrows, const uint8_t *tab, int m,
                         float *out, int64_t ldo);

/* Weight panels (AVX-512 VNNI prefill). GEMM_PANEL rows of a 32-block
 * type are repacked into a panel whose block i holds, for each group of 4
 * elements (8 groups), those 4 quants of all GEMM_PANEL rows side by side:
 * q[i][g][r][0..4) as unsigned bytes (signed types stored as q + 128), then
 * the rows' float scales d[i][r] and, for the types with a min (Q4_1,
 * Q5_1, Q4_K, Q5_K), m[i][r], then a 32-bit slot e[i][r]; K-quants and
 * IQ4_XS are panels of their 32-element sub-blocks (Q6_K, Q3_K: d for the
 * first 16 elements, m the second's scale; Q2_K: bytes scale * q, d and
 * m = -dmin of the super-block, e the two 16-element groups' mins as an
 * int16 pair). One vpdpbusd of a panel vector with 4 activation quants
 * broadcast then adds 4 products to each of the 16 rows' sums: no
 * horizontal reduction. Rows past the end of the matrix are zero. */
#define GEMM_PANEL 16
/* bytes of one panel for rows of k elements (64-byte multiple) */
size_t gemm_panel_bytes(int64_t k);
/* whether weight type t has a panel form (and this CPU runs it) */
bool gemm_panel_ok(tl_type t);
/* pack nrows (<= GEMM_PANEL) rows of type t, row_bytes apart, into panel
 * (panel 64-byte aligned) */
void gemm_panel_pack_avx512(tl_type t, const uint8_t *w, size_t row_bytes, int nrows, int64_t k, uint8_t *panel);
/* per activation row and block: (d, c) with c = 128 * sum(q) for Q8_0 (the
 * q + 128 correction) or s = d * sum(q) as stored for Q8_1; for Q8_K, per
 * 32-element sub-block, d and d * sum(q) from its per-16 sums; ds1
 * [n/32][2] */
void gemm_panel_prep(tl_type at, int64_t n, const uint8_t *y, float *ds1);
/* out[j * ldo + r] = dot(row r, token j) for j < m, r < nrows; token j's
 * activations at y + j * ys (type at: Q8_0 or Q8_1), its table at
 * ds + j * (k / 32) * 2 */
void gemm_panel_run_avx512(tl_type t, int64_t k, const uint8_t *panel, const uint8_t *y, size_t ys, const float *ds,
                           int64_t m, int nrows, float *out, int64_t ldo);

#endif
