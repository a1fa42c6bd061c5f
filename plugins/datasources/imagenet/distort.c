/* distort.c — colour distortions (distort.h), with TensorFlow's HSV arithmetic from its
 * adjust_hue / adjust_saturation kernels, on values scaled to [0, 1] inside the HSV step,
 * and the matrix of its adjust_hsv_in_yiq (linear, so the [0, 255] scale needs none). */
#include "distort.h"

#include <math.h>

/* Plain comparisons: fminf / fmaxf are library calls at -O2 (their NaN rules), and these
 * run per value. */
static inline float min_f(float a, float b) { return a < b ? a : b; }
static inline float max_f(float a, float b) { return a > b ? a : b; }

void distort_draw(prep_rng *rng, int yiq, color_distortion *d) {
  d->order = (int)(prep_rng_next(rng) & 1);
  d->brightness = prep_rng_range(rng, -32.0f / 255.0f, 32.0f / 255.0f);
  d->saturation = prep_rng_range(rng, 0.5f, 1.5f);
  /* tf's max_delta_hue: 0.2 of the turn in HSV, 0.2 pi radians in YIQ. */
  const float max_hue = yiq ? 0.2f * 3.14159265f : 0.2f;
  d->hue = prep_rng_range(rng, -max_hue, max_hue);
  d->contrast = prep_rng_range(rng, 0.5f, 1.5f);
  d->yiq = yiq;
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

/* TensorFlow's adjust_hsv_in_yiq with value scale 1: RGB to YIQ, the (I, Q) plane turned
 * by `hue` radians and scaled by `sat`, back to RGB; as one matrix on row vectors,
 * yiq * hsv * yiq_inverse with tf's own constants. */
static void saturation_hue_yiq(float *px, size_t n, float sat, float hue) {
  static const double yiq[3][3] = {
      {0.299, 0.596, 0.211}, {0.587, -0.274, -0.523}, {0.114, -0.322, 0.312}};
  static const double yiq_inverse[3][3] = {
      {1.0, 1.0, 1.0}, {0.95617069, -0.2726886, -1.103744}, {0.62143257, -0.64681324, 1.70062309}};
  const double vsu = sat * cos(hue), vsw = sat * sin(hue);
  const double hsv[3][3] = {{1.0, 0.0, 0.0}, {0.0, vsu, vsw}, {0.0, -vsw, vsu}};
  double yh[3][3] = {{0}};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      for (int k = 0; k < 3; k++) yh[i][j] += yiq[i][k] * hsv[k][j];
  float m[3][3];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      double v = 0;
      for (int k = 0; k < 3; k++) v += yh[i][k] * yiq_inverse[k][j];
      m[i][j] = (float)v;
    }
  for (size_t p = 0; p < n; p++) {
    const float r = px[3 * p], g = px[3 * p + 1], b = px[3 * p + 2];
    for (int j = 0; j < 3; j++) px[3 * p + j] = r * m[0][j] + g * m[1][j] + b * m[2][j];
  }
}

static void saturation_and_hue(const color_distortion *d, float *px, size_t n) {
  if (d->yiq) saturation_hue_yiq(px, n, d->saturation, d->hue);
  else saturation_hue(px, n, d->saturation, d->hue);
}

void distort_apply(const color_distortion *d, float *px, size_t n) {
  brightness(px, n, d->brightness * 255.0f);
  if (d->order == 0) {
    saturation_and_hue(d, px, n);
    contrast(px, n, d->contrast);
  } else {
    contrast(px, n, d->contrast);
    saturation_and_hue(d, px, n);
  }
  for (size_t i = 0; i < 3 * n; i++) px[i] = min_f(255.0f, max_f(0.0f, px[i]));
}
