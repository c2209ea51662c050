/* grammar/gbnf_dedup: rules that are the same rule written twice made one.
 *
 * Two rules are the same when their alternatives are the same sequences of
 * byte sets and references to rules that are the same. Generated grammars
 * repeat rules often (a JSON Schema gives every string property its own
 * copy of the string rule, and every x* its own star rule); once every
 * reference points at one representative, equal parses are equal stacks,
 * so the automaton's states and the mask walks' frame entries (see
 * gram_frame.h) are shared between them.
 * Owns: nothing past the call. Calls: grammar/gbnf. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "grammar/gbnf_build.h"

static uint64_t gd_mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

/* Element e of rule r as its signature sees it: a reference by its
 * target's representative, or as "itself" when r refers to itself. */
static int64_t gd_elem(const int32_t *canon, int32_t r, int32_t e) {
    if (!GB_IS_REF(e)) return e;
    int32_t t = GB_REF_RULE(e);
    return t == r ? INT64_MIN : (int64_t)1 << 40 | canon[t];
}

static uint64_t gd_hash(const gbnf *g, const int32_t *canon, int32_t r) {
    uint64_t h = gd_mix(0, (uint64_t)(g->rule_alt[r + 1] - g->rule_alt[r]));
    for (int32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++)
        for (int32_t pos = g->alts[a];; pos++) {
            h = gd_mix(h, (uint64_t)gd_elem(canon, r, g->elems[pos]));
            if (g->elems[pos] == GB_END) break;
        }
    return h;
}

static bool gd_same(const gbnf *g, const int32_t *canon, int32_t r, int32_t q) {
    if (g->rule_alt[r + 1] - g->rule_alt[r] != g->rule_alt[q + 1] - g->rule_alt[q]) return false;
    for (int32_t k = 0; k < g->rule_alt[r + 1] - g->rule_alt[r]; k++)
        for (int32_t i = g->alts[g->rule_alt[r] + k], j = g->alts[g->rule_alt[q] + k];; i++, j++) {
            if (gd_elem(canon, r, g->elems[i]) != gd_elem(canon, q, g->elems[j])) return false;
            if (g->elems[i] == GB_END) break;
        }
    return true;
}

/* Rules are visited callees first (components in the order gbnf_scc
 * numbers them), so a rule's references already point at representatives
 * when its signature is taken; a rule whose only recursion is to itself
 * (x*) is compared with itself marked as such. Rules of larger components
 * (mutual recursion) are kept as they are: merging them is sound only with
 * partition refinement, which costs a pass per level of nesting. */
tl_status gb_dedup(gbnf *g) {
    int32_t nr = g->n_rules, cap = 1;
    while (cap < 2 * nr) cap *= 2;
    gbnf_graph gr = {0};
    int32_t *comp = malloc((size_t)nr * sizeof *comp), *size = calloc((size_t)nr, sizeof *size);
    int32_t *order = malloc((size_t)nr * sizeof *order), *at = calloc((size_t)nr + 1, sizeof *at);
    int32_t *canon = malloc((size_t)nr * sizeof *canon), *tab = malloc((size_t)cap * sizeof *tab);
    uint64_t *h = malloc((size_t)nr * sizeof *h);
    tl_status s = comp && size && order && at && canon && tab && h ? gbnf_graph_init(&gr, g)
                                                                 : tl_err(TL_ERR_NOMEM, "grammar: out of memory");
    if (!s) s = gbnf_scc(&gr, nr, comp);
    if (!s) {
        for (int32_t r = 0; r < nr; r++) size[comp[r]]++, at[comp[r] + 1]++, canon[r] = r;
        for (int32_t c = 0; c < nr; c++) at[c + 1] += at[c];
        for (int32_t r = 0; r < nr; r++) order[at[comp[r]]++] = r; /* by component; at[c] moves to c's end */
        memset(tab, 0xff, (size_t)cap * sizeof *tab);
        for (int32_t i = 0; i < nr; i++) {
            int32_t r = order[i];
            if (size[comp[r]] != 1) continue;
            h[r] = gd_hash(g, canon, r);
            uint32_t k = (uint32_t)h[r] & (uint32_t)(cap - 1);
            for (; tab[k] >= 0; k = (k + 1) & (uint32_t)(cap - 1))
                if (h[tab[k]] == h[r] && gd_same(g, canon, tab[k], r)) break;
            if (tab[k] < 0) tab[k] = r;
            else canon[r] = tab[k];
        }
        for (int32_t pos = 0; pos < g->n_elems; pos++)
            if (GB_IS_REF(g->elems[pos])) g->elems[pos] = GB_REF(canon[GB_REF_RULE(g->elems[pos])]);
        g->root = canon[g->root];
    }
    gbnf_graph_free(&gr);
    free(comp), free(size), free(order), free(at), free(canon), free(tab), free(h);
    return s;
}
