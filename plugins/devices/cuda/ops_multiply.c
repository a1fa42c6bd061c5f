/* ops_multiply.c — the products of ABI 1.14 on the device's own kernels (gpu_kernels.h):
 * multiply (x * gate, the gate of x's shape or one value per image and channel: the
 * squeeze-and-excitation gate) and channel_scale (x * scale[c], ConvNeXt's layer scale,
 * the scale an fp32 param).
 *
 * Forward is one kernel over y's elements. Backward:
 *   dx = dy * gate     the forward kernel again, on dy
 *   dgate = dy * x     elementwise for a gate of x's shape; for a [N, C, 1, 1] gate summed
 *                      over H, W per image (gpu_k_multiply_gate_grad, in the activation
 *                      type); for the channel scale over N, H, W (gpu_k_channel_dot, into
 *                      the fp32 gradient arena through the node's own partial sums)
 * The gate's gradient is written first, then dx: each reads dy, neither overwrites it.
 * multiply(x, x) with one buffer for both gradients (the executor gives two, a test
 * harness may not) writes dy * x there and doubles it in place: 2 dy x, as add(x, x).
 *
 * Every activation of a node has the device's one layout (gpu_device.h), and a
 * [N, C, 1, 1] tensor is the same bytes in NCHW and NHWC, so the kernels take the
 * activation's gpu_dims and index the gate or the scale by it. */
#include <stdlib.h>

#include "gpu_device.h"

typedef struct product_node {
  gpu_node base;
  int scale_param;      /* channel_scale: the gate is the node's param [C], not input 1 */
  int gate_per_channel; /* multiply: the gate is [N, C, 1, 1], x is not */
  gpu_dtype type;
  gpu_dims dims; /* x, y, dx, dy */
  int64_t count; /* their elements */
  void *scratch; /* channel_scale training: gpu_k_channel_dot's partial sums (or NULL) */
} product_node;

static const float *scale_of(const product_node *s, float *base) {
  return gpu_param_ptr(s->base.g, base, s->base.node->params[0]);
}

static cnnb_status product_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  product_node *s = (product_node *)n;
  cudaError_t e = s->scale_param
                      ? gpu_k_channel_scale(io->output, io->inputs[0], scale_of(s, io->params),
                                            s->dims, s->type, d->stream)
                      : gpu_k_multiply(io->output, io->inputs[0], io->inputs[1],
                                       s->gate_per_channel, s->dims, s->type, d->stream);
  return gpu_cuda(d, e, n->node, s->scale_param ? "channel_scale forward" : "multiply forward");
}

static cnnb_status multiply_backward(gpu_device *d, product_node *s, const cnnb_node_io *io) {
  const cnnb_node *node = s->base.node;
  void *dx = io->input_grads[0], *dgate = io->num_inputs > 1 ? io->input_grads[1] : NULL;
  const void *dy = io->output_grad, *x = io->inputs[0], *gate = io->inputs[1];
  cnnb_status st;
  if (dx && dx == dgate && node->inputs[0] == node->inputs[1]) {
    /* multiply(x, x) into one buffer: dy * x, doubled (exactly: a sum of equal values). */
    if ((st = gpu_cuda(d, gpu_k_multiply(dx, dy, x, 0, s->dims, s->type, d->stream), node,
                       "multiply backward (multiply(x, x))")))
      return st;
    return gpu_cuda(d, gpu_k_add(dx, dx, dx, s->type, s->count, 0, d->stream), node,
                    "multiply backward (doubling for multiply(x, x))");
  }
  if (dgate) {
    cudaError_t e = s->gate_per_channel
                        ? gpu_k_multiply_gate_grad(dgate, dy, x, s->dims, s->type, d->stream)
                        : gpu_k_multiply(dgate, dy, x, 0, s->dims, s->type, d->stream);
    if ((st = gpu_cuda(d, e, node, "multiply backward (gate)"))) return st;
  }
  if (!dx) return CNNB_OK;
  return gpu_cuda(d, gpu_k_multiply(dx, dy, gate, s->gate_per_channel, s->dims, s->type, d->stream),
                  node, "multiply backward (input)");
}

static cnnb_status channel_scale_backward(gpu_device *d, product_node *s, const cnnb_node_io *io) {
  const cnnb_node *node = s->base.node;
  float *dscale = gpu_param_ptr(s->base.g, io->grads, node->params[0]);
  cnnb_status st = gpu_cuda(d,
                            gpu_k_channel_dot(dscale, io->output_grad, io->inputs[0], s->dims,
                                              s->type, s->scratch, d->stream),
                            node, "channel_scale backward (scale)");
  if (st || !io->input_grads[0]) return st;
  return gpu_cuda(d,
                  gpu_k_channel_scale(io->input_grads[0], io->output_grad, scale_of(s, io->params),
                                      s->dims, s->type, d->stream),
                  node, "channel_scale backward (input)");
}

static cnnb_status product_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  product_node *s = (product_node *)n;
  return s->scale_param ? channel_scale_backward(d, s, io) : multiply_backward(d, s, io);
}

static void product_release(gpu_device *d, gpu_node *n) {
  product_node *s = (product_node *)n;
  (void)d;
  if (s->scratch) cudaFree(s->scratch);
  s->scratch = NULL;
}

static const gpu_node_ops product_ops = {product_forward, product_backward, product_release};

static int same_shape(cnnb_shape a, cnnb_shape b) {
  return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w;
}

static cnnb_status prepare_product(gpu_device *d, const cnnb_graph *g, int32_t index,
                                   int scale_param, gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  const char *name = scale_param ? "channel_scale" : "multiply";
  const int want_inputs = scale_param ? 1 : 2, want_params = scale_param ? 1 : 0;
  if (node->num_inputs != want_inputs || node->num_params != want_params)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: %s '%s' has %d inputs and %d parameters, not %d and %d", name,
                      node->name, node->num_inputs, node->num_params, want_inputs, want_params);
  const cnnb_shape ys = node->shape, xs = cnnb_graph_node(g, node->inputs[0])->shape;
  const gpu_dtype type = gpu_tensor_dtype(d, g, index);
  if (!same_shape(xs, ys))
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: %s '%s': input [%d, %d, %d, %d], output [%d, %d, %d, %d]", name,
                      node->name, xs.n, xs.c, xs.h, xs.w, ys.n, ys.c, ys.h, ys.w);
  int gate_per_channel = 0;
  for (int32_t i = 0; i < node->num_inputs; i++)
    if (gpu_tensor_dtype(d, g, node->inputs[i]) != type)
      return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                        "cuda: %s '%s': input '%s' has another element type than the output", name,
                        node->name, cnnb_graph_node(g, node->inputs[i])->name);
  if (scale_param) {
    const cnnb_param *p = cnnb_graph_param(g, node->params[0]);
    if (p->count != ys.c)
      return cnnb_error(d->ctx, CNNB_EINVAL,
                        "cuda: channel_scale '%s': its scale has %lld values for %d channels",
                        node->name, (long long)p->count, ys.c);
  } else {
    const cnnb_node *gn = cnnb_graph_node(g, node->inputs[1]);
    const cnnb_shape gs = gn->shape;
    gate_per_channel = !same_shape(gs, ys);
    if (gate_per_channel && (gs.n != ys.n || gs.c != ys.c || gs.h != 1 || gs.w != 1))
      return cnnb_error(d->ctx, CNNB_EINVAL,
                        "cuda: multiply '%s': gate '%s' is [%d, %d, %d, %d], neither the input's "
                        "[%d, %d, %d, %d] nor [%d, %d, 1, 1]",
                        node->name, gn->name, gs.n, gs.c, gs.h, gs.w, ys.n, ys.c, ys.h, ys.w, ys.n,
                        ys.c);
    if (gate_per_channel && ys.n > 65535)
      return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                        "cuda: multiply '%s': a per-channel gate's gradient takes at most 65535 "
                        "images per device, not %d",
                        node->name, ys.n);
  }
  product_node *s = gpu_node_new(sizeof *s, &product_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  s->scale_param = scale_param;
  s->gate_per_channel = gate_per_channel;
  s->type = type;
  s->dims = gpu_dims_of(d, ys);
  s->count = cnnb_shape_count(ys);
  if (scale_param && d->cfg.training) {
    const size_t scratch_bytes = gpu_k_bias_grad_scratch_bytes(s->dims);
    cnnb_status st;
    if (scratch_bytes && (st = gpu_malloc(d, &s->scratch, scratch_bytes, node,
                                          "the scale gradient's partial sums"))) {
      free(s);
      return st;
    }
  }
  *out = &s->base;
  return CNNB_OK;
}

cnnb_status gpu_prepare_multiply(gpu_device *d, const cnnb_graph *g, int32_t index,
                                 gpu_node **out) {
  return prepare_product(d, g, index, 0, out);
}

cnnb_status gpu_prepare_channel_scale(gpu_device *d, const cnnb_graph *g, int32_t index,
                                      gpu_node **out) {
  return prepare_product(d, g, index, 1, out);
}
