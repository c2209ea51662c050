/* train/device: where tensors live. CPU memory is the framework's own; a
 * CUDA device's goes through train/cuda (builds with TALLOW_CUDA). Copies
 * between devices, element-wise copy/add on a device, and the guard every
 * host-only op runs so that a device tensor never reaches a CPU kernel.
 * Owns: nothing. Calls: train/cuda/tcu (CUDA builds), train internals. */
#include <stdlib.h>
#include <string.h>

#include "train/tt_internal.h"
#ifdef TALLOW_CUDA
#include "train/cuda/tcu.h"
#endif

const char *tt_device_name(tt_device d) { return d == TT_CPU ? "cpu" : d == TT_CUDA ? "cuda" : "?"; }

bool tt__dev_compiled(tt_device dev) {
#ifdef TALLOW_CUDA
    if (dev == TT_CUDA) return true;
#endif
    return dev == TT_CPU;
}

bool tt_device_available(tt_device d) {
    if (d == TT_CPU) return true;
#ifdef TALLOW_CUDA
    if (d == TT_CUDA) return tcu_available();
#endif
    return false;
}

static tl_status no_device(tt_device dev) {
    return tl_err(TL_ERR_UNSUPPORTED, "train: no %s device in this build", tt_device_name(dev));
}

void *tt__dev_alloc(tt_device dev, size_t nbytes) {
#ifdef TALLOW_CUDA
    if (dev == TT_CUDA) return tcu_alloc(nbytes);
#endif
    (void)dev;
    (void)nbytes;
    return NULL;
}

void tt__dev_free(tt_device dev, void *p) {
#ifdef TALLOW_CUDA
    if (dev == TT_CUDA) tcu_free(p);
#endif
    (void)dev;
    (void)p;
}

tl_status tt__dev_zero(tt_device dev, void *p, size_t nbytes) {
#ifdef TALLOW_CUDA
    if (dev == TT_CUDA) return tcu_zero(p, nbytes);
#endif
    (void)p;
    (void)nbytes;
    return no_device(dev);
}

tl_status tt__dev_h2d(tt_device dev, void *dst, const void *src, size_t nbytes) {
#ifdef TALLOW_CUDA
    if (dev == TT_CUDA) return tcu_h2d(dst, src, nbytes);
#endif
    (void)dst;
    (void)src;
    (void)nbytes;
    return no_device(dev);
}

tl_status tt__dev_d2h(tt_device dev, void *dst, const void *src, size_t nbytes) {
#ifdef TALLOW_CUDA
    if (dev == TT_CUDA) return tcu_d2h(dst, src, nbytes);
#endif
    (void)dst;
    (void)src;
    (void)nbytes;
    return no_device(dev);
}

tl_status tt_device_sync(tt_device dev) {
    if (dev == TT_CPU) return TL_OK;
#ifdef TALLOW_CUDA
    if (dev == TT_CUDA) return tcu_sync();
#endif
    return no_device(dev);
}

tl_status tt_device_memory(tt_device dev, size_t *free_bytes, size_t *total_bytes) {
#ifdef TALLOW_CUDA
    if (dev == TT_CUDA) return tcu_memory(free_bytes, total_bytes);
#endif
    (void)free_bytes;
    (void)total_bytes;
    return dev == TT_CPU ? tl_err(TL_ERR_UNSUPPORTED, "train: device_memory of the cpu") : no_device(dev);
}

tl_status tt_device_profile(tt_device dev, bool on) {
#ifdef TALLOW_CUDA
    if (dev == TT_CUDA) return tcu_profile(on);
#endif
    (void)on;
    return dev == TT_CPU ? tl_err(TL_ERR_UNSUPPORTED, "train: no kernel timer on the cpu (use perf)") : no_device(dev);
}

tl_status tt_device_profile_report(tt_device dev, char *buf, size_t n) {
    if (buf && n) buf[0] = 0;
#ifdef TALLOW_CUDA
    if (dev == TT_CUDA) return tcu_profile_report(buf, n);
#endif
    return dev == TT_CPU ? tl_err(TL_ERR_UNSUPPORTED, "train: no kernel timer on the cpu (use perf)") : no_device(dev);
}

void tt_ctx_set_matmul_prec(tt_ctx *c, tt_matmul_prec p) { c->mm_prec = p; }

bool tt__on_host(const char *op, const tt_tensor *const *xs, int n) {
    for (int i = 0; i < n; i++)
        if (xs[i] && xs[i]->st->device != TT_CPU) {
            tl_err(TL_ERR_UNSUPPORTED, "train: %s has no %s kernel (input %d is on %s): move it with tt_to_device",
                   op, tt_device_name(xs[i]->st->device), i, tt_device_name(xs[i]->st->device));
            return false;
        }
    return true;
}

bool tt__all_on(const char *op, tt_device dev, const tt_tensor *const *xs, int n) {
    for (int i = 0; i < n; i++)
        if (xs[i] && xs[i]->st->device != dev) {
            tl_err(TL_ERR_INVALID, "train: %s: input %d is on %s, the others on %s (copy with tt_to_device)", op, i,
                   tt_device_name(xs[i]->st->device), tt_device_name(dev));
            return false;
        }
    return true;
}

static void *elem_ptr(const tt_tensor *t) {
    return (char *)t->st->data + (size_t)t->offset * tt__esize(t->dtype);
}

tl_status tt_copy_across(tt_tensor *dst, const tt_tensor *src) {
    if (!dst || !src) return tl_err(TL_ERR_INVALID, "train: copy of a NULL tensor");
    int64_t n = tt_numel(dst);
    if (dst->dtype != src->dtype || n != tt_numel(src) || !tt_is_contiguous(dst) || !tt_is_contiguous(src))
        return tl_err(TL_ERR_INVALID, "train: copy between devices needs contiguous tensors of one dtype and size "
                      "(%s %lld -> %s %lld)", tt_dtype_name(src->dtype), (long long)tt_numel(src),
                      tt_dtype_name(dst->dtype), (long long)n);
    size_t nb = (size_t)n * tt__esize(dst->dtype);
    tt_device dd = tt__dev(dst), sd = tt__dev(src);
    if (nb == 0) return TL_OK;
    if (dd == TT_CPU && sd == TT_CPU) {
        memmove(elem_ptr(dst), elem_ptr(src), nb);
        return TL_OK;
    }
    if (dd == TT_CPU) return tt__dev_d2h(sd, elem_ptr(dst), elem_ptr(src), nb);
    if (sd == TT_CPU) return tt__dev_h2d(dd, elem_ptr(dst), elem_ptr(src), nb);
    return tt__dev_copy(dst, src, false);
}

tl_status tt__dev_copy(tt_tensor *dst, const tt_tensor *src, bool add) {
    tt_device dd = tt__dev(dst), sd = tt__dev(src);
    if (dd != sd) {
        if (add) return tl_err(TL_ERR_INVALID, "train: add across devices (%s into %s)", tt_device_name(sd),
                               tt_device_name(dd));
        return tt_copy_across(dst, src);
    }
#ifdef TALLOW_CUDA
    if (dd == TT_CUDA) {
        int64_t n = tt_numel(dst);
        if (tt_numel(src) != n)
            return tl_err(TL_ERR_INVALID, "train: device copy of %lld elements into %lld", (long long)tt_numel(src),
                          (long long)n);
        bool same = src->ndim == dst->ndim;
        for (int i = 0; same && i < dst->ndim; i++) same = src->shape[i] == dst->shape[i];
        int64_t sh[4], sdst[4], ssrc[4];
        if (same) {
            tt__shape4(dst->ndim, dst->shape, sh);
            tt__bstrides4(dst, dst->ndim, dst->shape, sdst);
            tt__bstrides4(src, dst->ndim, dst->shape, ssrc);
        } else if (tt_is_contiguous(src) && tt_is_contiguous(dst)) { /* a reshape: flat */
            sh[0] = sh[1] = sh[2] = 1;
            sh[3] = n;
            sdst[0] = sdst[1] = sdst[2] = ssrc[0] = ssrc[1] = ssrc[2] = 0;
            sdst[3] = ssrc[3] = 1;
        } else {
            return tl_err(TL_ERR_UNSUPPORTED, "train: cuda copy between different shapes of strided tensors");
        }
        if (add && (dst->dtype != TT_F32 || src->dtype != TT_F32))
            return tl_err(TL_ERR_UNSUPPORTED, "train: cuda accumulation in %s (f32 only)", tt_dtype_name(dst->dtype));
        return tcu_copy4(elem_ptr(dst), (int)dst->dtype, sdst, elem_ptr(src), (int)src->dtype, ssrc, sh, add);
    }
#endif
    (void)add;
    return no_device(dd);
}

tl_status tt__dev_fill(tt_tensor *t, double v) {
#ifdef TALLOW_CUDA
    if (tt__dev(t) == TT_CUDA) {
        if (!tt_is_contiguous(t)) return tl_err(TL_ERR_UNSUPPORTED, "train: cuda fill of a strided tensor");
        return tcu_fill(elem_ptr(t), (int)t->dtype, tt_numel(t), v);
    }
#endif
    (void)v;
    return no_device(tt__dev(t));
}

tl_status tt_tensor_move(tt_tensor *t, tt_device dev) {
    if (!t || t->owner) return tl_err(TL_ERR_INVALID, "train: tensor_move of a NULL or ctx-owned tensor");
    if (tt__dev(t) == dev) return TL_OK;
    if (!tt_is_contiguous(t) || t->st->refs != 1)
        return tl_err(TL_ERR_INVALID, "train: tensor_move of a view (move the tensor it views)");
    tt_tensor *n = tt_new_on(dev, t->dtype, t->ndim, t->shape);
    if (!n) return TL_ERR_NOMEM;
    tl_status s = tt_copy_across(n, t);
    if (s != TL_OK) {
        tt_free(n);
        return s;
    }
    tt_storage *old = t->st;
    t->st = n->st;
    t->offset = 0;
    n->st = old;
    tt_free(n); /* releases the old storage */
    if (t->grad) {
        tt_free(t->grad);
        t->grad = NULL;
    }
    return TL_OK;
}

static tl_status bw_to_device(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *in = n->in[0];
    tt_tensor *h = tt__temp_on(c, tt__dev(in), g->dtype, g->ndim, g->shape);
    if (!h) return TL_ERR_NOMEM;
    tt_tensor *gc = tt__contig(c, (tt_tensor *)g);
    if (!gc) return TL_ERR_NOMEM;
    tl_status s = tt_copy_across(h, gc);
    return s != TL_OK ? s : tt__acc_grad(in, h);
}

tt_tensor *tt_to_device(tt_ctx *c, tt_tensor *x, tt_device dev) {
    if (!x) return NULL;
    if (tt__dev(x) == dev) return x;
    if (!tt_device_available(dev)) {
        tl_err(TL_ERR_UNSUPPORTED, "train: to_device: no %s device (%s)", tt_device_name(dev),
               tt__dev_compiled(dev) ? "none answered" : "this build has no CUDA");
        return NULL;
    }
    tt_tensor *xc = tt__contig(c, x);
    if (!xc) return NULL;
    tt_tensor *o = tt__temp_on(c, dev, x->dtype, x->ndim, x->shape);
    if (!o || tt_copy_across(o, xc) != TL_OK) return NULL;
    if (tt__needs_grad(c, &x, 1) && !tt__record(c, "to_device", bw_to_device, o, &x, 1)) return NULL;
    return o;
}
