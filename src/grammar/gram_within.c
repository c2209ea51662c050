/* grammar/gram_within: per-state token distances (see gram_within.h). */
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_within.h"

static tl_status gw_nomem(void) { return tl_err(TL_ERR_NOMEM, "grammar: out of memory"); }

tl_status gw_init(gw_cache *c, const tl_grammar_vocab *v, size_t max_bytes) {
    memset(c, 0, sizeof *c);
    c->v = v;
    c->max_bytes = max_bytes;
    c->stk = malloc((v->max_len + 2) * sizeof *c->stk);
    c->bst = malloc((v->max_len + 2) * sizeof *c->bst);
    if (!c->stk || !c->bst) return gw_nomem();
    return TL_OK;
}

static void gw_drop(gw_cache *c) {
    for (int32_t i = 0; i < c->n; i++) free(c->p[i].pair);
    for (int32_t i = 0; i < c->cap_slot; i++) c->slot[i] = -1;
    c->n = 0;
    c->bytes = 0;
}

void gw_clear(gw_cache *c) {
    gw_drop(c);
    for (int32_t i = 0; i < c->cap_sd; i++) c->sd[i] = -1;
}

void gw_free(gw_cache *c) {
    gw_drop(c);
    free(c->p), free(c->slot), free(c->sd), free(c->pair), free(c->tmp), free(c->stk), free(c->bst);
    memset(c, 0, sizeof *c);
}

/* Grow a by-state table to cap entries, new ones -1. */
static tl_status gw_grow(int32_t **a, int32_t *cap, int32_t want) {
    if (want <= *cap) return TL_OK;
    int32_t *b = realloc(*a, (size_t)want * sizeof *b);
    if (!b) return gw_nomem();
    for (int32_t i = *cap; i < want; i++) b[i] = -1;
    *a = b;
    *cap = want;
    return TL_OK;
}

/* Distance of state st (GD_INF for GM_DEAD), memoized by state. */
static tl_status gw_dist(gw_cache *c, gm_pda *p, gd_dist *d, int32_t st, int32_t *out) {
    if (st < 0) {
        *out = GD_INF;
        return TL_OK;
    }
    tl_status s = gw_grow(&c->sd, &c->cap_sd, st < p->cap_states ? p->cap_states : st + 1);
    if (s) return s;
    if (c->sd[st] < 0 && (s = gd_state(d, p, st, &c->sd[st]))) return s;
    *out = c->sd[st];
    return TL_OK;
}

/* List the n tokens toks[0..n) at distance dist. The scratch holds at most
 * one entry per text token (each is reached once). */
static tl_status gw_list(gw_cache *c, const int32_t *toks, int32_t n, int32_t dist) {
    if (c->n_pair + n > c->cap_pair) {
        int32_t nc = c->cap_pair ? c->cap_pair : 1024;
        while (nc < c->n_pair + n) nc *= 2;
        if (nc > c->v->n_text && c->v->n_text >= c->n_pair + n) nc = c->v->n_text;
        uint64_t *a = realloc(c->pair, (size_t)nc * sizeof *a);
        if (!a) return gw_nomem();
        c->pair = a;
        if (!(a = realloc(c->tmp, (size_t)nc * sizeof *a))) return gw_nomem();
        c->tmp = a;
        c->cap_pair = nc;
    }
    for (int32_t k = 0; k < n; k++) c->pair[c->n_pair++] = (uint64_t)(uint32_t)dist << 32 | (uint32_t)toks[k];
    return TL_OK;
}

/* Subtrees of at most this many nodes are walked node by node. */
#define GW_BULK_MIN 32

/* Whether every token below node i leaves distance base: the run of t0
 * (the state at the last character boundary; mid: node i is inside a
 * character) takes the subtree whole, no token below ends inside a
 * character (the caller checks), so each ends at one of the next need
 * states of the run's chain, and t0 and all of those are base away. A
 * string of at most N characters: any of its states closes as soon. */
static tl_status gw_flat(gw_cache *c, gm_pda *p, gd_dist *gd, int32_t i, int32_t t0, bool mid, int32_t base, bool *out) {
    const gm_run *r;
    int32_t dist;
    tl_status s = gi_bulk(p, c->v, i, t0, mid, out);
    if (!s && *out && !(s = gw_dist(c, p, gd, t0, &dist))) *out = dist == base;
    uint32_t need = (uint32_t)c->v->maxc[i] + (mid ? 1 : 0);
    for (uint32_t j = 0; j < need && *out && !s; j++) {
        if ((s = gm_pda_run(p, t0, &r)) || r->next == t0) break; /* the chain stays at t0, checked */
        t0 = r->next;
        if (!(s = gw_dist(c, p, gd, t0, &dist))) *out = dist == base;
    }
    return s;
}

/* Walk trie nodes [from, to) with their parent's state in stk (and the
 * state at the last character boundary in bst), listing the tokens at
 * nodes whose state's distance is not base; subtrees whose tokens all
 * leave base are skipped. */
static tl_status gw_walk(gw_cache *c, gm_pda *p, gd_dist *gd, int32_t from, int32_t to, int32_t base) {
    const tl_grammar_vocab *v = c->v;
    const gv_node *nd = v->nodes;
    int32_t *stk = c->stk, *bst = c->bst;
    for (int32_t i = from; i < to;) {
        int32_t t, d = nd[i].depth, dist;
        tl_status s = gm_pda_next(p, stk[d - 1], nd[i].byte, &t);
        if (s) return s;
        if (t == GM_DEAD) {
            i = nd[i].end;
            continue;
        }
        uint8_t u8 = v->u8_clean[i];
        stk[d] = t;
        bst[d] = u8 & 1 ? t : bst[d - 1];
        if (nd[i].tok_n) {
            if ((s = gw_dist(c, p, gd, t, &dist))) return s;
            if (dist != base && (s = gw_list(c, v->toks + v->sub_lo[i], nd[i].tok_n, dist))) return s;
        }
        bool flat = false;
        if (nd[i].end - i > GW_BULK_MIN && (u8 & 14) == 2 && (s = gw_flat(c, p, gd, i, bst[d], !(u8 & 1), base, &flat)))
            return s;
        i = flat ? nd[i].end : i + 1;
    }
    return TL_OK;
}

/* The inside set's tokens cut inside a multi-byte character: their whole
 * characters lead st back to st, so each ends where its last character's
 * first bytes lead from st. */
static tl_status gw_mid(gw_cache *c, gm_pda *p, gd_dist *gd, const gi_set *in, int32_t st, int32_t base) {
    const tl_grammar_vocab *v = c->v;
    for (int32_t k = 0; k < v->n_mid; k++) {
        const gv_mid *m = &v->mid[k];
        int32_t t = m->tok, u = st, dist;
        if (!(in->mask[t >> 5] >> (t & 31) & 1)) continue;
        tl_status s = TL_OK;
        for (int j = 0; j < m->n && u != GM_DEAD && !s; j++) s = gm_pda_next(p, u, m->tail[j], &u);
        if (!s) s = gw_dist(c, p, gd, u, &dist);
        if (!s && dist != base) s = gw_list(c, &t, 1, dist);
        if (s) return s;
    }
    return TL_OK;
}

/* Sort the scratch by distance: least significant digit first, a byte at a
 * time, skipping bytes every distance shares (most of them). */
static void gw_sort(gw_cache *c) {
    int32_t n = c->n_pair;
    uint64_t *a = c->pair, *b = c->tmp;
    for (int sh = 32; sh < 64; sh += 8) {
        int32_t cnt[257] = {0};
        for (int32_t i = 0; i < n; i++) cnt[(a[i] >> sh & 0xff) + 1]++;
        if (n && cnt[(a[0] >> sh & 0xff) + 1] == n) continue;
        for (int k = 0; k < 256; k++) cnt[k + 1] += cnt[k];
        for (int32_t i = 0; i < n; i++) b[cnt[a[i] >> sh & 0xff]++] = a[i];
        uint64_t *x = a;
        a = b, b = x;
    }
    c->pair = a, c->tmp = b;
}

/* Keep the scratch's profile as st's, within the byte budget (*out: the
 * kept one, or c->one over the budget on its own). */
static tl_status gw_keep(gw_cache *c, gm_pda *p, int32_t st, gw_prof *pr, const gw_prof **out) {
    size_t bytes = sizeof *pr + (size_t)pr->n * sizeof *pr->pair;
    if (bytes > c->max_bytes) {
        pr->pair = c->pair;
        c->one = *pr;
        *out = &c->one;
        return TL_OK;
    }
    if (c->bytes + bytes > c->max_bytes) gw_drop(c);
    tl_status s = gw_grow(&c->slot, &c->cap_slot, st < p->cap_states ? p->cap_states : st + 1);
    if (s) return s;
    if (c->n == c->cap) {
        int32_t nc = c->cap ? 2 * c->cap : 16;
        gw_prof *a = realloc(c->p, (size_t)nc * sizeof *a);
        if (!a) return gw_nomem();
        c->p = a;
        c->cap = nc;
    }
    if (!(pr->pair = malloc(((size_t)pr->n + 1) * sizeof *pr->pair))) return gw_nomem();
    if (pr->n) memcpy(pr->pair, c->pair, (size_t)pr->n * sizeof *pr->pair);
    c->p[c->n] = *pr;
    c->slot[st] = c->n;
    *out = &c->p[c->n++];
    c->bytes += bytes;
    return TL_OK;
}

const gw_prof *gw_find(const gw_cache *c, int32_t st) {
    return st < c->cap_slot && c->slot[st] >= 0 ? &c->p[c->slot[st]] : NULL;
}

tl_status gw_make(gw_cache *c, gm_pda *p, gd_dist *d, const gi_set *in, int32_t st, int32_t n_text,
                  const gw_prof **out) {
    *out = NULL;
    const tl_grammar_vocab *v = c->v;
    gw_prof pr = {NULL, 0, 0, 0, 0};
    tl_status s = gw_dist(c, p, d, st, &pr.base);
    if (s) return s;
    c->n_pair = 0;
    if (!in) {
        c->stk[0] = c->bst[0] = st;
        s = gw_walk(c, p, d, 0, v->n_nodes, pr.base);
    } else {
        s = gw_mid(c, p, d, in, st, pr.base);
        /* every exit's parent ends a character reached inside the run: st */
        for (int32_t k = 0; k < in->n_exits && !s; k++) {
            int32_t e = in->exits[k];
            c->stk[v->nodes[e].depth - 1] = c->bst[v->nodes[e].depth - 1] = st;
            s = gw_walk(c, p, d, e, v->nodes[e].end, pr.base);
        }
    }
    if (s) return s;
    gw_sort(c);
    pr.n = c->n_pair;
    pr.n_base = n_text - pr.n;
    pr.hi = pr.n_base > 0 ? pr.base : 0;
    if (pr.n && (int32_t)(c->pair[pr.n - 1] >> 32) > pr.hi) pr.hi = (int32_t)(c->pair[pr.n - 1] >> 32);
    return gw_keep(c, p, st, &pr, out);
}

int32_t gw_filter(const gw_prof *pr, const uint32_t *w, int32_t n_words, const int32_t *eog, int32_t n_eog,
                  int32_t left, uint32_t *out) {
    /* k: the listed tokens within left (a prefix of the sorted list) */
    uint64_t lim = left < 0 ? 0 : ((uint64_t)left + 1) << 32;
    int32_t lo = 0, hi = pr->n;
    while (lo < hi && lim) {
        int32_t m = lo + (hi - lo) / 2;
        if (pr->pair[m] < lim) lo = m + 1;
        else hi = m;
    }
    int32_t k = lo, kept = k, n_in = 0;
    for (int32_t i = 0; i < n_eog; i++) n_in += w[eog[i] >> 5] >> (eog[i] & 31) & 1;
    kept += n_in;
    if (pr->base <= left) {
        kept += pr->n_base;
        memcpy(out, w, (size_t)n_words * sizeof *out);
        for (int32_t i = k; i < pr->n; i++) {
            uint32_t t = (uint32_t)pr->pair[i];
            out[t >> 5] &= ~(1u << (t & 31));
        }
    } else {
        memset(out, 0, (size_t)n_words * sizeof *out);
        for (int32_t i = 0; i < n_eog; i++) out[eog[i] >> 5] |= w[eog[i] >> 5] & 1u << (eog[i] & 31);
        for (int32_t i = 0; i < k; i++) {
            uint32_t t = (uint32_t)pr->pair[i];
            out[t >> 5] |= w[t >> 5] & 1u << (t & 31);
        }
    }
    return kept;
}
