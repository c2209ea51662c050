/* backend/cuda/cuda_prof: op-level timing on one stream, for profile runs
 * (the device machines have no Nsight Systems). A mark records an event
 * after the work queued so far; the interval since the previous mark is
 * charged to the mark's (name, detail). Events are recorded without waiting;
 * tlc_prof_collect waits for the last one and adds the intervals up (the
 * last event then starts the next chain), so the cost is one event per op
 * and one wait per collect. Kernels launched with
 * programmatic dependent launch lose their overlap across a mark, so a
 * profile run is a little slower than a plain one and its table is for
 * finding where time goes, not for quoting speed.
 * Owns: its events and totals. Calls: CUDA runtime. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "backend/cuda/cuda_backend.h"

#define PROF_EVENTS 8192 /* marks between collects (more are dropped and counted) */
#define PROF_KEYS 256

typedef struct prof_key {
    const char *name;
    int detail;
    double ms;
    int64_t count;
} prof_key;

struct tlc_prof {
    cudaEvent_t ev[PROF_EVENTS];
    int key_of[PROF_EVENTS]; /* the key charged for the interval ending at ev[i] */
    int n_ev, n_created;
    int64_t dropped;
    prof_key keys[PROF_KEYS];
    int n_keys;
};

tl_status tlc_prof_init(tlc_prof **out) {
    tlc_prof *p = (tlc_prof *)calloc(1, sizeof *p);
    if (!p) return tl_err(TL_ERR_NOMEM, "cuda profile: %zu bytes", sizeof *p);
    *out = p;
    return TL_OK;
}

void tlc_prof_free(tlc_prof *p) {
    if (!p) return;
    for (int i = 0; i < p->n_created; i++) cudaEventDestroy(p->ev[i]);
    free(p);
}

static int prof_key_index(tlc_prof *p, const char *name, int detail) {
    for (int i = 0; i < p->n_keys; i++)
        if (p->keys[i].detail == detail && !strcmp(p->keys[i].name, name)) return i;
    if (p->n_keys == PROF_KEYS) return PROF_KEYS - 1; /* the last key takes the overflow */
    p->keys[p->n_keys] = (prof_key){name, detail, 0.0, 0};
    return p->n_keys++;
}

void tlc_prof_mark(tlc_prof *p, void *stream, const char *name, int detail) {
    if (!p) return;
    if (p->n_ev == PROF_EVENTS) {
        p->dropped++;
        return;
    }
    if (p->n_ev == p->n_created) {
        if (cudaEventCreate(&p->ev[p->n_ev]) != cudaSuccess) {
            cudaGetLastError();
            p->dropped++;
            return;
        }
        p->n_created++;
    }
    p->key_of[p->n_ev] = prof_key_index(p, name, detail);
    cudaEventRecord(p->ev[p->n_ev], (cudaStream_t)stream);
    p->n_ev++;
}

tl_status tlc_prof_collect(tlc_prof *p) {
    if (!p || !p->n_ev) return TL_OK;
    cudaError_t e = cudaEventSynchronize(p->ev[p->n_ev - 1]);
    for (int i = 1; i < p->n_ev && e == cudaSuccess; i++) {
        float ms = 0;
        e = cudaEventElapsedTime(&ms, p->ev[i - 1], p->ev[i]);
        p->keys[p->key_of[i]].ms += ms;
        p->keys[p->key_of[i]].count++;
    }
    /* the last event starts the next chain, so no interval is lost */
    cudaEvent_t last = p->ev[p->n_ev - 1];
    p->ev[p->n_ev - 1] = p->ev[0];
    p->ev[0] = last;
    p->n_ev = 1;
    if (e != cudaSuccess) return tl_err(TL_ERR_BACKEND, "cuda profile: %s", cudaGetErrorString(e));
    return TL_OK;
}

void tlc_prof_reset(tlc_prof *p) {
    if (!p) return;
    p->n_keys = 0;
    p->dropped = 0;
}

static int prof_cmp(const void *a, const void *b) {
    const double x = ((const prof_key *)a)->ms, y = ((const prof_key *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

int tlc_prof_report(const tlc_prof *p, char *buf, size_t n) {
    if (!p || !n) return 0;
    prof_key k[PROF_KEYS];
    memcpy(k, p->keys, sizeof(prof_key) * (size_t)p->n_keys);
    qsort(k, (size_t)p->n_keys, sizeof *k, prof_cmp);
    double total = 0;
    for (int i = 0; i < p->n_keys; i++) total += k[i].ms;
    size_t o = 0;
    int w = snprintf(buf, n, "%-28s %8s %10s %10s %6s\n", "op [detail]", "count", "total ms", "mean us", "share");
    o = w > 0 ? (size_t)w : 0;
    for (int i = 0; i < p->n_keys && o < n; i++) {
        char label[64];
        if (k[i].detail >= 0) snprintf(label, sizeof label, "%s [%d]", k[i].name, k[i].detail);
        else snprintf(label, sizeof label, "%s", k[i].name);
        w = snprintf(buf + o, n - o, "%-28s %8lld %10.3f %10.2f %5.1f%%\n", label, (long long)k[i].count, k[i].ms,
                     k[i].count ? 1e3 * k[i].ms / (double)k[i].count : 0.0, total > 0 ? 100.0 * k[i].ms / total : 0.0);
        if (w > 0) o += (size_t)w;
    }
    if (o < n && p->dropped) {
        w = snprintf(buf + o, n - o, "(%lld marks dropped: more than %d between collects)\n", (long long)p->dropped,
                     PROF_EVENTS);
        if (w > 0) o += (size_t)w;
    }
    return (int)(o < n ? o : n - 1);
}
