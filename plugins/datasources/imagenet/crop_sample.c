/* crop_sample.c — tf.image.sample_distorted_bounding_box (crop_sample.h), following
 * TensorFlow's kernel step for step: the aspect ratio drawn per attempt, the crop height
 * drawn between the heights that give the smallest and largest allowed areas at that
 * aspect (rounded as lrintf does there), one step of repair when rounding leaves the area
 * outside the range, the offset drawn in [0, size - crop) (TensorFlow never places a
 * smaller crop at the last offset), and the crop accepted when it covers at least
 * min_object_covered of one box's area (boxes under one pixel do not count). */
#include "crop_sample.h"

#include <math.h>

const crop_params CROP_TF_CNN_BENCHMARKS = {0.1f, 0.75f, 1.33f, 0.05f, 1.0f, 100};

typedef struct rect {
  int x0, y0, x1, y1;
} rect;

static float rect_area(rect r) {
  int w = r.x1 - r.x0, h = r.y1 - r.y0;
  return w > 0 && h > 0 ? (float)w * (float)h : 0.0f;
}

static rect rect_intersect(rect a, rect b) {
  rect r = {a.x0 > b.x0 ? a.x0 : b.x0, a.y0 > b.y0 ? a.y0 : b.y0, a.x1 < b.x1 ? a.x1 : b.x1,
            a.y1 < b.y1 ? a.y1 : b.y1};
  if (r.x1 < r.x0) r.x1 = r.x0;
  if (r.y1 < r.y0) r.y1 = r.y0;
  return r;
}

static int random_crop(int width, int height, float min_rel, float max_rel, float aspect,
                       prep_rng *rng, rect *out) {
  if (max_rel <= 0.0f || aspect <= 0.0f || width <= 0 || height <= 0 || min_rel > max_rel) return 0;
  const float min_area = min_rel * (float)width * (float)height;
  const float max_area = max_rel * (float)width * (float)height;
  int h = (int)lrintf(sqrtf(min_area / aspect));
  int max_h = (int)lrintf(sqrtf(max_area / aspect));
  if (lrintf((float)max_h * aspect) > width) {
    /* The largest max_h with round(max_h * aspect) <= width. */
    const float eps = 0.0000001f;
    max_h = (int)(((float)width + 0.5f - eps) / aspect);
    if (lrintf((float)max_h * aspect) > width) max_h -= 1;
  }
  if (max_h > height) max_h = height;
  if (h >= max_h) h = max_h;
  if (h < max_h) h += (int)prep_rng_below(rng, (uint32_t)(max_h - h + 1));
  int w = (int)lrintf((float)h * aspect);
  float area = (float)w * (float)h;
  if (area < min_area) {
    h += 1;
    w = (int)lrintf((float)h * aspect);
    area = (float)w * (float)h;
  }
  if (area > max_area) {
    h -= 1;
    w = (int)lrintf((float)h * aspect);
    area = (float)w * (float)h;
  }
  if (area < min_area || area > max_area || w > width || h > height || w <= 0 || h <= 0) return 0;
  int y = h < height ? (int)prep_rng_below(rng, (uint32_t)(height - h)) : 0;
  int x = w < width ? (int)prep_rng_below(rng, (uint32_t)(width - w)) : 0;
  *out = (rect){x, y, x + w, y + h};
  return 1;
}

static int covers_enough(rect crop, const rect *boxes, int n, float min_covered) {
  if (rect_area(crop) < 1.0f) return 0;
  for (int i = 0; i < n; i++) {
    float object = rect_area(boxes[i]);
    if (object < 1.0f) continue;
    if (rect_area(rect_intersect(crop, boxes[i])) / object >= min_covered) return 1;
  }
  return 0;
}

static float clamp01(float v) { return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; }

int crop_sample(const crop_params *p, int width, int height, const image_box *boxes, int num_boxes,
                prep_rng *rng, crop_rect *out) {
  rect pix[IMAGE_MAX_BOXES];
  int n = 0;
  for (int i = 0; i < num_boxes && n < IMAGE_MAX_BOXES; i++) {
    float y0 = clamp01(boxes[i].ymin), x0 = clamp01(boxes[i].xmin);
    float y1 = clamp01(boxes[i].ymax), x1 = clamp01(boxes[i].xmax);
    if (y1 < y0 || x1 < x0) continue;
    /* TensorFlow truncates (static_cast<int32>) relative coordinates times the size. */
    pix[n++] = (rect){(int)(x0 * (float)width), (int)(y0 * (float)height), (int)(x1 * (float)width),
                      (int)(y1 * (float)height)};
  }
  if (n == 0) pix[n++] = (rect){0, 0, width, height};
  for (int i = 0; i < p->max_attempts; i++) {
    float aspect = prep_rng_float(rng) * (p->max_aspect - p->min_aspect) + p->min_aspect;
    rect r;
    if (random_crop(width, height, p->min_area, p->max_area, aspect, rng, &r) &&
        covers_enough(r, pix, n, p->min_object_covered)) {
      *out = (crop_rect){r.x0, r.y0, r.x1 - r.x0, r.y1 - r.y0};
      return 1;
    }
  }
  *out = (crop_rect){0, 0, width, height};
  return 0;
}

void eval_window(int img_w, int img_h, int w, int h, int *rw, int *rh, int *left, int *top) {
  float ratio_h = (float)h / (float)img_h, ratio_w = (float)w / (float)img_w;
  float max_ratio = ratio_h > ratio_w ? ratio_h : ratio_w;
  const float scale_factor = 1.145f;
  *rh = (int)((float)img_h * max_ratio * scale_factor);
  *rw = (int)((float)img_w * max_ratio * scale_factor);
  if (*rh < h) *rh = h; /* never below the target, whatever float rounding does */
  if (*rw < w) *rw = w;
  *top = (*rh - h) / 2;
  *left = (*rw - w) / 2;
}
