/* tools/args: strict number parsing for CLI flags (no atoi: "12abc" or an
 * out-of-range value is a usage error, not a silent 12). */
#ifndef TL_TOOLS_ARGS_H
#define TL_TOOLS_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parse argv[*i + 1] as the value of flag argv[*i]; advance *i. On error
 * print "tallow CMD: ..." to stderr and return false. */
bool args_int(int argc, char **argv, int *i, long lo, long hi, int32_t *out);
bool args_u64(int argc, char **argv, int *i, uint64_t *out);
bool args_float(int argc, char **argv, int *i, double lo, double hi, float *out);
bool args_str(int argc, char **argv, int *i, const char **out);
/* Flags shared by run, chat and bench. Each returns true if argv[*i] was
 * one of its flags (then *ok tells whether its value parsed), false if the
 * flag is not one of them (caller tries its own). */
#include "tallow.h"
/* -v, -ngl N, --device cpu|cuda, --cpu-kernels auto|scalar|avx2|avx512 */
bool args_model_flag(int argc, char **argv, int *i, tl_model_params *mp, bool *ok);
/* --temp --top-k --top-p --min-p --repeat-penalty --presence-penalty --frequency-penalty
 * --repeat-last-n --seed --typical --top-n-sigma --xtc-probability --xtc-threshold
 * --dry-multiplier --dry-base --dry-allowed-length --dry-penalty-last-n --mirostat
 * --mirostat-ent --mirostat-lr --samplers */
#define ARGS_SAMPLER_USAGE                                                                             \
    "  --typical X --top-n-sigma X --xtc-probability X --xtc-threshold X --mirostat 0|1|2\n"           \
    "  --mirostat-ent TAU --mirostat-lr ETA --dry-multiplier X --dry-base X --dry-allowed-length N\n"  \
    "  --dry-penalty-last-n N --dry-sequence-breaker STR (repeatable; default \\n : \" *)\n"           \
    "  --samplers LIST     stage order, e.g. penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature\n"

bool args_sampler_flag(int argc, char **argv, int *i, tl_sampler_params *sp, bool *ok);

/* Flags shared by train and finetune: --device cpu|cuda and
 * --matmul f32|tf32|bf16 (same contract as args_model_flag). */
#include "tallow_train.h"
#define ARGS_TRAIN_USAGE                                                                             \
    "  --device cpu|cuda   where training runs (default cpu)\n"                                      \
    "  --matmul f32|tf32|bf16  CUDA matmul precision (default f32; fp32 master weights)\n"
bool args_train_flag(int argc, char **argv, int *i, tt_device *dev, tt_matmul_prec *mm, bool *ok);

/* Read a whole file ("-": stdin) into a NUL-terminated malloc'd buffer (max 1 GiB). */
char *args_read_file(const char *path, size_t *len);

#endif
