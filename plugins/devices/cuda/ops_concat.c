/* ops_concat.c — the ops that place tensors side by side along channels: concat
 * (Inception, NASNet, DenseNet) and pad_channels (ABI 1.2, the CIFAR ResNets' shortcut:
 * zero channels before and after x). Neither computes anything: each is one gather
 * kernel in the forward and one scatter kernel in the backward (gpu_k_concat,
 * kernels_concat.cu), which move every input in one launch; a cudaMemcpy2DAsync per
 * input moved rows of one pixel's channels, too short for the copy engine.
 *
 * Each node keeps its parts (where each input's channels lie in the output) from
 * prepare; a call fills in the buffers of that step and launches. */
#include "gpu_device.h"

static int same_nhw(cnnb_shape a, cnnb_shape b) { return a.n == b.n && a.h == b.h && a.w == b.w; }

/* These nodes own nothing beyond their head: device.c frees the struct itself. */
static void parts_release(gpu_device *d, gpu_node *n) {
  (void)d;
  (void)n;
}

/* ---- concat ------------------------------------------------------------------------ */

typedef struct concat_node {
  gpu_node base;
  gpu_dtype type;
  gpu_dims y; /* the output's dims in the device's layout */
  int32_t count;
  gpu_concat_part parts[]; /* input i's channels in the output, in input order */
} concat_node;

/* The parts' data: the inputs in the forward (only read), the inputs' gradients in the
 * backward (NULL ones, not wanted, are skipped by the launcher). */
static cnnb_status concat_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  concat_node *s = (concat_node *)n;
  for (int32_t i = 0; i < s->count; i++) s->parts[i].data = io->inputs[i];
  return gpu_cuda(d, gpu_k_concat(io->output, s->y, s->parts, s->count, s->type, d->stream),
                  n->node, "concat forward");
}

static cnnb_status concat_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  concat_node *s = (concat_node *)n;
  for (int32_t i = 0; i < s->count; i++) s->parts[i].data = io->input_grads[i];
  return gpu_cuda(d,
                  gpu_k_concat_backward(io->output_grad, s->y, s->parts, s->count, s->type,
                                        d->stream),
                  n->node, "concat backward");
}

static const gpu_node_ops concat_ops = {concat_forward, concat_backward, parts_release};

cnnb_status gpu_prepare_concat(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  cnnb_shape ys = node->shape;
  gpu_dtype type = gpu_tensor_dtype(d, g, index);
  if (node->num_inputs < 1)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: concat '%s' has no inputs", node->name);
  int64_t channels = 0;
  for (int32_t i = 0; i < node->num_inputs; i++) {
    const cnnb_node *in = cnnb_graph_node(g, node->inputs[i]);
    if (!same_nhw(in->shape, ys))
      return cnnb_error(d->ctx, CNNB_EINVAL,
                        "cuda: concat '%s': input '%s' is [%d, %d, %d, %d], output "
                        "[%d, %d, %d, %d]: N, H, W must agree",
                        node->name, in->name, in->shape.n, in->shape.c, in->shape.h, in->shape.w,
                        ys.n, ys.c, ys.h, ys.w);
    if (gpu_tensor_dtype(d, g, node->inputs[i]) != type)
      return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                        "cuda: concat '%s': input '%s' has another element type than the output",
                        node->name, in->name);
    channels += in->shape.c;
  }
  if (channels != ys.c)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: concat '%s': inputs have %lld channels in all, the output %d",
                      node->name, (long long)channels, ys.c);
  size_t bytes = sizeof(concat_node) + (size_t)node->num_inputs * sizeof(gpu_concat_part);
  concat_node *s = gpu_node_new(bytes, &concat_ops, g, index);
  if (!s) return gpu_oom(d, node, bytes, "its state");
  s->type = type;
  s->y = gpu_dims_of(d, ys);
  s->count = node->num_inputs;
  int32_t start = 0;
  for (int32_t i = 0; i < node->num_inputs; i++) {
    s->parts[i].start = start;
    s->parts[i].channels = cnnb_graph_node(g, node->inputs[i])->shape.c;
    start += s->parts[i].channels;
  }
  *out = &s->base;
  return CNNB_OK;
}

/* ---- pad_channels ------------------------------------------------------------------ */

typedef struct pad_node {
  gpu_node base;
  gpu_dtype type;
  gpu_dims y;
  gpu_concat_part x; /* x's channels in the output: [before, before + C) */
} pad_node;

/* One part: the launcher writes zeros in the channels it does not cover. */
static cnnb_status pad_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  pad_node *s = (pad_node *)n;
  s->x.data = io->inputs[0];
  return gpu_cuda(d, gpu_k_concat(io->output, s->y, &s->x, 1, s->type, d->stream), n->node,
                  "pad_channels forward");
}

/* The zero channels are constants: only the middle of dy flows back to x. */
static cnnb_status pad_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  pad_node *s = (pad_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  s->x.data = io->input_grads[0];
  return gpu_cuda(d, gpu_k_concat_backward(io->output_grad, s->y, &s->x, 1, s->type, d->stream),
                  n->node, "pad_channels backward");
}

static const gpu_node_ops pad_ops = {pad_forward, pad_backward, parts_release};

cnnb_status gpu_prepare_pad(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  if (node->num_inputs != 1)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: pad_channels '%s' has %d inputs, not 1",
                      node->name, node->num_inputs);
  const cnnb_node *in = cnnb_graph_node(g, node->inputs[0]);
  cnnb_shape ys = node->shape, xs = in->shape;
  int32_t before = node->attr.pad.before, after = node->attr.pad.after;
  if (before < 0 || after < 0 || !same_nhw(xs, ys) ||
      (int64_t)ys.c != (int64_t)before + xs.c + after)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: pad_channels '%s': pads %d, %d take [%d, %d, %d, %d] to "
                      "[%d, %d, %d, %d]",
                      node->name, before, after, xs.n, xs.c, xs.h, xs.w, ys.n, ys.c, ys.h, ys.w);
  gpu_dtype type = gpu_tensor_dtype(d, g, index);
  if (gpu_tensor_dtype(d, g, node->inputs[0]) != type)
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                      "cuda: pad_channels '%s': input '%s' has another element type than the "
                      "output",
                      node->name, in->name);
  pad_node *s = gpu_node_new(sizeof *s, &pad_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  s->type = type;
  s->y = gpu_dims_of(d, ys);
  s->x.start = before;
  s->x.channels = xs.c;
  *out = &s->base;
  return CNNB_OK;
}
