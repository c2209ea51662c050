/* train/nn_vision: vision modules over the vision ops of train.h: Conv2d,
 * BatchNorm2d (weight, bias and the running_mean / running_var /
 * num_batches_tracked buffers, train/eval mode), Linear, and a small CNN
 * (conv-bn-relu-maxpool, conv-bn-relu-avgpool, linear) to train end to end.
 * Parameters live in a tt_params registry with torch's dotted names
 * ("conv1.weight", "bn1.bias", "fc.weight"); decay is true only for conv and
 * linear weights. Buffers live in a second registry (not optimized: no
 * requires_grad) and are saved in checkpoints with the parameters.
 * Defaults follow torch: Conv2d/Linear kaiming_uniform(a = sqrt(5)) weights
 * and U(+-1/sqrt(fan_in)) biases, BatchNorm weight 1, bias 0, running mean
 * 0, var 1, eps 1e-5, momentum 0.1.
 * Owns: the modules' tensors (through the registries). Calls: train ops, io/safetensors. */
#ifndef TL_TRAIN_NN_VISION_H
#define TL_TRAIN_NN_VISION_H

#include "train/train.h"

/* Add a caller-owned f32 tensor of the given shape to a registry (the
 * registry owns it; tt_registry_free frees all). requires_grad as given. */
tt_tensor *tt_registry_add(tt_params *ps, const char *name, int ndim, const int64_t *shape, bool requires_grad,
                         bool decay);
void tt_registry_free(tt_params *ps);

typedef struct tt_conv2d_layer {
    tt_tensor *weight, *bias; /* [Cout, Cin/groups, k, k], [Cout] or NULL */
    tt_conv2d_opt opt;
} tt_conv2d_layer;
/* Registers "<prefix>.weight" (and "<prefix>.bias"), initialised with init
 * (TT_INIT_DEFAULT: torch's default). */
tl_status tt_conv2d_layer_init(tt_conv2d_layer *l, tt_params *ps, const char *prefix, int64_t cin, int64_t cout,
                               int64_t k, const tt_conv2d_opt *opt, bool bias, const tt_init_scheme *init,
                               tt_rng *r);
tt_tensor *tt_conv2d_layer_forward(tt_ctx *c, const tt_conv2d_layer *l, tt_tensor *x);

typedef struct tt_linear_layer {
    tt_tensor *weight, *bias; /* [out, in], [out] or NULL */
} tt_linear_layer;
tl_status tt_linear_layer_init(tt_linear_layer *l, tt_params *ps, const char *prefix, int64_t in, int64_t out,
                               bool bias, const tt_init_scheme *init, tt_rng *r);
tt_tensor *tt_linear_layer_forward(tt_ctx *c, const tt_linear_layer *l, tt_tensor *x);

typedef struct tt_batchnorm2d {
    tt_tensor *weight, *bias;             /* [C] parameters */
    tt_tensor *running_mean, *running_var; /* [C] buffers */
    tt_tensor *num_batches_tracked;       /* [1] buffer, an integer count held in f64 */
    double eps, momentum;
} tt_batchnorm2d;
/* Parameters "<prefix>.weight/.bias" into ps, buffers "<prefix>.running_mean",
 * ".running_var", ".num_batches_tracked" into bufs. */
tl_status tt_batchnorm2d_init(tt_batchnorm2d *l, tt_params *ps, tt_params *bufs, const char *prefix, int64_t C);
/* training: batch statistics, running stats and num_batches_tracked updated. */
tt_tensor *tt_batchnorm2d_forward(tt_ctx *c, tt_batchnorm2d *l, tt_tensor *x, bool training);

/* ---- a small CNN classifier ------------------------------------------------
 * x [N, in_ch, H, W] -> conv1 (3x3, pad 1) -> bn1 -> relu -> max_pool 2
 * -> conv2 (3x3, pad 1) -> bn2 -> relu -> avg_pool 2 -> flatten -> fc. */
typedef struct tt_cnn_config {
    int64_t in_ch, height, width, c1, c2, classes;
    bool conv_bias;      /* false by default: BatchNorm cancels a conv bias */
    double bn_eps, bn_momentum;
    tt_init_scheme init; /* conv and fc weights; DEFAULT: torch's default */
} tt_cnn_config;
tt_cnn_config tt_cnn_config_default(int64_t in_ch, int64_t height, int64_t width, int64_t classes);

typedef struct tt_cnn {
    tt_cnn_config cfg;
    tt_params params;  /* conv1.weight, bn1.weight, bn1.bias, conv2..., bn2..., fc.weight, fc.bias */
    tt_params buffers; /* bn*.running_mean, bn*.running_var, bn*.num_batches_tracked */
    tt_conv2d_layer conv1, conv2;
    tt_batchnorm2d bn1, bn2;
    tt_linear_layer fc;
    bool training;     /* batch statistics (true after init) or running stats */
} tt_cnn;

tl_status tt_cnn_init(tt_cnn *m, const tt_cnn_config *cfg, uint64_t seed);
void tt_cnn_free(tt_cnn *m);
/* x [N, in_ch, height, width] f32 -> logits [N, classes]. */
tt_tensor *tt_cnn_forward(tt_ctx *c, tt_cnn *m, tt_tensor *x);
/* Mean cross-entropy of labels [N] (ignore -100); logits out optional. */
tt_tensor *tt_cnn_loss(tt_ctx *c, tt_cnn *m, tt_tensor *x, const int32_t *labels, tt_tensor **logits);
/* Parameters as "model.<name>", buffers as "buffer.<name>" (safetensors);
 * load needs a model of the same config and checks every name and shape. */
tl_status tt_cnn_save(const tt_cnn *m, const char *path);
tl_status tt_cnn_load(tt_cnn *m, const char *path);

#endif
