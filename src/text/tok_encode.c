/* text/tok_encode: text -> ids, in HF tokenizers' order:
 *   1. added tokens are cut out of the raw text (leftmost-longest, non-
 *      overlapping; a match of a special token when parse_special is off, or
 *      one failing its single_word test, is skipped but still consumes its
 *      span, as HF's Aho-Corasick pass does);
 *   2. each remaining segment is normalized (NFC, Prepend, Replace, ...),
 *      then "normalized" added tokens are cut out of it the same way;
 *   3. split into words by the pre-tokenizer's regexes (PCRE2, JIT);
 *   4. each word is BPE-merged (tok_bpe.c).
 * Everything runs on bytes: invalid UTF-8 never reaches a regex (only
 * valid runs are matched, see tok_split_span), so it becomes words of its
 * own, which byte-level BPE keeps losslessly and SentencePiece sends to
 * byte fallback.
 * Owns: per-call work buffers. Calls: tok_bpe, PCRE2, utf8proc. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/tok_internal.h"

typedef struct tok_span {
    size_t off, len;
} tok_span;

typedef struct tok_work {
    tok_bpe_work bpe;
    char *buf[2];
    size_t buf_cap[2];
    tok_span *sp[2];
    size_t sp_cap[2];
    pcre2_match_data *md;
} tok_work;

static void tok_work_free(tok_work *w) {
    tok_bpe_work_free(&w->bpe);
    for (int i = 0; i < 2; i++) {
        free(w->buf[i]);
        free(w->sp[i]);
    }
    if (w->md) pcre2_match_data_free(w->md);
}

static tl_status tok_buf_reserve(tok_work *w, int k, size_t n) {
    if (n <= w->buf_cap[k]) return TL_OK;
    size_t c = w->buf_cap[k] ? w->buf_cap[k] : 256;
    while (c < n) c *= 2;
    char *b = realloc(w->buf[k], c);
    if (!b) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory for %zu bytes", n);
    w->buf[k] = b;
    w->buf_cap[k] = c;
    return TL_OK;
}

static tl_status tok_span_push(tok_work *w, int k, size_t *n, size_t off, size_t len) {
    if (!len) return TL_OK;
    if (*n == w->sp_cap[k]) {
        size_t c = w->sp_cap[k] ? w->sp_cap[k] * 2 : 64;
        tok_span *s = realloc(w->sp[k], c * sizeof *s);
        if (!s) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
        w->sp[k] = s;
        w->sp_cap[k] = c;
    }
    w->sp[k][*n].off = off;
    w->sp[k][*n].len = len;
    (*n)++;
    return TL_OK;
}

/* NFC over the valid UTF-8 runs of s (invalid bytes pass through) into
 * buffer k. */
static tl_status tok_nfc(tok_work *w, int k, const char *s, size_t len, size_t *olen, int uflags) {
    bool nfc = uflags == (UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    size_t o = 0, i = 0;
    const unsigned char *u = (const unsigned char *)s;
    tl_status st = tok_buf_reserve(w, k, len + 16);
    if (st) return st;
    while (i < len) {
        /* ASCII and invalid bytes copy through; a run of valid non-ASCII
         * text (with its ASCII neighbours inside it) goes to utf8proc */
        size_t j = i;
        bool plain = true;
        while (j < len) {
            if (u[j] < 0x80) { j++; continue; }
            int l = tok_utf8_len(u + j, len - j);
            if (!l) break;
            /* characters below U+0300 are NFC-stable except when followed
             * by a combining mark, which is >= U+0300, so a quick check on
             * the lead byte keeps Latin-1 text on the fast path */
            if (u[j] >= 0xCC || !nfc) plain = false;
            j += (size_t)l;
        }
        if (plain) {
            if ((st = tok_buf_reserve(w, k, o + (j - i) + 16))) return st;
            memcpy(w->buf[k] + o, s + i, j - i);
            o += j - i;
        } else {
            utf8proc_uint8_t *dst = NULL;
            utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(j - i), &dst,
                                              (utf8proc_option_t)uflags);
            if (r < 0) return tl_err(TL_ERR_FORMAT, "tokenizer: NFC failed: %s", utf8proc_errmsg(r));
            if ((st = tok_buf_reserve(w, k, o + (size_t)r + 16))) {
                free(dst);
                return st;
            }
            memcpy(w->buf[k] + o, dst, (size_t)r);
            o += (size_t)r;
            free(dst);
        }
        i = j;
        if (i < len) { /* one invalid byte */
            if ((st = tok_buf_reserve(w, k, o + 16))) return st;
            w->buf[k][o++] = s[i++];
        }
    }
    *olen = o;
    return TL_OK;
}

/* Apply the normalizer ops; *out points at the result (s itself if none). */
static tl_status tok_normalize(const tok_vocab *v, tok_work *w, const char *s, size_t len, bool first,
                               const char **out, size_t *olen) {
    const char *cur = s;
    size_t cl = len;
    const size_t cap = len * TOK_MAX_NORM_GROWTH + 4096;
    int k = 0;
    for (int i = 0; i < v->n_norm; i++) {
        const tok_norm_op *op = &v->norm[i];
        tl_status st;
        size_t nl = 0;
        switch (op->kind) {
        case TOK_NORM_NFC:
            if ((st = tok_nfc(w, k, cur, cl, &nl, UTF8PROC_STABLE | UTF8PROC_COMPOSE))) return st;
            break;
        case TOK_NORM_UNICODE:
            if ((st = tok_nfc(w, k, cur, cl, &nl, op->uflags))) return st;
            break;
        case TOK_NORM_PREPEND:
        case TOK_NORM_PREFIX_SPACE:
        case TOK_NORM_PREPEND_IF_NOT:
        case TOK_NORM_PREPEND_FIRST_IF_NOT: {
            bool add;
            const char *p = op->str;
            size_t pl = op->len;
            if (op->kind == TOK_NORM_PREPEND) add = cl > 0;
            else if (op->kind == TOK_NORM_PREFIX_SPACE) {
                add = cl == 0 || cur[0] != ' ';
                p = " ";
                pl = 1;
            } else {
                add = !(cl >= pl && !memcmp(cur, p, pl));
                if (op->kind == TOK_NORM_PREPEND_FIRST_IF_NOT && !first) add = false;
            }
            if (!add) continue;
            if ((st = tok_buf_reserve(w, k, cl + pl))) return st;
            memcpy(w->buf[k], p, pl);
            memcpy(w->buf[k] + pl, cur, cl);
            nl = cl + pl;
            break;
        }
        case TOK_NORM_REPLACE: {
            size_t cnt = 0;
            for (size_t j = 0; j + op->len <= cl;) {
                if (!memcmp(cur + j, op->str, op->len)) {
                    cnt++;
                    j += op->len;
                } else
                    j++;
            }
            if (!cnt) continue;
            if (op->len2 > op->len && (cl > cap || cnt > (cap - cl) / (op->len2 - op->len)))
                return tl_err(TL_ERR_INVALID, "tokenizer: normalizers grow a %zu-byte text past %zu bytes "
                                              "(TOK_MAX_NORM_GROWTH)", len, cap);
            size_t need = cl + cnt * op->len2;
            if ((st = tok_buf_reserve(w, k, need))) return st;
            char *o = w->buf[k];
            for (size_t j = 0; j < cl;) {
                if (j + op->len <= cl && !memcmp(cur + j, op->str, op->len)) {
                    memcpy(o + nl, op->str2, op->len2);
                    nl += op->len2;
                    j += op->len;
                } else
                    o[nl++] = cur[j++];
            }
            break;
        }
        }
        if (nl > cap)
            return tl_err(TL_ERR_INVALID, "tokenizer: normalizers grow a %zu-byte text past %zu bytes "
                                          "(TOK_MAX_NORM_GROWTH)", len, cap);
        cur = w->buf[k];
        cl = nl;
        k ^= 1;
    }
    *out = cur;
    *olen = cl;
    return TL_OK;
}

/* Split one span by a step's regex into spans list k (count *n). */
static tl_status tok_split_span(const tok_pre_step *ps, tok_work *w, const char *base, tok_span in,
                                int k, size_t *n) {
    const char *s = base + in.off;
    size_t len = in.len, pos = 0;
    /* (start, end, is_match) spans covering [0, len), merged per behavior */
    size_t cur_s = 0, cur_e = 0;
    bool have = false, prev_match = false;
    tl_status st;
#define TOK_EMIT(a, b)                                                           \
    do {                                                                         \
        if ((st = tok_span_push(w, k, n, in.off + (a), (b) - (a)))) return st; \
    } while (0)
    /* HF's fold over the span list, streamed: a "current" piece is held so
     * a following match can extend it (MergedWithPrevious, Contiguous). */
    size_t ms = 0, me = 0, run_s = 0, run_e = 0;
    const unsigned char *u = (const unsigned char *)s;
    int nextm = 0; /* 1 while a fetched match is pending */
    for (;;) {
        /* fetch the next match at or after pos. The regex only ever sees
         * valid UTF-8 runs (subject = the run, PCRE2_NO_UTF_CHECK): invalid
         * bytes never match and no match spans them. Run bounds are kept
         * across calls so the validation is one pass over the span. */
        if (!nextm) {
            int rc = PCRE2_ERROR_NOMATCH;
            size_t start = pos;
            for (;;) {
                if (start >= run_e) { /* next valid run at or after start */
                    run_s = start;
                    while (run_s < len && !tok_utf8_len(u + run_s, len - run_s)) run_s++;
                    run_e = run_s;
                    while (run_e < len) {
                        int l = tok_utf8_len(u + run_e, len - run_e);
                        if (!l) break;
                        run_e += (size_t)l;
                    }
                    if (run_s >= len) {
                        rc = PCRE2_ERROR_NOMATCH;
                        break;
                    }
                    start = run_s;
                }
                uint32_t opts = PCRE2_NO_UTF_CHECK;
                rc = pcre2_match(ps->re, (PCRE2_SPTR)s + run_s, run_e - run_s, start - run_s, opts, w->md, NULL);
                if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
                    rc = pcre2_match(ps->re, (PCRE2_SPTR)s + run_s, run_e - run_s, start - run_s, opts | PCRE2_NO_JIT,
                                     w->md, NULL);
                if (rc == PCRE2_ERROR_NOMATCH) {
                    start = run_e; /* try the next run */
                    if (start >= len) break;
                    continue;
                }
                if (rc < 0) break;
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
                size_t a = run_s + ov[0], b = run_s + ov[1];
                if (a == b) { /* empty match: try one character later */
                    if (a >= run_e) {
                        start = run_e;
                        if (start >= len) { rc = PCRE2_ERROR_NOMATCH; break; }
                        continue;
                    }
                    start = a + (size_t)tok_utf8_len(u + a, run_e - a);
                    continue;
                }
                ms = a;
                me = b;
                break;
            }
            if (rc == PCRE2_ERROR_NOMATCH) {
                ms = me = len;
                nextm = 2; /* no more matches */
            } else if (rc < 0) {
                char msg[120];
                pcre2_get_error_message(rc, (PCRE2_UCHAR *)msg, sizeof msg);
                return tl_err(TL_ERR_FORMAT, "tokenizer: pre-tokenizer regex failed: %s", msg);
            } else
                nextm = 1;
        }
        /* the span list: gap [pos, ms) then match [ms, me) */
        for (int part = 0; part < 2; part++) {
            size_t a = part ? ms : pos, b = part ? me : ms;
            if (a == b) continue;
            bool is_match = part == 1;
            if (ps->invert) is_match = !is_match;
            switch (ps->behavior) {
            case TOK_SPLIT_ISOLATED: TOK_EMIT(a, b); break;
            case TOK_SPLIT_REMOVED:
                if (!is_match) TOK_EMIT(a, b);
                break;
            case TOK_SPLIT_MERGED_PREV:
                if (is_match && !prev_match && have) cur_e = b;
                else {
                    if (have) TOK_EMIT(cur_s, cur_e);
                    cur_s = a, cur_e = b, have = true;
                }
                break;
            case TOK_SPLIT_CONTIGUOUS:
                if (is_match == prev_match && have) cur_e = b;
                else {
                    if (have) TOK_EMIT(cur_s, cur_e);
                    cur_s = a, cur_e = b, have = true;
                }
                break;
            case TOK_SPLIT_MERGED_NEXT:
                /* a match starts a piece that runs to the next match
                 * (HF's reversed fold: a match joins the span after it
                 * unless that span is a match too) */
                if (is_match) {
                    if (have) TOK_EMIT(cur_s, cur_e);
                    cur_s = a, cur_e = b, have = true;
                } else {
                    if (have && prev_match) cur_e = b;
                    else {
                        if (have) TOK_EMIT(cur_s, cur_e);
                        cur_s = a, cur_e = b, have = true;
                    }
                }
                break;
            }
            prev_match = is_match;
        }
        if (nextm == 2) break;
        pos = me;
        nextm = 0;
    }
    if (have) TOK_EMIT(cur_s, cur_e);
#undef TOK_EMIT
    return TL_OK;
}

/* BPE one word; SentencePiece words are first cut before each ▁ that no
 * merge can join to its left (exact, see spm_cut in tok_internal.h), which
 * keeps the words short and lets most of them hit bpe_self. */
static tl_status tok_bpe_cut(const tok_vocab *v, tok_work *w, const char *t, size_t tl, tok_sink *sink) {
    if (!v->spm_cut) return tok_bpe_word(v, t, tl, &w->bpe, sink);
    const unsigned char *u = (const unsigned char *)t;
    size_t start = 0;
    for (size_t p = 1; p + 3 <= tl; p++) {
        if (u[p] != 0xE2 || u[p + 1] != 0x96 || u[p + 2] != 0x81) continue;
        size_t q = p - 1;
        while (q > start && (u[q] & 0xC0) == 0x80) q--;
        int l = tok_utf8_len(u + q, p - q);
        if (!l || q + (size_t)l != p) continue; /* invalid byte before: keep together */
        uint32_t cp = tok_utf8_cp(u + q, l);
        bool cut = cp != 0x2581;
        for (int k = 0; cut && k < v->n_spm_nocut; k++) cut = v->spm_nocut[k] != cp;
        if (!cut) continue;
        tl_status st = tok_bpe_word(v, t + start, p - start, &w->bpe, sink);
        if (st) return st;
        start = p;
        p += 2;
    }
    return tok_bpe_word(v, t + start, tl - start, &w->bpe, sink);
}

/* Pre-tokenize and BPE normalized text. */
static tl_status tok_pretok_bpe(const tok_vocab *v, tok_work *w, const char *t, size_t tl, tok_sink *sink) {
    if (!tl) return TL_OK;
    if (!v->n_pre) return tok_bpe_cut(v, w, t, tl, sink);
    size_t n_in = 0, n_out;
    int k = 0;
    tl_status st;
    if ((st = tok_span_push(w, k, &n_in, 0, tl))) return st;
    for (int i = 0; i < v->n_pre; i++) {
        n_out = 0;
        for (size_t j = 0; j < n_in; j++)
            if ((st = tok_split_span(&v->pre[i], w, t, w->sp[k][j], k ^ 1, &n_out))) return st;
        k ^= 1;
        n_in = n_out;
    }
    for (size_t j = 0; j < n_in; j++)
        if ((st = tok_bpe_cut(v, w, t + w->sp[k][j].off, w->sp[k][j].len, sink))) return st;
    return TL_OK;
}

static bool tok_is_space_at(const unsigned char *s, size_t len, size_t i, int *l) {
    /* Unicode White_Space, as Rust's char::is_whitespace */
    *l = tok_utf8_len(s + i, len - i);
    if (!*l) return false;
    uint32_t c = tok_utf8_cp(s + i, *l);
    return (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

/* A Unicode word character (Rust regex's \w, which HF's single_word test
 * uses): letters, marks, decimal digits, letter numbers, connector
 * punctuation, ZWNJ/ZWJ. */
static bool tok_is_word_cp(uint32_t c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (c == 0x200C || c == 0x200D) return true;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return true;
    default:
        return false;
    }
}

/* Does text[..end) end with a word character / text[start..len) start with one? */
static bool tok_word_before(const unsigned char *u, size_t end) {
    if (!end) return false;
    size_t b = end - 1;
    while (b > 0 && end - b < 4 && (u[b] & 0xC0) == 0x80) b--;
    int l = tok_utf8_len(u + b, end - b);
    return l && b + (size_t)l == end && tok_is_word_cp(tok_utf8_cp(u + b, l));
}
static bool tok_word_after(const unsigned char *u, size_t start, size_t len) {
    if (start >= len) return false;
    int l = tok_utf8_len(u + start, len - start);
    return l && tok_is_word_cp(tok_utf8_cp(u + start, l));
}

static tl_status tok_encode_segment(const tok_vocab *v, tok_work *w, const char *s, size_t len, bool first,
                                    bool parse_special, tok_sink *sink);

/* What a piece of text between added tokens goes on to: at level 0 (raw
 * text) normalization, at level 1 (normalized text) pre-tokenization. */
static tl_status tok_added_segment(const tok_vocab *v, tok_work *w, const char *s, size_t len, int level,
                                   bool first, bool parse_special, tok_sink *sink) {
    if (level == 0) return tok_encode_segment(v, w, s, len, first, parse_special, sink);
    return tok_pretok_bpe(v, w, s, len, sink);
}

/* Cut the added tokens of trie tr out of text, leftmost-longest and
 * non-overlapping, as HF's Aho-Corasick pass: a match of a special token
 * when parse_special is off, or one failing its single_word test, is
 * skipped but still consumes its span. */
static tl_status tok_split_added(const tok_vocab *v, const tok_trie *tr, tok_work *w, const char *text, size_t len,
                                 int level, bool first, bool parse_special, tok_sink *sink) {
    tl_status st;
    const unsigned char *u = (const unsigned char *)text;
    size_t seg = 0, i = 0;
    while (tr->n_nodes && i < len) {
        if (!tr->first[u[i]]) {
            i++;
            continue;
        }
        /* longest added token starting at i */
        int32_t node = 0, best = -1;
        size_t best_end = 0;
        for (size_t j = i; j < len; j++) {
            int32_t child;
            if (tok_pairmap_get(&tr->edges, ((uint64_t)(uint32_t)node << 8) | u[j], &child) < 0) break;
            node = child;
            if (tr->node_tok[node] >= 0) {
                best = tr->node_tok[node];
                best_end = j + 1;
            }
        }
        if (best < 0) {
            i++;
            continue;
        }
        const tok_added *a = &v->added[best];
        size_t ms = i, me = best_end;
        bool use = !(a->flags & TOK_ADD_SPECIAL) || parse_special;
        if (use && (a->flags & TOK_ADD_SINGLE_WORD)) {
            /* HF: no word character right before or right after */
            if (tok_word_before(u, ms) || tok_word_after(u, me, len)) use = false;
        }
        if (!use) {
            i = me; /* skipped, but the span was consumed */
            continue;
        }
        if (a->flags & TOK_ADD_LSTRIP) {
            /* back over whitespace characters, not before the segment */
            while (ms > seg) {
                size_t b = ms - 1;
                while (b > seg && (u[b] & 0xC0) == 0x80) b--;
                int l;
                if (!tok_is_space_at(u, len, b, &l) || b + (size_t)l != ms) break;
                ms = b;
            }
        }
        if (a->flags & TOK_ADD_RSTRIP) {
            int l;
            while (me < len && tok_is_space_at(u, len, me, &l)) me += (size_t)l;
        }
        if ((st = tok_added_segment(v, w, text + seg, ms - seg, level, first && seg == 0, parse_special, sink))) return st;
        tok_sink_push(sink, a->id);
        seg = i = me;
    }
    return tok_added_segment(v, w, text + seg, len - seg, level, first && seg == 0, parse_special, sink);
}

/* Normalize one raw segment, then cut normalized added tokens, then
 * pre-tokenize and BPE. */
static tl_status tok_encode_segment(const tok_vocab *v, tok_work *w, const char *s, size_t len, bool first,
                                    bool parse_special, tok_sink *sink) {
    if (!len) return TL_OK;
    const char *t;
    size_t tl;
    tl_status st = tok_normalize(v, w, s, len, first, &t, &tl);
    if (st) return st;
    if (v->trie_norm.n_nodes) return tok_split_added(v, &v->trie_norm, w, t, tl, 1, first, parse_special, sink);
    return tok_pretok_bpe(v, w, t, tl, sink);
}

tl_status tok_encode(const tok_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
                     int32_t *out, int32_t cap, int32_t *n_out) {
    if (n_out) *n_out = 0;
    if (!v || (!text && len) || !n_out || cap < 0 || (!out && cap))
        return tl_err(TL_ERR_INVALID, "tok_encode: bad arguments");
    tok_work w;
    memset(&w, 0, sizeof w);
    w.md = pcre2_match_data_create(2, NULL);
    if (!w.md) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
    tok_sink sink = {out, cap, 0};
    tl_status st = TL_OK;
    if (add_special && v->add_bos && v->bos >= 0) tok_sink_push(&sink, v->bos);
    if (v->trie.n_nodes) st = tok_split_added(v, &v->trie, &w, text, len, 0, true, parse_special, &sink);
    else st = tok_encode_segment(v, &w, text, len, true, parse_special, &sink);
    if (st) goto done;
    if (add_special && v->add_eos && v->eos >= 0) tok_sink_push(&sink, v->eos);
    *n_out = sink.n;
    if (sink.n > cap)
        st = tl_err(TL_ERR_INVALID, "tok_encode: %d tokens do not fit in a buffer of %d", (int)sink.n, (int)cap);
done:
    tok_work_free(&w);
    return st;
}

tl_status tok_normalize_text(const tok_vocab *v, const char *s, size_t len, char **out, size_t *olen) {
    *out = NULL;
    tok_work w;
    memset(&w, 0, sizeof w);
    const char *t;
    size_t tl;
    tl_status st = tok_normalize(v, &w, s, len, true, &t, &tl);
    if (!st) {
        *out = malloc(tl + 1);
        if (!*out) st = tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
        else {
            memcpy(*out, t, tl);
            (*out)[tl] = 0;
            *olen = tl;
        }
    }
    tok_work_free(&w);
    return st;
}
