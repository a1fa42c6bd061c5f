/* plan.c — the per-graph layout plan of the cpu device: one oneDNN memory descriptor per
 * tensor, chosen in node order (a node's inputs are always earlier nodes), and the
 * conversions between those layouts and the logical NCHW the host sees.
 *
 * Who decides a tensor's layout: its producer, through its layout rule in the op table
 * (ops.c). A convolution or a pool asks oneDNN for its preferred output layout; ops that
 * keep their input's shape (batch norm, relu, relu6, LRN, dropout, add) keep its layout
 * too, so a chain conv -> bn -> relu -> conv never converts; pad_channels keeps its
 * input's layout (more channels) where oneDNN's concat can write it, else goes plain;
 * dense, reshape and the loss produce plain NCHW.
 * tensor_bytes, prepare and the host conversions all read the same plan, so they always
 * agree. */
#include <stdlib.h>
#include <string.h>

#include "cpu_device.h"

static uint64_t fingerprint(const cnnb_graph *g) {
  uint64_t h = 1469598103934665603ull;
  int32_t n = cnnb_graph_num_nodes(g);
#define MIX(v) (h = (h ^ (uint64_t)(uint32_t)(v)) * 1099511628211ull)
  MIX(n);
  for (int32_t i = 0; i < n; i++) {
    const cnnb_node *node = cnnb_graph_node(g, i);
    MIX(node->op);
    MIX(node->shape.n);
    MIX(node->shape.c);
    MIX(node->shape.h);
    MIX(node->shape.w);
    MIX(node->num_inputs);
    for (int32_t k = 0; k < node->num_inputs; k++) MIX(node->inputs[k]);
    /* A pad's layout is the one oneDNN's concat accepts at its channel offsets. */
    if (node->op == CNNB_OP_PAD_CHANNELS) MIX(node->attr.pad.before);
    /* Not fused_relu: the planner may fuse ReLUs between tensor_bytes and prepare, and
     * layouts do not depend on it; the sizes already given must stay true. */
  }
#undef MIX
  return h;
}

static cnnb_status layout_of(cpu_device *d, const cnnb_graph *g, const cpu_plan *p, int32_t i,
                             dnnl_memory_desc_t *out) {
  const cnnb_node *n = cnnb_graph_node(g, i);
  for (int32_t k = 0; k < n->num_inputs; k++)
    if (n->inputs[k] < 0 || n->inputs[k] >= i)
      return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: node '%s' reads tensor %d, not an earlier node",
                        n->name, n->inputs[k]);
  const cpu_op *op = cpu_op_find(n->op);
  if (!op)
    return cnnb_error(d->ctx, CNNB_EUNSUPPORTED, "cpu: node '%s': op %u is not supported", n->name,
                      n->op);
  return op->layout(d, g, p, i, out);
}

static void plan_free(cpu_plan *p) {
  if (!p) return;
  if (p->io)
    for (int32_t i = 0; i < p->num_nodes; i++) {
      cpu_xform_fini(&p->io[i].to_device);
      cpu_xform_fini(&p->io[i].to_host);
    }
  free(p->io);
  free(p->md);
  free(p);
}

void cpu_plans_free(cpu_device *d) {
  while (d->plans) {
    cpu_plan *next = d->plans->next;
    plan_free(d->plans);
    d->plans = next;
  }
}

cnnb_status cpu_plan_get(cpu_device *d, const cnnb_graph *g, cpu_plan **out) {
  if (!g) return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: no graph");
  uint64_t fp = fingerprint(g);
  for (cpu_plan **pp = &d->plans; *pp; pp = &(*pp)->next) {
    if ((*pp)->g != g) continue;
    if ((*pp)->fingerprint == fp) {
      *out = *pp;
      return CNNB_OK;
    }
    /* Same address, different graph (the old one was destroyed, or edited, e.g. ReLUs
     * fused after sizing): the plan is stale. Node states prepared with it may still
     * point at it, so it stays allocated, unmatchable, until the device goes. */
    (*pp)->g = NULL;
    break;
  }
  int32_t n = cnnb_graph_num_nodes(g);
  if (n <= 0) return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: graph has no nodes");
  cpu_plan *p = calloc(1, sizeof *p);
  if (p) {
    p->md = calloc((size_t)n, sizeof *p->md);
    p->io = calloc((size_t)n, sizeof *p->io);
  }
  if (!p || !p->md || !p->io) {
    plan_free(p);
    return cpu_oom(d, NULL, 0, "the layout plan of %d nodes", n);
  }
  p->g = g;
  p->fingerprint = fp;
  p->num_nodes = n;
  for (int32_t i = 0; i < n; i++) {
    cnnb_status st = layout_of(d, g, p, i, &p->md[i]);
    if (st) {
      plan_free(p);
      return st;
    }
    char name[64];
    const cnnb_node *node = cnnb_graph_node(g, i);
    cnnb_log(d->ctx, CNNB_LOG_DEBUG, "layout %s [%d,%d,%d,%d]: %s", node->name, node->shape.n,
             node->shape.c, node->shape.h, node->shape.w,
             cpu_md_name(&p->md[i], name, sizeof name));
  }
  p->next = d->plans;
  d->plans = p;
  *out = p;
  return CNNB_OK;
}

static cnnb_status host_io(cpu_device *d, cpu_plan *p, cnnb_tensor t, cpu_host_io **out) {
  if (t < 0 || t >= p->num_nodes)
    return cnnb_error(d->ctx, CNNB_EINVAL, "cpu: tensor %d is not in the graph (%d nodes)", t,
                      p->num_nodes);
  cpu_host_io *io = &p->io[t];
  if (!io->ready) {
    const cnnb_node *node = cnnb_graph_node(p->g, t);
    dnnl_memory_desc_t host = cpu_md_nchw(node->shape,
                                          node->op == CNNB_OP_LABELS ? dnnl_s32 : dnnl_f32);
    cnnb_status st = cpu_xform_init(d, &io->to_device, &host, &p->md[t], node, "host to device");
    if (!st) st = cpu_xform_init(d, &io->to_host, &p->md[t], &host, node, "device to host");
    if (st) {
      cpu_xform_fini(&io->to_device);
      cpu_xform_fini(&io->to_host);
      return st;
    }
    io->ready = 1;
  }
  *out = io;
  return CNNB_OK;
}

cnnb_status cpu_tensor_from_host(cpu_device *d, cpu_plan *p, cnnb_tensor t, void *buffer,
                                 const void *host) {
  cpu_host_io *io;
  cnnb_status st = host_io(d, p, t, &io);
  if (st) return st;
  return cpu_xform_run(d, &io->to_device, host, buffer, cnnb_graph_node(p->g, t));
}

cnnb_status cpu_tensor_to_host(cpu_device *d, cpu_plan *p, cnnb_tensor t, const void *buffer,
                               void *host) {
  cpu_host_io *io;
  cnnb_status st = host_io(d, p, t, &io);
  if (st) return st;
  return cpu_xform_run(d, &io->to_host, buffer, host, cnnb_graph_node(p->g, t));
}
