/* tests/test_tokenizer: tokenizer unit tests that need no Python.
 *
 * - streaming detokenization never emits part of a UTF-8 character when a
 *   character's bytes arrive as separate byte tokens, and replaces invalid
 *   sequences per the Unicode standard's "maximal subpart" practice (the
 *   expected outputs are the standard's own examples, not our output);
 * - encode/decode is lossless on arbitrary bytes (invalid UTF-8 included)
 *   for byte-level BPE;
 * - cap-too-small handling of tok_encode and tok_detok_push;
 * - malformed GGUF tokenizer metadata gives TL_ERR_FORMAT (or
 *   UNSUPPORTED / NOT_FOUND), never a crash; run under ASan in CI.
 * Synthetic vocabularies are written with the GGUF writer; the byte-level
 * alphabet is rebuilt here from its published definition (GPT-2's
 * bytes_to_unicode), independently of src/text. The SmolLM2 model is used
 * too when models/ has it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/gguf.h"
#include "test_util.h"
#include "text/tokenizer.h"

/* GPT-2 bytes_to_unicode: printable bytes keep their code point, the rest
 * get 256, 257, ... in byte order. */
static unsigned t_byte_cp(unsigned b) {
    unsigned n = 0;
    for (unsigned x = 0; x < 256; x++) {
        bool self = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
        if (x == b) return self ? x : 256 + n;
        if (!self) n++;
    }
    return 0;
}

static int t_put(unsigned cp, char *o) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* Strict UTF-8 validity (RFC 3629). */
static bool t_valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t l;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) l = 2;
        else if (c >= 0xE0 && c <= 0xEF) { l = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { l = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
        else return false;
        if (i + l > n || s[i + 1] < lo || s[i + 1] > hi) return false;
        for (size_t k = 2; k < l; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return false;
        i += l;
    }
    return true;
}

#define NT_MAX 300
static char t_tok_store[NT_MAX][16];
static const char *t_toks[NT_MAX];
static int32_t t_types[NT_MAX];
static int t_ntok;

static void t_add(const char *s, int32_t type) {
    snprintf(t_tok_store[t_ntok], sizeof t_tok_store[0], "%s", s);
    t_toks[t_ntok] = t_tok_store[t_ntok];
    t_types[t_ntok] = type;
    t_ntok++;
}

/* 256 byte tokens, "he" "ll" "hell" "hello" "Ġw", then "<|end|>" (control). */
static void t_build_tokens(void) {
    t_ntok = 0;
    for (unsigned b = 0; b < 256; b++) {
        char s[4] = {0};
        t_put(t_byte_cp(b), s);
        t_add(s, 1);
    }
    t_add("he", 1);
    t_add("ll", 1);
    t_add("hell", 1);
    t_add("hello", 1);
    char gw[4] = {0};
    t_put(t_byte_cp(' '), gw);
    strcat(gw, "w");
    t_add(gw, 1);
    t_add("<|end|>", 3);
}

typedef struct t_opts {
    const char *model, *pre;
    int n_types;            /* entries of token_type written (-1: t_ntok) */
    const char *const *merges;
    int n_merges;
    int64_t bos;            /* -1: not written */
    bool tokens_as_ints;
} t_opts;

static const char *const t_good_merges[] = {"h e", "l l", "he ll", "hell o", "\xC4\xA0 w"}; /* \xC4\xA0 = "Ġ" */

static tl_status t_load(const t_opts *o, tok_vocab **v, const char *path) {
    *v = NULL;
    gguf_writer *w;
    if (gguf_writer_init(&w)) return TL_ERR_NOMEM;
    if (o->model) gguf_writer_set_str(w, "tokenizer.ggml.model", o->model);
    if (o->pre) gguf_writer_set_str(w, "tokenizer.ggml.pre", o->pre);
    if (o->tokens_as_ints) gguf_writer_set_arr_i32(w, "tokenizer.ggml.tokens", t_types, (uint64_t)t_ntok);
    else gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", t_toks, (uint64_t)t_ntok);
    gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", t_types, (uint64_t)(o->n_types < 0 ? t_ntok : o->n_types));
    if (o->merges) gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", o->merges, (uint64_t)o->n_merges);
    if (o->bos >= 0) gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)o->bos);
    gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", o->bos >= 0);
    tl_status st = gguf_writer_write(w, path);
    gguf_writer_free(w);
    if (st) return st;
    gguf_file *f;
    if ((st = gguf_open(path, &f))) return st;
    st = tok_load_gguf(f, v);
    gguf_close(f);
    return st;
}

static t_opts t_default(void) {
    t_opts o = {"gpt2", "gpt2", -1, t_good_merges, 5, -1, false};
    return o;
}

static int32_t t_enc(const tok_vocab *v, const char *s, size_t n, bool parse, int32_t *ids, int32_t cap) {
    int32_t k = -1;
    tl_status st = tok_encode(v, s, n, false, parse, ids, cap, &k);
    return st ? -1 : k;
}

/* Decode through the streaming detok, checking every chunk is valid UTF-8
 * and whole; returns the concatenation. */
static size_t t_stream(const tok_vocab *v, const int32_t *ids, int32_t n, char *out, size_t cap, int *bad_chunks) {
    tok_detok *d;
    if (tok_detok_init(v, &d)) return 0;
    tok_detok_set_render_control(d, true);
    size_t o = 0, k;
    char buf[256];
    for (int32_t i = 0; i < n; i++) {
        if (tok_detok_push(d, ids[i], buf, sizeof buf, &k)) break;
        if (!t_valid_utf8((unsigned char *)buf, k) || buf[k] != 0) (*bad_chunks)++;
        if (o + k < cap) memcpy(out + o, buf, k), o += k;
    }
    if (!tok_detok_flush(d, buf, sizeof buf, &k) && o + k < cap) memcpy(out + o, buf, k), o += k;
    tok_detok_free(d);
    return o;
}

static void test_synthetic(const char *path) {
    t_build_tokens();
    tok_vocab *v;
    t_opts o = t_default();
    tl_status st = t_load(&o, &v, path);
    CHECK(st == TL_OK, "load synthetic vocab: %s", tl_last_error());
    if (st) return;
    int32_t ids[64], id_hello = 259, id_end = 261;
    /* "hello" merges all the way (h e -> he, l l -> ll, he ll -> hell, hell o -> hello) */
    int32_t n = t_enc(v, "hello", 5, true, ids, 64);
    CHECK(n == 1 && ids[0] == id_hello, "hello -> %d tokens, first %d", n, n > 0 ? ids[0] : -1);
    /* the GPT-2 regex keeps " world" together: Ġw (token 260) o r l d */
    n = t_enc(v, "hello world", 11, true, ids, 64);
    CHECK(n == 6 && ids[0] == id_hello && ids[1] == 260, "hello world: %d tokens, %d %d", n, ids[0], ids[1]);
    /* control token text: whole with parse_special, bytes without */
    n = t_enc(v, "a<|end|>b", 9, true, ids, 64);
    CHECK(n == 3 && ids[1] == id_end, "parse_special: %d tokens", n);
    n = t_enc(v, "a<|end|>b", 9, false, ids, 64);
    bool has_end = false;
    for (int i = 0; i < n; i++) has_end |= ids[i] == id_end;
    CHECK(n > 3 && !has_end, "no parse_special: %d tokens", n);
    CHECK(tok_is_control(v, id_end) && tok_is_eog(v, id_end), "<|end|> is control and end of generation");
    CHECK(tok_bos(v) == -1 && !tok_add_bos(v), "no bos in metadata -> none");

    /* cap too small: TL_ERR_INVALID and the needed count */
    int32_t need = -1;
    st = tok_encode(v, "hello world", 11, false, true, ids, 1, &need);
    CHECK(st == TL_ERR_INVALID && need == 6, "cap 1: status %d need %d", (int)st, need);
    st = tok_encode(v, "hello world", 11, false, true, NULL, 0, &need);
    CHECK(st == TL_ERR_INVALID && need == 6, "cap 0: status %d need %d", (int)st, need);
    st = tok_encode(v, "hello world", 11, false, true, ids, 6, &need);
    CHECK(st == TL_OK && need == 6, "exact cap: status %d", (int)st);

    /* lossless on random bytes, invalid UTF-8 included */
    unsigned seed = 12345;
    int lossy = 0, bad_chunks = 0;
    for (int trial = 0; trial < 300; trial++) {
        char text[48], back[600];
        size_t len = (size_t)(trial % 40);
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            text[i] = (char)(seed >> 16);
        }
        int32_t big[64];
        n = t_enc(v, text, len, true, big, 64);
        size_t pos = 0;
        for (int32_t i = 0; i < n; i++) {
            size_t pl;
            const char *p = tok_piece(v, big[i], &pl);
            if (p && pos + pl <= sizeof back) memcpy(back + pos, p, pl);
            pos += pl;
        }
        if (n < 0 || pos != len || memcmp(back, text, len)) lossy++;
        /* streamed: only valid, whole characters per chunk */
        t_stream(v, big, n, back, sizeof back, &bad_chunks);
    }
    CHECK(lossy == 0, "%d of 300 random byte strings did not survive encode + pieces", lossy);
    CHECK(bad_chunks == 0, "%d detok chunks were not whole valid UTF-8", bad_chunks);

    /* a 4-byte character arriving as 4 byte tokens: nothing until the last */
    const char *emoji = "\xF0\x9F\x98\x80";
    tok_detok *d;
    tok_detok_init(v, &d);
    char buf[32];
    size_t k;
    int emitted_early = 0;
    for (int i = 0; i < 4; i++) {
        int32_t bid;
        n = t_enc(v, emoji + i, 1, true, &bid, 1);
        CHECK(n == 1, "single byte -> one token");
        st = tok_detok_push(d, bid, buf, sizeof buf, &k);
        CHECK(st == TL_OK, "push byte %d", i);
        if (i < 3) emitted_early += (int)k;
        else CHECK(k == 4 && !memcmp(buf, emoji, 4) && buf[4] == 0, "last byte completes the character (%zu bytes)", k);
    }
    CHECK(emitted_early == 0, "%d bytes emitted before the character was complete", emitted_early);
    /* Unicode 3.9 (Table 3-8 practice): E2 82 then 'A' -> U+FFFD 'A';
     * F0 80 -> U+FFFD U+FFFD; a pending lead byte at flush -> U+FFFD */
    struct { const char *in; const char *out; } cases[] = {
        {"\xE2\x82" "A", "\xEF\xBF\xBD" "A"},
        {"\xF0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xE2", "\xEF\xBF\xBD"},
        {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"a\xE2\x82\xAC", "a\xE2\x82\xAC"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tok_detok_reset(d);
        char got[64];
        size_t gl = 0;
        for (size_t i = 0; i < strlen(cases[c].in); i++) {
            int32_t bid;
            t_enc(v, cases[c].in + i, 1, true, &bid, 1);
            tok_detok_push(d, bid, got + gl, sizeof got - gl, &k);
            gl += k;
        }
        tok_detok_flush(d, got + gl, sizeof got - gl, &k);
        gl += k;
        CHECK(gl == strlen(cases[c].out) && !memcmp(got, cases[c].out, gl), "replacement case %zu (%zu bytes)", c, gl);
    }
    /* detok cap too small: error, needed size, id not consumed */
    tok_detok_reset(d);
    st = tok_detok_push(d, id_hello, buf, 2, &k);
    CHECK(st == TL_ERR_INVALID && k == 5, "detok cap 2: status %d need %zu", (int)st, k);
    st = tok_detok_push(d, id_hello, buf, sizeof buf, &k);
    CHECK(st == TL_OK && k == 5 && !strcmp(buf, "hello"), "detok retry: %zu", k);
    st = tok_detok_push(d, 100000, buf, sizeof buf, &k);
    CHECK(st == TL_ERR_INVALID, "detok bad id");
    /* control tokens: skipped by default, text when rendered */
    tok_detok_reset(d);
    st = tok_detok_push(d, id_end, buf, sizeof buf, &k);
    CHECK(st == TL_OK && k == 0, "control skipped by default");
    tok_detok_set_render_control(d, true);
    st = tok_detok_push(d, id_end, buf, sizeof buf, &k);
    CHECK(st == TL_OK && k == 7 && !strcmp(buf, "<|end|>"), "control rendered");
    tok_detok_free(d);
    size_t pl;
    CHECK(tok_piece(v, -1, &pl) == NULL && tok_piece(v, 262, &pl) == NULL, "piece out of range is NULL");
    tok_free(v);
}

static void test_malformed(const char *path) {
    struct {
        const char *what;
        t_opts o;
        tl_status want;
    } cases[8];
    int nc = 0;
    static const char *const unknown[] = {"h e", "q zz"};
    static const char *const nores[] = {"h e", "e h"};
    static const char *const nospace[] = {"he"};
    t_opts o;
    o = t_default(); o.merges = unknown; o.n_merges = 2;
    cases[nc].what = "merge naming an unknown token", cases[nc].o = o, cases[nc++].want = TL_ERR_FORMAT;
    o = t_default(); o.merges = nores; o.n_merges = 2;
    cases[nc].what = "merge making a token not in the vocab", cases[nc].o = o, cases[nc++].want = TL_ERR_FORMAT;
    o = t_default(); o.merges = nospace; o.n_merges = 1;
    cases[nc].what = "merge without a space", cases[nc].o = o, cases[nc++].want = TL_ERR_FORMAT;
    o = t_default(); o.n_types = 10;
    cases[nc].what = "token_type count mismatch", cases[nc].o = o, cases[nc++].want = TL_ERR_FORMAT;
    o = t_default(); o.bos = 100000;
    cases[nc].what = "bos id out of range", cases[nc].o = o, cases[nc++].want = TL_ERR_FORMAT;
    o = t_default(); o.tokens_as_ints = true;
    cases[nc].what = "tokens as an int array", cases[nc].o = o, cases[nc++].want = TL_ERR_FORMAT;
    o = t_default(); o.pre = "no-such-pre";
    cases[nc].what = "unknown pre-tokenizer", cases[nc].o = o, cases[nc++].want = TL_ERR_UNSUPPORTED;
    o = t_default(); o.model = "bert";
    cases[nc].what = "unknown model", cases[nc].o = o, cases[nc++].want = TL_ERR_UNSUPPORTED;
    for (int i = 0; i < nc; i++) {
        t_build_tokens();
        tok_vocab *v = NULL;
        tl_status st = t_load(&cases[i].o, &v, path);
        CHECK(st == cases[i].want && v == NULL, "%s: status %d (want %d): %s", cases[i].what, (int)st,
              (int)cases[i].want, tl_last_error());
        tok_free(v);
    }
    /* token_type out of range */
    t_build_tokens();
    t_types[5] = 9;
    tok_vocab *v = NULL;
    t_opts od = t_default();
    tl_status st = t_load(&od, &v, path);
    CHECK(st == TL_ERR_FORMAT && !v, "token_type 9: status %d", (int)st);
    tok_free(v);
    /* no tokenizer.ggml.model */
    t_build_tokens();
    od.model = NULL;
    st = t_load(&od, &v, path);
    CHECK(st != TL_OK && !v, "missing model key: status %d", (int)st);
    tok_free(v);
}

static void test_smollm(void) {
    const char *path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (access(path, R_OK)) {
        printf("note: %s absent, real-vocab checks skipped\n", path);
        return;
    }
    gguf_file *f;
    if (gguf_open(path, &f)) {
        CHECK(0, "open %s: %s", path, tl_last_error());
        return;
    }
    tok_vocab *v;
    tl_status st = tok_load_gguf(f, &v);
    gguf_close(f);
    CHECK(st == TL_OK, "load smollm tokenizer: %s", tl_last_error());
    if (st) return;
    /* metadata facts of the file (read by the gguf package: bos 1, eos 2,
     * add_bos false, 49152 tokens) */
    CHECK(tok_n_vocab(v) == 49152 && tok_bos(v) == 1 && tok_eos(v) == 2 && !tok_add_bos(v), "smollm metadata");
    CHECK(tok_is_eog(v, 2), "<|im_end|> ends generation");
    const char *text = "Hi \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC "
                       "<|im_start|>x\r\n\t 12345 \xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7";
    int32_t ids[256];
    int32_t n = t_enc(v, text, strlen(text), true, ids, 256);
    CHECK(n > 0, "encode");
    char back[512];
    int bad = 0;
    size_t bl = t_stream(v, ids, n, back, sizeof back, &bad);
    CHECK(bl == strlen(text) && !memcmp(back, text, bl), "streamed round trip (%zu of %zu bytes)", bl, strlen(text));
    CHECK(bad == 0, "%d streamed chunks were not whole characters", bad);
    tok_free(v);
}

static void t_write(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Malformed or unsupported tokenizer.json: an error naming the problem. */
static void test_bad_json(const char *path) {
    struct { const char *json; tl_status want; } cases[] = {
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1", TL_ERR_FORMAT},
        {"{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}", TL_ERR_UNSUPPORTED},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a c\"]}}", TL_ERR_FORMAT},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}", TL_ERR_FORMAT},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -4}, \"merges\": []}}", TL_ERR_FORMAT},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [[\"a\"]]}}", TL_ERR_FORMAT},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
         "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, \"behavior\": \"Isolated\"}}",
         TL_ERR_UNSUPPORTED},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
         "\"normalizer\": {\"type\": \"Lowercase\"}}", TL_ERR_UNSUPPORTED},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
         "\"added_tokens\": [{\"id\": 99999999999, \"content\": \"x\"}]}", TL_ERR_FORMAT},
        {"[1, 2, 3]", TL_ERR_UNSUPPORTED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        t_write(path, cases[i].json);
        tok_vocab *v = NULL;
        tl_status st = tok_load_hf_json(path, &v);
        CHECK(st == cases[i].want && !v, "bad tokenizer.json %zu: status %d (want %d): %s", i, (int)st,
              (int)cases[i].want, tl_last_error());
        tok_free(v);
    }
    /* a minimal valid one loads and merges */
    t_write(path, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [\"a b\"]}}");
    tok_vocab *v = NULL;
    tl_status st = tok_load_hf_json(path, &v);
    CHECK(st == TL_OK, "minimal tokenizer.json: %s", tl_last_error());
    if (!st) {
        int32_t ids[8];
        int32_t n = t_enc(v, "abab", 4, true, ids, 8);
        CHECK(n == 2 && ids[0] == 2 && ids[1] == 2, "abab -> %d tokens", n);
    }
    tok_free(v);
}

/* Random bytes through real tokenizers (from ../shared when present):
 * never a crash (this runs under ASan in CI); byte-level ones without a
 * normalizer must give the bytes back; every decoded text is valid UTF-8. */
static void test_real_random(void) {
    const char *names[] = {"../shared/tokenizers/gpt2", "../shared/tokenizers/qwen3/tokenizer.json",
                           "../shared/tokenizers/llama2/tokenizer.json"};
    if (access("../shared/tokenizers", R_OK)) {
        printf("note: ../shared/tokenizers absent, random-byte checks on real tokenizers skipped\n");
        return;
    }
    for (size_t t = 0; t < sizeof names / sizeof names[0]; t++) {
        tok_vocab *v;
        if (tok_load_hf_json(names[t], &v)) {
            CHECK(0, "load %s: %s", names[t], tl_last_error());
            continue;
        }
        /* qwen3 normalizes to NFC, so only gpt2 must be lossless */
        bool byte_level = strstr(tok_kind_name(v), "byte-level") != NULL && !strstr(names[t], "qwen3");
        unsigned seed = 777 + (unsigned)t;
        int lossy = 0, invalid = 0, failed = 0;
        for (int trial = 0; trial < 400; trial++) {
            char text[64];
            size_t len = (size_t)(trial % 60);
            for (size_t i = 0; i < len; i++) {
                seed = seed * 1103515245u + 12345u;
                /* bias to bytes that matter: ASCII, UTF-8 leads, continuations */
                unsigned r = seed >> 16;
                text[i] = (char)(r % 3 == 0 ? (r >> 2) % 128 : r % 3 == 1 ? 0xC0 + (r >> 2) % 0x36 : 0x80 + (r >> 2) % 0x40);
            }
            int32_t ids[256];
            int32_t n = t_enc(v, text, len, true, ids, 256);
            if (n < 0) {
                failed++;
                continue;
            }
            char *dec;
            size_t dl;
            if (tok_decode(v, ids, n, true, &dec, &dl)) {
                failed++;
                continue;
            }
            if (!t_valid_utf8((unsigned char *)dec, dl)) invalid++;
            free(dec);
            if (byte_level) {
                char back[512];
                size_t pos = 0;
                for (int32_t i = 0; i < n; i++) {
                    size_t pl;
                    const char *p = tok_piece(v, ids[i], &pl);
                    if (pos + pl <= sizeof back) memcpy(back + pos, p, pl);
                    pos += pl;
                }
                if (pos != len || memcmp(back, text, len)) lossy++;
            }
        }
        CHECK(failed == 0 && invalid == 0 && lossy == 0, "%s: %d failed, %d invalid decodes, %d lossy", names[t], failed,
              invalid, lossy);
        tok_free(v);
    }
}

int main(void) {
    char path[] = "/tmp/tallow_test_tok_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        printf("SKIP: cannot make a temp file\n");
        return TEST_SKIP;
    }
    close(fd);
    test_synthetic(path);
    test_malformed(path);
    test_smollm();
    test_bad_json(path);
    test_real_random();
    unlink(path);
    return test_finish();
}
