/* backend/cuda/cuda_weights: weight upload + repack (GGUF blocks -> the
 * 16-byte-aligned layout in cuda_common.cuh), dequantization to f16, row
 * gather (token embeddings) and the prefill GEMM through cuBLAS.
 * Block layouts are the GGUF specification's. Calls: CUDA, cuBLAS. */
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_deq.cuh"

bool tlc_type_supported(tl_type t) {
    size_t a, b;
    return tlc_layout(t, 256, &a, &b);
}

static size_t tlc_round256(size_t x) { return (x + 255) & ~(size_t)255; }

size_t tlc_weight_bytes(tl_type t, int64_t n_in, int64_t n_out) {
    size_t qr, sr;
    if (!tlc_layout(t, n_in, &qr, &sr) || n_out <= 0) return 0;
    return tlc_round256(qr * (size_t)n_out) + tlc_round256(sr * (size_t)n_out);
}

tl_status tlc_weight_describe(tlc_weight *w, tl_type t, int64_t n_in, int64_t n_out, void *dst) {
    size_t qr, sr;
    if (!tlc_layout(t, n_in, &qr, &sr))
        return tl_err(TL_ERR_UNSUPPORTED, "cuda: weight type %s with row length %lld not supported",
                      tl_type_name(t), (long long)n_in);
    w->type = t;
    w->n_in = n_in;
    w->n_out = n_out;
    w->q_row = qr;
    w->s_row = sr;
    w->q = dst;
    w->s = sr ? (uint8_t *)dst + tlc_round256(qr * (size_t)n_out) : NULL;
    return TL_OK;
}

/* ---- repack: one thread per GGUF block ------------------------------------ */

__device__ __forceinline__ uint16_t ld_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

__global__ void repack_q4_0_k(const uint8_t *src, uint8_t *q, uint16_t *s, int64_t nblk) {
    int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    const uint8_t *p = src + b * 18;
    s[b] = ld_u16(p);
    for (int i = 0; i < 16; i++) q[b * 16 + i] = p[2 + i];
}

__global__ void repack_q4_1_k(const uint8_t *src, uint8_t *q, uint32_t *s, int64_t nblk) {
    int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    const uint8_t *p = src + b * 20;
    s[b] = (uint32_t)ld_u16(p) | ((uint32_t)ld_u16(p + 2) << 16);
    for (int i = 0; i < 16; i++) q[b * 16 + i] = p[4 + i];
}

__global__ void repack_q8_0_k(const uint8_t *src, uint8_t *q, uint16_t *s, int64_t nblk) {
    int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    const uint8_t *p = src + b * 34;
    s[b] = ld_u16(p);
    for (int i = 0; i < 32; i++) q[b * 32 + i] = p[2 + i];
}

/* one thread per 256-value super-block (GGUF: ql[128], qh[64], int8
 * scales[16], half d; value 128n + 32k + l = low nibble of ql[64n + l +
 * 32(k&1)] (high nibble for k >= 2) | bits 2k..2k+1 of qh[32n + l] << 4, with
 * scale 8n + 2k + l/16) -> the layout in cuda_common.cuh; nsb super-blocks
 * and nu = 8 nsb units per row */
__global__ void repack_q6_k_k(const uint8_t *src, uint8_t *q, uint8_t *s, int64_t nblk, int64_t nsb, size_t q_row,
                              size_t s_row) {
    int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    const uint8_t *p = src + b * 210;
    const int64_t row = b / nsb, k = b % nsb, nu = nsb * 8;
    uint8_t *qr = q + q_row * row, *sr = s + s_row * row;
    ((uint16_t *)sr)[k] = ld_u16(p + 208);
    for (int c = 0; c < 8; c++) { /* unit c: values 32c .. 32c+31 */
        const int n = c / 4, kk = c % 4;
        uint8_t v[32];
        for (int l = 0; l < 32; l++)
            v[l] = (uint8_t)(((p[64 * n + l + 32 * (kk & 1)] >> (4 * (kk >> 1))) & 0xF) |
                             (((p[128 + 32 * n + l] >> (2 * kk)) & 3) << 4));
        uint8_t *o = qr + (k * 8 + c) * 16, *h = qr + nu * 16 + (k * 8 + c) * 8;
        for (int i = 0; i < 16; i++) o[i] = (uint8_t)((v[i] & 0xF) | ((v[i + 16] & 0xF) << 4));
        for (int i = 0; i < 8; i++) h[i] = 0;
        for (int t = 0; t < 32; t++) {
            const int i = t & 15, hi = t >> 4;
            h[hi * 4 + (i & 3)] |= (uint8_t)((v[t] >> 4) << (2 * (i >> 2)));
        }
        int8_t *sc = (int8_t *)(sr + nsb * 2) + (k * 8 + c) * 2;
        sc[0] = (int8_t)p[192 + 8 * n + 2 * kk];
        sc[1] = (int8_t)p[192 + 8 * n + 2 * kk + 1];
    }
}

/* GGUF Q4_K: the 6-bit scale and min of sub-block is (0..7) from the 12 packed bytes */
__device__ __forceinline__ void q4k_scale_min(const uint8_t *sc, int is, int *d, int *m) {
    if (is < 4) {
        *d = sc[is] & 63;
        *m = sc[is + 4] & 63;
    } else {
        *d = (sc[is + 4] & 0xF) | ((sc[is - 4] >> 6) << 4);
        *m = (sc[is + 4] >> 4) | ((sc[is] >> 6) << 4);
    }
}

/* one thread per 256-value super-block (GGUF: half d, half dmin, 12 bytes of
 * packed 6-bit scales/mins, 128 bytes where byte l of 32-byte chunk j holds
 * value l of sub-block 2j (low nibble) and of 2j+1 (high)) -> q: sub-block
 * is as 16 bytes, byte i = value i | value i+16 << 4; s: half2 (d, dmin) at
 * [b % nsb] of the row's first part, uint16 (scale | min << 8) per
 * sub-block in its second part (nsb super-blocks per row) */
__global__ void repack_q4_k_k(const uint8_t *src, uint8_t *q, uint8_t *s, int64_t nblk, int64_t nsb,
                              size_t s_row) {
    int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    const uint8_t *p = src + b * 144;
    const int64_t row = b / nsb, k = b % nsb;
    uint8_t *sr = s + s_row * row;
    ((uint32_t *)sr)[k] = (uint32_t)ld_u16(p) | ((uint32_t)ld_u16(p + 2) << 16);
    uint16_t *scm = (uint16_t *)(sr + nsb * 4) + k * 8;
    for (int is = 0; is < 8; is++) {
        int sc, m;
        q4k_scale_min(p + 4, is, &sc, &m);
        scm[is] = (uint16_t)(sc | (m << 8));
        const uint8_t *qs = p + 16 + 32 * (is / 2);
        const int sh = (is & 1) * 4;
        uint8_t *o = q + b * 128 + is * 16;
        for (int i = 0; i < 16; i++)
            o[i] = (uint8_t)(((qs[i] >> sh) & 0xF) | (((qs[i + 16] >> sh) & 0xF) << 4));
    }
}

static size_t tlc_raw_row(tl_type t, int64_t n_in) { return tl_row_bytes(t, n_in); }

static tl_status upload_rows(cudaStream_t stream, const tlc_weight *w, int64_t row0, int64_t n_rows,
                             const void *host, void *staging) {
    if (row0 < 0 || n_rows < 0 || row0 + n_rows > w->n_out)
        return tl_err(TL_ERR_INVALID, "cuda: upload rows [%lld, %lld) outside %lld rows",
                      (long long)row0, (long long)(row0 + n_rows), (long long)w->n_out);
    size_t raw = tlc_raw_row(w->type, w->n_in) * (size_t)n_rows;
    uint8_t *q = (uint8_t *)w->q + w->q_row * (size_t)row0;
    uint8_t *s = w->s ? (uint8_t *)w->s + w->s_row * (size_t)row0 : NULL;
    switch (w->type) {
    case TL_TYPE_F32: case TL_TYPE_F16: case TL_TYPE_BF16:
        TLC_TRY(cudaMemcpyAsync(q, host, raw, cudaMemcpyHostToDevice, stream), "weight upload");
        return TL_OK;
    default: break;
    }
    if (!staging) return tl_err(TL_ERR_INVALID, "cuda: upload of %s needs a staging buffer", tl_type_name(w->type));
    TLC_TRY(cudaMemcpyAsync(staging, host, raw, cudaMemcpyHostToDevice, stream), "weight upload");
    const uint8_t *st = (const uint8_t *)staging;
    int64_t nblk;
    switch (w->type) {
    case TL_TYPE_Q4_0:
        nblk = w->n_in / 32 * n_rows;
        repack_q4_0_k<<<tlc_div_up(nblk, 256), 256, 0, stream>>>(st, q, (uint16_t *)s, nblk);
        break;
    case TL_TYPE_Q4_1:
        nblk = w->n_in / 32 * n_rows;
        repack_q4_1_k<<<tlc_div_up(nblk, 256), 256, 0, stream>>>(st, q, (uint32_t *)s, nblk);
        break;
    case TL_TYPE_Q8_0:
        nblk = w->n_in / 32 * n_rows;
        repack_q8_0_k<<<tlc_div_up(nblk, 256), 256, 0, stream>>>(st, q, (uint16_t *)s, nblk);
        break;
    case TL_TYPE_Q4_K:
        nblk = w->n_in / 256 * n_rows;
        repack_q4_k_k<<<tlc_div_up(nblk, 256), 256, 0, stream>>>(st, q, s, nblk, w->n_in / 256, w->s_row);
        break;
    case TL_TYPE_Q6_K:
        nblk = w->n_in / 256 * n_rows;
        repack_q6_k_k<<<tlc_div_up(nblk, 256), 256, 0, stream>>>(st, q, s, nblk, w->n_in / 256, w->q_row,
                                                                      w->s_row);
        break;
    default:
        return tl_err(TL_ERR_UNSUPPORTED, "cuda: no repack for %s", tl_type_name(w->type));
    }
    TLC_LAUNCH_CHECK("weight repack");
    return TL_OK;
}

tl_status tlc_weight_upload_rows(tlc_ctx *c, const tlc_weight *w, int64_t row0, int64_t n_rows,
                                 const void *host, void *staging) {
    return upload_rows(c->stream, w, row0, n_rows, host, staging);
}

tl_status tlc_weight_upload_on(void *stream, const tlc_weight *w, const void *host, void *staging) {
    return upload_rows((cudaStream_t)stream, w, 0, w->n_out, host, staging);
}

tl_status tlc_weight_upload(tlc_ctx *c, tlc_weight *w, tl_type t, int64_t n_in, int64_t n_out,
                            const void *host, void *dst, void *staging) {
    tl_status s = tlc_weight_describe(w, t, n_in, n_out, dst);
    if (s) return s;
    return tlc_weight_upload_rows(c, w, 0, n_out, host, staging);
}

/* ---- dequantize one 32-element chunk (chunk index ch within the row) ---- */

/* value v (0..31) of unit ch of a repacked Q6_K row (q, s: the row's parts) */
__device__ __forceinline__ float q6k_value(const tlc_weight &w, const uint8_t *q, const uint8_t *s, int64_t ch, int v) {
    const int i = v & 15, hi = v >> 4;
    const int nib = (q[ch * 16 + i] >> (4 * hi)) & 0xF;
    const int hb = (q[w.n_in / 2 + ch * 8 + hi * 4 + (i & 3)] >> (2 * (i >> 2))) & 3;
    const float d = __half2float(((const __half *)s)[ch / 8]);
    const int sc = ((const int8_t *)(s + w.n_in / 256 * 2))[ch * 2 + hi];
    return d * (float)sc * (float)((nib | (hb << 4)) - 32);
}

__device__ void tlc_deq_chunk(const tlc_weight w, int64_t row, int64_t ch, float *o) {
    const uint8_t *q = (const uint8_t *)w.q + w.q_row * row;
    const uint8_t *s = (const uint8_t *)w.s + w.s_row * row;
    switch (w.type) {
    case TL_TYPE_F32: {
        const float *p = (const float *)q + ch * 32;
        for (int i = 0; i < 32; i++) o[i] = p[i];
        break;
    }
    case TL_TYPE_F16: {
        const __half *p = (const __half *)q + ch * 32;
        for (int i = 0; i < 32; i++) o[i] = __half2float(p[i]);
        break;
    }
    case TL_TYPE_BF16: {
        const __nv_bfloat16 *p = (const __nv_bfloat16 *)q + ch * 32;
        for (int i = 0; i < 32; i++) o[i] = __bfloat162float(p[i]);
        break;
    }
    case TL_TYPE_Q4_0: {
        const uint8_t *p = q + ch * 16;
        float d = __half2float(((const __half *)s)[ch]);
        for (int i = 0; i < 16; i++) {
            o[i] = d * (float)((p[i] & 0xF) - 8);
            o[i + 16] = d * (float)((p[i] >> 4) - 8);
        }
        break;
    }
    case TL_TYPE_Q4_1: {
        const uint8_t *p = q + ch * 16;
        float d = __half2float(((const __half *)s)[2 * ch]);
        float m = __half2float(((const __half *)s)[2 * ch + 1]);
        for (int i = 0; i < 16; i++) {
            o[i] = d * (float)(p[i] & 0xF) + m;
            o[i + 16] = d * (float)(p[i] >> 4) + m;
        }
        break;
    }
    case TL_TYPE_Q8_0: {
        const int8_t *p = (const int8_t *)q + ch * 32;
        float d = __half2float(((const __half *)s)[ch]);
        for (int i = 0; i < 32; i++) o[i] = d * (float)p[i];
        break;
    }
    case TL_TYPE_Q4_K: {
        const uint8_t *p = q + ch * 16;
        float2 dd = __half22float2(((const __half2 *)s)[ch / 8]);
        uint16_t scm = ((const uint16_t *)(s + w.n_in / 256 * 4))[ch];
        float ds = dd.x * (float)(scm & 0xFF), dm = dd.y * (float)(scm >> 8);
        for (int i = 0; i < 16; i++) {
            o[i] = ds * (float)(p[i] & 0xF) - dm;
            o[i + 16] = ds * (float)(p[i] >> 4) - dm;
        }
        break;
    }
    case TL_TYPE_Q6_K: {
        for (int v = 0; v < 32; v++) o[v] = q6k_value(w, q, s, ch, v);
        break;
    }
    default:
        for (int i = 0; i < 32; i++) o[i] = __int_as_float(0x7fc00000);
    }
}

template <int T> __global__ void dequant_f16_k(const tlc_weight w, __half *out) {
    int64_t ng = w.n_in / 8;
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= ng * w.n_out) return;
    int64_t row = i / ng, g = i % ng;
    float v[8];
    deq8<T>(w, row, g, v);
    uint4 pk;
    __half2 h0 = __floats2half2_rn(v[0], v[1]), h1 = __floats2half2_rn(v[2], v[3]),
            h2 = __floats2half2_rn(v[4], v[5]), h3 = __floats2half2_rn(v[6], v[7]);
    pk.x = *(uint32_t *)&h0; pk.y = *(uint32_t *)&h1; pk.z = *(uint32_t *)&h2; pk.w = *(uint32_t *)&h3;
    *(uint4 *)(out + row * w.n_in + g * 8) = pk;
}

__global__ void bf16_to_f16_k(const __nv_bfloat16 *in, __half *out, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2half(__bfloat162float(in[i]));
}

tl_status tlc_dequant_launch(tlc_ctx *c, const tlc_weight *w, __half *out) {
    int64_t n = w->n_in / 8 * w->n_out;
    unsigned nb = tlc_div_up(n, 256);
    switch (w->type) {
    case TL_TYPE_Q4_0: dequant_f16_k<TL_TYPE_Q4_0><<<nb, 256, 0, c->stream>>>(*w, out); break;
    case TL_TYPE_Q4_1: dequant_f16_k<TL_TYPE_Q4_1><<<nb, 256, 0, c->stream>>>(*w, out); break;
    case TL_TYPE_Q8_0: dequant_f16_k<TL_TYPE_Q8_0><<<nb, 256, 0, c->stream>>>(*w, out); break;
    case TL_TYPE_Q4_K: dequant_f16_k<TL_TYPE_Q4_K><<<nb, 256, 0, c->stream>>>(*w, out); break;
    case TL_TYPE_Q6_K: dequant_f16_k<TL_TYPE_Q6_K><<<nb, 256, 0, c->stream>>>(*w, out); break;
    case TL_TYPE_F32: dequant_f16_k<TL_TYPE_F32><<<nb, 256, 0, c->stream>>>(*w, out); break;
    case TL_TYPE_F16:
        TLC_TRY(cudaMemcpyAsync(out, w->q, (size_t)w->n_in * w->n_out * 2, cudaMemcpyDeviceToDevice, c->stream),
                "dequantize (copy)");
        return TL_OK;
    case TL_TYPE_BF16:
        bf16_to_f16_k<<<tlc_div_up(w->n_in * w->n_out, 256), 256, 0, c->stream>>>(
            (const __nv_bfloat16 *)w->q, out, w->n_in * w->n_out);
        break;
    default: return tl_err(TL_ERR_UNSUPPORTED, "cuda: dequantize %s", tl_type_name(w->type));
    }
    TLC_LAUNCH_CHECK("dequantize to f16");
    return TL_OK;
}

tl_status tlc_dequant_f16(tlc_ctx *c, const tlc_weight *w, void *out) {
    return tlc_dequant_launch(c, w, (__half *)out);
}

/* one thread per 32-value chunk */
__global__ void dequant_f32_k(const tlc_weight w, float *out) {
    const int64_t nc = w.n_in / 32, i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= nc * w.n_out) return;
    float v[32];
    tlc_deq_chunk(w, i / nc, i % nc, v);
    float4 *o = (float4 *)(out + i * 32);
    for (int j = 0; j < 8; j++) o[j] = make_float4(v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]);
}

tl_status tlc_dequant_f32_on(void *stream, const tlc_weight *w, float *out) {
    if (w->n_in % 32) return tl_err(TL_ERR_UNSUPPORTED, "cuda: dequantize rows of %lld values", (long long)w->n_in);
    const int64_t n = w->n_in / 32 * w->n_out;
    if (n) dequant_f32_k<<<tlc_div_up(n, 128), 128, 0, (cudaStream_t)stream>>>(*w, out);
    TLC_LAUNCH_CHECK("dequantize to f32");
    return TL_OK;
}

__global__ void get_rows_k(const tlc_weight w, const int32_t *tok, float *out) {
    pdl_trigger();
    pdl_wait();
    int64_t t = blockIdx.x;
    int64_t row = tok[t];
    if (row < 0 || row >= w.n_out) row = 0; /* the caller validates ids; never read out of bounds */
    for (int64_t ch = threadIdx.x; ch < w.n_in / 32; ch += blockDim.x) {
        float v[32];
        tlc_deq_chunk(w, row, ch, v);
        float4 *o = (float4 *)(out + t * w.n_in + ch * 32);
        for (int j = 0; j < 8; j++) o[j] = make_float4(v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]);
    }
}

tl_status tlc_get_rows(tlc_ctx *c, const tlc_weight *w, const int32_t *d_tokens, int64_t n_tok,
                       float *out) {
    if (n_tok <= 0) return TL_OK;
    TLC_TRY(tlc_launch(c, get_rows_k, dim3((unsigned)n_tok), dim3(128), 0, *w, d_tokens, out), "get_rows");
    return TL_OK;
}

/* ---- GEMM ------------------------------------------------------------------ */

__global__ void f32_to_f16_k(const float *x, __half *y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half(x[i]);
}
__global__ void f32_to_bf16_k(const float *x, __nv_bfloat16 *y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2bfloat16(x[i]);
}

size_t tlc_gemm_scratch_halves(const tlc_weight *w, int64_t n_tok) {
    if (w->type == TL_TYPE_F32) return 128; /* SGEMM on the weight as it is */
    size_t wh = (w->type == TL_TYPE_F16 || w->type == TL_TYPE_BF16) ? 0 : (size_t)w->n_in * w->n_out;
    return wh + (size_t)n_tok * w->n_in + 128;
}

tlc_weight tlc_weight_rows(const tlc_weight *w, int64_t row0, int64_t n) {
    tlc_weight v = *w;
    v.q = (uint8_t *)w->q + w->q_row * (size_t)row0;
    v.s = w->s ? (uint8_t *)w->s + w->s_row * (size_t)row0 : NULL;
    v.n_out = n;
    return v;
}

tl_status tlc_gemm(tlc_ctx *c, const tlc_weight *w, const float *x, int64_t n_tok, float *y,
                   int mode, void *scratch) {
    return tlc_gemm_ex(c, w, x, n_tok, y, w->n_out, mode, scratch);
}

tl_status tlc_gemm_ex(tlc_ctx *c, const tlc_weight *w, const float *x, int64_t n_tok, float *y,
                      int64_t ldy, int mode, void *scratch) {
    if (n_tok <= 0) return TL_OK;
    float alpha = 1.0f, beta = (mode & TLC_MV_ACCUM) ? 1.0f : 0.0f;
    if (w->type == TL_TYPE_F32) {
        /* f32 weights stay f32 (full-precision SGEMM): an f32 model is the
         * precision reference, e.g. the HF tiny fixtures */
        cublasStatus_t bs = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)w->n_out, (int)n_tok, (int)w->n_in,
                                         &alpha, w->q, CUDA_R_32F, (int)w->n_in, x, CUDA_R_32F, (int)w->n_in, &beta, y,
                                         CUDA_R_32F, (int)ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (bs != CUBLAS_STATUS_SUCCESS)
            return tl_err(TL_ERR_BACKEND, "cuda: cublasGemmEx f32 %lldx%lldx%lld failed: status %d",
                          (long long)w->n_out, (long long)n_tok, (long long)w->n_in, (int)bs);
        return TL_OK;
    }
    bool bf = w->type == TL_TYPE_BF16;
    const void *wa;
    __half *xs;
    if (w->type == TL_TYPE_F16 || bf) {
        wa = w->q;
        xs = (__half *)scratch;
    } else {
        tl_status s = tlc_dequant_launch(c, w, (__half *)scratch);
        if (s) return s;
        wa = scratch;
        xs = (__half *)scratch + (size_t)w->n_in * w->n_out;
    }
    int64_t nx = n_tok * w->n_in;
    if (bf)
        f32_to_bf16_k<<<tlc_div_up(nx, 256), 256, 0, c->stream>>>(x, (__nv_bfloat16 *)xs, nx);
    else
        f32_to_f16_k<<<tlc_div_up(nx, 256), 256, 0, c->stream>>>(x, xs, nx);
    TLC_LAUNCH_CHECK("gemm: convert activations");
    cudaDataType_t dt = bf ? CUDA_R_16BF : CUDA_R_16F;
    /* column-major view: Y^T [n_out x n_tok] = W [n_in x n_out]^T * X^T [n_in x n_tok] */
    cublasStatus_t bs = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)w->n_out, (int)n_tok,
                                     (int)w->n_in, &alpha, wa, dt, (int)w->n_in, xs, dt,
                                     (int)w->n_in, &beta, y, CUDA_R_32F, (int)ldy,
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return tl_err(TL_ERR_BACKEND, "cuda: cublasGemmEx %lldx%lldx%lld (%s) failed: status %d",
                      (long long)w->n_out, (long long)n_tok, (long long)w->n_in,
                      tl_type_name(w->type), (int)bs);
    return TL_OK;
}
