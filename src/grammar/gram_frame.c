/* grammar/gram_frame: lexical rules and frame entries (see gram_frame.h). */
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_frame.h"

static tl_status gf_nomem(void) { return tl_err(TL_ERR_NOMEM, "grammar: out of memory"); }

/* Whether each rule matches only whitespace (space, tab, newline, return)
 * and has a byte to match: the greatest fixed point, so a rule that repeats
 * itself stays whitespace. */
static tl_status gf_ws_rules(const gbnf *g, uint8_t *ws) {
    int32_t nr = g->n_rules;
    uint8_t *ws_set = malloc((size_t)g->n_sets + 1);
    if (!ws_set) return gf_nomem();
    for (int32_t k = 0; k < g->n_sets; k++) {
        bool only = true;
        for (int i = 0; i < 32 && only; i++) only = !(g->sets[k][i] & ~(i == 0 ? 0x00 : i == 1 ? 0x26 : i == 4 ? 0x01 : 0));
        ws_set[k] = only;
    }
    for (int32_t r = 0; r < nr; r++) ws[r] = 1;
    for (bool changed = true; changed;) {
        changed = false;
        for (int32_t r = 0; r < nr; r++) {
            if (!ws[r]) continue;
            bool ok = true, any = false;
            for (int32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1] && ok; a++)
                for (int32_t pos = g->alts[a]; g->elems[pos] != GB_END && ok; pos++) {
                    int32_t e = g->elems[pos];
                    if (GB_IS_REF(e)) {
                        ok = ws[GB_REF_RULE(e)];
                        any = true;
                        continue;
                    }
                    any = true;
                    ok = ws_set[e];
                }
            if (!ok || !any) ws[r] = 0, changed = true;
        }
    }
    free(ws_set);
    return TL_OK;
}

/* lex[r] = 0 for every rule that reaches a component with a non-tail
 * reference inside it, or a rule (not whitespace itself) that refers to a
 * whitespace rule: whitespace separates lexemes, so a rule with whitespace
 * in it is the structure around them, even where its language is regular
 * (an object with no nested ones). 1 for the rest. */
static tl_status gf_lexical(gf_frames *f, const gbnf *g) {
    int32_t nr = g->n_rules;
    gbnf_graph gr = {0};
    int32_t *comp = malloc((size_t)nr * sizeof *comp), *work = malloc((size_t)nr * sizeof *work);
    uint8_t *nested = calloc((size_t)nr, 1), *ws = malloc((size_t)nr + 1);
    /* reversed references, to spread "not lexical" to the callers */
    int32_t *rev_at = calloc((size_t)nr + 1, sizeof *rev_at), *rev = NULL;
    tl_status s = comp && work && nested && ws && rev_at ? gbnf_graph_init(&gr, g) : gf_nomem();
    if (!s) s = gbnf_scc(&gr, nr, comp);
    if (!s && !(rev = malloc(((size_t)gr.ref_at[nr] + 1) * sizeof *rev))) s = gf_nomem();
    int32_t nw = 0;
    if (!s) {
        s = gf_ws_rules(g, ws);
    }
    if (!s) {
        for (int32_t r = 0; r < nr; r++) f->lex[r] = 1;
        for (int32_t r = 0; r < nr; r++)
            for (int32_t k = gr.ref_at[r]; k < gr.ref_at[r + 1]; k++) {
                int32_t q = gr.refs[k];
                if (!gr.tail[k] && comp[q] == comp[r]) nested[comp[r]] = 1;
                if (ws[q] && !ws[r] && f->lex[r]) f->lex[r] = 0, work[nw++] = r;
                rev_at[q + 1]++;
            }
        for (int32_t r = 0; r < nr; r++) rev_at[r + 1] += rev_at[r];
        int32_t *fill = comp; /* comp is not needed past here */
        for (int32_t r = 0; r < nr; r++)
            if (nested[comp[r]] && f->lex[r]) f->lex[r] = 0, work[nw++] = r;
        memcpy(fill, rev_at, (size_t)nr * sizeof *fill);
        for (int32_t r = 0; r < nr; r++)
            for (int32_t k = gr.ref_at[r]; k < gr.ref_at[r + 1]; k++) rev[fill[gr.refs[k]]++] = r;
        while (nw) {
            int32_t q = work[--nw];
            for (int32_t k = rev_at[q]; k < rev_at[q + 1]; k++)
                if (f->lex[rev[k]]) f->lex[rev[k]] = 0, work[nw++] = rev[k];
        }
    }
    gbnf_graph_free(&gr);
    free(comp), free(work), free(nested), free(ws), free(rev_at), free(rev);
    return s;
}

tl_status gf_init(gf_frames *f, const gbnf *g, size_t max_bytes) {
    memset(f, 0, sizeof *f);
    f->max_bytes = max_bytes;
    f->pos_rule = malloc(((size_t)g->n_elems + 1) * sizeof *f->pos_rule);
    f->lex = malloc((size_t)g->n_rules + 1);
    f->hash_cap = 64;
    f->hash = malloc((size_t)f->hash_cap * sizeof *f->hash);
    if (!f->pos_rule || !f->lex || !f->hash) {
        gf_free(f);
        return gf_nomem();
    }
    memset(f->hash, 0xff, (size_t)f->hash_cap * sizeof *f->hash);
    for (int32_t r = 0; r < g->n_rules; r++)
        for (int32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++)
            for (int32_t pos = g->alts[a];; pos++) {
                f->pos_rule[pos] = r;
                if (g->elems[pos] == GB_END) break;
            }
    tl_status s = gf_lexical(f, g);
    if (s) gf_free(f);
    return s;
}

void gf_clear(gf_frames *f) {
    for (int32_t i = 0; i < f->n; i++) free(f->e[i].mask), free(f->e[i].exits);
    f->n = 0;
    f->bytes = 0;
    if (f->hash) memset(f->hash, 0xff, (size_t)f->hash_cap * sizeof *f->hash);
}

void gf_free(gf_frames *f) {
    gf_clear(f);
    free(f->pos_rule), free(f->lex), free(f->e), free(f->hash);
    memset(f, 0, sizeof *f);
}

static uint32_t gf_hash(int32_t frame, const uint64_t first[4]) {
    uint64_t h = (uint64_t)(uint32_t)frame * 0x9e3779b97f4a7c15ull;
    for (int k = 0; k < 4; k++) h = (h ^ first[k]) * 0xff51afd7ed558ccdull, h ^= h >> 29;
    return (uint32_t)(h ^ h >> 32);
}

gf_entry *gf_find(gf_frames *f, int32_t frame, const uint64_t first[4]) {
    uint32_t m = (uint32_t)f->hash_cap - 1;
    for (uint32_t k = gf_hash(frame, first) & m; f->hash[k] >= 0; k = (k + 1) & m) {
        gf_entry *e = &f->e[f->hash[k]];
        if (e->frame == frame && !memcmp(e->first, first, sizeof e->first)) return e;
    }
    return NULL;
}

static void gf_put(gf_frames *f, int32_t i) {
    uint32_t m = (uint32_t)f->hash_cap - 1, k = gf_hash(f->e[i].frame, f->e[i].first) & m;
    while (f->hash[k] >= 0) k = (k + 1) & m;
    f->hash[k] = i;
}

tl_status gf_add(gf_frames *f, int32_t frame, const uint64_t first[4], int32_t n_words, gf_entry **out) {
    size_t mb = (size_t)n_words * sizeof(uint32_t);
    if (f->bytes + mb > f->max_bytes) gf_clear(f);
    if (f->n == f->cap) {
        int32_t nc = f->cap ? f->cap * 2 : 16;
        gf_entry *a = realloc(f->e, (size_t)nc * sizeof *a);
        if (!a) return gf_nomem();
        f->e = a;
        f->cap = nc;
    }
    if ((f->n + 1) * 2 > f->hash_cap) {
        int32_t *h = malloc((size_t)f->hash_cap * 2 * sizeof *h);
        if (!h) return gf_nomem();
        free(f->hash);
        f->hash = h;
        f->hash_cap *= 2;
        memset(h, 0xff, (size_t)f->hash_cap * sizeof *h);
        for (int32_t i = 0; i < f->n; i++) gf_put(f, i);
    }
    gf_entry *e = &f->e[f->n];
    memset(e, 0, sizeof *e);
    e->frame = frame;
    memcpy(e->first, first, sizeof e->first);
    if (!(e->mask = calloc((size_t)n_words, sizeof *e->mask))) return gf_nomem();
    gf_put(f, f->n++);
    f->bytes += mb;
    *out = e;
    return TL_OK;
}

tl_status gf_add_exit(gf_frames *f, gf_entry *e, int32_t node) {
    if (e->n_exits == e->cap_exits) {
        int32_t nc = e->cap_exits ? e->cap_exits * 2 : 64;
        int32_t *a = realloc(e->exits, (size_t)nc * sizeof *a);
        if (!a) return gf_nomem();
        e->exits = a;
        f->bytes += (size_t)(nc - e->cap_exits) * sizeof *a;
        e->cap_exits = nc;
    }
    e->exits[e->n_exits++] = node;
    return TL_OK;
}
