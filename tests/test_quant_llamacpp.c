/* tests/test_quant_llamacpp: our K-quant and IQ4 weight quantizers give
 * llama.cpp's bytes.
 *
 * Oracle: tests/fixtures/kquant_quantize_llamacpp.bin, made by
 * tests/fixtures/make_kquant_quantize_ref.py with llama.cpp 4227c9be's
 * ggml_quantize_chunk (no importance matrix: what llama-quantize writes)
 * for Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS on 49 rows of 512
 * values (Gaussian, scales 1e-16..1e4, outliers, constant, zero groups,
 * one-signed, rounding ties, heavy tails, real SmolLM2 weights). Each row is
 * quantized alone with quant_quantize (the reference kernels) and with the
 * dispatched from_float (the SIMD table), and all rows in one call; every
 * byte must match. Run from the repo root (ctest does). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "tallow.h"
#include "test_util.h"

#define FIXTURE "tests/fixtures/kquant_quantize_llamacpp.bin"

/* first differing byte, or -1 */
static long first_diff(const uint8_t *a, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return (long)i;
    return -1;
}

static void check_type(tl_type t, const float *x, int32_t rows, int32_t n, const uint8_t *want) {
    const size_t rb = tl_row_bytes(t, n), all = rb * (size_t)rows;
    const tl_type_info *ti = tl_type_get(t);
    const quant_kernels *kf = quant_kernels_get(t);
    uint8_t *y = malloc(all), *z = malloc(rb);
    CHECK(y && z && kf, "%s: allocation / kernels", tl_type_name(t));
    if (!y || !z || !kf) {
        free(y);
        free(z);
        return;
    }
    int bad_rows = 0, bad_simd = 0;
    size_t bad_bytes = 0;
    for (int32_t r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * (size_t)n;
        const uint8_t *wr = want + (size_t)r * rb;
        CHECK(quant_quantize(t, xr, z, n) == TL_OK, "%s: quantize row %d", tl_type_name(t), (int)r);
        long d = first_diff(z, wr, rb);
        if (d >= 0) {
            if (bad_rows < 3)
                fprintf(stderr, "  %s row %d: first difference at byte %ld (block %ld, offset %ld): ours %u, "
                        "llama.cpp %u\n",
                        tl_type_name(t), (int)r, d, d / (long)ti->size, d % (long)ti->size, z[d], wr[d]);
            bad_rows++;
            for (size_t i = 0; i < rb; i++) bad_bytes += z[i] != wr[i];
        }
        kf->from_float(xr, z, n);
        bad_simd += memcmp(z, wr, rb) != 0;
    }
    CHECK(quant_quantize(t, x, y, (int64_t)rows * n) == TL_OK, "%s: quantize all rows", tl_type_name(t));
    const int bad_all = memcmp(y, want, all) != 0;
    printf("  %-6s %d rows x %d values (%zu bytes): %d rows differ (%zu bytes); dispatched (%s) %d rows differ; "
           "one call over all rows %s\n",
           tl_type_name(t), (int)rows, (int)n, all, bad_rows, bad_bytes, tl_cpu_kernel_set(), bad_simd,
           bad_all ? "differs" : "identical");
    CHECK(bad_rows == 0, "%s: %d of %d rows differ from llama.cpp", tl_type_name(t), bad_rows, (int)rows);
    CHECK(bad_simd == 0, "%s: dispatched from_float: %d rows differ", tl_type_name(t), bad_simd);
    CHECK(!bad_all, "%s: quantizing all rows in one call differs", tl_type_name(t));
    free(y);
    free(z);
}

int main(void) {
    FILE *f = fopen(FIXTURE, "rb");
    CHECK(f != NULL, "fixture %s missing (run from the repo root)", FIXTURE);
    if (!f) return test_finish();
    int32_t hdr[3] = {0, 0, 0}, ids[16];
    int ok = fread(hdr, sizeof hdr[0], 3, f) == 3;
    const int32_t rows = hdr[0], n = hdr[1], nt = hdr[2];
    ok = ok && rows > 0 && rows <= 4096 && n > 0 && n % 256 == 0 && n <= 65536 && nt > 0 && nt <= 16;
    ok = ok && fread(ids, sizeof ids[0], (size_t)nt, f) == (size_t)nt;
    CHECK(ok, "fixture header");
    float *x = ok ? malloc((size_t)rows * (size_t)n * sizeof *x) : NULL;
    ok = ok && x && fread(x, sizeof *x, (size_t)rows * (size_t)n, f) == (size_t)rows * (size_t)n;
    printf("K-quant / IQ4 quantizers vs llama.cpp's bytes (%s):\n", FIXTURE);
    for (int32_t k = 0; ok && k < nt; k++) {
        const tl_type t = (tl_type)ids[k];
        const tl_type_info *ti = tl_type_get(t);
        CHECK(ti != NULL && quant_kernels_ref(t) != NULL, "fixture type id %d unknown", (int)ids[k]);
        if (!ti || !quant_kernels_ref(t)) break;
        const size_t all = tl_row_bytes(t, n) * (size_t)rows;
        uint8_t *want = malloc(all);
        ok = want && fread(want, 1, all, f) == all;
        CHECK(ok, "fixture truncated at type %s", tl_type_name(t));
        if (ok) check_type(t, x, rows, n, want);
        free(want);
    }
    CHECK(!ok || fgetc(f) == EOF, "fixture has trailing bytes");
    fclose(f);
    free(x);
    return test_finish();
}
