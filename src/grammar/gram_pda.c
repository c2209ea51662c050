/* grammar/gram_pda: stack nodes, state interning and lazy transitions (see
 * gram_pda.h). */
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_pda.h"
#include "grammar/gram_vocab.h"

static int gm_popcount(uint64_t x) {
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (int)((x * 0x0101010101010101ull) >> 56);
}

/* 8 bytes of a byte bitset (byte k's bit j is bit 8k + j) as one word. */
static uint64_t gm_le64(uint64_t w) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return __builtin_bswap64(w);
#else
    return w;
#endif
}

static tl_status gm_nomem(void) { return tl_err(TL_ERR_NOMEM, "grammar: out of memory"); }

static uint32_t gm_mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* Partition the bytes: two bytes share a class when every byte set of the
 * grammar contains both or neither. */
static void gm_classes(gm_pda *p) {
    memset(p->cls, 0, sizeof p->cls);
    int32_t n = 1;
    int16_t map[512];
    for (int32_t s = 0; s < p->g->n_sets; s++) {
        for (int i = 0; i < 512; i++) map[i] = -1;
        int32_t m = 0;
        uint8_t next[256];
        for (int b = 0; b < 256; b++) {
            int key = p->cls[b] * 2 + gbnf_set_has(p->g, s, (uint8_t)b);
            if (map[key] < 0) map[key] = (int16_t)m++;
            next[b] = (uint8_t)map[key];
        }
        memcpy(p->cls, next, sizeof next);
        n = m;
    }
    p->n_cls = n;
    for (int b = 255; b >= 0; b--) p->rep[p->cls[b]] = (uint8_t)b;
    memset(p->cls_ascii, 0, sizeof p->cls_ascii);
    memset(p->cls_n_ascii, 0, sizeof p->cls_n_ascii);
    for (int b = 0; b < 128; b++) p->cls_ascii[p->cls[b]][b >> 6] |= 1ull << (b & 63), p->cls_n_ascii[p->cls[b]]++;
}

static tl_status gm_node_rehash(gm_pda *p, int32_t cap) {
    int32_t *h = malloc((size_t)cap * sizeof *h);
    if (!h) return gm_nomem();
    memset(h, 0xff, (size_t)cap * sizeof *h);
    for (int32_t i = 0; i < p->n_nodes; i++) {
        uint32_t k = gm_mix((uint64_t)(uint32_t)p->npos[i] << 32 | (uint32_t)p->npar[i]) & (uint32_t)(cap - 1);
        while (h[k] >= 0) k = (k + 1) & (uint32_t)(cap - 1);
        h[k] = i;
    }
    free(p->nhash);
    p->nhash = h;
    p->nhash_cap = cap;
    return TL_OK;
}

/* The node (pos, parent), made if new. */
static tl_status gm_node(gm_pda *p, int32_t pos, int32_t par, int32_t *out) {
    uint32_t k = gm_mix((uint64_t)(uint32_t)pos << 32 | (uint32_t)par) & (uint32_t)(p->nhash_cap - 1);
    for (int32_t i; (i = p->nhash[k]) >= 0; k = (k + 1) & (uint32_t)(p->nhash_cap - 1))
        if (p->npos[i] == pos && p->npar[i] == par) {
            *out = i;
            return TL_OK;
        }
    if (p->n_nodes >= GM_MAX_NODES)
        return tl_err(TL_ERR_FULL, "grammar: more than %d parser stack nodes (nesting too deep)", GM_MAX_NODES);
    if (p->n_nodes == p->cap_nodes) {
        int32_t nc = p->cap_nodes * 2;
        int32_t *a = realloc(p->npos, (size_t)nc * sizeof *a);
        if (!a) return gm_nomem();
        p->npos = a;
        if (!(a = realloc(p->npar, (size_t)nc * sizeof *a))) return gm_nomem();
        p->npar = a;
        if (!(a = realloc(p->nseen, (size_t)nc * sizeof *a))) return gm_nomem();
        p->nseen = a;
        memset(p->nseen + p->cap_nodes, 0, (size_t)(nc - p->cap_nodes) * sizeof *a);
        p->cap_nodes = nc;
    }
    int32_t id = p->n_nodes++;
    p->npos[id] = pos;
    p->npar[id] = par;
    p->nhash[k] = id;
    *out = id;
    if (p->n_nodes * 2 > p->nhash_cap) return gm_node_rehash(p, p->nhash_cap * 2);
    return TL_OK;
}

static tl_status gm_push(int32_t **v, int32_t *cap, int32_t n, int32_t x) {
    if (n == *cap) {
        int32_t nc = *cap * 2;
        int32_t *a = realloc(*v, (size_t)nc * sizeof *a);
        if (!a) return gm_nomem();
        *v = a;
        *cap = nc;
    }
    (*v)[n] = x;
    return TL_OK;
}

/* Expand node x into the stacks whose top is a byte set, appending them to
 * outl (n_out) and setting *acc if the start rule can end. Iterative: chains
 * of rules can be as deep as the grammar is large. */
static tl_status gm_expand(gm_pda *p, int32_t x, int32_t *n_out, bool *acc) {
    const gbnf *g = p->g;
    int32_t nw = 0;
    tl_status s = gm_push(&p->work, &p->cap_work, nw++, x);
    while (!s && nw) {
        x = p->work[--nw];
        if (x < 0) {
            *acc = true;
            continue;
        }
        if (p->nseen[x] == p->gen) continue;
        p->nseen[x] = p->gen;
        int32_t pos = p->npos[x], e = g->elems[pos];
        if (e >= 0) {
            if (*n_out >= GM_MAX_STACKS)
                return tl_err(TL_ERR_FULL, "grammar: more than %d parses alive at once (grammar too ambiguous)",
                              GM_MAX_STACKS);
            s = gm_push(&p->outl, &p->cap_out, (*n_out)++, x);
        } else if (e == GB_END) {
            s = gm_push(&p->work, &p->cap_work, nw++, p->npar[x]);
        } else {
            int32_t r = GB_REF_RULE(e), cont = p->npar[x];
            /* a reference in tail position returns straight to the parent */
            if (g->elems[pos + 1] != GB_END) s = gm_node(p, pos + 1, cont, &cont);
            for (int32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1] && !s; a++) {
                int32_t y;
                if (!(s = gm_node(p, g->alts[a], cont, &y))) s = gm_push(&p->work, &p->cap_work, nw++, y);
            }
        }
    }
    return s;
}

/* A state's stacks are a set kept in the order they were found, so its
 * hash must not depend on order: a sum of mixed members. */
static uint32_t gm_state_hash(const int32_t *v, int32_t n, bool acc) {
    uint64_t h = acc ? 0x9e3779b97f4a7c15ull : 7;
    for (int32_t i = 0; i < n; i++) h += (uint64_t)gm_mix((uint64_t)(uint32_t)v[i] * 0x9e3779b97f4a7c15ull) * 0x100000001b3ull;
    return gm_mix(h ^ (uint64_t)n << 40);
}

/* Whether state i holds exactly the stacks just expanded (outl[0..n), no
 * repeats): gm_expand stamps every node it reaches with the generation, and
 * the stacks it reaches are exactly the ones it appends to outl. */
static bool gm_state_is(const gm_pda *p, int32_t i, int32_t n, bool acc) {
    if (p->s_len[i] != n || p->s_acc[i] != acc) return false;
    const int32_t *v = p->pool + p->s_off[i];
    for (int32_t k = 0; k < n; k++)
        if (p->nseen[v[k]] != p->gen) return false;
    return true;
}

static tl_status gm_state_rehash(gm_pda *p, int32_t cap) {
    int32_t *h = malloc((size_t)cap * sizeof *h);
    if (!h) return gm_nomem();
    memset(h, 0xff, (size_t)cap * sizeof *h);
    for (int32_t i = 0; i < p->n_states; i++) {
        uint32_t k = gm_state_hash(p->pool + p->s_off[i], p->s_len[i], p->s_acc[i]) & (uint32_t)(cap - 1);
        while (h[k] >= 0) k = (k + 1) & (uint32_t)(cap - 1);
        h[k] = i;
    }
    free(p->shash);
    p->shash = h;
    p->shash_cap = cap;
    return TL_OK;
}

/* The state of the stacks outl[0..n) (just expanded) and acc, made if new;
 * GM_DEAD when there are none and the root cannot end. */
static tl_status gm_state(gm_pda *p, int32_t n, bool acc, int32_t *out) {
    if (!n && !acc) {
        *out = GM_DEAD;
        return TL_OK;
    }
    int32_t *v = p->outl;
    uint32_t k = gm_state_hash(v, n, acc) & (uint32_t)(p->shash_cap - 1);
    for (int32_t i; (i = p->shash[k]) >= 0; k = (k + 1) & (uint32_t)(p->shash_cap - 1))
        if (gm_state_is(p, i, n, acc)) {
            *out = i;
            return TL_OK;
        }
    if (p->n_states == p->cap_states) {
        int32_t nc = p->cap_states * 2;
        int32_t *a;
        if (!(a = realloc(p->s_off, (size_t)nc * sizeof *a))) return gm_nomem();
        p->s_off = a;
        if (!(a = realloc(p->s_len, (size_t)nc * sizeof *a))) return gm_nomem();
        p->s_len = a;
        uint8_t *b = realloc(p->s_acc, (size_t)nc);
        if (!b) return gm_nomem();
        p->s_acc = b;
        if (!(a = realloc(p->trans, (size_t)nc * (size_t)p->n_cls * sizeof *a))) return gm_nomem();
        p->trans = a;
        gm_run *r = realloc(p->run, (size_t)nc * sizeof *r);
        if (!r) return gm_nomem();
        p->run = r;
        p->cap_states = nc;
    }
    if (p->n_pool + n > p->cap_pool) {
        int64_t nc = p->cap_pool * 2;
        while (nc < p->n_pool + n) nc *= 2;
        int32_t *a = realloc(p->pool, (size_t)nc * sizeof *a);
        if (!a) return gm_nomem();
        p->pool = a;
        p->cap_pool = nc;
    }
    int32_t id = p->n_states++;
    p->s_off[id] = (int32_t)p->n_pool;
    p->s_len[id] = n;
    p->s_acc[id] = acc;
    p->run[id].done = 0;
    memcpy(p->pool + p->n_pool, v, (size_t)n * sizeof *v);
    p->n_pool += n;
    for (int32_t c = 0; c < p->n_cls; c++) p->trans[(int64_t)id * p->n_cls + c] = GM_UNKNOWN;
    p->shash[k] = id;
    *out = id;
    if (p->n_states * 2 > p->shash_cap) return gm_state_rehash(p, p->shash_cap * 2);
    return TL_OK;
}

tl_status gm_pda_init(gm_pda *p, const gbnf *g) {
    memset(p, 0, sizeof *p);
    p->g = g;
    gm_classes(p);
    p->cap_nodes = 1024, p->cap_states = 256, p->cap_pool = 4096, p->cap_work = 256, p->cap_out = 256;
    p->npos = malloc(1024 * sizeof(int32_t));
    p->npar = malloc(1024 * sizeof(int32_t));
    p->nseen = calloc(1024, sizeof(int32_t));
    p->s_off = malloc(256 * sizeof(int32_t));
    p->s_len = malloc(256 * sizeof(int32_t));
    p->s_acc = malloc(256);
    p->trans = malloc(256 * (size_t)p->n_cls * sizeof(int32_t));
    p->run = malloc(256 * sizeof *p->run);
    p->pool = malloc(4096 * sizeof(int32_t));
    p->work = malloc(256 * sizeof(int32_t));
    p->outl = malloc(256 * sizeof(int32_t));
    if (!p->npos || !p->npar || !p->nseen || !p->s_off || !p->s_len || !p->s_acc || !p->trans || !p->run || !p->pool ||
        !p->work || !p->outl) {
        gm_pda_free(p);
        return gm_nomem();
    }
    tl_status s = gm_node_rehash(p, 2048);
    if (!s) s = gm_state_rehash(p, 512);
    if (s) gm_pda_free(p);
    return s;
}

void gm_pda_free(gm_pda *p) {
    free(p->npos), free(p->npar), free(p->nseen), free(p->nhash);
    free(p->s_off), free(p->s_len), free(p->s_acc), free(p->pool), free(p->trans), free(p->shash);
    free(p->run);
    free(p->work), free(p->outl);
    memset(p, 0, sizeof *p);
}

tl_status gm_pda_start(gm_pda *p, int32_t *out) {
    const gbnf *g = p->g;
    int32_t n = 0;
    bool acc = false;
    if (p->gen == INT32_MAX) {
        memset(p->nseen, 0, (size_t)p->cap_nodes * sizeof *p->nseen);
        p->gen = 0;
    }
    p->gen++;
    tl_status s = TL_OK;
    for (int32_t a = g->rule_alt[g->root]; a < g->rule_alt[g->root + 1] && !s; a++) {
        int32_t x;
        if (!(s = gm_node(p, g->alts[a], -1, &x))) s = gm_expand(p, x, &n, &acc);
    }
    return s ? s : gm_state(p, n, acc, out);
}

/* Expand the successors of state st on byte class c into outl[0..*n). */
static tl_status gm_succ(gm_pda *p, int32_t st, int32_t c, int32_t *n, bool *acc) {
    const gbnf *g = p->g;
    uint8_t b = p->rep[c];
    *n = 0;
    *acc = false;
    if (p->gen == INT32_MAX) { /* stamps would repeat: start them over */
        memset(p->nseen, 0, (size_t)p->cap_nodes * sizeof *p->nseen);
        p->gen = 0;
    }
    p->gen++;
    tl_status s = TL_OK;
    /* the state's stacks are read from the pool, which gm_state may move:
     * index it afresh each time */
    for (int32_t i = 0; i < p->s_len[st] && !s; i++) {
        int32_t x = p->pool[p->s_off[st] + i];
        int32_t pos = p->npos[x];
        if (!gbnf_set_has(g, g->elems[pos], b)) continue;
        int32_t y = p->npar[x];
        if (g->elems[pos + 1] != GB_END) s = gm_node(p, pos + 1, y, &y);
        if (!s) s = gm_expand(p, y, n, acc);
    }
    return s;
}

tl_status gm_pda_step(gm_pda *p, int32_t st, int32_t c, int32_t *out) {
    int32_t n;
    bool acc;
    tl_status s = gm_succ(p, st, c, &n, &acc);
    if (!s) s = gm_state(p, n, acc, out);
    if (!s) p->trans[(int64_t)st * p->n_cls + c] = *out;
    return s;
}

/* Depth-first over (automaton state, decoder state) pairs from st through
 * every well-formed multi-byte character; pairs already seen are skipped. */
static tl_status gm_u8_walk(gm_pda *p, int32_t root, int32_t st, int u8, bool *ok) {
    int32_t seen_t[64];
    int seen_u[64], n_seen = 0;
    for (int b = 0x80; b < 0x100 && *ok; b++) {
        int u = gv_u8_step(u8, (uint8_t)b);
        if (u == GV_U8_BAD) continue;
        int32_t t;
        tl_status s = gm_pda_next(p, st, (uint8_t)b, &t);
        if (s) return s;
        if (t == GM_DEAD || (u == 0 && t != root)) {
            *ok = false;
            return TL_OK;
        }
        if (u == 0) continue;
        bool dup = false;
        for (int k = 0; k < n_seen && !dup; k++) dup = seen_t[k] == t && seen_u[k] == u;
        if (dup) continue;
        if (n_seen < 64) seen_t[n_seen] = t, seen_u[n_seen++] = u;
        if ((s = gm_u8_walk(p, root, t, u, ok))) return s;
    }
    return TL_OK;
}

/* The run of st without its length: the largest group of ASCII bytes that
 * lead to one state, and whether multi-byte characters lead there too. Only
 * for states that take at least GM_RUN_MIN_BYTES ASCII bytes: below that a
 * subtree is cheaper walked than its run computed. */
static tl_status gm_run_base(gm_pda *p, int32_t st) {
    const gbnf *g = p->g;
    uint64_t a[4] = {0, 0, 0, 0};
    for (int32_t i = 0; i < p->s_len[st]; i++) {
        const uint8_t *set = g->sets[g->elems[p->npos[p->pool[p->s_off[st] + i]]]];
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, set + 8 * k, 8);
            a[k] |= gm_le64(w);
        }
    }
    gm_run r = {{0, 0}, GM_DEAD, 0, GM_U8_NO, 1};
    if (gm_popcount(a[0]) + gm_popcount(a[1]) >= GM_RUN_MIN_BYTES) {
        /* A successor depends only on which of the state's stacks take the
         * byte (each that does steps past its byte set, whatever the byte),
         * so classes taken by the same stacks lead to the same state. They
         * are grouped by a hash of that set of stacks, checked exactly
         * within the group kept, and only that group's state is made. */
        const int32_t *v = p->pool + p->s_off[st];
        int32_t ns = p->s_len[st];
        uint64_t h[128];
        uint8_t cl[128];
        int n = 0;
        uint64_t seen[4] = {0, 0, 0, 0};
        for (int w = 0; w < 2; w++)
            for (uint64_t m = a[w]; m; m &= m - 1) {
                int32_t c = p->cls[w * 64 + __builtin_ctzll(m)];
                if (seen[c >> 6] >> (c & 63) & 1) continue;
                seen[c >> 6] |= 1ull << (c & 63);
                uint8_t rb = p->rep[c];
                uint64_t hc = 0;
                for (int32_t i = 0; i < ns; i++)
                    if (gbnf_set_has(g, g->elems[p->npos[v[i]]], rb)) hc += gm_mix((uint64_t)(uint32_t)i * 0x9e3779b97f4a7c15ull) | 1;
                cl[n] = (uint8_t)c;
                h[n++] = hc;
            }
        int best_n = 0, best = -1;
        uint8_t grouped[128] = {0};
        for (int k = 0; k < n; k++) {
            if (grouped[k] || !h[k]) continue;
            int bn = 0;
            for (int j = k; j < n; j++)
                if (h[j] == h[k]) bn += p->cls_n_ascii[cl[j]], grouped[j] = 1;
            if (bn > best_n) best_n = bn, best = k;
        }
        if (best >= 0) {
            uint8_t rb = p->rep[cl[best]];
            for (int j = 0; j < n; j++) {
                if (h[j] != h[best]) continue;
                uint8_t rj = p->rep[cl[j]];
                bool same = true;
                for (int32_t i = 0; i < ns && same; i++) {
                    int32_t e = g->elems[p->npos[v[i]]];
                    same = gbnf_set_has(g, e, rb) == gbnf_set_has(g, e, rj);
                }
                if (same) r.b[0] |= p->cls_ascii[cl[j]][0], r.b[1] |= p->cls_ascii[cl[j]][1];
            }
            /* made last: interning may move the pool v points into */
            tl_status s = gm_pda_next(p, st, rb, &r.next);
            if (s) return s;
        }
    }
    if (a[2] | a[3]) r.u8 = GM_U8_UNKNOWN;
    p->run[st] = r;
    return TL_OK;
}

/* Whether u's run continues into the run of its next state v: v takes at
 * least the bytes u takes (and multi-byte characters if u does). */
static bool gm_run_goes_on(const gm_run *u, const gm_run *v) {
    return (v->done & 1) && v->next != GM_DEAD && !(u->b[0] & ~v->b[0]) && !(u->b[1] & ~v->b[1]);
}

tl_status gm_pda_run(gm_pda *p, int32_t st, const gm_run **out) {
    tl_status s;
    if (!(p->run[st].done & 1) && (s = gm_run_base(p, st))) return s;
    if (!(p->run[st].done & 2)) {
        /* follow the chain of next states until one whose length is known,
         * one the run does not go on into, or GM_RUN_CAP states (the length
         * is then a lower bound, which is all a caller relies on) */
        int32_t chain[GM_RUN_CAP];
        int n = 0;
        for (int32_t u = st; n < GM_RUN_CAP;) {
            chain[n++] = u;
            int32_t v = p->run[u].next;
            if (v == GM_DEAD || v == u) break;
            if (!(p->run[v].done & 1) && (s = gm_run_base(p, v))) return s;
            if ((p->run[v].done & 2) || !gm_run_goes_on(&p->run[u], &p->run[v])) break;
            u = v;
        }
        for (int k = n - 1; k >= 0; k--) {
            gm_run *u = &p->run[chain[k]];
            uint32_t len = 0;
            if (u->next == chain[k]) {
                len = GM_RUN_INF;
            } else if (u->next != GM_DEAD) {
                const gm_run *v = &p->run[u->next];
                uint32_t rest = (v->done & 2) && gm_run_goes_on(u, v) ? v->len : 0;
                len = rest == GM_RUN_INF ? GM_RUN_INF : rest + 1 < GM_RUN_INF ? rest + 1 : GM_RUN_INF - 1;
            }
            u->len = (uint16_t)len;
            u->done |= 2;
        }
    }
    *out = &p->run[st];
    return TL_OK;
}

tl_status gm_pda_run_u8(gm_pda *p, int32_t st, uint32_t n, bool *out) {
    *out = true;
    for (uint32_t k = 0; k < n && *out; k++) {
        if (p->run[st].u8 == GM_U8_UNKNOWN) {
            bool ok = p->run[st].next != GM_DEAD;
            tl_status s = ok ? gm_u8_walk(p, p->run[st].next, st, 0, &ok) : TL_OK;
            if (s) return s;
            p->run[st].u8 = ok ? GM_U8_YES : GM_U8_NO;
        }
        *out = p->run[st].u8 == GM_U8_YES;
        if (p->run[st].next == st) break;
        st = p->run[st].next;
    }
    return TL_OK;
}

tl_status gm_pda_compact(gm_pda *p, int32_t st) {
    int32_t n = p->s_len[st];
    bool acc = p->s_acc[st];
    if (n > p->cap_out) {
        int32_t *a = realloc(p->outl, (size_t)n * sizeof *a);
        if (!a) return gm_nomem();
        p->outl = a;
        p->cap_out = n;
    }
    memcpy(p->outl, p->pool + p->s_off[st], (size_t)n * sizeof *p->outl);
    p->n_states = 0;
    p->n_pool = 0;
    memset(p->shash, 0xff, (size_t)p->shash_cap * sizeof *p->shash);
    int32_t id;
    return gm_state(p, n, acc, &id);
}

tl_status gm_pda_node(gm_pda *p, int32_t pos, int32_t par, int32_t *out) { return gm_node(p, pos, par, out); }

/* A new generation of stamps (restarted before they would repeat). */
static void gm_new_gen(gm_pda *p) {
    if (p->gen == INT32_MAX) {
        memset(p->nseen, 0, (size_t)p->cap_nodes * sizeof *p->nseen);
        p->gen = 0;
    }
    p->gen++;
}

tl_status gm_pda_state_of(gm_pda *p, const int32_t *tops, int32_t n, bool acc, int32_t *out) {
    gm_new_gen(p);
    int32_t m = 0;
    tl_status s = TL_OK;
    for (int32_t i = 0; i < n && !s; i++) {
        if (p->nseen[tops[i]] == p->gen) continue;
        p->nseen[tops[i]] = p->gen;
        s = gm_push(&p->outl, &p->cap_out, m++, tops[i]);
    }
    return s ? s : gm_state(p, m, acc, out);
}

tl_status gm_pda_expand_state(gm_pda *p, int32_t x, int32_t *out) {
    gm_new_gen(p);
    int32_t n = 0;
    bool acc = false;
    tl_status s = gm_expand(p, x, &n, &acc);
    return s ? s : gm_state(p, n, acc, out);
}
