/* tests/test_untrusted: the non-Jinja findings of issue 24's fuzzing pass,
 * replayed: each hostile input must end within 1 s of CPU time (release) and
 * 256 MiB of peak memory with an error naming the limit it broke, and the
 * legitimate neighbour of each (a big but honest input) must still load.
 *  - tokenizer.json: a 59-byte file with a vocab id near 2^26 (was 9.5 GB);
 *  - config.json: vocab_size 2^26, and a vocab_size padding a tiny
 *    tokenizer to millions of tokens (was 5.7 GB);
 *  - safetensors: a header of 200k tensors (reserved ~1 TB of address
 *    space: each string got the whole header's size), duplicate names,
 *    a header over ST_MAX_HEADER;
 *  - encoder.json {"":1} (null pointer + 0 under UBSan).
 * The Jinja findings are in test_jinja.c.
 * Owns: temp files. Calls: text/tokenizer, io/safetensors, convert, cJSON. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "convert/cvt_internal.h"
#include "io/safetensors.h"
#include "test_util.h"
#include "text/tokenizer.h"

#if defined(__SANITIZE_ADDRESS__)
#define TU_SLOW 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_SLOW 1
#endif
#endif
#ifndef TU_SLOW
#define TU_SLOW 0
#endif

static char tmpdir[64];

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: the machine may be shared */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long maxrss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static const char *tmp_path(const char *name) {
    static char p[4][160];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", tmpdir, name);
    return p[k];
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, n, f) == n, "cannot write %s", path);
    if (f) fclose(f);
}

/* One case: t0/rss0 taken by begin(), checked by end(). */
static double t_start;
static long rss_start;
static void begin(void) {
    rss_start = maxrss_kb();
    t_start = now();
}
static void end(const char *what, tl_status st, bool want_ok, const char *frag) {
    double dt = now() - t_start;
    long grew = maxrss_kb() - rss_start;
    if (want_ok) CHECK(st == TL_OK, "%s: failed: %s", what, tl_last_error());
    else {
        CHECK(st != TL_OK, "%s: accepted but should fail", what);
        if (st != TL_OK) CHECK(strstr(tl_last_error(), frag) != NULL, "%s: error lacks '%s': %s", what, frag, tl_last_error());
    }
    CHECK(dt < (TU_SLOW ? 20.0 : 1.0), "%s: took %.2f s", what, dt);
    CHECK(grew < 256 * 1024, "%s: peak memory grew by %ld KiB", what, grew);
    printf("finding %-48s %6.3f s %7ld KiB  %s\n", what, dt, grew, st == TL_OK ? "ok" : tl_last_error());
}

static tl_status load_tok_json(const char *json, tok_vocab **v) {
    const char *p = tmp_path("tokenizer.json");
    write_file(p, json, strlen(json));
    return tok_load_hf_json(p, v);
}

static void test_tokenizer_json(void) {
    tok_vocab *v = NULL;
    begin();
    tl_status st = load_tok_json("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":67108863},\"merges\":[]}}", &v);
    end("tokenizer.json: 59 bytes, id 2^26-1", st, false, "TOK_MAX_VOCAB");
    tok_free(v), v = NULL;
    begin();
    st = load_tok_json("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":4194303},\"merges\":[]}}", &v);
    end("tokenizer.json: one token with id 2^22-1", st, false, "tok_ids_dense");
    tok_free(v), v = NULL;
    /* holes up to as many as the tokens stated are fine */
    begin();
    st = load_tok_json("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":3},\"merges\":[]}}", &v);
    end("tokenizer.json: 2 tokens over 4 ids", st, true, NULL);
    if (st == TL_OK) CHECK(tok_n_vocab(v) == 4, "n_vocab %d", tok_n_vocab(v));
    tok_free(v), v = NULL;
    /* eight Replace normalizers, each turning a space into 1000 spaces: the
     * text would grow 1000^8 times */
    static char json[16384];
    char spaces[1001];
    memset(spaces, ' ', 1000);
    spaces[1000] = 0;
    int n = snprintf(json, sizeof json, "{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[");
    for (int i = 0; i < 8; i++)
        n += snprintf(json + n, sizeof json - (size_t)n,
                      "%s{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"%s\"}", i ? "," : "",
                      spaces);
    snprintf(json + n, sizeof json - (size_t)n, "]},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\" \":1},"
                                                "\"merges\":[]}}");
    st = load_tok_json(json, &v);
    CHECK(st == TL_OK, "growing normalizers load: %s", tl_last_error());
    if (st == TL_OK) {
        int32_t ids[64], nid = 0;
        begin();
        st = tok_encode(v, "a a a", 5, false, false, ids, 64, &nid);
        end("tokenizer.json: 8 Replace ops, 1 space -> 1000", st, false, "TOK_MAX_NORM_GROWTH");
    }
    tok_free(v), v = NULL;
}

static void test_encoder_json(void) {
    const char *enc = tmp_path("encoder.json"), *bpe = tmp_path("vocab.bpe");
    write_file(enc, "{\"\":1}", 6);
    write_file(bpe, "#version: 0.2\n", 14);
    tok_vocab *v = NULL;
    begin();
    tl_status st = tok_load_gpt2_files(enc, bpe, &v);
    end("encoder.json {\"\":1} (UB checked by the ASan build)", st, true, NULL);
    if (st == TL_OK) {
        int32_t ids[8], n;
        CHECK(tok_encode(v, "a", 1, false, false, ids, 8, &n) == TL_OK || n >= 0, "encode");
        size_t len;
        CHECK(tok_text(v, 1, &len) != NULL && len == 0, "the empty token");
    }
    tok_free(v);
}

static void test_config(void) {
    static const char base[] = "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":8,\"num_hidden_layers\":1,"
                               "\"intermediate_size\":16,\"num_attention_heads\":2,\"vocab_size\":%lld}";
    char buf[512];
    cvt_hparams hp;
    snprintf(buf, sizeof buf, base, 1LL << 26);
    cJSON *cfg = cJSON_Parse(buf);
    begin();
    tl_status st = cvt_config_parse(cfg, "config.json", &hp);
    end("config.json: vocab_size 2^26", st, false, "vocab_size");
    cJSON_Delete(cfg);
    /* within the cap, but padding a 260-token tokenizer to 4M tokens */
    const char *tok_dir = "tests/fixtures/hf_tiny_tokenizer";
    snprintf(buf, sizeof buf, base, (long long)TOK_MAX_VOCAB);
    cfg = cJSON_Parse(buf);
    st = cvt_config_parse(cfg, "config.json", &hp);
    CHECK(st == TL_OK, "config within the cap: %s", tl_last_error());
    gguf_writer *w;
    if (st == TL_OK && access(tok_dir, R_OK) == 0 && gguf_writer_init(&w) == TL_OK) {
        int64_t n;
        begin();
        st = cvt_tokenizer_write(w, tok_dir, cfg, hp.n_vocab, &n);
        end("config.json: vocab_size 2^22 over 260 tokens", st, false, "tok_ids_dense");
        gguf_writer_free(w);
        /* honest padding (Qwen-style: a few hundred spare rows) still converts */
        if (gguf_writer_init(&w) == TL_OK) {
            begin();
            st = cvt_tokenizer_write(w, tok_dir, cfg, 320, &n);
            end("config.json: vocab_size 320 over 260 tokens", st, true, NULL);
            CHECK(st != TL_OK || n == 320, "padded to %lld", (long long)n);
            gguf_writer_free(w);
        }
    } else if (access(tok_dir, R_OK) != 0) {
        printf("config padding: %s not found (run from the source root); skipped\n", tok_dir);
    }
    cJSON_Delete(cfg);
}

/* A safetensors file of n empty F32 tensors named t0..t(n-1) (or all "dup"). */
static uint8_t *st_build(int n, bool dup, size_t *size) {
    size_t cap = (size_t)n * 64 + 64, o = 8;
    uint8_t *b = malloc(cap);
    o += (size_t)sprintf((char *)b + o, "{");
    for (int i = 0; i < n; i++) {
        if (dup) o += (size_t)sprintf((char *)b + o, "%s\"dup\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}", i ? "," : "");
        else o += (size_t)sprintf((char *)b + o, "%s\"t%d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}", i ? "," : "", i);
    }
    o += (size_t)sprintf((char *)b + o, "}");
    uint64_t hl = o - 8;
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(hl >> (8 * i));
    *size = o;
    return b;
}

static void test_safetensors(void) {
    size_t size;
    uint8_t *b = st_build(200000, false, &size);
    st_file *f = NULL;
    begin();
    tl_status st = st_open_memory(b, size, &f);
    char what[96];
    snprintf(what, sizeof what, "safetensors: %.1f MB header, 200k tensors", (double)size / 1e6);
    end(what, st, true, NULL);
    if (st == TL_OK) {
        CHECK(st_n_tensors(f) == 200000, "%d tensors", st_n_tensors(f));
        CHECK(st_find(f, "t123456") && !strcmp(st_find(f, "t123456")->name, "t123456"), "lookup");
        CHECK(!st_find(f, "t200000"), "absent lookup");
        st_close(f);
    }
    free(b);
    b = st_build(2, true, &size);
    begin();
    st = st_open_memory(b, size, &f);
    end("safetensors: a tensor named twice", st, false, "named twice");
    free(b);
    static const char meta2[] = "{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}";
    uint8_t m[64] = {sizeof meta2 - 1};
    memcpy(m + 8, meta2, sizeof meta2 - 1);
    begin();
    st = st_open_memory(m, 8 + sizeof meta2 - 1, &f);
    end("safetensors: a metadata key given twice", st, false, "given twice");
    static const char field2[] = "{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[0,4]}}";
    uint8_t g[128] = {sizeof field2 - 1};
    memcpy(g + 8, field2, sizeof field2 - 1);
    begin();
    st = st_open_memory(g, 8 + sizeof field2 - 1 + 4, &f);
    end("safetensors: a tensor field given twice", st, false, "twice");
    /* a header length over ST_MAX_HEADER, backed by that many bytes */
    size = (size_t)ST_MAX_HEADER + 16;
    b = calloc(1, size);
    uint64_t hl = ST_MAX_HEADER + 1;
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(hl >> (8 * i));
    begin();
    st = st_open_memory(b, size, &f);
    end("safetensors: header over ST_MAX_HEADER", st, false, "ST_MAX_HEADER");
    free(b);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tallow-untrusted-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_tokenizer_json();
    test_encoder_json();
    test_config();
    test_safetensors();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_finish();
}
