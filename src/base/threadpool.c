/* A fork-join pool: tl_threadpool_run publishes (fn, arg) with a generation
 * counter; workers spin on the counter for a short while (decode issues
 * hundreds of parallel regions per token, each a few microseconds, so a
 * futex sleep per region would dominate), then fall back to a condition
 * variable so idle pools cost no CPU. */
#include "base/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TP_PAUSE() _mm_pause()
#else
#define TP_PAUSE() ((void)0)
#endif

#define TP_SPIN_ITERS 20000

typedef struct tp_worker {
    struct tl_threadpool *tp;
    int ith;
    pthread_t thread;
} tp_worker;

struct tl_threadpool {
    int n;
    tp_worker *workers;       /* [n-1]; the caller is thread 0 */
    tl_task_fn fn;
    void *arg;
    atomic_uint gen;          /* bumped per run */
    atomic_int pending;       /* workers still running the current task */
    atomic_bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void *tp_main(void *p) {
    tp_worker *w = p;
    struct tl_threadpool *tp = w->tp;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&tp->gen, memory_order_acquire)) == seen &&
               !atomic_load(&tp->stop)) {
            if (++spins < TP_SPIN_ITERS) {
                /* after a short pure spin, let other runnable threads in */
                if (spins > TP_SPIN_ITERS / 10) sched_yield();
                else TP_PAUSE();
                continue;
            }
            pthread_mutex_lock(&tp->mu);
            while (atomic_load(&tp->gen) == seen && !atomic_load(&tp->stop))
                pthread_cond_wait(&tp->cv, &tp->mu);
            pthread_mutex_unlock(&tp->mu);
        }
        if (atomic_load(&tp->stop)) return NULL;
        seen = g;
        tp->fn(tp->arg, w->ith, tp->n);
        atomic_fetch_sub_explicit(&tp->pending, 1, memory_order_release);
    }
}

tl_status tl_threadpool_init(int n_threads, tl_threadpool **out) {
    *out = NULL;
    if (n_threads < 1 || n_threads > 1024)
        return tl_err(TL_ERR_INVALID, "threadpool: %d threads (1..1024 allowed)", n_threads);
    struct tl_threadpool *tp = calloc(1, sizeof *tp);
    if (!tp) return tl_err(TL_ERR_NOMEM, "threadpool: out of memory");
    tp->n = n_threads;
    pthread_mutex_init(&tp->mu, NULL);
    pthread_cond_init(&tp->cv, NULL);
    if (n_threads > 1) {
        tp->workers = calloc((size_t)n_threads - 1, sizeof *tp->workers);
        if (!tp->workers) {
            free(tp);
            return tl_err(TL_ERR_NOMEM, "threadpool: out of memory");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            tp->workers[i].tp = tp;
            tp->workers[i].ith = i + 1;
            if (pthread_create(&tp->workers[i].thread, NULL, tp_main, &tp->workers[i]) != 0) {
                tp->n = i + 1; /* threads 1..i exist */
                tl_threadpool_free(tp);
                return tl_err(TL_ERR_NOMEM, "threadpool: cannot create thread %d", i + 1);
            }
        }
    }
    *out = tp;
    return TL_OK;
}

void tl_threadpool_free(tl_threadpool *tp) {
    if (!tp) return;
    pthread_mutex_lock(&tp->mu);
    atomic_store(&tp->stop, true);
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    for (int i = 0; i < tp->n - 1; i++) pthread_join(tp->workers[i].thread, NULL);
    pthread_cond_destroy(&tp->cv);
    pthread_mutex_destroy(&tp->mu);
    free(tp->workers);
    free(tp);
}

int tl_threadpool_size(const tl_threadpool *tp) { return tp ? tp->n : 1; }

void tl_threadpool_run(tl_threadpool *tp, tl_task_fn fn, void *arg) {
    if (!tp || tp->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    tp->fn = fn;
    tp->arg = arg;
    atomic_store(&tp->pending, tp->n - 1);
    pthread_mutex_lock(&tp->mu);
    atomic_fetch_add_explicit(&tp->gen, 1, memory_order_release);
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    fn(arg, 0, tp->n);
    /* spin while the others are likely to finish within microseconds; then
     * yield, so an oversubscribed machine can run the worker we wait for */
    for (int spins = 0; atomic_load_explicit(&tp->pending, memory_order_acquire) > 0; spins++) {
        if (spins < TP_SPIN_ITERS / 10) TP_PAUSE();
        else sched_yield();
    }
}
