/* jpeg_image.c — the JPEG decoder of the ImageNet datasource (jpeg_image.h), on libjpeg's
 * own API (jpeglib.h, libjpeg-turbo): only libjpeg lets a decode skip the rows above a crop
 * (jpeg_skip_scanlines), decode only the columns of it (jpeg_crop_scanline), stop after
 * its last row, and do all that at a reduced DCT scale (scale_num / 8).
 *
 * libjpeg reports fatal errors through error_exit, which must not return: it longjmps back
 * here. Its warnings go through emit_message; the ones that mean the entropy-coded data is
 * damaged (a truncated file gets grey rows, a bad Huffman code smears blocks) are made
 * fatal too, so a corrupt image is an error rather than a half-grey training example.
 * Nothing is ever printed (output_message is a no-op). */
#include "jpeg_image.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

typedef struct error_mgr {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
} error_mgr;

static void on_error_exit(j_common_ptr cinfo) {
  error_mgr *e = (error_mgr *)cinfo->err;
  e->pub.format_message(cinfo, e->message);
  longjmp(e->jump, 1);
}

/* Warnings that mean pixels were lost or invented. JWRN_EXTRANEOUS_DATA is not among them:
 * stray bytes between the entropy-coded data and the next marker are skipped with the image
 * intact (a few ImageNet files have them; TensorFlow decodes them). */
static int is_corrupt_data(int code) {
  switch (code) {
    case JWRN_HIT_MARKER:
    case JWRN_JPEG_EOF:
    case JWRN_MUST_RESYNC:
    case JWRN_NOT_SEQUENTIAL:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_ARITH_BAD_CODE:
    case JWRN_BOGUS_PROGRESSION: return 1;
    default: return 0;
  }
}

static void on_emit_message(j_common_ptr cinfo, int level) {
  if (level < 0 && is_corrupt_data(cinfo->err->msg_code)) on_error_exit(cinfo);
  if (level < 0) cinfo->err->num_warnings++;
}

static void on_output_message(j_common_ptr cinfo) { (void)cinfo; }

static void setup_errors(struct jpeg_decompress_struct *cinfo, error_mgr *e) {
  cinfo->err = jpeg_std_error(&e->pub);
  e->pub.error_exit = on_error_exit;
  e->pub.emit_message = on_emit_message;
  e->pub.output_message = on_output_message;
  e->message[0] = '\0';
}

void rgb_image_free(rgb_image *image) {
  if (!image) return;
  free(image->pixels);
  memset(image, 0, sizeof(*image));
}

static int reserve(rgb_image *image, size_t bytes) {
  if (bytes <= image->capacity) return 0;
  uint8_t *p = realloc(image->pixels, bytes);
  if (!p) return -1;
  image->pixels = p;
  image->capacity = bytes;
  return 0;
}

/* The magic-byte check that libjpeg would make with a less useful message, and the one
 * place a PNG (which some ImageNet "JPEG"s are) is named as such. */
static int check_magic(const uint8_t *data, size_t size, char *err, size_t err_size) {
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return 0;
  if (size >= 4 && data[0] == 0x89 && data[1] == 0x50 && data[2] == 0x4E && data[3] == 0x47) {
    snprintf(err, err_size,
             "not a JPEG (starts with 89 50 4e 47: a PNG; PNG images are not decoded)");
    return -1;
  }
  char hex[16] = "";
  size_t n = size < 4 ? size : 4, at = 0;
  for (size_t i = 0; i < n; i++)
    at += (size_t)snprintf(hex + at, sizeof(hex) - at, "%s%02x", i ? " " : "", data[i]);
  snprintf(err, err_size, "not a JPEG (%s%s%s, not ff d8 ff)", size ? "starts with " : "empty", hex,
           size < 3 && size ? ": too short" : "");
  return -1;
}

int jpeg_image_info(const uint8_t *data, size_t size, jpeg_info *info, char *err, size_t err_size) {
  if (check_magic(data, size, err, err_size)) return -1;
  struct jpeg_decompress_struct cinfo;
  error_mgr e;
  setup_errors(&cinfo, &e);
  if (setjmp(e.jump)) {
    snprintf(err, err_size, "JPEG header: %s", e.message);
    jpeg_destroy_decompress(&cinfo);
    return -1;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, (unsigned long)size);
  jpeg_read_header(&cinfo, TRUE);
  info->width = (int)cinfo.image_width;
  info->height = (int)cinfo.image_height;
  info->components = cinfo.num_components;
  jpeg_destroy_decompress(&cinfo);
  return 0;
}

/* The region's extent in the image scaled by num/8: [*lo, *hi). */
static void scaled_span(int at, int len, int full, int num, int *lo, int *hi) {
  int scaled_full = (int)(((long)full * num + 7) / 8); /* libjpeg's jdiv_round_up */
  *lo = (int)(((long)at * num) / 8);
  *hi = (int)(((long)(at + len) * num + 7) / 8);
  if (*hi > scaled_full) *hi = scaled_full;
  if (*lo >= *hi) *lo = *hi - 1;
}

/* Only 1/8, 2/8 and 4/8: libjpeg-turbo has SIMD inverse DCTs for those (and 8/8); its
 * 3/8 .. 7/8 ones are plain C, and 5/8 .. 7/8 decode slower than 8/8 does (measured: an
 * 871x506 photo takes 1.1 ms at 8/8, 1.5-2.4 ms at 5/8-7/8, 0.8 ms at 4/8). */
int jpeg_image_pick_scale(int w, int h, int min_w, int min_h) {
  if (min_w <= 0 || min_h <= 0) return 8;
  for (int num = 1; num < 8; num *= 2) {
    /* The smallest the scaled region can come out, whatever its offset. */
    if ((long)w * num / 8 >= min_w && (long)h * num / 8 >= min_h) return num;
  }
  return 8;
}

/* CMYK (libjpeg converts YCCK to CMYK) to RGB in place, as TensorFlow's decode_jpeg does:
 * Photoshop writes Adobe CMYK inverted (0 = full ink), which its APP14 marker announces. */
static void cmyk_to_rgb(uint8_t *row, int n, int inverted) {
  for (int i = 0; i < n; i++) {
    int c = row[4 * i], m = row[4 * i + 1], y = row[4 * i + 2], k = row[4 * i + 3];
    if (!inverted) {
      c = 255 - c;
      m = 255 - m;
      y = 255 - y;
      k = 255 - k;
    }
    row[3 * i] = (uint8_t)(c * k / 255);
    row[3 * i + 1] = (uint8_t)(m * k / 255);
    row[3 * i + 2] = (uint8_t)(y * k / 255);
  }
}

/* whole: 0 decodes only the region's rows and (iMCU-widened) columns; 1 every row and
 * column of the image, keeping the region's. */
static int decode(const uint8_t *data, size_t size, int x, int y, int w, int h, int scale_num,
                  int whole_image, rgb_image *out, char *err, size_t err_size) {
  /* Read after the setjmp below: kept in memory, where a longjmp cannot clobber it. */
  volatile const int whole = whole_image;
  if (scale_num != 1 && scale_num != 2 && scale_num != 4 && scale_num != 8) {
    snprintf(err, err_size, "JPEG scale %d/8: the decoder takes 1/8, 2/8, 4/8 or 8/8", scale_num);
    return -1;
  }
  if (check_magic(data, size, err, err_size)) return -1;
  struct jpeg_decompress_struct cinfo;
  error_mgr e;
  setup_errors(&cinfo, &e);
  if (setjmp(e.jump)) {
    snprintf(err, err_size, "JPEG data: %s", e.message);
    jpeg_destroy_decompress(&cinfo);
    return -1;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, (unsigned long)size);
  jpeg_read_header(&cinfo, TRUE);
  int full_w = (int)cinfo.image_width, full_h = (int)cinfo.image_height;
  /* A few header bytes can claim a 65500 x 65500 image, and a progressive one makes libjpeg
   * allocate (and zero) coefficients for all of it before the data runs out: a cap on
   * pixels, and on libjpeg's own memory, keeps a hostile file from taking the machine. */
  if ((uint64_t)full_w * (uint64_t)full_h > JPEG_IMAGE_MAX_PIXELS) {
    snprintf(err, err_size, "JPEG of %dx%d pixels is larger than the %llu-pixel limit", full_w,
             full_h, (unsigned long long)JPEG_IMAGE_MAX_PIXELS);
    jpeg_destroy_decompress(&cinfo);
    return -1;
  }
  cinfo.mem->max_memory_to_use = 1L << 30;
  if (x < 0 || y < 0 || w <= 0 || h <= 0 || x > full_w - w || y > full_h - h) {
    snprintf(err, err_size, "JPEG region %dx%d at (%d, %d) is not inside the %dx%d image", w, h, x,
             y, full_w, full_h);
    jpeg_destroy_decompress(&cinfo);
    return -1;
  }
  int num = scale_num;
  cinfo.scale_num = (unsigned)num;
  cinfo.scale_denom = 8;
  int cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  /* tf_cnn_benchmarks decodes with dct_method='INTEGER_FAST' (its eval path and unfused
   * train path): about 5% faster here than the default ISLOW. Fancy upsampling stays on,
   * TensorFlow's default. */
  cinfo.dct_method = JDCT_IFAST;
  jpeg_start_decompress(&cinfo);

  int x0, x1, y0, y1;
  scaled_span(x, w, full_w, num, &x0, &x1);
  scaled_span(y, h, full_h, num, &y0, &y1);
  JDIMENSION cx = (JDIMENSION)x0, cw = (JDIMENSION)(x1 - x0);
  if (!whole && cw < cinfo.output_width) jpeg_crop_scanline(&cinfo, &cx, &cw); /* widens to iMCUs */
  /* The region's first column in the decoded rows (which start at cx, or at 0 uncropped). */
  int left = whole ? x0 : x0 - (int)cx;
  int row_w = (int)cinfo.output_width;
  int comps = cinfo.output_components;
  int out_w = x1 - x0, out_h = y1 - y0;
  /* Rows decoded: the region's, or every row of the image (the region's start at y0). */
  int first = whole ? 0 : y0, rows_read = whole ? (int)cinfo.output_height : out_h;
  size_t row_bytes = (size_t)row_w * (size_t)comps;
  if (reserve(out, row_bytes * (size_t)rows_read)) {
    snprintf(err, err_size, "out of memory for a %dx%d decode", row_w, rows_read);
    jpeg_destroy_decompress(&cinfo);
    return -1;
  }
  if (first > 0) jpeg_skip_scanlines(&cinfo, (JDIMENSION)first);
  /* Each decoded row goes where it lands in the buffer, widened; packing the region to the
   * front afterwards moves every byte towards lower addresses, so rows never overlap. */
  for (int r = 0; r < rows_read;) {
    JSAMPROW rows[4];
    int n = rows_read - r < 4 ? rows_read - r : 4;
    for (int i = 0; i < n; i++) rows[i] = out->pixels + (size_t)(r + i) * row_bytes;
    JDIMENSION got = jpeg_read_scanlines(&cinfo, rows, (JDIMENSION)n);
    if (got == 0) {
      snprintf(err, err_size, "JPEG data: no scanline %d", first + r);
      jpeg_destroy_decompress(&cinfo);
      return -1;
    }
    r += (int)got;
  }
  int inverted = cinfo.saw_Adobe_marker;
  if (whole) jpeg_finish_decompress(&cinfo); /* the whole stream read: its end is checked too */
  else jpeg_abort_decompress(&cinfo);        /* the rows below are not needed */
  jpeg_destroy_decompress(&cinfo);

  int skipped = whole ? y0 : 0; /* decoded rows above the region */
  for (int r = 0; r < out_h; r++) {
    uint8_t *src = out->pixels + (size_t)(r + skipped) * row_bytes + (size_t)left * (size_t)comps;
    uint8_t *dst = out->pixels + (size_t)r * (size_t)out_w * 3;
    if (comps == 4) {
      memmove(dst, src, (size_t)out_w * 4);
      cmyk_to_rgb(dst, out_w, inverted);
    } else {
      memmove(dst, src, (size_t)out_w * 3);
    }
  }
  out->width = out_w;
  out->height = out_h;
  out->scale_num = num;
  out->x0 = x0;
  out->y0 = y0;
  return 0;
}

int jpeg_image_decode_region(const uint8_t *data, size_t size, int x, int y, int w, int h,
                             int scale_num, rgb_image *out, char *err, size_t err_size) {
  return decode(data, size, x, y, w, h, scale_num, 0, out, err, err_size);
}

int jpeg_image_decode_whole_then_crop(const uint8_t *data, size_t size, int x, int y, int w, int h,
                                      int scale_num, rgb_image *out, char *err, size_t err_size) {
  return decode(data, size, x, y, w, h, scale_num, 1, out, err, err_size);
}
