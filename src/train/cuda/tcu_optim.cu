/* train/cuda/tcu_optim: the global gradient norm and AdamW over every
 * parameter in one launch each: a table lists the tensors, each block takes
 * one chunk of TCU_CHUNK elements and finds its tensor by binary search.
 * The clipping coefficient is read from the norm on the device, so clip +
 * update never wait for the host. Update formulas as train/optim.c (torch's
 * AdamW, float32).
 * Owns: nothing. Calls: tcu_core (stream). */
#include "train/cuda/tcu_common.cuh"

__device__ __forceinline__ float warp_sum_o(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ int find_tab(const tcu_ptab *tab, int n_tab, int64_t chunk) {
    int lo = 0, hi = n_tab - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (tab[mid].chunk0 <= chunk) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

__global__ void k_sumsq(float *part, const tcu_ptab *tab, int n_tab) {
    __shared__ float sh[32];
    int64_t chunk = blockIdx.x;
    const tcu_ptab t = tab[find_tab(tab, n_tab, chunk)];
    int64_t a = (chunk - t.chunk0) * TCU_CHUNK, b = a + TCU_CHUNK < t.n ? a + TCU_CHUNK : t.n;
    float s = 0.f;
    for (int64_t i = a + threadIdx.x; i < b; i += blockDim.x) s += t.g[i] * t.g[i];
    s = warp_sum_o(s);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) sh[w] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float tot = 0.f;
        for (int k = 0; k < (int)(blockDim.x >> 5); k++) tot += sh[k];
        part[chunk] = tot;
    }
}

__global__ void k_norm_fin(float *norm, const float *part, int64_t n) {
    __shared__ double sh[32];
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += part[i];
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) sh[w] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        double tot = 0.0;
        for (int k = 0; k < (int)(blockDim.x >> 5); k++) tot += sh[k];
        norm[0] = (float)sqrt(tot);
    }
}

extern "C" tl_status tcu_grad_norm(float *norm, const tcu_ptab *tab_dev, int n_tab, int64_t n_chunks, float *scratch) {
    TCU_STATE(s);
    if (n_chunks < 1) return tcu_zero(norm, sizeof(float));
    k_sumsq<<<(unsigned)n_chunks, 256, 0, s->stream>>>(scratch, tab_dev, n_tab);
    k_norm_fin<<<1, 1024, 0, s->stream>>>(norm, scratch, n_chunks);
    return tcu_check("grad norm");
}

__global__ void k_adamw(const tcu_ptab *tab, int n_tab, float lr, float b1, float b2, float eps, float step_size,
                        float bc2s, const float *norm, float max_norm) {
    int64_t chunk = blockIdx.x;
    const tcu_ptab t = tab[find_tab(tab, n_tab, chunk)];
    int64_t a = (chunk - t.chunk0) * TCU_CHUNK, b = a + TCU_CHUNK < t.n ? a + TCU_CHUNK : t.n;
    float coef = 1.f;
    if (norm) {
        float c = max_norm / (norm[0] + 1e-6f);
        if (c < 1.f) coef = c;
    }
    float decay = 1.f - lr * t.wd;
    for (int64_t i = a + threadIdx.x; i < b; i += blockDim.x) {
        float g = t.g[i];
        if (coef != 1.f) {
            g *= coef;
            t.g[i] = g; /* as clip_grad_norm_: the clipped gradient stays */
        }
        float w = t.p[i] * decay;
        float m = t.m[i] * b1 + g * (1.f - b1);
        float v = t.v[i] * b2 + (1.f - b2) * g * g;
        t.m[i] = m;
        t.v[i] = v;
        float denom = sqrtf(v) / bc2s + eps;
        t.p[i] = w - step_size * (m / denom);
    }
}

extern "C" tl_status tcu_adamw(const tcu_ptab *tab_dev, int n_tab, int64_t n_chunks, float lr, float b1, float b2,
                               float eps, float step_size, float bc2s, const float *norm, float max_norm) {
    TCU_STATE(s);
    if (n_chunks < 1) return TL_OK;
    k_adamw<<<(unsigned)n_chunks, 256, 0, s->stream>>>(tab_dev, n_tab, lr, b1, b2, eps, step_size, bc2s, norm,
                                                        max_norm);
    return tcu_check("adamw");
}
