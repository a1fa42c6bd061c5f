/* layouts.c — the layout rules several op families share (the op table, ops.c, names
 * each op's rule; the plan, plan.c, calls them in node order through the op table).
 * They live apart from the plan because the plan calls into the op table: rules kept in
 * plan.c made the two files need each other's symbols. */
#include "cpu_device.h"

/* Plain NCHW in the activation type: the images, and what dense and reshape write. */
cnnb_status cpu_layout_plain(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t i,
                             dnnl_memory_desc_t *out) {
  *out = cpu_md_nchw(cnnb_graph_node(g, i)->shape, d->act_dt);
  return CNNB_OK;
}

/* The input's layout: ops that keep their input's shape keep its layout too. */
cnnb_status cpu_layout_same(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t i,
                            dnnl_memory_desc_t *out) {
  *out = p->md[cnnb_graph_node(g, i)->inputs[0]];
  return CNNB_OK;
}

/* Class ids: plain int32. */
cnnb_status cpu_layout_labels(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t i,
                              dnnl_memory_desc_t *out) {
  *out = cpu_md_nchw(cnnb_graph_node(g, i)->shape, dnnl_s32);
  return CNNB_OK;
}

/* Plain fp32 whatever the precision: the loss the host reads. */
cnnb_status cpu_layout_f32(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t i,
                           dnnl_memory_desc_t *out) {
  *out = cpu_md_nchw(cnnb_graph_node(g, i)->shape, dnnl_f32);
  return CNNB_OK;
}
