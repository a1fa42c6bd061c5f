/* op_window.c — TF's window arithmetic (op_window.h) for conv2d and the pools. */
#include "graph/op_window.h"

#include <stdarg.h>
#include <stdio.h>

static bool refuse(char *error, size_t size, const char *fmt, ...) CNNB_PRINTF(3, 4);
static bool refuse(char *error, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error, size, fmt, ap);
  va_end(ap);
  return false;
}

static const char *padding_name(uint32_t padding) {
  switch (padding) {
    case CNNB_PAD_SAME: return "SAME";
    case CNNB_PAD_VALID: return "VALID";
    case CNNB_PAD_EXPLICIT: return "EXPLICIT";
    default: return "unknown";
  }
}

/* One spatial dimension of a window op under TF's rules:
 *   SAME:     out = ceil(in / s), pad_total = max((out - 1) * s + eff_k - in, 0),
 *             before = pad_total / 2, the odd one after (bottom / right);
 *   VALID:    out = floor((in - eff_k) / s) + 1, no padding;
 *   EXPLICIT: out = floor((in + before + after - eff_k) / s) + 1.
 * Returns false when the (dilated) window does not fit the padded input. */
static bool window_dim(int32_t in, int32_t eff_k, int32_t stride, uint32_t padding, int32_t *before,
                       int32_t *after, int32_t *out) {
  if (padding == CNNB_PAD_SAME) {
    *out = (int32_t)(((int64_t)in + stride - 1) / stride);
    int64_t total = (int64_t)(*out - 1) * stride + eff_k - in;
    if (total < 0) total = 0;
    *before = (int32_t)(total / 2);
    *after = (int32_t)(total - total / 2);
    return true;
  }
  if (padding == CNNB_PAD_VALID) *before = *after = 0;
  int64_t padded = (int64_t)in + *before + *after;
  if (padded < eff_k) return false;
  *out = (int32_t)((padded - eff_k) / stride + 1);
  return true;
}

bool cnnb_window_resolve(cnnb_node *n, uint32_t padding, cnnb_shape in, const char *kind,
                         char *error, size_t size) {
  const int32_t kh = n->attr.window.kernel_h, kw = n->attr.window.kernel_w;
  const int32_t sh = n->attr.window.stride_h, sw = n->attr.window.stride_w;
  const int32_t dh = n->attr.window.dilation_h, dw = n->attr.window.dilation_w;
  if (kh < 1 || kw < 1)
    return refuse(error, size, "%s %dx%d: kernel sizes must be >= 1", kind, kh, kw);
  if (sh < 1 || sw < 1) return refuse(error, size, "stride %dx%d: strides must be >= 1", sh, sw);
  if (dh < 1 || dw < 1)
    return refuse(error, size, "dilation %dx%d: dilations must be >= 1", dh, dw);
  if (padding != CNNB_PAD_SAME && padding != CNNB_PAD_VALID && padding != CNNB_PAD_EXPLICIT)
    return refuse(error, size, "unknown padding %u (expected SAME, VALID or EXPLICIT)", padding);
  int32_t top = 0, bottom = 0, left = 0, right = 0;
  if (padding == CNNB_PAD_EXPLICIT) {
    top = n->attr.window.pad_top, bottom = n->attr.window.pad_bottom;
    left = n->attr.window.pad_left, right = n->attr.window.pad_right;
    if (top < 0 || bottom < 0 || left < 0 || right < 0)
      return refuse(error, size, "explicit pads %d,%d,%d,%d (top,bottom,left,right) must be >= 0",
                    top, bottom, left, right);
  }
  int64_t ekh64 = (int64_t)(kh - 1) * dh + 1, ekw64 = (int64_t)(kw - 1) * dw + 1;
  if (ekh64 > INT32_MAX || ekw64 > INT32_MAX)
    return refuse(error, size, "%s %dx%d dilated %dx%d is too large", kind, kh, kw, dh, dw);
  int32_t ekh = (int32_t)ekh64, ekw = (int32_t)ekw64;
  int32_t oh = 0, ow = 0;
  bool fits_h = window_dim(in.h, ekh, sh, padding, &top, &bottom, &oh);
  bool fits_w = window_dim(in.w, ekw, sw, padding, &left, &right, &ow);
  if (!fits_h || !fits_w) {
    char pad_desc[64];
    if (padding == CNNB_PAD_EXPLICIT)
      snprintf(pad_desc, sizeof pad_desc, "padding EXPLICIT %d,%d,%d,%d", top, bottom, left, right);
    else snprintf(pad_desc, sizeof pad_desc, "padding %s", padding_name(padding));
    return refuse(
        error, size,
        "%s %dx%d (dilated %dx%d) larger than padded input %dx%d (%s); input is [%d, %d, %d, %d]",
        kind, kh, kw, ekh, ekw, in.h + top + bottom, in.w + left + right, pad_desc, in.n, in.c,
        in.h, in.w);
  }
  n->attr.window.pad_top = top;
  n->attr.window.pad_bottom = bottom;
  n->attr.window.pad_left = left;
  n->attr.window.pad_right = right;
  n->shape = (cnnb_shape){in.n, in.c, oh, ow};
  return true;
}
