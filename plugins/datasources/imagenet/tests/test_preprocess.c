/* test_preprocess.c — tf_cnn_benchmarks' ImageNet preprocessing in the ImageNet datasource
 * (plugins/datasources/imagenet/{preprocess,crop_sample,resize,distort,jpeg_image}.c, built
 * into this test by tests/CMakeLists.txt): the four resize kernels against plain per-pixel
 * implementations of TensorFlow's formulas written here; the eval window (500x375 ->
 * resize to 341x256, crop at (58, 16)) and the whole eval path against decode + reference
 * resize + crop; crop sampling (aspect and area ranges, min_object_covered for a box, the
 * whole-image fallback when nothing fits); colour distortions in HSV (identity, a hue turn,
 * the clip) and in YIQ (against the textbook conversion done step by step, luma kept); and the
 * whole pipeline: same seed -> the same bytes, different seeds -> different crops, the uint8 output
 * the float one before normalization, PNG and tiny images. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crop_sample.h"
#include "distort.h"
#include "jpeg_image.h"
#include "jpeg_make.h"
#include "preprocess.h"
#include "resize.h"

/* ---- reference resizes: one output pixel at a time, straight from the formulas ---- */

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static double px_at(const uint8_t *in, int w, int h, int x, int y, int c) {
  return in[((size_t)clampi(y, 0, h - 1) * w + clampi(x, 0, w - 1)) * 3 + c];
}

static double keys(double x) {
  x = fabs(x);
  if (x <= 1) return (1.5 * x - 2.5) * x * x + 1;
  if (x < 2) return ((-0.5 * x + 2.5) * x - 4) * x + 2;
  return 0;
}

/* Bicubic weights of one axis: TensorFlow's taps, zero outside the input, renormalized. */
static void cubic_axis(double in, int n, int idx[4], double wt[4]) {
  int lo = (int)floor(in);
  double t = in - lo, sum = 0;
  for (int q = 0; q < 4; q++) {
    idx[q] = lo - 1 + q;
    wt[q] = (idx[q] >= 0 && idx[q] < n) ? keys(t + 1 - q) : 0;
    sum += wt[q];
  }
  for (int q = 0; q < 4; q++) wt[q] /= sum;
}

static double ref_pixel(resize_kernel k, const uint8_t *in, int w, int h, int j, int i, int c,
                        double sx, double ox, double sy, double oy) {
  double cx = (j + 0.5) * sx + ox, cy = (i + 0.5) * sy + oy;
  switch (k) {
    case KERNEL_NEAREST: return px_at(in, w, h, (int)floor(cx), (int)floor(cy), c);
    case KERNEL_BILINEAR: {
      double x = cx - 0.5, y = cy - 0.5;
      int x0 = (int)floor(x), y0 = (int)floor(y);
      double fx = x - x0, fy = y - y0;
      double top = px_at(in, w, h, x0, y0, c) * (1 - fx) + px_at(in, w, h, x0 + 1, y0, c) * fx;
      double bot = px_at(in, w, h, x0, y0 + 1, c) * (1 - fx) +
                   px_at(in, w, h, x0 + 1, y0 + 1, c) * fx;
      return top * (1 - fy) + bot * fy;
    }
    case KERNEL_BICUBIC: {
      int xi[4], yi[4];
      double xw[4], yw[4], v = 0;
      cubic_axis(cx - 0.5, w, xi, xw);
      cubic_axis(cy - 0.5, h, yi, yw);
      for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
          if (yw[a] != 0 && xw[b] != 0) v += yw[a] * xw[b] * px_at(in, w, h, xi[b], yi[a], c);
      return v;
    }
    default: { /* area: the mean over [j sx + ox, (j+1) sx + ox) x [...], edges clamped */
      double x0 = j * sx + ox, x1 = x0 + sx, y0 = i * sy + oy, y1 = y0 + sy, v = 0;
      for (int y = (int)floor(y0); y < y1; y++)
        for (int x = (int)floor(x0); x < x1; x++) {
          double a = (fmin(x1, x + 1) - fmax(x0, x)) * (fmin(y1, y + 1) - fmax(y0, y));
          if (a > 0) v += a * px_at(in, w, h, x, y, c);
        }
      return v / (sx * sy);
    }
  }
}

static uint8_t *noise_image(int w, int h, unsigned seed) {
  uint8_t *p = malloc((size_t)w * h * 3);
  uint64_t s = seed;
  for (size_t i = 0; i < (size_t)w * h * 3; i++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    p[i] = (uint8_t)(s >> 56);
  }
  return p;
}

START_TEST(kernels_match_reference) {
  static const struct {
    int iw, ih, ow, oh;
    double ox, oy;
  } cases[] = {
      {37, 29, 16, 12, 0, 0},      /* down */
      {13, 9, 40, 31, 0, 0},       /* up */
      {50, 40, 50, 40, 0, 0},      /* same */
      {64, 48, 20, 30, 3.25, 1.5}, /* a window with offsets, aspect changed */
      {1, 17, 5, 4, 0, 0},         /* one column */
      {200, 3, 7, 9, -0.5, 0.75},  /* offsets past the edges */
  };
  resize_taps tx = {0}, ty = {0};
  float *tmp = NULL;
  size_t tmp_cap = 0;
  for (size_t n = 0; n < sizeof cases / sizeof cases[0]; n++)
    for (int k = 0; k < 4; k++) {
      int iw = cases[n].iw, ih = cases[n].ih, ow = cases[n].ow, oh = cases[n].oh;
      uint8_t *in = noise_image(iw, ih, (unsigned)(n * 4 + k));
      double sx = (double)(iw - (cases[n].ox > 0 ? 2 * cases[n].ox : 0)) / ow;
      double sy = (double)(ih - (cases[n].oy > 0 ? 2 * cases[n].oy : 0)) / oh;
      ck_assert_int_eq(resize_taps_make(&tx, (resize_kernel)k, iw, ow, sx, cases[n].ox), 0);
      ck_assert_int_eq(resize_taps_make(&ty, (resize_kernel)k, ih, oh, sy, cases[n].oy), 0);
      float *out = malloc((size_t)ow * oh * 3 * sizeof(float));
      ck_assert_int_eq(resize_rgb(in, iw, ih, (size_t)iw * 3, &tx, &ty, out, &tmp, &tmp_cap), 0);
      double worst = 0;
      for (int i = 0; i < oh; i++)
        for (int j = 0; j < ow; j++)
          for (int c = 0; c < 3; c++) {
            double want = ref_pixel((resize_kernel)k, in, iw, ih, j, i, c, sx, cases[n].ox, sy,
                                    cases[n].oy);
            worst = fmax(worst, fabs(want - out[((size_t)i * ow + j) * 3 + c]));
          }
      ck_assert_msg(worst < 2e-3, "case %zu kernel %d: off by %g", n, k, worst);
      free(out);
      free(in);
    }
  resize_taps_free(&tx);
  resize_taps_free(&ty);
  free(tmp);
}
END_TEST

/* Known images: a constant stays constant under every kernel; a horizontal ramp halved by
 * bilinear gives the means of pixel pairs ((2j + 0.5) + 0.5 -> pixels 2j, 2j+1). */
START_TEST(kernels_on_known_images) {
  resize_taps tx = {0}, ty = {0};
  float *tmp = NULL, out[8 * 4 * 3];
  size_t tmp_cap = 0;
  uint8_t flat[16 * 8 * 3], ramp[16 * 8 * 3];
  for (int i = 0; i < 16 * 8; i++)
    for (int c = 0; c < 3; c++) {
      flat[3 * i + c] = (uint8_t)(90 + c);
      ramp[3 * i + c] = (uint8_t)(10 * (i % 16) + c);
    }
  for (int k = 0; k < 4; k++) {
    resize_taps_make(&tx, (resize_kernel)k, 16, 8, 2.0, 0);
    resize_taps_make(&ty, (resize_kernel)k, 8, 4, 2.0, 0);
    resize_rgb(flat, 16, 8, 48, &tx, &ty, out, &tmp, &tmp_cap);
    for (int i = 0; i < 8 * 4; i++)
      for (int c = 0; c < 3; c++) ck_assert_float_eq_tol(out[3 * i + c], 90 + c, 1e-4);
  }
  resize_taps_make(&tx, KERNEL_BILINEAR, 16, 8, 2.0, 0);
  resize_taps_make(&ty, KERNEL_BILINEAR, 8, 4, 2.0, 0);
  resize_rgb(ramp, 16, 8, 48, &tx, &ty, out, &tmp, &tmp_cap);
  for (int j = 0; j < 8; j++) ck_assert_float_eq_tol(out[3 * j], 10 * (2 * j) + 5, 1e-4);
  resize_taps_make(&tx, KERNEL_NEAREST, 16, 8, 2.0, 0);
  resize_rgb(ramp, 16, 8, 48, &tx, &ty, out, &tmp, &tmp_cap);
  for (int j = 0; j < 8; j++) ck_assert_float_eq_tol(out[3 * j], 10 * (2 * j + 1), 1e-4);
  resize_taps_free(&tx);
  resize_taps_free(&ty);
  free(tmp);
}
END_TEST

START_TEST(eval_window_geometry) {
  int rw, rh, left, top;
  eval_window(500, 375, 224, 224, &rw, &rh, &left, &top);
  ck_assert_int_eq(rw, 341);
  ck_assert_int_eq(rh, 256);
  ck_assert_int_eq(left, 58);
  ck_assert_int_eq(top, 16);
  eval_window(375, 500, 224, 224, &rw, &rh, &left, &top);
  ck_assert_int_eq(rw, 256);
  ck_assert_int_eq(rh, 341);
  ck_assert_int_eq(left, 16);
  ck_assert_int_eq(top, 58);
  eval_window(224, 224, 224, 224, &rw, &rh, &left, &top); /* int(256.48) */
  ck_assert_int_eq(rw, 256);
  ck_assert_int_eq(left, 16);
  eval_window(1000, 1000, 299, 299, &rw, &rh, &left, &top); /* int(342.355) */
  ck_assert_int_eq(rw, 342);
  ck_assert_int_eq(left, 21);
}
END_TEST

static preprocess_config config(int w, int h, int training, resize_method m, int distortions) {
  preprocess_config c = {
      .height = h, .width = w, .training = training, .resize = m, .distortions = distortions};
  for (int i = 0; i < 3; i++) c.mean[i] = c.std[i] = 0.5f;
  return c;
}

/* The eval path end to end: against the full decode resized (bilinear, reference) to the
 * eval size and cropped. 500x375 -> 341x256 at (58, 16), where the implementation decodes
 * only the window plus margin at 8/8 (4/8 would leave it under 224): the same but for the
 * rounding to bytes (mean 0.25, max 1 level). 1000x750 -> 341x256 again, decoded at 4/8: DCT
 * scaling moves values on this smooth picture by a few levels (mean under 1.5, max under 12 of
 * 255). */
START_TEST(eval_path_matches_resize_then_crop) {
  static const struct {
    int w, h;
    double mean, max;
  } cases[] = {{500, 375, 0.3, 1}, {1000, 750, 1.5, 12}};
  for (int k = 0; k < 2; k++) {
    int w = cases[k].w, h = cases[k].h;
    uint8_t *px = jpeg_make_pattern(w, h, 3, 11);
    made_jpeg j = jpeg_make(px, w, h, (jpeg_make_opts){3, 95, 0, 0});
    rgb_image full = {0};
    char err[256] = "";
    ck_assert_int_eq(jpeg_image_decode_region(j.data, j.size, 0, 0, w, h, 8, &full, err,
                                              sizeof err),
                     0);
    preprocess_config cfg = config(224, 224, 0, RESIZE_BILINEAR, 0);
    preprocess_scratch *s = preprocess_scratch_create();
    uint8_t *got = malloc(224 * 224 * 3);
    ck_assert_msg(preprocess_image_uint8(&cfg, s, j.data, j.size, NULL, 0, 1, got, err,
                                         sizeof err) == 0,
                  "%s", err);
    double sum = 0, worst = 0;
    for (int i = 0; i < 224; i++)
      for (int x = 0; x < 224; x++)
        for (int c = 0; c < 3; c++) {
          double want = ref_pixel(KERNEL_BILINEAR, full.pixels, w, h, x + 58, i + 16, c, w / 341.0,
                                  0, h / 256.0, 0);
          double e = fabs(want - got[((size_t)i * 224 + x) * 3 + c]);
          sum += e;
          worst = fmax(worst, e);
        }
    sum /= 224.0 * 224 * 3;
    ck_assert_msg(sum < cases[k].mean && worst <= cases[k].max, "%dx%d: mean %.2f max %.0f", w, h,
                  sum, worst);
    free(got);
    preprocess_scratch_destroy(s);
    rgb_image_free(&full);
    free(j.data);
    free(px);
  }
}
END_TEST

START_TEST(crop_sampling_ranges) {
  const int w = 640, h = 480, n = 2000;
  int fallbacks = 0, small = 0, large = 0, narrow = 0, wide = 0;
  for (int k = 0; k < n; k++) {
    prep_rng r = prep_rng_stream((uint64_t)k, RNG_CROP);
    crop_rect c;
    int ok = crop_sample(&CROP_TF_CNN_BENCHMARKS, w, h, NULL, 0, &r, &c);
    ck_assert(c.x >= 0 && c.y >= 0 && c.w > 0 && c.h > 0 && c.x + c.w <= w && c.y + c.h <= h);
    if (!ok) {
      fallbacks++;
      continue;
    }
    double area = (double)c.w * c.h / (w * h), aspect = (double)c.w / c.h;
    ck_assert_msg(area >= 0.05 && area <= 1.0, "area %f", area);
    /* width = round(height * aspect): the ratio within half a pixel of the range */
    ck_assert_msg(aspect >= 0.75 - 0.5 / c.h && aspect <= 1.33 + 0.5 / c.h, "aspect %f", aspect);
    small += area < 0.2;
    large += area > 0.8;
    narrow += aspect < 0.8;
    wide += aspect > 1.25;
    /* TensorFlow draws the offset in [0, size - crop): never the last position. */
    ck_assert(c.w == w || c.x + c.w < w);
  }
  ck_assert_int_lt(fallbacks, n / 100);
  ck_assert_int_gt(small, n / 20);
  ck_assert_int_gt(large, n / 50);
  ck_assert_int_gt(narrow, n / 20);
  ck_assert_int_gt(wide, n / 20);
}
END_TEST

START_TEST(crop_sampling_covers_the_box) {
  const int w = 800, h = 600;
  image_box box = {0.30f, 0.55f, 0.45f, 0.75f}; /* ymin xmin ymax xmax: 160 x 90 pixels */
  int bx0 = 440, by0 = 180, bx1 = 600, by1 = 270, fallbacks = 0, full_cover = 0;
  for (int k = 0; k < 2000; k++) {
    prep_rng r = prep_rng_stream((uint64_t)k * 7 + 1, RNG_CROP);
    crop_rect c;
    if (!crop_sample(&CROP_TF_CNN_BENCHMARKS, w, h, &box, 1, &r, &c)) {
      fallbacks++;
      continue;
    }
    int ix = (c.x + c.w < bx1 ? c.x + c.w : bx1) - (c.x > bx0 ? c.x : bx0);
    int iy = (c.y + c.h < by1 ? c.y + c.h : by1) - (c.y > by0 ? c.y : by0);
    double covered = ix > 0 && iy > 0 ? (double)ix * iy / (160.0 * 90) : 0;
    ck_assert_msg(covered >= 0.1, "seed %d covers %f", k, covered);
    full_cover += covered >= 0.999;
  }
  ck_assert_int_lt(fallbacks, 20);
  ck_assert_int_gt(full_cover, 100);
}
END_TEST

START_TEST(crop_sampling_falls_back_to_the_image) {
  crop_rect c;
  /* A box under one pixel counts for nothing: no crop can cover it. */
  image_box tiny = {0.5f, 0.5f, 0.5001f, 0.5001f};
  for (int k = 0; k < 20; k++) {
    prep_rng r = prep_rng_stream((uint64_t)k, RNG_CROP);
    ck_assert_int_eq(crop_sample(&CROP_TF_CNN_BENCHMARKS, 300, 200, &tiny, 1, &r, &c), 0);
    ck_assert(c.x == 0 && c.y == 0 && c.w == 300 && c.h == 200);
  }
  /* A 1000x1 image: no aspect in [0.75, 1.33] has 5% of its area. */
  prep_rng r = prep_rng_stream(3, RNG_CROP);
  ck_assert_int_eq(crop_sample(&CROP_TF_CNN_BENCHMARKS, 1000, 1, NULL, 0, &r, &c), 0);
  ck_assert(c.w == 1000 && c.h == 1);
}
END_TEST

START_TEST(distortions) {
  float px[4 * 3] = {255, 0, 0, 0, 255, 0, 10, 20, 30, 200, 100, 50};
  float copy[12];
  memcpy(copy, px, sizeof px);
  color_distortion id = {0, 0.0f, 1.0f, 0.0f, 1.0f, 0};
  distort_apply(&id, px, 4);
  for (int i = 0; i < 12; i++) ck_assert_float_eq_tol(px[i], copy[i], 1e-3);
  id.order = 1;
  distort_apply(&id, px, 4);
  for (int i = 0; i < 12; i++) ck_assert_float_eq_tol(px[i], copy[i], 1e-3);
  /* A third of a turn of hue: red -> green, green -> blue. */
  color_distortion turn = {0, 0.0f, 1.0f, 1.0f / 3.0f, 1.0f, 0};
  distort_apply(&turn, px, 2);
  ck_assert_float_eq_tol(px[0], 0, 1e-2);
  ck_assert_float_eq_tol(px[1], 255, 1e-2);
  ck_assert_float_eq_tol(px[5], 255, 1e-2);
  /* Saturation 0: grey at the pixel's max; brightness past the top is clipped. */
  float p2[3] = {200, 100, 50};
  color_distortion grey = {0, 0.0f, 0.0f, 0.0f, 1.0f, 0};
  distort_apply(&grey, p2, 1);
  for (int c = 0; c < 3; c++) ck_assert_float_eq_tol(p2[c], 200, 1e-2);
  color_distortion bright = {0, 0.125f, 1.0f, 0.0f, 1.0f, 0};
  float p3[3] = {250, 100, 0};
  distort_apply(&bright, p3, 1);
  ck_assert_float_eq_tol(p3[0], 255, 1e-3);
  ck_assert_float_eq_tol(p3[1], 100 + 0.125f * 255, 1e-2);
  /* Contrast 0.5 halves each channel's distance to its mean. */
  float p4[6] = {100, 0, 0, 200, 0, 0};
  color_distortion con = {1, 0.0f, 1.0f, 0.0f, 0.5f, 0};
  distort_apply(&con, p4, 2);
  ck_assert_float_eq_tol(p4[0], 125, 1e-3);
  ck_assert_float_eq_tol(p4[3], 175, 1e-3);
  /* Draws stay in their ranges. */
  for (int k = 0; k < 1000; k++) {
    prep_rng r = prep_rng_stream((uint64_t)k, RNG_COLOR);
    color_distortion d;
    distort_draw(&r, 0, &d);
    ck_assert(d.order == 0 || d.order == 1);
    ck_assert(fabsf(d.brightness) <= 32.0f / 255.0f && fabsf(d.hue) <= 0.2f && !d.yiq);
    ck_assert(d.saturation >= 0.5f && d.saturation < 1.5f && d.contrast >= 0.5f &&
              d.contrast < 1.5f);
  }
}
END_TEST

/* RGB to NTSC YIQ and back with the textbook matrices (not tf's rounded constants), the
 * (I, Q) plane turned by `hue` radians and scaled by `sat`: what tf's adjust_hsv_in_yiq
 * means, step by step. */
static void yiq_reference(const float in[3], float sat, float hue, float out[3]) {
  double r = in[0], g = in[1], b = in[2];
  double y = 0.299 * r + 0.587 * g + 0.114 * b;
  double i = 0.596 * r - 0.274 * g - 0.322 * b;
  double q = 0.211 * r - 0.523 * g + 0.312 * b;
  double i2 = sat * (i * cos(hue) - q * sin(hue)), q2 = sat * (i * sin(hue) + q * cos(hue));
  out[0] = (float)(y + 0.956 * i2 + 0.621 * q2);
  out[1] = (float)(y - 0.272 * i2 - 0.647 * q2);
  out[2] = (float)(y - 1.106 * i2 + 1.703 * q2);
}

START_TEST(distortions_in_yiq) {
  const float px[4][3] = {{200, 100, 50}, {20, 180, 90}, {128, 128, 128}, {60, 30, 220}};
  /* No turn, no scale: the identity (tf's constants invert each other to 1e-5). */
  color_distortion id = {0, 0.0f, 1.0f, 0.0f, 1.0f, 1};
  float p[12];
  memcpy(p, px, sizeof p);
  distort_apply(&id, p, 4);
  for (int k = 0; k < 12; k++) ck_assert_float_eq_tol(p[k], (&px[0][0])[k], 0.02);
  /* Turns and scales against the step-by-step reference; the luma never moves. */
  const float cases[][2] = {{1.3f, 0.5f}, {0.6f, -0.55f}, {1.0f, 3.14159265f}, {0.0f, 0.2f}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    color_distortion d = {0, 0.0f, cases[c][0], cases[c][1], 1.0f, 1};
    for (int k = 0; k < 4; k++) {
      float one[3] = {px[k][0], px[k][1], px[k][2]}, want[3];
      yiq_reference(px[k], cases[c][0], cases[c][1], want);
      distort_apply(&d, one, 1);
      for (int ch = 0; ch < 3; ch++) {
        float clipped = want[ch] < 0 ? 0 : want[ch] > 255 ? 255 : want[ch];
        ck_assert_msg(fabsf(one[ch] - clipped) < 0.5f, "case %zu pixel %d ch %d: %f, want %f", c, k,
                      ch, one[ch], clipped);
      }
      if (want[0] >= 0 && want[0] <= 255 && want[1] >= 0 && want[1] <= 255 && want[2] >= 0 &&
          want[2] <= 255)
        ck_assert_float_eq_tol(0.299f * one[0] + 0.587f * one[1] + 0.114f * one[2],
                               0.299f * px[k][0] + 0.587f * px[k][1] + 0.114f * px[k][2], 0.5);
    }
  }
  /* Saturation 0: grey at the pixel's luma (HSV's grey is at its max: 200 for this one). */
  float g[3] = {200, 100, 50};
  color_distortion grey = {0, 0.0f, 0.0f, 0.0f, 1.0f, 1};
  distort_apply(&grey, g, 1);
  for (int ch = 0; ch < 3; ch++)
    ck_assert_float_eq_tol(g[ch], 0.299f * 200 + 0.587f * 100 + 0.114f * 50, 0.05);
  /* tf's max_delta_hue = 0.2 pi radians; the other draws as in HSV. */
  float lo = 1, hi = -1;
  for (int k = 0; k < 1000; k++) {
    prep_rng r = prep_rng_stream((uint64_t)k, RNG_COLOR);
    color_distortion d;
    distort_draw(&r, 1, &d);
    ck_assert(d.yiq && fabsf(d.hue) <= 0.2f * 3.1416f);
    lo = fminf(lo, d.hue);
    hi = fmaxf(hi, d.hue);
  }
  ck_assert(lo < -0.55f && hi > 0.55f); /* reaches past HSV's 0.2 */
}
END_TEST

/* Same seed, same bytes (also from another scratch, after other images went through it);
 * different seeds, different crops; uint8 the float output before normalization. */
START_TEST(pipeline_is_deterministic) {
  int w = 333, h = 250;
  uint8_t *px = jpeg_make_pattern(w, h, 3, 13);
  made_jpeg j = jpeg_make(px, w, h, (jpeg_make_opts){3, 90, 1, 0});
  image_box box = {0.1f, 0.2f, 0.9f, 0.7f};
  const int T = 64;
  size_t n = (size_t)T * T * 3;
  float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
  uint8_t *u = malloc(n);
  preprocess_scratch *s1 = preprocess_scratch_create(), *s2 = preprocess_scratch_create();
  char err[256] = "";
  for (int m = 0; m <= RESIZE_ROUND_ROBIN; m++)
    for (int dist = 0; dist < 2; dist++)
      for (int train = 0; train < 2; train++) {
        preprocess_config cfg = config(T, T, train, (resize_method)m, dist);
        int differ = 0;
        for (uint64_t seed = 1; seed <= 10; seed++) {
          ck_assert_msg(preprocess_image(&cfg, s1, j.data, j.size, &box, 1, seed, a, err,
                                         sizeof err) == 0,
                        "%s", err);
          ck_assert_int_eq(preprocess_image(&cfg, s2, j.data, j.size, &box, 1, seed, b, err,
                                            sizeof err),
                           0);
          ck_assert_int_eq(memcmp(a, b, n * sizeof(float)), 0);
          ck_assert_int_eq(preprocess_image(&cfg, s2, j.data, j.size, &box, 1, seed + 1000, b, err,
                                            sizeof err),
                           0);
          differ += memcmp(a, b, n * sizeof(float)) != 0;
          ck_assert_int_eq(preprocess_image_uint8(&cfg, s2, j.data, j.size, &box, 1, seed, u, err,
                                                  sizeof err),
                           0);
          for (int c = 0; c < 3; c++)
            for (size_t i = 0; i < (size_t)T * T; i++) {
              float v = (a[(size_t)c * T * T + i] * 0.5f + 0.5f) * 255.0f;
              float q = v < 0 ? 0 : v > 255 ? 255 : v;
              ck_assert_msg(fabsf(q - u[3 * i + c]) <= 0.51f, "u8 %d vs %f", u[3 * i + c], v);
              if (dist)
                ck_assert(a[(size_t)c * T * T + i] >= -1.0001f &&
                          a[(size_t)c * T * T + i] <= 1.0001f);
            }
        }
        if (train) ck_assert_msg(differ >= 9, "method %d: %d of 10 seeds differ", m, differ);
        else if (m != RESIZE_ROUND_ROBIN) ck_assert_int_eq(differ, 0); /* eval is not random */
      }
  preprocess_scratch_destroy(s1);
  preprocess_scratch_destroy(s2);
  free(a);
  free(b);
  free(u);
  free(j.data);
  free(px);
}
END_TEST

/* A constant grey picture normalizes to (v / 255 - mean) / std everywhere, for any crop and
 * per-channel mean and std. */
START_TEST(normalization) {
  int w = 120, h = 90;
  uint8_t *px = malloc((size_t)w * h * 3);
  memset(px, 128, (size_t)w * h * 3);
  made_jpeg j = jpeg_make(px, w, h, (jpeg_make_opts){3, 95, 0, 0});
  preprocess_config cfg = config(32, 24, 1, RESIZE_BICUBIC, 0);
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
  memcpy(cfg.mean, mean, sizeof mean);
  memcpy(cfg.std, std, sizeof std);
  preprocess_scratch *s = preprocess_scratch_create();
  float out[3 * 32 * 24];
  char err[256] = "";
  ck_assert_int_eq(preprocess_image(&cfg, s, j.data, j.size, NULL, 0, 5, out, err, sizeof err), 0);
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < 32 * 24; i++)
      ck_assert_float_eq_tol(out[c * 32 * 24 + i], (128.0f / 255 - mean[c]) / std[c],
                             1.5f / 255 / std[c]);
  preprocess_scratch_destroy(s);
  free(j.data);
  free(px);
}
END_TEST

START_TEST(bad_and_tiny_inputs) {
  preprocess_scratch *s = preprocess_scratch_create();
  float out[3 * 16 * 16];
  char err[256] = "";
  static const uint8_t png[] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  preprocess_config cfg = config(16, 16, 1, RESIZE_BILINEAR, 1);
  ck_assert_int_eq(preprocess_image(&cfg, s, png, sizeof png, NULL, 0, 1, out, err, sizeof err),
                   -1);
  ck_assert_ptr_nonnull(strstr(err, "PNG"));
  static const int sizes[][2] = {{1, 1}, {1, 40}, {40, 1}, {3, 500}, {9, 7}};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    uint8_t *px = jpeg_make_pattern(sizes[k][0], sizes[k][1], 3, 1);
    made_jpeg j = jpeg_make(px, sizes[k][0], sizes[k][1], (jpeg_make_opts){3, 90, 0, 0});
    for (int train = 0; train < 2; train++)
      for (int m = 0; m < 4; m++) {
        cfg = config(16, 16, train, (resize_method)m, train);
        ck_assert_msg(preprocess_image(&cfg, s, j.data, j.size, NULL, 0, k, out, err, sizeof err) ==
                          0,
                      "%dx%d: %s", sizes[k][0], sizes[k][1], err);
        for (int i = 0; i < 3 * 16 * 16; i++) ck_assert(isfinite(out[i]));
      }
    free(j.data);
    free(px);
  }
  cfg = config(0, 16, 1, RESIZE_BILINEAR, 0);
  ck_assert_int_eq(preprocess_image(&cfg, s, png, sizeof png, NULL, 0, 1, out, err, sizeof err),
                   -1);
  preprocess_scratch_destroy(s);
  ck_assert_int_eq(resize_method_parse("bilinear"), RESIZE_BILINEAR);
  ck_assert_int_eq(resize_method_parse("round_robin"), RESIZE_ROUND_ROBIN);
  ck_assert_int_eq(resize_method_parse("area"), RESIZE_AREA);
  ck_assert_int_eq(resize_method_parse("lanczos"), -1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("preprocess");
  TCase *t = tcase_create("preprocess");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, kernels_match_reference);
  tcase_add_test(t, kernels_on_known_images);
  tcase_add_test(t, eval_window_geometry);
  tcase_add_test(t, eval_path_matches_resize_then_crop);
  tcase_add_test(t, crop_sampling_ranges);
  tcase_add_test(t, crop_sampling_covers_the_box);
  tcase_add_test(t, crop_sampling_falls_back_to_the_image);
  tcase_add_test(t, distortions);
  tcase_add_test(t, distortions_in_yiq);
  tcase_add_test(t, pipeline_is_deterministic);
  tcase_add_test(t, normalization);
  tcase_add_test(t, bad_and_tiny_inputs);
  suite_add_tcase(s, t);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
