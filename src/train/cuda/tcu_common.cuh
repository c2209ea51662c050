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
#include "backend/cuda/cuda_backend.h"

struct tcu_state {
    bool ready, failed;
    tlc_prof *prof;       /* kernel-call timer while profiling, else NULL */
    int prof_depth;       /* tcu calls in progress (a call may make others) */
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

/* While profiling, the outermost call's work is charged to its name, and
 * the stream's wait before it (the host was behind) to "(device idle)". */
struct tcu_prof_scope {
    tcu_state *s;
    const char *name;
    int detail;
    tcu_prof_scope(tcu_state *st, const char *nm, int d = -1) : s(st), name(nm), detail(d) {
        if (s->prof && !s->prof_depth++) tlc_prof_mark(s->prof, s->stream, "(device idle)", -1);
    }
    ~tcu_prof_scope() {
        if (s->prof && !--s->prof_depth) tlc_prof_mark(s->prof, s->stream, name, detail);
    }
};

#define TCU_STATE_D(s, detail)                                                                \
    tcu_state *s = tcu_get();                                                                 \
    if (!s) return tl_err(TL_ERR_BACKEND, "train cuda: no CUDA device");                      \
    tcu_prof_scope tcu_scope_(s, __func__, (int)(detail))
/* the profile's detail: a number that tells calls apart (a matmul's width) */
#define TCU_STATE(s) TCU_STATE_D(s, -1)

static inline unsigned tcu_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 1048576 ? 1048576 : b);
}

#endif
