/* llm/linear: the one point where a forward applies a weight (layer, weight
 * id, input rows, output rows, and what the backend may fuse around it).
 * Every forward (llm/forward.c, llm/arch_gpt2.c) calls it for every weight,
 * the output head included (layer -1, LLM_W_OUTPUT). The rows of one call
 * may belong to different sequences (the step's be_step.seq gives each
 * row's sequence), so a per-sequence term such as a LoRA adapter's is
 * applied here per row, before the backend's epilogue (the QKV epilogue
 * rotates and caches what the linear produced, so the term must be in y
 * by then: be_linear carries it to the backend).
 * Owns nothing. Calls: backend. */
#include "llm/context.h"
#include "lora/lora.h"

tl_status llm_linear(llm_run *r, const be_linear *l) {
    be_linear with;
    be_lowrank lr;
    l = lora_linear(r, l, &with, &lr); /* the adapters' terms for this weight, if any */
    tl_status s = r->be->linear(r->bc, l);
    if (s) return tl_err_prefix(s, "linear (layer %d, weight %d): ", l->layer, l->wid);
    return TL_OK;
}
