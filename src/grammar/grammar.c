/* grammar/grammar: the public tl_grammar: a compiled GBNF grammar, its
 * automaton, the current state and the token masks.
 *
 * A mask depends only on the automaton state, so masks are cached by state:
 * generation revisits the same few states (inside a string, between
 * members) over and over, and a cached mask costs nothing to compute. A new
 * state's mask is one walk of the vocabulary trie that skips every subtree
 * whose prefix the grammar rejects.
 * Owns: the grammar, automaton, mask cache, trigger window. Calls: the other grammar/ files. */
#include <stdlib.h>
#include <string.h>

#include "grammar/gbnf.h"
#include "grammar/gram_dist.h"
#include "grammar/gram_frame.h"
#include "grammar/gram_inside.h"
#include "grammar/gram_pda.h"
#include "grammar/gram_vocab.h"
#include "grammar/gram_within.h"
#include "tallow.h"

struct tl_grammar {
    const tl_grammar_vocab *v;
    gbnf *g;
    gm_pda pda;
    gi_cache inside; /* inside sets of the runs of string bodies */
    gf_frames fr;    /* lexical rules and frame entries */
    gd_dist dist;    /* shortest completions (completion pressure) */
    gw_cache wc;     /* per state, the distance each allowed token leaves */
    tl_grammar_params p;
    int32_t cur;   /* automaton state; GM_DEAD after a forced wrong token */
    bool ended;    /* an end-of-generation token was accepted */
    int32_t n_words;
    int32_t *eog;  /* end-of-generation token ids */
    int32_t n_eog;
    int32_t *stk, *bst; /* walk scratch by trie depth */
    uint8_t *pmid;      /* by trie depth, while a frame is walked: the node is inside a UTF-8 character */
    int32_t *sp;        /* splitting a state: [4 * cap_sp] its stacks, their cuts, an order, frame tops */
    int32_t cap_sp;
    /* mask cache: slot of state s is mslot[s] (-1 none) */
    int32_t *mslot;
    int32_t cap_mslot;
    uint32_t *masks;
    int32_t n_masks, max_masks;
    uint32_t *scratch; /* a mask not cached (cache of one slot full) */
    uint32_t *within;  /* the mask of tl_grammar_mask_within */
    /* lazy activation */
    char **trig;
    size_t *trig_len;
    int32_t n_trig;
    size_t max_trig;
    bool active;
    char *win; /* the last max_trig - 1 bytes accepted while inactive, then room for a token */
    size_t win_n;
};

tl_grammar_params tl_grammar_default_params(void) {
    tl_grammar_params p;
    p.mask_cache_bytes = 32u << 20;
    p.max_states = 65536;
    return p;
}

static tl_status gr_nomem(void) { return tl_err(TL_ERR_NOMEM, "grammar: out of memory"); }

void tl_grammar_free(tl_grammar *g) {
    if (!g) return;
    gm_pda_free(&g->pda);
    gi_free(&g->inside);
    gf_free(&g->fr);
    gd_free(&g->dist);
    gw_free(&g->wc);
    gbnf_free(g->g);
    free(g->eog), free(g->stk), free(g->bst), free(g->pmid), free(g->sp), free(g->mslot), free(g->masks);
    free(g->scratch), free(g->within);
    for (int32_t i = 0; i < g->n_trig; i++) free(g->trig[i]);
    free(g->trig), free(g->trig_len), free(g->win);
    free(g);
}

static void gr_cache_clear(tl_grammar *g) {
    for (int32_t i = 0; i < g->cap_mslot; i++) g->mslot[i] = -1;
    gw_clear(&g->wc);
    g->n_masks = 0;
    gf_clear(&g->fr);
}

static tl_status gr_start(tl_grammar *g, int32_t *out) { return gm_pda_start(&g->pda, out); }

tl_status tl_grammar_init(const tl_grammar_vocab *v, const char *text, size_t len, const char *root,
                          const tl_grammar_params *params, tl_grammar **out) {
    *out = NULL;
    if (!v || !text) return tl_err(TL_ERR_INVALID, "grammar: NULL vocabulary or text");
    tl_grammar_params p = params ? *params : tl_grammar_default_params();
    if (p.max_states < 16) return tl_err(TL_ERR_INVALID, "grammar: max_states %d below 16", p.max_states);
    tl_grammar *g = calloc(1, sizeof *g);
    if (!g) return gr_nomem();
    g->v = v;
    g->p = p;
    g->active = true;
    tl_status s = gbnf_parse(text, len, root, &g->g);
    if (!s) s = gm_pda_init(&g->pda, g->g);
    if (!s) s = gf_init(&g->fr, g->g, p.mask_cache_bytes);
    if (!s) s = gd_init(&g->dist, g->g);
    if (!s) s = gw_init(&g->wc, v, p.mask_cache_bytes);
    if (s) {
        tl_grammar_free(g);
        return s;
    }
    g->n_words = (v->n_vocab + 31) / 32;
    size_t mask_bytes = (size_t)g->n_words * 4;
    g->max_masks = (int32_t)(p.mask_cache_bytes / mask_bytes > 1 << 20 ? 1 << 20 : p.mask_cache_bytes / mask_bytes);
    g->eog = malloc(((size_t)v->n_vocab + 1) * sizeof *g->eog);
    g->stk = malloc((v->max_len + 2) * sizeof *g->stk);
    g->bst = malloc((v->max_len + 2) * sizeof *g->bst);
    g->pmid = calloc(v->max_len + 2, 1);
    g->scratch = malloc(mask_bytes);
    g->within = malloc(mask_bytes);
    if (!g->eog || !g->stk || !g->bst || !g->pmid || !g->scratch || !g->within) {
        tl_grammar_free(g);
        return gr_nomem();
    }
    for (int32_t i = 0; i < v->n_vocab; i++)
        if (v->kind[i] == GV_EOG) g->eog[g->n_eog++] = i;
    if ((s = gr_start(g, &g->cur))) {
        tl_grammar_free(g);
        return s;
    }
    if (g->cur == GM_DEAD) {
        tl_grammar_free(g);
        return tl_err(TL_ERR_FORMAT, "grammar: the start rule matches nothing");
    }
    *out = g;
    return TL_OK;
}

void tl_grammar_reset(tl_grammar *g) {
    int32_t st;
    g->ended = false;
    g->active = g->n_trig == 0;
    g->win_n = 0;
    if (gr_start(g, &st) == TL_OK) g->cur = st;
}

bool tl_grammar_is_active(const tl_grammar *g) { return g->active; }
bool tl_grammar_can_end(const tl_grammar *g) { return !g->active || g->ended || gm_pda_accepting(&g->pda, g->cur); }
bool tl_grammar_ended(const tl_grammar *g) { return g->ended; }

/* Keep the automaton and the cache bounded: past max_states, rebuild from
 * the current state alone. */
static tl_status gr_bound(tl_grammar *g) {
    if (g->cur < 0 || g->pda.n_states <= g->p.max_states) return TL_OK;
    tl_status s = gm_pda_compact(&g->pda, g->cur);
    if (s) return s;
    g->cur = 0;
    gr_cache_clear(g);
    return TL_OK;
}

/* Subtrees of at most this many nodes are walked node by node: cheaper
 * than learning the run of a state met only there. */
#define GR_BULK_MIN 32
/* Runs of fewer ASCII bytes than this are walked: their exits are most of
 * the trie. */
#define GR_INSIDE_MIN 32

/* Accept node i's subtree whole when gi_bulk says the run of t0 (the state
 * at the last character boundary; mid: node i is inside a character) takes
 * it: then *hi extends the node's tokens to the subtree's and the walk
 * moves to its end; else the walk moves to the first child. */
static tl_status gr_bulk(tl_grammar *g, int32_t i, int32_t t0, bool mid, int32_t *hi, int32_t *next) {
    const tl_grammar_vocab *v = g->v;
    bool in;
    tl_status s = gi_bulk(&g->pda, v, i, t0, mid, &in);
    if (s) return s;
    if (in) {
        *hi = v->sub_lo[v->nodes[i].end];
        *next = v->nodes[i].end;
    } else {
        *next = i + 1;
    }
    return TL_OK;
}

/* While a frame is walked: its entry, which collects the nodes where the
 * frame ends and the cut's expansion takes the next byte. */
typedef struct gr_col {
    gf_frames *f;
    gf_entry *e;
} gr_col;

/* Walk trie nodes [from, to) (a subtree, or the whole trie) with the state
 * of their parent in stk and bst, adding the tokens accepted to w. bst is
 * -1 below a node inside a character whose state at the character's start
 * is not known: no subtree is accepted whole there. With col, a frame is
 * walked: each node whose parent's state may end the frame and whose byte
 * the cut takes is kept. A subtree accepted whole may hide such nodes: every
 * token in it is the frame's own already, so walks from them add nothing. */
static tl_status gr_walk(tl_grammar *g, int32_t from, int32_t to, uint32_t *w, const gr_col *col) {
    const tl_grammar_vocab *v = g->v;
    int32_t *stk = g->stk, *bst = g->bst; /* state by depth; state at the last character boundary by depth */
    const gv_node *nd = v->nodes;
    for (int32_t i = from; i < to;) {
        int32_t t, d = nd[i].depth;
        uint8_t byte = nd[i].byte;
        tl_status s;
        if (col && gm_pda_accepting(&g->pda, stk[d - 1]) && (col->e->first[byte >> 6] >> (byte & 63) & 1) &&
            (s = gf_add_exit(col->f, col->e, i | (g->pmid[d - 1] ? INT32_MIN : 0))))
            return s;
        if ((s = gm_pda_next(&g->pda, stk[d - 1], byte, &t))) return s;
        if (t == GM_DEAD) {
            i = nd[i].end;
            continue;
        }
        uint8_t u8 = v->u8_clean[i];
        stk[d] = t;
        bst[d] = u8 & 1 ? t : bst[d - 1];
        if (col) g->pmid[d] = !(u8 & 1);
        int32_t lo = v->sub_lo[i], hi = lo + nd[i].tok_n;
        if (nd[i].end - i > GR_BULK_MIN && (u8 & 6) == 2 && bst[d] >= 0) {
            if ((s = gr_bulk(g, i, bst[d], !(u8 & 1), &hi, &i))) return s;
        } else {
            i++;
        }
        for (int32_t k = lo; k < hi; k++) w[v->toks[k] >> 5] |= 1u << (v->toks[k] & 31);
    }
    return TL_OK;
}

/* The inside set of st when st's run leads back to st and is wide enough
 * to be worth one (NULL otherwise). Walking a frame (from its start, which
 * never ends it), the inside set skips nodes in the run: at character
 * boundaries their state is st, which does not end the frame either, but
 * inside a multi-byte character it may, so not when the cut takes a byte
 * of one. */
static tl_status gr_inside(tl_grammar *g, int32_t st, const gr_col *col, const gi_set **out) {
    *out = NULL;
    const gm_run *r;
    tl_status s = gm_pda_run(&g->pda, st, &r);
    if (s || r->next != st || __builtin_popcountll(r->b[0]) + __builtin_popcountll(r->b[1]) < GR_INSIDE_MIN) return s;
    uint64_t b[2] = {r->b[0], r->b[1]};
    bool u8 = false;
    if (r->u8 != GM_U8_NO && (s = gm_pda_run_u8(&g->pda, st, 1, &u8))) return s;
    if (col) {
        const uint64_t *f = col->e->first;
        if (u8 && (f[2] | f[3])) return TL_OK;
    }
    return gi_get(&g->inside, g->v, b, u8, out);
}

/* Add to w the text tokens whose bytes the automaton accepts from st (a
 * frame's state with col). */
static tl_status gr_whole(tl_grammar *g, int32_t st, uint32_t *w, const gr_col *col) {
    const tl_grammar_vocab *v = g->v;
    const gi_set *in;
    tl_status s = gr_inside(g, st, col, &in);
    if (s) return s;
    g->pmid[0] = 0;
    if (!in) {
        g->stk[0] = g->bst[0] = st;
        return gr_walk(g, 0, v->n_nodes, w, col);
    }
    for (int32_t k = 0; k < g->n_words; k++) w[k] |= in->mask[k];
    /* every exit's parent ends a character reached inside the run: st */
    for (int32_t k = 0; k < in->n_exits && !s; k++) {
        int32_t e = in->exits[k], d = v->nodes[e].depth;
        g->stk[d - 1] = g->bst[d - 1] = st;
        g->pmid[d - 1] = 0;
        s = gr_walk(g, e, v->nodes[e].end, w, col);
    }
    return s;
}

/* Frames are at most this many nodes deep (deeper stacks are walked whole,
 * and frame tops are made by recursion). */
#define GR_MAX_FRAME 64

/* The cut of stack x: the first node below its top whose rule is not
 * lexical; -1 when its top's rule is not lexical, every rule down to the
 * root is, or the frame would be deeper than GR_MAX_FRAME. */
static int32_t gr_cut(const tl_grammar *g, int32_t x) {
    const gm_pda *p = &g->pda;
    const gf_frames *f = &g->fr;
    int32_t y = x, n = 0;
    while (y >= 0 && f->lex[f->pos_rule[p->npos[y]]] && n++ < GR_MAX_FRAME) y = p->npar[y];
    return y == x || n > GR_MAX_FRAME ? -1 : y;
}

/* Stack x with its cut replaced by GM_FRAME_END. */
static tl_status gr_frame_top(tl_grammar *g, int32_t x, int32_t cut, int32_t *out) {
    if (x == cut) {
        *out = GM_FRAME_END;
        return TL_OK;
    }
    int32_t up;
    tl_status s = gr_frame_top(g, g->pda.npar[x], cut, &up);
    return s ? s : gm_pda_node(&g->pda, g->pda.npos[x], up, out);
}

static int gr_cmp_cut(const void *a, const void *b) {
    const int32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Add to w the mask of the stacks x[0..n) that share cut c: the frame
 * entry's tokens, then the subtrees where the frame ends, walked from the
 * cut's expansion. */
static tl_status gr_group(tl_grammar *g, const int32_t *x, int32_t n, int32_t c, int32_t *tops, uint32_t *w) {
    gm_pda *p = &g->pda;
    tl_status s = TL_OK;
    for (int32_t i = 0; i < n && !s; i++) s = gr_frame_top(g, x[i], c, &tops[i]);
    int32_t fst, cst;
    if (!s) s = gm_pda_state_of(p, tops, n, false, &fst);
    if (!s) s = gm_pda_expand_state(p, c, &cst);
    if (s) return s;
    uint64_t first[4] = {0, 0, 0, 0};
    for (int32_t i = 0; cst >= 0 && i < p->s_len[cst]; i++) {
        const uint8_t *set = p->g->sets[p->g->elems[p->npos[p->pool[p->s_off[cst] + i]]]];
        for (int k = 0; k < 32; k++) first[k >> 3] |= (uint64_t)set[k] << (8 * (k & 7));
    }
    gf_entry *e = gf_find(&g->fr, fst, first);
    if (!e) {
        if ((s = gf_add(&g->fr, fst, first, g->n_words, &e))) return s;
        gr_col col = {&g->fr, e};
        if ((s = gr_whole(g, fst, e->mask, &col))) {
            gf_clear(&g->fr); /* no entry half made */
            return s;
        }
    }
    for (int32_t k = 0; k < g->n_words; k++) w[k] |= e->mask[k];
    const gv_node *nd = g->v->nodes;
    for (int32_t k = 0; k < e->n_exits && !s; k++) {
        int32_t i = e->exits[k] & INT32_MAX, d = nd[i].depth;
        g->stk[d - 1] = cst;
        g->bst[d - 1] = e->exits[k] < 0 ? -1 : cst;
        s = gr_walk(g, i, nd[i].end, w, NULL);
    }
    return s;
}

/* Add to w the mask of st split at its stacks' cuts: the stacks without
 * one walked together, each group sharing a cut through its frame entry.
 * *done false (w untouched) when no stack has a cut. */
static tl_status gr_split(tl_grammar *g, int32_t st, uint32_t *w, bool *done) {
    gm_pda *p = &g->pda;
    int32_t n = p->s_len[st];
    *done = false;
    if (!n) return TL_OK; /* only "the root may end": no stacks to split */
    if (n > g->cap_sp) {
        int32_t *a = realloc(g->sp, (size_t)n * 4 * sizeof *a);
        if (!a) return gr_nomem();
        g->sp = a;
        g->cap_sp = n;
    }
    int32_t *pair = g->sp, *plain = g->sp + 2 * n, *tops = g->sp + 3 * n; /* pair: (cut, stack) */
    int32_t n_plain = 0, n_cut = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t x = p->pool[p->s_off[st] + i], c = gr_cut(g, x);
        if (c < 0) plain[n_plain++] = x;
        else pair[2 * n_cut] = c, pair[2 * n_cut + 1] = x, n_cut++;
    }
    if (!n_cut) return TL_OK;
    *done = true;
    tl_status s = TL_OK;
    if (n_plain) {
        int32_t ps;
        if (!(s = gm_pda_state_of(p, plain, n_plain, false, &ps))) s = gr_whole(g, ps, w, NULL);
    }
    qsort(pair, (size_t)n_cut, 2 * sizeof *pair, gr_cmp_cut);
    for (int32_t i = 0; i < n_cut && !s;) {
        int32_t j = i, c = pair[2 * i];
        while (j < n_cut && pair[2 * j] == c) plain[j - i] = pair[2 * j + 1], j++;
        s = gr_group(g, plain, j - i, c, tops, w);
        i = j;
    }
    return s;
}

/* The mask of state st: every text token whose bytes the automaton accepts
 * from st, plus end-of-generation tokens where the grammar may end. */
static tl_status gr_compute(tl_grammar *g, int32_t st, uint32_t *w) {
    memset(w, 0, (size_t)g->n_words * 4);
    if (gm_pda_accepting(&g->pda, st))
        for (int32_t i = 0; i < g->n_eog; i++) w[g->eog[i] >> 5] |= 1u << (g->eog[i] & 31);
    bool done;
    tl_status s = gr_split(g, st, w, &done);
    return s || done ? s : gr_whole(g, st, w, NULL);
}

tl_status tl_grammar_mask(tl_grammar *g, const uint32_t **words) {
    *words = NULL;
    if (!g->active) { /* lazy and not yet triggered: everything goes */
        memset(g->scratch, 0xff, (size_t)g->n_words * 4);
        *words = g->scratch;
        return TL_OK;
    }
    if (g->ended || g->cur == GM_DEAD) {
        memset(g->scratch, 0, (size_t)g->n_words * 4);
        *words = g->scratch;
        return TL_OK;
    }
    tl_status s = gr_bound(g);
    if (s) return s;
    int32_t st = g->cur;
    if (st < g->cap_mslot && g->mslot[st] >= 0) {
        *words = g->masks + (size_t)g->mslot[st] * (size_t)g->n_words;
        return TL_OK;
    }
    if (g->n_masks >= g->max_masks) gr_cache_clear(g);
    if (g->n_masks >= g->max_masks) { /* a cache too small for even one mask */
        if ((s = gr_compute(g, st, g->scratch))) return s;
        *words = g->scratch;
        return TL_OK;
    }
    if (g->pda.cap_states > g->cap_mslot) {
        int32_t *a = realloc(g->mslot, (size_t)g->pda.cap_states * sizeof *a);
        if (!a) return gr_nomem();
        for (int32_t i = g->cap_mslot; i < g->pda.cap_states; i++) a[i] = -1;
        g->mslot = a;
        g->cap_mslot = g->pda.cap_states;
    }
    if (g->n_masks % 16 == 0) { /* grow the slab in steps of 16 masks */
        uint32_t *a = realloc(g->masks, ((size_t)g->n_masks + 16) * (size_t)g->n_words * 4);
        if (!a) return gr_nomem();
        g->masks = a;
    }
    uint32_t *w = g->masks + (size_t)g->n_masks * (size_t)g->n_words;
    if ((s = gr_compute(g, st, w))) return s;
    if (st >= g->cap_mslot) { /* the walk itself made new states */
        int32_t *a = realloc(g->mslot, (size_t)g->pda.cap_states * sizeof *a);
        if (!a) return gr_nomem();
        for (int32_t i = g->cap_mslot; i < g->pda.cap_states; i++) a[i] = -1;
        g->mslot = a;
        g->cap_mslot = g->pda.cap_states;
    }
    g->mslot[st] = g->n_masks++;
    *words = w;
    return TL_OK;
}

/* Run bytes from state st; GM_DEAD if they leave the grammar. */
static tl_status gr_run(tl_grammar *g, int32_t st, const char *b, size_t n, int32_t *out) {
    for (size_t i = 0; i < n && st != GM_DEAD; i++) {
        tl_status s = gm_pda_next(&g->pda, st, (uint8_t)b[i], &st);
        if (s) return s;
    }
    *out = st;
    return TL_OK;
}

tl_status tl_grammar_accept_bytes(tl_grammar *g, const char *b, size_t n) {
    if (g->ended || g->cur == GM_DEAD) return tl_err(TL_ERR_STATE, "grammar: already ended or dead");
    tl_status s = gr_bound(g);
    int32_t st;
    if (!s) s = gr_run(g, g->cur, b, n, &st);
    if (s) return s;
    if (st == GM_DEAD) return tl_err(TL_ERR_INVALID, "grammar: text leaves the grammar");
    g->cur = st;
    return TL_OK;
}

tl_status tl_grammar_set_triggers(tl_grammar *g, const char *const *triggers, int32_t n) {
    for (int32_t i = 0; i < g->n_trig; i++) free(g->trig[i]);
    free(g->trig), free(g->trig_len), free(g->win);
    g->trig = NULL, g->trig_len = NULL, g->win = NULL, g->n_trig = 0, g->max_trig = 0;
    if (n < 0 || (n && !triggers)) return tl_err(TL_ERR_INVALID, "grammar: %d triggers", n);
    if (n) {
        g->trig = calloc((size_t)n, sizeof *g->trig);
        g->trig_len = calloc((size_t)n, sizeof *g->trig_len);
        if (!g->trig || !g->trig_len) return gr_nomem();
    }
    for (int32_t i = 0; i < n; i++) {
        size_t l = triggers[i] ? strlen(triggers[i]) : 0;
        if (!l || l > 4096) return tl_err(TL_ERR_INVALID, "grammar: trigger %d is empty or over 4096 bytes", i);
        if (!(g->trig[i] = strdup(triggers[i]))) return gr_nomem();
        g->trig_len[i] = l;
        g->n_trig = i + 1;
        if (l > g->max_trig) g->max_trig = l;
    }
    if (n && !(g->win = malloc(g->max_trig + g->v->max_len + 1))) return gr_nomem();
    tl_grammar_reset(g);
    return TL_OK;
}

/* While inactive: append the token's text to the window; at the earliest
 * trigger found, activate and run the grammar from the trigger's start. */
static tl_status gr_watch(tl_grammar *g, const char *t, size_t n) {
    memcpy(g->win + g->win_n, t, n);
    size_t wn = g->win_n + n, best = SIZE_MAX;
    for (int32_t k = 0; k < g->n_trig; k++) {
        size_t l = g->trig_len[k];
        for (size_t i = 0; i + l <= wn && i < best; i++)
            if (!memcmp(g->win + i, g->trig[k], l)) {
                best = i;
                break;
            }
    }
    if (best != SIZE_MAX) {
        g->active = true;
        g->win_n = 0;
        tl_status s = gr_bound(g);
        int32_t st = GM_DEAD;
        if (!s) s = gr_run(g, g->cur, g->win + best, wn - best, &st);
        g->cur = st; /* a trigger the grammar does not continue is a dead end */
        return s;
    }
    size_t keep = g->max_trig - 1 < wn ? g->max_trig - 1 : wn;
    memmove(g->win, g->win + wn - keep, keep);
    g->win_n = keep;
    return TL_OK;
}

tl_status tl_grammar_accept(tl_grammar *g, int32_t tok) {
    const tl_grammar_vocab *v = g->v;
    if (tok < 0 || tok >= v->n_vocab) return tl_err(TL_ERR_INVALID, "grammar: token %d out of range", tok);
    const char *t = v->blob + v->off[tok];
    size_t n = v->off[tok + 1] - v->off[tok];
    if (!g->active) return v->kind[tok] != GV_EOG ? gr_watch(g, t, n) : TL_OK;
    if (g->ended || g->cur == GM_DEAD) return tl_err(TL_ERR_STATE, "grammar: already ended or dead");
    if (v->kind[tok] == GV_EOG) {
        if (!gm_pda_accepting(&g->pda, g->cur))
            return tl_err(TL_ERR_INVALID, "grammar: end of generation before the grammar is complete");
        g->ended = true;
        return TL_OK;
    }
    if (v->kind[tok] != GV_TEXT) return tl_err(TL_ERR_INVALID, "grammar: token %d is never allowed", tok);
    return tl_grammar_accept_bytes(g, t, n);
}

tl_status tl_grammar_distance(tl_grammar *g, int32_t *bytes) {
    *bytes = 0;
    if (!g->active || g->ended) return TL_OK;
    int32_t d;
    tl_status s = gd_state(&g->dist, &g->pda, g->cur, &d);
    if (!s) *bytes = d >= GD_INF ? INT32_MAX : d;
    return s;
}

/* Tokens set in w[0..n). */
static int32_t gr_count(const uint32_t *w, int32_t n) {
    int32_t c = 0;
    for (int32_t k = 0; k < n; k++) {
        uint32_t x = w[k] - (w[k] >> 1 & 0x55555555u);
        x = (x & 0x33333333u) + (x >> 2 & 0x33333333u);
        c += (int32_t)(((x + (x >> 4)) & 0x0f0f0f0fu) * 0x01010101u >> 24);
    }
    return c;
}

tl_status tl_grammar_mask_within(tl_grammar *g, int32_t budget, const uint32_t **words) {
    tl_status s = tl_grammar_mask(g, words);
    if (s || !g->active || g->ended || g->cur == GM_DEAD || budget < 1) return s;
    int32_t d;
    if ((s = gd_state(&g->dist, &g->pda, g->cur, &d)) || d >= GD_INF) return s;
    /* Every token is at least one byte, so a state d < budget bytes from
     * the end can be closed in time with a token to spare for the end of
     * generation: keep the tokens that leave at most budget - 2 bytes to go
     * (the first byte of a shortest completion, as a token, always
     * qualifies when the vocabulary has it; where the grammar may end, its
     * end tokens stay). Past that, only tokens that bring the end closer:
     * tokens of several bytes may still close it in time. */
    int32_t left = d > budget - 1 ? d - 1 : budget - 2, cur = g->cur, n_eog = 0;
    for (int32_t i = 0; i < g->n_eog; i++) n_eog += (*words)[g->eog[i] >> 5] >> (g->eog[i] & 31) & 1;
    const gw_prof *pr = gw_find(&g->wc, cur);
    if (!pr) {
        const gi_set *in;
        int32_t n_text = -n_eog;
        n_text += gr_count(*words, g->n_words);
        if ((s = gr_inside(g, cur, NULL, &in)) || (s = gw_make(&g->wc, &g->pda, &g->dist, in, cur, n_text, &pr)))
            return s;
    }
    /* a budget at or above the farthest any token leaves removes nothing
     * (most steps of a long string) */
    if (pr->hi <= left) return TL_OK;
    if (gw_filter(pr, *words, g->n_words, g->eog, g->n_eog, left, g->within)) *words = g->within;
    return TL_OK;
}
