/* llm/linear: the one point where a forward applies a weight (layer, weight
 * id, input rows, output rows, and what the backend may fuse around it).
 * Owns nothing. Calls: backend. */
#include "llm/context.h"

tl_status llm_linear(llm_run *r, const be_linear *l) {
    tl_status s = r->be->linear(r->bc, l);
    if (s) return tl_err_prefix(s, "linear (layer %d, weight %d): ", l->layer, l->wid);
    return TL_OK;
}
