/* train/gemm: the matmul every training op uses (forward and backward), on
 * arbitrary strides so transposes cost no copy.
 * f32: C is cut into MB x NB tiles handed round-robin to the pool's threads;
 * per tile, K runs in KC slices: A and B slices are packed into micro-panels
 * (zero-padded) and a register-blocked micro-kernel does the FLOPs: 12x32
 * with AVX-512, 6x16 with AVX2/FMA, 6x16 scalar elsewhere (chosen per call
 * from base/cpu). Each C element's K sum runs in one fixed order whatever
 * the thread count, so results are deterministic (resume relies on this);
 * the AVX-512 and AVX2 kernels share that order and give the same bits.
 * f64 (gradient checks only) is a plain loop.
 * Owns: nothing (packing buffers live on the stack). Calls: base/cpu, threadpool. */
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "train/tt_internal.h"

#define MR_MAX 12
#define NR_MAX 32
#define KC TT_GEMM_KC
#define MB 96 /* a multiple of every kernel's mr */

typedef void (*ukr_fn)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int acc, int mr,
                       int nr);

void tt__ukr_6x16_avx2(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int acc,
                       int mr, int nr);
void tt__ukr_12x32_avx512(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int acc,
                          int mr, int nr);
void tt__pack_kmajor_avx512(const float *src, int64_t ld, int R, int64_t kc, float *dst);
void tt__pack_a12_strided_avx512(const float *src, int64_t ld, int64_t kc, float *dst);

#define MR 6
#define NR 16
static void ukr_scalar(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int acc, int mr,
                       int nr) {
    float t[MR * NR] = {0}; /* a: packed [kc][6], b: packed [kc][16] */
    for (int64_t k = 0; k < kc; k++)
        for (int r = 0; r < MR; r++)
            for (int j = 0; j < NR; j++) t[r * NR + j] += a[k * MR + r] * b[k * NR + j];
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < nr; j++) c[r * ldc + j] = acc ? c[r * ldc + j] + t[r * NR + j] : t[r * NR + j];
}

typedef struct gemm_job {
    int64_t M, N, K;
    const float *A, *B;
    int64_t rsa, csa, rsb, csb, ldc;
    float *C;
    bool acc;
    int64_t mb, tm, np; /* rows per M tile, M tiles, nr-wide B panels */
    float *bp;          /* packed B: [np][K][nr], zero-padded */
    int mr, nr;         /* the micro-kernel's tile */
    ukr_fn ukr;
} gemm_job;

/* A rows [m0, m0+mb) x k [k0, k0+kc) into micro-panels of mr rows:
 * panel i holds [kc][mr], rows past M zero. */
static void pack_a(const gemm_job *j, int64_t m0, int64_t mb, int64_t k0, int64_t kc, float *ap) {
    const int64_t mr = j->mr;
    for (int64_t ir = 0; ir < mb; ir += mr) {
        float *dst = ap + (ir / mr) * kc * mr;
        int64_t rows = mb - ir < mr ? mb - ir : mr;
        if (j->rsa == 1) { /* A read through a transpose: rows are contiguous per k */
            if (mr == 12 && rows == 12) {
                tt__pack_a12_strided_avx512(j->A + (m0 + ir) + k0 * j->csa, j->csa, kc, dst);
                continue;
            }
            for (int64_t k = 0; k < kc; k++) {
                const float *src = j->A + (m0 + ir) + (k0 + k) * j->csa;
                int64_t r = 0;
                for (; r < rows; r++) dst[k * mr + r] = src[r];
                for (; r < mr; r++) dst[k * mr + r] = 0.0f;
            }
            continue;
        }
        if (j->csa == 1) { /* mr row streams, sequential writes */
            if (mr == 12 && rows == 12) {
                tt__pack_kmajor_avx512(j->A + (m0 + ir) * j->rsa + k0, j->rsa, 12, kc, dst);
                continue;
            }
            const float *s[MR_MAX];
            for (int64_t r = 0; r < mr; r++) s[r] = j->A + (m0 + ir + (r < rows ? r : 0)) * j->rsa + k0;
            for (int64_t k = 0; k < kc; k++) {
                float *d = dst + k * mr;
                for (int64_t r = 0; r < mr; r++) d[r] = r < rows ? s[r][k] : 0.0f;
            }
            continue;
        }
        for (int64_t r = 0; r < mr; r++) {
            const float *src = j->A + (m0 + ir + r) * j->rsa + k0 * j->csa;
            for (int64_t k = 0; k < kc; k++) dst[k * mr + r] = r < rows ? src[k * j->csa] : 0.0f;
        }
    }
}

/* Pack the whole of B once per call (shared by all threads): panel p holds
 * columns [nr p, nr p + nr) for every k, so a K slice of a panel is contiguous. */
static void pack_b_task(void *arg, int ith, int nth) {
    const gemm_job *j = arg;
    const int64_t nr = j->nr;
    for (int64_t p = ith; p < j->np; p += nth) {
        float *dst = j->bp + p * j->K * nr;
        int64_t n0 = p * nr, cols = j->N - n0 < nr ? j->N - n0 : nr;
        if (j->rsb == 1 && j->csb != 1) { /* B read through a transpose: contiguous along k */
            if (nr == 32 && cols == 32) {
                tt__pack_kmajor_avx512(j->B + n0 * j->csb, j->csb, 32, j->K, dst);
                continue;
            }
            for (int64_t cc = 0; cc < nr; cc++) {
                if (cc < cols) {
                    const float *src = j->B + (n0 + cc) * j->csb;
                    for (int64_t k = 0; k < j->K; k++) dst[k * nr + cc] = src[k];
                } else {
                    for (int64_t k = 0; k < j->K; k++) dst[k * nr + cc] = 0.0f;
                }
            }
            continue;
        }
        for (int64_t k = 0; k < j->K; k++) {
            const float *src = j->B + k * j->rsb + n0 * j->csb;
            float *d = dst + k * nr;
            if (j->csb == 1 && cols == nr) {
                memcpy(d, src, nr * sizeof(float));
            } else {
                int64_t cc = 0;
                for (; cc < cols; cc++) d[cc] = src[cc * j->csb];
                for (; cc < nr; cc++) d[cc] = 0.0f;
            }
        }
    }
}

static void gemm_tile(const gemm_job *j, int64_t ti, float *ap) {
    int64_t m0 = ti * j->mb;
    int64_t mb = j->M - m0 < j->mb ? j->M - m0 : j->mb;
    if (j->K == 0) {
        if (!j->acc)
            for (int64_t m = 0; m < mb; m++) memset(j->C + (m0 + m) * j->ldc, 0, (size_t)j->N * sizeof(float));
        return;
    }
    for (int64_t k0 = 0; k0 < j->K; k0 += KC) {
        int64_t kc = j->K - k0 < KC ? j->K - k0 : KC;
        pack_a(j, m0, mb, k0, kc, ap);
        int acc = j->acc || k0 > 0;
        for (int64_t p = 0; p < j->np; p++) {
            int nr = (int)(j->N - p * j->nr < j->nr ? j->N - p * j->nr : j->nr);
            const float *b = j->bp + p * j->K * j->nr + k0 * j->nr;
            for (int64_t ir = 0; ir < mb; ir += j->mr) {
                int mr = (int)(mb - ir < j->mr ? mb - ir : j->mr);
                float *c = j->C + (m0 + ir) * j->ldc + p * j->nr;
                j->ukr(kc, ap + ir * kc, b, c, j->ldc, acc, mr, nr);
            }
        }
    }
}

static void gemm_task(void *arg, int ith, int nth) {
    const gemm_job *j = arg;
    float ap[MB * KC] __attribute__((aligned(64))); /* [mb / mr][kc][mr] */
    for (int64_t t = ith; t < j->tm; t += nth) gemm_tile(j, t, ap);
}

void tt_gemm_f32(tl_threadpool *tp, int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa,
                 int64_t csa, const float *B, int64_t rsb, int64_t csb, float *C, int64_t ldc,
                 bool accumulate) {
    if (M <= 0 || N <= 0) return;
    int nth = tp ? tl_threadpool_size(tp) : 1;
    bool par = nth > 1 && (double)M * N * K >= 64.0 * 64 * 64;
    /* M tiles: at most MB rows, and enough tiles (4 per thread) to balance */
    int mr = 6, nr = 16;
    ukr_fn ukr = ukr_scalar;
    if (tl_cpu_use_avx512()) {
        mr = 12, nr = 32, ukr = tt__ukr_12x32_avx512;
    } else if (tl_cpu_use_avx2()) {
        ukr = tt__ukr_6x16_avx2;
    }
    int64_t mb = par ? (M + 4 * nth - 1) / (4 * nth) : MB;
    mb = (mb + mr - 1) / mr * mr;
    if (mb > MB) mb = MB;
    if (mb < mr) mb = mr;
    gemm_job j = {M, N, K, A, B, rsa, csa, rsb, csb, ldc, C, accumulate, mb, (M + mb - 1) / mb,
                  (N + nr - 1) / nr, NULL, mr, nr, ukr};
    size_t bytes = (size_t)(j.np * (K > 0 ? K : 1) * nr) * sizeof(float);
    j.bp = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!j.bp) { /* no memory for packing: plain loop, slow but correct */
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                float s = 0;
                for (int64_t k = 0; k < K; k++) s += A[m * rsa + k * csa] * B[k * rsb + n * csb];
                C[m * ldc + n] = accumulate ? C[m * ldc + n] + s : s;
            }
        return;
    }
    if (par) {
        tl_threadpool_run(tp, pack_b_task, &j);
        tl_threadpool_run(tp, gemm_task, &j);
    } else {
        pack_b_task(&j, 0, 1);
        gemm_task(&j, 0, 1);
    }
    free(j.bp);
}

void tt_gemm_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t rsa, int64_t csa,
                 const double *B, int64_t rsb, int64_t csb, double *C, int64_t ldc, bool accumulate) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += A[m * rsa + k * csa] * B[k * rsb + n * csb];
            C[m * ldc + n] = accumulate ? C[m * ldc + n] + s : s;
        }
}
