/* ops_lrn.c — local response normalisation across channels (AlexNet, GoogLeNet), TF's:
 *   y = x / (bias + alpha * sum_{c' = c-r .. c+r, 0 <= c' < C} x_c'^2)^beta
 * on this device's own kernels (gpu_k_lrn / gpu_k_lrn_backward, kernels_pool.cu), in
 * fp32 math for every storage type and layout.
 *
 * Not cuDNN's LRN: it divides alpha by the window size n (alpha' = alpha * n would undo
 * that, rounding alpha once more), allows n = 2r + 1 only up to CUDNN_LRN_MAX_N = 16
 * (TF allows any radius, GoogLeNet-style depth_radius 5 fits but larger ones would not),
 * and its layout and half-precision support is not what this device can rely on. One
 * kernel for both layouts keeps the precisions computing the same thing. The backward's formula,
 * derived in kernels_pool.cu, is the reference's (ref_lrn_backward) term for term; it recomputes
 * the normaliser from x. */
#include <stdlib.h>

#include "gpu_device.h"

typedef struct lrn_node {
  gpu_node base;
  gpu_dims dims; /* input and output alike */
  int32_t radius;
  float bias, alpha, beta;
} lrn_node;

static cnnb_status lrn_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  lrn_node *s = (lrn_node *)n;
  return gpu_cuda(d,
                  gpu_k_lrn(io->output, io->inputs[0], s->dims, d->act, s->radius, s->bias,
                            s->alpha, s->beta, d->stream),
                  n->node, "lrn kernel");
}

static cnnb_status lrn_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  lrn_node *s = (lrn_node *)n;
  void *dx = io->input_grads[0];
  if (!dx) return CNNB_OK; /* nothing trainable upstream: no gradient wanted */
  return gpu_cuda(d,
                  gpu_k_lrn_backward(dx, io->output_grad, io->inputs[0], io->output, s->dims,
                                     d->act, s->radius, s->bias, s->alpha, s->beta, d->stream),
                  n->node, "lrn backward kernel");
}

static void lrn_release(gpu_device *d, gpu_node *n) {}

static const gpu_node_ops lrn_ops = {lrn_forward, lrn_backward, lrn_release};

cnnb_status gpu_prepare_lrn(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  const int32_t radius = node->attr.lrn.depth_radius;
  const float bias = node->attr.lrn.bias, alpha = node->attr.lrn.alpha, beta = node->attr.lrn.beta;
  if (node->num_inputs != 1)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: node '%s': lrn takes 1 input, not %d", node->name,
                      node->num_inputs);
  /* The core refuses these already (op_table.c); a graph from elsewhere is checked too. */
  if (radius < 0 || bias < 0.0f || alpha < 0.0f || !(bias > 0.0f || alpha > 0.0f))
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: node '%s': lrn depth_radius %d, bias %g, alpha %g: need radius >= 0, "
                      "bias, alpha >= 0, not both 0",
                      node->name, radius, (double)bias, (double)alpha);
  const cnnb_shape xs = cnnb_graph_node(g, node->inputs[0])->shape;
  const cnnb_shape ys = node->shape;
  if (xs.n != ys.n || xs.c != ys.c || xs.h != ys.h || xs.w != ys.w)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: node '%s': lrn output [%d, %d, %d, %d] differs from its input "
                      "[%d, %d, %d, %d]",
                      node->name, ys.n, ys.c, ys.h, ys.w, xs.n, xs.c, xs.h, xs.w);
  lrn_node *s = gpu_node_new(sizeof *s, &lrn_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  s->dims = gpu_dims_of(d, ys);
  s->radius = radius;
  s->bias = bias;
  s->alpha = alpha;
  s->beta = beta;
  *out = &s->base;
  return CNNB_OK;
}
