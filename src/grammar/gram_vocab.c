/* grammar/gram_vocab: a model's vocabulary as a byte trie for token masks.
 *
 * The trie is laid out in preorder: node i's subtree is nodes i..end[i), so
 * a walk that finds a prefix dead skips its whole subtree in one step, and
 * the walk needs no pointers, only a stack of automaton states by depth.
 * Tokens are sorted by their bytes, so the tokens ending at a node are one
 * run of the sorted order. The trie does not depend on any grammar, so one
 * is built per model and shared by all grammars over it.
 * Owns: the trie and the token kinds. Calls: base. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/gram_vocab.h"
#include "tallow.h"

/* States: 0 boundary; 1/2/3 need that many 80-BF bytes; 4 need A0-BF then
 * 1 (after E0); 5 need 80-9F then 1 (after ED); 6 need 90-BF then 2 (after
 * F0); 7 need 80-8F then 2 (after F4). Overlongs and surrogates are bad. */
int gv_u8_step(int st, uint8_t b) {
    switch (st) {
    case 0:
        if (b < 0x80) return 0;
        if (b >= 0xc2 && b <= 0xdf) return 1;
        if (b == 0xe0) return 4;
        if (b == 0xed) return 5;
        if (b >= 0xe1 && b <= 0xef) return 2;
        if (b == 0xf0) return 6;
        if (b >= 0xf1 && b <= 0xf3) return 3;
        if (b == 0xf4) return 7;
        return GV_U8_BAD;
    case 1: case 2: case 3: return b >= 0x80 && b <= 0xbf ? st - 1 : GV_U8_BAD;
    case 4: return b >= 0xa0 && b <= 0xbf ? 1 : GV_U8_BAD;
    case 5: return b >= 0x80 && b <= 0x9f ? 1 : GV_U8_BAD;
    case 6: return b >= 0x90 && b <= 0xbf ? 2 : GV_U8_BAD;
    case 7: return b >= 0x80 && b <= 0x8f ? 2 : GV_U8_BAD;
    default: return GV_U8_BAD;
    }
}

/* below[] and u8_clean[] of every node; path is scratch of max depth. */
static tl_status gv_summaries(tl_grammar_vocab *v, int32_t *path) {
    int32_t nn = v->n_nodes;
    uint8_t *u8 = malloc((size_t)nn + 1);
    v->below = calloc((size_t)nn + 1, sizeof *v->below);
    v->u8_clean = malloc((size_t)nn + 1);
    v->maxc = malloc(((size_t)nn + 1) * sizeof *v->maxc);
    if (!u8 || !v->below || !v->u8_clean || !v->maxc) {
        free(u8);
        return tl_err(TL_ERR_NOMEM, "grammar vocab: out of memory");
    }
    /* decoder state at each node, top-down along the path */
    for (int32_t i = 0; i < nn; i++) {
        int d = v->nodes[i].depth;
        int up = d == 1 ? 0 : u8[path[d - 2]];
        u8[i] = (uint8_t)gv_u8_step(up, v->nodes[i].byte);
        path[d - 1] = i;
    }
    /* reverse preorder: children are done before their parent */
    for (int32_t i = nn - 1; i >= 0; i--) {
        bool wf = true; /* no ill-formed byte anywhere below */
        bool cut = v->nodes[i].tok_n && u8[i] != 0 && u8[i] != GV_U8_BAD; /* a token ends inside a character */
        uint32_t mc = 0;
        for (int32_t c = i + 1; c < v->nodes[i].end; c = v->nodes[c].end) {
            uint8_t b = v->nodes[c].byte;
            v->below[i][b >> 6] |= 1ull << (b & 63);
            for (int k = 0; k < 4; k++) v->below[i][k] |= v->below[c][k];
            wf = wf && u8[c] != GV_U8_BAD && (v->u8_clean[c] & 2);
            cut = cut || (v->u8_clean[c] & 8);
            uint32_t m = v->maxc[c] + ((b & 0xc0) != 0x80); /* a byte not 10xxxxxx starts a character */
            if (m > mc) mc = m;
        }
        v->maxc[i] = (uint16_t)(mc < UINT16_MAX ? mc : UINT16_MAX);
        v->u8_clean[i] = (uint8_t)((wf ? 2 : 0) | (u8[i] == 0 ? 1 : 0) | (u8[i] == GV_U8_BAD ? 4 : 0) | (cut ? 8 : 0));
    }
    free(u8);
    return TL_OK;
}

/* The decoder's state after token t's bytes (GV_U8_BAD once one is ill-formed). */
static int gv_u8_end(const tl_grammar_vocab *v, int32_t t) {
    int u = 0;
    for (size_t k = v->off[t]; k < v->off[t + 1] && u != GV_U8_BAD; k++) u = gv_u8_step(u, (uint8_t)v->blob[k]);
    return u;
}

/* mid[]: the text tokens that end inside a well-formed character. */
static tl_status gv_find_mid(tl_grammar_vocab *v) {
    int32_t n = 0;
    for (int32_t i = 0; i < v->n_vocab; i++) {
        int u = v->kind[i] == GV_TEXT ? gv_u8_end(v, i) : 0;
        n += u != 0 && u != GV_U8_BAD;
    }
    v->mid = malloc(((size_t)n + 1) * sizeof *v->mid);
    if (!v->mid) return tl_err(TL_ERR_NOMEM, "grammar vocab: out of memory");
    for (int32_t i = 0; i < v->n_vocab; i++) {
        int u = v->kind[i] == GV_TEXT ? gv_u8_end(v, i) : 0;
        if (u == 0 || u == GV_U8_BAD) continue;
        /* well-formed: the last byte that is not 10xxxxxx leads the cut character */
        size_t j = v->off[i + 1] - 1;
        while (((uint8_t)v->blob[j] & 0xc0) == 0x80) j--;
        gv_mid *m = &v->mid[v->n_mid++];
        memset(m, 0, sizeof *m);
        m->tok = i;
        m->n = (uint8_t)(v->off[i + 1] - j);
        memcpy(m->tail, v->blob + j, m->n);
    }
    return TL_OK;
}

typedef struct gv_sort {
    const uint8_t *s;
    size_t n;
    int32_t id;
} gv_sort;

static int gv_cmp(const void *a, const void *b) {
    const gv_sort *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, n);
    if (c) return c;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return x->id - y->id;
}

void tl_grammar_vocab_free(tl_grammar_vocab *v) {
    if (!v) return;
    free(v->nodes);
    free(v->below);
    free(v->sub_lo);
    free(v->u8_clean);
    free(v->maxc);
    free(v->toks);
    free(v->mid);
    free(v->kind);
    free(v->blob);
    free(v->off);
    free(v);
}

tl_status tl_grammar_vocab_init_pieces(int32_t n, const char *const *text, const size_t *len, const uint8_t *kind,
                                       tl_grammar_vocab **out) {
    *out = NULL;
    if (n < 1 || !text || !len || !kind) return tl_err(TL_ERR_INVALID, "grammar vocab: %d tokens / missing arrays", n);
    tl_grammar_vocab *v = calloc(1, sizeof *v);
    gv_sort *srt = malloc((size_t)n * sizeof *srt);
    if (!v || !srt) {
        free(srt);
        free(v);
        return tl_err(TL_ERR_NOMEM, "grammar vocab: out of memory");
    }
    v->n_vocab = n;
    v->kind = malloc((size_t)n);
    v->off = malloc(((size_t)n + 1) * sizeof *v->off);
    size_t total = 0;
    for (int32_t i = 0; i < n; i++)
        if (text[i] && len[i] <= GV_MAX_TOKEN_BYTES) total += len[i];
    v->blob = malloc(total + 1);
    int32_t m = 0;
    int64_t n_nodes_max = 0;
    size_t at = 0;
    for (int32_t i = 0; i < n && v->kind && v->off && v->blob; i++) {
        v->kind[i] = kind[i] > GV_NEVER ? GV_NEVER : kind[i];
        v->off[i] = at;
        bool fits = text[i] && len[i] <= GV_MAX_TOKEN_BYTES;
        if (fits) memcpy(v->blob + at, text[i], len[i]);
        if (fits && kind[i] == GV_TEXT && len[i] > 0) {
            srt[m++] = (gv_sort){(const uint8_t *)v->blob + at, len[i], i};
            n_nodes_max += (int64_t)len[i];
        } else if (kind[i] == GV_TEXT) {
            v->kind[i] = GV_NEVER; /* empty or over-long text never advances a grammar */
        }
        if (fits) at += len[i];
    }
    if (v->off) v->off[n] = at;
    qsort(srt, (size_t)m, sizeof *srt, gv_cmp);
    v->toks = malloc(((size_t)m + 1) * sizeof *v->toks);
    v->nodes = malloc(((size_t)n_nodes_max + 1) * sizeof *v->nodes);
    v->sub_lo = malloc(((size_t)n_nodes_max + 1) * sizeof *v->sub_lo);
    int32_t *open = malloc((GV_MAX_TOKEN_BYTES + 1) * sizeof *open); /* node id by depth on the current path */
    if (!v->kind || !v->off || !v->blob || !v->toks || !v->nodes || !v->sub_lo || !open) {
        free(open);
        free(srt);
        tl_grammar_vocab_free(v);
        return tl_err(TL_ERR_NOMEM, "grammar vocab: out of memory");
    }
    int32_t nn = 0;
    size_t depth = 0; /* nodes open on the path */
    for (int32_t i = 0; i < m; i++) {
        v->toks[i] = srt[i].id;
        size_t lcp = 0;
        if (i) {
            size_t lim = srt[i - 1].n < srt[i].n ? srt[i - 1].n : srt[i].n;
            while (lcp < lim && srt[i - 1].s[lcp] == srt[i].s[lcp]) lcp++;
        }
        while (depth > lcp) v->nodes[open[--depth]].end = nn; /* close nodes off the path */
        for (; depth < srt[i].n; depth++) {
            gv_node *d = &v->nodes[nn];
            d->byte = srt[i].s[depth];
            d->depth = (uint16_t)(depth + 1);
            d->tok_lo = 0;
            d->tok_n = 0;
            v->sub_lo[nn] = i;
            open[depth] = nn++;
        }
        gv_node *leaf = &v->nodes[open[depth - 1]];
        if (!leaf->tok_n) leaf->tok_lo = i;
        leaf->tok_n++;
    }
    while (depth > 0) v->nodes[open[--depth]].end = nn;
    v->n_nodes = nn;
    gv_node *shrunk = realloc(v->nodes, ((size_t)nn + 1) * sizeof *v->nodes);
    if (shrunk) v->nodes = shrunk;
    v->sub_lo[nn] = m;
    tl_status st = gv_summaries(v, open);
    if (st) {
        free(open);
        free(srt);
        tl_grammar_vocab_free(v);
        return st;
    }
    v->n_text = m;
    if ((st = gv_find_mid(v))) {
        free(open);
        free(srt);
        tl_grammar_vocab_free(v);
        return st;
    }
    for (int32_t i = 0; i < n; i++)
        if (v->off[i + 1] - v->off[i] > v->max_len) v->max_len = v->off[i + 1] - v->off[i];
    free(open);
    free(srt);
    *out = v;
    return TL_OK;
}

tl_status tl_grammar_vocab_init(const tl_model *m, tl_grammar_vocab **out) {
    *out = NULL;
    if (!m) return tl_err(TL_ERR_INVALID, "grammar vocab: no model");
    tl_model_info info;
    tl_model_get_info(m, &info);
    int32_t n = info.n_vocab;
    if (n < 1) return tl_err(TL_ERR_INVALID, "grammar vocab: model has %d tokens", n);
    const char **text = malloc((size_t)n * sizeof *text);
    size_t *len = malloc((size_t)n * sizeof *len);
    uint8_t *kind = malloc((size_t)n);
    tl_status s = TL_OK;
    if (!text || !len || !kind) s = tl_err(TL_ERR_NOMEM, "grammar vocab: out of memory");
    for (int32_t i = 0; i < n && !s; i++) {
        text[i] = tl_token_text(m, i, &len[i]);
        if (!text[i]) len[i] = 0;
        kind[i] = tl_token_is_eog(m, i) ? GV_EOG : tl_token_is_control(m, i) ? GV_NEVER : GV_TEXT;
    }
    if (!s) s = tl_grammar_vocab_init_pieces(n, text, len, kind, out);
    free(text);
    free(len);
    free(kind);
    return s;
}
