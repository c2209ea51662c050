/* text/tok_bpe: BPE merging of one pre-tokenized word.
 *
 * The word is split into units (bytes for byte-level vocabularies, UTF-8
 * characters for SentencePiece ones; a unit missing from the vocabulary
 * becomes <0xNN> byte tokens or <unk>), kept as a doubly linked list. Every
 * adjacent pair with a merge rank goes into a binary min-heap keyed
 * (rank << 32 | left position), so the lowest rank merges first and equal
 * ranks merge leftmost first, which is HF's order. A popped entry is stale
 * if its left symbol was merged away or the pair now there has another
 * rank; the span of a pair only grows, so this check is exact.
 * O(n log n) per word. Owns: the work buffers. Calls: tok_map. */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

struct tok_sym {
    int32_t id;
    int32_t prev, next; /* -1 at the ends */
    uint32_t len;       /* bytes covered; 0 once merged into its left neighbour */
};

void tok_bpe_work_free(tok_bpe_work *wk) {
    free(wk->sym);
    free(wk->heap);
    memset(wk, 0, sizeof *wk);
}

static tl_status tok_bpe_reserve(tok_bpe_work *wk, size_t n) {
    if (n > wk->sym_cap) {
        size_t c = wk->sym_cap ? wk->sym_cap : 64;
        while (c < n) c *= 2;
        struct tok_sym *s = realloc(wk->sym, c * sizeof *s);
        if (!s) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory for a %zu-byte word", n);
        wk->sym = s;
        wk->sym_cap = c;
    }
    /* each merge pushes at most 2 pairs: initial n-1 + 2 per merge */
    size_t hn = 3 * n + 4;
    if (hn > wk->heap_cap) {
        size_t c = wk->heap_cap ? wk->heap_cap : 256;
        while (c < hn) c *= 2;
        uint64_t *h = realloc(wk->heap, c * sizeof *h);
        if (!h) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory for a %zu-byte word", n);
        wk->heap = h;
        wk->heap_cap = c;
    }
    return TL_OK;
}

static inline void tok_heap_push(uint64_t *h, size_t *n, uint64_t x) {
    size_t i = (*n)++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (h[p] <= x) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static inline uint64_t tok_heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], x = h[--(*n)];
    size_t i = 0, m = *n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= m) break;
        size_t c = (l + 1 < m && h[l + 1] < h[l]) ? l + 1 : l;
        if (h[c] >= x) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = x;
    return top;
}

/* Append units of w to sym[]; returns the count. */
static size_t tok_bpe_units(const tok_vocab *v, const char *w, size_t len, struct tok_sym *sym) {
    size_t n = 0;
    const unsigned char *s = (const unsigned char *)w;
    bool prev_unk = false;
    for (size_t i = 0; i < len;) {
        size_t ul = 1;
        int32_t id;
        if (v->kind == TOK_KIND_BYTE_LEVEL) {
            id = v->byte_tok[s[i]];
        } else {
            int l = tok_utf8_len(s + i, len - i);
            ul = l ? (size_t)l : 1;
            id = tok_strmap_get(&v->bpe_map, w + i, ul);
        }
        if (id >= 0) {
            sym[n].id = id;
            sym[n].len = (uint32_t)ul;
            n++;
            prev_unk = false;
        } else {
            bool done = false;
            if (v->byte_fallback) {
                done = true;
                for (size_t k = 0; k < ul; k++)
                    if (v->byte_tok[s[i + k]] < 0) done = false;
                if (done)
                    for (size_t k = 0; k < ul; k++) {
                        sym[n].id = v->byte_tok[s[i + k]];
                        sym[n].len = 1;
                        n++;
                    }
                if (done) prev_unk = false;
            }
            if (!done && v->unk_id >= 0) {
                if (v->fuse_unk && prev_unk) {
                    sym[n - 1].len += (uint32_t)ul;
                } else {
                    sym[n].id = v->unk_id;
                    sym[n].len = (uint32_t)ul;
                    n++;
                }
                prev_unk = true;
            }
            /* no unk token: HF drops the unit */
        }
        i += ul;
    }
    return n;
}

tl_status tok_bpe_word(const tok_vocab *v, const char *w, size_t len, tok_bpe_work *wk, tok_sink *sink) {
    if (!len) return TL_OK;
    if (v->ignore_merges || v->bpe_self) {
        int32_t id = tok_strmap_get(&v->bpe_map, w, len);
        if (id >= 0 && (v->ignore_merges || v->bpe_self[id])) {
            tok_sink_push(sink, id);
            return TL_OK;
        }
    }
    /* a unit of k bytes becomes at most k symbols (byte fallback) */
    tl_status st = tok_bpe_reserve(wk, len + 1);
    if (st) return st;
    struct tok_sym *sym = wk->sym;
    size_t n = tok_bpe_units(v, w, len, sym);
    if (n == 0) return TL_OK;
    if (n == 1) {
        tok_sink_push(sink, sym[0].id);
        return TL_OK;
    }
    uint64_t *heap = wk->heap;
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        sym[i].prev = (int32_t)i - 1;
        sym[i].next = i + 1 < n ? (int32_t)i + 1 : -1;
        if (i + 1 < n) {
            int32_t nid, r = tok_pairmap_get(&v->merges, tok_pair_key(sym[i].id, sym[i + 1].id), &nid);
            if (r >= 0) tok_heap_push(heap, &hn, ((uint64_t)(uint32_t)r << 32) | i);
        }
    }
    while (hn) {
        uint64_t top = tok_heap_pop(heap, &hn);
        int32_t rank = (int32_t)(top >> 32);
        int32_t p = (int32_t)(uint32_t)top;
        if (!sym[p].len || sym[p].next < 0) continue;
        int32_t q = sym[p].next, nid = -1;
        int32_t r = tok_pairmap_get(&v->merges, tok_pair_key(sym[p].id, sym[q].id), &nid);
        if (r != rank) continue; /* stale */
        sym[p].id = nid;
        sym[p].len += sym[q].len;
        sym[q].len = 0;
        sym[p].next = sym[q].next;
        if (sym[q].next >= 0) sym[sym[q].next].prev = p;
        int32_t a = sym[p].prev, b = sym[p].next, id2;
        if (a >= 0) {
            r = tok_pairmap_get(&v->merges, tok_pair_key(sym[a].id, nid), &id2);
            if (r >= 0) tok_heap_push(heap, &hn, ((uint64_t)(uint32_t)r << 32) | (uint32_t)a);
        }
        if (b >= 0) {
            r = tok_pairmap_get(&v->merges, tok_pair_key(nid, sym[b].id), &id2);
            if (r >= 0) tok_heap_push(heap, &hn, ((uint64_t)(uint32_t)r << 32) | (uint32_t)p);
        }
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) tok_sink_push(sink, sym[i].id);
    return TL_OK;
}

/* Which ▁ boundaries merges can never cross (see spm_cut). */
static void tok_spm_cut_scan(tok_vocab *v) {
    v->spm_cut = false;
    v->n_spm_nocut = 0;
    if (v->kind != TOK_KIND_SPM) return;
    for (uint32_t i = 0; i < v->merges.cap; i++) {
        uint64_t k = v->merges.ent[i].key;
        if (k == UINT64_MAX) continue;
        const tok_entry *a = &v->tok[(int32_t)(k >> 32)], *b = &v->tok[(int32_t)(uint32_t)k];
        const unsigned char *bt = (const unsigned char *)v->arena + b->text_off;
        if (b->text_len < 3 || bt[0] != 0xE2 || bt[1] != 0x96 || bt[2] != 0x81) continue;
        const unsigned char *at = (const unsigned char *)v->arena + a->text_off;
        bool all_meta = a->text_len % 3 == 0 && a->text_len > 0;
        for (uint32_t j = 0; all_meta && j < a->text_len; j += 3)
            all_meta = at[j] == 0xE2 && at[j + 1] == 0x96 && at[j + 2] == 0x81;
        if (all_meta || !a->text_len) continue;
        /* last character of a */
        uint32_t j = a->text_len - 1;
        while (j > 0 && (at[j] & 0xC0) == 0x80) j--;
        int l = tok_utf8_len(at + j, a->text_len - j);
        if (!l) return; /* odd token text: do not cut at all */
        uint32_t cp = tok_utf8_cp(at + j, l);
        bool have = false;
        for (int q = 0; q < v->n_spm_nocut; q++) have |= v->spm_nocut[q] == cp;
        if (have) continue;
        if (v->n_spm_nocut == (int)(sizeof v->spm_nocut / sizeof v->spm_nocut[0])) return;
        v->spm_nocut[v->n_spm_nocut++] = cp;
    }
    v->spm_cut = true;
}

tl_status tok_vocab_precompute(tok_vocab *v) {
    tok_spm_cut_scan(v);
    free(v->bpe_self);
    v->bpe_self = NULL;
    uint8_t *self = calloc((size_t)v->n, 1);
    if (!self) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
    tok_bpe_work wk;
    memset(&wk, 0, sizeof wk);
    tl_status st = TL_OK;
    int32_t got[2];
    /* walk bpe_map's keys: each is a word that may appear whole */
    for (uint32_t i = 0; i < v->bpe_map.cap && !st; i++) {
        const tok_str_ent *e = &v->bpe_map.ent[i];
        if (e->val < 0) continue;
        tok_sink s = {got, 2, 0};
        st = tok_bpe_word(v, v->bpe_map.arena + e->off, e->len, &wk, &s);
        if (!st && s.n == 1 && got[0] == e->val) self[e->val] = 1;
    }
    tok_bpe_work_free(&wk);
    if (st) {
        free(self);
        return st;
    }
    v->bpe_self = self;
    return TL_OK;
}
