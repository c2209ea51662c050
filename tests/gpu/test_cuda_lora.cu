/* tests/gpu/test_cuda_lora: the gathered LoRA product (cuda_lora.cu) against
 * its CPU twin, lora_ref_apply (src/lora, float64 accumulation), on random
 * batches mixing adapters: ranks 1, 8, 16, 64, rows with 0 to 3 adapters
 * (a row may use the same adapter twice at two scales), row strides wider
 * than the rows, and n_in / n_out that are not multiples of 32 or 256.
 * Tolerance: relative L2 error 1e-5 of the added term (f32 fma chains of at
 * most n_in + rank terms). Also: two runs give identical bits (no atomics).
 * Built only with TALLOW_CUDA=ON, run on a GPU machine (not by ctest). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include <cuda_runtime.h>

extern "C" {
#include "lora/lora.h"
}
#include "backend/cuda/cuda_lora.h"

static int n_pass, n_fail;
#define CHECK(c, ...)                                                                          \
    do {                                                                                       \
        if (c) n_pass++;                                                                       \
        else {                                                                                 \
            n_fail++;                                                                          \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                               \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
        }                                                                                      \
    } while (0)

static uint64_t rs = 88172645463325252ull;
static float frand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((rs >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

template <typename T> static T *dev(const std::vector<T> &h) {
    T *d = NULL;
    if (cudaMalloc(&d, h.size() * sizeof(T) + 16) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        exit(1);
    }
    cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
    return d;
}

static void one_case(int n_tok, int n_in, int n_out, int ldx_pad, const int *ranks, int n_ad) {
    const int ldx = n_in + ldx_pad, ldy = n_out + 3;
    std::vector<lora_weight> lw(n_ad);
    std::vector<std::vector<float>> av(n_ad), bv(n_ad), btv(n_ad);
    int max_rank = 1;
    for (int g = 0; g < n_ad; g++) {
        int r = ranks[g];
        max_rank = r > max_rank ? r : max_rank;
        av[g].resize((size_t)r * n_in);
        bv[g].resize((size_t)n_out * r);
        btv[g].resize((size_t)r * n_out);
        for (auto &v : av[g]) v = frand();
        for (auto &v : bv[g]) v = frand();
        for (int o = 0; o < n_out; o++)
            for (int k = 0; k < r; k++) btv[g][(size_t)k * n_out + o] = bv[g][(size_t)o * r + k];
        lw[g] = (lora_weight){r, n_in, n_out, av[g].data(), bv[g].data(), 1.0f};
    }
    /* uses: per row 0..3 entries of (adapter, scale); group = one (adapter, scale) pair */
    std::vector<int> grp_ad;
    std::vector<float> grp_s;
    std::vector<int32_t> ent_row, ent_grp, row_ptr(1, 0);
    for (int t = 0; t < n_tok; t++) {
        int k = (int)((frand() + 1) * 2) % 4;
        for (int j = 0; j < k; j++) {
            int ad = (t + 3 * j) % n_ad;
            float s = j == 2 ? -0.5f : 0.75f + 0.25f * (float)(ad % 3);
            int g = -1;
            for (size_t q = 0; q < grp_ad.size(); q++)
                if (grp_ad[q] == ad && grp_s[q] == s) g = (int)q;
            if (g < 0) {
                g = (int)grp_ad.size();
                grp_ad.push_back(ad);
                grp_s.push_back(s);
            }
            ent_row.push_back(t);
            ent_grp.push_back(g);
        }
        row_ptr.push_back((int32_t)ent_row.size());
    }
    std::vector<float> x((size_t)n_tok * ldx), y0((size_t)n_tok * ldy);
    for (auto &v : x) v = frand();
    for (auto &v : y0) v = frand();
    /* CPU twin: per entry, the reference product of its adapter at its scale */
    std::vector<float> ref = y0, scratch((size_t)max_rank);
    for (size_t e = 0; e < ent_row.size(); e++) {
        int32_t row = ent_row[e];
        lora_ref_apply(&lw[grp_ad[ent_grp[e]]], grp_s[ent_grp[e]], &row, 1, x.data(), ldx, ref.data(), ldy,
                       scratch.data());
    }
    float **da = (float **)calloc((size_t)n_ad, sizeof *da), **db = (float **)calloc((size_t)n_ad, sizeof *db);
    for (int g = 0; g < n_ad; g++) {
        da[g] = dev(av[g]);
        db[g] = dev(btv[g]);
    }
    std::vector<tlc_lora_group> groups(grp_ad.size() ? grp_ad.size() : 1);
    for (size_t q = 0; q < grp_ad.size(); q++)
        groups[q] = (tlc_lora_group){da[grp_ad[q]], db[grp_ad[q]], grp_s[q], ranks[grp_ad[q]], 0, n_out};
    std::vector<float> tmp0((ent_row.size() + 1) * max_rank, NAN);
    float *dx = dev(x), *dtmp = dev(tmp0);
    int32_t *drow = dev(ent_row.size() ? ent_row : std::vector<int32_t>(1)),
            *dgrp = dev(ent_grp.size() ? ent_grp : std::vector<int32_t>(1)), *dptr = dev(row_ptr);
    tlc_lora_group *dg = dev(groups);
    std::vector<float> out[2];
    for (int run = 0; run < 2; run++) {
        float *dy = dev(y0);
        tl_status s1 = tlc_lora_shrink(dx, ldx, n_in, drow, dgrp, (int32_t)ent_row.size(), dg, max_rank, dtmp, NULL);
        tl_status s2 = tlc_lora_expand(dy, ldy, n_out, dptr, n_tok, dgrp, dg, max_rank, dtmp, NULL);
        CHECK(s1 == TL_OK && s2 == TL_OK && cudaDeviceSynchronize() == cudaSuccess, "launch: %s", tl_last_error());
        out[run].resize(y0.size());
        cudaMemcpy(out[run].data(), dy, y0.size() * sizeof(float), cudaMemcpyDeviceToHost);
        cudaFree(dy);
    }
    double num = 0, den = 0;
    bool pad_ok = true;
    for (int t = 0; t < n_tok; t++)
        for (int o = 0; o < ldy; o++) {
            size_t i = (size_t)t * ldy + o;
            if (o >= n_out) {
                pad_ok = pad_ok && out[0][i] == y0[i];
                continue;
            }
            num += pow((double)out[0][i] - ref[i], 2);
            den += pow((double)ref[i] - y0[i], 2);
        }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    CHECK(rel <= 1e-5, "tok %d in %d out %d ranks %d..: rel L2 %.2e", n_tok, n_in, n_out, ranks[0], rel);
    CHECK(pad_ok, "columns past n_out untouched");
    CHECK(!memcmp(out[0].data(), out[1].data(), y0.size() * sizeof(float)), "two runs give the same bits");
    printf("tokens %3d  n_in %5d  n_out %5d  entries %4zu  groups %2zu  rel L2 %.2e\n", n_tok, n_in, n_out,
           ent_row.size(), grp_ad.size(), rel);
    for (int g = 0; g < n_ad; g++) {
        cudaFree(da[g]);
        cudaFree(db[g]);
    }
    free(da);
    free(db);
    cudaFree(dx);
    cudaFree(dtmp);
    cudaFree(drow);
    cudaFree(dgrp);
    cudaFree(dptr);
    cudaFree(dg);
}

int main(void) {
    int dn = 0;
    if (cudaGetDeviceCount(&dn) != cudaSuccess || dn == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    const int r1[] = {1, 8, 16, 64}, r2[] = {16, 16, 16, 16, 16, 16, 16, 16}, r3[] = {8};
    one_case(1, 576, 576, 0, r3, 1);
    one_case(7, 100, 300, 5, r1, 4);
    one_case(64, 4096, 1024, 0, r2, 8);
    one_case(33, 14336, 4096, 2, r1, 4);
    one_case(16, 2048, 8192, 0, r2, 8);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
