/* llm/backend: connects a model to a device backend. The CPU needs nothing
 * (weights stay in the mapping); CUDA uploads weights once at load. */
#include "llm/model.h"

tl_status llm_backend_attach(tl_model *m) {
    switch (m->params.backend) {
    case TL_BACKEND_CPU:
        return TL_OK;
    case TL_BACKEND_CUDA:
        return tl_err(TL_ERR_UNSUPPORTED, "model: the CUDA backend is not built into this tallow "
                                          "(configure with -DTALLOW_CUDA=ON)");
    }
    return tl_err(TL_ERR_INVALID, "model: unknown backend %d", (int)m->params.backend);
}

void llm_backend_detach(tl_model *m) { (void)m; }
