/* grammar/gbnf_graph: the graph of rule references of a lowered grammar
 * and its strongly connected components (see gbnf.h). */
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"

static tl_status gg_nomem(void) { return tl_err(TL_ERR_NOMEM, "grammar: out of memory"); }

tl_status gbnf_graph_init(gbnf_graph *gr, const gbnf *g) {
    int32_t nr = g->n_rules, n = 0;
    gr->ref_at = malloc(((size_t)nr + 1) * sizeof *gr->ref_at);
    gr->refs = malloc(((size_t)g->n_elems + 1) * sizeof *gr->refs);
    gr->tail = malloc((size_t)g->n_elems + 1);
    if (!gr->ref_at || !gr->refs || !gr->tail) return gg_nomem();
    for (int32_t r = 0; r < nr; r++) {
        gr->ref_at[r] = n;
        for (int32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++)
            for (int32_t pos = g->alts[a]; g->elems[pos] != GB_END; pos++)
                if (GB_IS_REF(g->elems[pos])) {
                    gr->tail[n] = g->elems[pos + 1] == GB_END;
                    gr->refs[n++] = GB_REF_RULE(g->elems[pos]);
                }
    }
    gr->ref_at[nr] = n;
    return TL_OK;
}

/* Tarjan's algorithm, iterative: chains of rules are as deep as the
 * grammar is large. */
tl_status gbnf_scc(const gbnf_graph *gr, int32_t nr, int32_t *comp) {
    int32_t *idx = malloc((size_t)nr * sizeof *idx), *low = malloc((size_t)nr * sizeof *low);
    int32_t *stk = malloc((size_t)nr * sizeof *stk), *call = malloc((size_t)nr * sizeof *call);
    int32_t *edge = malloc((size_t)nr * sizeof *edge);
    uint8_t *on = calloc((size_t)nr, 1);
    if (!idx || !low || !stk || !call || !edge || !on) {
        free(idx), free(low), free(stk), free(call), free(edge), free(on);
        return gg_nomem();
    }
    for (int32_t r = 0; r < nr; r++) idx[r] = -1;
    int32_t next = 0, ns = 0, nc = 0;
    for (int32_t r0 = 0; r0 < nr; r0++) {
        if (idx[r0] >= 0) continue;
        int32_t depth = 0;
        call[depth++] = r0, edge[r0] = gr->ref_at[r0];
        idx[r0] = low[r0] = next++, stk[ns++] = r0, on[r0] = 1;
        while (depth) {
            int32_t r = call[depth - 1];
            if (edge[r] < gr->ref_at[r + 1]) {
                int32_t q = gr->refs[edge[r]++];
                if (idx[q] < 0) {
                    call[depth++] = q, edge[q] = gr->ref_at[q];
                    idx[q] = low[q] = next++, stk[ns++] = q, on[q] = 1;
                } else if (on[q] && idx[q] < low[r]) {
                    low[r] = idx[q];
                }
                continue;
            }
            depth--;
            if (low[r] == idx[r]) {
                int32_t q;
                do {
                    q = stk[--ns];
                    on[q] = 0;
                    comp[q] = nc;
                } while (q != r);
                nc++;
            }
            if (depth && low[r] < low[call[depth - 1]]) low[call[depth - 1]] = low[r];
        }
    }
    free(idx), free(low), free(stk), free(call), free(edge), free(on);
    return TL_OK;
}


void gbnf_graph_free(gbnf_graph *gr) {
    free(gr->ref_at), free(gr->refs), free(gr->tail);
    memset(gr, 0, sizeof *gr);
}
