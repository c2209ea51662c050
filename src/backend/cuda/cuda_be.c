/* backend/cuda/cuda_be: the CUDA backend's weights, contexts and steps (see
 * cuda_be.h): weights uploaded once and repacked, stacks of one type as one
 * matrix; the KV pool and activations of a context; steps whose inputs one
 * copy takes from pinned memory, eager or captured as CUDA graphs.
 * Owns: be_model, be_ctx. Calls: backend/cuda (C ABI), base. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_be.h"

tl_status cb_keep(cb_alloc **list, int *n, int *cap, void *p, size_t bytes) {
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 64;
        cb_alloc *l = realloc(*list, (size_t)nc * sizeof *l);
        if (!l) return tl_err(TL_ERR_NOMEM, "cuda backend: out of memory");
        *list = l;
        *cap = nc;
    }
    (*list)[(*n)++] = (cb_alloc){p, bytes};
    return TL_OK;
}

/* ---- models ------------------------------------------------------------------ */

static tl_status cb_model_init(const be_model_desc *d, be_model **out) {
    be_model *bm = calloc(1, sizeof *bm);
    if (!bm) return tl_err(TL_ERR_NOMEM, "cuda backend: out of memory");
    tl_status s = tlc_init(d->device, d->cuda_tuning, &bm->c);
    if (s) {
        free(bm);
        return s;
    }
    bm->total = d->total_bytes;
    bm->progress = d->verbose || d->total_bytes > ((uint64_t)1 << 30);
    bm->last_pct = -5;
    *out = bm;
    return TL_OK;
}

static void cb_model_free(be_model *bm) {
    if (!bm) return;
    tlc_sync(bm->c);
    for (int i = 0; i < bm->n_allocs; i++) tlc_dfree(bm->c, bm->allocs[i].p, bm->allocs[i].n);
    if (bm->staging) tlc_dfree(bm->c, bm->staging, bm->staging_bytes);
    for (int i = 0; i < bm->n_host; i++) free(bm->host[i].p);
    free(bm->allocs);
    free(bm->host);
    tlc_free(bm->c);
    free(bm);
}

static tl_status cb_model_ready(be_model *bm) {
    tl_status s = tlc_sync(bm->c);
    if (bm->staging) tlc_dfree(bm->c, bm->staging, bm->staging_bytes);
    bm->staging = NULL;
    bm->staging_bytes = 0;
    if (bm->progress && bm->done < bm->total) fputc('\n', stderr);
    return s;
}

static void cb_progress(be_model *bm, uint64_t add) {
    bm->done += add;
    if (!bm->progress || !bm->total) return;
    int pct = (int)(100.0 * (double)bm->done / (double)bm->total);
    if (pct / 5 != bm->last_pct / 5 || bm->done >= bm->total) {
        fprintf(stderr, "\rcuda: uploading weights %3d%% (%.2f / %.2f GiB)", pct, bm->done / 1073741824.0,
                bm->total / 1073741824.0);
        if (bm->done >= bm->total) fputc('\n', stderr);
        bm->last_pct = pct;
    }
}

static tl_status cb_dalloc(be_model *bm, size_t bytes, const char *what, void **out) {
    tl_status s = tlc_alloc(bm->c, bytes, what, out);
    if (s) return s;
    if ((s = cb_keep(&bm->allocs, &bm->n_allocs, &bm->cap_allocs, *out, bytes))) {
        tlc_dfree(bm->c, *out, bytes);
        return s;
    }
    bm->bytes += bytes;
    return TL_OK;
}

/* one matrix of parts [p0, p1) stacked by rows (one type) into w */
static tl_status cb_upload(be_model *bm, tlc_weight *w, const tl_tensor *const *parts, int p0, int p1) {
    const tl_type t = parts[p0]->type;
    const int64_t n_in = parts[p0]->ne[0];
    int64_t rows = 0;
    size_t raw_max = 0;
    for (int i = p0; i < p1; i++) {
        rows += parts[i]->ne[1];
        const size_t raw = tl_row_bytes(t, n_in) * (size_t)parts[i]->ne[1];
        if (raw > raw_max) raw_max = raw;
    }
    const size_t bytes = tlc_weight_bytes(t, n_in, rows);
    if (!bytes)
        return tl_err(TL_ERR_UNSUPPORTED, "cuda: weight type %s with rows of %lld is not supported on CUDA",
                      tl_type_name(t), (long long)n_in);
    void *dst;
    tl_status s = cb_dalloc(bm, bytes, "model weights", &dst);
    if (s) return s;
    if (raw_max > bm->staging_bytes) {
        /* repacking reads the raw rows from device staging */
        if (bm->staging) {
            if ((s = tlc_sync(bm->c))) return s;
            tlc_dfree(bm->c, bm->staging, bm->staging_bytes);
            bm->staging = NULL;
        }
        if ((s = tlc_alloc(bm->c, raw_max, "weight upload staging", &bm->staging))) return s;
        bm->staging_bytes = raw_max;
    }
    if ((s = tlc_weight_describe(w, t, n_in, rows, dst))) return s;
    int64_t r0 = 0;
    for (int i = p0; i < p1; i++) {
        if ((s = tlc_weight_upload_rows(bm->c, w, r0, parts[i]->ne[1], parts[i]->data, bm->staging))) return s;
        /* the staging buffer is reused by the next upload: wait for the repack */
        if ((s = tlc_sync(bm->c))) return s;
        r0 += parts[i]->ne[1];
        cb_progress(bm, tl_row_bytes(t, n_in) * (uint64_t)parts[i]->ne[1]);
    }
    const int64_t gr = rows < CB_GEMM_ROWS ? rows : CB_GEMM_ROWS;
    if ((size_t)gr * (size_t)n_in > bm->gemm_elems) bm->gemm_elems = (size_t)gr * (size_t)n_in;
    if (n_in > bm->max_in) bm->max_in = n_in;
    return TL_OK;
}

static tl_status cb_weight_place(be_model *bm, const tl_tensor *const *parts, int n, be_weight **out) {
    if (n < 1 || n > 3) return tl_err(TL_ERR_INVALID, "cuda backend: a weight stacks 1..3 parts, not %d", n);
    be_weight *w = calloc(1, sizeof *w);
    if (!w) return tl_err(TL_ERR_NOMEM, "cuda backend: out of memory");
    tl_status s = cb_keep(&bm->host, &bm->n_host, &bm->cap_host, w, sizeof *w);
    if (s) {
        free(w);
        return s;
    }
    w->n = n;
    w->n_in = parts[0]->ne[0];
    bool same = true;
    for (int i = 0; i < n; i++) {
        if (parts[i]->ne[0] != w->n_in)
            return tl_err(TL_ERR_INVALID, "cuda backend: stacked weights have %lld and %lld inputs",
                          (long long)w->n_in, (long long)parts[i]->ne[0]);
        w->rows[i] = parts[i]->ne[1];
        w->n_out += parts[i]->ne[1];
        same = same && parts[i]->type == parts[0]->type;
    }
    if (same) {
        w->one = true;
        s = cb_upload(bm, &w->all, parts, 0, n);
        int64_t r0 = 0;
        for (int i = 0; i < n && !s; i++) {
            w->part[i] = tlc_weight_rows(&w->all, r0, w->rows[i]);
            r0 += w->rows[i];
        }
    } else {
        const tlc_weight tq = {.type = parts[0]->type, .n_in = w->n_in}, tv = {.type = parts[n - 1]->type, .n_in = w->n_in};
        w->pair = n == 3 && parts[0]->type == parts[1]->type && tlc_matvec2_ok(bm->c, &tq, &tv);
        if (w->pair) {
            s = cb_upload(bm, &w->qk, parts, 0, 2);
            if (!s) s = cb_upload(bm, &w->v, parts, 2, 3);
            if (!s) {
                w->part[0] = tlc_weight_rows(&w->qk, 0, w->rows[0]);
                w->part[1] = tlc_weight_rows(&w->qk, w->rows[0], w->rows[1]);
                w->part[2] = w->v;
            }
        } else {
            for (int i = 0; i < n && !s; i++) s = cb_upload(bm, &w->part[i], parts, i, i + 1);
        }
    }
    if (s) return s;
    *out = w;
    return TL_OK;
}

static tl_status cb_vec_place(be_model *bm, const tl_tensor *const *parts, int n, const float **out) {
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (parts[i]->type != TL_TYPE_F32)
            return tl_err(TL_ERR_UNSUPPORTED, "cuda: vector of type %s (norms and biases must be f32)",
                          tl_type_name(parts[i]->type));
        total += (size_t)parts[i]->ne[0] * 4;
    }
    void *dst;
    tl_status s = cb_dalloc(bm, total, "model vectors", &dst);
    if (s) return s;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        if ((s = tlc_upload(bm->c, (uint8_t *)dst + off, parts[i]->data, (size_t)parts[i]->ne[0] * 4))) return s;
        off += (size_t)parts[i]->ne[0] * 4;
    }
    *out = dst;
    return TL_OK;
}

static uint64_t cb_model_bytes(const be_model *bm) { return bm->bytes; }

static tl_status cb_device_stats(be_model *bm, bool measure, tl_device_stats *o) {
    tlc_device_info di;
    tl_status s = tlc_get_device_info(bm->c, &di);
    if (s) return s;
    snprintf(o->name, sizeof o->name, "%s", di.name);
    o->mem_free = di.mem_free;
    o->mem_total = di.mem_total;
    o->weight_bytes = bm->bytes;
    o->copy_gbs = o->gemm_tflops = 0;
    if (!measure) return TL_OK;
    /* the copy probe: 2 GiB each way (well past the L2), less if memory is short */
    size_t probe = (size_t)2 << 30;
    while (probe > ((size_t)64 << 20) && 2 * probe + ((size_t)512 << 20) > di.mem_free) probe /= 2;
    if ((s = tlc_measure_copy_bw(bm->c, probe, 20, &o->copy_gbs))) return tl_err_prefix(s, "copy ceiling: ");
    if ((s = tlc_measure_gemm(bm->c, 8192, 10, &o->gemm_tflops))) return tl_err_prefix(s, "GEMM ceiling: ");
    return TL_OK;
}

/* ---- contexts ------------------------------------------------------------------ */

static tl_status cb_ctx_alloc(be_ctx *bc, size_t bytes, const char *what, void **out) {
    tl_status s = tlc_alloc(bc->c, bytes ? bytes : 16, what, out);
    if (s) return s;
    if ((s = cb_keep(&bc->allocs, &bc->n_allocs, &bc->cap_allocs, *out, bytes ? bytes : 16))) {
        tlc_dfree(bc->c, *out, bytes ? bytes : 16);
        return s;
    }
    bc->bytes += bytes;
    return TL_OK;
}

static void cb_ctx_free(be_ctx *bc) {
    if (!bc) return;
    tlc_sync(bc->c);
    for (int i = 0; i < bc->n_graphs; i++) tlc_graph_free(bc->graphs[i].g);
    cb_lora_free(bc);
    tlc_prof_free(bc->prof);
    for (int i = 0; i < bc->n_allocs; i++) tlc_dfree(bc->c, bc->allocs[i].p, bc->allocs[i].n);
    free(bc->allocs);
    if (bc->kv) tlc_dfree(bc->c, bc->kv, bc->kv_bytes);
    tlc_host_free(bc->h_in);
    free(bc);
}

static size_t cb_max(size_t a, size_t b) { return a > b ? a : b; }

static tl_status cb_ctx_init(be_model *bm, const be_ctx_desc *d, be_ctx **out) {
    be_ctx *bc = calloc(1, sizeof *bc);
    if (!bc) return tl_err(TL_ERR_NOMEM, "cuda backend: out of memory");
    bc->bm = bm;
    bc->c = bm->c;
    bc->contig = d->n_seq_max == 1;
    bc->n_tokens = d->n_tokens;
    bc->n_seq_max = d->n_seq_max;
    bc->table_stride = d->table_stride;
    while ((1 << bc->block_shift) < d->block_size) bc->block_shift++;
    bc->n_layer = d->n_layer;
    bc->nkv = d->n_head_kv;
    bc->hd = d->head_dim;
    bc->max_len = d->max_len;
    bc->n_plane = (int64_t)d->n_blocks * d->block_size;
    bc->max_k = d->max_k;
    bc->max_n = d->max_n;
    tl_status s;
    if (d->profile && (s = tlc_prof_init(&bc->prof))) goto fail;
    bc->kv_bytes = (size_t)d->n_layer * 2 * (size_t)d->n_head_kv * (size_t)bc->n_plane * (size_t)d->head_dim * 2;
    if ((s = tlc_alloc(bc->c, bc->kv_bytes, "KV cache", &bc->kv))) goto fail;
    /* unwritten positions are never read, but a zeroed pool keeps a stray read finite */
    if ((s = tlc_memset(bc->c, bc->kv, 0, bc->kv_bytes))) goto fail;
    const size_t nt = (size_t)d->n_tokens, mk = (size_t)d->max_k;
    const int n_head = d->n_head_kv * 8; /* scratch for up to 8 query heads per KV head */
    const size_t att = cb_max(tlc_attn_decode_scratch(n_head, d->head_dim),
                              tlc_attn_paged_scratch(d->n_tokens, n_head, d->n_head_kv, d->head_dim));
    tlc_device_info di;
    if ((s = tlc_get_device_info(bc->c, &di))) goto fail;
    const size_t gemm = cb_max((bm->gemm_elems + nt * (size_t)bm->max_in + 128) * 2,
                               tlc_mm_small_scratch(nt < TLC_MM_SMALL_MAX ? (int64_t)nt : TLC_MM_SMALL_MAX, bm->max_in, d->max_n, di.n_sm));
    if ((s = cb_ctx_alloc(bc, (size_t)d->n_seq_max * (size_t)d->table_stride * 4, "page tables", (void **)&bc->d_table)) ||
        (s = cb_ctx_alloc(bc, (CB_IN_HDR + 5 * nt) * 4, "step inputs", (void **)&bc->d_in)) ||
        (s = cb_ctx_alloc(bc, nt * mk * 4, "normed input", (void **)&bc->xn)) ||
        (s = cb_ctx_alloc(bc, tlc_q8_bytes((int64_t)mk), "q8 input", &bc->xq)) ||
        (s = cb_ctx_alloc(bc, TLC_MVM_MAX * tlc_q8_bytes((int64_t)mk), "q8 inputs (few tokens)", &bc->xqm)) ||
        (s = cb_ctx_alloc(bc, tlc_q8_bytes((int64_t)cb_max(mk, (size_t)d->max_n)), "q8 input 2", &bc->xqb)) ||
        (s = cb_ctx_alloc(bc, (mk / 32 + 1) * 4, "sums of squares", (void **)&bc->ssp)) ||
        (s = cb_ctx_alloc(bc, nt * (size_t)d->max_n * 4, "linear scratch", (void **)&bc->prod)) ||
        (s = cb_ctx_alloc(bc, nt * 2 * (size_t)d->max_n * 4, "gate/up scratch", (void **)&bc->gu)) ||
        (s = cb_ctx_alloc(bc, att * 4, "attention scratch", (void **)&bc->attn_scr)) ||
        (s = cb_ctx_alloc(bc, gemm, "GEMM scratch", &bc->gemm_scr)))
        goto fail;
    if ((s = tlc_memset(bc->c, bc->d_table, 0, (size_t)d->n_seq_max * (size_t)d->table_stride * 4))) goto fail;
    if (bc->contig) {
        /* kv_cache keeps one sequence's blocks in order: its table is the identity */
        int32_t *id = malloc((size_t)d->table_stride * 4);
        if (!id) {
            s = tl_err(TL_ERR_NOMEM, "cuda backend: out of memory");
            goto fail;
        }
        for (int32_t i = 0; i < d->table_stride; i++) id[i] = i;
        s = tlc_upload(bc->c, bc->d_table, id, (size_t)d->table_stride * 4);
        free(id);
        if (s) goto fail;
    }
    if ((s = tlc_host_alloc((CB_IN_HDR + 5 * nt) * 4, (void **)&bc->h_in))) goto fail;
    if ((s = tlc_sync(bc->c))) goto fail;
    *out = bc;
    return TL_OK;
fail:
    cb_ctx_free(bc);
    return tl_err_prefix(s, "cuda context: ");
}

static uint64_t cb_ctx_bytes(const be_ctx *bc) { return bc->bytes + bc->kv_bytes; }

static tl_status cb_alloc_op(be_ctx *bc, size_t bytes, const char *what, void **out) {
    return cb_ctx_alloc(bc, bytes, what, out);
}

/* one 2-d copy: the pool's rows (layer, K|V, kv head) all have the plane's pitch */
static tl_status cb_kv_copy_block(be_ctx *bc, int32_t src, int32_t dst) {
    const size_t row = (size_t)1 << bc->block_shift, hd2 = (size_t)bc->hd * 2;
    return tlc_copy_2d(bc->c, (uint8_t *)bc->kv + (size_t)dst * row * hd2, (uint8_t *)bc->kv + (size_t)src * row * hd2,
                       (size_t)bc->n_plane * hd2, row * hd2, (size_t)bc->n_layer * 2 * (size_t)bc->nkv);
}

/* ---- steps ------------------------------------------------------------------------ */

/* the step's inputs into pinned memory, laid out for its token count m */
static void cb_inputs(be_ctx *bc, const be_step *st) {
    const int32_t m = st->n_tokens;
    int32_t *h = bc->h_in;
    h[0] = h[1] = h[2] = h[3] = 0; /* the head's argmax key starts at zero */
    memcpy(h + CB_IN_HDR, st->token, (size_t)m * 4);
    memcpy(h + CB_IN_HDR + m, st->pos, (size_t)m * 4);
    memcpy(h + CB_IN_HDR + 2 * m, st->seq, (size_t)m * 4);
    memcpy(h + CB_IN_HDR + 3 * m, st->slot, (size_t)m * 4);
    memcpy(h + CB_IN_HDR + 4 * m, st->out_row, (size_t)st->n_out * 4);
    bc->d_tok = bc->d_in + CB_IN_HDR;
    bc->d_pos = bc->d_tok + m;
    bc->d_seq = bc->d_pos + m;
    bc->d_slot = bc->d_seq + m;
    bc->d_out = bc->d_slot + m;
}

static size_t cb_inputs_bytes(const be_step *st) { return (CB_IN_HDR + 4 * (size_t)st->n_tokens + (size_t)st->n_out) * 4; }

static void cb_reset(be_ctx *bc) {
    bc->prep_x = bc->prep_g = bc->q8_src = NULL;
    bc->pend = false;
    bc->key_argmax = false;
    bc->key_dst = NULL;
}

static void cb_graph_remove(be_ctx *bc, int i) {
    tlc_graph_free(bc->graphs[i].g);
    bc->graphs[i] = bc->graphs[--bc->n_graphs];
}

void cb_graphs_drop_lowrank(be_ctx *bc) {
    for (int i = bc->n_graphs - 1; i >= 0; i--)
        if (bc->graphs[i].lr_key) cb_graph_remove(bc, i);
}

/* an index region for a new capture with adapters, and room in the table:
 * a free region, else the least recently replayed such graph's (freed) */
static int cb_lora_slot(be_ctx *bc) {
    bool busy[CBL_SLOTS] = {false};
    int lru = -1, n_busy = 0;
    for (int i = 0; i < bc->n_graphs; i++) {
        const cb_graph *g = &bc->graphs[i];
        if (g->lr_slot < 0) continue;
        busy[g->lr_slot] = true;
        n_busy++;
        if (lru < 0 || g->used < bc->graphs[lru].used) lru = i;
    }
    if (bc->n_graphs == CB_GRAPHS || n_busy == CBL_SLOTS) {
        const int victim = lru >= 0 ? lru : bc->n_graphs - 1;
        if (bc->graphs[victim].lr_slot >= 0) busy[bc->graphs[victim].lr_slot] = false;
        cb_graph_remove(bc, victim);
    }
    int k = 0;
    while (busy[k]) k++;
    return k;
}

/* which attention launches the step's graph holds: a one-sequence decode
 * below the cluster length (1) or past it (0); other steps: 0 */
static int32_t cb_plan(const be_ctx *bc, const be_step *st) {
    return bc->contig && st->n_tokens == 1 && (int64_t)st->max_len <= tlc_attn_cluster_len(bc->c) ? 1 : 0;
}

static tl_status cb_run(be_ctx *bc, const be_step *st, be_forward_fn fn, void *arg) {
    const be_step_dev d = {bc->d_tok, bc->d_pos, bc->d_out};
    cb_reset(bc);
    return fn(arg, &d);
}

static tl_status cb_step_run(be_ctx *bc, const be_step *st, be_forward_fn fn, void *arg) {
    tlc_ctx *c = bc->c;
    if (st->n_tokens > bc->n_tokens)
        return tl_err(TL_ERR_INVALID, "cuda backend: a step of %d tokens (the context runs up to %d)", st->n_tokens,
                      bc->n_tokens);
    /* the previous step's graph may still read the pinned inputs */
    tl_status s = tlc_sync(c);
    if (!s) s = tlc_prof_collect(bc->prof);
    if (s) return s;
    cb_lora_reset(bc);
    /* one sequence: the table is the identity, written once at init */
    for (int32_t i = 0; i < st->n_dirty && !bc->contig; i++) {
        const int32_t q = st->dirty_seq[i];
        const size_t off = (size_t)q * (size_t)st->table_stride;
        if ((s = tlc_upload_async(c, bc->d_table + off, st->table + off, (size_t)st->table_stride * 4))) return s;
    }
    bc->st = st;
    cb_inputs(bc, st);
    const int32_t plan = cb_plan(bc, st);
    const int64_t plan_len = plan ? tlc_attn_cluster_len(c) : (int64_t)bc->n_plane;
    const uint64_t lk = st->lowrank_key;
    const bool capture = !bc->prof && st->n_tokens <= CB_GRAPH_MAX && (bc->contig ? st->n_tokens == 1 : true);
    int gi = -1;
    bc->n_steps++;
    for (int i = 0; i < bc->n_graphs && capture; i++)
        if (bc->graphs[i].m == st->n_tokens && bc->graphs[i].n_out == st->n_out && bc->graphs[i].plan == plan &&
            bc->graphs[i].lr_key == lk)
            gi = i;
    /* a step with adapters is captured only when the previous step had the
     * same key: a batch whose mix changes every step would otherwise pay a
     * capture per step, and the eager step before places the adapters */
    const bool lk_steady = !lk || lk == bc->prev_lr_key;
    bc->prev_lr_key = lk;
    if (gi < 0 && capture && lk_steady && (bc->n_graphs < CB_GRAPHS || lk)) {
        const int slot = lk ? cb_lora_slot(bc) : -1;
        if (lk && (s = cb_lora_capture_begin(bc, slot))) goto done;
        bc->graph_mode = true;
        tlc_attn_plan(c, plan_len);
        if ((s = tlc_graph_begin(c))) {
            if (lk) cb_lora_capture_end(bc); /* the next eager step stages in its arena again */
            goto done;
        }
        s = tlc_upload_async(c, bc->d_in, bc->h_in, cb_inputs_bytes(st));
        if (!s) s = cb_run(bc, st, fn, arg);
        tlc_graph *g = NULL;
        tl_status s2 = tlc_graph_end(c, &g);
        const int lr = lk ? cb_lora_capture_end(bc) : CB_LORA_OK;
        if (lr != CB_LORA_OK) {
            /* the adapters' part could not be captured: run eagerly (which
             * places them for the next try), or always, for an index too big */
            tlc_graph_free(g);
            if (lr == CB_LORA_NEVER)
                bc->graphs[bc->n_graphs++] = (cb_graph){st->n_tokens, st->n_out, plan, lk, -1, bc->n_steps, NULL,
                                                        false, NULL};
            s = TL_OK;
            goto eager;
        }
        if (s && !s2) {
            /* an op refused (a bad input the op checks): no graph, the error stands */
            tlc_graph_free(g);
            goto done;
        }
        /* a step that cannot be captured (s2) runs eagerly from now on: the
         * entry with no graph says so */
        bc->graphs[bc->n_graphs] = (cb_graph){st->n_tokens, st->n_out, plan, lk, s2 ? -1 : slot, bc->n_steps,
                                              s2 ? NULL : g, bc->key_argmax, bc->key_dst};
        gi = bc->n_graphs++;
        s = TL_OK;
    }
    if (gi >= 0 && bc->graphs[gi].g) {
        bc->graphs[gi].used = bc->n_steps;
        /* the host side of the captured forward, as it was at capture */
        bc->key_argmax = bc->graphs[gi].key;
        bc->key_dst = bc->graphs[gi].key_dst;
        s = tlc_graph_launch(c, bc->graphs[gi].g);
        goto done;
    }
eager:
    /* eager: decisions may look at the inputs on the host */
    bc->graph_mode = false;
    tlc_attn_plan(c, plan_len);
    /* profile: the interval up to here is the device's wait for the host */
    cb_mark(bc, "(host between steps)", -1);
    if (!(s = tlc_upload_async(c, bc->d_in, bc->h_in, cb_inputs_bytes(st)))) {
        cb_mark(bc, "inputs", st->n_tokens);
        s = cb_run(bc, st, fn, arg);
    }
done:
    tlc_attn_plan(c, 0);
    bc->graph_mode = false;
    bc->st = NULL;
    return s;
}

static tl_status cb_read(be_ctx *bc, void *dst, const void *src, size_t bytes) {
    return tlc_download(bc->c, dst, src, bytes);
}

static tl_status cb_sync(be_ctx *bc) { return tlc_sync(bc->c); }

static tl_status cb_read_argmax(be_ctx *bc, int32_t *dst, const int32_t *src, int32_t n) {
    if (bc->key_argmax && src == bc->key_dst && n == 1) {
        unsigned long long key = 0;
        tl_status s = tlc_download(bc->c, &key, bc->d_in, sizeof key);
        if (s) return s;
        if (!key) return tl_err(TL_ERR_BACKEND, "cuda: the decode step left no argmax");
        *dst = tlc_argmax_key_row(key);
        return TL_OK;
    }
    return tlc_download(bc->c, dst, src, (size_t)n * 4);
}

/* ---- the ops as the table calls them: each marks its end for the profile ---- */

void cb_mark(be_ctx *bc, const char *name, int detail) {
    if (bc->prof) tlc_prof_mark(bc->prof, tlc_stream_of(bc->c), name, detail);
}

static tl_status cb_profile_report(be_ctx *bc, char *buf, size_t n) {
    if (!bc->prof) return tl_err(TL_ERR_INVALID, "cuda: the context was made without profile");
    tl_status s = tlc_sync(bc->c);
    if (!s) s = tlc_prof_collect(bc->prof);
    if (!s) tlc_prof_report(bc->prof, buf, n);
    tlc_prof_reset(bc->prof);
    return s;
}

static tl_status cbt_get_rows(be_ctx *bc, const be_weight *w, const int32_t *ids, int64_t m, float *out) {
    const tl_status s = cb_get_rows(bc, w, ids, m, out);
    cb_mark(bc, "get_rows", (int)m);
    return s;
}

static tl_status cbt_gather(be_ctx *bc, const float *x, int64_t n, const int32_t *rows, int64_t m, float *out) {
    const tl_status s = cb_gather(bc, x, n, rows, m, out);
    cb_mark(bc, "gather", (int)m);
    return s;
}

static tl_status cbt_add(be_ctx *bc, float *x, const float *y, int64_t n) {
    const tl_status s = cb_add(bc, x, y, n);
    cb_mark(bc, "add", -1);
    return s;
}

static tl_status cbt_scale(be_ctx *bc, float *x, float f, int64_t n) {
    const tl_status s = cb_scale(bc, x, f, n);
    cb_mark(bc, "scale", -1);
    return s;
}

static tl_status cbt_norm(be_ctx *bc, const float *x, const be_norm *nm, int64_t n, int64_t m, float *y) {
    const tl_status s = cb_norm(bc, x, nm, n, m, y);
    cb_mark(bc, "norm", (int)m);
    return s;
}

static tl_status cbt_linear(be_ctx *bc, const be_linear *l) {
    static const char *const name[] = {"linear qkv", "linear o", "linear gate|up", "linear up", "linear down",
                                       "linear output"};
    const tl_status s = cb_linear(bc, l);
    cb_mark(bc, l->wid >= 0 && l->wid < 6 ? name[l->wid] : "linear", (int)l->m);
    return s;
}

static tl_status cbt_attention(be_ctx *bc, const be_attn *a) {
    const tl_status s = cb_attention(bc, a);
    cb_mark(bc, "attention", (int)a->m);
    return s;
}

static const be_ops cuda_ops = {
    .name = "cuda",
    .model_init = cb_model_init,
    .model_ready = cb_model_ready,
    .model_free = cb_model_free,
    .weight_place = cb_weight_place,
    .vec_place = cb_vec_place,
    .model_bytes = cb_model_bytes,
    .device_stats = cb_device_stats,
    .ctx_init = cb_ctx_init,
    .ctx_free = cb_ctx_free,
    .ctx_bytes = cb_ctx_bytes,
    .alloc = cb_alloc_op,
    .kv_copy_block = cb_kv_copy_block,
    .step_run = cb_step_run,
    .read = cb_read,
    .read_argmax = cb_read_argmax,
    .sync = cb_sync,
    .profile_report = cb_profile_report,
    .get_rows = cbt_get_rows,
    .gather = cbt_gather,
    .add = cbt_add,
    .scale = cbt_scale,
    .norm = cbt_norm,
    .linear = cbt_linear,
    .attention = cbt_attention,
};

const be_ops *be_cuda(void) { return &cuda_ops; }
