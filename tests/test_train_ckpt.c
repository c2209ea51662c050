/* test_train_ckpt: checkpoints and the safetensors reader/writer.
 *  - resume: a run of 6 steps equals, bit for bit, a run of 3 steps + save +
 *    load into a fresh model/optimizer + 3 steps (losses and every parameter
 *    byte), for a Llama-style model and a GPT-2-style model with dropout (so
 *    the dropout seed and the data RNG must round-trip too). The oracle is
 *    the uninterrupted run itself: any state the checkpoint forgets shows up
 *    as a differing bit.
 *  - the safetensors reader rejects malformed files with an error (header
 *    past EOF, offsets past the data, overlapping tensors, size/shape
 *    mismatch, unknown dtype, bad JSON), never crashing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/png.h"
#include "io/safetensors.h"
#include "test_util.h"
#include "tallow_train.h"

static char g_text[64];
static char g_ckpt[64];

static void make_text(void) {
    snprintf(g_text, sizeof g_text, "/tmp/tt_ckpt_text_%d.txt", (int)getpid());
    snprintf(g_ckpt, sizeof g_ckpt, "/tmp/tt_ckpt_%d.safetensors", (int)getpid());
    FILE *f = fopen(g_text, "wb");
    const char *words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat. ", "It ", "was ", "warm.\n"};
    tt_rng r;
    tt_rng_seed(&r, 7);
    for (int i = 0; i < 4000; i++) fputs(words[tt_rng_next(&r) % 9], f);
    fclose(f);
}

typedef struct run {
    tt_model m;
    tt_optim o;
    tt_trainer tr;
} run;

static void run_init(run *r, tt_ctx *c, const tt_model_config *cfg, const tt_dataset *d) {
    CHECK(tt_model_init(&r->m, cfg, 11) == TL_OK, "init: %s", tl_last_error());
    tt_optim_config oc = tt_optim_default(TT_OPT_ADAMW, 3e-3);
    CHECK(tt_optim_init(&r->o, &oc, &r->m.params) == TL_OK, "optim");
    CHECK(tt_trainer_init(&r->tr, c, &r->m, &r->o, d, 2, 16, 99) == TL_OK, "trainer");
    r->tr.sched = (tt_schedule){TT_SCHED_COSINE, 3e-3, 3e-4, 2, 6, 0, 0};
}

static void run_free(run *r) {
    tt_trainer_free(&r->tr);
    tt_optim_free(&r->o);
    tt_model_free(&r->m);
}

static void resume_case(tt_ctx *c, const tt_model_config *cfg, const tt_dataset *d, const char *what) {
    run a, b, b2;
    double la[6], lb[6];
    run_init(&a, c, cfg, d);
    for (int s = 0; s < 6; s++) CHECK(tt_trainer_step(&a.tr, &la[s], NULL) == TL_OK, "step: %s", tl_last_error());
    run_init(&b, c, cfg, d);
    for (int s = 0; s < 3; s++) CHECK(tt_trainer_step(&b.tr, &lb[s], NULL) == TL_OK, "step");
    CHECK(tt_checkpoint_save(g_ckpt, &b.m, &b.o, b.tr.step, &b.tr.rng) == TL_OK, "save: %s", tl_last_error());
    run_free(&b);
    tt_model_config lc;
    CHECK(tt_checkpoint_read_config(g_ckpt, &lc) == TL_OK && lc.dim == cfg->dim && lc.arch == cfg->arch,
          "read config");
    run_init(&b2, c, &lc, d);
    /* scramble what the checkpoint must restore */
    tt_rng_seed(&b2.tr.rng, 12345);
    CHECK(tt_checkpoint_load(g_ckpt, &b2.m, &b2.o, &b2.tr.step, &b2.tr.rng) == TL_OK, "load: %s", tl_last_error());
    CHECK(b2.tr.step == 3 && b2.o.step == 3, "steps restored %lld %lld", (long long)b2.tr.step, (long long)b2.o.step);
    for (int s = 3; s < 6; s++) CHECK(tt_trainer_step(&b2.tr, &lb[s], NULL) == TL_OK, "step");
    int same_loss = 1;
    for (int s = 0; s < 6; s++) same_loss &= la[s] == lb[s];
    CHECK(same_loss, "%s: losses differ after resume (step 5: %.9g vs %.9g)", what, la[5], lb[5]);
    int64_t diff = 0;
    for (int i = 0; i < a.m.params.n; i++)
        diff += memcmp(tt_data(a.m.params.p[i].t), tt_data(b2.m.params.p[i].t),
                       (size_t)tt_numel(a.m.params.p[i].t) * 4) != 0;
    CHECK(diff == 0, "%s: %lld parameter tensors differ after resume", what, (long long)diff);
    CHECK(la[5] < la[0], "%s: loss did not go down (%g -> %g)", what, la[0], la[5]);
    printf("%s: resume bit-identical (%d tensors), loss %.4f -> %.4f\n", what, a.m.params.n, la[0], la[5]);
    run_free(&a);
    run_free(&b2);
}

static tl_status open_bytes(const char *hdr, const char *data, size_t dlen) {
    size_t hl = strlen(hdr);
    uint8_t *buf = malloc(8 + hl + dlen);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, hdr, hl);
    memcpy(buf + 8 + hl, data, dlen);
    st_file *f = NULL;
    tl_status s = st_open_memory(buf, 8 + hl + dlen, &f);
    st_close(f);
    free(buf);
    return s;
}

static void safetensors_validation(void) {
    const char d[16] = {0};
    CHECK(open_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8) == TL_OK, "valid: %s",
          tl_last_error());
    CHECK(open_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 4) == TL_ERR_FORMAT,
          "past end of data");
    CHECK(open_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", d, 16) == TL_ERR_FORMAT,
          "shape/size mismatch");
    CHECK(open_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                     d, 16) == TL_ERR_FORMAT,
          "overlap");
    CHECK(open_bytes("{\"a\":{\"dtype\":\"Q9\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8) == TL_ERR_FORMAT,
          "dtype");
    CHECK(open_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", d, 8) == TL_ERR_FORMAT,
          "truncated JSON");
    CHECK(open_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,8]}}", d, 8) ==
              TL_ERR_FORMAT,
          "huge dim");
    uint8_t small[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    st_file *f = NULL;
    CHECK(st_open_memory(small, 8, &f) == TL_ERR_FORMAT && f == NULL, "header length past EOF");
    /* metadata with escapes round-trips through writer and reader */
    st_writer *w;
    st_writer_init(&w);
    float v[3] = {1, 2, 3};
    int64_t sh[1] = {3};
    st_writer_add(w, "x\"y", "F32", 1, sh, v, sizeof v);
    st_writer_meta(w, "note", "tab\there \\ \"q\" \xc3\xa9");
    CHECK(st_writer_write(w, g_ckpt) == TL_OK, "write");
    st_writer_free(w);
    CHECK(st_open(g_ckpt, &f) == TL_OK, "reopen: %s", tl_last_error());
    if (f) {
        const st_tensor *t = st_find(f, "x\"y");
        CHECK(t && t->nbytes == 12 && !memcmp(t->data, v, 12), "tensor round trip");
        CHECK(st_meta(f, "note") && !strcmp(st_meta(f, "note"), "tab\there \\ \"q\" \xc3\xa9"), "meta round trip");
        st_close(f);
    }
}

static void png_checks(void) {
    /* CRC-32 of the chunk type "IEND" (no data) is 0xAE426082 in every PNG
     * file (a value from the spec's examples, not from our code) */
    CHECK(png_crc32(0, (const uint8_t *)"IEND", 4) == 0xAE426082u, "crc32(IEND) = %08x",
          png_crc32(0, (const uint8_t *)"IEND", 4));
    CHECK(png_crc32(0, (const uint8_t *)"123456789", 9) == 0xCBF43926u, "crc32 check value");
    uint8_t px[2 * 2 * 3] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255};
    CHECK(png_write_rgb(g_ckpt, 2, 2, px) == TL_OK, "png write: %s", tl_last_error());
    FILE *f = fopen(g_ckpt, "rb");
    uint8_t sig[8] = {0};
    CHECK(f && fread(sig, 1, 8, f) == 8 && sig[0] == 0x89 && sig[1] == 'P', "png signature");
    if (f) fclose(f);
}

int main(void) {
    make_text();
    png_checks();
    safetensors_validation();
    tt_dataset d;
    CHECK(tt_dataset_load_bytes(&d, g_text, 0.1) == TL_OK, "dataset: %s", tl_last_error());
    tt_ctx *c;
    tt_ctx_init(2, &c);
    tt_model_config lc = tt_model_config_default(TT_ARCH_LLAMA, 256, 32, 32, 2, 4);
    lc.kv_heads = 2;
    resume_case(c, &lc, &d, "llama GQA");
    tt_model_config gc = tt_model_config_default(TT_ARCH_GPT2, 256, 32, 32, 2, 4);
    gc.dropout = 0.1;
    resume_case(c, &gc, &d, "gpt2 dropout 0.1");
    tt_ctx_free(c);
    tt_dataset_free(&d);
    remove(g_text);
    remove(g_ckpt);
    return test_finish();
}
