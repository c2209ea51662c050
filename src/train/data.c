/* train/data: a byte-level token dataset (vocab 256: token = byte) read from
 * a text file, split into train (the head) and validation (the tail), with
 * seeded random batches for training and fixed batches for validation.
 * Owns: the token array. Calls: base/status, train RNG. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/tt_internal.h"

tl_status tt_dataset_load_bytes(tt_dataset *d, const char *path, double val_frac) {
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "rb");
    if (!f) return tl_err(TL_ERR_IO, "data: cannot open '%s'", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n <= 0) {
        fclose(f);
        return tl_err(TL_ERR_FORMAT, "data: '%s' is empty", path);
    }
    d->tokens = malloc((size_t)n);
    if (!d->tokens) {
        fclose(f);
        return tl_err(TL_ERR_NOMEM, "data: out of memory for '%s' (%ld bytes)", path, n);
    }
    size_t got = fread(d->tokens, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        tt_dataset_free(d);
        return tl_err(TL_ERR_IO, "data: short read of '%s'", path);
    }
    if (val_frac < 0 || val_frac >= 1) val_frac = 0.1;
    d->n = n;
    d->n_train = n - (int64_t)((double)n * val_frac);
    return TL_OK;
}

void tt_dataset_free(tt_dataset *d) {
    free(d->tokens);
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
