/* tools/quant_mix: the rule the K-quant "mixes" (Q4_K_M, Q5_K_M) use to give
 * some attn_v / ffn_down tensors more bits: the first and last eighth of
 * the layers and every third layer in between. Shared by quantize and synth
 * so both make the same files the reference quantizer makes. */
#ifndef TL_TOOLS_QUANT_MIX_H
#define TL_TOOLS_QUANT_MIX_H

#include <stdbool.h>

/* layer (or tensor) i of n gets the larger type */
static inline bool quant_mix_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

#endif
