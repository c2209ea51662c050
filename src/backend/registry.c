/* backend/registry: finds the backend table for a kind (tl_backend_kind).
 * The only place that knows which backends were compiled in. */
#include "backend/backend.h"

const be_ops *be_find(int kind, const char **why) {
    *why = NULL;
    switch (kind) {
    case TL_BACKEND_CPU:
        return be_cpu();
    case TL_BACKEND_CUDA:
        *why = "the CUDA backend is not built into this tallow (configure with -DTALLOW_CUDA=ON)";
        return NULL;
    }
    *why = "unknown backend kind";
    return NULL;
}
