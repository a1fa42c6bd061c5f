/* test_jpeg_image.c — the ImageNet datasource's JPEG decoder (plugins/datasources/imagenet/
 * jpeg_image.c, built into this test by tests/CMakeLists.txt), on JPEGs the test makes with
 * libjpeg (tests/support/jpeg_make.h): header info; full decodes of varied sizes (1x1, 1xN,
 * Nx1, odd, 3000x2000), baseline and progressive, RGB, grayscale, Adobe CMYK, an EXIF
 * orientation marker, against the pixels encoded; region decodes at each DCT scale used against
 * the full decode (cropped; and box-filtered to the scale), the whole-then-crop decode against
 * the full decode cropped, exactly; and bad input (PNG, not a JPEG,
 * every truncation, corrupt bytes) an error with a message, never a crash. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jpeg_image.h"
#include "jpeg_make.h"

static const jpeg_make_opts RGB90 = {3, 90, 0, 0};

typedef struct diff {
  double mean, max;
} diff;

/* a: [h, w, 3]; b: [h, w, comps] (gray compared with every channel). */
static diff compare(const uint8_t *a, const uint8_t *b, int w, int h, int comps) {
  diff d = {0, 0};
  for (size_t i = 0; i < (size_t)w * (size_t)h; i++)
    for (int c = 0; c < 3; c++) {
      double e = fabs((double)a[3 * i + c] - (double)b[comps * i + (comps == 1 ? 0 : c)]);
      d.mean += e;
      if (e > d.max) d.max = e;
    }
  d.mean /= (double)w * (double)h * 3.0;
  return d;
}

static int decode_full(const made_jpeg *j, rgb_image *out, char *err, size_t n) {
  jpeg_info info;
  if (jpeg_image_info(j->data, j->size, &info, err, n)) return -1;
  return jpeg_image_decode_region(j->data, j->size, 0, 0, info.width, info.height, 8, out, err, n);
}

START_TEST(info_reports_size_and_components) {
  static const int comps[] = {1, 3, 4};
  for (int k = 0; k < 3; k++) {
    uint8_t *px = jpeg_make_pattern(37, 21, comps[k], 1);
    jpeg_make_opts o = {comps[k], 90, 0, 0};
    made_jpeg j = jpeg_make(px, 37, 21, o);
    jpeg_info info;
    char err[256] = "";
    ck_assert_int_eq(jpeg_image_info(j.data, j.size, &info, err, sizeof err), 0);
    ck_assert_int_eq(info.width, 37);
    ck_assert_int_eq(info.height, 21);
    ck_assert_int_eq(info.components, comps[k]);
    free(j.data);
    free(px);
  }
}
END_TEST

/* Full decodes reproduce the encoded pixels within JPEG's loss on a smooth picture
 * (quality 90: mean error under 2 levels, none over 40 -- chroma subsampling at a 1-pixel
 * image edge is the worst case). */
START_TEST(full_decode_of_varied_sizes) {
  static const int sizes[][2] = {{1, 1}, {1, 57},    {61, 1},     {17, 13},
                                 {8, 8}, {333, 211}, {3000, 2000}};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (int prog = 0; prog < 2; prog++) {
      int w = sizes[s][0], h = sizes[s][1];
      if (w * h > 1000000 && prog) continue; /* one large progressive is enough below */
      uint8_t *px = jpeg_make_pattern(w, h, 3, (unsigned)s);
      jpeg_make_opts o = RGB90;
      o.progressive = prog;
      made_jpeg j = jpeg_make(px, w, h, o);
      rgb_image img = {0};
      char err[256] = "";
      ck_assert_msg(decode_full(&j, &img, err, sizeof err) == 0, "%dx%d: %s", w, h, err);
      ck_assert_int_eq(img.width, w);
      ck_assert_int_eq(img.height, h);
      ck_assert_int_eq(img.scale_num, 8);
      diff d = compare(img.pixels, px, w, h, 3);
      ck_assert_msg(d.mean < 2.0 && d.max <= 40, "%dx%d prog %d: mean %.2f max %.0f", w, h, prog,
                    d.mean, d.max);
      rgb_image_free(&img);
      free(j.data);
      free(px);
    }
}
END_TEST

START_TEST(large_progressive_region) {
  int w = 3000, h = 2000;
  uint8_t *px = jpeg_make_pattern(w, h, 3, 9);
  jpeg_make_opts o = RGB90;
  o.progressive = 1;
  made_jpeg j = jpeg_make(px, w, h, o);
  rgb_image img = {0};
  char err[256] = "";
  ck_assert_msg(jpeg_image_decode_region(j.data, j.size, 1001, 777, 900, 600, 8, &img, err,
                                         sizeof err) == 0,
                "%s", err);
  ck_assert_int_eq(img.width, 900);
  ck_assert_int_eq(img.height, 600);
  double e = 0;
  for (int y = 0; y < 600; y++)
    for (int x = 0; x < 900 * 3; x++)
      e += fabs((double)img.pixels[(size_t)y * 2700 + (size_t)x] -
                (double)px[((size_t)(y + 777) * (size_t)w + 1001) * 3 + (size_t)x]);
  ck_assert_double_lt(e / (900.0 * 600 * 3), 2.0);
  rgb_image_free(&img);
  free(j.data);
  free(px);
}
END_TEST

START_TEST(grayscale_comes_out_rgb) {
  uint8_t *px = jpeg_make_pattern(45, 29, 1, 3);
  made_jpeg j = jpeg_make(px, 45, 29, (jpeg_make_opts){1, 95, 0, 0});
  rgb_image img = {0};
  char err[256] = "";
  ck_assert_msg(decode_full(&j, &img, err, sizeof err) == 0, "%s", err);
  for (int i = 0; i < 45 * 29; i++) {
    ck_assert_int_eq(img.pixels[3 * i], img.pixels[3 * i + 1]);
    ck_assert_int_eq(img.pixels[3 * i], img.pixels[3 * i + 2]);
  }
  diff d = compare(img.pixels, px, 45, 29, 1);
  ck_assert_msg(d.mean < 1.5, "mean %.2f", d.mean);
  /* A region of it: the full decode's pixels (gray has no upsampling to differ at edges). */
  rgb_image part = {0};
  ck_assert_int_eq(jpeg_image_decode_region(j.data, j.size, 11, 9, 23, 13, 8, &part, err,
                                            sizeof err),
                   0);
  for (int y = 0; y < 13; y++)
    ck_assert_int_eq(memcmp(part.pixels + (size_t)y * 23 * 3,
                            img.pixels + ((size_t)(y + 9) * 45 + 11) * 3, 23 * 3),
                     0);
  rgb_image_free(&part);
  rgb_image_free(&img);
  free(j.data);
  free(px);
}
END_TEST

/* libjpeg writes CMYK with an Adobe marker, and a reader of an Adobe CMYK file takes the
 * values as Photoshop's inverted ones (R = C * K / 255). */
START_TEST(adobe_cmyk_to_rgb) {
  int w = 40, h = 24;
  uint8_t *px = jpeg_make_pattern(w, h, 4, 5);
  made_jpeg j = jpeg_make(px, w, h, (jpeg_make_opts){4, 95, 0, 0});
  jpeg_info info;
  char err[256] = "";
  ck_assert_int_eq(jpeg_image_info(j.data, j.size, &info, err, sizeof err), 0);
  ck_assert_int_eq(info.components, 4);
  rgb_image img = {0};
  ck_assert_msg(decode_full(&j, &img, err, sizeof err) == 0, "%s", err);
  uint8_t *want = malloc((size_t)w * h * 3);
  for (int i = 0; i < w * h; i++)
    for (int c = 0; c < 3; c++) want[3 * i + c] = (uint8_t)(px[4 * i + c] * px[4 * i + 3] / 255);
  diff d = compare(img.pixels, want, w, h, 3);
  ck_assert_msg(d.mean < 2.0 && d.max < 16, "mean %.2f max %.0f", d.mean, d.max);
  /* A region of it too: the in-place CMYK packing. */
  rgb_image part = {0};
  ck_assert_int_eq(jpeg_image_decode_region(j.data, j.size, 9, 5, 20, 11, 8, &part, err,
                                            sizeof err),
                   0);
  for (int y = 0; y < 11; y++)
    ck_assert_int_eq(memcmp(part.pixels + (size_t)y * 60,
                            img.pixels + ((size_t)(y + 5) * w + 9) * 3, 60),
                     0);
  rgb_image_free(&part);
  free(want);
  rgb_image_free(&img);
  free(j.data);
  free(px);
}
END_TEST

START_TEST(exif_orientation_is_ignored) {
  int w = 64, h = 32;
  uint8_t *px = jpeg_make_pattern(w, h, 3, 2);
  made_jpeg plain = jpeg_make(px, w, h, RGB90);
  jpeg_make_opts o = RGB90;
  o.exif_orientation = 6; /* "rotate 90 CW to display" */
  made_jpeg exif = jpeg_make(px, w, h, o);
  ck_assert_uint_gt(exif.size, plain.size);
  rgb_image a = {0}, b = {0};
  char err[256] = "";
  ck_assert_int_eq(decode_full(&plain, &a, err, sizeof err), 0);
  ck_assert_msg(decode_full(&exif, &b, err, sizeof err) == 0, "%s", err);
  ck_assert_int_eq(b.width, w);
  ck_assert_int_eq(b.height, h);
  ck_assert_int_eq(memcmp(a.pixels, b.pixels, (size_t)w * h * 3), 0);
  rgb_image_free(&a);
  rgb_image_free(&b);
  free(plain.data);
  free(exif.data);
  free(px);
}
END_TEST

/* Reference: the full decode, averaged over the area each scaled pixel covers (pixel i of
 * the image scaled by num/8 covers [i * 8/num, (i+1) * 8/num) of the full one). */
static double box_value(const rgb_image *full, int sx, int sy, int num, int c) {
  double f = 8.0 / num, x0 = sx * f, x1 = (sx + 1) * f, y0 = sy * f, y1 = (sy + 1) * f;
  if (x1 > full->width) x1 = full->width;
  if (y1 > full->height) y1 = full->height;
  double sum = 0, area = 0;
  for (int y = (int)y0; y < y1; y++)
    for (int x = (int)x0; x < x1; x++) {
      double wy = fmin(y1, y + 1) - fmax(y0, y), wx = fmin(x1, x + 1) - fmax(x0, x);
      sum += wx * wy * full->pixels[((size_t)y * full->width + x) * 3 + c];
      area += wx * wy;
    }
  return sum / area;
}

/* A region at each DCT scale the decoder uses (1/8, 2/8, 4/8, 8/8): (1) the same region of the
 * whole image decoded at that scale, exactly but for the region's first and last columns and rows
 * (libjpeg's fancy upsampling sees no neighbours beyond the iMCUs it decodes: at most a few levels
 * there); (2) the full-resolution decode box-filtered to the scale, within the difference between
 * DCT scaling and a box filter on a smooth picture (mean under 3 levels, max under 32). */
START_TEST(region_at_every_scale) {
  int w = 517, h = 389;
  uint8_t *px = jpeg_make_pattern(w, h, 3, 4);
  for (int prog = 0; prog < 2; prog++) {
    jpeg_make_opts o = RGB90;
    o.progressive = prog;
    made_jpeg j = jpeg_make(px, w, h, o);
    rgb_image full = {0}, whole = {0}, part = {0}, unfused = {0};
    char err[256] = "";
    ck_assert_int_eq(decode_full(&j, &full, err, sizeof err), 0);
    const int rx = 133, ry = 77, rw = 301, rh = 203;
    for (int num = 1; num <= 8; num *= 2) {
      /* The minimum sizes that pick exactly this scale (of the 4 the decoder uses). */
      int mw = num == 8 ? 0 : rw * num / 8, mh = num == 8 ? 0 : rh * num / 8;
      ck_assert_int_eq(jpeg_image_pick_scale(rw, rh, mw, mh), num);
      ck_assert_msg(jpeg_image_decode_region(j.data, j.size, rx, ry, rw, rh, num, &part, err,
                                             sizeof err) == 0,
                    "%s", err);
      ck_assert_int_eq(part.scale_num, num);
      ck_assert_int_eq(part.x0, rx * num / 8);
      ck_assert_int_eq(part.y0, ry * num / 8);
      ck_assert_int_eq(part.width, ((rx + rw) * num + 7) / 8 - part.x0);
      ck_assert_int_eq(part.height, ((ry + rh) * num + 7) / 8 - part.y0);
      ck_assert_int_ge(part.width, mw);
      ck_assert_int_ge(part.height, mh);
      ck_assert_int_eq(jpeg_image_decode_region(j.data, j.size, 0, 0, w, h, num, &whole, err,
                                                sizeof err),
                       0);
      ck_assert_int_eq(whole.scale_num, num);
      ck_assert_int_eq(whole.width, (w * num + 7) / 8);
      /* (3) --nofuse_decode_and_crop's decode: the region's geometry, the whole image's
       * pixels exactly, edges included. */
      ck_assert_msg(jpeg_image_decode_whole_then_crop(j.data, j.size, rx, ry, rw, rh, num, &unfused,
                                                      err, sizeof err) == 0,
                    "%s", err);
      ck_assert(unfused.scale_num == part.scale_num && unfused.x0 == part.x0 &&
                unfused.y0 == part.y0 && unfused.width == part.width &&
                unfused.height == part.height);
      for (int y = 0; y < unfused.height; y++)
        ck_assert_mem_eq(unfused.pixels + (size_t)y * unfused.width * 3,
                         whole.pixels + ((size_t)(y + part.y0) * whole.width + part.x0) * 3,
                         (size_t)unfused.width * 3);
      double inner_max = 0, edge_max = 0, box_sum = 0, box_max = 0;
      for (int y = 0; y < part.height; y++)
        for (int x = 0; x < part.width; x++)
          for (int c = 0; c < 3; c++) {
            double v = part.pixels[((size_t)y * part.width + x) * 3 + c];
            double e =
                fabs(v - whole.pixels[((size_t)(y + part.y0) * whole.width + x + part.x0) * 3 + c]);
            int edge = x == 0 || y == 0 || x == part.width - 1 || y == part.height - 1;
            if (edge) edge_max = fmax(edge_max, e);
            else inner_max = fmax(inner_max, e);
            double b = fabs(v - box_value(&full, x + part.x0, y + part.y0, num, c));
            box_sum += b;
            box_max = fmax(box_max, b);
          }
      double box_mean = box_sum / ((double)part.width * part.height * 3);
      ck_assert_msg(inner_max <= 0 && edge_max <= 8, "prog %d num %d: inner %.0f edge %.0f", prog,
                    num, inner_max, edge_max);
      ck_assert_msg(box_mean < 3.0 && box_max < 32, "prog %d num %d: box mean %.2f max %.0f", prog,
                    num, box_mean, box_max);
    }
    rgb_image_free(&full);
    rgb_image_free(&whole);
    rgb_image_free(&part);
    rgb_image_free(&unfused);
    free(j.data);
  }
  free(px);
}
END_TEST

START_TEST(region_outside_is_an_error) {
  uint8_t *px = jpeg_make_pattern(20, 10, 3, 1);
  made_jpeg j = jpeg_make(px, 20, 10, RGB90);
  rgb_image img = {0};
  char err[256] = "";
  ck_assert_int_eq(jpeg_image_decode_region(j.data, j.size, 5, 0, 16, 10, 8, &img, err, sizeof err),
                   -1);
  ck_assert_ptr_nonnull(strstr(err, "not inside"));
  ck_assert_int_eq(jpeg_image_decode_region(j.data, j.size, 0, 0, 0, 10, 8, &img, err, sizeof err),
                   -1);
  /* A scale the decoder does not take (3/8 has no SIMD path) is refused, not rounded. */
  ck_assert_int_eq(jpeg_image_decode_region(j.data, j.size, 0, 0, 20, 10, 3, &img, err, sizeof err),
                   -1);
  ck_assert_ptr_nonnull(strstr(err, "JPEG scale 3/8"));
  rgb_image_free(&img);
  free(j.data);
  free(px);
}
END_TEST

START_TEST(png_and_garbage_are_named) {
  static const uint8_t png[] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13};
  jpeg_info info;
  rgb_image img = {0};
  char err[256] = "";
  ck_assert_int_eq(jpeg_image_info(png, sizeof png, &info, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "PNG") && strstr(err, "89 50 4e 47"), "%s", err);
  err[0] = 0;
  ck_assert_int_eq(jpeg_image_decode_region(png, sizeof png, 0, 0, 1, 1, 8, &img, err, sizeof err),
                   -1);
  ck_assert_ptr_nonnull(strstr(err, "PNG"));
  static const uint8_t gif[] = {'G', 'I', 'F', '8', '9', 'a'};
  ck_assert_int_eq(jpeg_image_info(gif, sizeof gif, &info, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "not a JPEG") && strstr(err, "47 49 46 38"), "%s", err);
  ck_assert_int_eq(jpeg_image_info(gif, 0, &info, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "empty"));
  static const uint8_t soi_only[] = {0xFF, 0xD8, 0xFF};
  ck_assert_int_eq(jpeg_image_info(soi_only, sizeof soi_only, &info, err, sizeof err), -1);
  ck_assert_msg(err[0] != 0, "no message");
  rgb_image_free(&img);
}
END_TEST

/* Every cut of the stream before its last few bytes (where all scanlines were already
 * read and only the EOI marker is missing) fails with a message. */
START_TEST(truncated_streams_fail) {
  for (int prog = 0; prog < 2; prog++) {
    uint8_t *px = jpeg_make_pattern(96, 80, 3, 6);
    jpeg_make_opts o = RGB90;
    o.progressive = prog;
    made_jpeg j = jpeg_make(px, 96, 80, o);
    rgb_image img = {0};
    for (unsigned long cut = 0; cut + 16 < j.size; cut += 7) {
      char err[256] = "";
      uint8_t *copy = malloc(cut + 1); /* exactly `cut` bytes: ASan sees any over-read */
      memcpy(copy, j.data, cut);
      made_jpeg t = {copy, cut};
      ck_assert_msg(decode_full(&t, &img, err, sizeof err) == -1, "prog %d cut %lu decoded", prog,
                    cut);
      ck_assert_msg(err[0] != 0, "cut %lu: no message", cut);
      free(copy);
    }
    rgb_image_free(&img);
    free(j.data);
    free(px);
  }
}
END_TEST

/* Corrupt bytes: a marker in the middle of the entropy-coded data, a bad header field, and
 * random bytes over the data. The first two must fail. Random damage mostly still parses
 * as valid Huffman codes (on this picture about 1 in 7 streams with 16 random bytes hits an
 * invalid code or a stray marker): those decode to wrong pixels, which no decoder can tell
 * from right ones; the test asserts that none crashes (ASan in CI), that each failure says
 * why, and that the detectable ones are detected. */
START_TEST(corrupt_bytes_fail_or_decode_safely) {
  uint8_t *px = jpeg_make_pattern(128, 96, 3, 7);
  made_jpeg j = jpeg_make(px, 128, 96, RGB90);
  rgb_image img = {0};
  char err[256] = "";
  /* Find SOS (FF DA): the entropy-coded data follows its header. */
  unsigned long sos = 0;
  for (unsigned long i = 0; i + 1 < j.size; i++)
    if (j.data[i] == 0xFF && j.data[i + 1] == 0xDA) {
      sos = i;
      break;
    }
  ck_assert_uint_gt(sos, 0);
  unsigned long data0 = sos + 2 + (unsigned long)(j.data[sos + 2] << 8 | j.data[sos + 3]);
  uint8_t *copy = malloc(j.size);

  memcpy(copy, j.data, j.size);
  unsigned long mid = data0 + (j.size - data0) / 3;
  copy[mid] = 0xFF;
  copy[mid + 1] = 0xD9; /* EOI a third of the way in */
  made_jpeg t = {copy, j.size};
  ck_assert_int_eq(decode_full(&t, &img, err, sizeof err), -1);
  ck_assert_msg(strstr(err, "Corrupt") || strstr(err, "Premature"), "%s", err);

  memcpy(copy, j.data, j.size);
  for (unsigned long i = 0; i + 1 < sos; i++)
    if (copy[i] == 0xFF && copy[i + 1] == 0xC0) {
      copy[i + 4] = 7;
      break;
    } /* 7-bit precision */
  ck_assert_int_eq(decode_full(&t, &img, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "precision"));

  uint64_t s = 12345;
  int failed = 0, trials = 200;
  for (int trial = 0; trial < trials; trial++) {
    memcpy(copy, j.data, j.size);
    for (int k = 0; k < 16; k++) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      unsigned long at = data0 + (unsigned long)((s >> 33) % (j.size - data0 - 2));
      copy[at] = (uint8_t)(s >> 20);
    }
    err[0] = 0;
    int rc = decode_full(&t, &img, err, sizeof err);
    if (rc) {
      failed++;
      ck_assert_msg(err[0] != 0, "trial %d: no message", trial);
    } else {
      ck_assert_int_eq(img.width, 128);
    }
  }
  ck_assert_msg(failed >= trials / 20, "only %d of %d corrupt streams failed", failed, trials);
  free(copy);
  rgb_image_free(&img);
  free(j.data);
  free(px);
}
END_TEST

/* The scale: the smallest of 1, 2, 4, 8 whose region is still at least the minimum. */
START_TEST(pick_scale) {
  ck_assert_int_eq(jpeg_image_pick_scale(800, 600, 0, 0), 8);
  ck_assert_int_eq(jpeg_image_pick_scale(800, 600, 100, 75), 1);
  ck_assert_int_eq(jpeg_image_pick_scale(800, 600, 101, 75), 2);
  ck_assert_int_eq(jpeg_image_pick_scale(800, 600, 224, 224), 4);
  ck_assert_int_eq(jpeg_image_pick_scale(900, 900, 224, 224), 2);
  ck_assert_int_eq(jpeg_image_pick_scale(300, 300, 224, 224), 8);
  ck_assert_int_eq(jpeg_image_pick_scale(200, 300, 224, 224), 8);
  ck_assert_int_eq(jpeg_image_pick_scale(7, 7, 1, 1), 2);
}
END_TEST

int main(void) {
  Suite *s = suite_create("jpeg_image");
  TCase *t = tcase_create("decode");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, info_reports_size_and_components);
  tcase_add_test(t, full_decode_of_varied_sizes);
  tcase_add_test(t, large_progressive_region);
  tcase_add_test(t, grayscale_comes_out_rgb);
  tcase_add_test(t, adobe_cmyk_to_rgb);
  tcase_add_test(t, exif_orientation_is_ignored);
  tcase_add_test(t, region_at_every_scale);
  tcase_add_test(t, region_outside_is_an_error);
  tcase_add_test(t, png_and_garbage_are_named);
  tcase_add_test(t, truncated_streams_fail);
  tcase_add_test(t, corrupt_bytes_fail_or_decode_safely);
  tcase_add_test(t, pick_scale);
  suite_add_tcase(s, t);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
