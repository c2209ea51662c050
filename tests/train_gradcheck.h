/* tests/train_gradcheck: the finite-difference gradient check every
 * training-op test uses. An op graph f (inputs: random float64 leaves of the
 * given shapes, uniform in [lo, hi]) is reduced to the scalar sum(f(x) * R)
 * for a random R; the tape's gradients of that scalar are compared with
 * central differences (h = 1e-5) at up to 64 elements of each input, as the
 * relative error |ana - num| / max(1, |num|), which must be <= 1e-6 (NaN
 * counts as a failure). Include after test_util.h; the including file owns
 * g_rng's seed. */
#ifndef TL_TESTS_TRAIN_GRADCHECK_H
#define TL_TESTS_TRAIN_GRADCHECK_H

#include <math.h>
#include <stdio.h>

#include "tallow_train.h"
#include "test_util.h"

#define MAXIN 4 /* inputs per checked graph */

typedef tt_tensor *(*build_fn)(tt_ctx *c, tt_tensor **x);
static tt_rng g_rng;

static double loss_of(tt_ctx *c, build_fn f, tt_tensor **x, const tt_tensor *R) {
    tt_tensor *y = f(c, x);
    if (!y) return NAN;
    double s = 0;
    int64_t n = tt_numel(y);
    for (int64_t i = 0; i < n; i++) s += tt_get(y, i) * tt_get(R, i);
    return s;
}

/* Loss sum(f(x) * R): analytic gradients vs central differences. */
static double check_op(const char *name, build_fn f, int nin, const int64_t shapes[][5], double lo, double hi) {
    tt_ctx *c;
    tt_ctx_init(2, &c);
    tt_tensor *x[MAXIN] = {0};
    for (int i = 0; i < nin; i++) {
        x[i] = tt_new(TT_F64, (int)shapes[i][0], &shapes[i][1]);
        tt_init_uniform(x[i], &g_rng, lo, hi);
        x[i]->requires_grad = true;
    }
    tt_tensor *y = f(c, x);
    CHECK(y != NULL, "%s forward failed: %s", name, tl_last_error());
    if (!y) {
        for (int i = 0; i < nin; i++) tt_free(x[i]);
        tt_ctx_free(c);
        return INFINITY;
    }
    tt_tensor *R = tt_new(TT_F64, y->ndim, y->shape);
    tt_init_uniform(R, &g_rng, -1, 1);
    tl_status s = tt_backward(c, tt_sum(c, tt_mul(c, y, R)));
    CHECK(s == TL_OK, "%s backward: %s", name, tl_last_error());
    tt_ctx_reset(c);
    double maxerr = 0;
    const double h = 1e-5;
    bool prev = tt_set_grad_enabled(c, false);
    for (int i = 0; i < nin; i++) {
        int64_t n = tt_numel(x[i]);
        int64_t step = n > 64 ? n / 64 : 1;
        for (int64_t e = 0; e < n; e += step) {
            double v = tt_get(x[i], e);
            tt_set(x[i], e, v + h);
            double lp = loss_of(c, f, x, R);
            tt_ctx_reset(c);
            tt_set(x[i], e, v - h);
            double lm = loss_of(c, f, x, R);
            tt_ctx_reset(c);
            tt_set(x[i], e, v);
            double num = (lp - lm) / (2 * h);
            double ana = x[i]->grad ? tt_get(x[i]->grad, e) : 0.0;
            double err = fabs(ana - num) / fmax(1.0, fabs(num));
            if (!(err <= maxerr)) maxerr = err; /* NaN counts as worst */
        }
    }
    tt_set_grad_enabled(c, prev);
    CHECK(maxerr <= 1e-6, "%s: max relative grad error %.3g", name, maxerr);
    printf("  %-40s max grad err %.2e\n", name, maxerr);
    for (int i = 0; i < nin; i++) tt_free(x[i]);
    tt_free(R);
    tt_ctx_free(c);
    return maxerr;
}

/* Check one op with shapes given as brace lists and keep the worst error
 * in the double `worst`: GC_RUN(worst, name, fn, nin, lo, hi, {..}, ...). */
#define GC_RUN(worst, name, fn, nin, lo, hi, ...)                                                \
    do {                                                                                         \
        const int64_t gc_sh_[][5] = {__VA_ARGS__};                                               \
        const double gc_e_ = check_op(name, fn, nin, gc_sh_, lo, hi);                            \
        if (gc_e_ > (worst)) (worst) = gc_e_;                                                    \
    } while (0)

#endif
