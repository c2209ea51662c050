/* backend/cuda/cuda_mvstream: the decode matvec with its weights streamed
 * into shared memory by the bulk-copy engine (cp.async.bulk, Hopper)
 * instead of into registers. OPT-IN (TALLOW_CUDA_MV_STREAM=1): measured
 * slower than the register kernel (cuda_matvec.cu) on every model, see
 * "Measured" below; kept, with its bit-identity checks, for the next try.
 *
 * Why it was built: at batch 1 a decode layer is a chain of 9-66 MB
 * matrices, each a few us of traffic, and each launch of the register
 * kernel pays a ramp-up and a tail that programmatic dependent launch can
 * hide only where the next kernel's blocks fit beside the running ones; the
 * register kernels fill the SMs' register files, so they do not. Here one
 * block per SM (grid <= SMs, persistent over its tasks) with few registers
 * holds up to ~110 KB of weights in flight in shared memory, so two such
 * kernels fit on one SM and the next launch's producer warp issues its
 * first copies (weights are constant: no wait) while its predecessor runs.
 *
 * Work: a task = ot consecutive outputs (8, 16 or 32; GLU: their gate and
 * up rows), chosen so the tasks spread evenly over the SMs; a block walks
 * its tasks (blockIdx.x, + gridDim.x, ...). A stage = rs consecutive whole
 * rows (1-8 rows, <= 13.75 KB); rows are contiguous in both the quant and
 * the scale array, so a stage is two copies (one for float types). Rows
 * longer than a stage slot (f16 >= 8192, q8_0 14336, f32 >= 4096) stay on
 * the register kernel.
 * Warps: 8 consumers + 1 producer. Stage slot j (of 8) belongs to consumer
 * warp j, and stage seq of the block's sequence goes to slot and warp
 * seq % 8, so each warp waits on its own slot's phases in order (a warp
 * that skipped phases could take an old phase for its own). The producer
 * (one lane) fills the slots in sequence, waiting on a slot's "empty"
 * barrier before refilling it. A warp computes its stage's rows one after
 * another, each whole row with lane l on units l, l+32, ... in order, 4
 * units in flight, exactly as the register kernel does, so the sums and
 * every output are bit-identical to it (test_cuda_kernels checks that);
 * it writes the row sums into its task's buffer (a ring of 16) and counts
 * the stage in shared memory; the warp that finishes a task's last stage
 * runs the epilogue: residual add, RoPE + KV store, SiLU(g)*u, and the q8_1
 * block of each 32-output group (directly when a task owns the group, else
 * by the last task to finish it, counted in global memory).
 *
 * Measured 2026-11-30 on the H200 (tg128, same binary, stream on vs off):
 * 8B Q4_0 308 vs 539 t/s, Q8_0 242 vs 369, F16 155 vs 226, 1B F16 732 vs
 * 997, 1B Q4_0 1212 vs 1807. Even the long output head (128256 x 4096)
 * streams at only 0.60 (Q4_0) / 0.65 (F16) of the copy ceiling (register
 * kernel ~1.0): ~20 GB/s per SM, where the card needs ~32. ncu on three f32
 * launches (1B QKV, Wo, gate|up): DRAM 26-55% busy, SM 16%, 8.7 warps
 * active per SM, 12.6 cycles between a warp's instructions, 63% of them
 * waiting on L1TEX loads: the consumers are latency-bound, not the copies.
 * Variants measured on the way: one copy per row chunk (32-64 copies of
 * 0.1-1 KB per stage) ~0.7 TB/s whatever the type (8B Q4_0 153): the copy
 * engine spends ~100 ns per copy, so copies must be large; all 8 warps on
 * one row each of every stage in turn (8B Q4_0 305: one stage at a time
 * per block); all rows of a stage in one pass, one unit per lane per step
 * shared by the rows (8B Q4_0 262, F16 83: fewer loads in flight per lane).
 * Next to try: two slots per consumer warp (its next stage lands while it
 * computes), the activation in shared memory once per block, 16 consumer
 * warps with smaller stages.
 * Calls: CUDA. */
#include "backend/cuda/cuda_mv.cuh"

#include <algorithm>

#define MVS_CW 8   /* consumer warps, one stage slot each; one producer warp more */
#define MVS_RING 16 /* task row-sum buffers: > the tasks 8 stages in flight can span */
/* dynamic shared memory per block: two blocks (of two kernels) fit on one
 * SM (228 KB, 1 KB reserved per block) */
#define MVS_SMEM (110 * 1024)

struct mvs_args {
    tlc_weight w;
    int ot, rt;  /* outputs and rows per task (rt = 2 ot for GLU) */
    int rs, nst; /* rows per stage, stages per task (rt / rs) */
    uint32_t stage_bytes;
    int64_t ntask;
};

__device__ __forceinline__ uint32_t mvs_smem(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mvs_bar_init(uint64_t *b, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(mvs_smem(b)), "r"(count) : "memory");
}

__device__ __forceinline__ void mvs_bar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(mvs_smem(b)) : "memory");
}

__device__ __forceinline__ void mvs_bar_expect(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mvs_smem(b)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mvs_bar_wait(uint64_t *b, uint32_t parity) {
    uint32_t done;
    do {
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(mvs_smem(b)), "r"(parity)
                     : "memory");
    } while (!done);
}

__device__ __forceinline__ void mvs_copy(void *dst, const void *src, uint32_t bytes, uint64_t *b) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     mvs_smem(dst)),
                 "l"(src), "r"(bytes), "r"(mvs_smem(b))
                 : "memory");
}

/* valid outputs of a task, and the global row of its local row r */
__device__ __forceinline__ int mvs_valid(const mvs_args &a, int64_t task, int64_t n_rows_out) {
    return (int)min((int64_t)a.ot, n_rows_out - task * a.ot);
}
__device__ __forceinline__ int64_t mvs_row(const mvs_args &a, int64_t task, int r, bool glu, int64_t n_rows_out) {
    return glu && r >= a.ot ? n_rows_out + task * a.ot + (r - a.ot) : task * a.ot + r;
}

/* one warp (the one that finished the task's last stage): the task's outputs from
 * the block's row sums os[rt] */
__device__ __forceinline__ void mvs_epilogue(const mvs_args &a, const mv_fuse_d &f, const float *os, float sc,
                                             int64_t task, int lane, float *y, int mode, int64_t n_rows_out,
                                             int *cnt) {
    const int64_t o0 = task * a.ot;
    const bool v = lane < mvs_valid(a, task, n_rows_out);
    float val = 0.0f;
    if (mode == TLC_MV_GLU) {
        if (v) {
            const float g = os[lane] * sc, u = os[a.ot + lane] * sc;
            val = g / (1.0f + __expf(-g)) * u;
            y[o0 + lane] = val;
        }
    } else {
        val = v ? os[lane] * sc : 0.0f;
        if (f.rope_on) {
            /* pairs (2j, 2j+1): the even lane rotates and stores, the odd one takes its half */
            float other = __shfl_xor_sync(0xffffffffu, val, 1);
            if (v && !(lane & 1)) mv_rope_pair(f, o0 + lane, val, other);
            other = __shfl_xor_sync(0xffffffffu, other, 1);
            if (lane & 1) val = other;
        }
        if (v) {
            if (mode == TLC_MV_ACCUM) val = y[o0 + lane] + val;
            y[o0 + lane] = val;
        }
    }
    if (!f.out_q) return;
    if (a.ot == 32) {
        mv_q8_group(f, task, val, lane, n_rows_out);
        return;
    }
    /* the group's other tasks may run on other blocks: the last one quantizes */
    __threadfence();
    __syncwarp();
    const int64_t grp = o0 / 32;
    int last = 0;
    if (lane == 0) last = atomicAdd(&cnt[grp], 1) == 32 / a.ot - 1;
    if (!__shfl_sync(0xffffffffu, last, 0)) return;
    __threadfence();
    mv_q8_group(f, grp, __ldcg(y + grp * 32 + lane), lane, n_rows_out);
    if (lane == 0) cnt[grp] = 0;
}

template <int T>
__global__ void __launch_bounds__((MVS_CW + 1) * 32, 2)
mvs_k(const mvs_args a, const float *xf, const int8_t *xq, const float2 *xds, float *y, int mode,
      int64_t n_rows_out, const mv_fuse_d f, int *cnt) {
    extern __shared__ __align__(128) uint8_t sm[];
    __shared__ __align__(8) uint64_t full[MVS_CW], empty[MVS_CW];
    __shared__ float outs[MVS_RING][64]; /* row sums of the tasks in flight (ring by task) */
    __shared__ int done[MVS_RING];       /* stages finished per task in flight */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const bool glu = mode == TLC_MV_GLU;
    const int64_t tasks = a.ntask > blockIdx.x ? (a.ntask - 1 - blockIdx.x) / gridDim.x + 1 : 0;
    const int64_t total = tasks * a.nst; /* stages this block streams */
    if (threadIdx.x < MVS_RING) done[threadIdx.x] = 0;
    if (threadIdx.x == 0) {
        for (int s = 0; s < MVS_CW; s++) {
            mvs_bar_init(&full[s], 1);
            mvs_bar_init(&empty[s], 1);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n\tfence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    pdl_trigger();
    const uint32_t q_bytes = (uint32_t)(a.rs * a.w.q_row);
    if (warp == MVS_CW) {
        /* producer: weights only, so no wait for the previous kernel */
        if (lane != 0) return;
        for (int64_t seq = 0; seq < total; seq++) {
            const int slot = (int)(seq % MVS_CW);
            if (seq >= MVS_CW) mvs_bar_wait(&empty[slot], (uint32_t)((seq / MVS_CW - 1) & 1));
            const int64_t task = blockIdx.x + (seq / a.nst) * gridDim.x;
            const int r0 = (int)(seq % a.nst) * a.rs; /* first local row; a stage lies in the gate or the up half */
            const int n = max(0, min(a.rs, mvs_valid(a, task, n_rows_out) - r0 % a.ot));
            const int64_t row = mvs_row(a, task, r0, glu, n_rows_out);
            uint8_t *st = sm + (size_t)slot * a.stage_bytes;
            mvs_bar_expect(&full[slot], (uint32_t)(n * (a.w.q_row + a.w.s_row)));
            if (n) {
                mvs_copy(st, (const uint8_t *)a.w.q + row * a.w.q_row, (uint32_t)(n * a.w.q_row), &full[slot]);
                if (a.w.s_row)
                    mvs_copy(st + q_bytes, (const uint8_t *)a.w.s + row * a.w.s_row, (uint32_t)(n * a.w.s_row),
                             &full[slot]);
            }
        }
        return;
    }
    pdl_wait();
    float sc = 1.0f; /* the folded RMSNorm of the input */
    if (f.in_ss) {
        float s = 0;
        for (int64_t k = lane; k < a.w.n_in / 32; k += 32) s += f.in_ss[k];
        sc = rsqrtf(warp_sum(s) / (float)a.w.n_in + f.eps);
    }
    typedef mv<T> M;
    constexpr int U = 4;
    const int64_t nu = M::units(a.w.n_in);
    /* stage seq is warp seq % 8's, in slot seq % 8: each warp waits on the
     * phases of its own slot in order */
    for (int64_t seq = warp; seq < total; seq += MVS_CW) {
        mvs_bar_wait(&full[warp], (uint32_t)((seq / MVS_CW) & 1));
        const int64_t tl = seq / a.nst, task = blockIdx.x + tl * gridDim.x;
        const int r0 = (int)(seq % a.nst) * a.rs, valid = mvs_valid(a, task, n_rows_out);
        float *os = outs[tl % MVS_RING];
        /* this stage as a weight of rs rows in shared memory */
        tlc_weight ws = a.w;
        ws.q = sm + (size_t)warp * a.stage_bytes;
        ws.s = (uint8_t *)ws.q + q_bytes;
        for (int rr = 0; rr < a.rs; rr++) {
            float acc = 0.0f;
            if ((r0 + rr) % a.ot < valid) {
                for (int64_t base = 0; base < nu; base += 32 * U) {
                    typename M::W v[U];
#pragma unroll
                    for (int k = 0; k < U; k++) {
                        const int64_t u = base + k * 32 + lane;
                        if (u < nu) v[k] = M::template load<true>(ws, rr, u);
                    }
#pragma unroll
                    for (int k = 0; k < U; k++) {
                        const int64_t u = base + k * 32 + lane;
                        if (u < nu) acc += M::dot(v[k], ws, rr, u, xf, xq, xds);
                    }
                }
            }
            acc = warp_sum(acc);
            if (lane == 0) os[r0 + rr] = acc;
        }
        /* the slot is free; the task's rows are counted: the warp that
         * finishes its last stage runs the epilogue */
        int last = 0;
        if (lane == 0) {
            mvs_bar_arrive(&empty[warp]);
            __threadfence_block();
            last = atomicAdd(&done[tl % MVS_RING], 1) == a.nst - 1;
            if (last) done[tl % MVS_RING] = 0;
        }
        if (__shfl_sync(0xffffffffu, last, 0)) {
            __threadfence_block();
            mvs_epilogue(a, f, os, sc, task, lane, y, mode, n_rows_out, cnt);
        }
    }
}

static bool mvs_plan(const tlc_ctx *c, const tlc_weight *w, int mode, mvs_args *a) {
    *a = mvs_args{};
    if (!c->mv_stream || w->n_out <= 0 || !tlc_type_supported(w->type)) return false;
    if (mode == TLC_MV_GLU && (w->n_out & 1)) return false;
    /* whole-row copies: 16-byte aligned starts and sizes */
    if ((uintptr_t)w->q % 16 || (uintptr_t)w->s % 16 || w->q_row % 16 || w->s_row % 16) return false;
    a->w = *w;
    /* outputs per task: the largest of 32/16/8 whose tasks fill >= 90% of
     * the SMs' last round (else the best filling): 8B QKV, 6144 rows in 32s,
     * would leave a second round of 60 tasks on 132 SMs */
    const int64_t n_ro = mode == TLC_MV_GLU ? w->n_out / 2 : w->n_out;
    double best = -1;
    for (int ot = 32; ot >= 8; ot /= 2) {
        const int64_t nt = (n_ro + ot - 1) / ot, rounds = (nt + c->n_sm - 1) / c->n_sm;
        const double fill = (double)nt / ((double)rounds * c->n_sm);
        if (fill > best + 1e-9) {
            best = fill;
            a->ot = ot;
        }
        if (fill >= 0.9) break;
    }
    a->rt = mode == TLC_MV_GLU ? 2 * a->ot : a->ot;
    a->ntask = (n_ro + a->ot - 1) / a->ot;
    /* rows per stage: the most (<= 8) whose whole rows fit one of the 8
     * slots; rows longer than a slot (f16 >= 8192, q8_0 14336): the
     * register kernel */
    const size_t row = w->q_row + w->s_row, slot = MVS_SMEM / MVS_CW / 16 * 16;
    a->rs = 8;
    while (a->rs > 1 && (size_t)a->rs * row > slot) a->rs /= 2;
    if ((size_t)a->rs * row > slot) return false;
    a->stage_bytes = (uint32_t)(a->rs * row);
    a->nst = a->rt / a->rs;
    return true;
}

bool mvs_supported(const tlc_ctx *c, const tlc_weight *w, int mode) {
    mvs_args a;
    return mvs_plan(c, w, mode, &a);
}

template <int T>
static cudaError_t mvs_go(tlc_ctx *c, const mvs_args &a, const float *xf, const int8_t *xq, const float2 *xds,
                          float *y, int mode, int64_t n_ro, const mv_fuse_d &f) {
    static bool attr = false; /* raise the dynamic shared-memory limit once per kernel */
    if (!attr) {
        cudaError_t e = cudaFuncSetAttribute(mvs_k<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, MVS_SMEM);
        if (e != cudaSuccess) return e;
        attr = true;
    }
    const unsigned grid = (unsigned)std::min<int64_t>(a.ntask, c->n_sm);
    return tlc_launch(c, mvs_k<T>, dim3(grid), dim3((MVS_CW + 1) * 32), (size_t)MVS_CW * a.stage_bytes, a, xf, xq,
                      xds, y, mode, n_ro, f, c->mv_cnt);
}

bool mvs_launch(tlc_ctx *c, const tlc_weight *w, const float *xf, const int8_t *xq, const float2 *xds, float *y,
                int mode, const mv_fuse_d &f, cudaError_t *e) {
    mvs_args a;
    if (!mvs_plan(c, w, mode, &a)) return false;
    const int64_t n_ro = mode == TLC_MV_GLU ? w->n_out / 2 : w->n_out;
    *e = mv_dispatch(w->type, [&](auto t) { return mvs_go<decltype(t)::value>(c, a, xf, xq, xds, y, mode, n_ro, f); });
    return true;
}
