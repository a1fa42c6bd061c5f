/* model_info.c — per-layer parameters, FLOPs and activation memory of a graph, and the
 * table `cnnbench --model_info` prints. The counting rules are stated in model_info.h;
 * each op's FLOPs are its row's rule in the op table (op_table.c). */
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "graph/model_info.h"
#include "graph/op_table.h"

static void count_node(const cnnb_graph *g, const cnnb_node *n, cnnb_model_layer *l) {
  const cnnb_node *first = n->num_inputs > 0 ? cnnb_graph_node(g, n->inputs[0]) : NULL;
  cnnb_op_flops(first ? first->shape : (cnnb_shape){0, 0, 0, 0}, n, &l->flops, &l->flops_matmul);
  const cnnb_op_row *row = cnnb_op_row_of(n->op);
  /* The loss (a scalar_output row) is one value for the whole batch, not a per-image
   * activation. */
  int64_t out = (int64_t)n->shape.c * n->shape.h * n->shape.w;
  l->activation_bytes = row && row->scalar_output ? 0 : out * (int64_t)sizeof(float);
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
  out->trainable_params = cnnb_graph_trainable_count(g);
  out->stat_count = cnnb_graph_values_count(g, true);
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
