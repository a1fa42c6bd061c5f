/* ops_channels.c — ABI 1.14's channel moves (ShuffleNet v2): slice_channels (x[:, begin :
 * begin + count], torch's chunk / narrow on channels) and channel_shuffle (the channels
 * permuted in `groups` groups). Neither computes anything, and both run in the device's
 * one layout and storage type, elements copied as they are:
 *  - slice_channels on kernels_concat.cu's one-part kernels: the forward is the
 *    backward of a concat whose one part is y at channel `begin` of x (only those
 *    channels of x are read), the backward the forward of that concat (dy placed back
 *    into dx, zeros in its other channels: the gradient is overwritten, not added);
 *  - channel_shuffle on gpu_k_channel_shuffle, its backward the inverse permutation (the
 *    same kernel with C / groups groups). */
#include "gpu_device.h"

/* ---- slice_channels ---------------------------------------------------------------- */

typedef struct slice_node {
  gpu_node base;
  gpu_dtype type;
  gpu_dims x;           /* the input's dims in the device's layout */
  gpu_concat_part part; /* y's channels in x: [begin, begin + count) */
} slice_node;

static cnnb_status slice_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  slice_node *s = (slice_node *)n;
  s->part.data = io->output;
  return gpu_cuda(d, gpu_k_concat_backward(io->inputs[0], s->x, &s->part, 1, s->type, d->stream),
                  n->node, "slice_channels forward");
}

static cnnb_status slice_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  slice_node *s = (slice_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  /* The part is only read here: dy, const for the kernel. */
  s->part.data = (void *)io->output_grad;
  return gpu_cuda(d, gpu_k_concat(io->input_grads[0], s->x, &s->part, 1, s->type, d->stream),
                  n->node, "slice_channels backward");
}

/* These nodes own nothing beyond their head: device.c frees the struct itself. */
static void channels_release(gpu_device *d, gpu_node *n) {
  (void)d;
  (void)n;
}

static const gpu_node_ops slice_ops = {slice_forward, slice_backward, channels_release};

/* The input's element type must be the output's (concat's kernels copy bytes). */
static cnnb_status same_type(gpu_device *d, const cnnb_graph *g, int32_t index, const char *op) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  if (gpu_tensor_dtype(d, g, node->inputs[0]) != gpu_tensor_dtype(d, g, index))
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                      "cuda: %s '%s': input '%s' has another element type than the output", op,
                      node->name, cnnb_graph_node(g, node->inputs[0])->name);
  return CNNB_OK;
}

cnnb_status gpu_prepare_slice_channels(gpu_device *d, const cnnb_graph *g, int32_t index,
                                       gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  if (node->num_inputs != 1)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: slice_channels '%s' has %d inputs, not 1",
                      node->name, node->num_inputs);
  const cnnb_shape xs = cnnb_graph_node(g, node->inputs[0])->shape, ys = node->shape;
  const int32_t begin = node->attr.slice.begin, count = node->attr.slice.count;
  if (begin < 0 || count < 1 || (int64_t)begin + count > xs.c || ys.c != count || xs.n != ys.n ||
      xs.h != ys.h || xs.w != ys.w)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: slice_channels '%s': channels [%d, %d) of [%d, %d, %d, %d] are not "
                      "its output [%d, %d, %d, %d]",
                      node->name, begin, (int)((int64_t)begin + count), xs.n, xs.c, xs.h, xs.w,
                      ys.n, ys.c, ys.h, ys.w);
  cnnb_status st = same_type(d, g, index, "slice_channels");
  if (st != CNNB_OK) return st;
  slice_node *s = gpu_node_new(sizeof *s, &slice_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  s->type = gpu_tensor_dtype(d, g, index);
  s->x = gpu_dims_of(d, xs);
  s->part.start = begin;
  s->part.channels = count;
  *out = &s->base;
  return CNNB_OK;
}

/* ---- channel_shuffle --------------------------------------------------------------- */

typedef struct shuffle_node {
  gpu_node base;
  gpu_dtype type;
  gpu_dims dims;  /* input and output alike */
  int32_t groups; /* the forward's; the backward's inverse is C / groups */
} shuffle_node;

static cnnb_status shuffle_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  shuffle_node *s = (shuffle_node *)n;
  return gpu_cuda(d,
                  gpu_k_channel_shuffle(io->output, io->inputs[0], s->dims, s->groups, s->type,
                                        d->stream),
                  n->node, "channel_shuffle forward");
}

static cnnb_status shuffle_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  shuffle_node *s = (shuffle_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  return gpu_cuda(d,
                  gpu_k_channel_shuffle(io->input_grads[0], io->output_grad, s->dims,
                                        s->dims.c / s->groups, s->type, d->stream),
                  n->node, "channel_shuffle backward");
}

static const gpu_node_ops shuffle_ops = {shuffle_forward, shuffle_backward, channels_release};

cnnb_status gpu_prepare_channel_shuffle(gpu_device *d, const cnnb_graph *g, int32_t index,
                                        gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  if (node->num_inputs != 1)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: channel_shuffle '%s' has %d inputs, not 1",
                      node->name, node->num_inputs);
  const cnnb_shape xs = cnnb_graph_node(g, node->inputs[0])->shape, ys = node->shape;
  const int32_t groups = node->attr.shuffle.groups;
  if (groups < 1 || xs.c % groups != 0 || xs.n != ys.n || xs.c != ys.c || xs.h != ys.h ||
      xs.w != ys.w)
    return cnnb_error(d->ctx, CNNB_EINVAL,
                      "cuda: channel_shuffle '%s': %d groups of [%d, %d, %d, %d] (output "
                      "[%d, %d, %d, %d]): groups must divide the channels, the shapes agree",
                      node->name, groups, xs.n, xs.c, xs.h, xs.w, ys.n, ys.c, ys.h, ys.w);
  cnnb_status st = same_type(d, g, index, "channel_shuffle");
  if (st != CNNB_OK) return st;
  shuffle_node *s = gpu_node_new(sizeof *s, &shuffle_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  s->type = gpu_tensor_dtype(d, g, index);
  s->dims = gpu_dims_of(d, xs);
  s->groups = groups;
  *out = &s->base;
  return CNNB_OK;
}
