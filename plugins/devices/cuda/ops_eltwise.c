/* ops_eltwise.c — elementwise ops on the device's own kernels (gpu_kernels.h): relu and
 * relu6 (backward from the output, as the cpu device does, so the gradient needs only y),
 * the activations of ABI 1.14 (gpu_math.h's gpu_act_value),
 * add (with the following ReLU applied inside when the planner fused one: the device
 * answers CNNB_EXT_FUSED_RELU_ADD; its gradient passes unchanged, or masked by y > 0, to
 * both inputs) and dropout (a mask recomputed in backward from (seed, step, element)).
 *
 * Elementwise work does not care about layout: every buffer of a node here has the same
 * shape, type and layout (NCHW fp32 or NHWC half), so each op runs over the flat
 * element count. */
#include <string.h>

#include "gpu_device.h"
#include "gpu_math.h"

/* Nothing beyond the head is owned by these nodes: device.c frees the struct itself. */
static void eltwise_release(gpu_device *d, gpu_node *n) {
  (void)d;
  (void)n;
}

/* dst = src, count elements of `type`, on the stream (nothing when they are one buffer). */
static cnnb_status copy_buffer(gpu_device *d, void *dst, const void *src, int64_t count,
                               gpu_dtype type, const cnnb_node *node, const char *what) {
  if (dst == src || count == 0) return CNNB_OK;
  return gpu_cuda(d,
                  cudaMemcpyAsync(dst, src, (size_t)count * gpu_dtype_size(type),
                                  cudaMemcpyDeviceToDevice, d->stream),
                  node, what);
}

/* Every input of `node` has the node's shape and element type on this device. */
static cnnb_status check_same_shapes(gpu_device *d, const cnnb_graph *g, int32_t index,
                                     int32_t want_inputs, const char *op) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  if (node->num_inputs != want_inputs)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: %s '%s' has %d inputs, not %d", op, node->name,
                      node->num_inputs, want_inputs);
  gpu_dtype type = gpu_tensor_dtype(d, g, index);
  for (int32_t i = 0; i < node->num_inputs; i++) {
    const cnnb_node *in = cnnb_graph_node(g, node->inputs[i]);
    cnnb_shape a = in->shape, b = node->shape;
    if (a.n != b.n || a.c != b.c || a.h != b.h || a.w != b.w)
      return cnnb_error(d->ctx, CNNB_EINVAL,
                        "cuda: %s '%s': input '%s' is [%d, %d, %d, %d], output [%d, %d, %d, %d]",
                        op, node->name, in->name, a.n, a.c, a.h, a.w, b.n, b.c, b.h, b.w);
    if (gpu_tensor_dtype(d, g, node->inputs[i]) != type)
      return cnnb_error(d->ctx, CNNB_EUNSUPPORTED,
                        "cuda: %s '%s': input '%s' has another element type than the output", op,
                        node->name, in->name);
  }
  return CNNB_OK;
}

/* ---- relu, relu6 ------------------------------------------------------------------ */

/* relu6's gradient is TF's Relu6Grad from the output: dy where 0 < y < 6, else 0 (so
 * neither bound passes it), which gpu_k_relu6_backward computes. */
typedef struct relu_node {
  gpu_node base;
  int64_t count; /* elements of x, y, dx, dy */
  gpu_dtype type;
  int relu6;
} relu_node;

static cnnb_status relu_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  relu_node *s = (relu_node *)n;
  cudaError_t e = s->relu6 ? gpu_k_relu6(io->output, io->inputs[0], s->type, s->count, d->stream)
                           : gpu_k_relu(io->output, io->inputs[0], s->type, s->count, d->stream);
  return gpu_cuda(d, e, n->node, s->relu6 ? "relu6 forward" : "relu forward");
}

static cnnb_status relu_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  relu_node *s = (relu_node *)n;
  void *dx = io->input_grads[0];
  if (!dx) return CNNB_OK;
  cudaError_t e =
      s->relu6 ? gpu_k_relu6_backward(dx, io->output_grad, io->output, s->type, s->count, d->stream)
               : gpu_k_relu_backward(dx, io->output_grad, io->output, s->type, s->count, d->stream);
  return gpu_cuda(d, e, n->node, s->relu6 ? "relu6 backward" : "relu backward");
}

static const gpu_node_ops relu_ops = {relu_forward, relu_backward, eltwise_release};

static cnnb_status prepare_activation(gpu_device *d, const cnnb_graph *g, int32_t index, int relu6,
                                      gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  cnnb_status st = check_same_shapes(d, g, index, 1, relu6 ? "relu6" : "relu");
  if (st) return st;
  relu_node *s = gpu_node_new(sizeof *s, &relu_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  s->count = cnnb_shape_count(node->shape);
  s->type = gpu_tensor_dtype(d, g, index);
  s->relu6 = relu6;
  *out = &s->base;
  return CNNB_OK;
}

cnnb_status gpu_prepare_relu(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out) {
  return prepare_activation(d, g, index, 0, out);
}

cnnb_status gpu_prepare_relu6(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out) {
  return prepare_activation(d, g, index, 1, out);
}

/* ---- the activations of ABI 1.14 ---------------------------------------------------- */

typedef struct act_node {
  gpu_node base;
  int64_t count; /* elements of x, y, dx, dy */
  gpu_dtype type;
  int32_t act; /* gpu_act_kind */
  const char *fwd_name, *bwd_name;
} act_node;

static cnnb_status act_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  act_node *s = (act_node *)n;
  cudaError_t e = gpu_k_act(io->output, io->inputs[0], s->act, s->type, s->count, d->stream);
  return gpu_cuda(d, e, n->node, s->fwd_name);
}

/* From the output for sigmoid and hard_sigmoid, from the input for the rest: what the op
 * table keeps for each (core/src/graph/op_table.c). */
static cnnb_status act_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  act_node *s = (act_node *)n;
  void *dx = io->input_grads[0];
  if (!dx) return CNNB_OK;
  const void *v = gpu_act_slope_from_output(s->act) ? io->output : io->inputs[0];
  cudaError_t e = gpu_k_act_backward(dx, io->output_grad, v, s->act, s->type, s->count, d->stream);
  return gpu_cuda(d, e, n->node, s->bwd_name);
}

static const gpu_node_ops act_ops = {act_forward, act_backward, eltwise_release};

cnnb_status gpu_prepare_act(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  static const struct {
    uint32_t op;
    int32_t act;
    const char *fwd, *bwd;
  } acts[] = {
      {CNNB_OP_SIGMOID, GPU_ACT_SIGMOID, "sigmoid forward", "sigmoid backward"},
      {CNNB_OP_SILU, GPU_ACT_SILU, "silu forward", "silu backward"},
      {CNNB_OP_HARD_SIGMOID, GPU_ACT_HARD_SIGMOID, "hard_sigmoid forward", "hard_sigmoid backward"},
      {CNNB_OP_HARD_SWISH, GPU_ACT_HARD_SWISH, "hard_swish forward", "hard_swish backward"},
      {CNNB_OP_GELU, GPU_ACT_GELU, "gelu forward", "gelu backward"}};
  size_t k = 0;
  while (k < sizeof acts / sizeof acts[0] && acts[k].op != node->op) k++;
  if (k == sizeof acts / sizeof acts[0])
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: '%s' is not an activation", node->name);
  cnnb_status st = check_same_shapes(d, g, index, 1, acts[k].fwd);
  if (st) return st;
  act_node *s = gpu_node_new(sizeof *s, &act_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  s->count = cnnb_shape_count(node->shape);
  s->type = gpu_tensor_dtype(d, g, index);
  s->act = node->op == CNNB_OP_GELU && node->attr.gelu.tanh ? GPU_ACT_GELU_TANH : acts[k].act;
  s->fwd_name = acts[k].fwd;
  s->bwd_name = acts[k].bwd;
  *out = &s->base;
  return CNNB_OK;
}

/* ---- add ------------------------------------------------------------------------ */

typedef struct add_node {
  gpu_node base;
  int64_t count; /* elements of a, b, y and every gradient */
  gpu_dtype type;
  int fused_relu; /* y = max(a + b, 0) */
} add_node;

static cnnb_status add_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  add_node *s = (add_node *)n;
  return gpu_cuda(d,
                  gpu_k_add(io->output, io->inputs[0], io->inputs[1], s->type, s->count,
                            s->fused_relu, d->stream),
                  n->node, s->fused_relu ? "add + relu forward" : "add forward");
}

/* d a = d b = dy, or dy * (y > 0) with the fused ReLU. The masked gradient is written
 * straight into the first gradient wanted and copied from there into the other. */
static cnnb_status add_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  add_node *s = (add_node *)n;
  const cnnb_node *node = n->node;
  void *ga = io->input_grads[0], *gb = io->input_grads[1];
  const void *dy = io->output_grad;
  cnnb_status st;
  if (ga && ga == gb && node->inputs[0] == node->inputs[1]) {
    /* add(x, x) with one buffer for both slots (the executor gives two; a test harness
     * may not): d x = 2 dy. The doubling reads a buffer other than the one it writes,
     * so the masked gradient goes through transient slot 0 (reserved at prepare). */
    if (s->fused_relu) {
      void *masked = gpu_transient(d, 0);
      if ((st = gpu_cuda(d,
                         gpu_k_relu_backward(masked, dy, io->output, s->type, s->count, d->stream),
                         node, "add's fused relu backward")))
        return st;
      dy = masked;
    }
    return gpu_cuda(d, gpu_k_add(ga, dy, dy, s->type, s->count, 0, d->stream), node,
                    "add backward (doubling for add(x, x))");
  }
  /* Both inputs' gradients in one pass over dy (and y, for a fused ReLU). */
  return gpu_cuda(d,
                  gpu_k_add_backward(ga, gb, dy, s->fused_relu ? io->output : NULL, s->type,
                                     s->count, d->stream),
                  node, "add backward");
}

static const gpu_node_ops add_ops = {add_forward, add_backward, eltwise_release};

cnnb_status gpu_prepare_add(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  cnnb_status st = check_same_shapes(d, g, index, 2, "add");
  if (st) return st;
  int64_t count = cnnb_shape_count(node->shape);
  gpu_dtype type = gpu_tensor_dtype(d, g, index);
  int fused_relu = node->fused_relu != 0, same_input = node->inputs[0] == node->inputs[1];
  /* Reserved before the state exists, so a failure leaves nothing to free. */
  if (d->cfg.training && fused_relu && same_input &&
      (st = gpu_transient_reserve(d, 0, (size_t)count * gpu_dtype_size(type), node)))
    return st;
  add_node *s = gpu_node_new(sizeof *s, &add_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  s->count = count;
  s->type = type;
  s->fused_relu = fused_relu;
  *out = &s->base;
  return CNNB_OK;
}

/* ---- dropout ---------------------------------------------------------------------- */

/* The kernels' mask is a pure function of (seed, step, element), the same for two
 * dropout nodes of equal size at one step (AlexNet's and VGG's two fully connected
 * dropouts). So each node takes its own seed: the run's seed mixed with its node index
 * (as the cpu device mixes the node into its mask key). */
typedef struct dropout_node {
  gpu_node base;
  int64_t count;
  gpu_dtype type;
  float keep;
  uint32_t seed;
  int64_t per_sample; /* stochastic depth: the elements of one image, one draw each; 0:
                         one draw per element (dropout) */
} dropout_node;

/* The node's mask applied to `in` (x forward, dy backward): the same map both ways. */
static cudaError_t apply_mask(gpu_device *d, const dropout_node *s, void *out, const void *in,
                              uint64_t step, int backward) {
  if (s->per_sample)
    return gpu_k_sample_dropout(out, in, s->type, s->count, s->per_sample, s->keep, s->seed, step,
                                d->stream);
  return backward
             ? gpu_k_dropout_backward(out, in, s->type, s->count, s->keep, s->seed, step, d->stream)
             : gpu_k_dropout(out, in, s->type, s->count, s->keep, s->seed, step, d->stream);
}

/* splitmix64's finaliser, folded to 32 bits. */
static uint32_t node_seed(uint32_t run_seed, int32_t index) {
  uint64_t z = ((uint64_t)run_seed << 32 | (uint32_t)index) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (uint32_t)(z ^ (z >> 32));
}

static cnnb_status dropout_forward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  dropout_node *s = (dropout_node *)n;
  /* Inference (and keep_prob 1) is the identity. */
  if (!d->cfg.training || s->keep >= 1.0f)
    return copy_buffer(d, io->output, io->inputs[0], s->count, s->type, n->node,
                       "dropout forward copy");
  return gpu_cuda(d, apply_mask(d, s, io->output, io->inputs[0], io->step, 0), n->node,
                  "dropout forward");
}

static cnnb_status dropout_backward(gpu_device *d, gpu_node *n, const cnnb_node_io *io) {
  dropout_node *s = (dropout_node *)n;
  void *dx = io->input_grads[0];
  if (!dx) return CNNB_OK;
  if (s->keep >= 1.0f)
    return copy_buffer(d, dx, io->output_grad, s->count, s->type, n->node, "dropout backward copy");
  return gpu_cuda(d, apply_mask(d, s, dx, io->output_grad, io->step, 1), n->node,
                  "dropout backward");
}

static const gpu_node_ops dropout_ops = {dropout_forward, dropout_backward, eltwise_release};

/* Dropout, and stochastic depth as dropout of whole images (keep 1 - drop_prob). */
cnnb_status gpu_prepare_dropout(gpu_device *d, const cnnb_graph *g, int32_t index, gpu_node **out) {
  const cnnb_node *node = cnnb_graph_node(g, index);
  const int per_sample = node->op == CNNB_OP_STOCHASTIC_DEPTH;
  float keep = per_sample ? 1.0f - node->attr.stochastic_depth.drop_prob
                          : node->attr.dropout.keep_prob;
  if (!(keep >= 0.0f && keep <= 1.0f) || (!per_sample && keep == 0.0f))
    return cnnb_error(d->ctx, CNNB_EINVAL, "cuda: %s '%s': keep probability %g is out of range",
                      per_sample ? "stochastic_depth" : "dropout", node->name, (double)keep);
  cnnb_status st = check_same_shapes(d, g, index, 1, per_sample ? "stochastic_depth" : "dropout");
  if (st) return st;
  dropout_node *s = gpu_node_new(sizeof *s, &dropout_ops, g, index);
  if (!s) return gpu_oom(d, node, sizeof *s, "its state");
  s->count = cnnb_shape_count(node->shape);
  s->type = gpu_tensor_dtype(d, g, index);
  s->keep = keep;
  s->seed = node_seed(d->cfg.seed, index);
  s->per_sample = per_sample ? s->count / node->shape.n : 0;
  *out = &s->base;
  return CNNB_OK;
}
