/* backend/cuda_tuning: the defaults of tl_cuda_tuning (include/tallow.h),
 * compiled into every build so that a caller can fill the struct whether or
 * not the library has the CUDA backend (tlc_init checks the ranges).
 * Owns: nothing. Calls: nothing. */
#include "tallow.h"

tl_cuda_tuning tl_cuda_tuning_default(void) {
    tl_cuda_tuning t = {
        .pdl = true,
        .flash_prefill = true,
        .att_split_min = 16,
        .mv_store_units = 0,
        .mv_glu_units = 0,
        .mv_split_max = 4,
        .mvm_max_tokens = 4,
    };
    return t;
}
