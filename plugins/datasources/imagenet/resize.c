/* resize.c — the separable resizes of resize.h. Horizontal first, over only the input rows
 * the vertical taps read, into a float buffer; then each output row is a weighted sum of K
 * of those rows, a loop over contiguous floats that the compiler vectorizes. The common
 * K = 1, 2 and 4 cases are inlined with K a constant so their loops unroll. */
#include "resize.h"

#include <math.h>
#include <stdlib.h>

static int grow(void **p, size_t *cap, size_t n, size_t elem) {
  if (n <= *cap) return 0;
  void *q = realloc(*p, n * elem);
  if (!q) return -1;
  *p = q;
  *cap = n;
  return 0;
}

void resize_taps_free(resize_taps *t) {
  free(t->start);
  free(t->weight);
  *t = (resize_taps){0};
}

static float cubic(float x) { /* Keys, a = -0.5 */
  const float a = -0.5f;
  x = fabsf(x);
  if (x <= 1.0f) return ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
  if (x < 2.0f) return ((a * x - 5.0f * a) * x + 8.0f * a) * x - 4.0f * a;
  return 0.0f;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Adds weight w at input index i (clamped) to output j's taps, which start at s. */
static void add_tap(float *wj, int s, int k, int n_in, int i, float w) {
  i = clampi(i, 0, n_in - 1);
  int at = i - s;
  if (at >= 0 && at < k) wj[at] += w;
}

int resize_taps_make(resize_taps *t, resize_kernel kernel, int n_in, int n_out, double scale,
                     double offset) {
  int k;
  switch (kernel) {
    case KERNEL_NEAREST: k = 1; break;
    case KERNEL_BILINEAR: k = 2; break;
    case KERNEL_BICUBIC: k = 4; break;
    default: k = (int)ceil(scale) + 1; break; /* area: a span of `scale` touches this many */
  }
  if (k > n_in) k = n_in;
  if (grow((void **)&t->start, &t->cap_start, (size_t)n_out, sizeof(int)) ||
      grow((void **)&t->weight, &t->cap_weight, (size_t)n_out * (size_t)k, sizeof(float)))
    return -1;
  t->n_out = n_out;
  t->taps = k;
  for (int j = 0; j < n_out; j++) {
    float *wj = t->weight + (size_t)j * (size_t)k;
    for (int q = 0; q < k; q++) wj[q] = 0.0f;
    double centre = (j + 0.5) * scale + offset; /* in input pixels, pixel i spans [i, i+1) */
    int s;
    switch (kernel) {
      case KERNEL_NEAREST: {
        s = clampi((int)floor(centre), 0, n_in - 1);
        wj[0] = 1.0f;
        break;
      }
      case KERNEL_BILINEAR: {
        double in = centre - 0.5;
        int lo = (int)floor(in);
        float frac = (float)(in - lo);
        s = clampi(lo, 0, n_in - k);
        add_tap(wj, s, k, n_in, lo, 1.0f - frac);
        add_tap(wj, s, k, n_in, lo + 1, frac);
        break;
      }
      case KERNEL_BICUBIC: {
        double in = centre - 0.5;
        int lo = (int)floor(in);
        float frac = (float)(in - lo);
        s = clampi(lo - 1, 0, n_in - k);
        float sum = 0.0f, w[4];
        for (int q = 0; q < 4; q++) {
          int i = lo - 1 + q;
          w[q] = (i >= 0 && i < n_in) ? cubic(frac + 1.0f - (float)q) : 0.0f;
          sum += w[q];
        }
        for (int q = 0; q < 4; q++)
          if (w[q] != 0.0f) add_tap(wj, s, k, n_in, lo - 1 + q, w[q] / sum);
        break;
      }
      default: { /* area */
        double a = j * scale + offset, b = (j + 1) * scale + offset;
        int first = (int)floor(a);
        s = clampi(first, 0, n_in - k);
        for (int i = first; i < b; i++) {
          double lo = a > i ? a : i, hi = b < i + 1 ? b : i + 1;
          if (hi > lo) add_tap(wj, s, k, n_in, i, (float)((hi - lo) / scale));
        }
        break;
      }
    }
    t->start[j] = s;
  }
  return 0;
}

static inline void hpass_k(const uint8_t *row, const resize_taps *tx, float *out, int k) {
  for (int j = 0; j < tx->n_out; j++) {
    const uint8_t *p = row + (size_t)tx->start[j] * 3;
    const float *w = tx->weight + (size_t)j * (size_t)k;
    float r = 0.0f, g = 0.0f, b = 0.0f;
    for (int q = 0; q < k; q++) {
      r += w[q] * (float)p[3 * q];
      g += w[q] * (float)p[3 * q + 1];
      b += w[q] * (float)p[3 * q + 2];
    }
    out[3 * j] = r;
    out[3 * j + 1] = g;
    out[3 * j + 2] = b;
  }
}

static void hpass(const uint8_t *row, const resize_taps *tx, float *out) {
  switch (tx->taps) {
    case 1: hpass_k(row, tx, out, 1); break;
    case 2: hpass_k(row, tx, out, 2); break;
    case 4: hpass_k(row, tx, out, 4); break;
    default: hpass_k(row, tx, out, tx->taps); break;
  }
}

static inline void vpass_k(const float *tmp, size_t n, int first_row, const resize_taps *ty,
                           float *out, int k) {
  for (int i = 0; i < ty->n_out; i++) {
    const float *w = ty->weight + (size_t)i * (size_t)k;
    const float *src = tmp + (size_t)(ty->start[i] - first_row) * n;
    float *dst = out + (size_t)i * n;
    for (size_t c = 0; c < n; c++) dst[c] = w[0] * src[c];
    for (int q = 1; q < k; q++) {
      const float *s = src + (size_t)q * n;
      const float wq = w[q];
      for (size_t c = 0; c < n; c++) dst[c] += wq * s[c];
    }
  }
}

int resize_rgb(const uint8_t *in, int in_w, int in_h, size_t in_stride, const resize_taps *tx,
               const resize_taps *ty, float *out, float **tmp, size_t *tmp_cap) {
  (void)in_w;
  int first = in_h, last = -1;
  for (int i = 0; i < ty->n_out; i++) {
    if (ty->start[i] < first) first = ty->start[i];
    if (ty->start[i] + ty->taps - 1 > last) last = ty->start[i] + ty->taps - 1;
  }
  if (last < first) return 0;
  size_t n = (size_t)tx->n_out * 3;
  if (grow((void **)tmp, tmp_cap, n * (size_t)(last - first + 1), sizeof(float))) return -1;
  for (int r = first; r <= last; r++)
    hpass(in + (size_t)r * in_stride, tx, *tmp + (size_t)(r - first) * n);
  switch (ty->taps) {
    case 1: vpass_k(*tmp, n, first, ty, out, 1); break;
    case 2: vpass_k(*tmp, n, first, ty, out, 2); break;
    case 4: vpass_k(*tmp, n, first, ty, out, 4); break;
    default: vpass_k(*tmp, n, first, ty, out, ty->taps); break;
  }
  return 0;
}
