/* op_table.c — the op table (op_table.h): one row per graph op, at the end of the file,
 * and above the rows, a section per op with the rules that need code: its shape
 * inference with TensorFlow's rules and its checks (every refusal names the shapes
 * involved; the builder adds the node's name), the parameters it owns with their
 * tf_cnn_benchmarks default initializers, and its forward FLOPs under model_info.h's
 * counting rules.
 *
 * TF's window arithmetic (conv2d and the pools) lives in op_window.c. */
#include "graph/op_table.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include <cnnb/device.h>
#include "graph/op_window.h"

bool cnnb_op_refuse(cnnb_op_request *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->error, sizeof r->error, fmt, ap);
  va_end(ap);
  return false;
}

/* The rules read their inputs only from the request (the builder fills it), so the op
 * table depends on no part of the graph: it is the lowest file of the room. */
static cnnb_shape input_shape(const cnnb_op_request *r, int32_t k) { return r->input_shapes[k]; }

/* Per image: the elements of one image's slice of a shape. */
static int64_t per_image(cnnb_shape s) { return (int64_t)s.c * s.h * s.w; }

/* Data movement only: input, labels, concat, pad_channels, pad_spatial, reshape. */
static void flops_none(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {}

/* ---- shared shape rules ------------------------------------------------------------- */

/* input and labels: the host gives the shape (the graph's geometry). */
static bool infer_given(cnnb_op_request *r) { return true; }

/* Elementwise on one input: the input's shape. */
static bool infer_same(cnnb_op_request *r) {
  r->node.shape = input_shape(r, 0);
  return true;
}

/* ---- conv2d --------------------------------------------------------------------------- */

static bool infer_conv(cnnb_op_request *r) {
  cnnb_shape in = input_shape(r, 0);
  const int32_t filters = r->node.attr.window.filters, groups = r->node.attr.window.groups;
  if (filters < 1) return cnnb_op_refuse(r, "filters %d must be >= 1", filters);
  if (groups < 1) return cnnb_op_refuse(r, "groups %d must be >= 1", groups);
  if (in.c % groups != 0 || filters % groups != 0)
    return cnnb_op_refuse(r,
                          "groups %d must divide both input channels %d and filters %d "
                          "(input [%d, %d, %d, %d])",
                          groups, in.c, filters, in.n, in.c, in.h, in.w);
  if (r->linear_kernel != 0 && r->linear_kernel != 1)
    return cnnb_op_refuse(r, "linear_kernel %d must be 0 or 1", (int)r->linear_kernel);
  if (r->linear_kernel &&
      (r->node.attr.window.kernel_h != 1 || r->node.attr.window.kernel_w != 1 || groups != 1))
    return cnnb_op_refuse(r,
                          "linear_kernel needs a 1x1 kernel without groups (nn.Linear's [O, I]), "
                          "not %dx%d with %d groups",
                          r->node.attr.window.kernel_h, r->node.attr.window.kernel_w, groups);
  if (!cnnb_window_resolve(&r->node, r->padding, in, "filter", r->error, sizeof r->error))
    return false;
  r->node.shape.c = filters;
  return true;
}

static int32_t params_conv(const cnnb_op_request *r, cnnb_op_param out[CNNB_OP_MAX_PARAMS]) {
  const cnnb_shape in = input_shape(r, 0);
  const int32_t filters = r->node.attr.window.filters;
  /* tf_cnn_benchmarks' conv(): variance scaling (TF default) unless told otherwise. */
  cnnb_init kinit = r->init[0];
  if (kinit.kind == CNNB_INIT_DEFAULT) kinit = (cnnb_init){CNNB_INIT_VARIANCE_SCALING, 1.0f};
  out[0] = (cnnb_op_param){"kernel",
                           "weight",
                           0,
                           0,
                           4,
                           {filters, in.c / r->node.attr.window.groups,
                            r->node.attr.window.kernel_h, r->node.attr.window.kernel_w},
                           kinit};
  if (r->linear_kernel) out[0].ndims = 2; /* [O, I]: the same values as [O, I, 1, 1] */
  if (!r->node.attr.window.use_bias) return 1;
  out[1] = (cnnb_op_param){"bias", "bias", 0, 0, 1, {filters}, r->init[1]};
  return 2;
}

static void flops_conv(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  int64_t out = per_image(n->shape);
  int64_t cin_per_group = in.c / (n->attr.window.groups > 0 ? n->attr.window.groups : 1);
  *matmul = 2 * (int64_t)n->attr.window.kernel_h * n->attr.window.kernel_w * cin_per_group * out;
  if (n->attr.window.use_bias) *matmul += out;
  *flops = *matmul;
}

/* ---- batch norm ------------------------------------------------------------------------ */

static bool infer_batch_norm(cnnb_op_request *r) {
  const float epsilon = r->node.attr.batch_norm.epsilon, decay = r->node.attr.batch_norm.decay;
  if (!(epsilon > 0.0f)) return cnnb_op_refuse(r, "epsilon %g must be > 0", (double)epsilon);
  if (!(decay > 0.0f && decay <= 1.0f))
    return cnnb_op_refuse(r, "decay %g must be in (0, 1]", (double)decay);
  r->node.shape = input_shape(r, 0);
  return true;
}

static int32_t params_batch_norm(const cnnb_op_request *r, cnnb_op_param out[CNNB_OP_MAX_PARAMS]) {
  const int32_t c = input_shape(r, 0).c;
  const cnnb_init ones = {CNNB_INIT_CONSTANT, 1.0f}, zeros = {CNNB_INIT_ZEROS, 0.0f};
  int32_t k = 0;
  /* tf_cnn_benchmarks excludes batch norm variables from L2 weight decay. */
  if (r->node.attr.batch_norm.scale)
    out[k++] = (cnnb_op_param){"gamma", "weight", 0, CNNB_PARAM_NO_DECAY, 1, {c}, ones};
  out[k++] = (cnnb_op_param){"beta", "bias", 0, CNNB_PARAM_NO_DECAY, 1, {c}, zeros};
  out[k++] = (cnnb_op_param){"moving_mean", "running_mean", 1, CNNB_PARAM_NO_DECAY, 1, {c}, zeros};
  out[k++] = (cnnb_op_param){
      "moving_variance", "running_var", 1, CNNB_PARAM_NO_DECAY, 1, {c}, ones};
  return k;
}

/* 3 for the batch mean and variance, 2 to normalise, 1 for the offset, 1 for a scale. */
static void flops_batch_norm(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = per_image(n->shape) * (3 + 2 + 1 + (n->attr.batch_norm.scale ? 1 : 0));
}

/* ---- elementwise ------------------------------------------------------------------------ */

static void flops_relu(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = per_image(n->shape); /* max */
}

static void flops_relu6(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = 2 * per_image(n->shape); /* max, then min */
}

/* The activations of ABI 1.14, as the operations of their formulas, exp, erf and tanh
 * counted as one each (model_info.h): sigmoid 1 / (1 + exp(-x)) 4; silu 5; hard_sigmoid
 * relu6(x + 3) / 6 4; hard_swish 5; gelu 0.5 x (1 + erf(x / sqrt 2)) 5, its tanh form
 * 0.5 x (1 + tanh(c (x + 0.044715 x^3))) 9. */
static void flops_sigmoid(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = 4 * per_image(n->shape);
}

static void flops_silu(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = 5 * per_image(n->shape);
}

static void flops_hard_sigmoid(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = 4 * per_image(n->shape);
}

static void flops_hard_swish(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = 5 * per_image(n->shape);
}

static void flops_gelu(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = (n->attr.gelu.tanh ? 9 : 5) * per_image(n->shape);
}

static bool infer_gelu(cnnb_op_request *r) {
  const int32_t tanh = r->node.attr.gelu.tanh;
  if (tanh != 0 && tanh != 1)
    return cnnb_op_refuse(r, "tanh %d must be 0 (the erf form) or 1 (the tanh approximation)",
                          (int)tanh);
  r->node.shape = input_shape(r, 0);
  return true;
}

static bool infer_dropout(cnnb_op_request *r) {
  const float keep_prob = r->node.attr.dropout.keep_prob;
  if (!(keep_prob > 0.0f && keep_prob <= 1.0f))
    return cnnb_op_refuse(r, "keep_prob %g must be in (0, 1]", (double)keep_prob);
  r->node.shape = input_shape(r, 0);
  return true;
}

static bool infer_stochastic_depth(cnnb_op_request *r) {
  const float p = r->node.attr.stochastic_depth.drop_prob;
  if (!(p >= 0.0f && p <= 1.0f))
    return cnnb_op_refuse(r, "drop_prob %g must be in [0, 1]", (double)p);
  r->node.shape = input_shape(r, 0);
  return true;
}

static void flops_dropout(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = 2 * per_image(n->shape); /* mask compare, scale */
}

static bool infer_add(cnnb_op_request *r) {
  cnnb_shape sa = input_shape(r, 0), sb = input_shape(r, 1);
  if (sa.n != sb.n || sa.c != sb.c || sa.h != sb.h || sa.w != sb.w)
    return cnnb_op_refuse(
        r, "'%s' is [%d, %d, %d, %d] but '%s' is [%d, %d, %d, %d]: add needs equal shapes",
        r->input_names[0], sa.n, sa.c, sa.h, sa.w, r->input_names[1], sb.n, sb.c, sb.h, sb.w);
  r->node.shape = sa;
  return true;
}

static void flops_add(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = per_image(n->shape);
}

/* ---- multiply, layer norm, channel scale (1.14) -------------------------------------------- */

/* The gate has x's shape, or one value per image and channel. */
static bool infer_multiply(cnnb_op_request *r) {
  cnnb_shape sa = input_shape(r, 0), sb = input_shape(r, 1);
  const bool same = sb.n == sa.n && sb.c == sa.c && sb.h == sa.h && sb.w == sa.w;
  const bool per_channel = sb.n == sa.n && sb.c == sa.c && sb.h == 1 && sb.w == 1;
  if (!same && !per_channel)
    return cnnb_op_refuse(r,
                          "'%s' is [%d, %d, %d, %d] but '%s' is [%d, %d, %d, %d]: multiply needs "
                          "the second of the first's shape or [%d, %d, 1, 1]",
                          r->input_names[0], sa.n, sa.c, sa.h, sa.w, r->input_names[1], sb.n, sb.c,
                          sb.h, sb.w, sa.n, sa.c);
  r->node.shape = sa;
  return true;
}

static void flops_multiply(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = per_image(n->shape);
}

static bool infer_layer_norm(cnnb_op_request *r) {
  const float epsilon = r->node.attr.layer_norm.epsilon;
  if (!(epsilon > 0.0f) || !isfinite(epsilon))
    return cnnb_op_refuse(r, "epsilon %g must be > 0 (torch's default is 1e-5)", (double)epsilon);
  r->node.shape = input_shape(r, 0);
  return true;
}

/* Excluded from weight decay as batch norm's are (torchvision's norm_weight_decay). */
static int32_t params_layer_norm(const cnnb_op_request *r, cnnb_op_param out[CNNB_OP_MAX_PARAMS]) {
  const int32_t c = input_shape(r, 0).c;
  const cnnb_init ones = {CNNB_INIT_CONSTANT, 1.0f}, zeros = {CNNB_INIT_ZEROS, 0.0f};
  out[0] = (cnnb_op_param){"gamma", "weight", 0, CNNB_PARAM_NO_DECAY, 1, {c}, ones};
  out[1] = (cnnb_op_param){"beta", "bias", 0, CNNB_PARAM_NO_DECAY, 1, {c}, zeros};
  return 2;
}

/* Per element: 2 for the mean and variance sums, 2 to normalise, 2 to scale and offset. */
static void flops_layer_norm(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = 6 * per_image(n->shape);
}

/* torchvision's CNBlock: nn.Parameter(torch.ones(dim, 1, 1) * layer_scale), its shape kept
 * so the checkpoint loads there as it is. */
static int32_t params_channel_scale(const cnnb_op_request *r,
                                    cnnb_op_param out[CNNB_OP_MAX_PARAMS]) {
  const int32_t c = input_shape(r, 0).c;
  out[0] = (cnnb_op_param){"scale", "layer_scale", 0, 0, 3, {c, 1, 1}, r->init[0]};
  return 1;
}

static void flops_channel_scale(cnnb_shape in, const cnnb_node *n, int64_t *flops,
                                int64_t *matmul) {
  *flops = per_image(n->shape);
}

/* ---- slice_channels, channel_shuffle (1.14) ------------------------------------------------ */

static bool infer_slice_channels(cnnb_op_request *r) {
  cnnb_shape in = input_shape(r, 0);
  const int32_t begin = r->node.attr.slice.begin, count = r->node.attr.slice.count;
  if (begin < 0 || count < 1 || (int64_t)begin + count > in.c)
    return cnnb_op_refuse(r,
                          "channels [%d, %d) (begin %d, count %d) do not lie inside the input's "
                          "%d (input [%d, %d, %d, %d])",
                          begin, (int)((int64_t)begin + count), begin, count, in.c, in.n, in.c,
                          in.h, in.w);
  r->node.shape = (cnnb_shape){in.n, count, in.h, in.w};
  return true;
}

static bool infer_channel_shuffle(cnnb_op_request *r) {
  cnnb_shape in = input_shape(r, 0);
  const int32_t groups = r->node.attr.shuffle.groups;
  if (groups < 1 || in.c % groups != 0)
    return cnnb_op_refuse(r, "groups %d must be >= 1 and divide the input's %d channels", groups,
                          in.c);
  r->node.shape = in;
  return true;
}

/* ---- pooling and LRN --------------------------------------------------------------------- */

/* torch's ceil_mode along one side: `out` windows (rounded down) become
 * ceil((in + before + after - k) / s) + 1, less one when that last window would start past
 * the input and its `before` padding; *after grows by the part of it that hangs past. */
static void round_up_windows(int32_t in, int32_t k, int32_t s, int32_t before, int32_t *after,
                             int32_t *out) {
  int32_t span = in + before + *after - k;
  int32_t up = (span + s - 1) / s + 1;
  if ((int64_t)(up - 1) * s >= (int64_t)in + before) up--;
  int32_t overhang = (up - 1) * s + k - (in + before + *after);
  if (up > *out && overhang > 0) {
    *after += overhang;
    *out = up;
  }
}

static bool infer_pool(cnnb_op_request *r) {
  if (r->ceil_mode != 0 && r->ceil_mode != 1)
    return cnnb_op_refuse(r, "ceil_mode %d must be 0 or 1", (int)r->ceil_mode);
  if (r->ceil_mode && r->padding == CNNB_PAD_SAME)
    return cnnb_op_refuse(r, "ceil_mode with SAME padding: SAME already sizes the output as "
                             "ceil(in / stride); give VALID or EXPLICIT pads");
  if (!cnnb_window_resolve(&r->node, r->padding, input_shape(r, 0), "window", r->error,
                           sizeof r->error))
    return false;
  if (r->ceil_mode) {
    cnnb_shape in = input_shape(r, 0);
    round_up_windows(in.h, r->node.attr.window.kernel_h, r->node.attr.window.stride_h,
                     r->node.attr.window.pad_top, &r->node.attr.window.pad_bottom,
                     &r->node.shape.h);
    round_up_windows(in.w, r->node.attr.window.kernel_w, r->node.attr.window.stride_w,
                     r->node.attr.window.pad_left, &r->node.attr.window.pad_right,
                     &r->node.shape.w);
  }
  return true;
}

static void flops_max_pool(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = per_image(n->shape) * n->attr.window.kernel_h * n->attr.window.kernel_w;
}

static void flops_avg_pool(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = per_image(n->shape) * ((int64_t)n->attr.window.kernel_h * n->attr.window.kernel_w + 1);
}

/* Described as the window it is, for devices that run it as an ordinary avg pool. */
static bool infer_global_avg_pool(cnnb_op_request *r) {
  cnnb_shape in = input_shape(r, 0);
  r->node.shape = (cnnb_shape){in.n, in.c, 1, 1};
  r->node.attr.window.kernel_h = in.h;
  r->node.attr.window.kernel_w = in.w;
  r->node.attr.window.stride_h = r->node.attr.window.stride_w = 1;
  r->node.attr.window.dilation_h = r->node.attr.window.dilation_w = 1;
  r->node.attr.window.groups = 1;
  return true;
}

static void flops_global_avg_pool(cnnb_shape in, const cnnb_node *n, int64_t *flops,
                                  int64_t *matmul) {
  *flops = (int64_t)in.c * ((int64_t)in.h * in.w + 1);
}

static bool infer_lrn(cnnb_op_request *r) {
  const int32_t radius = r->node.attr.lrn.depth_radius;
  const float bias = r->node.attr.lrn.bias, alpha = r->node.attr.lrn.alpha,
              beta = r->node.attr.lrn.beta;
  if (radius < 0) return cnnb_op_refuse(r, "depth_radius %d must be >= 0", radius);
  /* bias 0 with alpha 0 divides by zero; a negative base has no real power. */
  if (bias < 0.0f || alpha < 0.0f || !(bias > 0.0f || alpha > 0.0f) || !isfinite(beta))
    return cnnb_op_refuse(r, "bias %g, alpha %g, beta %g: need bias, alpha >= 0, not both 0",
                          (double)bias, (double)alpha, (double)beta);
  r->node.shape = input_shape(r, 0);
  return true;
}

/* The window's squares and sums, then alpha, bias, pow and divide. */
static void flops_lrn(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = per_image(n->shape) * (2 * (2 * (int64_t)n->attr.lrn.depth_radius + 1) + 4);
}

/* ---- dense ---------------------------------------------------------------------------------- */

static bool infer_dense(cnnb_op_request *r) {
  const int32_t units = r->node.attr.dense.units;
  if (units < 1) return cnnb_op_refuse(r, "units %d must be >= 1", units);
  cnnb_shape in = input_shape(r, 0);
  int64_t k = per_image(in); /* the input, flattened per image */
  if (k > INT32_MAX)
    return cnnb_op_refuse(r,
                          "input [%d, %d, %d, %d] flattens to %lld features, "
                          "more than a weight dimension holds",
                          in.n, in.c, in.h, in.w, (long long)k);
  r->node.shape = (cnnb_shape){in.n, units, 1, 1};
  return true;
}

static int32_t params_dense(const cnnb_op_request *r, cnnb_op_param out[CNNB_OP_MAX_PARAMS]) {
  const int32_t units = r->node.attr.dense.units;
  const int32_t k = (int32_t)per_image(input_shape(r, 0)); /* infer_dense checked it fits */
  /* tf_cnn_benchmarks' affine(): truncated normal with stddev sqrt(1 / K). */
  cnnb_init winit = r->init[0];
  if (winit.kind == CNNB_INIT_DEFAULT)
    winit = (cnnb_init){CNNB_INIT_TRUNCATED_NORMAL, (float)sqrt(1.0 / (double)k)};
  out[0] = (cnnb_op_param){"kernel", "weight", 0, 0, 2, {units, k}, winit};
  if (!r->node.attr.dense.use_bias) return 1;
  out[1] = (cnnb_op_param){"bias", "bias", 0, 0, 1, {units}, r->init[1]};
  return 2;
}

static void flops_dense(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  int64_t k = per_image(in);
  *matmul = 2 * k * n->attr.dense.units;
  if (n->attr.dense.use_bias) *matmul += n->attr.dense.units;
  *flops = *matmul;
}

/* ---- joins and reshapes ---------------------------------------------------------------------- */

static bool infer_concat(cnnb_op_request *r) {
  cnnb_shape first = input_shape(r, 0);
  int64_t channels = 0;
  for (int32_t i = 0; i < r->num_inputs; i++) {
    cnnb_shape si = input_shape(r, i);
    if (si.n != first.n || si.h != first.h || si.w != first.w)
      return cnnb_op_refuse(
          r,
          "input %d '%s' is [%d, %d, %d, %d] but input 0 '%s' is [%d, %d, %d, %d]: "
          "concat needs equal N, H, W",
          (int)i, r->input_names[i], si.n, si.c, si.h, si.w, r->input_names[0], first.n, first.c,
          first.h, first.w);
    channels += si.c;
  }
  if (channels > INT32_MAX) return cnnb_op_refuse(r, "%lld channels in all", (long long)channels);
  r->node.shape = (cnnb_shape){first.n, (int32_t)channels, first.h, first.w};
  return true;
}

/* tf.pad of zeros on the channel axis alone: the CIFAR ResNets' "plan A" shortcut pads
 * the pooled input to the block's depth. A node of its own rather than a concat with a
 * constant: the graph has no constants, and devices can keep it free of parameters. */
static bool infer_pad_channels(cnnb_op_request *r) {
  cnnb_shape in = input_shape(r, 0);
  const int32_t before = r->node.attr.pad.before, after = r->node.attr.pad.after;
  if (before < 0 || after < 0)
    return cnnb_op_refuse(r, "pads %d, %d (before, after) must be >= 0; input is [%d, %d, %d, %d]",
                          before, after, in.n, in.c, in.h, in.w);
  int64_t channels = (int64_t)before + in.c + after;
  if (channels > INT32_MAX)
    return cnnb_op_refuse(r, "%lld channels after padding [%d, %d, %d, %d] by %d, %d",
                          (long long)channels, in.n, in.c, in.h, in.w, before, after);
  r->node.shape = (cnnb_shape){in.n, (int32_t)channels, in.h, in.w};
  return true;
}

/* tf.pad of zeros on H and W, or a slice where an amount is negative: NASNet's factorized
 * reduction shifts its second path by one pixel (pad bottom/right, cut top/left). */
static bool infer_pad_spatial(cnnb_op_request *r) {
  cnnb_shape in = input_shape(r, 0);
  const int32_t top = r->node.attr.pad_spatial.top, bottom = r->node.attr.pad_spatial.bottom;
  const int32_t left = r->node.attr.pad_spatial.left, right = r->node.attr.pad_spatial.right;
  int64_t h = (int64_t)top + in.h + bottom, w = (int64_t)left + in.w + right;
  if (h < 1 || w < 1 || h > INT32_MAX || w > INT32_MAX)
    return cnnb_op_refuse(r,
                          "pads %d, %d, %d, %d (top, bottom, left, right) take [%d, %d, %d, %d] "
                          "to %lld x %lld pixels; the output needs 1 to %d rows and columns",
                          top, bottom, left, right, in.n, in.c, in.h, in.w, (long long)h,
                          (long long)w, INT32_MAX);
  r->node.shape = (cnnb_shape){in.n, in.c, (int32_t)h, (int32_t)w};
  return true;
}

static bool infer_reshape(cnnb_op_request *r) {
  cnnb_shape in = input_shape(r, 0);
  int64_t per = per_image(in);
  int32_t c = r->node.shape.c, h = r->node.shape.h, w = r->node.shape.w;
  if (r->flatten) {
    if (per > INT32_MAX)
      return cnnb_op_refuse(r, "input [%d, %d, %d, %d] has too many features", in.n, in.c, in.h,
                            in.w);
    c = (int32_t)per, h = 1, w = 1;
  }
  if (c < 1 || h < 1 || w < 1)
    return cnnb_op_refuse(r, "target [%d, %d, %d] (C, H, W) needs every dimension >= 1", c, h, w);
  if ((int64_t)c * h * w != per)
    return cnnb_op_refuse(
        r, "input [%d, %d, %d, %d] has %lld elements per image, target [%d, %d, %d, %d] has %lld",
        in.n, in.c, in.h, in.w, (long long)per, in.n, c, h, w, (long long)c * h * w);
  r->node.shape = (cnnb_shape){in.n, c, h, w};
  return true;
}

/* ---- the loss ------------------------------------------------------------------------------ */

/* Inputs: logits [N, K, 1, 1] (cnnb_graph_set_logits checked them), labels. */
static bool infer_softmax_xent(cnnb_op_request *r) {
  r->node.shape = (cnnb_shape){1, 1, 1, 1}; /* the mean over the batch */
  return true;
}

/* Per logit: max, subtract, exp, sum; then one log. */
static void flops_softmax_xent(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = 4 * per_image(in) + 1;
}

/* ---- the table ---------------------------------------------------------------------------- */

/* One row per op, in op code order. Inputs are {min, max}; what backward reads is the
 * input bits and then the output. */
static const cnnb_op_row rows[CNNB_OP_COUNT_] = {
    [CNNB_OP_INPUT] =
        {
            .op = CNNB_OP_INPUT,
            .name = "input",
            .since_minor = 0,
            .min_inputs = 0,
            .max_inputs = 0,
            .infer = infer_given,
            .flops = flops_none,
            .backward_output = CNNB_OP_OUTPUT_UNREAD, /* filled by the executor: no backward */
        },
    [CNNB_OP_LABELS] =
        {
            .op = CNNB_OP_LABELS,
            .name = "labels",
            .since_minor = 0,
            .min_inputs = 0,
            .max_inputs = 0,
            .infer = infer_given,
            .flops = flops_none,
            .backward_output = CNNB_OP_OUTPUT_UNREAD,
            .hidden = true, /* the loss reads it, no layer does */
        },
    [CNNB_OP_CONV2D] =
        {
            .op = CNNB_OP_CONV2D,
            .name = "conv2d",
            .since_minor = 0,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_conv,
            .params = params_conv,
            .flops = flops_conv,
            /* Weight gradients need the input; backward-data needs only weights and dy. A
             * fused ReLU masks dy by the output's sign inside the node. */
            .backward_inputs = 1u,
            .backward_output = CNNB_OP_OUTPUT_READ_IF_FUSED,
            .fuse_relu = true,
        },
    [CNNB_OP_BATCH_NORM] =
        {
            .op = CNNB_OP_BATCH_NORM,
            .name = "batch_norm",
            .since_minor = 0,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_batch_norm,
            .params = params_batch_norm,
            .flops = flops_batch_norm,
            /* Batch statistics are saved inside the device's node state, but dx and the
             * scale/offset gradients still need x itself. */
            .backward_inputs = 1u,
            .backward_output = CNNB_OP_OUTPUT_READ_IF_FUSED,
            .fuse_relu = true,
        },
    [CNNB_OP_RELU] =
        {
            .op = CNNB_OP_RELU,
            .name = "relu",
            .since_minor = 0,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_same,
            .flops = flops_relu,
            /* dy * (y > 0): devices use the output form (oneDNN use_dst_for_bwd). */
            .backward_output = CNNB_OP_OUTPUT_READ,
        },
    [CNNB_OP_MAX_POOL] =
        {
            .op = CNNB_OP_MAX_POOL,
            .name = "max_pool",
            .since_minor = 0,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_pool,
            .flops = flops_max_pool,
            /* Re-derives where the maximum came from; keeping both sides stays correct
             * whether a device keeps a workspace or recomputes. */
            .backward_inputs = 1u,
            .backward_output = CNNB_OP_OUTPUT_READ,
        },
    [CNNB_OP_AVG_POOL] =
        {
            .op = CNNB_OP_AVG_POOL,
            .name = "avg_pool",
            .since_minor = 0,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_pool,
            .flops = flops_avg_pool,
            .backward_output = CNNB_OP_OUTPUT_UNREAD, /* shapes alone are enough */
        },
    [CNNB_OP_GLOBAL_AVG_POOL] =
        {
            .op = CNNB_OP_GLOBAL_AVG_POOL,
            .name = "global_avg_pool",
            .since_minor = 0,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_global_avg_pool,
            .flops = flops_global_avg_pool,
            .backward_output = CNNB_OP_OUTPUT_UNREAD,
        },
    [CNNB_OP_LRN] =
        {
            .op = CNNB_OP_LRN,
            .name = "lrn",
            .since_minor = 0,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_lrn,
            .flops = flops_lrn,
            /* Re-derives its normaliser, as max pool its maximum: keep both sides. */
            .backward_inputs = 1u,
            .backward_output = CNNB_OP_OUTPUT_READ,
        },
    [CNNB_OP_DENSE] =
        {
            .op = CNNB_OP_DENSE,
            .name = "dense",
            .since_minor = 0,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_dense,
            .params = params_dense,
            .flops = flops_dense,
            /* As conv2d: weight gradients need the input. */
            .backward_inputs = 1u,
            .backward_output = CNNB_OP_OUTPUT_READ_IF_FUSED,
        },
    [CNNB_OP_DROPOUT] =
        {
            .op = CNNB_OP_DROPOUT,
            .name = "dropout",
            .since_minor = 0,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_dropout,
            .flops = flops_dropout,
            .backward_output =
                CNNB_OP_OUTPUT_UNREAD, /* the mask lives in the device's node state */
        },
    [CNNB_OP_CONCAT] =
        {
            .op = CNNB_OP_CONCAT,
            .name = "concat",
            .since_minor = 0,
            .min_inputs = 1,
            .max_inputs = INT32_MAX,
            .infer = infer_concat,
            .flops = flops_none,
            .backward_output = CNNB_OP_OUTPUT_UNREAD,
        },
    [CNNB_OP_ADD] =
        {
            .op = CNNB_OP_ADD,
            .name = "add",
            .since_minor = 0,
            .min_inputs = 2,
            .max_inputs = 2,
            .infer = infer_add,
            .flops = flops_add,
            /* Shapes alone, unless a fused ReLU masks dy by the output's sign. */
            .backward_output = CNNB_OP_OUTPUT_READ_IF_FUSED,
            /* The residual add + ReLU of ResNets; 1.0 devices apply fused_relu to conv2d and
             * batch norm only, so a device must say it does this one. */
            .fuse_relu = true,
            .fuse_relu_ext = CNNB_EXT_FUSED_RELU_ADD,
        },
    [CNNB_OP_RESHAPE] =
        {
            .op = CNNB_OP_RESHAPE,
            .name = "reshape",
            .since_minor = 0,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_reshape,
            .flops = flops_none,
            .backward_output = CNNB_OP_OUTPUT_UNREAD,
        },
    [CNNB_OP_SOFTMAX_XENT] =
        {
            .op = CNNB_OP_SOFTMAX_XENT,
            .name = "softmax_xent",
            .since_minor = 0,
            .min_inputs = 2,
            .max_inputs = 2,
            .infer = infer_softmax_xent,
            .flops = flops_softmax_xent,
            /* The device keeps the softmax; softmax - onehot(labels) still needs the labels,
             * and they are a few bytes: keep them rather than trust a device to copy them. */
            .backward_inputs = 2u,
            .backward_output = CNNB_OP_OUTPUT_UNREAD,
            .hidden = true,
            .scalar_output = true,
        },
    /* Its own op, not a relu with an attribute: the ReLU fusion pass and the alias rule
     * (relu of a fused relu is the identity) match CNNB_OP_RELU only, and must stay blind
     * to the bound: fused_relu means max(x, 0), and oneDNN's fused batch-norm ReLU has no
     * bound either. */
    [CNNB_OP_RELU6] =
        {
            .op = CNNB_OP_RELU6,
            .name = "relu6",
            .since_minor = 1,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_same,
            .flops = flops_relu6,
            /* dy * (0 < y < 6), which is dy * (0 < x < 6): the output decides as well as the
             * input does, so keep the output, as for relu. The input (usually a batch norm's
             * output) is then free once forward has read it, and a device may run it in place
             * (oneDNN clip_v2_use_dst_for_bwd). */
            .backward_output = CNNB_OP_OUTPUT_READ,
        },
    [CNNB_OP_PAD_CHANNELS] =
        {
            .op = CNNB_OP_PAD_CHANNELS,
            .name = "pad_channels",
            .since_minor = 2,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_pad_channels,
            .flops = flops_none,                      /* its zeros are written, not computed */
            .backward_output = CNNB_OP_OUTPUT_UNREAD, /* dx is dy's middle channels */
        },
    [CNNB_OP_PAD_SPATIAL] =
        {
            .op = CNNB_OP_PAD_SPATIAL,
            .name = "pad_spatial",
            .since_minor = CNNB_ABI_MINOR_PAD_SPATIAL,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_pad_spatial,
            .flops = flops_none, /* a copy and zeros */
            /* dx is the part of dy that lies over x (zero where x was cut): shapes alone */
            .backward_output = CNNB_OP_OUTPUT_UNREAD,
        },
    [CNNB_OP_SIGMOID] =
        {
            .op = CNNB_OP_SIGMOID,
            .name = "sigmoid",
            .since_minor = CNNB_ABI_MINOR_ACTIVATIONS,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_same,
            .flops = flops_sigmoid,
            .backward_output = CNNB_OP_OUTPUT_READ, /* dy * y (1 - y) */
        },
    /* silu, hard_swish and gelu differentiate from their input: dy * f'(x). */
    [CNNB_OP_SILU] =
        {
            .op = CNNB_OP_SILU,
            .name = "silu",
            .since_minor = CNNB_ABI_MINOR_ACTIVATIONS,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_same,
            .flops = flops_silu,
            .backward_inputs = 1u,
            .backward_output = CNNB_OP_OUTPUT_UNREAD,
        },
    [CNNB_OP_HARD_SIGMOID] =
        {
            .op = CNNB_OP_HARD_SIGMOID,
            .name = "hard_sigmoid",
            .since_minor = CNNB_ABI_MINOR_ACTIVATIONS,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_same,
            .flops = flops_hard_sigmoid,
            /* dy / 6 where 0 < y < 1, which is -3 < x < 3: the output decides */
            .backward_output = CNNB_OP_OUTPUT_READ,
        },
    [CNNB_OP_HARD_SWISH] =
        {
            .op = CNNB_OP_HARD_SWISH,
            .name = "hard_swish",
            .since_minor = CNNB_ABI_MINOR_ACTIVATIONS,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_same,
            .flops = flops_hard_swish,
            .backward_inputs = 1u,
            .backward_output = CNNB_OP_OUTPUT_UNREAD,
        },
    [CNNB_OP_GELU] =
        {
            .op = CNNB_OP_GELU,
            .name = "gelu",
            .since_minor = CNNB_ABI_MINOR_ACTIVATIONS,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_gelu,
            .flops = flops_gelu,
            .backward_inputs = 1u,
            .backward_output = CNNB_OP_OUTPUT_UNREAD,
        },
    [CNNB_OP_STOCHASTIC_DEPTH] =
        {
            .op = CNNB_OP_STOCHASTIC_DEPTH,
            .name = "stochastic_depth",
            .since_minor = CNNB_ABI_MINOR_ACTIVATIONS,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_stochastic_depth,
            .flops = flops_dropout,                   /* a mask and a scale, as dropout's */
            .backward_output = CNNB_OP_OUTPUT_UNREAD, /* the mask is recomputed */
        },
    [CNNB_OP_MULTIPLY] =
        {
            .op = CNNB_OP_MULTIPLY,
            .name = "multiply",
            .since_minor = CNNB_ABI_MINOR_ACTIVATIONS,
            .min_inputs = 2,
            .max_inputs = 2,
            .infer = infer_multiply,
            .flops = flops_multiply,
            .backward_inputs = 3u, /* dx = dy * gate, dgate = dy * x (summed over H, W) */
            .backward_output = CNNB_OP_OUTPUT_UNREAD,
        },
    [CNNB_OP_LAYER_NORM] =
        {
            .op = CNNB_OP_LAYER_NORM,
            .name = "layer_norm",
            .since_minor = CNNB_ABI_MINOR_ACTIVATIONS,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_layer_norm,
            .params = params_layer_norm,
            .flops = flops_layer_norm,
            /* x (with the mean and variance a device keeps from forward) */
            .backward_inputs = 1u,
            .backward_output = CNNB_OP_OUTPUT_UNREAD,
        },
    [CNNB_OP_CHANNEL_SCALE] =
        {
            .op = CNNB_OP_CHANNEL_SCALE,
            .name = "channel_scale",
            .since_minor = CNNB_ABI_MINOR_ACTIVATIONS,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_same,
            .params = params_channel_scale,
            .flops = flops_channel_scale,
            .backward_inputs = 1u, /* dscale = sum of dy * x */
            .backward_output = CNNB_OP_OUTPUT_UNREAD,
        },
    [CNNB_OP_SLICE_CHANNELS] =
        {
            .op = CNNB_OP_SLICE_CHANNELS,
            .name = "slice_channels",
            .since_minor = CNNB_ABI_MINOR_ACTIVATIONS,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_slice_channels,
            .flops = flops_none,                      /* a copy */
            .backward_output = CNNB_OP_OUTPUT_UNREAD, /* dx: dy placed back, zeros around */
        },
    [CNNB_OP_CHANNEL_SHUFFLE] =
        {
            .op = CNNB_OP_CHANNEL_SHUFFLE,
            .name = "channel_shuffle",
            .since_minor = CNNB_ABI_MINOR_ACTIVATIONS,
            .min_inputs = 1,
            .max_inputs = 1,
            .infer = infer_channel_shuffle,
            .flops = flops_none,                      /* a permutation */
            .backward_output = CNNB_OP_OUTPUT_UNREAD, /* dx: dy permuted back */
        },
};

const cnnb_op_row *cnnb_op_row_of(uint32_t op) {
  if (op >= CNNB_OP_COUNT_ || !rows[op].name) return NULL;
  return &rows[op];
}

const char *cnnb_op_name(uint32_t op) {
  const cnnb_op_row *row = cnnb_op_row_of(op);
  return row ? row->name : "unknown";
}

void cnnb_op_flops(cnnb_shape in, const cnnb_node *n, int64_t *flops, int64_t *matmul) {
  *flops = *matmul = 0;
  const cnnb_op_row *row = cnnb_op_row_of(n->op);
  if (!row) return;
  row->flops(in, n, flops, matmul);
  if (n->fused_relu && row->fuse_relu) *flops += per_image(n->shape);
}

void cnnb_op_backward_reads(const cnnb_node *n, uint32_t *inputs, bool *output) {
  const cnnb_op_row *row = cnnb_op_row_of(n->op);
  if (!row) { /* keep everything it could read */
    *inputs = ~0u;
    *output = true;
    return;
  }
  *inputs = row->backward_inputs;
  if (n->num_inputs < 32) *inputs &= (1u << n->num_inputs) - 1u;
  *output = row->backward_output == CNNB_OP_OUTPUT_READ ||
            (row->backward_output == CNNB_OP_OUTPUT_READ_IF_FUSED && n->fused_relu);
}

uint32_t cnnb_ops_relu_fusion(int (*has_ext)(void *user, const char *id), void *user) {
  uint32_t ops = 0;
  for (uint32_t op = 0; op < CNNB_OP_COUNT_ && op < 32; op++) {
    const cnnb_op_row *row = cnnb_op_row_of(op);
    if (!row || !row->fuse_relu) continue;
    if (!row->fuse_relu_ext || (has_ext && has_ext(user, row->fuse_relu_ext))) ops |= 1u << op;
  }
  return ops;
}

int cnnb_ops_every_ext(void *user, const char *id) { return 1; }
