/* io/plot: line charts as RGB images (and PNG files): axes with tick marks
 * and numeric tick labels at "nice" steps, grid lines, axis titles, a legend,
 * series drawn as polylines with optional point markers. Text is drawn with
 * the built-in 5x7 bitmap font (io/font5x7), so no font or plotting library
 * is needed. Used for the training loss curve.
 * Owns: the image it returns. Calls: io/font5x7, io/png, base/status, libc. */
#ifndef TL_IO_PLOT_H
#define TL_IO_PLOT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

typedef struct plot_series {
    const char *name;     /* legend text; NULL: left out of the legend */
    const double *x, *y;  /* [n]; a point with a non-finite y breaks the line */
    int n;
    uint8_t rgb[3];
    bool markers;         /* a filled square at each point */
} plot_series;

typedef struct plot_spec {
    int w, h;                      /* image size in pixels, 200..8192 each */
    const char *x_label, *y_label; /* axis titles (may be NULL) */
    double x_min, x_max;           /* x range; x_max <= x_min: the data's */
} plot_spec;

/* Tick positions for [lo, hi]: a step of 1, 2 or 5 times a power of ten, the
 * smallest giving at most max_ticks ticks (max_ticks >= 2), starting at the
 * first multiple of the step >= lo. Returns the number of ticks. */
int plot_ticks(double lo, double hi, int max_ticks, double *first, double *step);

/* Draw s at (x, y) (its top-left corner), each font pixel a scale x scale
 * square, clipped to the image. */
void plot_text(uint8_t *rgb, int w, int h, int x, int y, int scale, const char *s, const uint8_t col[3]);
int plot_text_width(const char *s, int scale);

/* Render the chart; *out is malloc'd, h rows of w*3 bytes (free() it). */
tl_status plot_render(const plot_spec *p, const plot_series *s, int n_series, uint8_t **out);
tl_status plot_write_png(const char *path, const plot_spec *p, const plot_series *s, int n_series);

#endif
