/* backend/cpu/attention_f16: the inner loops of CPU attention, per kernel
 * level, over one KV tile of 16 positions (lane i = position p0 + i, p0 a
 * multiple of 16) whose f16 K and V rows were converted once to f32 for
 * every query that reads them:
 *   cvt:     t <- rows[0..16) (f16 -> f32, exact), laid out as the level's
 *            tile reads it: [16][hd] for the scalar and AVX2 levels,
 *            [hd / 16][16][16] for AVX-512;
 *   scores:  s[i] = dot(kt[i], q) for all 16 rows (q f32 holding
 *            f16-rounded values; [16][hd] tiles);
 *   accum:   o [hd] += sum over lo <= i < hi of p[i] vt[i] ([16][hd]);
 *   tile:    for each of ng queries (q, o [ng][hd]; mx, l [ng]) seeing
 *            lanes [lo, hi): its scores times scale, the running max mx
 *            raised to the tile's if higher (l and o scaled by
 *            e^(mx_old - mx)), p[i] = e^(s[i] - mx), l += their sum,
 *            o += sum p[i] vt[i]. The scalar and AVX2 levels compose it
 *            from their scores and accum (attention.c), the AVX-512 one
 *            does it in registers.
 * Each query's arithmetic depends on its own lanes only, never on the
 * other queries of a tile, so a token's result does not depend on its
 * batch. The AVX2 (F16C) forms need hd % 8 == 0, the AVX-512 ones
 * hd % 16 == 0. */
#ifndef TL_BACKEND_CPU_ATTENTION_F16_H
#define TL_BACKEND_CPU_ATTENTION_F16_H

#include <stdint.h>

#define ATT_TILE 16

typedef void (*attn_cvt_fn)(const uint16_t *const *rows, int64_t hd, float *t);
typedef void (*attn_scores_fn)(const float *kt, const float *q, int64_t hd, float *s);
typedef void (*attn_accum_fn)(float *o, const float *p, const float *vt, int64_t hd, int lo, int hi);
typedef void (*attn_tile_fn)(const float *kt, const float *vt, const float *q, int64_t ng, int64_t hd, int lo, int hi,
                             float scale, float *mx, float *l, float *o);

void attn_cvt_avx2(const uint16_t *const *rows, int64_t hd, float *t);
void attn_scores_avx2(const float *kt, const float *q, int64_t hd, float *s);
void attn_accum_avx2(float *o, const float *p, const float *vt, int64_t hd, int lo, int hi);
void attn_cvt_avx512(const uint16_t *const *rows, int64_t hd, float *t);
void attn_tile_avx512(const float *kt, const float *vt, const float *q, int64_t ng, int64_t hd, int lo, int hi,
                      float scale, float *mx, float *l, float *o);

#endif
