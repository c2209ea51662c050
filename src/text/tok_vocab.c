/* text/tok_vocab: building a tok_vocab (used by the GGUF and HF loaders),
 * its getters, and the pieces a token decodes to.
 *
 * The GPT-2 byte-level alphabet maps each byte to a printable code point:
 * bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves, the other
 * 68 bytes (controls, space, 0x7F..0xA0, 0xAD) take U+0100.. in byte order.
 * Byte-level vocabularies are stored in that alphabet; we undo it once at
 * load so the encoder works on raw bytes.
 * Owns: tok_vocab memory. Calls: base, tok_map, PCRE2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tok_internal.h"

static int tok_byte_is_self(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

/* The non-self bytes in order are 0x00..0x20 (33), 0x7F..0xA0 (34) and
 * 0xAD: closed forms of that ranking. */
uint32_t tok_byte_to_cp(uint8_t b) {
    if (tok_byte_is_self(b)) return b;
    if (b <= 0x20) return 256u + b;
    if (b <= 0xA0) return 256u + 33u + (b - 0x7Fu);
    return 256u + 67u; /* 0xAD */
}

void tok_byte_level_text(uint8_t b, char out[4]) {
    uint32_t cp = tok_byte_to_cp(b); /* < 0x800: one or two UTF-8 bytes */
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

int tok_cp_to_byte(uint32_t cp) {
    if (cp < 256) return tok_byte_is_self(cp) ? (int)cp : -1;
    uint32_t k = cp - 256;
    if (k < 33) return (int)k;
    if (k < 67) return (int)(0x7F + (k - 33));
    if (k == 67) return 0xAD;
    return -1;
}

tl_status tok_vocab_alloc(tok_kind kind, int32_t n, tok_vocab **out) {
    *out = NULL;
    if (n <= 0 || n > TOK_MAX_VOCAB)
        return tl_err(TL_ERR_FORMAT, "tokenizer: vocabulary size %d out of range (1..%d, TOK_MAX_VOCAB)", (int)n,
                      TOK_MAX_VOCAB);
    tok_vocab *v = calloc(1, sizeof *v);
    if (!v) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
    v->kind = kind;
    v->n = n;
    v->tok = calloc((size_t)n, sizeof *v->tok);
    v->eog = calloc((size_t)n, 1);
    if (!v->tok || !v->eog) {
        tok_free(v);
        return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory for %d tokens", (int)n);
    }
    for (int i = 0; i < 256; i++) v->byte_tok[i] = -1;
    v->bos = v->eos = v->unk_id = -1;
    snprintf(v->name, sizeof v->name, "%s", kind == TOK_KIND_SPM ? "spm" : "byte-level");
    *out = v;
    return TL_OK;
}

static tl_status tok_arena_add(tok_vocab *v, const char *s, size_t len, uint32_t *off) {
    if (!v->arena || v->arena_len + len > v->arena_cap) { /* allocated even for "": no NULL + 0 later */
        size_t nc = v->arena_cap ? v->arena_cap : 1 << 16;
        while (nc < v->arena_len + len) nc *= 2;
        if (nc > UINT32_MAX) return tl_err(TL_ERR_FORMAT, "tokenizer: vocabulary text over 4 GiB");
        char *na = realloc(v->arena, nc);
        if (!na) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory for vocabulary text");
        v->arena = na;
        v->arena_cap = nc;
    }
    *off = (uint32_t)v->arena_len;
    if (len) memcpy(v->arena + v->arena_len, s, len);
    v->arena_len += len;
    return TL_OK;
}

static int tok_hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* "<0xNN>" -> NN, else -1 (HF ByteFallback's test). */
static int tok_byte_token_value(const char *t, size_t len) {
    if (len != 6 || memcmp(t, "<0x", 3) || t[5] != '>') return -1;
    int hi = tok_hexval(t[3]), lo = tok_hexval(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* Undo the byte-level mapping into out (capacity >= len); -1 if a char is
 * outside the alphabet or the text is not valid UTF-8. */
static long tok_unmap_byte_level(const char *t, size_t len, char *out) {
    const unsigned char *s = (const unsigned char *)t;
    size_t i = 0, o = 0;
    while (i < len) {
        int l = tok_utf8_len(s + i, len - i);
        if (!l) return -1;
        uint32_t cp = tok_utf8_cp(s + i, l);
        int b = tok_cp_to_byte(cp);
        if (b < 0) return -1;
        out[o++] = (char)b;
        i += (size_t)l;
    }
    return (long)o;
}

tl_status tok_vocab_set(tok_vocab *v, int32_t i, const char *text, size_t len, uint8_t attr) {
    if (i < 0 || i >= v->n) return tl_err(TL_ERR_FORMAT, "tokenizer: token id %d out of range", (int)i);
    if (len > TOK_MAX_TOKEN_BYTES)
        return tl_err(TL_ERR_FORMAT, "tokenizer: token %d is %zu bytes long (TOK_MAX_TOKEN_BYTES %d)", (int)i, len,
                      TOK_MAX_TOKEN_BYTES);
    tok_entry *e = &v->tok[i];
    e->attr = attr;
    tl_status st = tok_arena_add(v, text, len, &e->text_off);
    if (st) return st;
    e->text_len = (uint32_t)len;
    char small[256], *buf = len <= sizeof small ? small : malloc(len ? len : 1);
    if (!buf) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
    const char *piece = text;
    size_t plen = len;
    if (v->kind == TOK_KIND_BYTE_LEVEL) {
        long r = tok_unmap_byte_level(text, len, buf);
        if (r >= 0) {
            piece = buf;
            plen = (size_t)r;
        }
    } else {
        int b = tok_byte_token_value(text, len);
        if (b >= 0) {
            buf[0] = (char)b;
            piece = buf;
            plen = 1;
        } else {
            size_t o = 0;
            for (size_t k = 0; k < len; k++) {
                if (k + 2 < len && (unsigned char)text[k] == 0xE2 && (unsigned char)text[k + 1] == 0x96 &&
                    (unsigned char)text[k + 2] == 0x81) {
                    buf[o++] = ' ';
                    k += 2;
                } else
                    buf[o++] = text[k];
            }
            piece = buf;
            plen = o;
        }
    }
    /* the arena may move in tok_arena_add: text may point into it only if
     * the caller passed arena memory, which loaders never do */
    st = tok_arena_add(v, piece, plen, &e->piece_off);
    if (buf != small) free(buf);
    if (st) return st;
    e->piece_len = (uint32_t)plen;
    return TL_OK;
}

tl_status tok_vocab_index(tok_vocab *v) {
    tl_status st = tok_strmap_init(&v->text_map, (uint32_t)v->n);
    if (!st) st = tok_strmap_init(&v->bpe_map, (uint32_t)v->n);
    if (st) return st;
    for (int32_t i = 0; i < v->n; i++) {
        tok_entry *e = &v->tok[i];
        st = tok_strmap_put(&v->text_map, v->arena + e->text_off, e->text_len, i, false);
        if (st) return st;
    }
    /* BPE keys: ordinary tokens first so a control token whose text equals
     * an ordinary token's bytes never shadows it. */
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t i = 0; i < v->n; i++) {
            tok_entry *e = &v->tok[i];
            bool ordinary = e->attr != TOK_ATTR_CONTROL && e->attr != TOK_ATTR_USER &&
                            e->attr != TOK_ATTR_UNKNOWN;
            if (ordinary != (pass == 0)) continue;
            const char *k;
            size_t kl;
            if (v->kind == TOK_KIND_BYTE_LEVEL) {
                /* only tokens whose text is fully in the alphabet can be
                 * produced by byte-level BPE */
                char small[256], *buf = e->text_len <= sizeof small ? small : malloc(e->text_len);
                if (!buf) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
                long r = tok_unmap_byte_level(v->arena + e->text_off, e->text_len, buf);
                if (r > 0) st = tok_strmap_put(&v->bpe_map, buf, (size_t)r, i, false);
                if (buf != small) free(buf);
                if (st) return st;
                continue;
            }
            k = v->arena + e->text_off;
            kl = e->text_len;
            if (kl) st = tok_strmap_put(&v->bpe_map, k, kl, i, false);
            if (st) return st;
        }
    }
    for (int b = 0; b < 256; b++) {
        if (v->kind == TOK_KIND_BYTE_LEVEL) {
            char c = (char)b;
            v->byte_tok[b] = tok_strmap_get(&v->bpe_map, &c, 1);
        } else {
            char t[7];
            snprintf(t, sizeof t, "<0x%02X>", b);
            v->byte_tok[b] = tok_strmap_get(&v->text_map, t, 6);
        }
    }
    if (!v->merges.cap) return tok_pairmap_init(&v->merges, 1024);
    return TL_OK;
}

tl_status tok_vocab_add_merge(tok_vocab *v, const char *a, size_t alen, const char *b, size_t blen,
                              int32_t rank) {
    int32_t ia = tok_strmap_get(&v->text_map, a, alen);
    int32_t ib = tok_strmap_get(&v->text_map, b, blen);
    if (ia < 0 || ib < 0)
        return tl_err(TL_ERR_FORMAT, "tokenizer: merge %d ('%.*s' '%.*s') names an unknown token",
                      (int)rank, (int)(alen > 64 ? 64 : alen), a, (int)(blen > 64 ? 64 : blen), b);
    char small[512], *buf = alen + blen <= sizeof small ? small : malloc(alen + blen);
    if (!buf) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
    memcpy(buf, a, alen);
    memcpy(buf + alen, b, blen);
    int32_t ic = tok_strmap_get(&v->text_map, buf, alen + blen);
    if (buf != small) free(buf);
    if (ic < 0)
        return tl_err(TL_ERR_FORMAT, "tokenizer: merge %d ('%.*s' '%.*s') makes a token not in the vocabulary",
                      (int)rank, (int)(alen > 64 ? 64 : alen), a, (int)(blen > 64 ? 64 : blen), b);
    /* HF builds its merge map by inserting in file order: a repeated pair
     * keeps the last rank. */
    return tok_pairmap_put(&v->merges, tok_pair_key(ia, ib), rank, ic, true);
}

static tl_status tok_trie_node(tok_trie *t, int32_t *out) {
    if (t->n_nodes == t->cap_nodes) {
        int32_t nc = t->cap_nodes ? t->cap_nodes * 2 : 64;
        int32_t *nt = realloc(t->node_tok, sizeof(int32_t) * (size_t)nc);
        if (!nt) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
        t->node_tok = nt;
        t->cap_nodes = nc;
    }
    t->node_tok[t->n_nodes] = -1;
    *out = t->n_nodes++;
    return TL_OK;
}

tl_status tok_vocab_add_added(tok_vocab *v, int32_t id, uint8_t flags, const char *pat, size_t plen) {
    if (id < 0 || id >= v->n) return tl_err(TL_ERR_FORMAT, "tokenizer: added token id %d out of range", (int)id);
    tok_entry *e = &v->tok[id];
    if (!pat) {
        pat = v->arena + e->text_off;
        plen = e->text_len;
    }
    if (!plen) return TL_OK; /* an empty added token never matches */
    tok_trie *t = (flags & TOK_ADD_NORMALIZED) ? &v->trie_norm : &v->trie;
    tl_status st;
    if (!t->n_nodes) {
        int32_t root;
        if ((st = tok_pairmap_init(&t->edges, 256)) || (st = tok_trie_node(t, &root))) return st;
    }
    /* a token listed twice keeps its first entry */
    tok_added *na = realloc(v->added, sizeof *na * (size_t)(v->n_added + 1));
    if (!na) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
    v->added = na;
    const unsigned char *s = (const unsigned char *)pat;
    int32_t node = 0;
    for (size_t k = 0; k < plen; k++) {
        int32_t child;
        uint64_t key = ((uint64_t)(uint32_t)node << 8) | s[k];
        if (tok_pairmap_get(&t->edges, key, &child) < 0) {
            if ((st = tok_trie_node(t, &child))) return st;
            if ((st = tok_pairmap_put(&t->edges, key, 0, child, false))) return st;
        }
        node = child;
    }
    t->first[s[0]] = true;
    if (t->node_tok[node] >= 0) return TL_OK;
    t->node_tok[node] = v->n_added;
    v->added[v->n_added].id = id;
    v->added[v->n_added].flags = flags;
    v->n_added++;
    return TL_OK;
}

tl_status tok_vocab_add_norm(tok_vocab *v, tok_norm_kind kind, const char *s, size_t len,
                             const char *s2, size_t len2) {
    if (v->n_norm >= TOK_MAX_NORM) return tl_err(TL_ERR_UNSUPPORTED, "tokenizer: more than %d normalizers", TOK_MAX_NORM);
    tok_norm_op *op = &v->norm[v->n_norm];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    if (s) {
        op->str = malloc(len + 1);
        if (!op->str) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
        memcpy(op->str, s, len);
        op->str[len] = 0;
        op->len = len;
    }
    if (s2) {
        op->str2 = malloc(len2 + 1);
        if (!op->str2) {
            free(op->str);
            return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
        }
        memcpy(op->str2, s2, len2);
        op->str2[len2] = 0;
        op->len2 = len2;
    }
    if (kind == TOK_NORM_REPLACE && !op->len) {
        free(op->str);
        free(op->str2);
        return tl_err(TL_ERR_UNSUPPORTED, "tokenizer: Replace normalizer with an empty pattern");
    }
    v->n_norm++;
    return TL_OK;
}

/* Unicode White_Space, which Oniguruma's \s (HF's regex engine) matches. */
#define TOK_WS_CLASS "\\x{9}-\\x{d}\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"

static tl_status tok_compile(tok_vocab *v, const char *pat, size_t len, tok_split_behavior b, bool invert) {
    if (v->n_pre >= TOK_MAX_PRE) return tl_err(TL_ERR_UNSUPPORTED, "tokenizer: more than %d pre-tokenizer splits", TOK_MAX_PRE);
    int err;
    PCRE2_SIZE eoff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, len, PCRE2_UTF | PCRE2_UCP,
                                   &err, &eoff, NULL);
    if (!re) {
        char msg[160];
        pcre2_get_error_message(err, (PCRE2_UCHAR *)msg, sizeof msg);
        return tl_err(TL_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer regex does not compile at offset %zu: %s",
                      (size_t)eoff, msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
    v->pre[v->n_pre].re = re;
    v->pre[v->n_pre].behavior = b;
    v->pre[v->n_pre].invert = invert;
    v->n_pre++;
    return TL_OK;
}

tl_status tok_vocab_add_split(tok_vocab *v, const char *pattern, size_t len, tok_split_behavior b, bool invert) {
    /* rewrite \s and \S to the White_Space set (see TOK_WS_CLASS) */
    size_t cap = len * 8 + 64 + len * sizeof TOK_WS_CLASS;
    char *o = malloc(cap);
    if (!o) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
    size_t n = 0;
    bool in_class = false;
    for (size_t i = 0; i < len; i++) {
        char c = pattern[i];
        if (c == '\\' && i + 1 < len) {
            char d = pattern[i + 1];
            const char *rep = NULL;
            if (d == 's') rep = in_class ? TOK_WS_CLASS : "[" TOK_WS_CLASS "]";
            else if (d == 'S') {
                if (in_class) {
                    free(o);
                    return tl_err(TL_ERR_UNSUPPORTED, "tokenizer: \\S inside a character class in a pre-tokenizer regex");
                }
                rep = "[^" TOK_WS_CLASS "]";
            }
            if (rep) {
                size_t rl = strlen(rep);
                memcpy(o + n, rep, rl);
                n += rl;
            } else {
                o[n++] = c;
                o[n++] = d;
            }
            i++;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = true;
            o[n++] = c;
            /* a ']' right after '[' or '[^' is a literal */
            if (i + 1 < len && pattern[i + 1] == '^') o[n++] = pattern[++i];
            if (i + 1 < len && pattern[i + 1] == ']') o[n++] = pattern[++i];
            continue;
        }
        if (c == ']' && in_class) in_class = false;
        o[n++] = c;
    }
    tl_status st = tok_compile(v, o, n, b, invert);
    free(o);
    return st;
}

tl_status tok_vocab_add_split_literal(tok_vocab *v, const char *lit, size_t len, tok_split_behavior b, bool invert) {
    char *o = malloc(len * 4 + 8);
    if (!o) return tl_err(TL_ERR_NOMEM, "tokenizer: out of memory");
    size_t n = 0;
    memcpy(o + n, "\\Q", 2);
    n += 2;
    for (size_t i = 0; i < len; i++) {
        /* \E inside a literal would end the quote: split it */
        if (lit[i] == '\\' && i + 1 < len && lit[i + 1] == 'E') {
            memcpy(o + n, "\\E\\\\\\Q", 7);
            n += 7;
            continue;
        }
        o[n++] = lit[i];
    }
    memcpy(o + n, "\\E", 2);
    n += 2;
    tl_status st = tok_compile(v, o, n, b, invert);
    free(o);
    return st;
}

/* Regexes of the named pre-tokenizers (public pattern facts). */
#define TOK_RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define TOK_RE_LLAMA3                                                                       \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define TOK_RE_QWEN2                                                                      \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static bool tok_name_is(const char *name, size_t len, const char *s) {
    return strlen(s) == len && !memcmp(name, s, len);
}

static bool tok_name_in(const char *name, size_t len, const char *const *list) {
    for (; *list; list++)
        if (tok_name_is(name, len, *list)) return true;
    return false;
}

/* DeepSeek-V3's tokenizer.json: three Isolated splits, then ByteLevel
 * without a regex (public pattern facts). */
#define TOK_RE_DSV3_CJK "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
#define TOK_RE_DSV3                                                                              \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|" \
    " ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

tl_status tok_pre_from_name(tok_vocab *v, const char *name, size_t len) {
    static const char *const gpt2_names[] = {"default", "gpt2", "gpt-2", "phi-2", "jina-es", "jina-de", NULL};
    static const char *const llama3_names[] = {"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1",
                                               "pixtral", "midm-2.0", "lfm2", NULL};
    static const char *const qwen2_names[] = {"qwen2", "deepseek-r1-qwen", "megrez", NULL};
    snprintf(v->pre_name, sizeof v->pre_name, "%.*s", (int)(len < 31 ? len : 31), name);
    tl_status st;
    if (!len || tok_name_in(name, len, gpt2_names))
        return tok_vocab_add_split(v, TOK_RE_GPT2, strlen(TOK_RE_GPT2), TOK_SPLIT_ISOLATED, false);
    if (tok_name_is(name, len, "smollm")) {
        /* HF Digits(individual_digits=true): every \p{N} char on its own */
        if ((st = tok_vocab_add_split(v, "\\p{N}", 5, TOK_SPLIT_ISOLATED, false))) return st;
        return tok_vocab_add_split(v, TOK_RE_GPT2, strlen(TOK_RE_GPT2), TOK_SPLIT_ISOLATED, false);
    }
    if (tok_name_in(name, len, llama3_names)) {
        v->ignore_merges = true;
        return tok_vocab_add_split(v, TOK_RE_LLAMA3, strlen(TOK_RE_LLAMA3), TOK_SPLIT_ISOLATED, false);
    }
    if (tok_name_in(name, len, qwen2_names)) {
        /* Qwen2/3 tokenizer.json normalize with NFC */
        if ((st = tok_vocab_add_norm(v, TOK_NORM_NFC, NULL, 0, NULL, 0))) return st;
        return tok_vocab_add_split(v, TOK_RE_QWEN2, strlen(TOK_RE_QWEN2), TOK_SPLIT_ISOLATED, false);
    }
    if (tok_name_is(name, len, "deepseek-v3")) {
        if ((st = tok_vocab_add_split(v, "\\p{N}{1,3}", 10, TOK_SPLIT_ISOLATED, false))) return st;
        if ((st = tok_vocab_add_split(v, TOK_RE_DSV3_CJK, strlen(TOK_RE_DSV3_CJK), TOK_SPLIT_ISOLATED, false)))
            return st;
        return tok_vocab_add_split(v, TOK_RE_DSV3, strlen(TOK_RE_DSV3), TOK_SPLIT_ISOLATED, false);
    }
    return tl_err(TL_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer '%.*s' is not supported "
                  "(supported: gpt2, smollm, llama-bpe, qwen2, deepseek-v3 and their aliases)",
                  (int)(len > 64 ? 64 : len), name);
}

void tok_vocab_finish(tok_vocab *v, const int32_t *eog_ids, int n_eog_ids) {
    static const char *const eog_texts[] = {
        "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>", "<|endoftext|>", "<|end|>",
        "<|end_of_text|>", "</s>", "<eos>", "<|return|>", "<|call|>", "<｜end▁of▁sentence｜>",
        "<|EOT|>", "<EOT>", "<|END_OF_TURN_TOKEN|>"};
    for (int k = 0; k < n_eog_ids; k++)
        if (eog_ids[k] >= 0 && eog_ids[k] < v->n) v->eog[eog_ids[k]] = 1;
    if (v->eos >= 0 && v->eos < v->n) v->eog[v->eos] = 1;
    for (size_t k = 0; k < sizeof eog_texts / sizeof eog_texts[0]; k++) {
        int32_t id = tok_strmap_get(&v->text_map, eog_texts[k], strlen(eog_texts[k]));
        if (id >= 0 && (v->tok[id].attr == TOK_ATTR_CONTROL || v->tok[id].attr == TOK_ATTR_USER))
            v->eog[id] = 1;
    }
}

void tok_free(tok_vocab *v) {
    if (!v) return;
    free(v->tok);
    free(v->arena);
    free(v->eog);
    free(v->added);
    free(v->bpe_self);
    tok_strmap_free(&v->bpe_map);
    tok_strmap_free(&v->text_map);
    tok_pairmap_free(&v->merges);
    tok_pairmap_free(&v->trie.edges);
    free(v->trie.node_tok);
    tok_pairmap_free(&v->trie_norm.edges);
    free(v->trie_norm.node_tok);
    for (int i = 0; i < v->n_norm; i++) {
        free(v->norm[i].str);
        free(v->norm[i].str2);
    }
    for (int i = 0; i < v->n_pre; i++) pcre2_code_free(v->pre[i].re);
    free(v);
}

int32_t tok_n_vocab(const tok_vocab *v) { return v->n; }
int32_t tok_bos(const tok_vocab *v) { return v->bos; }
int32_t tok_eos(const tok_vocab *v) { return v->eos; }
bool tok_add_bos(const tok_vocab *v) { return v->add_bos && v->bos >= 0; }
bool tok_add_eos(const tok_vocab *v) { return v->add_eos && v->eos >= 0; }
bool tok_is_eog(const tok_vocab *v, int32_t id) { return id >= 0 && id < v->n && v->eog[id]; }
bool tok_is_control(const tok_vocab *v, int32_t id) {
    return id >= 0 && id < v->n && v->tok[id].attr == TOK_ATTR_CONTROL;
}
const char *tok_kind_name(const tok_vocab *v) { return v->name; }

int32_t tok_find(const tok_vocab *v, const char *text, size_t len) {
    return tok_strmap_get(&v->text_map, text, len);
}

const char *tok_piece(const tok_vocab *v, int32_t id, size_t *len) {
    if (!v || id < 0 || id >= v->n) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = v->tok[id].piece_len;
    return v->arena + v->tok[id].piece_off;
}

const char *tok_text(const tok_vocab *v, int32_t id, size_t *len) {
    if (!v || id < 0 || id >= v->n) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = v->tok[id].text_len;
    return v->arena + v->tok[id].text_off;
}
