/* graph_build.c — the op builders of graph.h, the host's own nodes (the images when a
 * graph is created, the labels and the loss), and the one path every node takes into
 * the graph. A builder only reads its desc (defaults filled, struct_size respected) into
 * a request; cnnb_graph_add_op then names the node, checks its inputs and arity, and runs
 * the op table's rules (op_table.c): the shape rule with its checks, then the
 * parameters the op owns, with their tf_cnn_benchmarks default initializers.
 *
 * Descs are read only up to their struct_size (a smaller, older desc leaves the newer
 * fields at their zero defaults), as the ABI's append-only rule requires. */
#include <stdlib.h>
#include <string.h>

#include "graph/graph_impl.h"

/* Copies the caller's desc into a zeroed local, reading no further than either size. */
static void read_desc(void *dst, size_t dst_size, const void *src) {
  memset(dst, 0, dst_size);
  uint32_t size;
  memcpy(&size, src, sizeof size);
  memcpy(dst, src, size < dst_size ? size : dst_size);
  size = (uint32_t)dst_size; /* struct_size now describes the local copy */
  memcpy(dst, &size, sizeof size);
}

static int32_t or_default(int32_t v, int32_t def) { return v ? v : def; }

/* ---- the one path ---------------------------------------------------------------------- */

cnnb_tensor cnnb_graph_add_op(cnnb_graph *g, cnnb_op_request *r) {
  const cnnb_op_row *row = cnnb_op_row_of(r->op);
  if (!row) {
    if (g) cnnb_graph_fail(g, CNNB_EINTERNAL, "graph: op %u has no row in the op table", r->op);
    return CNNB_NO_TENSOR;
  }
  cnnb_node_start s;
  const char *base = r->auto_base ? r->auto_base : row->name;
  bool arity = r->num_inputs >= row->min_inputs && r->num_inputs <= row->max_inputs;
  /* A wrong count starts with no inputs, so the error still names the node. */
  if (!cnnb_graph_start(&s, g, r->op, base, r->name, arity ? r->num_inputs : 0, r->inputs,
                        r->by_host != 0))
    return CNNB_NO_TENSOR;
  if (!arity) {
    if (r->num_inputs < row->min_inputs)
      return cnnb_graph_reject(&s, CNNB_EINVAL, "count %d must be >= %d", r->num_inputs,
                               row->min_inputs);
    return cnnb_graph_reject(&s, CNNB_EINVAL, "count %d must be <= %d", r->num_inputs,
                             row->max_inputs);
  }
  if (r->no_desc) return cnnb_graph_reject(&s, CNNB_EINVAL, "desc is NULL");
  /* The rules see their inputs' shapes and names, not the graph (cnnb_graph_start
   * checked every input exists). */
  size_t n = r->num_inputs > 0 ? (size_t)r->num_inputs : 1;
  cnnb_shape *shapes = malloc(n * sizeof *shapes);
  const char **names = malloc(n * sizeof *names);
  if (!shapes || !names) {
    free(shapes);
    free(names);
    return cnnb_graph_reject(&s, CNNB_ENOMEM, "out of memory");
  }
  for (int32_t i = 0; i < r->num_inputs; i++) {
    const cnnb_node *in = cnnb_graph_node(g, r->inputs[i]);
    shapes[i] = in->shape;
    names[i] = in->name;
  }
  r->input_shapes = shapes;
  r->input_names = names;
  r->error[0] = '\0';
  cnnb_tensor t = row->infer(r) ? cnnb_graph_finish(&s, &r->node, r->num_inputs, r->inputs)
                                : cnnb_graph_reject(&s, CNNB_EINVAL, "%s", r->error);
  if (t != CNNB_NO_TENSOR && row->params) {
    cnnb_op_param params[CNNB_OP_MAX_PARAMS];
    int32_t count = row->params(r, params);
    for (int32_t i = 0; t != CNNB_NO_TENSOR && i < count; i++)
      if (!cnnb_graph_add_param(g, t, &params[i])) t = CNNB_NO_TENSOR;
  }
  free(shapes);
  free(names);
  r->input_shapes = NULL;
  r->input_names = NULL;
  return t;
}

/* ---- the host's own nodes: the images, the labels and the loss ------------------------ */

cnnb_graph *cnnb_graph_create(int32_t batch, int32_t channels, int32_t height, int32_t width,
                              int32_t num_classes) {
  cnnb_graph *g = cnnb_graph_alloc(batch, channels, height, width, num_classes);
  if (!g) return NULL;
  /* The input node goes in even for bad dimensions, so index 0 is always the images;
   * the error then stops any further building. */
  cnnb_op_request r = {.op = CNNB_OP_INPUT,
                       .name = "input",
                       .by_host = 1,
                       .node.shape = {batch, channels, height, width}};
  if (cnnb_graph_add_op(g, &r) != 0) {
    cnnb_graph_destroy(g);
    return NULL; /* only out of memory gets here */
  }
  if (batch < 1 || channels < 1 || height < 1 || width < 1)
    cnnb_graph_fail(g, CNNB_EINVAL, "graph: input [%d, %d, %d, %d] must have every dimension >= 1",
                    batch, channels, height, width);
  else if (num_classes < 1)
    cnnb_graph_fail(g, CNNB_EINVAL, "graph: num_classes %d must be >= 1", num_classes);
  return g;
}

cnnb_status cnnb_graph_add_loss(cnnb_graph *g) {
  if (!g) return CNNB_EINVAL;
  if (g->status != CNNB_OK) return g->status;
  if (g->logits == CNNB_NO_TENSOR)
    return cnnb_graph_fail(g, CNNB_EINVAL,
                           "add_loss: the model set no logits (cnnb_graph_set_logits)");
  if (g->loss != CNNB_NO_TENSOR)
    return cnnb_graph_fail(g, CNNB_EINVAL, "add_loss: the loss was already added");

  /* The loss nodes live at the root, whatever scope the model left open. */
  int32_t saved_scopes = g->num_scopes;
  g->num_scopes = 0;
  cnnb_op_request r = {.op = CNNB_OP_LABELS, .by_host = 1, .node.shape = {g->batch, 1, 1, 1}};
  cnnb_tensor labels = cnnb_graph_add_op(g, &r), loss = CNNB_NO_TENSOR;
  if (labels != CNNB_NO_TENSOR) {
    /* The labels are readable by the loss alone: by_host lets it. */
    const cnnb_tensor in[2] = {g->logits, labels};
    r = (cnnb_op_request){.op = CNNB_OP_SOFTMAX_XENT,
                          .auto_base = "loss",
                          .num_inputs = 2,
                          .inputs = in,
                          .by_host = 1};
    loss = cnnb_graph_add_op(g, &r);
  }
  g->num_scopes = saved_scopes;
  if (loss == CNNB_NO_TENSOR) return g->status != CNNB_OK ? g->status : CNNB_EINTERNAL;
  g->labels = labels;
  g->loss = loss;
  return CNNB_OK;
}

cnnb_status cnnb_graph_set_label_smoothing(cnnb_graph *g, float s) {
  if (!g) return CNNB_EINVAL;
  if (g->status != CNNB_OK) return g->status;
  if (g->loss == CNNB_NO_TENSOR)
    return cnnb_graph_fail(g, CNNB_EINVAL, "label smoothing: the graph has no loss yet");
  if (!(s >= 0.0f && s < 1.0f))
    return cnnb_graph_fail(g, CNNB_EINVAL, "label smoothing %g must be in [0, 1)", (double)s);
  g->nodes[g->loss]->node.attr.loss.label_smoothing = s;
  return CNNB_OK;
}

/* A request for `op` on inputs, named `name`. */
static cnnb_op_request request(uint32_t op, const char *name, int32_t num_inputs,
                               const cnnb_tensor *inputs) {
  return (cnnb_op_request){.op = op, .name = name, .num_inputs = num_inputs, .inputs = inputs};
}

/* ---- conv2d and pooling ------------------------------------------------------------------ */

cnnb_tensor cnnb_conv2d(cnnb_graph *g, const char *name, cnnb_tensor x,
                        const cnnb_conv2d_desc *desc) {
  cnnb_op_request r = request(CNNB_OP_CONV2D, name, 1, &x);
  cnnb_conv2d_desc d = {0};
  if (desc) read_desc(&d, sizeof d, desc);
  r.no_desc = !desc;
  r.padding = d.padding ? d.padding : CNNB_PAD_SAME;
  r.node.attr.window.filters = d.filters;
  r.node.attr.window.kernel_h = d.kernel_h;
  r.node.attr.window.kernel_w = d.kernel_w;
  r.node.attr.window.stride_h = or_default(d.stride_h, 1);
  r.node.attr.window.stride_w = or_default(d.stride_w, 1);
  r.node.attr.window.pad_top = d.pad_top;
  r.node.attr.window.pad_bottom = d.pad_bottom;
  r.node.attr.window.pad_left = d.pad_left;
  r.node.attr.window.pad_right = d.pad_right;
  r.node.attr.window.dilation_h = or_default(d.dilation_h, 1);
  r.node.attr.window.dilation_w = or_default(d.dilation_w, 1);
  r.node.attr.window.groups = or_default(d.groups, 1);
  r.node.attr.window.use_bias = d.use_bias ? 1 : 0;
  r.init[0] = d.kernel_init;
  r.init[1] = (cnnb_init){CNNB_INIT_CONSTANT, d.bias_init};
  r.linear_kernel = d.linear_kernel;
  return cnnb_graph_add_op(g, &r);
}

static cnnb_tensor pool(cnnb_graph *g, uint32_t op, const char *name, cnnb_tensor x,
                        const cnnb_pool_desc *desc) {
  cnnb_op_request r = request(op, name, 1, &x);
  cnnb_pool_desc d = {0};
  if (desc) read_desc(&d, sizeof d, desc);
  r.no_desc = !desc;
  /* tf_cnn_benchmarks' mpool()/apool(): stride = kernel and VALID unless given. */
  r.padding = d.padding ? d.padding : CNNB_PAD_VALID;
  r.node.attr.window.kernel_h = d.kernel_h;
  r.node.attr.window.kernel_w = d.kernel_w;
  r.node.attr.window.stride_h = or_default(d.stride_h, d.kernel_h);
  r.node.attr.window.stride_w = or_default(d.stride_w, d.kernel_w);
  r.node.attr.window.pad_top = d.pad_top;
  r.node.attr.window.pad_bottom = d.pad_bottom;
  r.node.attr.window.pad_left = d.pad_left;
  r.node.attr.window.pad_right = d.pad_right;
  r.node.attr.window.dilation_h = r.node.attr.window.dilation_w = 1;
  r.node.attr.window.groups = 1;
  r.ceil_mode = d.ceil_mode;
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_max_pool(cnnb_graph *g, const char *name, cnnb_tensor x,
                          const cnnb_pool_desc *desc) {
  return pool(g, CNNB_OP_MAX_POOL, name, x, desc);
}

cnnb_tensor cnnb_avg_pool(cnnb_graph *g, const char *name, cnnb_tensor x,
                          const cnnb_pool_desc *desc) {
  return pool(g, CNNB_OP_AVG_POOL, name, x, desc);
}

cnnb_tensor cnnb_global_avg_pool(cnnb_graph *g, const char *name, cnnb_tensor x) {
  cnnb_op_request r = request(CNNB_OP_GLOBAL_AVG_POOL, name, 1, &x);
  return cnnb_graph_add_op(g, &r);
}

/* ---- normalisation ------------------------------------------------------------------------- */

cnnb_tensor cnnb_batch_norm(cnnb_graph *g, const char *name, cnnb_tensor x,
                            const cnnb_batch_norm_desc *desc) {
  cnnb_op_request r = request(CNNB_OP_BATCH_NORM, name, 1, &x);
  cnnb_batch_norm_desc d = {0};
  if (desc) read_desc(&d, sizeof d, desc); /* NULL: every default */
  r.node.attr.batch_norm.epsilon = d.epsilon != 0.0f ? d.epsilon : 0.001f;
  r.node.attr.batch_norm.decay = d.decay != 0.0f ? d.decay : 0.999f;
  r.node.attr.batch_norm.scale = d.scale ? 1 : 0;
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_layer_norm(cnnb_graph *g, const char *name, cnnb_tensor x, float epsilon) {
  cnnb_op_request r = request(CNNB_OP_LAYER_NORM, name, 1, &x);
  r.node.attr.layer_norm.epsilon = epsilon;
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_channel_scale(cnnb_graph *g, const char *name, cnnb_tensor x, float init) {
  cnnb_op_request r = request(CNNB_OP_CHANNEL_SCALE, name, 1, &x);
  r.init[0] = (cnnb_init){CNNB_INIT_CONSTANT, init};
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_lrn(cnnb_graph *g, const char *name, cnnb_tensor x, const cnnb_lrn_desc *desc) {
  cnnb_op_request r = request(CNNB_OP_LRN, name, 1, &x);
  cnnb_lrn_desc d = {0};
  if (desc) read_desc(&d, sizeof d, desc);
  r.no_desc = !desc;
  r.node.attr.lrn.depth_radius = d.depth_radius;
  r.node.attr.lrn.bias = d.bias;
  r.node.attr.lrn.alpha = d.alpha;
  r.node.attr.lrn.beta = d.beta;
  return cnnb_graph_add_op(g, &r);
}

/* ---- elementwise ------------------------------------------------------------------------- */

cnnb_tensor cnnb_relu(cnnb_graph *g, const char *name, cnnb_tensor x) {
  cnnb_op_request r = request(CNNB_OP_RELU, name, 1, &x);
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_relu6(cnnb_graph *g, const char *name, cnnb_tensor x) {
  cnnb_op_request r = request(CNNB_OP_RELU6, name, 1, &x);
  return cnnb_graph_add_op(g, &r);
}

static cnnb_tensor unary(cnnb_graph *g, uint32_t op, const char *name, cnnb_tensor x) {
  cnnb_op_request r = request(op, name, 1, &x);
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_sigmoid(cnnb_graph *g, const char *name, cnnb_tensor x) {
  return unary(g, CNNB_OP_SIGMOID, name, x);
}

cnnb_tensor cnnb_silu(cnnb_graph *g, const char *name, cnnb_tensor x) {
  return unary(g, CNNB_OP_SILU, name, x);
}

cnnb_tensor cnnb_hard_sigmoid(cnnb_graph *g, const char *name, cnnb_tensor x) {
  return unary(g, CNNB_OP_HARD_SIGMOID, name, x);
}

cnnb_tensor cnnb_hard_swish(cnnb_graph *g, const char *name, cnnb_tensor x) {
  return unary(g, CNNB_OP_HARD_SWISH, name, x);
}

cnnb_tensor cnnb_gelu(cnnb_graph *g, const char *name, cnnb_tensor x, int32_t tanh) {
  cnnb_op_request r = request(CNNB_OP_GELU, name, 1, &x);
  r.node.attr.gelu.tanh = tanh;
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_stochastic_depth(cnnb_graph *g, const char *name, cnnb_tensor x, float drop_prob) {
  cnnb_op_request r = request(CNNB_OP_STOCHASTIC_DEPTH, name, 1, &x);
  r.node.attr.stochastic_depth.drop_prob = drop_prob;
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_dropout(cnnb_graph *g, const char *name, cnnb_tensor x, float keep_prob) {
  cnnb_op_request r = request(CNNB_OP_DROPOUT, name, 1, &x);
  r.node.attr.dropout.keep_prob = keep_prob;
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_add(cnnb_graph *g, const char *name, cnnb_tensor a, cnnb_tensor b) {
  const cnnb_tensor in[2] = {a, b};
  cnnb_op_request r = request(CNNB_OP_ADD, name, 2, in);
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_multiply(cnnb_graph *g, const char *name, cnnb_tensor x, cnnb_tensor gate) {
  const cnnb_tensor in[2] = {x, gate};
  cnnb_op_request r = request(CNNB_OP_MULTIPLY, name, 2, in);
  return cnnb_graph_add_op(g, &r);
}

/* ---- dense ---------------------------------------------------------------------------------- */

cnnb_tensor cnnb_dense(cnnb_graph *g, const char *name, cnnb_tensor x,
                       const cnnb_dense_desc *desc) {
  cnnb_op_request r = request(CNNB_OP_DENSE, name, 1, &x);
  cnnb_dense_desc d = {0};
  if (desc) read_desc(&d, sizeof d, desc);
  r.no_desc = !desc;
  r.node.attr.dense.units = d.units;
  r.node.attr.dense.use_bias = d.use_bias ? 1 : 0;
  r.init[0] = d.weight_init;
  r.init[1] = (cnnb_init){CNNB_INIT_CONSTANT, d.bias_init};
  return cnnb_graph_add_op(g, &r);
}

/* ---- joins and reshapes ------------------------------------------------------------------ */

cnnb_tensor cnnb_concat(cnnb_graph *g, const char *name, int32_t count, const cnnb_tensor *xs) {
  cnnb_op_request r = request(CNNB_OP_CONCAT, name, count, xs);
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_pad_channels(cnnb_graph *g, const char *name, cnnb_tensor x, int32_t before,
                              int32_t after) {
  cnnb_op_request r = request(CNNB_OP_PAD_CHANNELS, name, 1, &x);
  r.node.attr.pad.before = before;
  r.node.attr.pad.after = after;
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_pad_spatial(cnnb_graph *g, const char *name, cnnb_tensor x, int32_t top,
                             int32_t bottom, int32_t left, int32_t right) {
  cnnb_op_request r = request(CNNB_OP_PAD_SPATIAL, name, 1, &x);
  r.node.attr.pad_spatial.top = top;
  r.node.attr.pad_spatial.bottom = bottom;
  r.node.attr.pad_spatial.left = left;
  r.node.attr.pad_spatial.right = right;
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_slice_channels(cnnb_graph *g, const char *name, cnnb_tensor x, int32_t begin,
                                int32_t count) {
  cnnb_op_request r = request(CNNB_OP_SLICE_CHANNELS, name, 1, &x);
  r.node.attr.slice.begin = begin;
  r.node.attr.slice.count = count;
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_channel_shuffle(cnnb_graph *g, const char *name, cnnb_tensor x, int32_t groups) {
  cnnb_op_request r = request(CNNB_OP_CHANNEL_SHUFFLE, name, 1, &x);
  r.node.attr.shuffle.groups = groups;
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_reshape(cnnb_graph *g, const char *name, cnnb_tensor x, int32_t c, int32_t h,
                         int32_t w) {
  cnnb_op_request r = request(CNNB_OP_RESHAPE, name, 1, &x);
  r.node.shape = (cnnb_shape){0, c, h, w};
  return cnnb_graph_add_op(g, &r);
}

cnnb_tensor cnnb_flatten(cnnb_graph *g, const char *name, cnnb_tensor x) {
  cnnb_op_request r = request(CNNB_OP_RESHAPE, name, 1, &x);
  r.auto_base = "flatten";
  r.flatten = 1;
  return cnnb_graph_add_op(g, &r);
}
