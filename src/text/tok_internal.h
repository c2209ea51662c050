/* text/tok_internal: the tok_vocab layout shared by the tokenizer's files
 * (loaders, encoder, decoder). Not part of any public interface.
 *
 * Two hash maps carry the hot path: `bpe_map` (a unit or merged symbol's
 * bytes -> id; for byte-level vocabs the key is the RAW bytes, the GPT-2
 * byte->char mapping undone at load, so encoding never maps bytes to chars)
 * and `merges` ((left id, right id) -> rank, result id). */
#ifndef TL_TEXT_TOK_INTERNAL_H
#define TL_TEXT_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "text/tokenizer.h"

/* Token attributes: the GGUF tokenizer.ggml.token_type values. */
enum {
    TOK_ATTR_NORMAL = 1,
    TOK_ATTR_UNKNOWN = 2,
    TOK_ATTR_CONTROL = 3,
    TOK_ATTR_USER = 4,
    TOK_ATTR_UNUSED = 5,
    TOK_ATTR_BYTE = 6
};

/* Added-token flags (HF added_tokens). */
enum {
    TOK_ADD_SPECIAL = 1,
    TOK_ADD_LSTRIP = 2,
    TOK_ADD_RSTRIP = 4,
    TOK_ADD_SINGLE_WORD = 8,
    TOK_ADD_NORMALIZED = 16
};

typedef enum tok_kind { TOK_KIND_BYTE_LEVEL = 1, TOK_KIND_SPM = 2 } tok_kind;

/* --- string -> int32 map (keys copied into its own arena) --------------- */
typedef struct tok_str_ent {
    uint32_t hash;
    int32_t val;  /* -1 = empty */
    uint32_t off; /* key bytes in arena */
    uint32_t len;
} tok_str_ent;

typedef struct tok_strmap {
    tok_str_ent *ent; /* [cap] */
    char *arena;
    size_t arena_len, arena_cap;
    uint32_t cap, count;  /* cap: power of two */
} tok_strmap;

tl_status tok_strmap_init(tok_strmap *m, uint32_t expect);
void tok_strmap_free(tok_strmap *m);
/* Insert; if the key exists its value is kept (first wins) unless replace. */
tl_status tok_strmap_put(tok_strmap *m, const char *k, size_t len, int32_t val, bool replace);
int32_t tok_strmap_get(const tok_strmap *m, const char *k, size_t len); /* -1 if absent */
/* The map's hash (FNV-1a, then a mix so the low bits spread), in steps so
 * every prefix of one key can be looked up in O(1) each. */
#define TOK_HASH_INIT 2166136261u
static inline uint32_t tok_hash_step(uint32_t h, unsigned char b) { return (h ^ b) * 16777619u; }
static inline uint32_t tok_hash_final(uint32_t h) {
    h ^= h >> 15;
    h *= 0x2c1b3c6dU;
    h ^= h >> 12;
    return h;
}
/* Lookup with the key's tok_hash_final hash already known. */
int32_t tok_strmap_get_h(const tok_strmap *m, const char *k, size_t len, uint32_t h);

/* --- (u64 key) -> (rank, id) map ----------------------------------------- */
/* One 16-byte entry per slot so a probe touches one cache line: the merge
 * lookups are the encoder's hot loop. */
typedef struct tok_pair_ent {
    uint64_t key; /* UINT64_MAX = empty */
    int32_t rank;
    int32_t id;
} tok_pair_ent;

typedef struct tok_pairmap {
    tok_pair_ent *ent; /* [cap] */
    uint32_t cap, count;
} tok_pairmap;

tl_status tok_pairmap_init(tok_pairmap *m, uint32_t expect);
void tok_pairmap_free(tok_pairmap *m);
tl_status tok_pairmap_put(tok_pairmap *m, uint64_t k, int32_t rank, int32_t id, bool replace);
static inline uint64_t tok_pair_key(int32_t a, int32_t b) {
    return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
}
static inline uint32_t tok_mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (uint32_t)x;
}
/* Returns the rank and writes the id, or -1 if absent. */
static inline int32_t tok_pairmap_get(const tok_pairmap *m, uint64_t k, int32_t *id) {
    uint32_t mask = m->cap - 1, i = tok_mix64(k) & mask;
    const tok_pair_ent *e = m->ent;
    for (;;) {
        uint64_t s = e[i].key;
        if (s == k) {
            *id = e[i].id;
            return e[i].rank;
        }
        if (s == UINT64_MAX) return -1;
        i = (i + 1) & mask;
    }
}

/* --- added tokens matched whole in the text ------------------------------ */
typedef struct tok_trie {
    tok_pairmap edges;   /* (node << 8 | byte) -> child node (in .id) */
    int32_t *node_tok;   /* [n_nodes] added-token index ending here, or -1 */
    int32_t n_nodes, cap_nodes;
    bool first[256];     /* bytes that can start a token */
} tok_trie;

typedef struct tok_added {
    int32_t id;
    uint8_t flags;       /* TOK_ADD_* */
} tok_added;

/* --- normalizer: ops applied in order to each text segment ---------------- */
typedef enum tok_norm_kind {
    TOK_NORM_NFC = 1,
    TOK_NORM_UNICODE,       /* NFD / NFKC / NFKD: utf8proc options in uflags */
    TOK_NORM_PREPEND,       /* HF Prepend: prepend str if segment non-empty */
    TOK_NORM_REPLACE,       /* replace every occurrence of str with str2 */
    TOK_NORM_PREFIX_SPACE,  /* ByteLevel add_prefix_space: " " unless starts with ' ' */
    TOK_NORM_PREPEND_IF_NOT,      /* Metaspace "always": str unless already there */
    TOK_NORM_PREPEND_FIRST_IF_NOT /* Metaspace "first": same, first segment only */
} tok_norm_kind;

typedef struct tok_norm_op {
    tok_norm_kind kind;
    int uflags;
    char *str, *str2;
    size_t len, len2;
} tok_norm_op;

/* --- pre-tokenizer: splits applied in order (HF Sequence of Splits) ------- */
typedef enum tok_split_behavior {
    TOK_SPLIT_ISOLATED = 0,
    TOK_SPLIT_REMOVED,
    TOK_SPLIT_MERGED_PREV,
    TOK_SPLIT_MERGED_NEXT,
    TOK_SPLIT_CONTIGUOUS
} tok_split_behavior;

typedef struct tok_pre_step {
    pcre2_code *re;
    tok_split_behavior behavior;
    bool invert;
} tok_pre_step;

#define TOK_MAX_NORM 8
#define TOK_MAX_PRE 8

typedef struct tok_entry {
    uint32_t text_off, text_len;   /* as stored in the vocabulary */
    uint32_t piece_off, piece_len; /* output bytes */
    uint8_t attr;                  /* TOK_ATTR_* */
} tok_entry;

struct tok_vocab {
    tok_kind kind;
    char name[24], pre_name[32];
    int32_t n;
    tok_entry *tok;      /* [n] */
    char *arena;         /* texts and pieces */
    size_t arena_len, arena_cap;

    tok_strmap bpe_map;  /* BPE unit/symbol bytes -> id */
    tok_strmap text_map; /* stored text -> id (tok_find, loaders) */
    tok_pairmap merges;  /* (a, b) -> rank, merged id */
    int32_t byte_tok[256]; /* byte-level: single-byte token; spm: <0xNN>; -1 none */
    /* SentencePiece: a word may be cut before a ▁
     * whose left neighbour char is neither ▁ nor in spm_nocut (the last
     * chars of every merge (a, b) with b starting ▁ and a not all ▁), since
     * no merge can then join across it; exact, and words become short. */
    bool spm_cut;
    uint32_t spm_nocut[16];
    int n_spm_nocut;
    uint8_t *bpe_self;   /* [n] 1 if BPE of the token's own bytes gives just it
                          * (precomputed: a whole word found in bpe_map with
                          * this flag needs no merging, exactly) */
    bool byte_fallback, fuse_unk, ignore_merges;
    int32_t unk_id;

    tok_added *added;    /* [n_added] */
    int32_t n_added;
    tok_trie trie;       /* added tokens matched in the raw text */
    tok_trie trie_norm;  /* "normalized" added tokens, matched after the normalizer */

    tok_norm_op norm[TOK_MAX_NORM];
    int n_norm;
    tok_pre_step pre[TOK_MAX_PRE];
    int n_pre;

    int32_t bos, eos;
    bool add_bos, add_eos;
    /* decoder: 1 drops the stream's first ' ' (HF Strip, llama.cpp SPM);
     * 2 drops every ' ' from ▁ of the first token (HF Metaspace decoder) */
    int strip_leading_space;
    uint8_t *eog;        /* [n] 1 if end-of-generation */
};

/* vocab building (tok_vocab.c) */
tl_status tok_vocab_alloc(tok_kind kind, int32_t n, tok_vocab **out);
/* Set token i's stored text; computes its piece from kind and attr. */
tl_status tok_vocab_set(tok_vocab *v, int32_t i, const char *text, size_t len, uint8_t attr);
/* After all tokens are set: builds bpe_map, text_map, byte tables. */
tl_status tok_vocab_index(tok_vocab *v);
/* Merge "a" + "b" (stored texts) with rank; TL_ERR_FORMAT if a, b or a+b
 * is not a token. */
tl_status tok_vocab_add_merge(tok_vocab *v, const char *a, size_t alen, const char *b,
                              size_t blen, int32_t rank);
/* Added token id matched whole: pattern pat (NULL: the token's text).
 * TOK_ADD_NORMALIZED tokens go to the trie searched after normalization. */
tl_status tok_vocab_add_added(tok_vocab *v, int32_t id, uint8_t flags, const char *pat, size_t plen);
/* Run the vocab's normalizer on s (tok_encode.c); *out is malloc'd. */
tl_status tok_normalize_text(const tok_vocab *v, const char *s, size_t len, char **out, size_t *olen);
tl_status tok_vocab_add_norm(tok_vocab *v, tok_norm_kind kind, const char *s, size_t len,
                             const char *s2, size_t len2);
/* Regex in HF/Oniguruma dialect; \s and \S are rewritten to Unicode's
 * White_Space set (PCRE2's UCP \s differs: it lacks U+0085). */
tl_status tok_vocab_add_split(tok_vocab *v, const char *pattern, size_t len,
                              tok_split_behavior b, bool invert);
tl_status tok_vocab_add_split_literal(tok_vocab *v, const char *lit, size_t len,
                                      tok_split_behavior b, bool invert);
/* After merges are complete: fills bpe_self. */
tl_status tok_vocab_precompute(tok_vocab *v);
/* Marks eog from ids and well-known end-of-turn texts; called last. */
void tok_vocab_finish(tok_vocab *v, const int32_t *eog_ids, int n_eog_ids);

/* Named pre-tokenizers (GGUF tokenizer.ggml.pre); TL_ERR_UNSUPPORTED if unknown. */
tl_status tok_pre_from_name(tok_vocab *v, const char *name, size_t len);

/* GPT-2 byte <-> char mapping (tok_vocab.c). */
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp); /* -1 if cp is not in the alphabet */

/* bpe (tok_bpe.c): encode one word (bytes of the bpe key form); appends
 * ids via the sink. */
typedef struct tok_sink {
    int32_t *out;
    int32_t cap, n;
} tok_sink;
static inline void tok_sink_push(tok_sink *s, int32_t id) {
    if (s->n < s->cap) s->out[s->n] = id;
    s->n++;
}
typedef struct tok_bpe_work {
    struct tok_sym *sym;
    uint64_t *heap;
    size_t sym_cap, heap_cap;
} tok_bpe_work;
tl_status tok_bpe_word(const tok_vocab *v, const char *w, size_t len, tok_bpe_work *wk,
                       tok_sink *sink);
void tok_bpe_work_free(tok_bpe_work *wk);

/* utf8 helpers */
/* Length of a valid UTF-8 sequence at s (n bytes available), 0 if invalid
 * or truncated. */
static inline int tok_utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len;
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
        return 0;
    if (n < (size_t)len) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (int i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return len;
}
static inline int tok_utf8_put(uint32_t cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F)); return 4;
}
static inline uint32_t tok_utf8_cp(const unsigned char *s, int len) {
    switch (len) {
    case 1: return s[0];
    case 2: return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    case 3: return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    default:
        return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
               ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    }
}

#endif
