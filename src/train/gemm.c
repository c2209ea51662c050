/* train/gemm: the matmul every training op uses (forward and backward), on
 * arbitrary strides so transposes cost no copy.
 * f32: each of the pool's threads takes a contiguous share of C's
 * micro-rows (or of its B panels, where that balances better) and walks it
 * in tiles of <= MB rows; per tile, K runs in KC slices and a
 * register-blocked micro-kernel does the FLOPs: 12x32 with AVX-512, 6x16
 * with AVX2/FMA, 6x16 scalar elsewhere (chosen per call from base/cpu). The
 * kernels read A and B where they lie when the layout allows (A^T k-major,
 * A's rows with the AVX-512 kernel, B's rows when unit-stride); other
 * panels, and edge panels, are packed zero-padded. Each C element's K sum
 * runs in one fixed order whatever the thread count, so results are
 * deterministic (resume relies on this); the AVX-512 and AVX2 kernels share
 * that order and give the same bits. f64 (gradient checks only) is a plain
 * loop.
 * Owns: nothing (A edge panels on the stack, packed B per call). Calls: base/cpu, threadpool. */
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "train/tt_internal.h"

#define KC TT_GEMM_KC
#define MB 96 /* a multiple of every kernel's mr */

/* a: A k-major, element (r, k) at a[k * lda + r] (a packed panel: lda = mr),
 * or for the _rows kernel A in place, (r, k) at a[r * lda + k]; b: element
 * (k, j) at b[k * ldb + j] (a packed panel: ldb = nr, or B's rows in
 * place); writes (acc: adds to) an mr x nr block of C. */
typedef void (*ukr_fn)(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                       int64_t ldc, int acc, int mr, int nr);

void tt__ukr_6x16_avx2(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                       int64_t ldc, int acc, int mr, int nr);
void tt__ukr_12x32_avx512(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                          int64_t ldc, int acc, int mr, int nr);
void tt__ukr_12x32_rows_avx512(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                               int64_t ldc, int acc, int mr, int nr);
void tt__pack_kmajor_avx512(const float *src, int64_t ld, int rows, int R, int64_t kc, float *dst);

#define MR 6
#define NR 16
static void ukr_scalar(int64_t kc, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                       int64_t ldc, int acc, int mr, int nr) {
    float t[MR * NR] = {0};
    for (int64_t k = 0; k < kc; k++)
        for (int r = 0; r < MR; r++)
            for (int j = 0; j < NR; j++) t[r * NR + j] += a[k * lda + r] * b[k * ldb + j];
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < nr; j++) c[r * ldc + j] = acc ? c[r * ldc + j] + t[r * NR + j] : t[r * NR + j];
}

typedef struct gemm_job {
    int64_t M, N, K;
    const float *A, *B;
    int64_t rsa, csa, rsb, csb, ldc;
    float *C;
    bool acc;
    int64_t np;         /* nr-wide B panels */
    bool split_n;       /* threads split the B panels (else the rows) */
    float *bp;          /* packed B: [np][K][nr], zero-padded (panels not read in place) */
    bool b_rows;        /* B's rows are unit-stride: full panels are read in place */
    int mr, nr;         /* the micro-kernel's tile */
    ukr_fn ukr, ukr_rows; /* ukr_rows: reads row-major A in place (NULL: pack it) */
} gemm_job;

/* A rows [m0, m0+rows) x k [k0, k0+kc) into one micro-panel [kc][mr],
 * rows past `rows` zero (used where the kernel cannot read A in place). */
static void pack_a(const gemm_job *j, int64_t m0, int64_t rows, int64_t k0, int64_t kc, float *dst) {
    const int64_t mr = j->mr;
    if (j->csa == 1 && rows == 6 && mr == 6) { /* six row streams, sequential writes */
        const float *s0 = j->A + m0 * j->rsa + k0, *s1 = s0 + j->rsa, *s2 = s1 + j->rsa, *s3 = s2 + j->rsa,
                    *s4 = s3 + j->rsa, *s5 = s4 + j->rsa;
        for (int64_t k = 0; k < kc; k++) {
            float *d = dst + k * 6;
            d[0] = s0[k];
            d[1] = s1[k];
            d[2] = s2[k];
            d[3] = s3[k];
            d[4] = s4[k];
            d[5] = s5[k];
        }
        return;
    }
    for (int64_t r = 0; r < mr; r++) {
        const float *src = r < rows ? j->A + (m0 + r) * j->rsa + k0 * j->csa : NULL;
        if (!src)
            for (int64_t k = 0; k < kc; k++) dst[k * mr + r] = 0.0f;
        else if (j->csa == 1)
            for (int64_t k = 0; k < kc; k++) dst[k * mr + r] = src[k];
        else
            for (int64_t k = 0; k < kc; k++) dst[k * mr + r] = src[k * j->csa];
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
        if (j->b_rows && cols == nr) continue;
        if (j->rsb == 1 && j->csb != 1) { /* B read through a transpose: contiguous along k */
            if (nr == 32) {
                tt__pack_kmajor_avx512(j->B + n0 * j->csb, j->csb, (int)cols, 32, j->K, dst);
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

/* C rows [m0, m0 + mb) (mb <= MB) x B panels [p0, p1) */
static void gemm_tile(const gemm_job *j, int64_t m0, int64_t mb, int64_t p0, int64_t p1, float *ap) {
    if (j->K == 0) {
        if (!j->acc)
            for (int64_t m = 0; m < mb; m++) {
                int64_t n1 = p1 * j->nr < j->N ? p1 * j->nr : j->N;
                memset(j->C + (m0 + m) * j->ldc + p0 * j->nr, 0, (size_t)(n1 - p0 * j->nr) * sizeof(float));
            }
        return;
    }
    int64_t nmr = (mb + j->mr - 1) / j->mr;
    const float *as[MB / 6]; /* per micro-row: its A (in place or packed), lda and kernel */
    int64_t lda[MB / 6];
    ukr_fn fn[MB / 6];
    for (int64_t k0 = 0; k0 < j->K; k0 += KC) {
        int64_t kc = j->K - k0 < KC ? j->K - k0 : KC;
        for (int64_t i = 0; i < nmr; i++) {
            int64_t r0 = m0 + i * j->mr, rows = mb - i * j->mr < j->mr ? mb - i * j->mr : j->mr;
            fn[i] = j->ukr;
            if (rows == j->mr && j->rsa == 1) { /* A^T: each k's rows are contiguous, k-major in place */
                as[i] = j->A + r0 + k0 * j->csa, lda[i] = j->csa;
            } else if (rows == j->mr && j->csa == 1 && j->ukr_rows) {
                as[i] = j->A + r0 * j->rsa + k0, lda[i] = j->rsa, fn[i] = j->ukr_rows;
            } else {
                pack_a(j, r0, rows, k0, kc, ap + i * j->mr * kc);
                as[i] = ap + i * j->mr * kc, lda[i] = j->mr;
            }
        }
        int acc = j->acc || k0 > 0;
        for (int64_t p = p0; p < p1; p++) {
            int nr = (int)(j->N - p * j->nr < j->nr ? j->N - p * j->nr : j->nr);
            const float *b = j->bp + p * j->K * j->nr + k0 * j->nr;
            int64_t ldb = j->nr;
            if (j->b_rows && nr == j->nr) b = j->B + k0 * j->rsb + p * j->nr, ldb = j->rsb;
            for (int64_t i = 0; i < nmr; i++) {
                int mr = (int)(mb - i * j->mr < j->mr ? mb - i * j->mr : j->mr);
                fn[i](kc, as[i], lda[i], b, ldb, j->C + (m0 + i * j->mr) * j->ldc + p * j->nr, j->ldc, acc, mr,
                      nr);
            }
        }
    }
}

/* Thread ith of nth takes a contiguous share of the micro-rows (split_n:
 * of the B panels, with every row) and walks it in tiles of <= MB rows. */
static void gemm_task(void *arg, int ith, int nth) {
    const gemm_job *j = arg;
    float ap[MB * KC] __attribute__((aligned(64))); /* edge micro-panels: [mb / mr][kc][mr] */
    int64_t nmr = (j->M + j->mr - 1) / j->mr;
    int64_t r0 = 0, r1 = nmr, p0 = 0, p1 = j->np;
    if (j->split_n)
        p0 = j->np * ith / nth, p1 = j->np * (ith + 1) / nth;
    else
        r0 = nmr * ith / nth, r1 = nmr * (ith + 1) / nth;
    if (p0 >= p1) return;
    for (int64_t r = r0; r < r1; r += MB / j->mr) {
        int64_t m0 = r * j->mr, m1 = (r + MB / j->mr < r1 ? r + MB / j->mr : r1) * j->mr;
        if (m1 > j->M) m1 = j->M;
        gemm_tile(j, m0, m1 - m0, p0, p1, ap);
    }
}

/* the larger share over the average share when u units go to n threads */
static double split_cost(int64_t u, int n) { return (double)((u + n - 1) / n) * n / (double)u; }

void tt_gemm_f32(tl_threadpool *tp, int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa,
                 int64_t csa, const float *B, int64_t rsb, int64_t csb, float *C, int64_t ldc,
                 bool accumulate) {
    if (M <= 0 || N <= 0) return;
    int nth = tp ? tl_threadpool_size(tp) : 1;
    bool par = nth > 1 && (double)M * N * K >= 64.0 * 64 * 64;
    int mr = 6, nr = 16;
    ukr_fn ukr = ukr_scalar, ukr_rows = NULL;
    if (tl_cpu_use_avx512()) {
        mr = 12, nr = 32, ukr = tt__ukr_12x32_avx512, ukr_rows = tt__ukr_12x32_rows_avx512;
    } else if (tl_cpu_use_avx2()) {
        ukr = tt__ukr_6x16_avx2;
    }
    gemm_job j = {M, N, K, A, B, rsa, csa, rsb, csb, ldc, C, accumulate, (N + nr - 1) / nr, false, NULL, csb == 1,
                  mr, nr, ukr, ukr_rows};
    /* threads split the micro-rows, or the B panels where that balances better */
    if (par) j.split_n = split_cost(j.np, nth) < split_cost((M + mr - 1) / mr, nth);
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
