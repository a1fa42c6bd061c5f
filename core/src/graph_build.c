/* graph_build.c — the op builders of graph.h: each checks its desc and inputs, infers
 * the output shape with TensorFlow's rules, resolves padding to explicit pads (devices
 * only ever see pad_top/bottom/left/right), and creates the node's parameters with their
 * tf_cnn_benchmarks default initializers.
 *
 * Descs are read only up to their struct_size (a smaller, older desc leaves the newer
 * fields at their zero defaults), as the ABI's append-only rule requires. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph_impl.h"

/* Copies the caller's desc into a zeroed local, reading no further than either size. */
static void read_desc(void *dst, size_t dst_size, const void *src) {
  memset(dst, 0, dst_size);
  uint32_t size;
  memcpy(&size, src, sizeof size);
  memcpy(dst, src, size < dst_size ? size : dst_size);
  size = (uint32_t)dst_size; /* struct_size now describes the local copy */
  memcpy(dst, &size, sizeof size);
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
static bool window_dim(int32_t in, int32_t eff_k, int32_t stride, uint32_t padding,
                       int32_t *before, int32_t *after, int32_t *out) {
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

/* Shared by conv2d and the pools: defaults, checks and resolved pads into n->attr.window.
 * `kind` names the window in messages ("filter" or "window"). */
static bool resolve_window(const cnnb_node_start *s, const cnnb_shape in, int32_t kh, int32_t kw,
                           int32_t sh, int32_t sw, int32_t dh, int32_t dw, uint32_t padding,
                           const int32_t pads[4], const char *kind, cnnb_node *n) {
  if (kh < 1 || kw < 1) {
    cnnb_graph_reject(s, CNNB_EINVAL, "%s %dx%d: kernel sizes must be >= 1", kind, kh, kw);
    return false;
  }
  if (sh < 1 || sw < 1) {
    cnnb_graph_reject(s, CNNB_EINVAL, "stride %dx%d: strides must be >= 1", sh, sw);
    return false;
  }
  if (dh < 1 || dw < 1) {
    cnnb_graph_reject(s, CNNB_EINVAL, "dilation %dx%d: dilations must be >= 1", dh, dw);
    return false;
  }
  if (padding != CNNB_PAD_SAME && padding != CNNB_PAD_VALID && padding != CNNB_PAD_EXPLICIT) {
    cnnb_graph_reject(s, CNNB_EINVAL, "unknown padding %u (expected SAME, VALID or EXPLICIT)",
                      padding);
    return false;
  }
  int32_t top = 0, bottom = 0, left = 0, right = 0;
  if (padding == CNNB_PAD_EXPLICIT) {
    top = pads[0], bottom = pads[1], left = pads[2], right = pads[3];
    if (top < 0 || bottom < 0 || left < 0 || right < 0) {
      cnnb_graph_reject(s, CNNB_EINVAL, "explicit pads %d,%d,%d,%d (top,bottom,left,right) must be >= 0",
                        top, bottom, left, right);
      return false;
    }
  }
  int64_t ekh64 = (int64_t)(kh - 1) * dh + 1, ekw64 = (int64_t)(kw - 1) * dw + 1;
  if (ekh64 > INT32_MAX || ekw64 > INT32_MAX) {
    cnnb_graph_reject(s, CNNB_EINVAL, "%s %dx%d dilated %dx%d is too large", kind, kh, kw, dh, dw);
    return false;
  }
  int32_t ekh = (int32_t)ekh64, ekw = (int32_t)ekw64;
  int32_t oh = 0, ow = 0;
  bool fits_h = window_dim(in.h, ekh, sh, padding, &top, &bottom, &oh);
  bool fits_w = window_dim(in.w, ekw, sw, padding, &left, &right, &ow);
  if (!fits_h || !fits_w) {
    char pad_desc[64];
    if (padding == CNNB_PAD_EXPLICIT)
      snprintf(pad_desc, sizeof pad_desc, "padding EXPLICIT %d,%d,%d,%d", top, bottom, left, right);
    else
      snprintf(pad_desc, sizeof pad_desc, "padding %s", padding_name(padding));
    cnnb_graph_reject(s, CNNB_EINVAL,
                      "%s %dx%d (dilated %dx%d) larger than padded input %dx%d (%s); input is [%d, %d, %d, %d]",
                      kind, kh, kw, ekh, ekw, in.h + top + bottom, in.w + left + right, pad_desc,
                      in.n, in.c, in.h, in.w);
    return false;
  }
  n->attr.window.kernel_h = kh;
  n->attr.window.kernel_w = kw;
  n->attr.window.stride_h = sh;
  n->attr.window.stride_w = sw;
  n->attr.window.pad_top = top;
  n->attr.window.pad_bottom = bottom;
  n->attr.window.pad_left = left;
  n->attr.window.pad_right = right;
  n->attr.window.dilation_h = dh;
  n->attr.window.dilation_w = dw;
  n->shape = (cnnb_shape){in.n, in.c, oh, ow};
  return true;
}

static int32_t or_default(int32_t v, int32_t d) {
  return v ? v : d;
}

static cnnb_shape shape_of(const cnnb_graph *g, cnnb_tensor t) {
  return g->nodes[t]->node.shape;
}

/* ---- conv2d ---------------------------------------------------------------------------- */

cnnb_tensor cnnb_conv2d(cnnb_graph *g, const char *name, cnnb_tensor x, const cnnb_conv2d_desc *desc) {
  cnnb_node_start s;
  if (!cnnb_graph_start(&s, g, CNNB_OP_CONV2D, "conv2d", name, 1, &x)) return CNNB_NO_TENSOR;
  if (!desc) return cnnb_graph_reject(&s, CNNB_EINVAL, "desc is NULL");
  cnnb_conv2d_desc d;
  read_desc(&d, sizeof d, desc);
  cnnb_shape in = shape_of(g, x);
  int32_t groups = or_default(d.groups, 1);
  if (d.filters < 1) return cnnb_graph_reject(&s, CNNB_EINVAL, "filters %d must be >= 1", d.filters);
  if (groups < 1) return cnnb_graph_reject(&s, CNNB_EINVAL, "groups %d must be >= 1", groups);
  if (in.c % groups != 0 || d.filters % groups != 0)
    return cnnb_graph_reject(&s, CNNB_EINVAL,
                             "groups %d must divide both input channels %d and filters %d "
                             "(input [%d, %d, %d, %d])",
                             groups, in.c, d.filters, in.n, in.c, in.h, in.w);
  cnnb_node n = {0};
  uint32_t padding = d.padding ? d.padding : CNNB_PAD_SAME;
  const int32_t pads[4] = {d.pad_top, d.pad_bottom, d.pad_left, d.pad_right};
  if (!resolve_window(&s, in, d.kernel_h, d.kernel_w, or_default(d.stride_h, 1),
                      or_default(d.stride_w, 1), or_default(d.dilation_h, 1),
                      or_default(d.dilation_w, 1), padding, pads, "filter", &n))
    return CNNB_NO_TENSOR;
  n.shape.c = d.filters;
  n.attr.window.filters = d.filters;
  n.attr.window.groups = groups;
  n.attr.window.use_bias = d.use_bias ? 1 : 0;

  cnnb_tensor t = cnnb_graph_finish(&s, &n, 1, &x);
  if (t == CNNB_NO_TENSOR) return t;
  /* tf_cnn_benchmarks' conv(): variance scaling (TF default) unless told otherwise. */
  cnnb_init kinit = d.kernel_init;
  if (kinit.kind == CNNB_INIT_DEFAULT) kinit = (cnnb_init){CNNB_INIT_VARIANCE_SCALING, 1.0f};
  const int32_t kdims[4] = {d.filters, in.c / groups, d.kernel_h, d.kernel_w};
  if (!cnnb_graph_add_param(g, t, "kernel", 0, 0, 4, kdims, kinit)) return CNNB_NO_TENSOR;
  if (d.use_bias &&
      !cnnb_graph_add_param(g, t, "bias", 0, 0, 1, &d.filters,
                            (cnnb_init){CNNB_INIT_CONSTANT, d.bias_init}))
    return CNNB_NO_TENSOR;
  return t;
}

/* ---- batch norm ------------------------------------------------------------------------- */

cnnb_tensor cnnb_batch_norm(cnnb_graph *g, const char *name, cnnb_tensor x,
                            const cnnb_batch_norm_desc *desc) {
  cnnb_node_start s;
  if (!cnnb_graph_start(&s, g, CNNB_OP_BATCH_NORM, "batch_norm", name, 1, &x)) return CNNB_NO_TENSOR;
  cnnb_batch_norm_desc d = {.struct_size = sizeof d};
  if (desc) read_desc(&d, sizeof d, desc); /* NULL: every default */
  float epsilon = d.epsilon != 0.0f ? d.epsilon : 0.001f;
  float decay = d.decay != 0.0f ? d.decay : 0.999f;
  if (!(epsilon > 0.0f))
    return cnnb_graph_reject(&s, CNNB_EINVAL, "epsilon %g must be > 0", (double)epsilon);
  if (!(decay > 0.0f && decay <= 1.0f))
    return cnnb_graph_reject(&s, CNNB_EINVAL, "decay %g must be in (0, 1]", (double)decay);
  cnnb_shape in = shape_of(g, x);
  cnnb_node n = {.shape = in};
  n.attr.batch_norm.epsilon = epsilon;
  n.attr.batch_norm.decay = decay;
  n.attr.batch_norm.scale = d.scale ? 1 : 0;

  cnnb_tensor t = cnnb_graph_finish(&s, &n, 1, &x);
  if (t == CNNB_NO_TENSOR) return t;
  const int32_t c = in.c;
  const cnnb_init ones = {CNNB_INIT_CONSTANT, 1.0f}, zeros = {CNNB_INIT_ZEROS, 0.0f};
  /* tf_cnn_benchmarks excludes batch norm variables from L2 weight decay. */
  if (d.scale && !cnnb_graph_add_param(g, t, "gamma", 0, CNNB_PARAM_NO_DECAY, 1, &c, ones))
    return CNNB_NO_TENSOR;
  if (!cnnb_graph_add_param(g, t, "beta", 0, CNNB_PARAM_NO_DECAY, 1, &c, zeros) ||
      !cnnb_graph_add_param(g, t, "moving_mean", 1, CNNB_PARAM_NO_DECAY, 1, &c, zeros) ||
      !cnnb_graph_add_param(g, t, "moving_variance", 1, CNNB_PARAM_NO_DECAY, 1, &c, ones))
    return CNNB_NO_TENSOR;
  return t;
}

/* ---- elementwise and pooling ------------------------------------------------------------ */

cnnb_tensor cnnb_relu(cnnb_graph *g, const char *name, cnnb_tensor x) {
  cnnb_node_start s;
  if (!cnnb_graph_start(&s, g, CNNB_OP_RELU, "relu", name, 1, &x)) return CNNB_NO_TENSOR;
  return cnnb_graph_finish(&s, &(cnnb_node){.shape = shape_of(g, x)}, 1, &x);
}

/* Its own op, not a relu with an attribute: the ReLU fusion pass and the alias rule
 * (relu of a fused relu is the identity) match CNNB_OP_RELU only, and must stay blind
 * to the bound. */
cnnb_tensor cnnb_relu6(cnnb_graph *g, const char *name, cnnb_tensor x) {
  cnnb_node_start s;
  if (!cnnb_graph_start(&s, g, CNNB_OP_RELU6, "relu6", name, 1, &x)) return CNNB_NO_TENSOR;
  return cnnb_graph_finish(&s, &(cnnb_node){.shape = shape_of(g, x)}, 1, &x);
}

static cnnb_tensor pool(cnnb_graph *g, uint32_t op, const char *auto_base, const char *name,
                        cnnb_tensor x, const cnnb_pool_desc *desc) {
  cnnb_node_start s;
  if (!cnnb_graph_start(&s, g, op, auto_base, name, 1, &x)) return CNNB_NO_TENSOR;
  if (!desc) return cnnb_graph_reject(&s, CNNB_EINVAL, "desc is NULL");
  cnnb_pool_desc d;
  read_desc(&d, sizeof d, desc);
  cnnb_node n = {0};
  /* tf_cnn_benchmarks' mpool()/apool(): stride = kernel and VALID unless given. */
  uint32_t padding = d.padding ? d.padding : CNNB_PAD_VALID;
  const int32_t pads[4] = {d.pad_top, d.pad_bottom, d.pad_left, d.pad_right};
  if (!resolve_window(&s, shape_of(g, x), d.kernel_h, d.kernel_w, or_default(d.stride_h, d.kernel_h),
                      or_default(d.stride_w, d.kernel_w), 1, 1, padding, pads, "window", &n))
    return CNNB_NO_TENSOR;
  n.attr.window.groups = 1;
  return cnnb_graph_finish(&s, &n, 1, &x);
}

cnnb_tensor cnnb_max_pool(cnnb_graph *g, const char *name, cnnb_tensor x, const cnnb_pool_desc *desc) {
  return pool(g, CNNB_OP_MAX_POOL, "max_pool", name, x, desc);
}

cnnb_tensor cnnb_avg_pool(cnnb_graph *g, const char *name, cnnb_tensor x, const cnnb_pool_desc *desc) {
  return pool(g, CNNB_OP_AVG_POOL, "avg_pool", name, x, desc);
}

cnnb_tensor cnnb_global_avg_pool(cnnb_graph *g, const char *name, cnnb_tensor x) {
  cnnb_node_start s;
  if (!cnnb_graph_start(&s, g, CNNB_OP_GLOBAL_AVG_POOL, "global_avg_pool", name, 1, &x))
    return CNNB_NO_TENSOR;
  cnnb_shape in = shape_of(g, x);
  cnnb_node n = {.shape = {in.n, in.c, 1, 1}};
  /* Described as the window it is, for devices that run it as an ordinary avg pool. */
  n.attr.window.kernel_h = in.h;
  n.attr.window.kernel_w = in.w;
  n.attr.window.stride_h = n.attr.window.stride_w = 1;
  n.attr.window.dilation_h = n.attr.window.dilation_w = 1;
  n.attr.window.groups = 1;
  return cnnb_graph_finish(&s, &n, 1, &x);
}

cnnb_tensor cnnb_lrn(cnnb_graph *g, const char *name, cnnb_tensor x, const cnnb_lrn_desc *desc) {
  cnnb_node_start s;
  if (!cnnb_graph_start(&s, g, CNNB_OP_LRN, "lrn", name, 1, &x)) return CNNB_NO_TENSOR;
  if (!desc) return cnnb_graph_reject(&s, CNNB_EINVAL, "desc is NULL");
  cnnb_lrn_desc d;
  read_desc(&d, sizeof d, desc);
  if (d.depth_radius < 0)
    return cnnb_graph_reject(&s, CNNB_EINVAL, "depth_radius %d must be >= 0", d.depth_radius);
  /* bias 0 with alpha 0 divides by zero; a negative base has no real power. */
  if (d.bias < 0.0f || d.alpha < 0.0f || !(d.bias > 0.0f || d.alpha > 0.0f) || !isfinite(d.beta))
    return cnnb_graph_reject(&s, CNNB_EINVAL,
                             "bias %g, alpha %g, beta %g: need bias, alpha >= 0, not both 0",
                             (double)d.bias, (double)d.alpha, (double)d.beta);
  cnnb_node n = {.shape = shape_of(g, x)};
  n.attr.lrn.depth_radius = d.depth_radius;
  n.attr.lrn.bias = d.bias;
  n.attr.lrn.alpha = d.alpha;
  n.attr.lrn.beta = d.beta;
  return cnnb_graph_finish(&s, &n, 1, &x);
}

/* ---- dense, dropout ---------------------------------------------------------------------- */

cnnb_tensor cnnb_dense(cnnb_graph *g, const char *name, cnnb_tensor x, const cnnb_dense_desc *desc) {
  cnnb_node_start s;
  if (!cnnb_graph_start(&s, g, CNNB_OP_DENSE, "dense", name, 1, &x)) return CNNB_NO_TENSOR;
  if (!desc) return cnnb_graph_reject(&s, CNNB_EINVAL, "desc is NULL");
  cnnb_dense_desc d;
  read_desc(&d, sizeof d, desc);
  if (d.units < 1) return cnnb_graph_reject(&s, CNNB_EINVAL, "units %d must be >= 1", d.units);
  cnnb_shape in = shape_of(g, x);
  int64_t k = (int64_t)in.c * in.h * in.w; /* the input, flattened per image */
  if (k > INT32_MAX)
    return cnnb_graph_reject(&s, CNNB_EINVAL, "input [%d, %d, %d, %d] flattens to %lld features, "
                             "more than a weight dimension holds", in.n, in.c, in.h, in.w,
                             (long long)k);
  cnnb_node n = {.shape = {in.n, d.units, 1, 1}};
  n.attr.dense.units = d.units;
  n.attr.dense.use_bias = d.use_bias ? 1 : 0;
  cnnb_tensor t = cnnb_graph_finish(&s, &n, 1, &x);
  if (t == CNNB_NO_TENSOR) return t;
  /* tf_cnn_benchmarks' affine(): truncated normal with stddev sqrt(1 / K). */
  cnnb_init winit = d.weight_init;
  if (winit.kind == CNNB_INIT_DEFAULT)
    winit = (cnnb_init){CNNB_INIT_TRUNCATED_NORMAL, (float)sqrt(1.0 / (double)k)};
  const int32_t wdims[2] = {d.units, (int32_t)k};
  if (!cnnb_graph_add_param(g, t, "kernel", 0, 0, 2, wdims, winit)) return CNNB_NO_TENSOR;
  if (d.use_bias &&
      !cnnb_graph_add_param(g, t, "bias", 0, 0, 1, &d.units,
                            (cnnb_init){CNNB_INIT_CONSTANT, d.bias_init}))
    return CNNB_NO_TENSOR;
  return t;
}

cnnb_tensor cnnb_dropout(cnnb_graph *g, const char *name, cnnb_tensor x, float keep_prob) {
  cnnb_node_start s;
  if (!cnnb_graph_start(&s, g, CNNB_OP_DROPOUT, "dropout", name, 1, &x)) return CNNB_NO_TENSOR;
  if (!(keep_prob > 0.0f && keep_prob <= 1.0f))
    return cnnb_graph_reject(&s, CNNB_EINVAL, "keep_prob %g must be in (0, 1]", (double)keep_prob);
  cnnb_node n = {.shape = shape_of(g, x)};
  n.attr.dropout.keep_prob = keep_prob;
  return cnnb_graph_finish(&s, &n, 1, &x);
}

/* ---- joins and reshapes ------------------------------------------------------------------ */

cnnb_tensor cnnb_concat(cnnb_graph *g, const char *name, int32_t count, const cnnb_tensor *xs) {
  cnnb_node_start s;
  if (count < 1) {
    /* Start with no inputs so the error still names the node. */
    if (cnnb_graph_start(&s, g, CNNB_OP_CONCAT, "concat", name, 0, NULL))
      cnnb_graph_reject(&s, CNNB_EINVAL, "count %d must be >= 1", count);
    return CNNB_NO_TENSOR;
  }
  if (!cnnb_graph_start(&s, g, CNNB_OP_CONCAT, "concat", name, count, xs)) return CNNB_NO_TENSOR;
  cnnb_shape first = shape_of(g, xs[0]);
  int64_t channels = 0;
  for (int32_t i = 0; i < count; i++) {
    cnnb_shape si = shape_of(g, xs[i]);
    if (si.n != first.n || si.h != first.h || si.w != first.w)
      return cnnb_graph_reject(&s, CNNB_EINVAL,
                               "input %d '%s' is [%d, %d, %d, %d] but input 0 '%s' is [%d, %d, %d, %d]: "
                               "concat needs equal N, H, W",
                               (int)i, g->nodes[xs[i]]->name, si.n, si.c, si.h, si.w,
                               g->nodes[xs[0]]->name, first.n, first.c, first.h, first.w);
    channels += si.c;
  }
  if (channels > INT32_MAX)
    return cnnb_graph_reject(&s, CNNB_EINVAL, "%lld channels in all", (long long)channels);
  return cnnb_graph_finish(&s, &(cnnb_node){.shape = {first.n, (int32_t)channels, first.h, first.w}},
                           count, xs);
}

/* tf.pad of zeros on the channel axis alone: the CIFAR ResNets' "plan A" shortcut pads
 * the pooled input to the block's depth. A node of its own rather than a concat with a
 * constant: the graph has no constants, and devices can keep it free of parameters. */
cnnb_tensor cnnb_pad_channels(cnnb_graph *g, const char *name, cnnb_tensor x, int32_t before,
                              int32_t after) {
  cnnb_node_start s;
  if (!cnnb_graph_start(&s, g, CNNB_OP_PAD_CHANNELS, "pad_channels", name, 1, &x))
    return CNNB_NO_TENSOR;
  cnnb_shape in = shape_of(g, x);
  if (before < 0 || after < 0)
    return cnnb_graph_reject(&s, CNNB_EINVAL,
                             "pads %d, %d (before, after) must be >= 0; input is [%d, %d, %d, %d]",
                             before, after, in.n, in.c, in.h, in.w);
  int64_t channels = (int64_t)before + in.c + after;
  if (channels > INT32_MAX)
    return cnnb_graph_reject(&s, CNNB_EINVAL, "%lld channels after padding [%d, %d, %d, %d] by %d, %d",
                             (long long)channels, in.n, in.c, in.h, in.w, before, after);
  cnnb_node n = {.shape = {in.n, (int32_t)channels, in.h, in.w}};
  n.attr.pad.before = before;
  n.attr.pad.after = after;
  return cnnb_graph_finish(&s, &n, 1, &x);
}

cnnb_tensor cnnb_add(cnnb_graph *g, const char *name, cnnb_tensor a, cnnb_tensor b) {
  cnnb_node_start s;
  const cnnb_tensor in[2] = {a, b};
  if (!cnnb_graph_start(&s, g, CNNB_OP_ADD, "add", name, 2, in)) return CNNB_NO_TENSOR;
  cnnb_shape sa = shape_of(g, a), sb = shape_of(g, b);
  if (sa.n != sb.n || sa.c != sb.c || sa.h != sb.h || sa.w != sb.w)
    return cnnb_graph_reject(&s, CNNB_EINVAL,
                             "'%s' is [%d, %d, %d, %d] but '%s' is [%d, %d, %d, %d]: add needs equal shapes",
                             g->nodes[a]->name, sa.n, sa.c, sa.h, sa.w, g->nodes[b]->name, sb.n,
                             sb.c, sb.h, sb.w);
  return cnnb_graph_finish(&s, &(cnnb_node){.shape = sa}, 2, in);
}

static cnnb_tensor reshape(cnnb_graph *g, const char *auto_base, const char *name, cnnb_tensor x,
                           int32_t c, int32_t h, int32_t w, bool flatten) {
  cnnb_node_start s;
  if (!cnnb_graph_start(&s, g, CNNB_OP_RESHAPE, auto_base, name, 1, &x)) return CNNB_NO_TENSOR;
  cnnb_shape in = shape_of(g, x);
  int64_t per_image = (int64_t)in.c * in.h * in.w;
  if (flatten) {
    if (per_image > INT32_MAX)
      return cnnb_graph_reject(&s, CNNB_EINVAL, "input [%d, %d, %d, %d] has too many features",
                               in.n, in.c, in.h, in.w);
    c = (int32_t)per_image, h = 1, w = 1;
  }
  if (c < 1 || h < 1 || w < 1)
    return cnnb_graph_reject(&s, CNNB_EINVAL, "target [%d, %d, %d] (C, H, W) needs every dimension >= 1",
                             c, h, w);
  if ((int64_t)c * h * w != per_image)
    return cnnb_graph_reject(&s, CNNB_EINVAL,
                             "input [%d, %d, %d, %d] has %lld elements per image, target [%d, %d, %d, %d] "
                             "has %lld",
                             in.n, in.c, in.h, in.w, (long long)per_image, in.n, c, h, w,
                             (long long)c * h * w);
  return cnnb_graph_finish(&s, &(cnnb_node){.shape = {in.n, c, h, w}}, 1, &x);
}

cnnb_tensor cnnb_reshape(cnnb_graph *g, const char *name, cnnb_tensor x, int32_t c, int32_t h,
                         int32_t w) {
  return reshape(g, "reshape", name, x, c, h, w, false);
}

cnnb_tensor cnnb_flatten(cnnb_graph *g, const char *name, cnnb_tensor x) {
  return reshape(g, "flatten", name, x, 0, 0, 0, true);
}
