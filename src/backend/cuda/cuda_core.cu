/* backend/cuda/cuda_core: context (device, stream, cuBLAS), device memory
 * with out-of-memory messages, arenas, graphs, timers and the two ceiling
 * probes (copy bandwidth, GEMM rate) the benchmarks divide by.
 * Calls: CUDA runtime, cuBLAS, base/status. */
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_common.cuh"

/* a tuning count that must be a power of two up to max, or (zero_ok) 0 */
static tl_status tune_pow2(const char *field, int32_t v, int32_t max, bool zero_ok) {
    if ((v == 0 && zero_ok) || (v >= 1 && v <= max && !(v & (v - 1)))) return TL_OK;
    return tl_err(TL_ERR_INVALID, "cuda tuning: %s is %d (a power of two up to %d%s)", field, (int)v, (int)max,
                  zero_ok ? ", or 0" : "");
}

static tl_status tune_check(const tl_cuda_tuning *t) {
    if (t->att_split_min < 1 || t->att_split_min > 4096)
        return tl_err(TL_ERR_INVALID, "cuda tuning: att_split_min is %d (1..4096)", (int)t->att_split_min);
    tl_status s = tune_pow2("mv_store_units", t->mv_store_units, 8, true);
    if (!s) s = tune_pow2("mv_glu_units", t->mv_glu_units, 8, true);
    if (!s) s = tune_pow2("mv_split_max", t->mv_split_max, 4, false);
    if (!s && (t->mvm_max_tokens < 0 || t->mvm_max_tokens > TLC_MVM_MAX))
        s = tl_err(TL_ERR_INVALID, "cuda tuning: mvm_max_tokens is %d (0..%d)", (int)t->mvm_max_tokens, TLC_MVM_MAX);
    return s;
}

tl_status tlc_init(int device, const tl_cuda_tuning *tune, tlc_ctx **out) {
    *out = NULL;
    const tl_cuda_tuning t = tune ? *tune : tl_cuda_tuning_default();
    tl_status ts = tune_check(&t);
    if (ts) return ts;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        return tl_err(TL_ERR_BACKEND, "cuda: no usable device (%s)",
                      e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0");
    if (device < 0 || device >= n)
        return tl_err(TL_ERR_INVALID, "cuda: device %d out of range (%d devices)", device, n);
    TLC_TRY(cudaSetDevice(device), "set device");
    tlc_ctx *c = (tlc_ctx *)calloc(1, sizeof *c);
    if (!c) return tl_err(TL_ERR_NOMEM, "cuda: context");
    c->device = device;
    c->pdl = t.pdl;
    c->flash = t.flash_prefill;
    c->att_chunk = t.att_split_min;
    c->mv_store_u = t.mv_store_units;
    c->mv_glu_u = t.mv_glu_units;
    c->mv_ks = t.mv_split_max;
    c->mvm_max = t.mvm_max_tokens;
    cudaDeviceProp prop;
    if ((e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess) {
        free(c);
        return tlc_cuda_err(e, "device properties");
    }
    c->n_sm = prop.multiProcessorCount;
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        free(c);
        return tlc_cuda_err(e, "stream create");
    }
    cublasStatus_t bs = cublasCreate(&c->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        cudaStreamDestroy(c->stream);
        free(c);
        return tl_err(TL_ERR_BACKEND, "cuda: cublasCreate failed (status %d)", (int)bs);
    }
    cublasSetStream(c->blas, c->stream);
    cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH);
    if ((e = cudaMalloc(&c->mv_cnt, TLC_MV_GROUPS * sizeof(int))) != cudaSuccess ||
        (e = cudaMemset(c->mv_cnt, 0, TLC_MV_GROUPS * sizeof(int))) != cudaSuccess) {
        cudaFree(c->mv_cnt);
        cublasDestroy(c->blas);
        cudaStreamDestroy(c->stream);
        free(c);
        return tlc_cuda_err(e, "matvec epilogue counters");
    }
    c->in_use += TLC_MV_GROUPS * sizeof(int);
    *out = c;
    return TL_OK;
}

void tlc_free(tlc_ctx *c) {
    if (!c) return;
    cudaStreamSynchronize(c->stream);
    cudaFree(c->mv_cnt);
    cublasDestroy(c->blas);
    cudaStreamDestroy(c->stream);
    free(c);
}

tl_status tlc_get_device_info(tlc_ctx *c, tlc_device_info *out) {
    cudaDeviceProp prop;
    TLC_TRY(cudaGetDeviceProperties(&prop, c->device), "device properties");
    snprintf(out->name, sizeof out->name, "%s", prop.name);
    out->n_sm = prop.multiProcessorCount;
    out->l2_bytes = (size_t)prop.l2CacheSize;
    TLC_TRY(cudaMemGetInfo(&out->mem_free, &out->mem_total), "memory info");
    return TL_OK;
}

size_t tlc_bytes_in_use(const tlc_ctx *c) { return c->in_use; }

tl_status tlc_alloc(tlc_ctx *c, size_t bytes, const char *what, void **out) {
    *out = NULL;
    if (bytes == 0) bytes = 256;
    cudaError_t e = cudaMalloc(out, bytes);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky-free allocation error */
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        *out = NULL;
        return tl_err(e == cudaErrorMemoryAllocation ? TL_ERR_NOMEM : TL_ERR_BACKEND,
                      "cuda: allocating %zu bytes (%.2f GiB) for %s failed: %s; %zu bytes "
                      "(%.2f GiB) free of %.2f GiB, %.2f GiB held by tallow",
                      bytes, bytes / 1073741824.0, what ? what : "?", cudaGetErrorString(e), fr,
                      fr / 1073741824.0, tot / 1073741824.0, c->in_use / 1073741824.0);
    }
    c->in_use += bytes;
    return TL_OK;
}

void tlc_dfree(tlc_ctx *c, void *p, size_t bytes) {
    if (!p) return;
    cudaFree(p);
    c->in_use -= std::min(c->in_use, bytes ? bytes : (size_t)256);
}

tl_status tlc_upload(tlc_ctx *c, void *dst, const void *src, size_t bytes) {
    TLC_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream), "upload");
    TLC_TRY(cudaStreamSynchronize(c->stream), "upload (sync)");
    return TL_OK;
}

tl_status tlc_download(tlc_ctx *c, void *dst, const void *src, size_t bytes) {
    TLC_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream), "download");
    TLC_TRY(cudaStreamSynchronize(c->stream), "download (sync)");
    return TL_OK;
}

tl_status tlc_upload_async(tlc_ctx *c, void *dst, const void *src, size_t bytes) {
    TLC_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream), "upload");
    return TL_OK;
}

tl_status tlc_download_async(tlc_ctx *c, void *dst, const void *src, size_t bytes) {
    TLC_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream), "download");
    return TL_OK;
}

tl_status tlc_memset(tlc_ctx *c, void *dst, int v, size_t bytes) {
    TLC_TRY(cudaMemsetAsync(dst, v, bytes, c->stream), "memset");
    return TL_OK;
}

tl_status tlc_sync(tlc_ctx *c) {
    TLC_TRY(cudaStreamSynchronize(c->stream), "stream sync (an earlier kernel failed)");
    return TL_OK;
}

void *tlc_stream_of(tlc_ctx *c) { return (void *)c->stream; }

tl_status tlc_host_alloc(size_t bytes, void **out) {
    *out = NULL;
    TLC_TRY(cudaHostAlloc(out, bytes, cudaHostAllocDefault), "pinned host allocation");
    return TL_OK;
}

void tlc_host_free(void *p) {
    if (p) cudaFreeHost(p);
}

tl_status tlc_arena_init(tlc_ctx *c, tlc_arena *a, size_t bytes, const char *what) {
    a->base = NULL;
    a->size = a->used = 0;
    void *p;
    tl_status s = tlc_alloc(c, bytes, what, &p);
    if (s) return s;
    a->base = (uint8_t *)p;
    a->size = bytes;
    return TL_OK;
}

tl_status tlc_arena_push(tlc_arena *a, size_t bytes, const char *what, void **out) {
    size_t off = (a->used + 255) & ~(size_t)255;
    if (off > a->size || bytes > a->size - off) {
        *out = NULL;
        return tl_err(TL_ERR_NOMEM, "cuda: arena full: %s needs %zu bytes, %zu of %zu used",
                      what ? what : "?", bytes, a->used, a->size);
    }
    *out = a->base + off;
    a->used = off + bytes;
    return TL_OK;
}

void tlc_arena_free(tlc_ctx *c, tlc_arena *a) {
    tlc_dfree(c, a->base, a->size);
    a->base = NULL;
    a->size = a->used = 0;
}

/* ---- graphs --------------------------------------------------------------- */

struct tlc_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
};

tl_status tlc_graph_begin(tlc_ctx *c) {
    TLC_TRY(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal), "graph capture begin");
    c->capturing = true;
    return TL_OK;
}

tl_status tlc_graph_end(tlc_ctx *c, tlc_graph **out) {
    *out = NULL;
    cudaGraph_t g;
    c->capturing = false;
    TLC_TRY(cudaStreamEndCapture(c->stream, &g), "graph capture end");
    cudaGraphExec_t ex;
    cudaError_t e = cudaGraphInstantiate(&ex, g, 0);
    if (e != cudaSuccess) {
        cudaGraphDestroy(g);
        return tlc_cuda_err(e, "graph instantiate");
    }
    tlc_graph *gr = (tlc_graph *)malloc(sizeof *gr);
    if (!gr) {
        cudaGraphExecDestroy(ex);
        cudaGraphDestroy(g);
        return tl_err(TL_ERR_NOMEM, "cuda: graph");
    }
    gr->graph = g;
    gr->exec = ex;
    *out = gr;
    return TL_OK;
}

tl_status tlc_graph_launch(tlc_ctx *c, tlc_graph *g) {
    TLC_TRY(cudaGraphLaunch(g->exec, c->stream), "graph launch");
    return TL_OK;
}

void tlc_graph_free(tlc_graph *g) {
    if (!g) return;
    cudaGraphExecDestroy(g->exec);
    cudaGraphDestroy(g->graph);
    free(g);
}

/* ---- timers and probes -------------------------------------------------- */

struct tlc_timer {
    cudaEvent_t a, b;
};

tl_status tlc_timer_init(tlc_timer **out) {
    tlc_timer *t = (tlc_timer *)calloc(1, sizeof *t);
    if (!t) return tl_err(TL_ERR_NOMEM, "cuda: timer");
    TLC_TRY(cudaEventCreate(&t->a), "event create");
    TLC_TRY(cudaEventCreate(&t->b), "event create");
    *out = t;
    return TL_OK;
}

void tlc_timer_free(tlc_timer *t) {
    if (!t) return;
    cudaEventDestroy(t->a);
    cudaEventDestroy(t->b);
    free(t);
}

tl_status tlc_timer_start(tlc_ctx *c, tlc_timer *t) {
    TLC_TRY(cudaEventRecord(t->a, c->stream), "event record");
    return TL_OK;
}

tl_status tlc_timer_stop(tlc_ctx *c, tlc_timer *t, double *ms) {
    TLC_TRY(cudaEventRecord(t->b, c->stream), "event record");
    TLC_TRY(cudaEventSynchronize(t->b), "event sync");
    float f = 0;
    TLC_TRY(cudaEventElapsedTime(&f, t->a, t->b), "event elapsed");
    *ms = f;
    return TL_OK;
}

__global__ void tlc_fill_random_k(uint32_t *p, size_t n, uint32_t seed) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
        p[i] = x;
    }
}

/* random f16 in [-1, 1): exponent bits forced so values stay finite */
__global__ void tlc_fill_half_k(__half *p, size_t n, uint32_t seed) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t x = (uint32_t)i * 2654435761u ^ seed;
        x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
        p[i] = __float2half(((x >> 8) * (1.0f / 16777216.0f)) * 2.0f - 1.0f);
    }
}

tl_status tlc_measure_copy_bw(tlc_ctx *c, size_t bytes, int reps, double *gbps) {
    void *a, *b;
    tl_status s = tlc_alloc(c, bytes, "copy probe (src)", &a);
    if (s) return s;
    if ((s = tlc_alloc(c, bytes, "copy probe (dst)", &b))) {
        tlc_dfree(c, a, bytes);
        return s;
    }
    tlc_fill_random_k<<<1024, 256, 0, c->stream>>>((uint32_t *)a, bytes / 4, 1234u);
    std::vector<float> t;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int i = 0; i < reps + 3; i++) {
        cudaEventRecord(e0, c->stream);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, c->stream);
        cudaEventRecord(e1, c->stream);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (i >= 3) t.push_back(ms);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaError_t e = cudaGetLastError();
    tlc_dfree(c, a, bytes);
    tlc_dfree(c, b, bytes);
    if (e != cudaSuccess) return tlc_cuda_err(e, "copy probe");
    std::sort(t.begin(), t.end());
    *gbps = 2.0 * bytes / (t[t.size() / 2] * 1e-3) / 1e9;
    return TL_OK;
}

tl_status tlc_measure_gemm(tlc_ctx *c, int dim, int reps, double *tflops) {
    size_t n = (size_t)dim * dim;
    void *a, *b, *d;
    tl_status s;
    if ((s = tlc_alloc(c, n * 2, "gemm probe", &a))) return s;
    if ((s = tlc_alloc(c, n * 2, "gemm probe", &b))) {
        tlc_dfree(c, a, n * 2);
        return s;
    }
    if ((s = tlc_alloc(c, n * 2, "gemm probe", &d))) {
        tlc_dfree(c, a, n * 2);
        tlc_dfree(c, b, n * 2);
        return s;
    }
    tlc_fill_half_k<<<1024, 256, 0, c->stream>>>((__half *)a, n, 1u);
    tlc_fill_half_k<<<1024, 256, 0, c->stream>>>((__half *)b, n, 2u);
    float alpha = 1.0f, beta = 0.0f;
    std::vector<float> t;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cublasStatus_t bs = CUBLAS_STATUS_SUCCESS;
    for (int i = 0; i < reps + 3 && bs == CUBLAS_STATUS_SUCCESS; i++) {
        cudaEventRecord(e0, c->stream);
        bs = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, dim, dim, dim, &alpha, a, CUDA_R_16F,
                          dim, b, CUDA_R_16F, dim, &beta, d, CUDA_R_16F, dim, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT);
        cudaEventRecord(e1, c->stream);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (i >= 3) t.push_back(ms);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    tlc_dfree(c, a, n * 2);
    tlc_dfree(c, b, n * 2);
    tlc_dfree(c, d, n * 2);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return tl_err(TL_ERR_BACKEND, "cuda: gemm probe: cublasGemmEx status %d", (int)bs);
    std::sort(t.begin(), t.end());
    *tflops = 2.0 * dim * (double)dim * dim / (t[t.size() / 2] * 1e-3) / 1e12;
    return TL_OK;
}
