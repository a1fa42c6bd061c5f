/* ops_pad_spatial.c — pad_spatial (ABI 1.10, NASNet's one-pixel shift of a reduction cell's
 * second path): zero rows and columns added on each side, or cut where the amount is
 * negative. One kernel both ways (gpu_k_shift_spatial): the forward places x at (top,
 * left) of y, the backward reads dx out of dy at (top, left), the same shift negated; the
 * elements dy holds beyond x (the zeros) have no gradient to pass. */
#include "gpu_device.h"

typedef struct pad_spatial_node {
  gpu_node base;
  int32_t top, left;
  gpu_dtype type;          /* the activations' (input and output alike) */
  gpu_dims x_dims, y_dims; /* [N, C, H, W] of the input and the output, in the layout */
} pad_spatial_node;

static cnnb_status pad_spatial_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  pad_spatial_node *s = (pad_spatial_node *)n;
  return gpu_cuda(d,
                  gpu_k_shift_spatial(io->output, s->y_dims, io->inputs[0], s->x_dims, s->type,
                                      s->top, s->left, d->stream),
                  n->node, "pad_spatial forward");
}

static cnnb_status pad_spatial_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  pad_spatial_node *s = (pad_spatial_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  return gpu_cuda(d,
                  gpu_k_shift_spatial(io->input_grads[0], s->x_dims, io->output_grad, s->y_dims,
                                      s->type, -s->top, -s->left, d->stream),
                  n->node, "pad_spatial backward");
}

/* Nothing beyond the head is owned: device.c frees the struct itself. */
static void pad_spatial_release(gpu_device *d, gpu_node *n) {
  (void)d;
  (void)n;
}

static const gpu_node_ops pad_spatial_ops = {pad_spatial_forward, pad_spatial_backward,
                                             pad_spatial_release};

cnnb_status gpu_prepare_pad_spatial(gpu_device *d, const cnnb_graph *g, int32_t index,
                                    gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  if (node->num_inputs != 1)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: pad_spatial '%s' has %d inputs, not 1",
                      node->name, node->num_inputs);
  const cnnb_shape xs = cnnb_graph_node(g, node->inputs[0])->shape, ys = node->shape;
  const int32_t top = node->attr.pad_spatial.top, bottom = node->attr.pad_spatial.bottom;
  const int32_t left = node->attr.pad_spatial.left, right = node->attr.pad_spatial.right;
  if (xs.n != ys.n || xs.c != ys.c || (int64_t)top + xs.h + bottom != ys.h ||
      (int64_t)left + xs.w + right != ys.w)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: pad_spatial '%s': [%d, %d, %d, %d] padded by %d, %d, %d, %d (top, "
                      "bottom, left, right) is not its output [%d, %d, %d, %d]",
                      node->name, xs.n, xs.c, xs.h, xs.w, top, bottom, left, right, ys.n, ys.c,
                      ys.h, ys.w);
  pad_spatial_node *s = gpu_node_new(sizeof *s, &pad_spatial_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  s->top = top;
  s->left = left;
  s->type = gpu_tensor_dtype(d, g, index);
  s->x_dims = gpu_dims_of(d, xs);
  s->y_dims = gpu_dims_of(d, ys);
  *out = &s->base;
  return CNNB_OK;
}
