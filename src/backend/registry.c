/* backend/registry: finds the backend table for a kind (tl_backend_kind).
 * The only place that knows which backends were compiled in. */
#include "backend/backend.h"
#ifdef TALLOW_CUDA
const be_ops *be_cuda(void); /* backend/cuda/cuda_be.c */
#endif

const be_ops *be_find(int kind, const char **why) {
    *why = NULL;
    switch (kind) {
    case TL_BACKEND_CPU:
        return be_cpu();
    case TL_BACKEND_CUDA:
#ifdef TALLOW_CUDA
        return be_cuda();
#else
        *why = "the CUDA backend is not built into this tallow (configure with -DTALLOW_CUDA=ON)";
        return NULL;
#endif
    }
    *why = "unknown backend kind";
    return NULL;
}
