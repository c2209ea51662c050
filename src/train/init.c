/* train/init: weight initialisation schemes with torch.nn.init's formulas
 * (fans, gains, Kaiming and Xavier in uniform and normal form, and the
 * nn.Linear / nn.Conv2d default), drawn from the framework's seeded RNG (so
 * values differ from torch's; the distributions match: the tests check
 * moments and bounds against these formulas).
 * Owns: nothing. Calls: train/tensor (RNG, uniform/normal fills). */
#include <math.h>

#include "train/tt_internal.h"

double tt_init_gain(tt_nonlin nl, double a) {
    switch (nl) {
    case TT_NL_RELU: return sqrt(2.0);
    case TT_NL_LEAKY_RELU: return sqrt(2.0 / (1.0 + a * a));
    case TT_NL_TANH: return 5.0 / 3.0;
    default: return 1.0; /* linear, sigmoid (and conv/identity in torch) */
    }
}

tl_status tt_init_fans(const tt_tensor *t, int64_t *fan_in, int64_t *fan_out) {
    if (!t || t->ndim < 2)
        return tl_err(TL_ERR_INVALID, "train: init: fan in/out need a tensor of 2+ dims (got %d)", t ? t->ndim : 0);
    int64_t rf = 1; /* receptive field: product of the kernel dims */
    for (int i = 2; i < t->ndim; i++) rf *= t->shape[i];
    *fan_in = t->shape[1] * rf;
    *fan_out = t->shape[0] * rf;
    return TL_OK;
}

tl_status tt_init_kaiming(tt_tensor *t, tt_rng *r, bool uniform, bool fan_out_mode, tt_nonlin nl, double a) {
    int64_t fi, fo;
    tl_status s = tt_init_fans(t, &fi, &fo);
    if (s != TL_OK) return s;
    int64_t fan = fan_out_mode ? fo : fi;
    if (fan < 1) return tl_err(TL_ERR_INVALID, "train: kaiming init of a tensor with a zero fan");
    double std = tt_init_gain(nl, a) / sqrt((double)fan);
    if (uniform) tt_init_uniform(t, r, -sqrt(3.0) * std, sqrt(3.0) * std);
    else tt_init_normal(t, r, 0.0, std);
    return TL_OK;
}

tl_status tt_init_xavier(tt_tensor *t, tt_rng *r, bool uniform, double gain) {
    int64_t fi, fo;
    tl_status s = tt_init_fans(t, &fi, &fo);
    if (s != TL_OK) return s;
    if (fi + fo < 1) return tl_err(TL_ERR_INVALID, "train: xavier init of an empty tensor");
    double std = gain * sqrt(2.0 / (double)(fi + fo));
    if (uniform) tt_init_uniform(t, r, -sqrt(3.0) * std, sqrt(3.0) * std);
    else tt_init_normal(t, r, 0.0, std);
    return TL_OK;
}

tl_status tt_init_torch_default(tt_tensor *w, tt_tensor *bias, tt_rng *r) {
    /* kaiming_uniform(a = sqrt(5)): gain sqrt(1/3), bound sqrt(3)*gain/sqrt(fan_in) = 1/sqrt(fan_in) */
    tl_status s = tt_init_kaiming(w, r, true, false, TT_NL_LEAKY_RELU, sqrt(5.0));
    if (s != TL_OK || !bias) return s;
    int64_t fi, fo;
    tt_init_fans(w, &fi, &fo);
    double b = 1.0 / sqrt((double)fi);
    tt_init_uniform(bias, r, -b, b);
    return TL_OK;
}

tl_status tt_init_apply(const tt_init_scheme *s, tt_tensor *w, tt_tensor *bias, tt_rng *r) {
    tl_status st = TL_OK;
    switch (s->kind) {
    case TT_INIT_NORMAL:
        if (!(s->std >= 0)) return tl_err(TL_ERR_INVALID, "train: init: normal std %g must be >= 0", s->std);
        tt_init_normal(w, r, 0.0, s->std);
        break;
    case TT_INIT_KAIMING_UNIFORM:
    case TT_INIT_KAIMING_NORMAL:
        st = tt_init_kaiming(w, r, s->kind == TT_INIT_KAIMING_UNIFORM, s->fan_out, s->nonlin, s->a);
        break;
    case TT_INIT_XAVIER_UNIFORM:
    case TT_INIT_XAVIER_NORMAL:
        st = tt_init_xavier(w, r, s->kind == TT_INIT_XAVIER_UNIFORM, tt_init_gain(s->nonlin, s->a));
        break;
    case TT_INIT_TORCH_DEFAULT:
        return tt_init_torch_default(w, bias, r);
    default:
        return tl_err(TL_ERR_INVALID, "train: init: scheme %d is not a concrete scheme", (int)s->kind);
    }
    if (st == TL_OK && bias) tt_fill(bias, 0.0);
    return st;
}
