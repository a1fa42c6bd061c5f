/* distort.c — colour distortions (distort.h), with TensorFlow's HSV arithmetic from its
 * adjust_hue / adjust_saturation kernels, on values scaled to [0, 1] inside the HSV step. */
#include "distort.h"

#include <math.h>

/* Plain comparisons: fminf / fmaxf are library calls at -O2 (their NaN rules), and these
 * run per value. */
static inline float min_f(float a, float b) { return a < b ? a : b; }
static inline float max_f(float a, float b) { return a > b ? a : b; }

void distort_draw(prep_rng *rng, color_distortion *d) {
  d->order = (int)(prep_rng_next(rng) & 1);
  d->brightness = prep_rng_range(rng, -32.0f / 255.0f, 32.0f / 255.0f);
  d->saturation = prep_rng_range(rng, 0.5f, 1.5f);
  d->hue = prep_rng_range(rng, -0.2f, 0.2f);
  d->contrast = prep_rng_range(rng, 0.5f, 1.5f);
}

static void brightness(float *px, size_t n, float delta) {
  for (size_t i = 0; i < 3 * n; i++) px[i] += delta;
}

static void contrast(float *px, size_t n, float factor) {
  double sum[3] = {0, 0, 0};
  for (size_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) sum[c] += px[3 * i + c];
  float mean[3];
  for (int c = 0; c < 3; c++) mean[c] = n ? (float)(sum[c] / (double)n) : 0.0f;
  for (size_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) px[3 * i + c] = (px[3 * i + c] - mean[c]) * factor + mean[c];
}

/* Saturation scaled and hue shifted in one trip through HSV (they are adjacent in both
 * orders); TensorFlow's rgb_to_hsv / hsv_to_rgb. */
static void saturation_hue(float *px, size_t n, float sat, float hue) {
  const float inv = 1.0f / 255.0f;
  for (size_t i = 0; i < n; i++) {
    float r = px[3 * i] * inv, g = px[3 * i + 1] * inv, b = px[3 * i + 2] * inv;
    float v = max_f(r, max_f(g, b));
    float vv = v - min_f(r, min_f(g, b));
    float s = v > 0.0f ? vv / v : 0.0f;
    float h = 0.0f;
    if (vv > 0.0f) {
      if (v == r) {
        h = (g - b) / vv / 6.0f;
        if (h < 0.0f) h += 1.0f;
      } else if (v == g) {
        h = (b - r) / vv / 6.0f + 2.0f / 6.0f;
      } else {
        h = (r - g) / vv / 6.0f + 4.0f / 6.0f;
      }
    }
    s = min_f(1.0f, max_f(0.0f, s * sat));
    /* h in [0, 1) and |hue| < 1: one wrap either way is TensorFlow's fmod + 1. */
    h += hue;
    if (h < 0.0f) h += 1.0f;
    if (h >= 1.0f) h -= 1.0f;
    float c = s * v, m = v - c, dh = h * 6.0f;
    int cat = (int)dh;
    /* TensorFlow's fmodu: dh brought into (0, 2] (dh is in [0, 6) here). */
    float f = dh <= 0.0f ? 2.0f : dh - 2.0f * (float)((cat - (dh == (float)cat)) / 2);
    float x = c * (1.0f - fabsf(f - 1.0f));
    float rr = 0, gg = 0, bb = 0;
    switch (cat) {
      case 0:
        rr = c;
        gg = x;
        break;
      case 1:
        rr = x;
        gg = c;
        break;
      case 2:
        gg = c;
        bb = x;
        break;
      case 3:
        gg = x;
        bb = c;
        break;
      case 4:
        rr = x;
        bb = c;
        break;
      case 5:
        rr = c;
        bb = x;
        break;
      default: break;
    }
    px[3 * i] = (rr + m) * 255.0f;
    px[3 * i + 1] = (gg + m) * 255.0f;
    px[3 * i + 2] = (bb + m) * 255.0f;
  }
}

void distort_apply(const color_distortion *d, float *px, size_t n) {
  brightness(px, n, d->brightness * 255.0f);
  if (d->order == 0) {
    saturation_hue(px, n, d->saturation, d->hue);
    contrast(px, n, d->contrast);
  } else {
    contrast(px, n, d->contrast);
    saturation_hue(px, n, d->saturation, d->hue);
  }
  for (size_t i = 0; i < 3 * n; i++) px[i] = min_f(255.0f, max_f(0.0f, px[i]));
}
