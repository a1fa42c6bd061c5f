/* ops_reshape.c — ops that only move data: the graph's sources (input images and
 * labels, filled by tensor_from_host, so their kernels do nothing) and reshape/flatten.
 *
 * Reshape keeps the logical NCHW element order (graph.h), so its output is plain NCHW:
 * a blocked input is converted on the way (and the gradient converted back); a plain one
 * is a copy. */
#include <stdlib.h>

#include "cpu_device.h"

static cnnb_status source_pass(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  return CNNB_OK;
}

static void source_release(cpu_device *d, cpu_node *n) { free(n); }

static const cpu_node_ops source_ops = {source_pass, source_pass, source_release};

cnnb_status cpu_prepare_source(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                               cpu_node **out) {
  cpu_node *n = calloc(1, sizeof *n);
  if (!n) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *n, "its state");
  cpu_node_init(n, &source_ops, g, p, index);
  *out = n;
  return CNNB_OK;
}

typedef struct reshape_node {
  cpu_node base;
  cpu_xform to_plain;   /* input layout -> plain NCHW (the output's bytes) */
  cpu_xform from_plain; /* output gradient -> input gradient layout */
} reshape_node;

static cnnb_status reshape_forward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  reshape_node *r = (reshape_node *)n;
  return cpu_xform_run(d, &r->to_plain, io->inputs[0], io->output, n->node);
}

static cnnb_status reshape_backward(cpu_device *d, cpu_node *n, const cnnb_node_io *io) {
  reshape_node *r = (reshape_node *)n;
  if (!io->input_grads[0]) return CNNB_OK;
  return cpu_xform_run(d, &r->from_plain, io->output_grad, io->input_grads[0], n->node);
}

static void reshape_release(cpu_device *d, cpu_node *n) {
  reshape_node *r = (reshape_node *)n;
  cpu_xform_fini(&r->to_plain);
  cpu_xform_fini(&r->from_plain);
  free(r);
}

static const cpu_node_ops reshape_ops = {reshape_forward, reshape_backward, reshape_release};

cnnb_status cpu_prepare_reshape(cpu_device *d, const cnnb_graph *g, cpu_plan *p, int32_t index,
                                cpu_node **out) {
  reshape_node *r = calloc(1, sizeof *r);
  if (!r) return cpu_oom(d, cnnb_graph_node(g, index), sizeof *r, "its state");
  cpu_node_init(&r->base, &reshape_ops, g, p, index);
  const cnnb_node *node = r->base.node;
  cnnb_tensor in = node->inputs[0];
  if (cnnb_shape_count(cnnb_graph_node(g, in)->shape) != cnnb_shape_count(node->shape)) {
    free(r);
    return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: reshape '%s': %lld elements in, %lld out",
                      node->name, (long long)cnnb_shape_count(cnnb_graph_node(g, in)->shape),
                      (long long)cnnb_shape_count(node->shape));
  }
  dnnl_memory_desc_t plain = cpu_md_nchw(cnnb_graph_node(g, in)->shape, p->md[in].data_type);
  cnnb_status st = cpu_xform_init(d, &r->to_plain, &p->md[in], &plain, node, "reshape input");
  if (!st && d->cfg.training)
    st = cpu_xform_init(d, &r->from_plain, &plain, &p->md[in], node, "reshape gradient");
  if (st) {
    reshape_release(d, &r->base);
    return st;
  }
  *out = &r->base;
  return CNNB_OK;
}
