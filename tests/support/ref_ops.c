/* ref_ops.c — see ref_ops.h. Loops written to be read, not to be fast: each output
 * element (or each gradient) is the textbook sum, accumulated in double. */
#include "ref_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define AT(s, n_, c_, h_, w_) ((((int64_t)(n_) * (s).c + (c_)) * (s).h + (h_)) * (s).w + (w_))

ref_window ref_window_of(const cnnb_node *n) {
  ref_window w = {
      .kh = n->attr.window.kernel_h,
      .kw = n->attr.window.kernel_w,
      .sh = n->attr.window.stride_h > 0 ? n->attr.window.stride_h : 1,
      .sw = n->attr.window.stride_w > 0 ? n->attr.window.stride_w : 1,
      .pt = n->attr.window.pad_top,
      .pb = n->attr.window.pad_bottom,
      .pl = n->attr.window.pad_left,
      .pr = n->attr.window.pad_right,
      .dh = n->attr.window.dilation_h > 0 ? n->attr.window.dilation_h : 1,
      .dw = n->attr.window.dilation_w > 0 ? n->attr.window.dilation_w : 1,
      .groups = n->attr.window.groups > 0 ? n->attr.window.groups : 1,
  };
  return w;
}

/* ---- conv2d ------------------------------------------------------------------------- */

void ref_conv2d_forward(const float *x, cnnb_shape xs, const float *w, const float *b,
                        const ref_window *win, float *y, cnnb_shape ys) {
  int icg = xs.c / win->groups, ocg = ys.c / win->groups;
  for (int n = 0; n < ys.n; n++)
    for (int o = 0; o < ys.c; o++) {
      int g = o / ocg;
      for (int oh = 0; oh < ys.h; oh++)
        for (int ow = 0; ow < ys.w; ow++) {
          double acc = b ? b[o] : 0.0;
          for (int i = 0; i < icg; i++)
            for (int kh = 0; kh < win->kh; kh++) {
              int ih = oh * win->sh - win->pt + kh * win->dh;
              if (ih < 0 || ih >= xs.h) continue;
              for (int kw = 0; kw < win->kw; kw++) {
                int iw = ow * win->sw - win->pl + kw * win->dw;
                if (iw < 0 || iw >= xs.w) continue;
                acc += (double)x[AT(xs, n, g * icg + i, ih, iw)] *
                       w[(((int64_t)o * icg + i) * win->kh + kh) * win->kw + kw];
              }
            }
          y[AT(ys, n, o, oh, ow)] = (float)acc;
        }
    }
}

void ref_conv2d_backward_data(const float *dy, cnnb_shape ys, const float *w, const ref_window *win,
                              float *dx, cnnb_shape xs) {
  int icg = xs.c / win->groups, ocg = ys.c / win->groups;
  int64_t count = cnnb_shape_count(xs);
  double *acc = calloc((size_t)count, sizeof *acc);
  for (int n = 0; n < ys.n; n++)
    for (int o = 0; o < ys.c; o++) {
      int g = o / ocg;
      for (int oh = 0; oh < ys.h; oh++)
        for (int ow = 0; ow < ys.w; ow++) {
          double d = dy[AT(ys, n, o, oh, ow)];
          for (int i = 0; i < icg; i++)
            for (int kh = 0; kh < win->kh; kh++) {
              int ih = oh * win->sh - win->pt + kh * win->dh;
              if (ih < 0 || ih >= xs.h) continue;
              for (int kw = 0; kw < win->kw; kw++) {
                int iw = ow * win->sw - win->pl + kw * win->dw;
                if (iw < 0 || iw >= xs.w) continue;
                acc[AT(xs, n, g * icg + i, ih, iw)] +=
                    d * w[(((int64_t)o * icg + i) * win->kh + kh) * win->kw + kw];
              }
            }
        }
    }
  for (int64_t i = 0; i < count; i++) dx[i] = (float)acc[i];
  free(acc);
}

void ref_conv2d_backward_weights(const float *x, cnnb_shape xs, const float *dy, cnnb_shape ys,
                                 const ref_window *win, float *dw, float *db) {
  int icg = xs.c / win->groups, ocg = ys.c / win->groups;
  for (int o = 0; o < ys.c; o++) {
    int g = o / ocg;
    if (db) {
      double acc = 0.0;
      for (int n = 0; n < ys.n; n++)
        for (int oh = 0; oh < ys.h; oh++)
          for (int ow = 0; ow < ys.w; ow++) acc += dy[AT(ys, n, o, oh, ow)];
      db[o] = (float)acc;
    }
    for (int i = 0; i < icg; i++)
      for (int kh = 0; kh < win->kh; kh++)
        for (int kw = 0; kw < win->kw; kw++) {
          double acc = 0.0;
          for (int n = 0; n < ys.n; n++)
            for (int oh = 0; oh < ys.h; oh++) {
              int ih = oh * win->sh - win->pt + kh * win->dh;
              if (ih < 0 || ih >= xs.h) continue;
              for (int ow = 0; ow < ys.w; ow++) {
                int iw = ow * win->sw - win->pl + kw * win->dw;
                if (iw < 0 || iw >= xs.w) continue;
                acc += (double)x[AT(xs, n, g * icg + i, ih, iw)] * dy[AT(ys, n, o, oh, ow)];
              }
            }
          dw[(((int64_t)o * icg + i) * win->kh + kh) * win->kw + kw] = (float)acc;
        }
  }
}

/* ---- relu ------------------------------------------------------------------------------ */

void ref_relu_forward(const float *x, int64_t n, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void ref_relu_backward(const float *y, const float *dy, int64_t n, float *dx) {
  for (int64_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void ref_relu6_forward(const float *x, int64_t n, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] <= 0.0f ? 0.0f : x[i] >= 6.0f ? 6.0f : x[i];
}

/* The input form on purpose: devices take the output form, and the two agree only if
 * the device's bounds are right, which is what the test is for. */
void ref_relu6_backward(const float *x, const float *dy, int64_t n, float *dx) {
  for (int64_t i = 0; i < n; i++) dx[i] = x[i] > 0.0f && x[i] < 6.0f ? dy[i] : 0.0f;
}

/* ---- the activations of ABI 1.14 --------------------------------------------------------- */

static double sigmoid_of(double x) { return 1.0 / (1.0 + exp(-x)); }

/* torch's GELU tanh form: 0.5 x (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2 / pi). */
static const double GELU_K = 0.7978845608028654, GELU_C = 0.044715;

static double activation(uint32_t op, int32_t tanh_form, double x) {
  switch (op) {
    case CNNB_OP_SIGMOID: return sigmoid_of(x);
    case CNNB_OP_SILU: return x * sigmoid_of(x);
    case CNNB_OP_HARD_SIGMOID: return fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0;
    case CNNB_OP_HARD_SWISH: return x * fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0;
    case CNNB_OP_GELU:
      return tanh_form ? 0.5 * x * (1.0 + tanh(GELU_K * (x + GELU_C * x * x * x)))
                       : 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    default: abort();
  }
}

/* f'(x), at a kink torch's side: hard_sigmoid's gradient is 1/6 on (-3, 3) only,
 * hard_swish's x / 3 + 1/2 on [-3, 3] and 1 above. */
static double activation_slope(uint32_t op, int32_t tanh_form, double x) {
  switch (op) {
    case CNNB_OP_SIGMOID: return sigmoid_of(x) * (1.0 - sigmoid_of(x));
    case CNNB_OP_SILU: return sigmoid_of(x) * (1.0 + x * (1.0 - sigmoid_of(x)));
    case CNNB_OP_HARD_SIGMOID: return x > -3.0 && x < 3.0 ? 1.0 / 6.0 : 0.0;
    case CNNB_OP_HARD_SWISH: return x < -3.0 ? 0.0 : x <= 3.0 ? x / 3.0 + 0.5 : 1.0;
    case CNNB_OP_GELU:
      if (tanh_form) {
        double u = GELU_K * (x + GELU_C * x * x * x), t = tanh(u);
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_K * (1.0 + 3.0 * GELU_C * x * x);
      }
      return 0.5 * (1.0 + erf(x / sqrt(2.0))) +
             x * exp(-0.5 * x * x) / 2.5066282746310002; /* sqrt(2 pi) */
    default: abort();
  }
}

void ref_activation_forward(uint32_t op, int32_t tanh_form, const float *x, int64_t n, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = (float)activation(op, tanh_form, x[i]);
}

void ref_activation_backward(uint32_t op, int32_t tanh_form, const float *x, const float *dy,
                             int64_t n, float *dx) {
  for (int64_t i = 0; i < n; i++) dx[i] = (float)(dy[i] * activation_slope(op, tanh_form, x[i]));
}

/* ---- batch norm -------------------------------------------------------------------------- */

static void channel_stats(const float *x, cnnb_shape s, int c, double *mean, double *var) {
  double sum = 0.0, sq = 0.0, m = (double)s.n * s.h * s.w;
  for (int n = 0; n < s.n; n++)
    for (int h = 0; h < s.h; h++)
      for (int w = 0; w < s.w; w++) sum += x[AT(s, n, c, h, w)];
  *mean = sum / m;
  for (int n = 0; n < s.n; n++)
    for (int h = 0; h < s.h; h++)
      for (int w = 0; w < s.w; w++) {
        double d = x[AT(s, n, c, h, w)] - *mean;
        sq += d * d;
      }
  *var = sq / m;
}

void ref_batch_norm_forward_training(const float *x, cnnb_shape s, const float *scale,
                                     const float *offset, float eps, float *y, float *mean,
                                     float *var) {
  for (int c = 0; c < s.c; c++) {
    double mu, v;
    channel_stats(x, s, c, &mu, &v);
    mean[c] = (float)mu;
    var[c] = (float)v;
    double inv = 1.0 / sqrt(v + eps), g = scale ? scale[c] : 1.0;
    for (int n = 0; n < s.n; n++)
      for (int h = 0; h < s.h; h++)
        for (int w = 0; w < s.w; w++) {
          int64_t i = AT(s, n, c, h, w);
          y[i] = (float)(g * (x[i] - mu) * inv + offset[c]);
        }
  }
}

void ref_batch_norm_forward_inference(const float *x, cnnb_shape s, const float *scale,
                                      const float *offset, const float *mean, const float *var,
                                      float eps, float *y) {
  for (int c = 0; c < s.c; c++) {
    double inv = 1.0 / sqrt((double)var[c] + eps), g = scale ? scale[c] : 1.0;
    for (int n = 0; n < s.n; n++)
      for (int h = 0; h < s.h; h++)
        for (int w = 0; w < s.w; w++) {
          int64_t i = AT(s, n, c, h, w);
          y[i] = (float)(g * (x[i] - mean[c]) * inv + offset[c]);
        }
  }
}

void ref_batch_norm_backward(const float *x, cnnb_shape s, const float *scale, const float *dy,
                             const float *mean, const float *var, float eps, float *dx,
                             float *dscale, float *doffset) {
  double m = (double)s.n * s.h * s.w;
  for (int c = 0; c < s.c; c++) {
    double inv = 1.0 / sqrt((double)var[c] + eps), g = scale ? scale[c] : 1.0;
    double sum_dy = 0.0, sum_dy_xhat = 0.0;
    for (int n = 0; n < s.n; n++)
      for (int h = 0; h < s.h; h++)
        for (int w = 0; w < s.w; w++) {
          int64_t i = AT(s, n, c, h, w);
          sum_dy += dy[i];
          sum_dy_xhat += dy[i] * (x[i] - mean[c]) * inv;
        }
    if (dscale) dscale[c] = (float)sum_dy_xhat;
    doffset[c] = (float)sum_dy;
    for (int n = 0; n < s.n; n++)
      for (int h = 0; h < s.h; h++)
        for (int w = 0; w < s.w; w++) {
          int64_t i = AT(s, n, c, h, w);
          double xhat = (x[i] - mean[c]) * inv;
          dx[i] = (float)(g * inv / m * (m * dy[i] - sum_dy - xhat * sum_dy_xhat));
        }
  }
}

/* ---- multiply, layer norm, channel scale (ABI 1.14) ----------------------------------------- */

/* The gate's index for element (n, c, h, w) of x. */
static int64_t gate_at(cnnb_shape s, cnnb_shape gs, int n, int c, int h, int w) {
  return gs.h == 1 && gs.w == 1 && (s.h != 1 || s.w != 1) ? (int64_t)n * s.c + c
                                                          : AT(s, n, c, h, w);
}

void ref_multiply_forward(const float *x, cnnb_shape s, const float *gate, cnnb_shape gs,
                          float *y) {
  for (int n = 0; n < s.n; n++)
    for (int c = 0; c < s.c; c++)
      for (int h = 0; h < s.h; h++)
        for (int w = 0; w < s.w; w++)
          y[AT(s, n, c, h, w)] = (float)((double)x[AT(s, n, c, h, w)] *
                                         gate[gate_at(s, gs, n, c, h, w)]);
}

void ref_multiply_backward(const float *x, cnnb_shape s, const float *gate, cnnb_shape gs,
                           const float *dy, float *dx, float *dgate) {
  int64_t gcount = (int64_t)gs.n * gs.c * gs.h * gs.w;
  double *acc = calloc((size_t)gcount, sizeof *acc);
  for (int n = 0; n < s.n; n++)
    for (int c = 0; c < s.c; c++)
      for (int h = 0; h < s.h; h++)
        for (int w = 0; w < s.w; w++) {
          int64_t i = AT(s, n, c, h, w), k = gate_at(s, gs, n, c, h, w);
          if (dx) dx[i] = (float)((double)dy[i] * gate[k]);
          acc[k] += (double)dy[i] * x[i];
        }
  if (dgate)
    for (int64_t k = 0; k < gcount; k++) dgate[k] = (float)acc[k];
  free(acc);
}

void ref_layer_norm_forward(const float *x, cnnb_shape s, const float *scale, const float *offset,
                            float eps, float *y, float *mean, float *var) {
  for (int n = 0; n < s.n; n++)
    for (int h = 0; h < s.h; h++)
      for (int w = 0; w < s.w; w++) {
        double sum = 0.0, sq = 0.0;
        for (int c = 0; c < s.c; c++) sum += x[AT(s, n, c, h, w)];
        double mu = sum / s.c;
        for (int c = 0; c < s.c; c++) {
          double d = x[AT(s, n, c, h, w)] - mu;
          sq += d * d;
        }
        double v = sq / s.c, inv = 1.0 / sqrt(v + eps);
        int64_t p = ((int64_t)n * s.h + h) * s.w + w;
        if (mean) mean[p] = (float)mu;
        if (var) var[p] = (float)v;
        for (int c = 0; c < s.c; c++) {
          int64_t i = AT(s, n, c, h, w);
          y[i] = (float)((x[i] - mu) * inv * scale[c] + offset[c]);
        }
      }
}

void ref_layer_norm_backward(const float *x, cnnb_shape s, const float *scale, const float *dy,
                             const float *mean, const float *var, float eps, float *dx,
                             float *dscale, float *doffset) {
  double *ds = calloc((size_t)s.c, sizeof *ds), *db = calloc((size_t)s.c, sizeof *db);
  for (int n = 0; n < s.n; n++)
    for (int h = 0; h < s.h; h++)
      for (int w = 0; w < s.w; w++) {
        int64_t p = ((int64_t)n * s.h + h) * s.w + w;
        double inv = 1.0 / sqrt((double)var[p] + eps), sum_g = 0.0, sum_g_xhat = 0.0;
        for (int c = 0; c < s.c; c++) {
          int64_t i = AT(s, n, c, h, w);
          double xhat = (x[i] - mean[p]) * inv, g = (double)dy[i] * scale[c];
          sum_g += g;
          sum_g_xhat += g * xhat;
          ds[c] += (double)dy[i] * xhat;
          db[c] += dy[i];
        }
        if (!dx) continue;
        for (int c = 0; c < s.c; c++) {
          int64_t i = AT(s, n, c, h, w);
          double xhat = (x[i] - mean[p]) * inv, g = (double)dy[i] * scale[c];
          dx[i] = (float)(inv / s.c * (s.c * g - sum_g - xhat * sum_g_xhat));
        }
      }
  for (int c = 0; c < s.c; c++) {
    dscale[c] = (float)ds[c];
    doffset[c] = (float)db[c];
  }
  free(ds);
  free(db);
}

void ref_channel_scale_forward(const float *x, cnnb_shape s, const float *scale, float *y) {
  for (int n = 0; n < s.n; n++)
    for (int c = 0; c < s.c; c++)
      for (int h = 0; h < s.h; h++)
        for (int w = 0; w < s.w; w++)
          y[AT(s, n, c, h, w)] = (float)((double)x[AT(s, n, c, h, w)] * scale[c]);
}

void ref_channel_scale_backward(const float *x, cnnb_shape s, const float *scale, const float *dy,
                                float *dx, float *dscale) {
  for (int c = 0; c < s.c; c++) {
    double acc = 0.0;
    for (int n = 0; n < s.n; n++)
      for (int h = 0; h < s.h; h++)
        for (int w = 0; w < s.w; w++) {
          int64_t i = AT(s, n, c, h, w);
          if (dx) dx[i] = (float)((double)dy[i] * scale[c]);
          acc += (double)dy[i] * x[i];
        }
    dscale[c] = (float)acc;
  }
}

/* ---- slice_channels, channel_shuffle (ABI 1.14) ------------------------------------------- */

void ref_slice_channels_forward(const float *x, cnnb_shape xs, int begin, int count, float *y) {
  int64_t plane = (int64_t)xs.h * xs.w;
  for (int n = 0; n < xs.n; n++)
    for (int c = 0; c < count; c++)
      memcpy(y + ((int64_t)n * count + c) * plane, x + ((int64_t)n * xs.c + begin + c) * plane,
             (size_t)plane * sizeof *y);
}

void ref_slice_channels_backward(const float *dy, cnnb_shape xs, int begin, int count, float *dx) {
  int64_t plane = (int64_t)xs.h * xs.w;
  memset(dx, 0, (size_t)(xs.n * xs.c * plane) * sizeof *dx);
  for (int n = 0; n < xs.n; n++)
    for (int c = 0; c < count; c++)
      memcpy(dx + ((int64_t)n * xs.c + begin + c) * plane, dy + ((int64_t)n * count + c) * plane,
             (size_t)plane * sizeof *dx);
}

/* Input channel of output channel c. */
static int shuffle_source(int c, int channels, int groups) {
  return (c % groups) * (channels / groups) + c / groups;
}

void ref_channel_shuffle_forward(const float *x, cnnb_shape s, int groups, float *y) {
  int64_t plane = (int64_t)s.h * s.w;
  for (int n = 0; n < s.n; n++)
    for (int c = 0; c < s.c; c++)
      memcpy(y + ((int64_t)n * s.c + c) * plane,
             x + ((int64_t)n * s.c + shuffle_source(c, s.c, groups)) * plane,
             (size_t)plane * sizeof *y);
}

void ref_channel_shuffle_backward(const float *dy, cnnb_shape s, int groups, float *dx) {
  int64_t plane = (int64_t)s.h * s.w;
  for (int n = 0; n < s.n; n++)
    for (int c = 0; c < s.c; c++)
      memcpy(dx + ((int64_t)n * s.c + shuffle_source(c, s.c, groups)) * plane,
             dy + ((int64_t)n * s.c + c) * plane, (size_t)plane * sizeof *dx);
}

/* ---- pools --------------------------------------------------------------------------------- */

void ref_max_pool_forward(const float *x, cnnb_shape xs, const ref_window *win, float *y,
                          cnnb_shape ys) {
  for (int n = 0; n < ys.n; n++)
    for (int c = 0; c < ys.c; c++)
      for (int oh = 0; oh < ys.h; oh++)
        for (int ow = 0; ow < ys.w; ow++) {
          float best = -INFINITY;
          for (int kh = 0; kh < win->kh; kh++)
            for (int kw = 0; kw < win->kw; kw++) {
              int ih = oh * win->sh - win->pt + kh, iw = ow * win->sw - win->pl + kw;
              if (ih < 0 || ih >= xs.h || iw < 0 || iw >= xs.w) continue;
              float v = x[AT(xs, n, c, ih, iw)];
              if (v > best) best = v;
            }
          y[AT(ys, n, c, oh, ow)] = best;
        }
}

void ref_max_pool_backward(const float *x, cnnb_shape xs, const float *dy, cnnb_shape ys,
                           const ref_window *win, float *dx) {
  memset(dx, 0, (size_t)cnnb_shape_count(xs) * sizeof *dx);
  for (int n = 0; n < ys.n; n++)
    for (int c = 0; c < ys.c; c++)
      for (int oh = 0; oh < ys.h; oh++)
        for (int ow = 0; ow < ys.w; ow++) {
          float best = -INFINITY;
          int64_t at = -1;
          for (int kh = 0; kh < win->kh; kh++)
            for (int kw = 0; kw < win->kw; kw++) {
              int ih = oh * win->sh - win->pt + kh, iw = ow * win->sw - win->pl + kw;
              if (ih < 0 || ih >= xs.h || iw < 0 || iw >= xs.w) continue;
              float v = x[AT(xs, n, c, ih, iw)];
              if (v > best) {
                best = v;
                at = AT(xs, n, c, ih, iw);
              }
            }
          if (at >= 0) dx[at] += dy[AT(ys, n, c, oh, ow)];
        }
}

/* Elements of the window at (oh, ow) that lie inside the input. */
static int window_size(const ref_window *win, cnnb_shape xs, int oh, int ow) {
  int count = 0;
  for (int kh = 0; kh < win->kh; kh++)
    for (int kw = 0; kw < win->kw; kw++) {
      int ih = oh * win->sh - win->pt + kh, iw = ow * win->sw - win->pl + kw;
      if (ih >= 0 && ih < xs.h && iw >= 0 && iw < xs.w) count++;
    }
  return count;
}

void ref_avg_pool_forward(const float *x, cnnb_shape xs, const ref_window *win, float *y,
                          cnnb_shape ys) {
  for (int n = 0; n < ys.n; n++)
    for (int c = 0; c < ys.c; c++)
      for (int oh = 0; oh < ys.h; oh++)
        for (int ow = 0; ow < ys.w; ow++) {
          double acc = 0.0;
          for (int kh = 0; kh < win->kh; kh++)
            for (int kw = 0; kw < win->kw; kw++) {
              int ih = oh * win->sh - win->pt + kh, iw = ow * win->sw - win->pl + kw;
              if (ih < 0 || ih >= xs.h || iw < 0 || iw >= xs.w) continue;
              acc += x[AT(xs, n, c, ih, iw)];
            }
          int count = window_size(win, xs, oh, ow);
          y[AT(ys, n, c, oh, ow)] = count ? (float)(acc / count) : 0.0f;
        }
}

void ref_avg_pool_backward(const float *dy, cnnb_shape ys, const ref_window *win, float *dx,
                           cnnb_shape xs) {
  int64_t total = cnnb_shape_count(xs);
  double *acc = calloc((size_t)total, sizeof *acc);
  for (int n = 0; n < ys.n; n++)
    for (int c = 0; c < ys.c; c++)
      for (int oh = 0; oh < ys.h; oh++)
        for (int ow = 0; ow < ys.w; ow++) {
          int count = window_size(win, xs, oh, ow);
          if (!count) continue;
          double share = dy[AT(ys, n, c, oh, ow)] / (double)count;
          for (int kh = 0; kh < win->kh; kh++)
            for (int kw = 0; kw < win->kw; kw++) {
              int ih = oh * win->sh - win->pt + kh, iw = ow * win->sw - win->pl + kw;
              if (ih < 0 || ih >= xs.h || iw < 0 || iw >= xs.w) continue;
              acc[AT(xs, n, c, ih, iw)] += share;
            }
        }
  for (int64_t i = 0; i < total; i++) dx[i] = (float)acc[i];
  free(acc);
}

/* ---- LRN ------------------------------------------------------------------------------------ */

static double lrn_norm(const float *x, cnnb_shape s, int n, int c, int h, int w, int radius,
                       float bias, float alpha) {
  double sum = 0.0;
  for (int j = c - radius; j <= c + radius; j++) {
    if (j < 0 || j >= s.c) continue;
    double v = x[AT(s, n, j, h, w)];
    sum += v * v;
  }
  return bias + alpha * sum;
}

void ref_lrn_forward(const float *x, cnnb_shape s, int radius, float bias, float alpha, float beta,
                     float *y) {
  for (int n = 0; n < s.n; n++)
    for (int c = 0; c < s.c; c++)
      for (int h = 0; h < s.h; h++)
        for (int w = 0; w < s.w; w++)
          y[AT(s, n, c, h, w)] = (float)(x[AT(s, n, c, h, w)] *
                                         pow(lrn_norm(x, s, n, c, h, w, radius, bias, alpha),
                                             -beta));
}

void ref_lrn_backward(const float *x, cnnb_shape s, const float *dy, int radius, float bias,
                      float alpha, float beta, float *dx) {
  for (int n = 0; n < s.n; n++)
    for (int h = 0; h < s.h; h++)
      for (int w = 0; w < s.w; w++)
        for (int j = 0; j < s.c; j++) {
          /* y_c = x_c N_c^-beta with N_c = bias + alpha sum_{|i-c|<=r} x_i^2. */
          double xj = x[AT(s, n, j, h, w)];
          double acc = dy[AT(s, n, j, h, w)] *
                       pow(lrn_norm(x, s, n, j, h, w, radius, bias, alpha), -beta);
          for (int c = j - radius; c <= j + radius; c++) {
            if (c < 0 || c >= s.c) continue;
            double nc = lrn_norm(x, s, n, c, h, w, radius, bias, alpha);
            acc -= 2.0 * alpha * beta * xj * dy[AT(s, n, c, h, w)] * x[AT(s, n, c, h, w)] *
                   pow(nc, -beta - 1.0);
          }
          dx[AT(s, n, j, h, w)] = (float)acc;
        }
}

/* ---- dense ----------------------------------------------------------------------------------- */

void ref_dense_forward(const float *x, int n, int k, const float *w, const float *b, int units,
                       float *y) {
  for (int i = 0; i < n; i++)
    for (int u = 0; u < units; u++) {
      double acc = b ? b[u] : 0.0;
      for (int j = 0; j < k; j++) acc += (double)x[(int64_t)i * k + j] * w[(int64_t)u * k + j];
      y[(int64_t)i * units + u] = (float)acc;
    }
}

void ref_dense_backward_data(const float *dy, int n, int units, const float *w, int k, float *dx) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < k; j++) {
      double acc = 0.0;
      for (int u = 0; u < units; u++)
        acc += (double)dy[(int64_t)i * units + u] * w[(int64_t)u * k + j];
      dx[(int64_t)i * k + j] = (float)acc;
    }
}

void ref_dense_backward_weights(const float *x, const float *dy, int n, int k, int units, float *dw,
                                float *db) {
  for (int u = 0; u < units; u++) {
    if (db) {
      double acc = 0.0;
      for (int i = 0; i < n; i++) acc += dy[(int64_t)i * units + u];
      db[u] = (float)acc;
    }
    for (int j = 0; j < k; j++) {
      double acc = 0.0;
      for (int i = 0; i < n; i++) acc += (double)dy[(int64_t)i * units + u] * x[(int64_t)i * k + j];
      dw[(int64_t)u * k + j] = (float)acc;
    }
  }
}

/* ---- concat, add ----------------------------------------------------------------------------- */

void ref_concat_forward(const float *const *xs, const cnnb_shape *shapes, int count, float *y) {
  int total_c = 0;
  for (int i = 0; i < count; i++) total_c += shapes[i].c;
  cnnb_shape ys = {shapes[0].n, total_c, shapes[0].h, shapes[0].w};
  int off = 0;
  for (int i = 0; i < count; i++) {
    cnnb_shape s = shapes[i];
    for (int n = 0; n < s.n; n++)
      for (int c = 0; c < s.c; c++)
        for (int h = 0; h < s.h; h++)
          for (int w = 0; w < s.w; w++) y[AT(ys, n, off + c, h, w)] = xs[i][AT(s, n, c, h, w)];
    off += s.c;
  }
}

void ref_concat_backward(const float *dy, const cnnb_shape *shapes, int count, float *const *dxs) {
  int total_c = 0;
  for (int i = 0; i < count; i++) total_c += shapes[i].c;
  cnnb_shape ys = {shapes[0].n, total_c, shapes[0].h, shapes[0].w};
  int off = 0;
  for (int i = 0; i < count; i++) {
    cnnb_shape s = shapes[i];
    for (int n = 0; n < s.n; n++)
      for (int c = 0; c < s.c; c++)
        for (int h = 0; h < s.h; h++)
          for (int w = 0; w < s.w; w++) dxs[i][AT(s, n, c, h, w)] = dy[AT(ys, n, off + c, h, w)];
    off += s.c;
  }
}

void ref_pad_channels_forward(const float *x, cnnb_shape xs, int before, int after, float *y) {
  cnnb_shape ys = {xs.n, before + xs.c + after, xs.h, xs.w};
  for (int n = 0; n < ys.n; n++)
    for (int c = 0; c < ys.c; c++)
      for (int h = 0; h < ys.h; h++)
        for (int w = 0; w < ys.w; w++) {
          int xc = c - before;
          y[AT(ys, n, c, h, w)] = xc >= 0 && xc < xs.c ? x[AT(xs, n, xc, h, w)] : 0.0f;
        }
}

void ref_pad_channels_backward(const float *dy, cnnb_shape xs, int before, int after, float *dx) {
  cnnb_shape ys = {xs.n, before + xs.c + after, xs.h, xs.w};
  for (int n = 0; n < xs.n; n++)
    for (int c = 0; c < xs.c; c++)
      for (int h = 0; h < xs.h; h++)
        for (int w = 0; w < xs.w; w++) dx[AT(xs, n, c, h, w)] = dy[AT(ys, n, before + c, h, w)];
}

void ref_pad_spatial_forward(const float *x, cnnb_shape xs, int top, int bottom, int left,
                             int right, float *y) {
  cnnb_shape ys = {xs.n, xs.c, top + xs.h + bottom, left + xs.w + right};
  for (int n = 0; n < ys.n; n++)
    for (int c = 0; c < ys.c; c++)
      for (int h = 0; h < ys.h; h++)
        for (int w = 0; w < ys.w; w++) {
          int xh = h - top, xw = w - left;
          int inside = xh >= 0 && xh < xs.h && xw >= 0 && xw < xs.w;
          y[AT(ys, n, c, h, w)] = inside ? x[AT(xs, n, c, xh, xw)] : 0.0f;
        }
}

void ref_pad_spatial_backward(const float *dy, cnnb_shape xs, int top, int bottom, int left,
                              int right, float *dx) {
  cnnb_shape ys = {xs.n, xs.c, top + xs.h + bottom, left + xs.w + right};
  for (int n = 0; n < xs.n; n++)
    for (int c = 0; c < xs.c; c++)
      for (int h = 0; h < xs.h; h++)
        for (int w = 0; w < xs.w; w++) {
          int yh = h + top, yw = w + left;
          int inside = yh >= 0 && yh < ys.h && yw >= 0 && yw < ys.w;
          dx[AT(xs, n, c, h, w)] = inside ? dy[AT(ys, n, c, yh, yw)] : 0.0f;
        }
}

void ref_add_forward(const float *a, const float *b, int64_t n, float *y) {
  for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

/* ---- softmax cross-entropy ------------------------------------------------------------------- */

double ref_softmax_xent_forward(const float *logits, int n, int k, const int32_t *labels,
                                float smoothing, float *probs) {
  double total = 0.0;
  for (int i = 0; i < n; i++) {
    const float *row = logits + (int64_t)i * k;
    double max = row[0], sum = 0.0;
    for (int j = 1; j < k; j++)
      if (row[j] > max) max = row[j];
    for (int j = 0; j < k; j++) sum += exp(row[j] - max);
    if (probs)
      for (int j = 0; j < k; j++) probs[(int64_t)i * k + j] = (float)(exp(row[j] - max) / sum);
    for (int j = 0; j < k; j++) {
      double target = smoothing / k + (j == labels[i] ? 1.0 - smoothing : 0.0);
      total -= target * ((row[j] - max) - log(sum));
    }
  }
  return total / n;
}

void ref_softmax_xent_backward(const float *logits, int n, int k, const int32_t *labels,
                               float smoothing, float scale, float *dlogits) {
  for (int i = 0; i < n; i++) {
    const float *row = logits + (int64_t)i * k;
    double max = row[0], sum = 0.0;
    for (int j = 1; j < k; j++)
      if (row[j] > max) max = row[j];
    for (int j = 0; j < k; j++) sum += exp(row[j] - max);
    for (int j = 0; j < k; j++) {
      double target = smoothing / k + (j == labels[i] ? 1.0 - smoothing : 0.0);
      double p = exp(row[j] - max) / sum - target;
      dlogits[(int64_t)i * k + j] = (float)(scale * p / n);
    }
  }
}
