/* ops_conv.c — 2-D convolution on cuDNN: forward, backward data, backward filter, with
 * the graph's strides, explicit pads, dilation and groups (depthwise included), then
 * the bias and a fused ReLU in one pass of our own kernel (gpu_k_bias_relu).
 *
 * Asymmetric pads. cuDNN pads the same amount on both sides of an axis; the graph's
 * pads (TF SAME with stride 2 gives top 0, bottom 1) need not be. Per axis cuDNN gets
 * the smaller pad, p = min(top, bottom), and the input is first copied into a transient
 * buffer grown by the rest: (top - p) zero rows above, (bottom - p) below (likewise
 * left / right). For TF SAME that is the one extra row / column at the bottom / right.
 * The padded input is H + (top - p) + (bottom - p) high and cuDNN pads p on each side,
 * so the windows start at -top relative to the original input, exactly as the graph's,
 * and cuDNN's output height floor((H + top + bottom - KH_dilated) / stride) + 1 is the
 * graph's (checked at prepare). Backward computes dx of the padded input into the
 * transient buffer and crops the original window out of it into the input's gradient
 * (the zero padding's gradient is dropped, as it must be).
 *
 * Channels. Tensor cores take NHWC channels in multiples of 8; the images have 3. A
 * half-precision convolution reading the graph's images with C % 8 != 0 pads them with
 * zero channels up to the next multiple of 8 on the way into cuDNN (the same copy as
 * the spatial padding), and its filter with zero input channels, so cuDNN runs its
 * tensor-core kernels; the zeros add nothing to the output, the padded channels'
 * filter gradient is dropped, and so are their input gradients (the crop back keeps
 * the first C channels; the executor never asks for the images' gradient anyway).
 *
 * Filters. The arena holds fp32 OIHW ([O, I / groups, KH, KW]). The fp32 device hands
 * it to cuDNN as it is (filter format NCHW = OIHW) and writes dW straight into the
 * gradient arena. Half devices convert it each forward into a buffer the node owns
 * (OHWI in fp16 / bf16, filter format NHWC) that backward-data reuses in the same step,
 * and backward-filter writes dW in that form into a second owned buffer, converted
 * into the fp32 arena after.
 *
 * Transient buffers (shared, valid within one call): slot 0 holds dy masked by the fused
 * ReLU; slot 1 the padded input (forward, backward-filter) and then the padded input's
 * gradient (backward-data, after backward-filter has read the padded input: the stream
 * runs them in order). Every write overwrites (cuDNN beta 0), as device.h asks. The bias
 * gradient's partial sums go to a buffer the node owns (bias_scratch), not a transient
 * slot: slot 0 holds the masked dy it reads. */
#include <stdlib.h>
#include <string.h>

#include "conv_algo.h"

typedef struct conv_node {
  gpu_node base;
  int has_bias, fused_relu, training;
  int have_backward_data; /* training: a backward-data algorithm was chosen */
  gpu_conv_key key;
  gpu_conv_descs descs;
  gpu_conv_algo algo[GPU_CONV_DIRS];
  int32_t k, c_per_group, kh, kw; /* the filter [K, C / groups, KH, KW] */
  int32_t c_compute;              /* input channels cuDNN sees: c_per_group, or padded to 8 */

  /* asymmetric pads or padded channels: the input is copied into transient slot 1 first */
  int pre_pad;
  int32_t pre_top, pre_left; /* where the input lies in the padded one */
  gpu_dims in_dims, padded_dims, out_dims;
  int64_t out_count;

  /* half devices only: the filter in the compute layout and type, and its gradient */
  int own_filter;
  void *w_compute;  /* [K, R, S, C / groups] (OHWI) in d->act */
  void *dw_compute; /* the same layout and type */

  /* training with a bias: gpu_k_bias_grad's partial sums (NULL when it needs none) */
  void *bias_scratch;
} conv_node;

static const float one = 1.0f, zero = 0.0f;

/* The input cuDNN reads: the node's input, or padded into transient slot 1. */
static cnnb_status conv_input(gpu_device *d, conv_node *s, const void *x, const void **out) {
  if (!s->pre_pad) {
    *out = x;
    return CNNB_OK;
  }
  void *padded = gpu_transient(d, 1);
  cnnb_status st = gpu_cuda(d,
                            gpu_k_pad_spatial(padded, s->padded_dims, x, s->in_dims, d->act,
                                              s->pre_top, s->pre_left, 0.0f, d->stream),
                            s->base.node, "conv2d input padding");
  *out = padded;
  return st;
}

static cnnb_status conv_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  conv_node *s = (conv_node *)n;
  const cnnb_node *node = n->node;
  cnnb_status st;
  const void *x;
  if ((st = conv_input(d, s, io->inputs[0], &x))) return st;

  const float *arena_w = gpu_param_ptr(n->g, io->params, node->params[0]);
  const void *w = arena_w;
  if (s->own_filter) {
    if ((st = gpu_cuda(d,
                       gpu_k_filter_to_compute(s->w_compute, d->act, d->format == CUDNN_TENSOR_NHWC,
                                               arena_w, s->k, s->c_per_group, s->c_compute, s->kh,
                                               s->kw, d->stream),
                       node, "conv2d filter conversion")))
      return st;
    w = s->w_compute;
  }

  const gpu_conv_algo *a = &s->algo[GPU_CONV_FORWARD];
  if ((st = gpu_cudnn(d,
                      cudnnConvolutionForward(d->cudnn, &one, s->descs.x, x, s->descs.w, w,
                                              s->descs.conv[GPU_CONV_FORWARD],
                                              (cudnnConvolutionFwdAlgo_t)a->algo, d->workspace,
                                              a->workspace, &zero, s->descs.y, io->output),
                      node, "cudnnConvolutionForward")))
    return st;

  if (s->has_bias)
    return gpu_cuda(d,
                    gpu_k_bias_relu(io->output, s->out_dims, d->act,
                                    gpu_param_ptr(n->g, io->params, node->params[1]), s->fused_relu,
                                    d->stream),
                    node, "conv2d bias");
  if (s->fused_relu)
    return gpu_cuda(d, gpu_k_relu(io->output, io->output, d->act, s->out_count, d->stream), node,
                    "conv2d fused relu");
  return CNNB_OK;
}

static cnnb_status conv_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  conv_node *s = (conv_node *)n;
  const cnnb_node *node = n->node;
  cnnb_status st;

  /* The fused ReLU's gradient first: everything below uses the masked dy. */
  const void *dy = io->output_grad;
  if (s->fused_relu) {
    void *masked = gpu_transient(d, 0);
    if ((st = gpu_cuda(d,
                       gpu_k_relu_backward(masked, dy, io->output, d->act, s->out_count, d->stream),
                       node, "conv2d fused relu backward")))
      return st;
    dy = masked;
  }

  if (s->has_bias &&
      (st = gpu_cuda(d,
                     gpu_k_bias_grad(gpu_param_ptr(n->g, io->grads, node->params[1]), dy,
                                     s->out_dims, d->act, s->bias_scratch, d->stream),
                     node, "conv2d bias gradient")))
    return st;

  /* dW = x (*) dy, overwriting (beta 0). */
  const void *x;
  if ((st = conv_input(d, s, io->inputs[0], &x))) return st;
  float *arena_dw = gpu_param_ptr(n->g, io->grads, node->params[0]);
  void *dw = s->own_filter ? s->dw_compute : (void *)arena_dw;
  const gpu_conv_algo *af = &s->algo[GPU_CONV_BACKWARD_FILTER];
  if ((st = gpu_cudnn(d,
                      cudnnConvolutionBackwardFilter(d->cudnn, &one, s->descs.x, x, s->descs.y, dy,
                                                     s->descs.conv[GPU_CONV_BACKWARD_FILTER],
                                                     (cudnnConvolutionBwdFilterAlgo_t)af->algo,
                                                     d->workspace, af->workspace, &zero, s->descs.w,
                                                     dw),
                      node, "cudnnConvolutionBackwardFilter")))
    return st;
  if (s->own_filter && (st = gpu_cuda(d,
                                      gpu_k_filter_grad_to_arena(arena_dw, s->dw_compute, d->act,
                                                                 d->format == CUDNN_TENSOR_NHWC,
                                                                 s->k, s->c_per_group, s->c_compute,
                                                                 s->kh, s->kw, d->stream),
                                      node, "conv2d filter gradient conversion")))
    return st;

  void *dx_out = io->input_grads[0];
  if (!dx_out) return CNNB_OK;
  /* dx = dy (*) W, overwriting; W as the forward of this step used it. */
  const void *w = s->own_filter ? (const void *)s->w_compute
                                : (const void *)gpu_param_ptr(n->g, io->params, node->params[0]);
  void *dx = s->pre_pad ? gpu_transient(d, 1) : dx_out;
  const gpu_conv_algo *ad = &s->algo[GPU_CONV_BACKWARD_DATA];
  if ((st = gpu_cudnn(d,
                      cudnnConvolutionBackwardData(d->cudnn, &one, s->descs.w, w, s->descs.y, dy,
                                                   s->descs.conv[GPU_CONV_BACKWARD_DATA],
                                                   (cudnnConvolutionBwdDataAlgo_t)ad->algo,
                                                   d->workspace, ad->workspace, &zero, s->descs.x,
                                                   dx),
                      node, "cudnnConvolutionBackwardData")))
    return st;
  if (!s->pre_pad) return CNNB_OK;
  return gpu_cuda(d,
                  gpu_k_crop_spatial(dx_out, s->in_dims, dx, s->padded_dims, d->act, s->pre_top,
                                     s->pre_left, d->stream),
                  node, "conv2d input gradient crop");
}

static void conv_release(gpu_device *d, gpu_node *n) {
  conv_node *s = (conv_node *)n;
  gpu_conv_descs_destroy(&s->descs);
  if (s->w_compute) cudaFree(s->w_compute);
  if (s->dw_compute) cudaFree(s->dw_compute);
  s->w_compute = s->dw_compute = NULL;
  if (s->bias_scratch) cudaFree(s->bias_scratch);
  s->bias_scratch = NULL;
}

static const gpu_node_ops conv_ops = {conv_forward, conv_backward, conv_release};

/* The node's attributes and parameters, checked against its input. */
static cnnb_status check_node(gpu_device *d, const cnnb_graph *g, const cnnb_node *node) {
  if (node->num_inputs != 1 || node->num_params < 1)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: conv2d '%s': %d inputs and %d parameters "
                      "(expected one input, a kernel and an optional bias)",
                      node->name, node->num_inputs, node->num_params);
  cnnb_shape in = cnnb_graph_node(g, node->inputs[0])->shape;
  int32_t groups = node->attr.window.groups > 0 ? node->attr.window.groups : 1;
  int32_t k = node->shape.c;
  if (in.c % groups || k % groups)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: conv2d '%s': %d groups do not divide %d input / %d output channels",
                      node->name, groups, in.c, k);
  int64_t want = (int64_t)k * (in.c / groups) * node->attr.window.kernel_h *
                 node->attr.window.kernel_w;
  int64_t have = cnnb_graph_param(g, node->params[0])->count;
  if (have != want)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: conv2d '%s': kernel has %lld elements, expected "
                      "%lld ([%d, %d, %d, %d])",
                      node->name, (long long)have, (long long)want, k, in.c / groups,
                      node->attr.window.kernel_h, node->attr.window.kernel_w);
  if (node->num_params > 1 && cnnb_graph_param(g, node->params[1])->count != k)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: conv2d '%s': bias has %lld elements, expected %d",
                      node->name, (long long)cnnb_graph_param(g, node->params[1])->count, k);
  const int32_t pads[4] = {node->attr.window.pad_top, node->attr.window.pad_bottom,
                           node->attr.window.pad_left, node->attr.window.pad_right};
  for (int i = 0; i < 4; i++)
    if (pads[i] < 0)
      return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: conv2d '%s': negative pad %d", node->name,
                        pads[i]);
  return CNNB_OK;
}

static int64_t dims_count(gpu_dims x) { return (int64_t)x.n * x.c * x.h * x.w; }

cnnb_status gpu_prepare_conv(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  cnnb_status st = check_node(d, g, node);
  if (st) return st;
  conv_node *s = gpu_node_new(sizeof *s, &conv_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");

  const cnnb_node *input = cnnb_graph_node(g, node->inputs[0]);
  const cnnb_shape in = input->shape;
  const int32_t groups = node->attr.window.groups > 0 ? node->attr.window.groups : 1;
  s->has_bias = node->num_params > 1;
  s->fused_relu = node->fused_relu != 0;
  s->training = d->cfg.training != 0;
  /* Also on the images: the executor passes no gradient buffer for them (input_grads NULL,
   * backward-data skipped), but the conformance suites ask for one. */
  s->have_backward_data = s->training;
  s->k = node->shape.c;
  s->c_per_group = in.c / groups;
  s->kh = node->attr.window.kernel_h;
  s->kw = node->attr.window.kernel_w;

  /* cuDNN's symmetric pads and the explicit rest (the top comment explains). */
  const int32_t top = node->attr.window.pad_top, bottom = node->attr.window.pad_bottom;
  const int32_t left = node->attr.window.pad_left, right = node->attr.window.pad_right;
  const int32_t pad_h = top < bottom ? top : bottom, pad_w = left < right ? left : right;
  s->pre_top = top - pad_h;
  s->pre_left = left - pad_w;
  const int32_t pre_bottom = bottom - pad_h, pre_right = right - pad_w;
  /* Zero channels up to a multiple of 8 for tensor cores (the top comment explains). */
  s->c_compute = s->c_per_group;
  if (d->act != GPU_F32 && d->format == CUDNN_TENSOR_NHWC && groups == 1 &&
      input->op == CNNB_OP_INPUT && s->c_per_group % 8 != 0)
    s->c_compute = (s->c_per_group + 7) / 8 * 8;
  s->pre_pad = s->pre_top || pre_bottom || s->pre_left || pre_right ||
               s->c_compute * groups != in.c;
  cnnb_shape padded = {in.n, s->c_compute * groups, in.h + s->pre_top + pre_bottom,
                       in.w + s->pre_left + pre_right};
  s->in_dims = gpu_dims_of(d, in);
  s->padded_dims = gpu_dims_of(d, padded);
  s->out_dims = gpu_dims_of(d, node->shape);
  s->out_count = cnnb_shape_count(node->shape);

  memset(&s->key, 0, sizeof s->key);
  s->key.n = padded.n;
  s->key.c = padded.c;
  s->key.h = padded.h;
  s->key.w = padded.w;
  s->key.k = s->k;
  s->key.r = s->kh;
  s->key.s = s->kw;
  s->key.pad_h = pad_h;
  s->key.pad_w = pad_w;
  s->key.stride_h = node->attr.window.stride_h;
  s->key.stride_w = node->attr.window.stride_w;
  s->key.dilation_h = node->attr.window.dilation_h > 0 ? node->attr.window.dilation_h : 1;
  s->key.dilation_w = node->attr.window.dilation_w > 0 ? node->attr.window.dilation_w : 1;
  s->key.groups = groups;
  s->key.data_type = (int32_t)d->act_cudnn;
  s->key.format = (int32_t)d->format;
  s->key.math = (int32_t)gpu_conv_math(d);

  GPU_TRY(st, gpu_conv_descs_create(d, &s->key, &s->descs, node));
  cnnb_shape y = s->descs.y_shape;
  if (y.n != node->shape.n || y.c != node->shape.c || y.h != node->shape.h ||
      y.w != node->shape.w) {
    st = cnnb_error(d->ctx, CNNB_EINTERNAL,
                    "cuda: conv2d '%s': cuDNN computes output [%d, %d, %d, %d] from input [%d, %d, "
                    "%d, %d] (padded from [%d, %d, %d, %d]), but the graph says [%d, %d, %d, %d]",
                    node->name, y.n, y.c, y.h, y.w, padded.n, padded.c, padded.h, padded.w, in.n,
                    in.c, in.h, in.w, node->shape.n, node->shape.c, node->shape.h, node->shape.w);
    goto done;
  }

  GPU_TRY(st, gpu_conv_algo_choose(d, node, &s->key, &s->descs, GPU_CONV_FORWARD,
                                   &s->algo[GPU_CONV_FORWARD]));
  if (s->training) {
    GPU_TRY(st, gpu_conv_algo_choose(d, node, &s->key, &s->descs, GPU_CONV_BACKWARD_FILTER,
                                     &s->algo[GPU_CONV_BACKWARD_FILTER]));
    if (s->have_backward_data)
      GPU_TRY(st, gpu_conv_algo_choose(d, node, &s->key, &s->descs, GPU_CONV_BACKWARD_DATA,
                                       &s->algo[GPU_CONV_BACKWARD_DATA]));
  }

  const size_t elt = gpu_dtype_size(d->act);
  if (s->pre_pad)
    GPU_TRY(st, gpu_transient_reserve(d, 1, (size_t)dims_count(s->padded_dims) * elt, node));
  if (s->training && s->fused_relu)
    GPU_TRY(st, gpu_transient_reserve(d, 0, (size_t)s->out_count * elt, node));

  /* The arena holds fp32 OIHW: a half type, or the NHWC layout (OHWI filters), needs
   * the node's own converted copy. */
  s->own_filter = d->act != GPU_F32 || d->format == CUDNN_TENSOR_NHWC;
  if (s->own_filter) {
    size_t filter_bytes = (size_t)s->k * s->c_compute * s->kh * s->kw * elt;
    GPU_TRY(st,
            gpu_malloc(d, &s->w_compute, filter_bytes, node, "the filter in compute precision"));
    if (s->training)
      GPU_TRY(st, gpu_malloc(d, &s->dw_compute, filter_bytes, node,
                             "the filter gradient in compute precision"));
  }
  if (s->training && s->has_bias) {
    const size_t scratch_bytes = gpu_k_bias_grad_scratch_bytes(s->out_dims);
    if (scratch_bytes)
      GPU_TRY(st, gpu_malloc(d, &s->bias_scratch, scratch_bytes, node,
                             "the bias gradient's partial sums"));
  }
done:
  if (st) {
    conv_release(d, &s->base);
    free(s);
    return st;
  }
  *out = &s->base;
  return CNNB_OK;
}
