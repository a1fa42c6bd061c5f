/* preprocess.c — one encoded image to the model's input (preprocess.h): the crop chosen
 * first from the JPEG header alone (train: crop_sample; eval: the window of the aspect-
 * preserving resize that the central crop keeps, plus a few pixels of margin for the
 * resize's taps), then only that region decoded, at the smallest DCT scale that keeps it at
 * least as large as the target, then one separable resize straight from the decoded region
 * to the target size (the mapping carries the crop's and the DCT scale's offsets, so the
 * result samples the same points as TensorFlow's decode-crop-resize), the flip, the colour
 * distortions, and the normalization into [3, H, W].
 *
 * All buffers live in the per-thread scratch and only grow, so a steady stream of images
 * allocates nothing here (libjpeg still allocates its own decoder state per image). */
#include "preprocess.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crop_sample.h"
#include "distort.h"
#include "jpeg_image.h"
#include "prep_rng.h"
#include "resize.h"

struct preprocess_scratch {
  rgb_image image; /* the decoded region */
  resize_taps tx, ty;
  float *tmp; /* the horizontal pass */
  size_t tmp_cap;
  float *hwc; /* the resized image, [H, W, 3] on the [0, 255] scale */
  size_t hwc_cap;
};

int resize_method_parse(const char *name) {
  static const char *const names[] = {"bilinear", "nearest", "bicubic", "area", "round_robin"};
  for (int i = 0; i < 5; i++)
    if (name && strcmp(name, names[i]) == 0) return i;
  return -1;
}

preprocess_scratch *preprocess_scratch_create(void) {
  return calloc(1, sizeof(preprocess_scratch));
}

void preprocess_scratch_destroy(preprocess_scratch *s) {
  if (!s) return;
  rgb_image_free(&s->image);
  resize_taps_free(&s->tx);
  resize_taps_free(&s->ty);
  free(s->tmp);
  free(s->hwc);
  free(s);
}

/* The region [lo, hi) of one axis that an output window needs: the core the window maps
 * onto plus `margin` pixels each side, inside [0, full). */
static void with_margin(double core_lo, double core_hi, int margin, int full, int *lo, int *len) {
  int a = (int)floor(core_lo) - margin, b = (int)ceil(core_hi) + margin;
  if (a < 0) a = 0;
  if (b > full) b = full;
  if (b <= a) b = a + 1;
  *lo = a;
  *len = b - a;
}

/* What one example's decode is: where the output window lies in the image, the region of
 * it decoded and the DCT scale, decided once per example. */
typedef struct decode_plan {
  double sx, sy, ox, oy; /* output pixel j maps onto full-resolution u(j) = (j + 0.5) * sx + ox */
  int rx, ry, rw, rh;    /* the region decoded, in full-resolution pixels */
  int scale_num;         /* its DCT scale, over 8 (jpeg_image_pick_scale) */
} decode_plan;

/* Training: tf_cnn_benchmarks' distorted bounding-box crop, decoded alone at the smallest
 * scale that keeps it at least the output's size. */
static decode_plan plan_training(const preprocess_config *cfg, const jpeg_info *info,
                                 const image_box *boxes, int num_boxes, uint64_t seed) {
  prep_rng r = prep_rng_stream(seed, RNG_CROP);
  crop_rect c;
  crop_sample(&CROP_TF_CNN_BENCHMARKS, info->width, info->height, boxes, num_boxes, &r, &c);
  return (decode_plan){.sx = (double)c.w / cfg->width,
                       .sy = (double)c.h / cfg->height,
                       .ox = c.x,
                       .oy = c.y,
                       .rx = c.x,
                       .ry = c.y,
                       .rw = c.w,
                       .rh = c.h,
                       .scale_num = jpeg_image_pick_scale(c.w, c.h, cfg->width, cfg->height)};
}

/* Evaluation: the central window of the aspect-preserving resize (eval_window), decoded
 * with the few pixels around it the resize taps reach, at the scale that keeps the
 * window itself at least the output's size. */
static decode_plan plan_eval(const preprocess_config *cfg, const jpeg_info *info) {
  const int W = cfg->width, H = cfg->height;
  int full_w, full_h, left, top;
  eval_window(info->width, info->height, W, H, &full_w, &full_h, &left, &top);
  decode_plan p = {.sx = (double)info->width / full_w, .sy = (double)info->height / full_h};
  p.ox = left * p.sx;
  p.oy = top * p.sy;
  double core_w = W * p.sx, core_h = H * p.sy;
  p.scale_num = jpeg_image_pick_scale((int)core_w, (int)core_h, W, H);
  /* Taps reach 2 decoded pixels past the window (bicubic); 3 at the chosen scale. */
  int margin = (3 * 8 + p.scale_num - 1) / p.scale_num;
  with_margin(p.ox, p.ox + core_w, margin, info->width, &p.rx, &p.rw);
  with_margin(p.oy, p.oy + core_h, margin, info->height, &p.ry, &p.rh);
  return p;
}

/* --resize_method's kernel; round_robin draws one of the four per example. */
static resize_kernel pick_kernel(const preprocess_config *cfg, uint64_t seed) {
  if (cfg->resize != RESIZE_ROUND_ROBIN) return (resize_kernel)cfg->resize;
  prep_rng r = prep_rng_stream(seed, RNG_RESIZE);
  return (resize_kernel)prep_rng_below(&r, 4);
}

/* The decoded region (s->image, at p's scale from its origin x0, y0) resized into
 * s->hwc, W x H x 3. */
static int resize_into(const preprocess_config *cfg, preprocess_scratch *s, const decode_plan *p,
                       resize_kernel kernel, char *err, size_t err_size) {
  const int W = cfg->width, H = cfg->height;
  double f = s->image.scale_num / 8.0;
  if (resize_taps_make(&s->tx, kernel, s->image.width, W, p->sx * f, p->ox * f - s->image.x0) ||
      resize_taps_make(&s->ty, kernel, s->image.height, H, p->sy * f, p->oy * f - s->image.y0)) {
    snprintf(err, err_size, "preprocess: out of memory");
    return -1;
  }
  size_t n = (size_t)W * (size_t)H;
  if (n * 3 > s->hwc_cap) {
    float *grown = realloc(s->hwc, n * 3 * sizeof(float));
    if (!grown) {
      snprintf(err, err_size, "preprocess: out of memory");
      return -1;
    }
    s->hwc = grown;
    s->hwc_cap = n * 3;
  }
  if (resize_rgb(s->image.pixels, s->image.width, s->image.height, (size_t)s->image.width * 3,
                 &s->tx, &s->ty, s->hwc, &s->tmp, &s->tmp_cap)) {
    snprintf(err, err_size, "preprocess: out of memory");
    return -1;
  }
  return 0;
}

/* Training's last steps on the resized HWC image: tf.image.random_flip_left_right, then
 * with --distortions the colour jitter. */
static void flip_and_distort(const preprocess_config *cfg, float *hwc, uint64_t seed) {
  const int W = cfg->width, H = cfg->height;
  prep_rng r = prep_rng_stream(seed, RNG_FLIP);
  if (prep_rng_float(&r) < 0.5f) {
    for (int i = 0; i < H; i++) {
      float *row = hwc + (size_t)i * (size_t)W * 3;
      for (int a = 0, b = W - 1; a < b; a++, b--)
        for (int c = 0; c < 3; c++) {
          float t = row[3 * a + c];
          row[3 * a + c] = row[3 * b + c];
          row[3 * b + c] = t;
        }
    }
  }
  if (cfg->distortions) {
    prep_rng r2 = prep_rng_stream(seed, RNG_COLOR);
    color_distortion d;
    distort_draw(&r2, cfg->color_in_yiq, &d);
    distort_apply(&d, hwc, (size_t)W * (size_t)H);
  }
}

/* Decode, crop and resize into scratch->hwc; the flip and distortions too. */
static int run(const preprocess_config *cfg, preprocess_scratch *s, const uint8_t *data,
               size_t size, const image_box *boxes, int num_boxes, uint64_t seed, char *err,
               size_t err_size) {
  if (!cfg || !s || cfg->height <= 0 || cfg->width <= 0 ||
      (unsigned)cfg->resize > RESIZE_ROUND_ROBIN) {
    snprintf(err, err_size, "preprocess: bad configuration");
    return -1;
  }
  if (!data && size) {
    snprintf(err, err_size, "preprocess: no data");
    return -1;
  }
  jpeg_info info;
  if (jpeg_image_info(data, size, &info, err, err_size)) return -1;
  resize_kernel kernel = pick_kernel(cfg, seed);
  decode_plan p = cfg->training ? plan_training(cfg, &info, boxes, num_boxes, seed)
                                : plan_eval(cfg, &info);
  int (*decode)(const uint8_t *, size_t, int, int, int, int, int, rgb_image *, char *, size_t) =
      cfg->decode_whole ? jpeg_image_decode_whole_then_crop : jpeg_image_decode_region;
  if (decode(data, size, p.rx, p.ry, p.rw, p.rh, p.scale_num, &s->image, err, err_size)) return -1;
  if (resize_into(cfg, s, &p, kernel, err, err_size)) return -1;
  if (cfg->training) flip_and_distort(cfg, s->hwc, seed);
  return 0;
}

int preprocess_image(const preprocess_config *cfg, preprocess_scratch *scratch, const uint8_t *data,
                     size_t size, const image_box *boxes, int num_boxes, uint64_t example_seed,
                     float *out, char *err, size_t err_size) {
  if (run(cfg, scratch, data, size, boxes, num_boxes, example_seed, err, err_size)) return -1;
  const size_t n = (size_t)cfg->width * (size_t)cfg->height;
  for (int c = 0; c < 3; c++) {
    const float a = 1.0f / (255.0f * cfg->std[c]), b = -cfg->mean[c] / cfg->std[c];
    const float *src = scratch->hwc + c;
    float *dst = out + (size_t)c * n;
    for (size_t i = 0; i < n; i++) dst[i] = src[3 * i] * a + b;
  }
  return 0;
}

int preprocess_image_uint8(const preprocess_config *cfg, preprocess_scratch *scratch,
                           const uint8_t *data, size_t size, const image_box *boxes, int num_boxes,
                           uint64_t example_seed, uint8_t *out, char *err, size_t err_size) {
  if (run(cfg, scratch, data, size, boxes, num_boxes, example_seed, err, err_size)) return -1;
  const size_t n = (size_t)cfg->width * (size_t)cfg->height * 3;
  const float *src = scratch->hwc;
  for (size_t i = 0; i < n; i++) {
    float v = src[i] + 0.5f;
    out[i] = (uint8_t)(v <= 0.0f ? 0 : v >= 255.0f ? 255 : (int)v);
  }
  return 0;
}
