/* io/png: a minimal PNG writer (8-bit RGB, filter 0, zlib "stored"
 * uncompressed deflate blocks, CRC-32 and Adler-32 as the PNG and zlib specs
 * define them). Files are larger than a compressing encoder's but need no
 * deflate implementation; used for training loss curves.
 * Owns: nothing. Calls: base/status, libc. */
#ifndef TL_IO_PNG_H
#define TL_IO_PNG_H

#include <stdint.h>

#include "base/status.h"

/* rgb: h rows of w*3 bytes. */
tl_status png_write_rgb(const char *path, int w, int h, const uint8_t *rgb);
uint32_t png_crc32(uint32_t crc, const uint8_t *p, size_t n); /* start with crc = 0 */

#endif
