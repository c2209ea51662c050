/* text/tok_gguf: tok_vocab from GGUF tokenizer.ggml.* metadata.
 *
 * model "gpt2": byte-level BPE with tokenizer.ggml.merges (rank = index);
 * model "llama": SentencePiece BPE from tokenizer.ggml.scores: every token
 * that splits into two tokens yields a merge pair, ranked by the merged
 * token's score (higher first, equal scores share a rank so the leftmost
 * pair wins), which is what SentencePiece's BPE does.
 * CONTROL tokens are special (matched in text only with parse_special),
 * USER_DEFINED ones always match whole. Every array's type and count is
 * checked; bad metadata is TL_ERR_FORMAT naming the key.
 * Owns: nothing past the returned vocab. Calls: io/gguf, tok_vocab. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

static tl_status tok_gguf_arr(const gguf_file *f, const char *key, gguf_vtype want, int64_t n,
                              const gguf_kv **out) {
    *out = NULL;
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return TL_ERR_NOT_FOUND;
    if (kv->type != GGUF_VT_ARRAY)
        return tl_err(TL_ERR_FORMAT, "tokenizer: GGUF key '%s' is a %s, expected an array", key,
                      gguf_vtype_name(kv->type));
    bool ok = kv->arr_type == want;
    if (want == GGUF_VT_INT32) /* token types: any integer type */
        ok = kv->arr_type <= GGUF_VT_INT32 || kv->arr_type == GGUF_VT_UINT64 || kv->arr_type == GGUF_VT_INT64;
    if (!ok)
        return tl_err(TL_ERR_FORMAT, "tokenizer: GGUF key '%s' is an array of %s, expected %s", key,
                      gguf_vtype_name(kv->arr_type), gguf_vtype_name(want));
    if (n >= 0 && (int64_t)kv->arr_n != n)
        return tl_err(TL_ERR_FORMAT, "tokenizer: GGUF key '%s' has %llu entries, tokenizer.ggml.tokens has %lld",
                      key, (unsigned long long)kv->arr_n, (long long)n);
    *out = kv;
    return TL_OK;
}

/* Optional token id key; -1 if absent. */
static tl_status tok_gguf_id(const gguf_file *f, const char *key, int32_t n, int32_t *out) {
    *out = -1;
    if (!gguf_find_kv(f, key)) return TL_OK;
    int64_t x;
    tl_status st = gguf_get_int(f, key, &x);
    if (st) return st;
    /* some converters write -1 or UINT32_MAX for "none" */
    if (x < 0 || x == UINT32_MAX) return TL_OK;
    if (x >= n) return tl_err(TL_ERR_FORMAT, "tokenizer: GGUF key '%s' = %lld is not a token id (vocab %d)", key,
                              (long long)x, (int)n);
    *out = (int32_t)x;
    return TL_OK;
}

static tl_status tok_gguf_bool(const gguf_file *f, const char *key, bool def, bool *out) {
    *out = def;
    if (!gguf_find_kv(f, key)) return TL_OK;
    return gguf_get_bool(f, key, out);
}

typedef struct tok_scored {
    float score;
    int32_t a, b, id;
} tok_scored;

static int tok_scored_cmp(const void *x, const void *y) {
    const tok_scored *p = x, *q = y;
    if (p->score != q->score) return p->score > q->score ? -1 : 1;
    return p->id < q->id ? -1 : p->id > q->id;
}

/* SentencePiece merges from scores. */
static tl_status tok_gguf_score_merges(tok_vocab *v, const float *scores) {
    size_t cap = 1024, n = 0;
    tok_scored *m = malloc(cap * sizeof *m);
    if (!m) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
    for (int32_t t = 0; t < v->n; t++) {
        const tok_entry *e = &v->tok[t];
        if (e->attr != TOK_ATTR_NORMAL && e->attr != TOK_ATTR_USER && e->attr != TOK_ATTR_UNUSED) continue;
        const char *s = v->arena + e->text_off;
        const unsigned char *u = (const unsigned char *)s;
        /* the prefixes' hashes grow byte by byte: a token costs O(its length)
         * lookups, not O(length^2) hashing */
        uint32_t hp = TOK_HASH_INIT;
        for (uint32_t k = 1; k < e->text_len; k++) {
            hp = tok_hash_step(hp, u[k - 1]);
            if ((u[k] & 0xC0) == 0x80) continue; /* split at character boundaries */
            int32_t a = tok_strmap_get_h(&v->bpe_map, s, k, tok_hash_final(hp));
            if (a < 0) continue;
            int32_t b = tok_strmap_get(&v->bpe_map, s + k, e->text_len - k);
            if (b < 0) continue;
            if (n == cap) {
                cap *= 2;
                tok_scored *nm = realloc(m, cap * sizeof *m);
                if (!nm) {
                    free(m);
                    return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
                }
                m = nm;
            }
            m[n++] = (tok_scored){scores[t], a, b, t};
        }
    }
    qsort(m, n, sizeof *m, tok_scored_cmp);
    tl_status st = TL_OK;
    int32_t rank = -1;
    for (size_t i = 0; i < n && !st; i++) {
        if (i == 0 || m[i].score != m[i - 1].score) rank++;
        st = tok_pairmap_put(&v->merges, tok_pair_key(m[i].a, m[i].b), rank, m[i].id, false);
    }
    free(m);
    return st;
}

tl_status tok_load_gguf(const gguf_file *f, tok_vocab **out) {
    *out = NULL;
    gguf_str model;
    tl_status st = gguf_get_str(f, "tokenizer.ggml.model", &model);
    if (st) return tl_err_prefix(st, "tokenizer: ");
    tok_kind kind;
    if (model.len == 4 && !memcmp(model.ptr, "gpt2", 4)) kind = TOK_KIND_BYTE_LEVEL;
    else if (model.len == 5 && !memcmp(model.ptr, "llama", 5)) kind = TOK_KIND_SPM;
    else
        return tl_err(TL_ERR_UNSUPPORTED, "tokenizer: tokenizer.ggml.model '%.*s' is not supported (gpt2, llama)",
                      (int)(model.len > 64 ? 64 : model.len), model.ptr);
    const gguf_kv *toks, *types = NULL, *merges = NULL, *scores = NULL;
    st = tok_gguf_arr(f, "tokenizer.ggml.tokens", GGUF_VT_STRING, -1, &toks);
    if (st == TL_ERR_NOT_FOUND) return tl_err(st, "tokenizer: GGUF has no tokenizer.ggml.tokens");
    if (st) return st;
    if (toks->arr_n == 0 || toks->arr_n > TOK_MAX_VOCAB)
        return tl_err(TL_ERR_FORMAT, "tokenizer: tokenizer.ggml.tokens has %llu entries (1..%d, TOK_MAX_VOCAB)",
                      (unsigned long long)toks->arr_n, TOK_MAX_VOCAB);
    int32_t n = (int32_t)toks->arr_n;
    st = tok_gguf_arr(f, "tokenizer.ggml.token_type", GGUF_VT_INT32, n, &types);
    if (st && st != TL_ERR_NOT_FOUND) return st;
    st = tok_gguf_arr(f, "tokenizer.ggml.scores", GGUF_VT_FLOAT32, n, &scores);
    if (st && st != TL_ERR_NOT_FOUND) return st;
    if (kind == TOK_KIND_BYTE_LEVEL) {
        st = tok_gguf_arr(f, "tokenizer.ggml.merges", GGUF_VT_STRING, -1, &merges);
        if (st == TL_ERR_NOT_FOUND) return tl_err(st, "tokenizer: gpt2 tokenizer without tokenizer.ggml.merges");
        if (st) return st;
    } else {
        st = tok_gguf_arr(f, "tokenizer.ggml.merges", GGUF_VT_STRING, -1, &merges);
        if (st && st != TL_ERR_NOT_FOUND) return st;
        if (!merges && !scores)
            return tl_err(TL_ERR_FORMAT, "tokenizer: llama tokenizer with neither scores nor merges");
    }

    tok_vocab *v;
    if ((st = tok_vocab_alloc(kind, n, &v))) return st;
    snprintf(v->name, sizeof v->name, "%s", kind == TOK_KIND_SPM ? "llama (spm)" : "gpt2 (byte-level)");
    for (int32_t i = 0; i < n && !st; i++) {
        gguf_str s = gguf_arr_str(f, toks, (uint64_t)i);
        int64_t t = types ? gguf_arr_int(types, (uint64_t)i) : TOK_ATTR_NORMAL;
        if (t < 0 || t > 6) {
            st = tl_err(TL_ERR_FORMAT, "tokenizer: token %d has token_type %lld (0..6 expected)", (int)i, (long long)t);
            break;
        }
        if (t == 0) t = TOK_ATTR_NORMAL; /* "undefined" */
        if (kind == TOK_KIND_SPM && t == TOK_ATTR_USER && memchr(s.ptr, ' ', s.len)) {
            /* GGUF converters write SentencePiece user-defined pieces with
             * ' ' for the ▁ marker; the tokenizer (and HF's added token)
             * has ▁, so "▁▁" must not match two raw spaces */
            char *t2 = malloc(s.len * 3);
            if (!t2) {
                st = tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
                break;
            }
            size_t o = 0;
            for (uint64_t k = 0; k < s.len; k++) {
                if (s.ptr[k] == ' ') {
                    memcpy(t2 + o, "\xE2\x96\x81", 3);
                    o += 3;
                } else
                    t2[o++] = s.ptr[k];
            }
            st = tok_vocab_set(v, i, t2, o, (uint8_t)t);
            free(t2);
            continue;
        }
        st = tok_vocab_set(v, i, s.ptr, s.len, (uint8_t)t);
    }
    if (!st) st = tok_vocab_index(v);
    if (!st && merges) {
        if (merges->arr_n > TOK_MAX_MERGES)
            st = tl_err(TL_ERR_FORMAT, "tokenizer: %llu merges (TOK_MAX_MERGES %d)", (unsigned long long)merges->arr_n,
                        TOK_MAX_MERGES);
        for (uint64_t i = 0; i < merges->arr_n && !st; i++) {
            gguf_str s = gguf_arr_str(f, merges, i);
            /* "left right": the separator is the first space after the
             * first byte (a token never contains a raw space here) */
            size_t sp = 1;
            while (sp < s.len && s.ptr[sp] != ' ') sp++;
            if (sp >= s.len) {
                st = tl_err(TL_ERR_FORMAT, "tokenizer: merge %llu '%.*s' has no space separator", (unsigned long long)i,
                            (int)(s.len > 64 ? 64 : s.len), s.ptr);
                break;
            }
            st = tok_vocab_add_merge(v, s.ptr, sp, s.ptr + sp + 1, s.len - sp - 1, (int32_t)i);
        }
    } else if (!st && scores) {
        float *sc = malloc(sizeof(float) * (size_t)n);
        if (!sc) st = tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
        for (int32_t i = 0; !st && i < n; i++) {
            sc[i] = (float)gguf_arr_float(scores, (uint64_t)i);
            if (isnan(sc[i])) sc[i] = -INFINITY;
        }
        if (!st) st = tok_gguf_score_merges(v, sc);
        free(sc);
    }
    /* special tokens */
    for (int32_t i = 0; i < n && !st; i++) {
        uint8_t a = v->tok[i].attr;
        /* SentencePiece user-defined pieces (text in ▁ form, see above)
         * match both in the raw text, as HF's non-normalized added token
         * does, and in the normalized text, where HF's merges would build
         * them but GGUF's scores (-1000 for these) would not */
        if (a == TOK_ATTR_CONTROL) st = tok_vocab_add_added(v, i, TOK_ADD_SPECIAL, NULL, 0);
        else if (a == TOK_ATTR_USER) {
            st = tok_vocab_add_added(v, i, 0, NULL, 0);
            if (!st && kind == TOK_KIND_SPM) st = tok_vocab_add_added(v, i, TOK_ADD_NORMALIZED, NULL, 0);
        }
    }
    int32_t eot = -1, eom = -1;
    if (!st) st = tok_gguf_id(f, "tokenizer.ggml.bos_token_id", n, &v->bos);
    if (!st) st = tok_gguf_id(f, "tokenizer.ggml.eos_token_id", n, &v->eos);
    if (!st) st = tok_gguf_id(f, "tokenizer.ggml.unknown_token_id", n, &v->unk_id);
    if (!st) st = tok_gguf_id(f, "tokenizer.ggml.eot_token_id", n, &eot);
    if (!st) st = tok_gguf_id(f, "tokenizer.ggml.eom_token_id", n, &eom);
    /* llama.cpp's defaults when the keys are absent: SPM adds BOS, BPE not */
    if (!st) st = tok_gguf_bool(f, "tokenizer.ggml.add_bos_token", kind == TOK_KIND_SPM, &v->add_bos);
    if (!st) st = tok_gguf_bool(f, "tokenizer.ggml.add_eos_token", false, &v->add_eos);
    if (!st && kind == TOK_KIND_BYTE_LEVEL) {
        gguf_str pre = {"", 0};
        if (gguf_find_kv(f, "tokenizer.ggml.pre")) st = gguf_get_str(f, "tokenizer.ggml.pre", &pre);
        if (!st) st = tok_pre_from_name(v, pre.ptr, pre.len);
    } else if (!st) {
        bool prefix;
        st = tok_gguf_bool(f, "tokenizer.ggml.add_space_prefix", true, &prefix);
        snprintf(v->pre_name, sizeof v->pre_name, "%s", "spm");
        v->byte_fallback = true;
        v->fuse_unk = true;
        if (!st && prefix) {
            st = tok_vocab_add_norm(v, TOK_NORM_PREPEND, "\xE2\x96\x81", 3, NULL, 0);
            v->strip_leading_space = 1;
        }
        if (!st) st = tok_vocab_add_norm(v, TOK_NORM_REPLACE, " ", 1, "\xE2\x96\x81", 3);
    }
    if (st) {
        tok_free(v);
        return st;
    }
    if ((st = tok_vocab_precompute(v))) {
        tok_free(v);
        return st;
    }
    int32_t eogs[2] = {eot, eom};
    tok_vocab_finish(v, eogs, 2);
    *out = v;
    return TL_OK;
}
