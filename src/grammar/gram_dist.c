/* grammar/gram_dist: shortest completions (see gram_dist.h). */
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_dist.h"

static tl_status gd_nomem(void) { return tl_err(TL_ERR_NOMEM, "grammar: out of memory"); }

static int32_t gd_add(int32_t a, int32_t b) { return a >= GD_INF - b ? GD_INF : a + b; }

/* Shortest text from position pos to the end of its alternative, with the
 * rule lengths known so far. */
static int32_t gd_suffix(const gbnf *g, const int32_t *rule, int32_t pos) {
    int32_t n = 0;
    for (int32_t e; (e = g->elems[pos]) != GB_END && n < GD_INF; pos++) n = gd_add(n, GB_IS_REF(e) ? rule[GB_REF_RULE(e)] : 1);
    return n;
}

tl_status gd_init(gd_dist *d, const gbnf *g) {
    memset(d, 0, sizeof *d);
    d->rule = malloc(((size_t)g->n_rules + 1) * sizeof *d->rule);
    d->rest = malloc(((size_t)g->n_elems + 1) * sizeof *d->rest);
    if (!d->rule || !d->rest) {
        gd_free(d);
        return gd_nomem();
    }
    for (int32_t r = 0; r < g->n_rules; r++) d->rule[r] = GD_INF;
    /* Every pass can only lower a rule's length, and a length that is not
     * final yet waits on a shorter one below it, so at most n_rules + 1
     * passes change anything; usually a handful do. */
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t r = 0; r < g->n_rules; r++)
            for (int32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++) {
                int32_t n = gd_suffix(g, d->rule, g->alts[a]);
                if (n < d->rule[r]) d->rule[r] = n, changed = true;
            }
    }
    /* rest, from each alternative's end backwards */
    for (int32_t i = g->n_elems - 1; i >= 0; i--) {
        int32_t e = g->elems[i];
        d->rest[i] = e == GB_END ? 0 : gd_add(d->rest[i + 1], GB_IS_REF(e) ? d->rule[GB_REF_RULE(e)] : 1);
    }
    return TL_OK;
}

void gd_free(gd_dist *d) {
    free(d->rule), free(d->rest), free(d->node), free(d->chain);
    memset(d, 0, sizeof *d);
}

/* Distance of stack x: its node's rest plus its parent's, filled up the
 * chain of nodes not yet known (iteratively: stacks can be deep). */
static tl_status gd_node(gd_dist *d, const gm_pda *p, int32_t x, int32_t *out) {
    if (p->cap_nodes > d->cap_node) {
        int32_t *a = realloc(d->node, (size_t)p->cap_nodes * sizeof *a);
        if (!a) return gd_nomem();
        for (int32_t i = d->cap_node; i < p->cap_nodes; i++) a[i] = -1;
        d->node = a;
        d->cap_node = p->cap_nodes;
    }
    int32_t n = 0, y = x, base = 0;
    while (y >= 0 && d->node[y] < 0) {
        if (n == d->cap_chain) {
            int32_t c = d->cap_chain ? 2 * d->cap_chain : 64;
            int32_t *a = realloc(d->chain, (size_t)c * sizeof *a);
            if (!a) return gd_nomem();
            d->chain = a;
            d->cap_chain = c;
        }
        d->chain[n++] = y;
        y = p->npar[y];
    }
    if (y >= 0) base = d->node[y];
    /* y < 0: past the root (it ends there); a frame's end marker never
     * reaches here, since only whole stacks are measured */
    while (n--) base = d->node[d->chain[n]] = gd_add(base, d->rest[p->npos[d->chain[n]]]);
    *out = base;
    return TL_OK;
}

tl_status gd_state(gd_dist *d, const gm_pda *p, int32_t st, int32_t *out) {
    *out = GD_INF;
    if (st < 0) return TL_OK;
    if (p->s_acc[st]) {
        *out = 0;
        return TL_OK;
    }
    const int32_t *v = p->pool + p->s_off[st];
    for (int32_t i = 0; i < p->s_len[st]; i++) {
        int32_t n = GD_INF;
        tl_status s = gd_node(d, p, v[i], &n);
        if (s) return s;
        if (n < *out) *out = n;
    }
    return TL_OK;
}
