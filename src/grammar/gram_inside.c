/* grammar/gram_inside: inside sets of runs (see gram_inside.h). */
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_inside.h"

static tl_status gi_nomem(void) { return tl_err(TL_ERR_NOMEM, "grammar: out of memory"); }

/* One pass over the trie in preorder. A node is inside when its parent is
 * and: the parent ends a character and the node's byte is an ASCII byte of
 * the run, or (runs with multi-byte characters) a valid lead byte whose
 * subtree is well-formed UTF-8; or the parent is inside a character (the
 * lead's subtree is well-formed, so this is a continuation byte). The first
 * node of a path that is not inside is an exit and its subtree is skipped;
 * a subtree whose bytes are all the run's is inside whole. */
static tl_status gi_build(gi_set *s, const tl_grammar_vocab *v) {
    size_t n_words = ((size_t)v->n_vocab + 31) / 32;
    int32_t cap = 1024;
    s->mask = calloc(n_words, sizeof *s->mask);
    s->exits = malloc((size_t)cap * sizeof *s->exits);
    uint8_t *mid = calloc(v->max_len + 2, 1); /* by depth: inside a character */
    if (!s->mask || !s->exits || !mid) {
        free(mid);
        return gi_nomem();
    }
    const gv_node *nd = v->nodes;
    for (int32_t i = 0; i < v->n_nodes;) {
        int d = nd[i].depth;
        uint8_t b = nd[i].byte, u = v->u8_clean[i];
        bool in;
        if (mid[d - 1]) in = true;
        else if (b < 0x80) in = (s->b[b >> 6] >> (b & 63)) & 1;
        else in = s->u8 && !(u & 4) && (u & 2);
        if (!in) {
            if (s->n_exits == cap) {
                int32_t *a = realloc(s->exits, (size_t)cap * 2 * sizeof *a);
                if (!a) {
                    free(mid);
                    return gi_nomem();
                }
                s->exits = a;
                cap *= 2;
            }
            s->exits[s->n_exits++] = i;
            i = nd[i].end;
            continue;
        }
        mid[d] = !(u & 1);
        const uint64_t *bl = v->below[i];
        int32_t lo = v->sub_lo[i], hi = lo + nd[i].tok_n;
        bool all = (u & 6) == 2 && !(bl[0] & ~s->b[0]) && !(bl[1] & ~s->b[1]) && (s->u8 || !(bl[2] | bl[3]));
        if (all && nd[i].end - i > 1) {
            hi = v->sub_lo[nd[i].end];
            i = nd[i].end;
        } else {
            i++;
        }
        for (int32_t k = lo; k < hi; k++) s->mask[v->toks[k] >> 5] |= 1u << (v->toks[k] & 31);
    }
    free(mid);
    return TL_OK;
}

tl_status gi_get(gi_cache *c, const tl_grammar_vocab *v, const uint64_t b[2], bool u8, const gi_set **out) {
    *out = NULL;
    for (int32_t k = 0; k < c->n; k++)
        if (c->sets[k].b[0] == b[0] && c->sets[k].b[1] == b[1] && c->sets[k].u8 == u8) {
            *out = &c->sets[k];
            return TL_OK;
        }
    if (c->n == GI_MAX_SETS) return TL_OK;
    gi_set *s = &c->sets[c->n];
    memset(s, 0, sizeof *s);
    s->b[0] = b[0], s->b[1] = b[1], s->u8 = u8;
    tl_status st = gi_build(s, v);
    if (st) {
        free(s->mask), free(s->exits);
        memset(s, 0, sizeof *s);
        return st;
    }
    c->n++;
    *out = s;
    return TL_OK;
}

tl_status gi_bulk(gm_pda *p, const tl_grammar_vocab *v, int32_t i, int32_t t0, bool mid, bool *out) {
    const uint64_t *b = v->below[i];
    const gm_run *r;
    tl_status s = gm_pda_run(p, t0, &r);
    if (s) return s;
    uint32_t need = (uint32_t)v->maxc[i] + (mid ? 1 : 0);
    bool in = r->next != GM_DEAD && !(b[0] & ~r->b[0]) && !(b[1] & ~r->b[1]) && (r->len == GM_RUN_INF || r->len >= need);
    if (in && (mid || b[2] || b[3])) {
        in = r->u8 != GM_U8_NO;
        if (in && (s = gm_pda_run_u8(p, t0, need, &in))) return s;
    }
    *out = in;
    return TL_OK;
}

void gi_free(gi_cache *c) {
    for (int32_t k = 0; k < c->n; k++) free(c->sets[k].mask), free(c->sets[k].exits);
    memset(c, 0, sizeof *c);
}
