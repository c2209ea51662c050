/* text/tok_detok: streaming ids -> text that never splits a UTF-8
 * character.
 *
 * Piece bytes are appended to a small pending buffer; everything up to the
 * last complete character is emitted. A byte sequence that can no longer
 * become valid is replaced by U+FFFD, one per maximal invalid subpart (the
 * Unicode "substitution of maximal subparts" practice, which Rust's
 * from_utf8_lossy and so HF's decoders follow). At most 3 bytes (a valid
 * but unfinished prefix) are ever held back.
 * Owns: the detok state. Calls: tok_vocab getters. */
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

struct tok_detok {
    const tok_vocab *v;
    unsigned char pend[4];
    size_t n_pend;
    bool started;   /* some piece text has been seen */
    bool render_control;
};

tl_status tok_detok_init(const tok_vocab *v, tok_detok **out) {
    *out = NULL;
    if (!v) return tl_err(TL_ERR_INVALID, "tok_detok_init: no vocabulary");
    tok_detok *d = calloc(1, sizeof *d);
    if (!d) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
    d->v = v;
    *out = d;
    return TL_OK;
}

void tok_detok_free(tok_detok *d) { free(d); }
void tok_detok_set_render_control(tok_detok *d, bool render) { d->render_control = render; }
void tok_detok_reset(tok_detok *d) {
    d->n_pend = 0;
    d->started = false;
}

/* Length of the valid prefix of a (possibly unfinished) sequence at s:
 * returns the full length if complete and valid; 0 < r: r bytes form a
 * maximal invalid subpart (or a lone invalid byte); sets *incomplete when
 * all n bytes are a valid prefix that more bytes could finish. */
static size_t tok_utf8_scan(const unsigned char *s, size_t n, bool *valid, bool *incomplete) {
    *valid = false;
    *incomplete = false;
    unsigned c = s[0];
    if (c < 0x80) {
        *valid = true;
        return 1;
    }
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return 1; /* invalid lead byte */
    size_t i = 1;
    for (; i < len; i++) {
        if (i >= n) {
            *incomplete = true;
            return i;
        }
        unsigned l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (s[i] < l || s[i] > h) return i; /* maximal subpart ends here */
    }
    *valid = true;
    return len;
}

/* Convert bytes src[0..n) (pending + piece) into complete characters at
 * dst (NULL: count only). Returns bytes written; *keep = trailing bytes to
 * hold back (if !final). */
static size_t tok_emit_valid(const unsigned char *src, size_t n, char *dst, size_t *keep, bool final) {
    size_t i = 0, o = 0;
    *keep = 0;
    while (i < n) {
        bool valid, inc;
        size_t l = tok_utf8_scan(src + i, n - i, &valid, &inc);
        if (inc && !final) {
            *keep = n - i;
            break;
        }
        if (valid) {
            if (dst) memcpy(dst + o, src + i, l);
            o += l;
        } else {
            if (dst) memcpy(dst + o, "\xEF\xBF\xBD", 3);
            o += 3;
        }
        i += l;
    }
    return o;
}

static tl_status tok_detok_bytes(tok_detok *d, const char *p, size_t plen, char *buf, size_t cap, size_t *n,
                                 bool final) {
    /* pending (<= 3) + piece, processed as one stream */
    unsigned char small[256], *tmp = d->n_pend + plen <= sizeof small ? small : malloc(d->n_pend + plen);
    if (!tmp) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(tmp, d->pend, d->n_pend);
    if (plen) memcpy(tmp + d->n_pend, p, plen);
    size_t total = d->n_pend + plen, keep;
    size_t need = tok_emit_valid(tmp, total, NULL, &keep, final);
    *n = need;
    if (!buf || cap < need + 1) {
        if (tmp != small) free(tmp);
        return tl_err(TL_ERR_INVALID, "tok_detok: output needs %zu bytes, buffer has %zu", need + 1, cap);
    }
    tok_emit_valid(tmp, total, buf, &keep, final);
    buf[need] = 0;
    memcpy(d->pend, tmp + total - keep, keep);
    d->n_pend = keep;
    if (tmp != small) free(tmp);
    return TL_OK;
}

tl_status tok_detok_push(tok_detok *d, int32_t id, char *buf, size_t cap, size_t *n) {
    *n = 0;
    const tok_vocab *v = d->v;
    if (id < 0 || id >= v->n) return tl_err(TL_ERR_INVALID, "tok_detok: token id %d out of range [0, %d)", (int)id, (int)v->n);
    const tok_entry *e = &v->tok[id];
    const char *p = v->arena + e->piece_off;
    size_t plen = e->piece_len;
    if (e->attr == TOK_ATTR_CONTROL && !d->render_control) plen = 0;
    size_t skip = 0;
    char small[256], *tmp = NULL;
    if (plen && !d->started) {
        if (v->strip_leading_space == 1 && p[0] == ' ') skip = 1;
        if (v->strip_leading_space == 2 && memchr(p, ' ', plen)) {
            /* HF's Metaspace decoder drops every marker of the first token:
             * spaces in an SPM piece come only from ▁ */
            tmp = plen <= sizeof small ? small : malloc(plen);
            if (!tmp) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
            size_t o = 0;
            for (size_t i = 0; i < plen; i++)
                if (p[i] != ' ') tmp[o++] = p[i];
            p = tmp;
            skip = 0;
            plen = o;
            if (!o) d->started = true; /* the token was all markers */
        }
    }
    tl_status st = tok_detok_bytes(d, p + skip, plen - skip, buf, cap, n, false);
    if (tmp && tmp != small) free(tmp);
    if (st) {
        if (tmp) d->started = false;
        return st;
    }
    if (plen) d->started = true;
    return TL_OK;
}

tl_status tok_detok_flush(tok_detok *d, char *buf, size_t cap, size_t *n) {
    *n = 0;
    return tok_detok_bytes(d, NULL, 0, buf, cap, n, true);
}

tl_status tok_decode(const tok_vocab *v, const int32_t *ids, int32_t n, bool render_control, char **out,
                     size_t *len) {
    *out = NULL;
    if (len) *len = 0;
    tok_detok d = {.v = v, .render_control = render_control};
    size_t cap = 64;
    for (int32_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= v->n)
            return tl_err(TL_ERR_INVALID, "tok_decode: token id %d out of range [0, %d)", (int)ids[i], (int)v->n);
        cap += (size_t)v->tok[ids[i]].piece_len * 3; /* U+FFFD can triple a byte */
    }
    char *b = malloc(cap);
    if (!b) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
    size_t o = 0, k;
    for (int32_t i = 0; i < n; i++) {
        tl_status st = tok_detok_push(&d, ids[i], b + o, cap - o, &k);
        if (st) {
            free(b);
            return st;
        }
        o += k;
    }
    tl_status st = tok_detok_flush(&d, b + o, cap - o, &k);
    if (st) {
        free(b);
        return st;
    }
    o += k;
    *out = b;
    if (len) *len = o;
    return TL_OK;
}
