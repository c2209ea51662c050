/* train/cuda/tcu_common: what the framework's .cu files share: the one
 * stream and library handles (lazily made on first use), error mapping and
 * launch helpers. Calls: CUDA runtime, cuBLASLt. */
#ifndef TL_TRAIN_CUDA_TCU_COMMON_CUH
#define TL_TRAIN_CUDA_TCU_COMMON_CUH

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "base/status.h"
}
#include "train/cuda/tcu.h"

struct tcu_state {
    bool ready, failed;
    cudaStream_t stream;
    cublasLtHandle_t lt;
    void *lt_ws;
    size_t lt_ws_bytes;
    int n_sm;
};

/* The process's state, initialised on first call; NULL if no device. */
tcu_state *tcu_get(void);

static inline tl_status tcu_err(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return TL_OK;
    return tl_err(TL_ERR_BACKEND, "train cuda: %s: %s", what, cudaGetErrorString(e));
}

#define TCU_STATE(s)                                                                          \
    tcu_state *s = tcu_get();                                                                 \
    if (!s) return tl_err(TL_ERR_BACKEND, "train cuda: no CUDA device")

static inline unsigned tcu_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 1048576 ? 1048576 : b);
}

#endif
