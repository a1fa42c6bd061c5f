/* model_graph.c — the model's graph built at a batch size, and the ReLUs fused into the
 * ops before them (model_graph.h). */
#include "run/model_graph.h"

#include <stdio.h>

#include "exec/plan.h"
#include "graph/graph_internal.h"
#include "graph/op_device.h"

cnnb_status cnnb_model_graph_build(cnnb_run *run, int32_t batch, cnnb_graph **out) {
  const cnnb_bound_plugin *model = &run->facts.model;
  const cnnb_run_facts *f = &run->facts;
  cnnb_graph *g = *out = cnnb_graph_create(batch, run->cfg->dataset->channels, f->image_size,
                                           f->image_size, f->num_classes);
  if (!g) return cnnb_error(run->ctx, CNNB_ENOMEM, "out of memory for the graph");
  cnnb_status st;
  CNNB_GUARDED(model->label, "build", model->name,
               st = model->vt.model->build(model->ctx, model->name, run->cfg->dataset->kind, g));
  char what[512];
  snprintf(what, sizeof what, "building model %s (%s)", model->name, model->label);
  if (st != CNNB_OK) {
    /* The model's message, or the builder's when the model only passed its status on. */
    if (!*cnnb_error_message(model->ctx) && cnnb_graph_status(g) != CNNB_OK)
      return cnnb_error(run->ctx, st, "%s: %s", what, cnnb_graph_error(g));
    return cnnb_plugin_failed(run->ctx, model, st, model->ctx, what);
  }
  if (cnnb_graph_status(g) != CNNB_OK)
    return cnnb_error(run->ctx, cnnb_graph_status(g), "%s: %s", what, cnnb_graph_error(g));
  if (cnnb_graph_logits(g) == CNNB_NO_TENSOR)
    return cnnb_error(run->ctx, CNNB_EINVAL,
                      "%s: it returned OK without setting its logits (cnnb_graph_set_logits)",
                      what);
  /* The loss is added even for forward-only runs: it costs one small node and lets the
   * report print total_loss as tf_cnn_benchmarks does. */
  st = cnnb_graph_add_loss(g);
  if (st == CNNB_OK && run->cfg->label_smoothing > 0.0f)
    st = cnnb_graph_set_label_smoothing(g, run->cfg->label_smoothing);
  if (st != CNNB_OK) return cnnb_error(run->ctx, st, "%s: %s", what, cnnb_graph_error(g));
  return CNNB_OK;
}

void cnnb_model_graph_fuse_relus(cnnb_run *run, cnnb_graph *graph) {
  const cnnb_bound_plugin *device = &run->facts.device;
  uint32_t ops = ~0u;
  CNNB_GUARDED(device->label, "get_extension", NULL, {
    for (int32_t i = 0; i < run->facts.replicas; i++)
      ops &= cnnb_ops_device_relu_fusion(device->plugin, device->vt.device,
                                         run->replicas[i].device);
  });
  int32_t fused = cnnb_plan_fuse_relus(graph, ops);
  cnnb_log(run->ctx, CNNB_LOG_DEBUG, "%d ReLUs fused into the op before them", fused);
}

cnnb_status cnnb_model_graph_build_fused(cnnb_run *run, int32_t batch, cnnb_graph **out) {
  cnnb_status st = cnnb_model_graph_build(run, batch, out);
  if (st == CNNB_OK) cnnb_model_graph_fuse_relus(run, *out);
  return st;
}
