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
/* Read a whole file into a NUL-terminated malloc'd buffer (max 1 GiB). */
char *args_read_file(const char *path, size_t *len);

#endif
