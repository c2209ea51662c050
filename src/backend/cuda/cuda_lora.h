/* backend/cuda/cuda_lora: the gathered low-rank product of LoRA adapters on
 * the GPU, for a batch whose tokens use different adapter sets (Punica's
 * SGMV idea, in two launches that never split the batch):
 *   shrink  tmp[e][r] = A_g[r] . x[row_e]                 one block per entry
 *   expand  y[t][o] += sum over t's entries e of s_g * B_g[o] . tmp[e]
 * An entry e is one (row, group) use: a row whose sequence has k adapters
 * has k entries. Entries are sorted by row, and row_ptr[t]..row_ptr[t + 1]
 * are row t's (a CSR index), so expand sums each output in one thread in a
 * fixed order: no atomics, the same bits on every run. Groups are given per
 * linear point (each (layer, weight) has its own A/B pointers), all device
 * memory: A [rank][n_in] row-major, B stored transposed, Bt [rank][n_out],
 * so a warp's lanes read consecutive outputs; a group also says which
 * output columns it adds to, so the terms of q, k and v (or gate and up) of
 * one linear share the two launches. Activations are f32.
 * Nothing here knows a model; src/lora builds the entries.
 * Owns: nothing. Calls: CUDA runtime; base/status. */
#ifndef TL_BACKEND_CUDA_LORA_H
#define TL_BACKEND_CUDA_LORA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "base/status.h"

typedef struct tlc_lora_group {
    const float *a;  /* [rank][n_in] */
    const float *bt; /* [rank][n_out] (B transposed) */
    float scale;     /* user scale * alpha / rank */
    int32_t rank;    /* <= the max_rank the tmp rows hold; 0: adds nothing */
    int32_t col0, n_out; /* the output columns it adds to: [col0, col0 + n_out) */
} tlc_lora_group;

/* tmp [n_ent][max_rank]; x rows of ldx floats (n_in used). stream: a
 * cudaStream_t (NULL: the default stream). */
tl_status tlc_lora_shrink(const float *x, int64_t ldx, int32_t n_in, const int32_t *ent_row, const int32_t *ent_grp,
                          int32_t n_ent, const tlc_lora_group *groups, int32_t max_rank, float *tmp, void *stream);
/* y rows of ldy floats (columns 0..n_cols-1 walked; each group adds to its
 * own columns, so one launch serves the parts of a stacked weight) for rows
 * 0..n_rows-1, row_ptr [n_rows + 1]. */
tl_status tlc_lora_expand(float *y, int64_t ldy, int32_t n_cols, const int32_t *row_ptr, int32_t n_rows,
                          const int32_t *ent_grp, const tlc_lora_group *groups, int32_t max_rank, const float *tmp,
                          void *stream);

#ifdef __cplusplus
}
#endif
#endif
