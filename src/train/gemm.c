/* train/gemm: the matmul every training op uses (forward and backward), on
 * arbitrary strides so transposes cost no copy.
 * f32: C is cut into MB x NB tiles handed round-robin to the pool's threads;
 * per tile, K runs in KC slices: A and B slices are packed into micro-panels
 * (zero-padded) and a 6x16 register-blocked micro-kernel (AVX2/FMA when the
 * CPU has it) does the FLOPs. Each C element's K sum runs in one fixed order
 * whatever the thread count, so results are deterministic (resume relies on
 * this). f64 (gradient checks only) is a plain loop.
 * Owns: nothing (packing buffers live on the stack). Calls: base/cpu, threadpool. */
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "train/tt_internal.h"

#define MR 6
#define NR 16
#define KC 256
#define MB 96

void tt__ukr_6x16_avx2(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int acc,
                       int mr, int nr);

static void ukr_scalar(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int acc, int mr,
                       int nr) {
    float t[MR * NR] = {0};
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
    int64_t mb, tm, np; /* rows per M tile, M tiles, 16-wide B panels */
    float *bp;          /* packed B: [np][K][NR], zero-padded */
    bool avx2;
} gemm_job;

static void pack_a(const gemm_job *j, int64_t m0, int64_t mb, int64_t k0, int64_t kc, float *ap) {
    for (int64_t ir = 0; ir < mb; ir += MR) {
        float *dst = ap + (ir / MR) * kc * MR;
        int64_t rows = mb - ir < MR ? mb - ir : MR;
        if (j->rsa == 1 && rows == MR) { /* A read through a transpose: rows are contiguous per k */
            for (int64_t k = 0; k < kc; k++) {
                const float *src = j->A + (m0 + ir) + (k0 + k) * j->csa;
                for (int64_t r = 0; r < MR; r++) dst[k * MR + r] = src[r];
            }
            continue;
        }
        for (int64_t r = 0; r < MR; r++) {
            if (r < rows) {
                const float *src = j->A + (m0 + ir + r) * j->rsa + k0 * j->csa;
                if (j->csa == 1 && rows == MR) { /* six row streams, sequential writes */
                    const float *s0 = src, *s1 = s0 + j->rsa, *s2 = s1 + j->rsa, *s3 = s2 + j->rsa,
                                *s4 = s3 + j->rsa, *s5 = s4 + j->rsa;
                    for (int64_t k = 0; k < kc; k++) {
                        float *d = dst + k * MR;
                        d[0] = s0[k];
                        d[1] = s1[k];
                        d[2] = s2[k];
                        d[3] = s3[k];
                        d[4] = s4[k];
                        d[5] = s5[k];
                    }
                    break;
                }
                if (j->csa == 1)
                    for (int64_t k = 0; k < kc; k++) dst[k * MR + r] = src[k];
                else
                    for (int64_t k = 0; k < kc; k++) dst[k * MR + r] = src[k * j->csa];
            } else {
                for (int64_t k = 0; k < kc; k++) dst[k * MR + r] = 0.0f;
            }
        }
    }
}

/* Pack the whole of B once per call (shared by all threads): panel p holds
 * columns [16p, 16p+16) for every k, so a K slice of a panel is contiguous. */
static void pack_b_task(void *arg, int ith, int nth) {
    const gemm_job *j = arg;
    for (int64_t p = ith; p < j->np; p += nth) {
        float *dst = j->bp + p * j->K * NR;
        int64_t n0 = p * NR, cols = j->N - n0 < NR ? j->N - n0 : NR;
        if (j->rsb == 1 && j->csb != 1) { /* B read through a transpose: contiguous along k */
            for (int64_t cc = 0; cc < NR; cc++) {
                if (cc < cols) {
                    const float *src = j->B + (n0 + cc) * j->csb;
                    for (int64_t k = 0; k < j->K; k++) dst[k * NR + cc] = src[k];
                } else {
                    for (int64_t k = 0; k < j->K; k++) dst[k * NR + cc] = 0.0f;
                }
            }
            continue;
        }
        for (int64_t k = 0; k < j->K; k++) {
            const float *src = j->B + k * j->rsb + n0 * j->csb;
            float *d = dst + k * NR;
            if (j->csb == 1 && cols == NR) {
                memcpy(d, src, NR * sizeof(float));
            } else {
                int64_t cc = 0;
                for (; cc < cols; cc++) d[cc] = src[cc * j->csb];
                for (; cc < NR; cc++) d[cc] = 0.0f;
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
            int nr = (int)(j->N - p * NR < NR ? j->N - p * NR : NR);
            const float *b = j->bp + p * j->K * NR + k0 * NR;
            for (int64_t ir = 0; ir < mb; ir += MR) {
                int mr = (int)(mb - ir < MR ? mb - ir : MR);
                float *c = j->C + (m0 + ir) * j->ldc + p * NR;
                const float *a = ap + (ir / MR) * kc * MR;
                if (j->avx2)
                    tt__ukr_6x16_avx2(kc, a, b, c, j->ldc, acc, mr, nr);
                else
                    ukr_scalar(kc, a, b, c, j->ldc, acc, mr, nr);
            }
        }
    }
}

static void gemm_task(void *arg, int ith, int nth) {
    const gemm_job *j = arg;
    float ap[MB * KC] __attribute__((aligned(64)));
    for (int64_t t = ith; t < j->tm; t += nth) gemm_tile(j, t, ap);
}

void tt_gemm_f32(tl_threadpool *tp, int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa,
                 int64_t csa, const float *B, int64_t rsb, int64_t csb, float *C, int64_t ldc,
                 bool accumulate) {
    if (M <= 0 || N <= 0) return;
    int nth = tp ? tl_threadpool_size(tp) : 1;
    bool par = nth > 1 && (double)M * N * K >= 64.0 * 64 * 64;
    /* M tiles: at most MB rows, and enough tiles (4 per thread) to balance */
    int64_t mb = par ? (M + 4 * nth - 1) / (4 * nth) : MB;
    mb = (mb + MR - 1) / MR * MR;
    if (mb > MB) mb = MB;
    if (mb < MR) mb = MR;
    gemm_job j = {M, N, K, A, B, rsa, csa, rsb, csb, ldc, C, accumulate, mb, (M + mb - 1) / mb,
                  (N + NR - 1) / NR, NULL, tl_cpu_use_avx2()};
    size_t bytes = (size_t)(j.np * (K > 0 ? K : 1) * NR) * sizeof(float);
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
