/* train/tensor: tensor and storage lifetime, temporaries, views, strided
 * element access and copies, the RNG and initialisers.
 * Owns: storages (refcounted by views), caller-owned tensors.
 * Calls: base/status, train internals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/tt_internal.h"

static tt_storage *st_new(size_t nbytes, tt_device dev) {
    tt_storage *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    size_t alloc = (nbytes + 63) & ~(size_t)63;
    if (alloc == 0) alloc = 64;
    s->device = dev;
    if (dev == TT_CPU) {
        s->data = aligned_alloc(64, alloc);
        if (s->data) memset(s->data, 0, alloc);
    } else {
        s->data = tt__dev_alloc(dev, alloc);
        if (s->data && tt__dev_zero(dev, s->data, alloc) != TL_OK) {
            tt__dev_free(dev, s->data);
            s->data = NULL;
        }
    }
    if (!s->data) {
        free(s);
        return NULL;
    }
    s->nbytes = nbytes;
    s->refs = 1;
    return s;
}

static void st_release(tt_storage *s) {
    if (s && --s->refs == 0) {
        if (s->device == TT_CPU) free(s->data);
        else tt__dev_free(s->device, s->data);
        free(s);
    }
}

static bool shape_ok(int ndim, const int64_t *shape, int64_t *numel) {
    if (ndim < 0 || ndim > TT_MAX_DIMS) return false;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && n > INT64_MAX / shape[i])) return false;
        n *= shape[i];
    }
    if (n > ((int64_t)1 << 40)) return false;
    *numel = n;
    return true;
}

static void set_contig_strides(tt_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        t->stride[i] = s;
        s *= t->shape[i];
    }
}

static tt_tensor *tensor_alloc(tt_device dev, tt_dtype dt, int ndim, const int64_t *shape) {
    int64_t n;
    if (!shape_ok(ndim, shape, &n)) {
        tl_err(TL_ERR_INVALID, "train: bad tensor shape (ndim %d)", ndim);
        return NULL;
    }
    tt_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        tl_err(TL_ERR_NOMEM, "train: out of memory");
        return NULL;
    }
    t->dtype = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    set_contig_strides(t);
    t->st = st_new((size_t)n * tt__esize(dt), dev);
    if (!t->st) {
        free(t);
        tl_err(TL_ERR_NOMEM, "train: out of %s memory for %lld elements", tt_device_name(dev), (long long)n);
        return NULL;
    }
    return t;
}

tt_tensor *tt_new(tt_dtype dt, int ndim, const int64_t *shape) { return tensor_alloc(TT_CPU, dt, ndim, shape); }

tt_tensor *tt_new_on(tt_device dev, tt_dtype dt, int ndim, const int64_t *shape) {
    if (!tt_device_available(dev)) {
        tl_err(TL_ERR_UNSUPPORTED, "train: no %s device (%s)", tt_device_name(dev),
               tt__dev_compiled(dev) ? "none answered" : "this build has no CUDA");
        return NULL;
    }
    return tensor_alloc(dev, dt, ndim, shape);
}

tt_tensor *tt_new_from(tt_dtype dt, int ndim, const int64_t *shape, const double *vals) {
    tt_tensor *t = tt_new(dt, ndim, shape);
    if (!t) return NULL;
    int64_t n = tt_numel(t);
    for (int64_t i = 0; i < n; i++) tt_set(t, i, vals[i]);
    return t;
}

void tt_free(tt_tensor *t) {
    if (!t) return;
    if (t->grad) tt_free(t->grad);
    st_release(t->st);
    free(t);
}

static bool temps_push(tt_ctx *c, tt_tensor *t) {
    if (c->n_temps == c->cap_temps) {
        int64_t cap = c->cap_temps ? c->cap_temps * 2 : 256;
        tt_tensor **p = realloc(c->temps, (size_t)cap * sizeof *p);
        if (!p) return false;
        c->temps = p;
        c->cap_temps = cap;
    }
    c->temps[c->n_temps++] = t;
    t->owner = c;
    return true;
}

void tt__pool_put(tt_ctx *c, tt_device dev, void *data, size_t nbytes) {
    if (!data) return;
    if (c->n_pool == c->cap_pool) {
        int64_t cap = c->cap_pool ? c->cap_pool * 2 : 256;
        void **p = realloc(c->pool, (size_t)cap * sizeof *p);
        if (p) c->pool = p;
        size_t *b = p ? realloc(c->pool_bytes, (size_t)cap * sizeof *b) : NULL;
        if (b) c->pool_bytes = b;
        tt_device *d = b ? realloc(c->pool_dev, (size_t)cap * sizeof *d) : NULL;
        if (!d) {
            if (dev == TT_CPU) free(data);
            else tt__dev_free(dev, data);
            return;
        }
        c->pool_dev = d;
        c->cap_pool = cap;
    }
    c->pool[c->n_pool] = data;
    c->pool_dev[c->n_pool] = dev;
    c->pool_bytes[c->n_pool++] = nbytes;
}

/* A pooled buffer of exactly nbytes on dev, or NULL. Contents are stale. */
static void *pool_get(tt_ctx *c, tt_device dev, size_t nbytes) {
    for (int64_t i = c->n_pool - 1; i >= 0; i--)
        if (c->pool_bytes[i] == nbytes && c->pool_dev[i] == dev) {
            void *p = c->pool[i];
            c->pool[i] = c->pool[c->n_pool - 1];
            c->pool_bytes[i] = c->pool_bytes[c->n_pool - 1];
            c->pool_dev[i] = c->pool_dev[c->n_pool - 1];
            c->n_pool--;
            return p;
        }
    return NULL;
}

void *tt__pool_take(tt_ctx *c, tt_device dev, size_t nbytes) {
    void *p = pool_get(c, dev, nbytes);
    if (!p) p = dev == TT_CPU ? aligned_alloc(64, (nbytes + 63) & ~(size_t)63) : tt__dev_alloc(dev, nbytes);
    if (!p) tl_err(TL_ERR_NOMEM, "train: out of %s memory for %zu bytes of scratch", tt_device_name(dev), nbytes);
    return p;
}

/* A tensor over a pooled buffer (refs 1, contiguous), or NULL (buffer freed). */
static tt_tensor *wrap_pooled(tt_device dev, void *buf, tt_dtype dt, int ndim, const int64_t *shape, size_t nb) {
    tt_tensor *t = calloc(1, sizeof *t);
    tt_storage *st = calloc(1, sizeof *st);
    if (!t || !st) {
        free(t);
        free(st);
        if (dev == TT_CPU) free(buf);
        else tt__dev_free(dev, buf);
        tl_err(TL_ERR_NOMEM, "train: out of memory");
        return NULL;
    }
    st->data = buf;
    st->nbytes = nb;
    st->refs = 1;
    st->device = dev;
    t->dtype = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    set_contig_strides(t);
    t->st = st;
    return t;
}

static tt_tensor *grad_new(tt_ctx *c, tt_device dev, tt_dtype dt, int ndim, const int64_t *shape, bool zero) {
    int64_t n;
    void *reuse = NULL;
    if (c && shape_ok(ndim, shape, &n) && n > 0) reuse = pool_get(c, dev, (size_t)n * tt__esize(dt));
    if (!reuse) return tensor_alloc(dev, dt, ndim, shape);
    size_t nb = (size_t)n * tt__esize(dt);
    if (zero && dev == TT_CPU) {
        memset(reuse, 0, nb);
    } else if (zero && tt__dev_zero(dev, reuse, nb) != TL_OK) {
        tt__pool_put(c, dev, reuse, nb);
        return NULL;
    }
    return wrap_pooled(dev, reuse, dt, ndim, shape, nb);
}

tt_tensor *tt__grad_new(tt_ctx *c, tt_device dev, tt_dtype dt, int ndim, const int64_t *shape) {
    return grad_new(c, dev, dt, ndim, shape, true);
}

tt_tensor *tt__grad_new_raw(tt_ctx *c, tt_device dev, tt_dtype dt, int ndim, const int64_t *shape) {
    return grad_new(c, dev, dt, ndim, shape, false);
}

void tt__grad_free(tt_ctx *c, tt_tensor *g) {
    if (!g) return;
    if (c && g->st->refs == 1 && g->st->data) {
        tt__pool_put(c, g->st->device, g->st->data, g->st->nbytes);
        g->st->data = NULL;
    }
    tt_free(g);
}

tt_tensor *tt__temp(tt_ctx *c, tt_dtype dt, int ndim, const int64_t *shape) {
    if (!tt__is_compute(dt)) {
        tl_err(TL_ERR_INVALID, "train: an op was given a %s tensor: ops compute in f32/f64 only "
               "(convert with tt_to(c, x, TT_F32) first)", tt_dtype_name(dt));
        return NULL;
    }
    return tt__temp_any(c, dt, ndim, shape);
}

tt_tensor *tt__temp_any(tt_ctx *c, tt_dtype dt, int ndim, const int64_t *shape) {
    return tt__temp_on(c, TT_CPU, dt, ndim, shape);
}

tt_tensor *tt__temp_on(tt_ctx *c, tt_device dev, tt_dtype dt, int ndim, const int64_t *shape) {
    int64_t n;
    void *reuse = NULL;
    if (shape_ok(ndim, shape, &n) && n > 0) reuse = pool_get(c, dev, (size_t)n * tt__esize(dt));
    /* every op fully writes its output: a reused buffer needs no zeroing */
    tt_tensor *t = reuse ? wrap_pooled(dev, reuse, dt, ndim, shape, (size_t)n * tt__esize(dt))
                         : tensor_alloc(dev, dt, ndim, shape);
    if (!t) return NULL;
    if (!temps_push(c, t)) {
        tt_free(t);
        tl_err(TL_ERR_NOMEM, "train: out of memory");
        return NULL;
    }
    c->live_bytes += t->st->nbytes;
    return t;
}

tt_tensor *tt__view(tt_ctx *c, const tt_tensor *x, int ndim, const int64_t *shape,
                    const int64_t *stride, int64_t offset) {
    tt_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        tl_err(TL_ERR_NOMEM, "train: out of memory");
        return NULL;
    }
    t->dtype = x->dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = shape[i];
        t->stride[i] = stride[i];
    }
    t->offset = offset;
    t->st = x->st;
    x->st->refs++;
    if (!temps_push(c, t)) {
        tt_free(t);
        tl_err(TL_ERR_NOMEM, "train: out of memory");
        return NULL;
    }
    return t;
}

tt_tensor *tt_zeros(tt_ctx *c, tt_dtype dt, int ndim, const int64_t *shape) {
    tt_tensor *t = tt__temp_any(c, dt, ndim, shape);
    if (t) memset(t->st->data, 0, t->st->nbytes);
    return t;
}

tt_tensor *tt_full(tt_ctx *c, tt_dtype dt, int ndim, const int64_t *shape, double v) {
    tt_tensor *t = tt__temp_any(c, dt, ndim, shape);
    if (t) tt_fill(t, v);
    return t;
}

tt_tensor *tt_arange(tt_ctx *c, tt_dtype dt, int64_t n) {
    tt_tensor *t = tt__temp_any(c, dt, 1, &n);
    if (t)
        for (int64_t i = 0; i < n; i++) tt_set(t, i, (double)i);
    return t;
}

int64_t tt_numel(const tt_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

bool tt_is_contiguous(const tt_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}

void *tt_data(const tt_tensor *t) {
    return (char *)t->st->data + (size_t)t->offset * tt__esize(t->dtype);
}

int64_t tt__flat_off(const tt_tensor *t, int64_t i) {
    int64_t off = t->offset;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t k = i % t->shape[d];
        i /= t->shape[d];
        off += k * t->stride[d];
    }
    return off;
}

/* On a device: one element through a host bounce (waits for queued work):
 * element access is for inspection and tests, not for loops. */
double tt_get(const tt_tensor *t, int64_t i) {
    if (tt_device_of(t) == TT_CPU) return tt__ld(t, tt__flat_off(t, i));
    tt_storage hs = {0};
    uint64_t buf = 0;
    size_t es = tt__esize(t->dtype);
    int64_t o = tt__flat_off(t, i);
    if (tt__dev_d2h(t->st->device, &buf, (const char *)t->st->data + (size_t)o * es, es) != TL_OK) return NAN;
    hs.data = &buf;
    tt_tensor h = *t;
    h.st = &hs;
    return tt__ld(&h, 0);
}

void tt_set(tt_tensor *t, int64_t i, double v) {
    if (tt_device_of(t) == TT_CPU) {
        tt__st(t, tt__flat_off(t, i), v);
        return;
    }
    tt_storage hs = {0};
    uint64_t buf = 0;
    hs.data = &buf;
    tt_tensor h = *t;
    h.st = &hs;
    tt__st(&h, 0, v);
    size_t es = tt__esize(t->dtype);
    (void)tt__dev_h2d(t->st->device, (char *)t->st->data + (size_t)tt__flat_off(t, i) * es, &buf, es);
}

const char *tt_dtype_name(tt_dtype dt) {
    switch (dt) {
    case TT_F32: return "f32";
    case TT_F64: return "f64";
    case TT_BF16: return "bf16";
    case TT_F16: return "f16";
    case TT_I32: return "i32";
    }
    return "?";
}

const char *tt__shape_str(const tt_tensor *x, char *buf, size_t n) {
    size_t k = 0;
    k += (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < x->ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, d ? ", %lld" : "%lld", (long long)x->shape[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

bool tt__check_compute(const tt_tensor *x, const char *op) {
    if (!x || !tt__on_host(op, &x, 1)) return false;
    if (tt__is_compute(x->dtype)) return true;
    tl_err(TL_ERR_INVALID, "train: %s: %s input: ops compute in f32/f64 only (convert with tt_to first)", op,
           tt_dtype_name(x->dtype));
    return false;
}

bool tt__grad_dtype_ok(tt_ctx *c, const tt_tensor *x, const char *op) {
    if (!x || tt__is_compute(x->dtype) || !c->grad_enabled || !x->requires_grad) return true;
    tl_err(TL_ERR_INVALID, "train: %s: a %s tensor that requires grad: gradients flow through f32/f64 ops "
           "only (convert with tt_to first)", op, tt_dtype_name(x->dtype));
    return false;
}

void tt__shape4(int ndim, const int64_t *shape, int64_t sh[4]) {
    for (int i = 0; i < 4; i++) sh[i] = 1;
    for (int i = 0; i < ndim; i++) sh[4 - ndim + i] = shape[i];
}

/* Strided 4-d copy between any dtypes; the f32->f32 case is the hot one
 * (contiguous() of permuted attention activations). */
#define COPY4(TD, TS)                                                                   \
    do {                                                                                \
        TD *d = (TD *)dst->st->data;                                                    \
        const TS *s = (const TS *)src->st->data;                                        \
        for (int64_t i0 = 0; i0 < sh[0]; i0++)                                          \
            for (int64_t i1 = 0; i1 < sh[1]; i1++)                                      \
                for (int64_t i2 = 0; i2 < sh[2]; i2++) {                                \
                    int64_t od = dst->offset + i0 * sd[0] + i1 * sd[1] + i2 * sd[2];    \
                    int64_t os = src->offset + i0 * ss[0] + i1 * ss[1] + i2 * ss[2];    \
                    if (sd[3] == 1 && ss[3] == 1)                                       \
                        for (int64_t i3 = 0; i3 < sh[3]; i3++) d[od + i3] = (TD)s[os + i3]; \
                    else                                                                \
                        for (int64_t i3 = 0; i3 < sh[3]; i3++)                          \
                            d[od + i3 * sd[3]] = (TD)s[os + i3 * ss[3]];                \
                }                                                                       \
    } while (0)

/* Any other dtype pair: through double (exact for every stored value). */
static void copy4_convert(tt_tensor *dst, const tt_tensor *src, const int64_t *sh, const int64_t *sd,
                          const int64_t *ss) {
    for (int64_t i0 = 0; i0 < sh[0]; i0++)
        for (int64_t i1 = 0; i1 < sh[1]; i1++)
            for (int64_t i2 = 0; i2 < sh[2]; i2++) {
                int64_t od = dst->offset + i0 * sd[0] + i1 * sd[1] + i2 * sd[2];
                int64_t os = src->offset + i0 * ss[0] + i1 * ss[1] + i2 * ss[2];
                for (int64_t i3 = 0; i3 < sh[3]; i3++) tt__st(dst, od + i3 * sd[3], tt__ld(src, os + i3 * ss[3]));
            }
}

void tt_copy_(tt_tensor *dst, const tt_tensor *src) {
    if (tt_device_of(dst) != TT_CPU || tt_device_of(src) != TT_CPU) {
        (void)tt__dev_copy(dst, src, false);
        return;
    }
    /* both viewed with dst's shape: src is read in logical order */
    int64_t sh[4], sd[4], ss[4];
    tt__shape4(dst->ndim, dst->shape, sh);
    tt__bstrides4(dst, dst->ndim, dst->shape, sd);
    if (src->ndim == dst->ndim) {
        bool same = true;
        for (int i = 0; i < src->ndim; i++) same &= src->shape[i] == dst->shape[i];
        if (same) {
            tt__bstrides4(src, dst->ndim, dst->shape, ss);
            if (dst->dtype == TT_F32 && src->dtype == TT_F32) COPY4(float, float);
            else if (dst->dtype == TT_F64 && src->dtype == TT_F64) COPY4(double, double);
            else if (dst->dtype == TT_F32 && src->dtype == TT_F64) COPY4(float, double);
            else if (dst->dtype == TT_F64 && src->dtype == TT_F32) COPY4(double, float);
            else if (dst->dtype == src->dtype && tt__esize(dst->dtype) == 2) COPY4(uint16_t, uint16_t);
            else if (dst->dtype == TT_I32 && src->dtype == TT_I32) COPY4(int32_t, int32_t);
            else copy4_convert(dst, src, sh, sd, ss);
            return;
        }
    }
    int64_t n = tt_numel(dst);
    if (dst->dtype == src->dtype && tt_is_contiguous(dst) && tt_is_contiguous(src) && tt_numel(src) == n) {
        memcpy(tt_data(dst), tt_data(src), (size_t)n * tt__esize(dst->dtype)); /* reshaped, same layout */
        return;
    }
    for (int64_t i = 0; i < n; i++) tt_set(dst, i, tt_get(src, i));
}

void tt_fill(tt_tensor *t, double v) {
    if (tt_device_of(t) != TT_CPU) {
        (void)tt__dev_fill(t, v);
        return;
    }
    if (tt_is_contiguous(t)) {
        int64_t n = tt_numel(t);
        if (t->dtype == TT_F32) {
            float *p = tt_data(t);
            for (int64_t i = 0; i < n; i++) p[i] = (float)v;
        } else if (t->dtype == TT_F64) {
            double *p = tt_data(t);
            for (int64_t i = 0; i < n; i++) p[i] = v;
        } else {
            for (int64_t i = 0; i < n; i++) tt__st(t, t->offset + i, v);
        }
        return;
    }
    tt__fill_strided(t, v);
}

void tt__fill_strided(tt_tensor *t, double v) {
    int64_t n = tt_numel(t);
    for (int64_t i = 0; i < n; i++) tt_set(t, i, v);
}

tt_tensor *tt__clone(const tt_tensor *x) {
    tt_tensor *t = tensor_alloc(tt_device_of(x), x->dtype, x->ndim, x->shape);
    if (t) tt_copy_(t, x);
    return t;
}

tt_tensor *tt__contig(tt_ctx *c, tt_tensor *x) {
    if (tt_is_contiguous(x)) return x;
    tt_tensor *t = tt__temp_on(c, tt_device_of(x), x->dtype, x->ndim, x->shape);
    if (t && tt_device_of(x) != TT_CPU) return tt__dev_copy(t, x, false) == TL_OK ? t : NULL;
    if (t) tt_copy_(t, x);
    return t;
}

/* ---- RNG: xoshiro256** seeded through splitmix64 (public algorithms) ---- */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void tt_rng_seed(tt_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t tt_rng_next(tt_rng *r) {
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

double tt_rng_uniform(tt_rng *r) { return (double)(tt_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

double tt_rng_normal(tt_rng *r) {
    /* Box-Muller; one value per call keeps the stream simple to checkpoint */
    double u1 = tt_rng_uniform(r), u2 = tt_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void tt_init_normal(tt_tensor *t, tt_rng *r, double mean, double std) {
    int64_t n = tt_numel(t);
    for (int64_t i = 0; i < n; i++) tt_set(t, i, mean + std * tt_rng_normal(r));
}

void tt_init_uniform(tt_tensor *t, tt_rng *r, double lo, double hi) {
    int64_t n = tt_numel(t);
    for (int64_t i = 0; i < n; i++) tt_set(t, i, lo + (hi - lo) * tt_rng_uniform(r));
}

void tt_init_kaiming_uniform(tt_tensor *t, tt_rng *r, int64_t fan_in) {
    double b = sqrt(3.0) * sqrt(2.0) / sqrt((double)(fan_in > 0 ? fan_in : 1));
    tt_init_uniform(t, r, -b, b);
}

void tt_init_xavier_uniform(tt_tensor *t, tt_rng *r, int64_t fan_in, int64_t fan_out) {
    double b = sqrt(6.0 / (double)(fan_in + fan_out > 0 ? fan_in + fan_out : 1));
    tt_init_uniform(t, r, -b, b);
}
