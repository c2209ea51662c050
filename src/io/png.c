/* io/png: see png.h. */
#include "io/png.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t png_crc32(uint32_t crc, const uint8_t *p, size_t n) {
    /* bitwise CRC-32 (reflected polynomial 0xEDB88320); images here are small */
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static void be32(uint8_t *o, uint32_t v) {
    o[0] = (uint8_t)(v >> 24);
    o[1] = (uint8_t)(v >> 16);
    o[2] = (uint8_t)(v >> 8);
    o[3] = (uint8_t)v;
}

static int chunk(FILE *f, const char *type, const uint8_t *data, size_t n) {
    uint8_t hdr[8];
    be32(hdr, (uint32_t)n);
    memcpy(hdr + 4, type, 4);
    uint32_t crc = png_crc32(0, (const uint8_t *)type, 4);
    crc = png_crc32(crc, data, n);
    uint8_t tail[4];
    be32(tail, crc);
    return fwrite(hdr, 1, 8, f) == 8 && (n == 0 || fwrite(data, 1, n, f) == n) && fwrite(tail, 1, 4, f) == 4;
}

tl_status png_write_rgb(const char *path, int w, int h, const uint8_t *rgb) {
    if (w <= 0 || h <= 0 || w > 16384 || h > 16384) return tl_err(TL_ERR_INVALID, "png: bad size %dx%d", w, h);
    size_t row = (size_t)w * 3 + 1, raw_n = row * (size_t)h;
    size_t nblocks = (raw_n + 65534) / 65535;
    size_t z_n = 2 + raw_n + nblocks * 5 + 4;
    uint8_t *z = malloc(z_n);
    uint8_t *raw = malloc(raw_n);
    if (!z || !raw) {
        free(z);
        free(raw);
        return tl_err(TL_ERR_NOMEM, "png: out of memory");
    }
    for (int y = 0; y < h; y++) {
        raw[(size_t)y * row] = 0; /* filter: none */
        memcpy(raw + (size_t)y * row + 1, rgb + (size_t)y * w * 3, (size_t)w * 3);
    }
    size_t k = 0;
    z[k++] = 0x78; /* deflate, 32K window */
    z[k++] = 0x01; /* check bits: (0x78 * 256 + 0x01) % 31 == 0 */
    uint32_t a = 1, b = 0;
    for (size_t off = 0; off < raw_n; off += 65535) {
        size_t len = raw_n - off < 65535 ? raw_n - off : 65535;
        z[k++] = off + len == raw_n ? 1 : 0; /* BFINAL, BTYPE=00 stored */
        z[k++] = (uint8_t)len;
        z[k++] = (uint8_t)(len >> 8);
        z[k++] = (uint8_t)~len;
        z[k++] = (uint8_t)(~len >> 8);
        memcpy(z + k, raw + off, len);
        k += len;
        for (size_t i = 0; i < len; i++) {
            a = (a + raw[off + i]) % 65521;
            b = (b + a) % 65521;
        }
    }
    be32(z + k, (b << 16) | a);
    k += 4;
    uint8_t ihdr[13];
    be32(ihdr, (uint32_t)w);
    be32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8;  /* bit depth */
    ihdr[9] = 2;  /* truecolour */
    ihdr[10] = 0; /* deflate */
    ihdr[11] = 0; /* adaptive filtering */
    ihdr[12] = 0; /* no interlace */
    FILE *f = fopen(path, "wb");
    tl_status s = TL_OK;
    if (!f) {
        s = tl_err(TL_ERR_IO, "png: cannot create '%s'", path);
    } else {
        static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
        int ok = fwrite(sig, 1, 8, f) == 8 && chunk(f, "IHDR", ihdr, 13) && chunk(f, "IDAT", z, k) &&
                 chunk(f, "IEND", NULL, 0);
        if (fclose(f) != 0 || !ok) s = tl_err(TL_ERR_IO, "png: writing '%s' failed", path);
    }
    free(z);
    free(raw);
    return s;
}
