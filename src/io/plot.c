/* io/plot: see plot.h. */
#include "io/plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/font5x7.h"
#include "io/png.h"

#define PLOT_SCALE 2 /* text: font pixels per image pixel side */

static const uint8_t plot_black[3] = {0, 0, 0}, plot_grid[3] = {225, 225, 225}, plot_frame[3] = {150, 150, 150},
                     plot_white[3] = {255, 255, 255};

int plot_ticks(double lo, double hi, int max_ticks, double *first, double *step) {
    if (max_ticks < 2) max_ticks = 2;
    if (!(hi > lo)) {
        *first = lo;
        *step = 1;
        return 1;
    }
    double mag = pow(10, floor(log10((hi - lo) / max_ticks)));
    static const double mult[] = {1, 2, 5, 10, 20};
    for (;;) {
        for (int i = 0; i < 5; i++) {
            double st = mult[i] * mag, f = ceil(lo / st - 1e-9) * st;
            int n = (int)floor((hi - f) / st + 1e-9) + 1;
            if (n <= max_ticks) {
                *first = f;
                *step = st;
                return n;
            }
        }
        mag *= 10;
    }
}

static void put_px(uint8_t *rgb, int w, int h, int x, int y, const uint8_t col[3]) {
    if (x >= 0 && x < w && y >= 0 && y < h) memcpy(rgb + ((size_t)y * (size_t)w + (size_t)x) * 3, col, 3);
}

static void fill_rect(uint8_t *rgb, int w, int h, int x0, int y0, int x1, int y1, const uint8_t col[3]) {
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++) put_px(rgb, w, h, x, y, col);
}

void plot_text(uint8_t *rgb, int w, int h, int x, int y, int scale, const char *s, const uint8_t col[3]) {
    for (; *s; s++, x += FONT5X7_ADVANCE * scale) {
        const uint8_t *g = font5x7_glyph(*s);
        for (int r = 0; r < FONT5X7_H; r++)
            for (int c = 0; c < FONT5X7_W; c++)
                if (g[r] & (0x10 >> c))
                    fill_rect(rgb, w, h, x + c * scale, y + r * scale, x + c * scale + scale - 1,
                              y + r * scale + scale - 1, col);
    }
}

int plot_text_width(const char *s, int scale) {
    size_t n = strlen(s);
    return n ? (int)n * FONT5X7_ADVANCE * scale - scale : 0;
}

/* a line 2 pixels thick (the pixel below each one too), inside the clip box */
static void draw_line(uint8_t *rgb, int w, int h, int x0, int y0, int x1, int y1, const uint8_t col[3],
                      const int clip[4]) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, err = dx + dy;
    for (;;) {
        for (int oy = 0; oy < 2; oy++)
            if (x0 >= clip[0] && x0 <= clip[2] && y0 + oy >= clip[1] && y0 + oy <= clip[3])
                put_px(rgb, w, h, x0, y0 + oy, col);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) {
            err += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            err += dx;
            y0 += sy;
        }
    }
}

/* a tick label: as many decimals as the step needs, never "-0" */
static void fmt_tick(char *buf, size_t n, double v, double step) {
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (fabs(v) < step * 1e-6) v = 0;
    snprintf(buf, n, "%.*f", dec, v);
}

tl_status plot_render(const plot_spec *p, const plot_series *s, int n_series, uint8_t **out) {
    *out = NULL;
    if (!p || p->w < 200 || p->h < 200 || p->w > 8192 || p->h > 8192 || n_series < 0 || (n_series && !s))
        return tl_err(TL_ERR_INVALID, "plot: bad size or series");
    const int W = p->w, H = p->h, S = PLOT_SCALE, TH = FONT5X7_H * PLOT_SCALE;
    /* data ranges */
    double xlo = p->x_min, xhi = p->x_max, ylo = INFINITY, yhi = -INFINITY, dxlo = INFINITY, dxhi = -INFINITY;
    for (int k = 0; k < n_series; k++)
        for (int i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].y[i]) || !isfinite(s[k].x[i])) continue;
            ylo = fmin(ylo, s[k].y[i]), yhi = fmax(yhi, s[k].y[i]);
            dxlo = fmin(dxlo, s[k].x[i]), dxhi = fmax(dxhi, s[k].x[i]);
        }
    if (!(ylo <= yhi)) ylo = 0, yhi = 1;
    if (!(yhi > ylo)) ylo -= 0.5, yhi += 0.5;
    if (!(xhi > xlo)) xlo = dxlo <= dxhi ? dxlo : 0, xhi = dxlo <= dxhi ? dxhi : 1;
    if (!(xhi > xlo)) xhi = xlo + 1;
    /* y ticks first: they set the left margin */
    double yf, ys;
    int plot_h_est = H - 30 - 56;
    plot_ticks(ylo, yhi, plot_h_est / (TH * 2) > 2 ? plot_h_est / (TH * 2) : 2, &yf, &ys);
    ylo = floor(ylo / ys + 1e-9) * ys; /* the axis ends on ticks */
    yhi = ceil(yhi / ys - 1e-9) * ys;
    int ny = (int)floor((yhi - ylo) / ys + 1e-9) + 1;
    char buf[64];
    int lab_w = 0;
    for (int i = 0; i < ny; i++) {
        fmt_tick(buf, sizeof buf, ylo + i * ys, ys);
        int tw = plot_text_width(buf, S);
        if (tw > lab_w) lab_w = tw;
    }
    const int L = 12 + lab_w + 8, T = 16 + TH + 14, B = 8 + TH + 10 + TH + 12;
    fmt_tick(buf, sizeof buf, xhi, 1);
    int R = plot_text_width(buf, S) / 2 + 12;
    if (R < 24) R = 24;
    const int x0 = L, x1 = W - R, y0 = T, y1 = H - B; /* the plot area */
    if (x1 - x0 < 40 || y1 - y0 < 40) return tl_err(TL_ERR_INVALID, "plot: %dx%d is too small for the labels", W, H);
    uint8_t *img = malloc((size_t)W * (size_t)H * 3);
    if (!img) return tl_err(TL_ERR_NOMEM, "plot: out of memory for a %dx%d image", W, H);
    memset(img, 255, (size_t)W * (size_t)H * 3);
    const int clip[4] = {x0, y0, x1, y1};
#define PX(v) (x0 + (int)lround(((v) - xlo) / (xhi - xlo) * (x1 - x0)))
#define PY(v) (y1 - (int)lround(((v) - ylo) / (yhi - ylo) * (y1 - y0)))
    /* x ticks: as many as their labels leave room for */
    int xlab_w = plot_text_width(buf, S);
    double xf, xs;
    int max_xt = (x1 - x0) / (xlab_w + 40);
    int nx = plot_ticks(xlo, xhi, max_xt > 2 ? max_xt : 2, &xf, &xs);
    /* grid */
    for (int i = 0; i < ny; i++) draw_line(img, W, H, x0, PY(ylo + i * ys), x1, PY(ylo + i * ys), plot_grid, clip);
    for (int i = 0; i < nx; i++) draw_line(img, W, H, PX(xf + i * xs), y0, PX(xf + i * xs), y1, plot_grid, clip);
    /* series */
    for (int k = 0; k < n_series; k++) {
        bool have_prev = false;
        int px = 0, py = 0;
        for (int i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].y[i]) || !isfinite(s[k].x[i])) {
                have_prev = false;
                continue;
            }
            int cx = PX(s[k].x[i]), cy = PY(s[k].y[i]);
            if (have_prev) draw_line(img, W, H, px, py, cx, cy, s[k].rgb, clip);
            if (s[k].markers)
                for (int d = -3; d <= 3; d++) draw_line(img, W, H, cx - 3, cy + d, cx + 3, cy + d, s[k].rgb, clip);
            px = cx, py = cy, have_prev = true;
        }
    }
    /* axes, ticks and their labels */
    const int all[4] = {0, 0, W - 1, H - 1};
    draw_line(img, W, H, x0, y0, x0, y1, plot_black, all);
    draw_line(img, W, H, x0, y1, x1, y1, plot_black, all);
    for (int i = 0; i < ny; i++) {
        int y = PY(ylo + i * ys);
        draw_line(img, W, H, x0 - 6, y, x0, y, plot_black, all);
        fmt_tick(buf, sizeof buf, ylo + i * ys, ys);
        plot_text(img, W, H, x0 - 9 - plot_text_width(buf, S), y - TH / 2, S, buf, plot_black);
    }
    for (int i = 0; i < nx; i++) {
        int x = PX(xf + i * xs);
        draw_line(img, W, H, x, y1, x, y1 + 6, plot_black, all);
        fmt_tick(buf, sizeof buf, xf + i * xs, xs);
        plot_text(img, W, H, x - plot_text_width(buf, S) / 2, y1 + 10, S, buf, plot_black);
    }
    if (p->x_label)
        plot_text(img, W, H, (x0 + x1 - plot_text_width(p->x_label, S)) / 2, y1 + 10 + TH + 10, S, p->x_label,
                  plot_black);
    if (p->y_label) plot_text(img, W, H, 12, 16, S, p->y_label, plot_black);
    /* legend: top right, inside the plot area */
    int n_named = 0, name_w = 0;
    for (int k = 0; k < n_series; k++)
        if (s[k].name) {
            n_named++;
            int tw = plot_text_width(s[k].name, S);
            if (tw > name_w) name_w = tw;
        }
    if (n_named) {
        const int row = TH + 8, bw = 8 + 28 + 8 + name_w + 8, bh = 8 + n_named * row;
        int bx = x1 - 8 - bw, by = y0 + 8;
        fill_rect(img, W, H, bx, by, bx + bw, by + bh, plot_frame);
        fill_rect(img, W, H, bx + 1, by + 1, bx + bw - 1, by + bh - 1, plot_white);
        int r = 0;
        for (int k = 0; k < n_series; k++) {
            if (!s[k].name) continue;
            int ty = by + 8 + r * row, cy = ty + TH / 2 - 1;
            draw_line(img, W, H, bx + 8, cy, bx + 36, cy, s[k].rgb, all);
            if (s[k].markers) fill_rect(img, W, H, bx + 19, cy - 3, bx + 25, cy + 3, s[k].rgb);
            plot_text(img, W, H, bx + 44, ty, S, s[k].name, plot_black);
            r++;
        }
    }
#undef PX
#undef PY
    *out = img;
    return TL_OK;
}

tl_status plot_write_png(const char *path, const plot_spec *p, const plot_series *s, int n_series) {
    uint8_t *img;
    tl_status st = plot_render(p, s, n_series, &img);
    if (st != TL_OK) return st;
    st = png_write_rgb(path, p->w, p->h, img);
    free(img);
    return st;
}
