/* train/data: a token dataset read from a text file: byte level (vocab 256:
 * token = byte) or tokenized with tallow's tokenizer (a GGUF vocabulary or
 * an HF tokenizer.json), split into train (the head) and validation (the
 * tail), with seeded random batches for training and fixed batches for
 * validation.
 * Owns: the token array, the tokenizer and its path. Calls: base/status,
 * text/tokenizer, io/gguf, train RNG. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "text/tokenizer.h"
#include "train/tt_internal.h"

/* The whole file, NUL-terminated, in *buf (caller frees). */
static tl_status read_text(const char *path, char **buf, int64_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return tl_err(TL_ERR_IO, "data: cannot open '%s'", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (len <= 0) {
        fclose(f);
        return tl_err(TL_ERR_FORMAT, "data: '%s' is empty", path);
    }
    *buf = malloc((size_t)len + 1);
    if (!*buf) {
        fclose(f);
        return tl_err(TL_ERR_NOMEM, "data: out of memory for '%s' (%ld bytes)", path, len);
    }
    size_t got = fread(*buf, 1, (size_t)len, f);
    fclose(f);
    if (got != (size_t)len) {
        free(*buf);
        *buf = NULL;
        return tl_err(TL_ERR_IO, "data: short read of '%s'", path);
    }
    (*buf)[len] = 0;
    *n = len;
    return TL_OK;
}

static void set_split(tt_dataset *d, double val_frac) {
    if (val_frac < 0 || val_frac >= 1) val_frac = 0.1;
    d->n_train = d->n - (int64_t)((double)d->n * val_frac);
}

tl_status tt_dataset_load_bytes(tt_dataset *d, const char *path, double val_frac) {
    memset(d, 0, sizeof *d);
    char *buf;
    int64_t n;
    tl_status s = read_text(path, &buf, &n);
    if (s) return s;
    d->tokens = malloc((size_t)n * sizeof *d->tokens);
    if (!d->tokens) {
        free(buf);
        return tl_err(TL_ERR_NOMEM, "data: out of memory for '%s' (%lld tokens)", path, (long long)n);
    }
    for (int64_t i = 0; i < n; i++) d->tokens[i] = (uint8_t)buf[i];
    free(buf);
    d->n = n;
    d->vocab = 256;
    set_split(d, val_frac);
    return TL_OK;
}

/* A tokenizer from a .gguf (its tokenizer.ggml.* keys) or a tokenizer.json. */
static tl_status open_tokenizer(const char *path, tok_vocab **out) {
    size_t len = strlen(path);
    if (len >= 5 && !strcmp(path + len - 5, ".gguf")) {
        gguf_file *g;
        tl_status s = gguf_open(path, &g);
        if (s) return s;
        s = tok_load_gguf(g, out); /* the vocab copies what it needs */
        gguf_close(g);
        return s;
    }
    return tok_load_hf_json(path, out);
}

tl_status tt_dataset_load_tokenized(tt_dataset *d, const char *path, const char *tokenizer, double val_frac) {
    memset(d, 0, sizeof *d);
    tl_status s = open_tokenizer(tokenizer, &d->tok);
    if (s) return tl_err_prefix(s, "data: tokenizer '%s': ", tokenizer);
    /* absolute, so a checkpoint's record still finds it from another directory */
    d->tok_path = realpath(tokenizer, NULL);
    if (!d->tok_path && (d->tok_path = malloc(strlen(tokenizer) + 1))) strcpy(d->tok_path, tokenizer);
    if (!d->tok_path) {
        tt_dataset_free(d);
        return tl_err(TL_ERR_NOMEM, "data: out of memory");
    }
    d->vocab = tok_n_vocab(d->tok);
    char *buf;
    int64_t n;
    if ((s = read_text(path, &buf, &n))) {
        tt_dataset_free(d);
        return s;
    }
    if (n > INT32_MAX - 64) {
        free(buf);
        tt_dataset_free(d);
        return tl_err(TL_ERR_UNSUPPORTED, "data: '%s' is over 2 GiB; tokenized datasets are limited to that", path);
    }
    /* BPE never yields more tokens than bytes (+ a prefix marker); retry with the size asked for otherwise */
    int32_t cap = (int32_t)n + 16, got = 0;
    for (int tries = 0; tries < 2; tries++) {
        d->tokens = malloc((size_t)cap * sizeof *d->tokens);
        if (!d->tokens) {
            s = tl_err(TL_ERR_NOMEM, "data: out of memory for the tokens of '%s'", path);
            break;
        }
        s = tok_encode(d->tok, buf, (size_t)n, false, false, d->tokens, cap, &got);
        if (s != TL_ERR_INVALID || got <= cap) break;
        free(d->tokens);
        d->tokens = NULL;
        cap = got;
    }
    free(buf);
    if (s) {
        tt_dataset_free(d);
        return tl_err_prefix(s, "data: tokenizing '%s': ", path);
    }
    d->n = got;
    set_split(d, val_frac);
    return TL_OK;
}

void tt_dataset_free(tt_dataset *d) {
    free(d->tokens);
    free(d->tok_path);
    if (d->tok) tok_free(d->tok);
    memset(d, 0, sizeof *d);
}

static tl_status split(const tt_dataset *d, bool val, int64_t T, int64_t *lo, int64_t *span) {
    *lo = val ? d->n_train : 0;
    int64_t len = val ? d->n - d->n_train : d->n_train;
    *span = len - T - 1; /* number of valid window starts minus one */
    if (*span < 1)
        return tl_err(TL_ERR_INVALID, "data: %s split of %lld tokens is shorter than a window of %lld",
                      val ? "validation" : "train", (long long)len, (long long)T + 1);
    return TL_OK;
}

static void window(const tt_dataset *d, int64_t start, int64_t T, int32_t *ids, int32_t *tg) {
    for (int64_t t = 0; t < T; t++) {
        ids[t] = d->tokens[start + t];
        tg[t] = d->tokens[start + t + 1];
    }
}

tl_status tt_dataset_batch(const tt_dataset *d, bool val, tt_rng *r, int64_t B, int64_t T, int32_t *ids,
                           int32_t *targets) {
    int64_t lo, span;
    tl_status s = split(d, val, T, &lo, &span);
    if (s != TL_OK) return s;
    for (int64_t b = 0; b < B; b++)
        window(d, lo + (int64_t)(tt_rng_next(r) % (uint64_t)span), T, ids + b * T, targets + b * T);
    return TL_OK;
}

tl_status tt_dataset_batch_at(const tt_dataset *d, bool val, int64_t k, int64_t B, int64_t T, int32_t *ids,
                              int32_t *targets) {
    int64_t lo, span;
    tl_status s = split(d, val, T, &lo, &span);
    if (s != TL_OK) return s;
    for (int64_t b = 0; b < B; b++) window(d, lo + ((k * B + b) * T) % span, T, ids + b * T, targets + b * T);
    return TL_OK;
}
