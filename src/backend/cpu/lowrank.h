/* backend/cpu/lowrank: the CPU backend's low-rank terms of a linear (LoRA):
 * for each term, over its gathered rows,
 *   shrink  tmp[i][r] = A[r] . x[rows[i]]
 *   expand  y[rows[i]][o] += scale * B[o] . tmp[i]
 * split over the thread pool when the work pays for the fork.
 * Owns nothing. Calls: base/threadpool. */
#ifndef TL_BACKEND_CPU_LOWRANK_H
#define TL_BACKEND_CPU_LOWRANK_H

#include "backend/backend.h"
#include "base/threadpool.h"

/* One term: x [.][ldx] (n_in used), y [.][ldy] with the term's outputs
 * starting at column 0 of y (the caller offsets y by col0 within its part). */
void cpu_lowrank_term(tl_threadpool *tp, const be_lowrank_term *t, int64_t n_in, const float *x, int64_t ldx,
                      float *y, int64_t ldy, float *tmp);

#endif
