/* backend/cpu/lowrank: see lowrank.h. At the ranks adapters use (1-64) the
 * two products are about 2 r (n_in + n_out) flops per row, a few percent of
 * the base product, and stream A and B once per term while the gathered
 * rows stay in cache. Each dot is the f32 dot kernel of the CPU's level (the
 * quant table's F32 entry: AVX2/AVX-512 where the CPU has them), one dot per
 * output, so the result does not depend on the thread count. */
#include "backend/cpu/lowrank.h"
#include "quant/quant.h"

typedef struct lr_job {
    const be_lowrank_term *t;
    int64_t n_in;
    const float *x;
    int64_t ldx;
    float *y;
    int64_t ldy;
    float *tmp;
    quant_vec_dot_fn dot;
} lr_job;

/* (row, rank) pairs split over threads */
static void lr_shrink(void *arg, int ith, int nth) {
    const lr_job *j = arg;
    const int32_t rank = j->t->rank;
    const int64_t n = (int64_t)j->t->n_rows * rank, n_in = j->n_in;
    for (int64_t q = n * ith / nth; q < n * (ith + 1) / nth; q++)
        j->dot(n_in, &j->tmp[q], j->t->a + (q % rank) * n_in, j->x + (int64_t)j->t->rows[q / rank] * j->ldx);
}

/* outputs split over threads */
static void lr_expand(void *arg, int ith, int nth) {
    const lr_job *j = arg;
    const int32_t rank = j->t->rank;
    const int64_t n_out = j->t->n_out;
    for (int64_t o = n_out * ith / nth; o < n_out * (ith + 1) / nth; o++) {
        const float *b = j->t->b + o * rank;
        for (int32_t i = 0; i < j->t->n_rows; i++) {
            float acc;
            j->dot(rank, &acc, b, j->tmp + (int64_t)i * rank);
            j->y[(int64_t)j->t->rows[i] * j->ldy + o] += j->t->scale * acc;
        }
    }
}

void cpu_lowrank_term(tl_threadpool *tp, const be_lowrank_term *t, int64_t n_in, const float *x, int64_t ldx,
                      float *y, int64_t ldy, float *tmp) {
    if (!t->rank || !t->n_rows || t->scale == 0.0f) return;
    lr_job j = {t, n_in, x, ldx, y, ldy, tmp, quant_kernels_get(TL_TYPE_F32)->vec_dot};
    /* waking the pool costs a few microseconds: worth it from ~1M multiply-adds */
    const double work = (double)t->n_rows * t->rank * (double)(n_in + t->n_out);
    if (tp && work >= 1e6) {
        tl_threadpool_run(tp, lr_shrink, &j);
        tl_threadpool_run(tp, lr_expand, &j);
    } else {
        lr_shrink(&j, 0, 1);
        lr_expand(&j, 0, 1);
    }
}
