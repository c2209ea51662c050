/* train/cuda/tcu_core: the stream, memory, host<->device copies (through a
 * pinned staging ring so that an upload never waits on the device), strided
 * copy/add and fill kernels.
 * Owns: the process's tcu_state. Calls: CUDA runtime, cuBLASLt. */
#include <stdio.h>
#include <string.h>

#include <type_traits>

#include "train/cuda/tcu_common.cuh"

static tcu_state g_state;

/* Pinned staging: SLOTS buffers used round-robin; each records an event
 * after its copy, and is waited on only when the ring comes round to it. */
#define SLOTS 8
#define SLOT_BYTES ((size_t)4 << 20)
static char *g_pin[SLOTS];
static cudaEvent_t g_pin_ev[SLOTS];
static int g_pin_next;

tcu_state *tcu_get(void) {
    tcu_state *s = &g_state;
    if (s->ready) return s;
    if (s->failed) return NULL;
    s->failed = true;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) return NULL;
    if (cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking) != cudaSuccess) return NULL;
    if (cublasLtCreate(&s->lt) != CUBLAS_STATUS_SUCCESS) return NULL;
    s->lt_ws_bytes = (size_t)32 << 20;
    if (cudaMalloc(&s->lt_ws, s->lt_ws_bytes) != cudaSuccess) return NULL;
    for (int i = 0; i < SLOTS; i++) {
        if (cudaMallocHost((void **)&g_pin[i], SLOT_BYTES) != cudaSuccess) return NULL;
        if (cudaEventCreateWithFlags(&g_pin_ev[i], cudaEventDisableTiming) != cudaSuccess) return NULL;
    }
    int dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&s->n_sm, cudaDevAttrMultiProcessorCount, dev);
    s->failed = false;
    s->ready = true;
    return s;
}

extern "C" bool tcu_available(void) { return tcu_get() != NULL; }

extern "C" void *tcu_alloc(size_t nbytes) {
    if (!tcu_get()) return NULL;
    void *p = NULL;
    if (cudaMalloc(&p, nbytes ? nbytes : 64) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

extern "C" void tcu_free(void *p) {
    if (p && tcu_get()) cudaFree(p);
}

extern "C" tl_status tcu_zero(void *p, size_t nbytes) {
    TCU_STATE(s);
    return tcu_err(cudaMemsetAsync(p, 0, nbytes, s->stream), "memset");
}

extern "C" tl_status tcu_h2d(void *dst, const void *src, size_t nbytes) {
    TCU_STATE(s);
    const char *sp = (const char *)src;
    char *dp = (char *)dst;
    while (nbytes) {
        size_t n = nbytes < SLOT_BYTES ? nbytes : SLOT_BYTES;
        int k = g_pin_next;
        g_pin_next = (g_pin_next + 1) % SLOTS;
        tl_status st = tcu_err(cudaEventSynchronize(g_pin_ev[k]), "upload slot");
        if (st != TL_OK) return st;
        memcpy(g_pin[k], sp, n);
        st = tcu_err(cudaMemcpyAsync(dp, g_pin[k], n, cudaMemcpyHostToDevice, s->stream), "upload");
        if (st == TL_OK) st = tcu_err(cudaEventRecord(g_pin_ev[k], s->stream), "upload event");
        if (st != TL_OK) return st;
        sp += n;
        dp += n;
        nbytes -= n;
    }
    return TL_OK;
}

extern "C" tl_status tcu_d2h(void *dst, const void *src, size_t nbytes) {
    TCU_STATE(s);
    tl_status st = tcu_err(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, s->stream), "download");
    return st != TL_OK ? st : tcu_err(cudaStreamSynchronize(s->stream), "download");
}

extern "C" tl_status tcu_sync(void) {
    TCU_STATE(s);
    return tcu_err(cudaStreamSynchronize(s->stream), "sync");
}

extern "C" tl_status tcu_memory(size_t *free_bytes, size_t *total_bytes) {
    TCU_STATE(s);
    (void)s;
    return tcu_err(cudaMemGetInfo(free_bytes, total_bytes), "memory info");
}

extern "C" tl_status tcu_check(const char *what) { return tcu_err(cudaGetLastError(), what); }

extern "C" tl_status tcu_profile(bool on) {
    tcu_state *s = tcu_get();
    if (!s) return tl_err(TL_ERR_BACKEND, "train cuda: no CUDA device");
    if (on == (s->prof != NULL)) return TL_OK;
    if (!on) {
        cudaStreamSynchronize(s->stream);
        tlc_prof_free(s->prof);
        s->prof = NULL;
        return TL_OK;
    }
    tl_status st = tlc_prof_init(&s->prof);
    /* the first interval starts here */
    if (!st) tlc_prof_mark(s->prof, s->stream, "(start)", -1);
    return st;
}

extern "C" tl_status tcu_profile_report(char *buf, size_t n) {
    tcu_state *s = tcu_get();
    if (!s) return tl_err(TL_ERR_BACKEND, "train cuda: no CUDA device");
    if (!s->prof) return tl_err(TL_ERR_INVALID, "train cuda: profile report without tt_device_profile on");
    tl_status st = tlc_prof_collect(s->prof);
    if (!st) tlc_prof_report(s->prof, buf, n);
    tlc_prof_reset(s->prof);
    return st;
}

struct sh4 {
    int64_t sh[4], sd[4], ss[4];
};

template <typename TD, typename TS> __device__ __forceinline__ TD conv(TS v) { return (TD)v; }
template <> __device__ __forceinline__ float conv<float, __nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ __nv_bfloat16 conv<__nv_bfloat16, float>(float v) { return __float2bfloat16_rn(v); }

template <typename TD, typename TS, bool ADD>
__global__ void k_copy4(TD *d, const TS *s, sh4 g, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i, i3 = r % g.sh[3];
        r /= g.sh[3];
        int64_t i2 = r % g.sh[2];
        r /= g.sh[2];
        int64_t i1 = r % g.sh[1], i0 = r / g.sh[1];
        int64_t od = i0 * g.sd[0] + i1 * g.sd[1] + i2 * g.sd[2] + i3 * g.sd[3];
        int64_t os = i0 * g.ss[0] + i1 * g.ss[1] + i2 * g.ss[2] + i3 * g.ss[3];
        if (ADD) d[od] = conv<TD, TS>(s[os]) + d[od];
        else d[od] = conv<TD, TS>(s[os]);
    }
}

/* Both sides contiguous in the last dimension (the head permutes and the
 * q/k/v split): a warp per row of sh[3] elements, so the index arithmetic
 * is per row, not per element. */
template <typename TD, typename TS, bool ADD>
__global__ void k_copy4_rows(TD *d, const TS *s, sh4 g, int64_t rows) {
    const int lane = threadIdx.x & 31;
    const int64_t w0 = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5, nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t r = w0; r < rows; r += nw) {
        const int64_t i2 = r % g.sh[2], q = r / g.sh[2], i1 = q % g.sh[1], i0 = q / g.sh[1];
        TD *dr = d + i0 * g.sd[0] + i1 * g.sd[1] + i2 * g.sd[2];
        const TS *sr = s + i0 * g.ss[0] + i1 * g.ss[1] + i2 * g.ss[2];
        for (int64_t i = lane; i < g.sh[3]; i += 32) {
            if (ADD) dr[i] = conv<TD, TS>(sr[i]) + dr[i];
            else dr[i] = conv<TD, TS>(sr[i]);
        }
    }
}

/* both sides one contiguous run of n elements */
template <typename TD, typename TS, bool ADD>
__global__ void k_copy_flat(TD *d, const TS *s, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        if (ADD) d[i] = conv<TD, TS>(s[i]) + d[i];
        else d[i] = conv<TD, TS>(s[i]);
    }
}

/* the strides of a row-major [sh] tensor */
static bool copy4_dense(const int64_t st[4], const int64_t sh[4]) {
    int64_t e = 1;
    for (int i = 3; i >= 0; i--) {
        if (sh[i] != 1 && st[i] != e) return false;
        e *= sh[i];
    }
    return true;
}

/* f32 to f32, both 16-byte aligned: float4 at a time, then the tail */
template <bool ADD> __global__ void k_copy_flat4(float *d, const float *s, int64_t n) {
    const int64_t n4 = n / 4, st = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += st) {
        float4 v = ((const float4 *)s)[i];
        if (ADD) {
            const float4 o = ((const float4 *)d)[i];
            v.x += o.x, v.y += o.y, v.z += o.z, v.w += o.w;
        }
        ((float4 *)d)[i] = v;
    }
    for (int64_t i = 4 * n4 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += st)
        d[i] = ADD ? s[i] + d[i] : s[i];
}

template <typename TD, typename TS, bool ADD>
static void launch_copy4_as(tcu_state *s, TD *d, const TS *sr, const sh4 &g, int64_t n) {
    const bool al = !(((uintptr_t)d | (uintptr_t)sr) & 15);
    if (copy4_dense(g.sd, g.sh) && copy4_dense(g.ss, g.sh)) {
        if constexpr (std::is_same<TD, float>::value && std::is_same<TS, float>::value)
            if (al) {
                k_copy_flat4<ADD><<<tcu_blocks(n / 4 + 1, 256), 256, 0, s->stream>>>(d, sr, n);
                return;
            }
        k_copy_flat<TD, TS, ADD><<<tcu_blocks(n, 256), 256, 0, s->stream>>>(d, sr, n);
    } else if (g.sd[3] == 1 && g.ss[3] == 1 && g.sh[3] >= 16) {
        const int64_t rows = n / g.sh[3];
        k_copy4_rows<TD, TS, ADD><<<tcu_blocks(rows, 8), 256, 0, s->stream>>>(d, sr, g, rows);
    } else {
        k_copy4<TD, TS, ADD><<<tcu_blocks(n, 256), 256, 0, s->stream>>>(d, sr, g, n);
    }
}

template <typename TD, typename TS>
static tl_status launch_copy4(tcu_state *s, void *d, const void *sr, const sh4 &g, int64_t n, bool add) {
    if (add) launch_copy4_as<TD, TS, true>(s, (TD *)d, (const TS *)sr, g, n);
    else launch_copy4_as<TD, TS, false>(s, (TD *)d, (const TS *)sr, g, n);
    return tcu_check("copy4");
}

extern "C" tl_status tcu_copy4(void *dst, int dst_dt, const int64_t dst_st[4], const void *src, int src_dt,
                               const int64_t src_st[4], const int64_t sh[4], bool add) {
    TCU_STATE(s);
    sh4 g;
    int64_t n = 1;
    for (int i = 0; i < 4; i++) {
        g.sh[i] = sh[i];
        g.sd[i] = dst_st[i];
        g.ss[i] = src_st[i];
        n *= sh[i];
    }
    if (n == 0) return TL_OK;
    if (dst_dt == TCU_F32 && src_dt == TCU_F32) return launch_copy4<float, float>(s, dst, src, g, n, add);
    if (!add) {
        if (dst_dt == TCU_F32 && src_dt == TCU_BF16) return launch_copy4<float, __nv_bfloat16>(s, dst, src, g, n, false);
        if (dst_dt == TCU_BF16 && src_dt == TCU_F32) return launch_copy4<__nv_bfloat16, float>(s, dst, src, g, n, false);
        if (dst_dt == src_dt && (dst_dt == TCU_F64)) return launch_copy4<double, double>(s, dst, src, g, n, false);
        if (dst_dt == src_dt && (dst_dt == TCU_I32)) return launch_copy4<int32_t, int32_t>(s, dst, src, g, n, false);
        if (dst_dt == src_dt) return launch_copy4<uint16_t, uint16_t>(s, dst, src, g, n, false);
    }
    return tl_err(TL_ERR_UNSUPPORTED, "train cuda: copy from dtype %d to %d%s", src_dt, dst_dt, add ? " (add)" : "");
}

template <typename T> __global__ void k_fill(T *p, T v, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        p[i] = v;
}

extern "C" tl_status tcu_fill(void *p, int dt, int64_t n, double v) {
    TCU_STATE(s);
    if (n == 0) return TL_OK;
    unsigned b = tcu_blocks(n, 256);
    switch (dt) {
    case TCU_F32: k_fill<float><<<b, 256, 0, s->stream>>>((float *)p, (float)v, n); break;
    case TCU_F64: k_fill<double><<<b, 256, 0, s->stream>>>((double *)p, v, n); break;
    case TCU_I32: k_fill<int32_t><<<b, 256, 0, s->stream>>>((int32_t *)p, (int32_t)v, n); break;
    case TCU_BF16: {
        __nv_bfloat16 h = __float2bfloat16_rn((float)v);
        uint16_t u;
        memcpy(&u, &h, 2);
        k_fill<uint16_t><<<b, 256, 0, s->stream>>>((uint16_t *)p, u, n);
        break;
    }
    default: return tl_err(TL_ERR_UNSUPPORTED, "train cuda: fill of dtype %d", dt);
    }
    return tcu_check("fill");
}
