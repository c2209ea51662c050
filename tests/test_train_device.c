/* tests/test_train_device: the device layer's CPU-side contract: device
 * names, CPU storages report TT_CPU, a build or machine without CUDA refuses
 * CUDA tensors with a clear error (and loses nothing), and cross-device
 * copies check dtype and size. The CUDA kernels themselves are tested on
 * the GPU machine (tests/gpu/test_train_cuda.c, label gpu). */
#include <string.h>

#include "tallow_train.h"
#include "test_util.h"

int main(void) {
    CHECK(!strcmp(tt_device_name(TT_CPU), "cpu") && !strcmp(tt_device_name(TT_CUDA), "cuda"), "names");
    CHECK(tt_device_available(TT_CPU), "cpu is always there");
    int64_t sh[2] = {3, 4};
    tt_tensor *h = tt_new(TT_F32, 2, sh);
    CHECK(tt_device_of(h) == TT_CPU, "tt_new is on the cpu");
    tt_tensor *h2 = tt_new_on(TT_CPU, TT_F32, 2, sh);
    for (int i = 0; i < 12; i++) tt_set(h, i, i * 0.5);
    CHECK(tt_copy_across(h2, h) == TL_OK && tt_get(h2, 11) == 5.5, "cpu -> cpu copy");
    tt_tensor *bad = tt_new(TT_F64, 2, sh);
    CHECK(tt_copy_across(bad, h) != TL_OK && strstr(tl_last_error(), "dtype"), "dtype mismatch refused: %s",
          tl_last_error());
    tt_free(bad);
    tt_ctx *c;
    CHECK(tt_ctx_init(1, &c) == TL_OK, "ctx");
    CHECK(tt_to_device(c, h, TT_CPU) == h, "to own device is the tensor itself");
    if (!tt_device_available(TT_CUDA)) {
        tt_tensor *d = tt_new_on(TT_CUDA, TT_F32, 2, sh);
        CHECK(!d && strstr(tl_last_error(), "cuda"), "no cuda: tt_new_on fails naming it: %s", tl_last_error());
        CHECK(!tt_to_device(c, h, TT_CUDA) && strstr(tl_last_error(), "cuda"), "to_device fails: %s",
              tl_last_error());
        CHECK(tt_tensor_move(h, TT_CUDA) != TL_OK && tt_device_of(h) == TT_CPU && tt_get(h, 3) == 1.5,
              "a failed move leaves the tensor as it was");
        tt_model m;
        tt_model_config k = tt_model_config_default(TT_ARCH_GPT2, 16, 8, 8, 1, 2);
        CHECK(tt_model_init(&m, &k, 1) == TL_OK, "model");
        CHECK(tt_model_to(&m, TT_CUDA) != TL_OK && strstr(tl_last_error(), "wte.weight"),
              "model_to names the parameter: %s", tl_last_error());
        tt_model_free(&m);
    }
    tt_ctx_free(c);
    tt_free(h);
    tt_free(h2);
    return test_finish();
}
