/* base/threadpool: a persistent pool of worker threads for data-parallel
 * loops. Workers spin briefly then sleep on a condition variable, so the
 * decode loop (hundreds of small parallel regions per token) pays no thread
 * creation and little wake-up latency. Owns: its threads. Calls: pthreads. */
#ifndef TL_BASE_THREADPOOL_H
#define TL_BASE_THREADPOOL_H

#include "base/status.h"

typedef struct tl_threadpool tl_threadpool;

/* fn(arg, ith, nth): thread ith of nth does its share. */
typedef void (*tl_task_fn)(void *arg, int ith, int nth);

tl_status tl_threadpool_init(int n_threads, tl_threadpool **out);
void tl_threadpool_free(tl_threadpool *tp);
int tl_threadpool_size(const tl_threadpool *tp);
/* Run fn on all n threads (the caller is thread 0) and wait for all. */
void tl_threadpool_run(tl_threadpool *tp, tl_task_fn fn, void *arg);

#endif
