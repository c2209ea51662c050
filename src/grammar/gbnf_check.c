/* grammar/gbnf_check: the end of parsing: every referenced rule defined, the
 * root present, no left recursion; then the rules are flattened into gbnf. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf_build.h"

void gbnf_free(gbnf *g) {
    if (!g) return;
    for (int32_t i = 0; i < g->n_rules; i++) free(g->names[i]);
    free(g->names);
    free(g->rule_alt);
    free(g->alts);
    free(g->elems);
    free(g->sets);
    free(g);
}

/* nullable[r]: rule r can match the empty string (fixpoint over all rules). */
static void gb_nullable(const gbnf *g, uint8_t *nul) {
    memset(nul, 0, (size_t)g->n_rules);
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t r = 0; r < g->n_rules; r++) {
            if (nul[r]) continue;
            for (int32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1] && !nul[r]; a++) {
                const int32_t *e = g->elems + g->alts[a];
                while (GB_IS_REF(*e) && nul[GB_REF_RULE(*e)]) e++;
                if (*e == GB_END) nul[r] = 1, changed = true;
            }
        }
    }
}

/* A cycle through "r can start with s" edges (s reached after only nullable
 * elements) is left recursion. Iterative DFS: color 1 = on the path. */
static tl_status gb_left_rec(const gbnf *g, const uint8_t *nul) {
    int32_t n = g->n_rules;
    uint8_t *color = calloc((size_t)n, 1);
    int32_t *stk_r = malloc((size_t)n * sizeof *stk_r);
    int32_t *stk_a = malloc((size_t)n * sizeof *stk_a); /* alternative index */
    int32_t *stk_e = malloc((size_t)n * sizeof *stk_e); /* element index in it */
    tl_status s = TL_OK;
    if (!color || !stk_r || !stk_a || !stk_e) {
        s = tl_err(TL_ERR_NOMEM, "grammar: out of memory");
        goto out;
    }
    for (int32_t start = 0; start < n && !s; start++) {
        if (color[start]) continue;
        int32_t d = 0;
        stk_r[0] = start, stk_a[0] = g->rule_alt[start], stk_e[0] = 0;
        color[start] = 1;
        while (d >= 0 && !s) {
            int32_t r = stk_r[d];
            if (stk_a[d] >= g->rule_alt[r + 1]) {
                color[r] = 2;
                d--;
                continue;
            }
            int32_t e = g->elems[g->alts[stk_a[d]] + stk_e[d]];
            if (!GB_IS_REF(e)) { /* terminal or end: this alternative is done */
                stk_a[d]++, stk_e[d] = 0;
                continue;
            }
            int32_t t = GB_REF_RULE(e);
            if (nul[t]) stk_e[d]++;
            else stk_a[d]++, stk_e[d] = 0;
            if (color[t] == 1) {
                s = tl_err(TL_ERR_FORMAT, "grammar: rule '%s' is left-recursive (through '%s'); rewrite it right-recursively",
                           g->names[t], g->names[r]);
            } else if (color[t] == 0) {
                color[t] = 1;
                d++;
                stk_r[d] = t, stk_a[d] = g->rule_alt[t], stk_e[d] = 0;
            }
        }
    }
out:
    free(color);
    free(stk_r);
    free(stk_a);
    free(stk_e);
    return s;
}

tl_status gb_finish(gp_state *p, const char *root, gbnf **out) {
    for (int32_t i = 0; i < p->n_rules; i++)
        if (!p->rules[i].defined) {
            char what[160];
            snprintf(what, sizeof what, "rule '%.100s' is used but never defined", p->rules[i].name);
            return gb_fail(p, p->rules[i].first_use, what);
        }
    int32_t rt = -1;
    for (int32_t i = 0; i < p->n_rules && rt < 0; i++)
        if (!strcmp(p->rules[i].name, root)) rt = i;
    if (rt < 0) return tl_err(TL_ERR_FORMAT, "grammar: no rule named '%.100s' (the start rule)", root);
    gbnf *g = calloc(1, sizeof *g);
    if (!g) return tl_err(TL_ERR_NOMEM, "grammar: out of memory");
    int64_t n_alts = 0;
    for (int32_t i = 0; i < p->n_rules; i++)
        for (int32_t k = 0; k < p->rules[i].n; k++) n_alts += p->rules[i].buf[k] == GB_END;
    g->n_rules = p->n_rules;
    g->names = calloc((size_t)p->n_rules, sizeof *g->names);
    g->rule_alt = malloc(((size_t)p->n_rules + 1) * sizeof *g->rule_alt);
    g->alts = malloc(((size_t)n_alts + 1) * sizeof *g->alts);
    g->elems = malloc(((size_t)p->total + 1) * sizeof *g->elems);
    g->sets = malloc(((size_t)p->n_sets + 1) * sizeof *g->sets);
    uint8_t *nul = malloc((size_t)p->n_rules);
    if (!g->names || !g->rule_alt || !g->alts || !g->elems || !g->sets || !nul) {
        free(nul);
        gbnf_free(g);
        return tl_err(TL_ERR_NOMEM, "grammar: out of memory");
    }
    int32_t ne = 0, na = 0;
    for (int32_t i = 0; i < p->n_rules; i++) {
        g->names[i] = p->rules[i].name;
        p->rules[i].name = NULL;
        g->rule_alt[i] = na;
        int32_t k0 = 0;
        for (int32_t k = 0; k < p->rules[i].n; k++) {
            if (k == k0) g->alts[na++] = ne;
            g->elems[ne++] = p->rules[i].buf[k];
            if (p->rules[i].buf[k] == GB_END) k0 = k + 1;
        }
    }
    g->rule_alt[p->n_rules] = na;
    g->n_alts = na;
    g->n_elems = ne;
    if (p->n_sets) memcpy(g->sets, p->sets, (size_t)p->n_sets * sizeof *g->sets);
    g->n_sets = p->n_sets;
    g->root = rt;
    gb_nullable(g, nul);
    tl_status s = gb_left_rec(g, nul);
    if (!s) s = gb_dedup(g);
    free(nul);
    if (s) {
        gbnf_free(g);
        return s;
    }
    *out = g;
    return TL_OK;
}
