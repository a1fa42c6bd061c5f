/* model_info.c — per-layer parameters, FLOPs and activation memory of a graph, and the
 * table `cnnbench --model_info` prints. The counting rules are stated in model_info.h. */
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"
#include "model_info.h"

/* Per image: the output's elements for one image. */
static int64_t per_image(cnnb_shape s) {
  return (int64_t)s.c * s.h * s.w;
}

static void count_node(const cnnb_graph *g, const cnnb_node *n, cnnb_model_layer *l) {
  int64_t out = per_image(n->shape);
  int64_t flops = 0, matmul = 0;
  switch (n->op) {
    case CNNB_OP_CONV2D: {
      cnnb_shape in = cnnb_graph_tensor_shape(g, n->inputs[0]);
      int64_t cin_per_group = in.c / (n->attr.window.groups > 0 ? n->attr.window.groups : 1);
      matmul = 2 * (int64_t)n->attr.window.kernel_h * n->attr.window.kernel_w * cin_per_group * out;
      if (n->attr.window.use_bias) matmul += out;
      flops = matmul;
      break;
    }
    case CNNB_OP_DENSE: {
      int64_t k = per_image(cnnb_graph_tensor_shape(g, n->inputs[0]));
      matmul = 2 * k * n->attr.dense.units;
      if (n->attr.dense.use_bias) matmul += n->attr.dense.units;
      flops = matmul;
      break;
    }
    case CNNB_OP_BATCH_NORM:
      flops = out * (3 + 2 + 1 + (n->attr.batch_norm.scale ? 1 : 0));
      break;
    case CNNB_OP_RELU:
    case CNNB_OP_ADD:
      flops = out;
      break;
    case CNNB_OP_RELU6: /* max, then min */
    case CNNB_OP_DROPOUT:
      flops = 2 * out;
      break;
    case CNNB_OP_MAX_POOL:
      flops = out * n->attr.window.kernel_h * n->attr.window.kernel_w;
      break;
    case CNNB_OP_AVG_POOL:
      flops = out * ((int64_t)n->attr.window.kernel_h * n->attr.window.kernel_w + 1);
      break;
    case CNNB_OP_GLOBAL_AVG_POOL: {
      cnnb_shape in = cnnb_graph_tensor_shape(g, n->inputs[0]);
      flops = (int64_t)in.c * ((int64_t)in.h * in.w + 1);
      break;
    }
    case CNNB_OP_LRN:
      flops = out * (2 * (2 * (int64_t)n->attr.lrn.depth_radius + 1) + 4);
      break;
    case CNNB_OP_SOFTMAX_XENT:
      flops = 4 * per_image(cnnb_graph_tensor_shape(g, n->inputs[0])) + 1;
      break;
    default: /* input, labels, concat, pad_channels, reshape: data movement only */
      break;
  }
  if (n->fused_relu &&
      (n->op == CNNB_OP_CONV2D || n->op == CNNB_OP_BATCH_NORM || n->op == CNNB_OP_ADD))
    flops += out;
  l->flops = flops;
  l->flops_matmul = matmul;
  /* The loss is one scalar for the whole batch, not a per-image activation. */
  l->activation_bytes = n->op == CNNB_OP_SOFTMAX_XENT ? 0 : out * (int64_t)sizeof(float);
  l->params = 0;
  for (int32_t i = 0; i < n->num_params; i++) {
    const cnnb_param *p = cnnb_graph_param(g, n->params[i]);
    if (p && !p->is_stat) l->params += p->count;
  }
}

cnnb_status cnnb_model_info_compute(const cnnb_graph *g, cnnb_model_report *out) {
  if (!out) return CNNB_EINVAL;
  memset(out, 0, sizeof *out);
  if (!g) return CNNB_EINVAL;
  if (cnnb_graph_status(g) != CNNB_OK) return cnnb_graph_status(g);
  int32_t count = cnnb_graph_num_nodes(g);
  out->layers = calloc((size_t)(count > 0 ? count : 1), sizeof *out->layers);
  if (!out->layers) return CNNB_ENOMEM;
  out->num_layers = count;
  for (int32_t i = 0; i < count; i++) {
    const cnnb_node *n = cnnb_graph_node(g, i);
    cnnb_model_layer *l = &out->layers[i];
    l->name = n->name;
    l->op = cnnb_op_name(n->op);
    l->node = i;
    l->shape = n->shape;
    count_node(g, n, l);
    out->flops += l->flops;
    out->flops_matmul += l->flops_matmul;
    out->activation_bytes += l->activation_bytes;
  }
  out->trainable_params = cnnb_graph_param_arena_count(g);
  out->stat_count = cnnb_graph_stat_arena_count(g);
  return CNNB_OK;
}

void cnnb_model_report_free(cnnb_model_report *r) {
  if (!r) return;
  free(r->layers);
  memset(r, 0, sizeof *r);
}

void cnnb_model_info_print(const cnnb_graph *g, const cnnb_model_report *r, FILE *out) {
  (void)g; /* the report carries everything; the graph stays in the signature for later columns */
  int name_width = 5;
  for (int32_t i = 0; i < r->num_layers; i++) {
    int len = (int)strlen(r->layers[i].name);
    if (len > name_width) name_width = len;
  }
  if (name_width > 60) name_width = 60;
  fprintf(out, "%-*s  %-15s  %-18s  %12s  %12s\n", name_width, "Layer", "Op", "Output [C, H, W]",
          "Params", "Fwd MFLOPs");
  for (int32_t i = 0; i < r->num_layers; i++) {
    const cnnb_model_layer *l = &r->layers[i];
    char shape[48];
    snprintf(shape, sizeof shape, "[%d, %d, %d]", l->shape.c, l->shape.h, l->shape.w);
    fprintf(out, "%-*.*s  %-15s  %-18s  %12lld  %12.3f\n", name_width, name_width, l->name, l->op,
            shape, (long long)l->params, (double)l->flops / 1e6);
  }
  fprintf(out, "Trainable parameters: %lld\n", (long long)r->trainable_params);
  fprintf(out, "Forward GFLOPs per image: %.3f\n", (double)r->flops_matmul / 1e9);
  fprintf(out, "Activation memory per image (training): %.1f MiB\n",
          (double)r->activation_bytes / (1024.0 * 1024.0));
}
